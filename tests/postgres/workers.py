"""Real worker processes (pg_worker.py) driven from a test or a benchmark."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import trio

WORKER = Path(__file__).with_name("pg_worker.py")

#: The bound on every wait for a worker (generous: a busy CI machine; not a timing assertion).
GUARD = 60.0


class Worker:
    """One ``pg_worker.py`` process: send it commands, read its report lines."""

    def __init__(self, process: trio.Process, name: str) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.name = name
        self.pid = process.pid
        #: Every line it printed so far.
        self.seen: list[str] = []
        self._buffer = b""

    async def send(self, command: str) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send_all(command.encode() + b"\n")

    async def line(self) -> str:
        """Its next report line."""
        assert self.process.stdout is not None
        with trio.fail_after(GUARD):
            while b"\n" not in self._buffer:
                data = await self.process.stdout.receive_some()
                assert data, f"worker {self.name} exited; it printed {self.seen}"
                self._buffer += data
        raw, self._buffer = self._buffer.split(b"\n", 1)
        line = raw.decode()
        self.seen.append(line)
        return line

    async def expect(self, *words: str) -> str:
        """Read lines until one starts with one of ``words``; return it."""
        while True:
            line = await self.line()
            if line.split(" ", 1)[0] in words:
                return line

    async def kill(self) -> None:
        """SIGKILL it and wait until it is gone."""
        self.process.send_signal(signal.SIGKILL)
        with trio.fail_after(GUARD):
            await self.process.wait()


@contextlib.asynccontextmanager
async def open_worker(dsn: str, log_dir: Path, name: str, *options: str) -> AsyncIterator[Worker]:
    """Start a worker (its stderr goes to ``log_dir/<name>.log``), wait for ``ready``, and stop
    it on exit: ``quit``, then a SIGKILL if it does not end in time."""
    log = os.open(log_dir / f"{name}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        process = await trio.lowlevel.open_process(
            [sys.executable, str(WORKER), dsn, *options],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        os.close(log)
    worker = Worker(process, name)
    try:
        await worker.expect("ready")
        yield worker
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await worker.send("quit")
                with trio.move_on_after(GUARD):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    await stream.aclose()
