"""One writer per session for the file backends: an exclusive, non-blocking ``flock`` and a note
saying who holds it (run in worker threads).

``flock`` locks belong to an open file description, so a lock dies with the process that holds
it (a SIGKILLed holder never blocks the next one) and two opens in one process exclude each
other too. It is advisory: it keeps out every trio-agent writer, not a program that ignores it
(the backends' tamper checks catch that one). Its reach is one host: over NFS and the like it
may not exclude anyone, which is why the SQLite docs say "same host".
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time

from ._errors import SessionBusyError

__all__ = [
    "busy_error",
    "holder_note",
    "lock",
    "named_holder",
    "note_deadline",
    "parse_holder",
    "same_file",
]

# A holder writes its note just after it takes the lock, so an opener that finds the lock taken
# may read no note yet (or a SIGKILLed holder's stale one): it tries again for this long before
# it reports an unknown holder.
_NOTE_PATIENCE = 0.5
_NOTE_POLL = 0.002


def lock(fd: int) -> bool:
    """Take the exclusive lock of ``fd`` without waiting; whether it was free."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (it was not replaced or removed
    since it was opened)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def holder_note() -> bytes:
    """What a holder writes where a second opener can read it: this process's pid and host."""
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode() + b"\n"


def parse_holder(data: bytes) -> tuple[int | None, str | None]:
    """``(pid, host)`` from a :func:`holder_note` (``None`` for what cannot be read: the note
    may be missing, half-written or from another program)."""
    try:
        note = json.loads(data)
    except ValueError:
        return None, None
    if type(note) is not dict:
        return None, None
    pid, host = note.get("pid"), note.get("host")
    return (pid if type(pid) is int else None), (host if type(host) is str else None)


def note_deadline() -> float:
    """When an opener stops waiting for a busy lock's note (pass it to :func:`named_holder`)."""
    return time.monotonic() + _NOTE_PATIENCE


def named_holder(note: bytes, deadline: float) -> tuple[int | None, str | None] | None:
    """The holder a busy lock's ``note`` names, or ``None``: try the lock again (after a short
    pause), because the note names no live process yet and ``deadline`` has not passed. Past
    the deadline an unreadable note gives ``(None, None)``: an unknown holder."""
    pid, host = parse_holder(note)
    if pid is not None and (host not in (None, socket.gethostname()) or _alive(pid)):
        return pid, host
    if time.monotonic() < deadline:
        time.sleep(_NOTE_POLL)  # in a worker thread; the holder is between lock and note
        return None
    return None, None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def busy_error(session_id: str, where: str, pid: int | None, host: str | None) -> SessionBusyError:
    """The error for a session whose lock another writer holds."""
    if pid is None:
        holder = "another process"
    elif host is None or host == socket.gethostname():
        holder = f"another process (pid {pid})"
    else:
        holder = f"another process (pid {pid} on {host})"
    return SessionBusyError(
        f"session {session_id!r} is open in {holder} ({where}); one session has one writer: "
        "close it there, or wait until that process exits",
        session_id=session_id,
        pid=pid,
        host=host,
    )
