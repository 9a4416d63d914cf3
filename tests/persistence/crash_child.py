"""The child of the crash test (driven by test_persistence_crash.py, which SIGKILLs it).

    python crash_child.py DIR SESSION_ID

runs one child: it opens a runtime on the scripted model with ``JsonlPersistence`` on ``DIR``,
resumes session ``SESSION_ID`` (or creates it), then runs turns forever. Each turn calls the
``work`` tool, whose body flushes the session first (a mid-turn checkpoint, so a kill can leave
an open turn on disk), and the loop flushes again at the turn end. Progress goes to stdout, one
line each: ``ready LAST_TURN``, ``start K`` before turn K, ``checkpoint K`` after the tool's
flush, ``flushed K`` once turn K is durable.

    python crash_child.py --serve DIR SESSION_ID

is a fork server, so each child starts in milliseconds instead of re-importing everything: for
each ``run`` line on stdin it forks a child (printing ``pid PID``); ``reap PID`` waits for that
child to be gone and prints ``reaped PID``; end of input stops the server.
"""

from __future__ import annotations

import os
import sys

import trio

from trio_agent.persistence import JsonlPersistence
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ToolCallContext, tool


def say(line: str) -> None:
    print(line, flush=True)


def answer_pieces(turn: int) -> list[str]:
    """The streamed pieces of turn ``turn``'s answer (many, so a turn's write takes a while)."""
    return [f"answer {turn}", *(f" part {i}" for i in range(40))]


@tool
async def work(n: int, *, call: ToolCallContext) -> str:
    """Do turn ``n``'s work (after a checkpoint)."""
    agent = call.agent
    assert agent is not None
    await agent.ctx.sessions.flush(agent.session)  # type: ignore[attr-defined]
    say(f"checkpoint {n}")
    return f"done {n}"


async def main(directory: str, session_id: str) -> None:
    async with open_test_harness(
        tools=[work],
        persistence=JsonlPersistence,
        persistence_config=JsonlPersistence.Config(path=directory),
    ) as h:
        ctx = h.ctx

        def failed(event: object) -> None:
            say(f"error {event!r}")
            os._exit(1)

        ctx.on("agent/error", failed)
        if await ctx.session_persistence.exists(session_id):
            handle = await ctx.agents.resume(agent_id="a", resume_session_id=session_id)
        else:
            handle = await ctx.agents.create(agent_id="a", session_id=session_id)
        agent = handle.agent
        say(f"ready {agent.session.last_turn}")
        while True:
            turn = agent.session.last_turn + 1
            h.model.push(tool_call(f"c{turn}", "work", {"n": turn}), text(*answer_pieces(turn)))
            say(f"start {turn}")
            agent.send(f"prompt {turn}")
            await agent.wait_idle()
            say(f"flushed {turn}")


def serve(directory: str, session_id: str) -> None:
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "run":
            pid = os.fork()
            if pid == 0:
                try:
                    trio.run(main, directory, session_id)
                finally:
                    os._exit(1)
            say(f"pid {pid}")
        elif command == "reap":
            os.waitpid(int(argument), 0)
            say(f"reaped {argument}")


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3])
    else:
        trio.run(main, sys.argv[1], sys.argv[2])
