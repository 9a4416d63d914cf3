"""grep's search process: regular-expression matching that the tool can kill.

Run as ``python -I -S _grep_worker.py`` (standard library only: it imports nothing of
trio_agent, so it starts in milliseconds). It reads one JSON request on stdin::

    {"pattern": str, "ignore_case": bool, "files": [[path, shown, dev, ino], ...],
     "max_results": int, "max_bytes": int, "line_bytes": int, "shown_chars": int,
     "seconds": float}

and writes JSON lines on stdout: ``["hit", "shown:line: text"]`` for each match,
``["binary", shown]`` for each binary file skipped, ``["unreadable", shown]`` for a file that
could not be read or is no longer the file that was checked, then ``["done", searched,
capped]``. The parent chose the files (confinement, protected paths); this process only
opens each one without following a final symbolic link and searches it if it is still the
very file (device and inode) the parent checked.

It limits itself: address space (a runaway match cannot eat the machine's memory) and CPU
seconds (it dies even if its parent vanished without killing it).
"""

from __future__ import annotations

import json
import math
import os
import re
import resource
import stat
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

_SNIFF_BYTES = 8192
_MEMORY_LIMIT = 1 << 30
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _limit_self(seconds: float) -> None:
    for which, value in (
        (resource.RLIMIT_AS, _MEMORY_LIMIT),
        (resource.RLIMIT_CPU, math.ceil(seconds) + 2),
    ):
        try:
            _, hard = resource.getrlimit(which)
            wanted = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (wanted, hard))
        except (ValueError, OSError):
            pass  # best effort: the parent's kill is the real bound


def _lines(f: BinaryIO, cap: int) -> Iterator[bytes]:
    """Each line cut to ``cap`` bytes; the rest of a cut line is skipped, never held."""
    while raw := f.readline(cap):
        if len(raw) == cap and not raw.endswith(b"\n"):
            while more := f.readline(cap):
                if more.endswith(b"\n"):
                    break
        yield raw


def _open(path: str, dev: int, ino: int) -> BinaryIO | None:
    try:
        fd = os.open(path, _FLAGS)
    except OSError:
        return None
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode) or (status.st_dev, status.st_ino) != (dev, ino):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def _emit(*item: Any) -> None:
    # Flushed at once: what was found survives a kill at the time limit.
    sys.stdout.write(json.dumps(item) + "\n")
    sys.stdout.flush()


def main() -> None:
    request = json.load(sys.stdin)
    _limit_self(request["seconds"])
    regex = re.compile(request["pattern"], re.IGNORECASE if request["ignore_case"] else 0)
    room = request["max_bytes"]
    results = 0
    searched = 0
    shown_chars = request["shown_chars"]
    for path, shown, dev, ino in request["files"]:
        f = _open(path, dev, ino)
        if f is None:
            _emit("unreadable", shown)
            continue
        with f:
            if b"\0" in f.read(_SNIFF_BYTES):
                _emit("binary", shown)
                continue
            f.seek(0)
            searched += 1
            for lineno, raw in enumerate(_lines(f, request["line_bytes"]), 1):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if regex.search(line) is None:
                    continue
                if len(line) > shown_chars:
                    line = line[:shown_chars] + " [...]"
                hit = f"{shown}:{lineno}: {line}"
                if results == request["max_results"] or len(hit) > room:
                    _emit("done", searched, True)
                    return
                _emit("hit", hit)
                results += 1
                room -= len(hit) + 1
    _emit("done", searched, False)


if __name__ == "__main__":
    main()
