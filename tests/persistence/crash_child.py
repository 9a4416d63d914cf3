"""The child of the crash test (driven by test_persistence_crash.py, which SIGKILLs it).

    python crash_child.py --serve jsonl|sqlite ROOT SESSION_ID MARKERS

is a fork server, so each child starts in milliseconds instead of re-importing everything: for
each ``run`` line on stdin it forks a child (printing ``pid PID``); ``reap PID`` waits for that
child to be gone and prints ``reaped PID``; end of input stops the server.

A child opens a runtime on the scripted model with the backend in ``ROOT`` (the layout of
``persistence_helpers``), resumes session ``SESSION_ID`` (or creates it), then runs turns
forever, each of three steps with the default durability (``"step"``):

1. ``mark`` (a tool with effects, alone), then two ``look`` calls (read-only, run together);
2. two ``mark_safe`` calls (effects, concurrency-safe) and a ``look``, run together with one
   write-ahead flush for all three;
3. the answer, streamed in pieces.

The ``mark`` tools create ``MARKERS/<call id>`` (exclusively: a call run twice would fail), then
say so and keep running a little, which is the window a kill should land in. Progress lines:
``ready LAST_TURN``, ``start TURN``, ``step TURN STEP`` (at ``agent/step-start``: by then the
turn's prompt and the previous step's ``step/end`` are durable), ``marking CALL_ID`` and
``looking CALL_ID`` (inside those bodies), ``flushed TURN`` once the turn is durable.

The server and its children share one stdout pipe, and a child can be SIGKILLed while it
reports. So every line goes out in one ``os.write`` of at most ``PIPE_BUF`` bytes, which a pipe
delivers whole or not at all: a killed child leaves whole lines only, never half a line for the
server's next ``reaped`` to run into. (``print`` does not promise that: unbuffered, as under
``PYTHONUNBUFFERED``, it writes the text and the newline in two calls.)
"""

from __future__ import annotations

import os
import random
import select
import sys
from pathlib import Path

import trio
from persistence_helpers import JSONL, SQLITE

from trio_agent.agent import StepStarted
from trio_agent.testing import open_test_harness, text, tool_call
from trio_agent.tools import ToolCallContext, tool

#: Where the ``mark`` tools leave their files (set by :func:`main`).
MARKERS = [Path()]


def say(line: str) -> None:
    """Write ``line`` to stdout atomically (one write, at most ``PIPE_BUF`` bytes)."""
    data = (line + "\n").encode()
    assert len(data) <= select.PIPE_BUF, line
    written = os.write(sys.stdout.fileno(), data)
    assert written == len(data)  # a blocking pipe write of <= PIPE_BUF bytes is all or nothing


def answer_pieces(turn: int) -> list[str]:
    """The streamed pieces of turn ``turn``'s answer."""
    return [f"answer {turn}", *(f" part {i}" for i in range(10))]


def script(turn: int) -> list[object]:
    """What the model answers in turn ``turn``: the three steps of the module docs."""
    return [
        tool_call(f"t{turn}-a", "mark")
        + tool_call(f"t{turn}-r1", "look")
        # Two read-only calls run together after the barrier.
        + tool_call(f"t{turn}-r2", "look"),
        # Run together: the read-only call's tool/call is on disk with the others'.
        tool_call(f"t{turn}-b", "mark_safe")
        + tool_call(f"t{turn}-c", "mark_safe")
        + tool_call(f"t{turn}-r3", "look"),
        text(*answer_pieces(turn)),
    ]


async def leave_marker(call_id: str) -> None:
    await (trio.Path(MARKERS[0]) / call_id).touch(exist_ok=False)
    say(f"marking {call_id}")


@tool
async def mark(*, call: ToolCallContext) -> str:
    """Leave a marker (an effect), then work a while."""
    await leave_marker(call.call_id)
    await trio.sleep(0.03)
    return "marked"


@tool(concurrency_safe=True)
async def mark_safe(*, call: ToolCallContext) -> str:
    """Leave a marker (an effect that may run beside others), then work a little."""
    await leave_marker(call.call_id)
    await trio.sleep(random.uniform(0, 0.003))
    return "marked"


@tool(concurrency_safe=True, read_only=True)
async def look(*, call: ToolCallContext) -> str:
    """Only read, for a while."""
    say(f"looking {call.call_id}")
    await trio.sleep(0.01)
    return "looked"


async def main(kind_name: str, root: str, session_id: str, markers: str) -> None:
    MARKERS[0] = Path(markers)
    kind = {"jsonl": JSONL, "sqlite": SQLITE}[kind_name]
    async with open_test_harness(
        tools=[mark, mark_safe, look],
        persistence=kind.plugin,
        persistence_config=kind.config(Path(root)),
    ) as h:
        ctx = h.ctx

        def failed(event: object) -> None:
            say(f"error {event!r}"[:200])
            os._exit(1)

        ctx.on("agent/error", failed)
        if await ctx.session_persistence.exists(session_id):
            handle = await ctx.agents.resume(agent_id="a", resume_session_id=session_id)
        else:
            handle = await ctx.agents.create(agent_id="a", session_id=session_id)
        agent = handle.agent

        def stepped(event: StepStarted) -> None:
            say(f"step {event.turn} {event.step}")

        agent.ctx.on("agent/step-start", stepped)
        say(f"ready {agent.session.last_turn}")
        while True:
            turn = agent.session.last_turn + 1
            h.model.push(*script(turn))  # type: ignore[arg-type]
            say(f"start {turn}")
            agent.send(f"prompt {turn}")
            await agent.wait_idle()
            say(f"flushed {turn}")


def serve(kind: str, root: str, session_id: str, markers: str) -> None:
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "run":
            pid = os.fork()
            if pid == 0:
                try:
                    trio.run(main, kind, root, session_id, markers)
                finally:
                    os._exit(1)
            say(f"pid {pid}")
        elif command == "reap":
            os.waitpid(int(argument), 0)
            say(f"reaped {argument}")


if __name__ == "__main__":
    assert sys.argv[1] == "--serve"
    serve(*sys.argv[2:6])
