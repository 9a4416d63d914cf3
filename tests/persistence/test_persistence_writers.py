"""One session, one writer, across real processes: two resume at once and exactly one runs; a
SIGKILLed holder never blocks the next one."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from persistence_helpers import JSONL, SQLITE, BackendKind

from trio_agent.session import TurnEnd, repair_events
from trio_agent.testing import open_test_harness, text

CHILD = Path(__file__).with_name("writer_child.py")
CLI = Path(sys.executable).parent / "trio-agent"


class Writer:
    """A ``writer_child.py`` process and its progress lines."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.buffer = b""

    @classmethod
    async def start(
        cls, kind: BackendKind, root: Path, session_id: str, started: list[Writer]
    ) -> Writer:
        """Start one writer and add it to ``started`` (for :func:`kill_all`)."""
        process = await trio.lowlevel.open_process(
            [sys.executable, str(CHILD), kind.name, str(root), session_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        writer = cls(process)
        started.append(writer)
        return writer

    async def line(self) -> tuple[str, int]:
        while b"\n" not in self.buffer:
            data = await self.stdout.receive_some()
            assert data, f"the writer exited early ({await self.process.wait()})"
            self.buffer += data
        raw, self.buffer = self.buffer.split(b"\n", 1)
        word, number = raw.decode().split()
        return word, int(number)

    async def turn(self) -> int:
        await self.stdin.send_all(b"turn\n")
        word, turn = await self.line()
        assert word == "done"
        return turn

    async def close(self) -> int:
        await self.stdin.aclose()
        status = await self.process.wait()
        await self.stdout.aclose()
        return status


async def kill_all(writers: list[Writer]) -> None:
    """Kill and reap every writer still running: a failed assertion must not leave children
    behind (later tests check that pytest has none)."""
    with trio.CancelScope(shield=True):
        for writer in writers:
            if writer.process.returncode is None:
                writer.process.kill()
            await writer.process.wait()


def config_file(kind: BackendKind, root: Path) -> Path:
    """A ``trio-agent.yml`` for the CLI on the same store."""
    path = kind.config(root).path
    file = root / "trio-agent.yml"
    file.write_text(
        "llm: {providers: [{name: offline, type: offline, delay: 0}]}\n"
        f"persistence: {{type: {kind.name}, path: '{path}'}}\n"
    )
    return file


@pytest.mark.parametrize("kind", [JSONL, SQLITE], ids=lambda kind: kind.name)
async def test_two_processes_resume_one_session_and_exactly_one_runs(
    tmp_path: Path, kind: BackendKind
) -> None:
    async with (
        open_test_harness(
            [text("first")], persistence=kind.plugin, persistence_config=kind.config(tmp_path)
        ) as h,
        await h.ctx.agents.create(agent_id="a", session_id="shared") as handle,
    ):
        handle.agent.send("prompt 1")
        await handle.agent.wait_idle()
    started: list[Writer] = []
    try:
        with trio.fail_after(120):
            writers = [await Writer.start(kind, tmp_path, "shared", started) for _ in range(2)]
            first = [await writer.line() for writer in writers]
            words = sorted(word for word, _ in first)
            assert words == ["busy", "holding"], first
            winner, loser = writers if first[0][0] == "holding" else writers[::-1]
            winner_pid = winner.process.pid
            assert dict(first) == {"holding": winner_pid, "busy": winner_pid}
            assert await loser.close() == 3
            # The CLI says the same, and exits 2.
            cli = await trio.run_process(
                [
                    str(CLI),
                    "run",
                    "-c",
                    str(config_file(kind, tmp_path)),
                    "--resume",
                    "shared",
                    "hi",
                ],
                cwd=tmp_path,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert cli.returncode == 2, cli.stderr.decode()
            assert cli.stderr.decode().splitlines()[-1] == (
                f"trio-agent: SESSION_BUSY: session shared is open in another process "
                f"(pid {winner_pid})"
            )
            ran = [await winner.turn(), await winner.turn()]
            assert ran == [2, 3]
            # SIGKILLed, the winner leaves its lock behind with nothing holding it.
            winner.process.send_signal(signal.SIGKILL)
            assert await winner.close() == -signal.SIGKILL
            third = await Writer.start(kind, tmp_path, "shared", started)
            assert await third.line() == ("holding", third.process.pid)
            assert await third.turn() == 4
            assert await third.close() == 0
    finally:
        await kill_all(started)
    async with open_test_harness(
        persistence=kind.plugin, persistence_config=kind.config(tmp_path)
    ) as h:
        stored = await h.ctx.session_persistence.load("shared")
    ends = [e.payload_as(TurnEnd) for e in stored.events if e.type == "turn/end"]
    assert [(end.turn, end.reason) for end in ends] == [(n, "completed") for n in (1, 2, 3, 4)]
    assert repair_events(stored.events) == []
    assert [e.seq for e in stored.events] == list(range(len(stored.events)))
