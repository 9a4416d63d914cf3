"""The JSONL backend: one ``<session_id>.jsonl`` file per session.

Layout: line 1 is the header object (no ``seq``), then one compact JSON object per event
(``{"seq", "type", "time", "data"}``), each line ending in ``\\n``.

Reading:

* a last line that has no ``\\n``, or does not parse, is a torn write from a crash: it is
  ignored (and cut off when the session is next claimed, see below);
* a line before it that does not parse or does not fit (bad keys, a seq gap) raises
  :class:`SessionCorruptError` naming the file and the 1-based line;
* a header with another ``format`` tag or an unsupported ``version`` raises
  :class:`SessionFormatError`;
* a header-only file is a valid, empty log; an empty file (or a header line without its
  ``\\n``) cannot come from this backend (a log is created whole, by rename) and is reported as
  corrupt at line 1.

One writer per session: a claim (``acquire``) is an exclusive, non-blocking ``flock`` on the
``.jsonl`` file itself, held until ``release``; the holder's pid and host go to a sidecar,
``.<session_id>.holder``, written under the lock and removed before it is let go, so a second
opener can name the holder (:class:`SessionBusyError`). Claiming an existing log cuts its torn
tail under the lock; that is the only place a tail is ever cut. A fresh session has no file to
lock, and none is made for it: the claim is noted, and its first write creates the log already
locked, so an unused session still leaves nothing behind.

Writing: the first write of a session writes header and events to a temporary file (mode
0600), fsyncs it, locks it (when the session is claimed), links it to its final name (which fails
if a log is already there), unlinks the temporary file and fsyncs the directory (created 0700).
Later writes first check that the file is still the one this backend wrote and exactly the
length it committed - otherwise another program replaced, truncated or appended to it, and the
write refuses with :class:`SessionTamperedError`, touching nothing - then append and fsync; a
failed append is truncated back to the committed length. A claimed session's appends go
through the locked descriptor the claim holds: one ``stat`` of the path checks it, and the
write is a ``pwrite`` at the committed length (three system calls with the sync, not seven).

Readers never lock and may run concurrently with the writer.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from collections.abc import Sequence
from typing import NamedTuple, final

import attrs
import trio

from .._threads import run_sync, run_sync_when_idle
from ..ids import SESSION_ID_PATTERN, SessionId
from ..runtime import Context
from ..session import SessionEvent, SessionHeader
from ._backend import Backend, Position, ReadResult
from ._errors import (
    PersistenceError,
    SessionCorruptError,
    SessionTamperedError,
    stored_session_exists,
)
from ._format import (
    InfoBuilder,
    decode_json,
    encode_json,
    event_from_json,
    event_to_json,
    header_from_json,
    header_to_json,
)
from ._fs import ensure_private_dir, fsync_dir
from ._locks import busy_error, holder_note, lock, named_holder, note_deadline, same_file
from ._types import SessionInfo
from ._writer import PersistenceService

__all__ = ["JsonlBackend", "JsonlPersistence"]

logger = logging.getLogger("trio_agent.persistence")

_SUFFIX = ".jsonl"
_HOLDER_SUFFIX = ".holder"
# ``{"seq":N,"type":"T",`` - how this backend starts every event line; lets list() skip
# parsing events it does not need.
_EVENT_PREFIX = re.compile(rb'\{"seq":\d+,"type":"((?:[^"\\]|\\.)*)","time":')
_FILE_MODE = 0o600


@final
class JsonlPersistence(PersistenceService, name="session_persistence"):
    """``ctx.session_persistence`` on JSONL files: ``<path>/<session_id>.jsonl``.

    The default backend. ``path`` is resolved against the working directory when the plugin
    loads. See :mod:`trio_agent.persistence` for the write-behind and failure semantics.
    """

    @attrs.frozen
    class Config:
        """``path``: the directory holding one ``<session_id>.jsonl`` per session;
        ``inline_when_idle``: as :class:`JsonlBackend`'s."""

        path: str = ".trio-agent/sessions"
        inline_when_idle: bool = True

    config: JsonlPersistence.Config

    def __init__(self, ctx: Context, config: JsonlPersistence.Config) -> None:
        backend = JsonlBackend(config.path, inline_when_idle=config.inline_when_idle)
        super().__init__(ctx, config, backend)
        #: The absolute directory the logs are in.
        self.directory = backend.directory


@attrs.frozen
class _Token:
    """A JSONL position's token: the committed byte length of the log, and the file it is in
    (device, inode), so a write can tell the file was replaced."""

    length: int
    file: tuple[int, int]


class _Held(NamedTuple):
    """A claimed log: the locked descriptor and the file it is (device, inode)."""

    fd: int
    file: tuple[int, int]


