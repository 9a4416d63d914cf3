"""The JSONL backend: one ``<session_id>.jsonl`` file per session.

Layout: line 1 is the header object (no ``seq``), then one compact JSON object per event
(``{"seq", "type", "time", "data"}``), each line ending in ``\\n``.

Reading:

* a last line that has no ``\\n``, or does not parse, is a torn write from a crash: it is ignored,
  and cut off before the next append;
* a line before it that does not parse or does not fit (bad keys, a seq gap) raises
  :class:`SessionCorruptError` naming the file and the 1-based line;
* a header with another ``format`` tag or an unsupported ``version`` raises
  :class:`SessionFormatError`;
* a header-only file is a valid, empty log; an empty file (or a header line without its
  ``\\n``) cannot come from this backend (a log is created whole, by rename) and is reported as
  corrupt at line 1.

Writing: the first write of a session writes header and events to a temporary file (mode
0600), fsyncs it, links it to its final name (which fails if a log is already there), unlinks
the temporary file and fsyncs the directory (created 0700). Later writes truncate anything after
the last intact line, append, and fsync; a failed append is truncated back.

One process writes a given session at a time; readers may run concurrently.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from collections.abc import Sequence
from typing import final

import attrs
import trio

from ..ids import SESSION_ID_PATTERN, SessionId
from ..runtime import Context
from ..session import SessionEvent, SessionHeader
from ._errors import PersistenceError, SessionCorruptError, StoredSessionExistsError
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
from ._types import SessionInfo
from ._writer import PersistenceService, Position, ReadResult

__all__ = ["JsonlPersistence"]

logger = logging.getLogger("trio_agent.persistence")

_SUFFIX = ".jsonl"
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
        """``path``: the directory holding one ``<session_id>.jsonl`` per session."""

        path: str = ".trio-agent/sessions"

    config: JsonlPersistence.Config

    def __init__(self, ctx: Context, config: JsonlPersistence.Config) -> None:
        directory = os.path.abspath(config.path)
        super().__init__(ctx, config, _JsonlBackend(directory))
        #: The absolute directory the logs are in.
        self.directory = directory


@final
class _JsonlBackend:
    def __init__(self, directory: str) -> None:
        self.directory = directory

    def location(self, session_id: SessionId) -> str:
        return os.path.join(self.directory, session_id + _SUFFIX)

    # --- reading ----------------------------------------------------------------------------

    async def read(self, session_id: SessionId) -> ReadResult | None:
        return await trio.to_thread.run_sync(self._read, session_id)

    def _read(self, session_id: SessionId) -> ReadResult | None:
        path = self.location(session_id)
        try:
            with open(path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PersistenceError(
                f"cannot read session log {path}: {exc}; check that it is a readable file"
            ) from exc
        return _parse(data, path, session_id)

    async def exists(self, session_id: SessionId) -> bool:
        return await trio.to_thread.run_sync(os.path.isfile, self.location(session_id))

    async def infos(self) -> list[SessionInfo]:
        return await trio.to_thread.run_sync(self._infos)

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

    # --- writing ----------------------------------------------------------------------------

    async def write(
        self, header: SessionHeader, position: Position | None, events: Sequence[SessionEvent]
    ) -> Position:
        payload = "".join([encode_json(event_to_json(e)) + "\n" for e in events]).encode()
        if position is None:
            head = (encode_json(header_to_json(header)) + "\n").encode()
            return await trio.to_thread.run_sync(
                self._create, header.session_id, head, payload, len(events)
            )
        return await trio.to_thread.run_sync(
            self._append, header.session_id, position, payload, len(events)
        )

    def _create(self, session_id: SessionId, head: bytes, payload: bytes, count: int) -> Position:
        ensure_private_dir(self.directory)
        final_path = self.location(session_id)
        temp = os.path.join(self.directory, f".{session_id}.{secrets.token_hex(6)}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
        try:
            try:
                _write_all(fd, head + payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temp, final_path)
            except FileExistsError:
                raise StoredSessionExistsError(
                    f"session {session_id!r} already has a stored log at {final_path}; a new "
                    "session never overwrites one: resume it (ctx.agents.resume) or pick another id",
                    session_id=session_id,
                ) from None
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
        return Position(count, len(head) + len(payload))

    def _append(
        self, session_id: SessionId, position: Position, payload: bytes, count: int
    ) -> Position:
        path = self.location(session_id)
        committed: int = position.token
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size < committed:
                raise PersistenceError(
                    f"session log {path} is {size} bytes, shorter than the {committed} bytes "
                    "already written to it; another program changed it. Load the session again"
                )
            if size > committed:  # a torn line from a crash, or a failed append: cut it off
                os.ftruncate(fd, committed)
            try:
                os.lseek(fd, committed, os.SEEK_SET)
                _write_all(fd, payload)
                os.fsync(fd)
            except BaseException:
                try:
                    os.ftruncate(fd, committed)
                    os.fsync(fd)
                except OSError:
                    pass  # the next append cuts it off from ``committed`` anyway
                raise
        finally:
            os.close(fd)
        return Position(position.count + count, committed + len(payload))

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


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


def _parse(data: bytes, path: str, session_id: SessionId) -> ReadResult:
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
            if index == last:  # a torn last line: ignored, cut off before the next append
                committed -= len(raw) + 1
                break
            raise _corrupt(path, index + 1, f"the line does not parse ({exc})") from None
        event = event_from_json(obj, index - 1)
        if type(event) is str:
            raise _corrupt(path, index + 1, event)
        events.append(event)  # type: ignore[arg-type]
    return ReadResult(header, tuple(events), Position(len(events), committed))


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
