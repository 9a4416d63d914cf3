"""One writer process of the one-writer test (driven by test_persistence_writers.py).

    python writer_child.py jsonl|sqlite ROOT SESSION_ID

Resumes session ``SESSION_ID`` from the backend in ``ROOT`` (the layout of
``persistence_helpers``) on the scripted model. If another process holds it, prints
``busy PID`` (0 when the holder is unknown) and exits with status 3. Otherwise prints
``holding PID`` and runs one turn per ``turn`` line on stdin, printing ``done TURN`` once the
turn is over (and flushed); end of input closes the agent and exits 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import trio
from persistence_helpers import JSONL, SQLITE

from trio_agent.persistence import SessionBusyError
from trio_agent.testing import open_test_harness, text


def say(line: str) -> None:
    os.write(sys.stdout.fileno(), (line + "\n").encode())


async def main(kind_name: str, root: str, session_id: str) -> int:
    kind = {"jsonl": JSONL, "sqlite": SQLITE}[kind_name]
    async with open_test_harness(
        persistence=kind.plugin, persistence_config=kind.config(Path(root))
    ) as h:
        try:
            handle = await h.ctx.agents.resume(agent_id="a", resume_session_id=session_id)
        except SessionBusyError as exc:
            say(f"busy {exc.pid or 0}")
            return 3
        say(f"holding {os.getpid()}")
        async with handle, trio.lowlevel.FdStream(os.dup(sys.stdin.fileno())) as stdin:
            agent = handle.agent
            buffer = b""
            while True:
                while b"\n" not in buffer:
                    data = await stdin.receive_some()
                    if not data:
                        return 0
                    buffer += data
                _, buffer = buffer.split(b"\n", 1)
                turn = agent.session.last_turn + 1
                h.model.push(text(f"answer {turn}"))
                agent.send(f"prompt {turn}")
                await agent.wait_idle()
                say(f"done {turn}")


if __name__ == "__main__":
    kind_name, root, session_id = sys.argv[1:4]
    sys.exit(trio.run(main, kind_name, root, session_id))