def _identity(fd: int) -> tuple[int, int]:
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


@final
class JsonlBackend(Backend):
    """The :class:`~trio_agent.persistence.Backend` of :class:`JsonlPersistence`:
    ``<directory>/<session_id>.jsonl``, in the layout :mod:`trio_agent.persistence._jsonl`
    describes (``directory`` is resolved against the working directory now; it is created,
    mode 0700, by the first write).

    A write (append and fsync) runs in the trio thread itself when no other task is ready to
    run, which saves the two thread wake-ups of a worker-thread hop (about 0.4 ms per durable
    step on the machine of #13), and in a worker thread otherwise; ``inline_when_idle=False``
    always hops, so that a stalled disk never holds up the run loop (a network filesystem,
    say). Everything else always runs in a worker thread."""

    def __init__(self, directory: str, *, inline_when_idle: bool = True) -> None:
        #: The absolute directory the logs are in.
        self.directory = os.path.abspath(directory)
        self._run_write = run_sync_when_idle if inline_when_idle else run_sync
        #: Claimed sessions -> the locked log (``None``: no log yet, the first write creates
        #: it locked). Touched by one thread at a time per session (a worker, or the trio
        #: thread for an append made while it was idle).
        self._claims: dict[SessionId, _Held | None] = {}
        #: Sessions whose failed append could not be cut back: the bytes after the committed
        #: length are this backend's own, and the next append may cut them.
        self._dirty: set[SessionId] = set()

    def __repr__(self) -> str:
        return f"<JsonlBackend {self.directory}>"

    def location(self, session_id: SessionId) -> str:
        return os.path.join(self.directory, session_id + _SUFFIX)

    def _holder_path(self, session_id: SessionId) -> str:
        return os.path.join(self.directory, f".{session_id}{_HOLDER_SUFFIX}")

    # --- reading ----------------------------------------------------------------------------

    async def read(self, session_id: SessionId) -> ReadResult | None:
        return await run_sync(self._read, session_id)

    def _read(self, session_id: SessionId) -> ReadResult | None:
        path = self.location(session_id)
        try:
            with open(path, "rb") as file:
                data = file.read()
                identity = _identity(file.fileno())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PersistenceError(
                f"cannot read session log {path}: {exc}; check that it is a readable file"
            ) from exc
        return _parse(data, path, session_id, identity)

    async def exists(self, session_id: SessionId) -> bool:
        return await run_sync(os.path.isfile, self.location(session_id))

    async def infos(self) -> list[SessionInfo]:
        return await run_sync(self._infos)

    def _infos(self) -> list[SessionInfo]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        infos: list[SessionInfo] = []
        for name in names:
            if not name.endswith(_SUFFIX):
                continue
            sid = name[: -len(_SUFFIX)]
            if SESSION_ID_PATTERN.fullmatch(sid) is None:
                continue
            path = os.path.join(self.directory, name)
            try:
                with open(path, "rb") as file:
                    data = file.read()
                info = _summarise(data, path, SessionId(sid))
            except (OSError, PersistenceError) as exc:
                logger.warning("skipping unreadable session log %s: %s", path, exc)
                continue
            infos.append(info)
        return infos

    # --- claims -----------------------------------------------------------------------------

    async def acquire(self, session_id: SessionId) -> None:
        await run_sync(self._acquire, session_id)

    def _acquire(self, session_id: SessionId) -> None:
        if session_id in self._claims:
            return
        path = self.location(session_id)
        deadline = note_deadline()
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                self._claims[session_id] = None  # the first write creates it, locked
                return
            except OSError as exc:
                raise PersistenceError(
                    f"cannot open session log {path} to claim it: {exc}; check that it is a "
                    "readable and writable file"
                ) from exc
            try:
                if not lock(fd):
                    holder = named_holder(self._holder_note(session_id), deadline)
                    if holder is not None:
                        raise busy_error(session_id, path, *holder)
                elif same_file(fd, path):  # else it was replaced before the lock: lock the new one
                    _cut_torn_tail(fd)
                    self._note_holder(session_id)
                    self._claims[session_id] = _Held(fd, _identity(fd))
                    return
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def _holder_note(self, session_id: SessionId) -> bytes:
        try:
            with open(self._holder_path(session_id), "rb") as file:
                return file.read(4096)
        except OSError:
            return b""

    def _note_holder(self, session_id: SessionId) -> None:
        """Record this process as the holder (the caller holds the session's lock)."""
        fd = os.open(
            self._holder_path(session_id),
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW,
            _FILE_MODE,
        )
        try:
            _write_all(fd, holder_note())
        finally:
            os.close(fd)

    async def release(self, session_id: SessionId) -> None:
        await run_sync(self._release, session_id)

    def _release(self, session_id: SessionId) -> None:
        held = self._claims.pop(session_id, None)
        self._dirty.discard(session_id)
        if held is None:
            return
        try:
            os.unlink(self._holder_path(session_id))  # still under the lock: the note is ours
        except OSError:
            pass
        finally:
            os.close(held.fd)

    # --- writing ----------------------------------------------------------------------------

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        payload = "".join([encode_json(event_to_json(e)) + "\n" for e in events]).encode()
        if position is None:
            head = (encode_json(header_to_json(header)) + "\n").encode()
            return await run_sync(self._create, header.session_id, head, payload, len(events))
        return await self._run_write(
            self._append, header.session_id, position, payload, len(events)
        )

    def _create(self, session_id: SessionId, head: bytes, payload: bytes, count: int) -> Position:
        ensure_private_dir(self.directory)
        final_path = self.location(session_id)
        temp = os.path.join(self.directory, f".{session_id}.{secrets.token_hex(6)}.tmp")
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
        claimed = session_id in self._claims
        keep = False
        try:
            try:
                _write_all(fd, head + payload)
                os.fsync(fd)
                # Locked before it has its name, so no other writer can ever lock it first.
                if claimed:
                    lock(fd)
                try:
                    os.link(temp, final_path)
                except FileExistsError:
                    raise stored_session_exists(session_id, final_path) from None
                try:
                    fsync_dir(self.directory)
                except BaseException:
                    # Not durable, so not done: the retry creates the log again.
                    try:
                        os.unlink(final_path)
                    except OSError:
                        pass
                    raise
            finally:
                try:
                    os.unlink(temp)
                except FileNotFoundError:
                    pass
            identity = _identity(fd)
            if claimed:
                self._note_holder(session_id)
                self._claims[session_id] = _Held(fd, identity)
                keep = True
        finally:
            if not keep:
                os.close(fd)
        return Position(count, _Token(len(head) + len(payload), identity))

    def _append(
        self, session_id: SessionId, position: Position, payload: bytes, count: int
    ) -> Position:
        path = self.location(session_id)
        token = position.token
        if not isinstance(token, _Token):
            raise TypeError(
                f"{position!r} did not come from a JsonlBackend; pass back the position its "
                "read or write returned"
            )
        committed = token.length
        held = self._claims.get(session_id)
        # A claim's descriptor is the log's: one stat of the path tells whether the path still
        # names it, and at what length (no open, fstat and close per append).
        claimed = held.fd if held is not None and held.file == token.file else None
        try:
            if claimed is None:
                fd, named = os.open(path, os.O_WRONLY | os.O_CLOEXEC), None
            else:
                fd, named = claimed, os.stat(path)
        except FileNotFoundError:
            raise self._tampered(session_id, "is gone (removed or renamed)") from None
        try:
            info = os.fstat(fd) if named is None else named
            if (info.st_dev, info.st_ino) != token.file:
                raise self._tampered(session_id, "was replaced by another file")
            size = info.st_size
            if size != committed:
                if not (size > committed and session_id in self._dirty):
                    change = "truncated" if size < committed else "appended to"
                    raise self._tampered(
                        session_id,
                        f"was {change}: it is {size} bytes, but this process committed {committed}",
                    )
                os.ftruncate(fd, committed)  # what our own failed append left
            try:
                _write_all(fd, payload, committed)
                os.fsync(fd)
            except BaseException:
                try:
                    os.ftruncate(fd, committed)
                    os.fsync(fd)
                except OSError:
                    self._dirty.add(session_id)  # the next append cuts our bytes off
                raise
            self._dirty.discard(session_id)
        finally:
            if claimed is None:
                os.close(fd)
        return Position(position.count + count, _Token(committed + len(payload), token.file))

    def _tampered(self, session_id: SessionId, change: str) -> SessionTamperedError:
        path = self.location(session_id)
        return SessionTamperedError(
            f"session log {path} {change} since this process last wrote it; another program "
            "changed it, so nothing more is written to it",
            session_id=session_id,
            path=path,
        )

    async def aclose(self) -> None:
        if self._claims:
            await run_sync(self._release_all)
        else:
            await trio.lowlevel.checkpoint()

    def _release_all(self) -> None:
        for session_id in list(self._claims):
            self._release(session_id)


