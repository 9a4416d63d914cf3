"""Bounded, non-blocking stderr for ``trio-agent acp``.

ACP clients start the agent with stderr on a pipe and often never read it. Once such a pipe
(64 KiB on Linux) is full, a plain ``write(2)`` blocks forever, and with it the whole server.
Here every line goes to a bounded queue that a daemon thread writes out: the caller never
waits; when the queue is full, lines are dropped and counted, and the next line that fits says
how many were lost. The thread may stay blocked on a pipe nobody reads; it is a daemon, so the
process still exits.
"""

from __future__ import annotations

import collections
import io
import logging
import os
import threading
from typing import final

__all__ = ["SinkHandler", "SinkWriter", "StderrSink"]


@final
class StderrSink:
    """Writes whole lines to ``fd`` from a daemon thread; :meth:`write_line` never blocks.

    At most ``max_pending`` bytes wait in the queue; a line is cut to ``max_line`` bytes.
    """

    def __init__(self, fd: int = 2, *, max_pending: int = 256 * 1024, max_line: int = 4096) -> None:
        self._fd = fd
        self._max_pending = max_pending
        self._max_line = max_line
        self._queue: collections.deque[bytes] = collections.deque()
        self._pending = 0
        self._dropped = 0  # in all
        self._unreported = 0  # since the last note
        self._closed = False
        self._broken = False
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._run, name="trio-agent stderr", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        """How many lines were dropped because the queue was full."""
        return self._dropped

    def write_line(self, text: str) -> None:
        """Queue ``text`` (one line; a newline is added) or drop it when the queue is full."""
        data = text.encode("utf-8", "replace")[: self._max_line - 1] + b"\n"
        with self._lock:
            if self._closed or self._broken:
                return
            if self._pending + len(data) > self._max_pending:
                self._dropped += 1
                self._unreported += 1
                return
            if self._unreported:
                note = f"[trio-agent: {self._unreported} log line(s) dropped: stderr is not read]\n"
                data = note.encode() + data
                self._unreported = 0
            self._queue.append(data)
            self._pending += len(data)
            self._wake.notify()

    def capture(self, fd: int, prefix: str) -> None:
        """Point ``fd`` at a pipe whose lines this sink writes, each after ``prefix``.

        Whoever writes to ``fd`` (a stray ``print`` to fd 1, a C library, a child process)
        never blocks on it: a reader thread turns what arrives into (droppable) lines.
        """
        read_end, write_end = os.pipe()
        os.dup2(write_end, fd)
        os.close(write_end)
        threading.Thread(
            target=self._forward, args=(read_end, prefix), name="trio-agent capture", daemon=True
        ).start()

    def _forward(self, fd: int, prefix: str) -> None:
        partial = b""
        while data := os.read(fd, 65536):
            *lines, partial = (partial + data).split(b"\n")
            for line in lines:
                self.write_line(prefix + line.decode("utf-8", "replace"))
            if len(partial) > self._max_line:
                self.write_line(prefix + partial.decode("utf-8", "replace"))
                partial = b""
        os.close(fd)

    def close(self, timeout: float) -> None:
        """Stop accepting lines; wait up to ``timeout`` seconds for the queue to be written."""
        with self._lock:
            self._closed = True
            self._wake.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._closed:
                    self._wake.wait()
                if not self._queue:
                    return
                data = self._queue.popleft()
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view) :]
            except OSError:
                with self._lock:
                    self._broken = True
                    self._queue.clear()
                return
            finally:
                with self._lock:
                    self._pending -= len(data)


@final
class SinkHandler(logging.Handler):
    """A logging handler writing formatted records to a :class:`StderrSink`."""

    def __init__(self, sink: StderrSink, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            for line in self.format(record).splitlines() or [""]:
                self._sink.write_line(line)
        except Exception:
            self.handleError(record)


@final
class SinkWriter(io.TextIOBase):
    """A text stream on a :class:`StderrSink`, to stand in for ``sys.stderr``/``sys.stdout``
    (so a stray ``print`` or a traceback can neither block nor reach the protocol stream)."""

    def __init__(self, sink: StderrSink, limit: int = 4096) -> None:
        super().__init__()
        self._sink = sink
        self._limit = limit
        self._partial = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._sink.write_line(line)
        if len(self._partial) > self._limit:
            self._sink.write_line(self._partial)
            self._partial = ""
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._sink.write_line(self._partial)
            self._partial = ""
