"""A worker process on the PostgreSQL backend, driven line by line (test_postgres_workers.py and
benchmarks/bench_postgres.py).

    python pg_worker.py DSN

opens a harness on a scripted model with ``PostgresPersistence`` on ``DSN`` and the ``effect``
tool, prints ``ready PID``, then obeys one command per stdin line:

* ``acquire SID`` claims the session: ``acquired SID`` or ``busy SID PID HOST``;
* ``take SID`` claims it, trying again every 10 ms while another worker holds it (a takeover):
  ``acquired SID SECONDS`` (how long it waited);
* ``create SID`` / ``resume SID`` opens the agent on it (claiming it first, as
  ``ctx.agents.create/resume`` do, unless ``acquire`` already did): ``agent SID`` or
  ``busy SID PID HOST``, and for a resume ``repaired CODE`` for each call the crash repair
  closed;
* ``send TEXT`` queues a prompt; a prompt ``tool:...`` makes the model call ``effect``, a tool
  with effects: the loop's write-ahead flush stores its ``tool/call`` before the body runs, and
  the body prints ``in-tool`` and hangs;
* ``close`` disposes the agent (``closed``); ``quit`` ends the process.

It reports ``prompt TEXT`` for every prompt its agent logs, ``turn-end N REASON`` once a turn
ended and its flush returned,
``agent-error TYPE`` for each ``agent/error`` and ``lost`` when its lease connection ends. Every
line goes out in one ``os.write``, so a SIGKILL leaves whole lines only.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time

import trio

from trio_agent.agent import AgentHandle, AgentRegistry
from trio_agent.llm import GenerateRequest, ToolResultBlock
from trio_agent.persistence import PostgresPersistence, SessionBusyError
from trio_agent.session import ToolResultEvent, UserMessageEvent
from trio_agent.testing import ScriptedResponse, open_test_harness, text, tool_call
from trio_agent.tools import tool


def say(line: str) -> None:
    data = (line + "\n").encode()
    assert len(data) <= 4096, line
    os.write(sys.stdout.fileno(), data)


def model(request: GenerateRequest) -> ScriptedResponse:
    last = request.messages[-1]
    if any(isinstance(block, ToolResultBlock) for block in last.content):
        return text("the tool finished")
    if last.text.startswith("tool:"):
        return tool_call("call-effect", "effect", {"what": last.text})
    return text(f"echo {last.text}")


@tool
async def effect(what: str) -> str:
    """Do something with an effect (it never finishes: the test kills the worker here)."""
    say("in-tool")
    await trio.sleep_forever()


class LeaseLoss(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if "lease connection of this worker ended" in record.getMessage():
            say("lost")


async def read_lines(send: trio.MemorySendChannel[str]) -> None:
    """Send each stdin line to ``send``; close it at end of input."""
    stream = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    buffer = b""
    async with send, stream:
        while data := await stream.receive_some():
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                await send.send(line.decode())


async def main(dsn: str) -> None:
    logging.getLogger("trio_agent.persistence").addHandler(LeaseLoss(logging.ERROR))
    config = PostgresPersistence.Config(dsn=dsn)
    async with (
        open_test_harness(
            [model] * 1000,
            tools=[effect],
            persistence=PostgresPersistence,
            persistence_config=config,
        ) as h,
        trio.open_nursery() as nursery,
    ):
        send, commands = trio.open_memory_channel[str](100)
        nursery.start_soon(read_lines, send)
        persistence = h.ctx.require(PostgresPersistence)
        agents = h.ctx.require(AgentRegistry)
        handle: list[AgentHandle] = []

        def report(handle: AgentHandle) -> None:
            agent = handle.agent
            seen = len(agent.session.events)
            for event in agent.session.events:
                if (
                    event.type == "tool/result"
                    and event.data.get("turn") == agent.session.last_turn
                ):
                    result = event.payload_as(ToolResultEvent).result
                    if result.code in ("INTERRUPTED", "TOOL_OUTCOME_UNKNOWN"):
                        say(f"repaired {result.code}")

            def on_event(payload: object) -> None:
                event = payload.event  # type: ignore[attr-defined]
                if event.seq >= seen and event.type == "user/message":
                    say(f"prompt {event.payload_as(UserMessageEvent).message.text}")

            agent.ctx.on("session/event", on_event)

            async def turn_ended(turn: int, reason: str) -> None:
                await agent.wait_idle()  # the turn's flush has returned
                say(f"turn-end {turn} {reason}")

            agent.ctx.on(
                "agent/turn-end", lambda e: nursery.start_soon(turn_ended, e.turn, e.reason)
            )
            agent.ctx.on("agent/error", lambda e: say(f"agent-error {type(e.error).__name__}"))

        say(f"ready {os.getpid()}")
        async for line in commands:
            command, _, arg = line.partition(" ")
            try:
                if command == "acquire":
                    await persistence.acquire(arg)
                    say(f"acquired {arg}")
                elif command == "take":
                    started = time.monotonic()
                    with trio.fail_after(60):
                        while True:
                            try:
                                await persistence.acquire(arg)
                                break
                            except SessionBusyError:
                                await trio.sleep(0.01)
                    say(f"acquired {arg} {time.monotonic() - started:.4f}")
                elif command == "create":
                    handle.append(await agents.create(agent_id="a", session_id=arg))
                    report(handle[-1])
                    say(f"agent {arg}")
                elif command == "resume":
                    handle.append(await agents.resume(agent_id="a", resume_session_id=arg))
                    report(handle[-1])
                    say(f"agent {arg}")
                elif command == "send":
                    handle[-1].agent.send(arg)
                elif command == "close":
                    await handle.pop().aclose()
                    say("closed")
                elif command == "quit":
                    break
            except SessionBusyError as exc:
                say(f"busy {exc.session_id} {exc.pid} {exc.host}")
        nursery.cancel_scope.cancel()
    say(f"bye {socket.gethostname()}")


if __name__ == "__main__":
    trio.run(main, sys.argv[1])