def _write_all(fd: int, data: bytes, offset: int = 0) -> None:
    """Write all of ``data`` at ``offset`` (``pwrite``: the descriptor's own offset is not
    used, so a claimed log can be appended at its committed length)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def _rfind_newline(fd: int, end: int) -> int:
    """The offset of the last ``\\n`` before ``end`` in the file open as ``fd``, or -1."""
    while end > 0:
        start = max(0, end - 65536)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            return start + at
        end = start
    return -1


def _cut_torn_tail(fd: int) -> None:
    """Cut off the torn tail of a log the caller holds the lock of: what :func:`_parse` leaves
    out (an incomplete last line, or a last line that does not parse), reading only the end."""
    size = os.fstat(fd).st_size
    last = _rfind_newline(fd, size)
    if last < 0:
        return  # no complete header line: not a torn tail, read reports the file
    intact = last + 1
    if intact == size:
        before = _rfind_newline(fd, last)
        if before < 0:
            return  # the header is the only line
        try:
            _parse_line(os.pread(fd, last - before - 1, before + 1))
            return
        except ValueError:
            intact = before + 1
    os.ftruncate(fd, intact)
    os.fsync(fd)


# --- parsing --------------------------------------------------------------------------------


def _corrupt(path: str, line: int, what: str) -> SessionCorruptError:
    return SessionCorruptError(
        f"session log {path}, line {line}: {what}; the log is damaged before its last line, so "
        "it is not a torn write: restore the file from a backup, or cut it at the line before "
        "to keep the intact part",
        path=path,
        line=line,
    )


def _split(data: bytes, path: str) -> tuple[list[bytes], int]:
    """The complete lines of ``data`` (without ``\\n``) and the byte length they span.

    When the file ends in an incomplete line, that is the torn last line and every complete
    line must be intact; otherwise the last complete line may be torn (it is the last line).
    """
    end = data.rfind(b"\n") + 1
    if end == 0:
        what = "the file is empty" if not data else "the header line is incomplete"
        raise SessionCorruptError(
            f"session log {path}, line 1: {what} (no complete header line); logs are created "
            "whole, so this file was not written by trio-agent or was damaged: restore it from "
            "a backup or delete it",
            path=path,
            line=1,
        )
    return data[: end - 1].split(b"\n"), end


def _parse_line(raw: bytes) -> object:
    return decode_json(raw.decode("utf-8"))


def _parse(data: bytes, path: str, session_id: SessionId, identity: tuple[int, int]) -> ReadResult:
    lines, committed = _split(data, path)
    try:
        head = _parse_line(lines[0])
    except ValueError as exc:
        raise _corrupt(path, 1, f"the header does not parse ({exc})") from None
    header = header_from_json(head, path=path, line=1, session_id=session_id)
    events: list[SessionEvent] = []
    # The line that may be torn: the incomplete tail (already left out) or the last line.
    last = len(lines) - 1 if committed == len(data) else -1
    for index in range(1, len(lines)):
        raw = lines[index]
        try:
            obj = _parse_line(raw)
        except ValueError as exc:
            if index == last:  # a torn last line: ignored, cut off by the next claim
                committed -= len(raw) + 1
                break
            raise _corrupt(path, index + 1, f"the line does not parse ({exc})") from None
        event = event_from_json(obj, index - 1)
        if type(event) is str:
            raise _corrupt(path, index + 1, event)
        events.append(event)  # type: ignore[arg-type]
    return ReadResult(header, tuple(events), Position(len(events), _Token(committed, identity)))


def _summarise(data: bytes, path: str, session_id: SessionId) -> SessionInfo:
    """:class:`SessionInfo` of a log, parsing only the events it needs (turns, title, last)."""
    lines, committed = _split(data, path)
    try:
        head = _parse_line(lines[0])
    except ValueError as exc:
        raise _corrupt(path, 1, f"the header does not parse ({exc})") from None
    builder = InfoBuilder(header_from_json(head, path=path, line=1, session_id=session_id))
    last = len(lines) - 1 if committed == len(data) else -1
    # The last two lines are parsed in full, so updated_at is right even when the last is torn.
    fast_until = len(lines) - 2
    for index in range(1, len(lines)):
        raw = lines[index]
        match = _EVENT_PREFIX.match(raw) if index < fast_until else None
        if match is not None:
            kind = match.group(1)
            if kind == b"turn/start":
                builder.turns += 1
                continue
            if kind != b"user/message" or builder.prompted:
                continue
        try:
            obj = _parse_line(raw)
        except ValueError:
            if index == last:
                break
            raise _corrupt(path, index + 1, "the line does not parse") from None
        if type(obj) is not dict:
            raise _corrupt(path, index + 1, "expected an event object")
        kind_text, stamp = obj.get("type"), obj.get("time")
        if type(kind_text) is str and type(stamp) in (int, float):
            builder.add(kind_text, float(stamp), obj.get("data"))  # type: ignore[arg-type]
    return builder.info()
