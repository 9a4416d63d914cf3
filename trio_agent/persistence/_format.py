"""The JSON form of a stored log, shared by every backend.

A header is ``{"format": "trio-agent-session", "version": 1, "session_id", "created_at", "cwd",
"parent_session", "seed_length", "meta"}``; an event is ``{"seq", "type", "time", "data"}``.
Both are written as compact JSON (no NaN/Infinity; UTF-8).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, NoReturn

from ..ids import SESSION_ID_PATTERN, SessionId
from ..session import SESSION_FORMAT_VERSION, SessionEvent, SessionHeader
from ._errors import SessionCorruptError, SessionFormatError
from ._types import SessionInfo

__all__ = [
    "FORMAT_TAG",
    "SUPPORTED_VERSIONS",
    "InfoBuilder",
    "decode_json",
    "encode_json",
    "event_from_json",
    "event_to_json",
    "header_from_json",
    "header_to_json",
    "jsonl_lines",
    "title_of",
]

#: The ``format`` tag of every header this package writes.
FORMAT_TAG = "trio-agent-session"

#: Header versions this build reads.
SUPPORTED_VERSIONS: tuple[int, ...] = (SESSION_FORMAT_VERSION,)

_HEADER_KEYS = frozenset(
    {
        "format",
        "version",
        "session_id",
        "created_at",
        "cwd",
        "parent_session",
        "seed_length",
        "meta",
    }
)
_EVENT_KEYS = frozenset({"seq", "type", "time", "data"})


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON (a log holds lossless JSON only)")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)
_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

#: Parse one JSON document (NaN and Infinity are refused).
decode_json = _decoder.decode
#: Compact JSON text of a lossless-JSON value.
encode_json = _encoder.encode


def header_to_json(header: SessionHeader) -> dict[str, Any]:
    """The JSON object of ``header`` (the first line of a JSONL log)."""
    return {
        "format": FORMAT_TAG,
        "version": SESSION_FORMAT_VERSION,
        "session_id": header.session_id,
        "created_at": header.created_at,
        "cwd": header.cwd,
        "parent_session": header.parent_session,
        "seed_length": header.seed_length,
        "meta": header.meta,
    }


def jsonl_lines(header: SessionHeader, events: Iterable[SessionEvent]) -> Iterable[str]:
    """The lines (each ending in a newline) of the JSONL form of a log: what the jsonl backend
    writes, and what ``trio-agent sessions export`` prints."""
    yield encode_json(header_to_json(header)) + "\n"
    for event in events:
        yield encode_json(event_to_json(event)) + "\n"


def event_to_json(event: SessionEvent) -> dict[str, Any]:
    """The JSON object of ``event``; ``data`` is shared, not copied."""
    return {"seq": event.seq, "type": event.type, "time": event.time, "data": event.data}


def header_from_json(
    obj: object, *, path: str, line: int | None, session_id: SessionId
) -> SessionHeader:
    """Check a parsed header object and build the :class:`SessionHeader`.

    The format tag and version are checked before the shape, so a log written by a newer build
    is reported as such even if its header looks different.

    Raises:
        SessionFormatError: not a trio-agent log, or a version this build cannot read.
        SessionCorruptError: the header is malformed or names another session.
    """
    where = f"{path}" if line is None else f"{path}, line {line}"

    def corrupt(what: str) -> NoReturn:
        raise SessionCorruptError(
            f"session log {where}: {what}; the header is damaged, restore the file from a "
            "backup or move it aside",
            path=path,
            line=line,
        )

    if type(obj) is not dict:
        corrupt(f"expected a header object, found {type(obj).__name__}")
    tag = obj.get("format")
    if tag != FORMAT_TAG:
        raise SessionFormatError(
            f"session log {where}: header format is {tag!r}, expected {FORMAT_TAG!r}; this is "
            "not a trio-agent session log (move it out of the sessions directory)",
            path=path,
            found=tag,
            supported=SUPPORTED_VERSIONS,
        )
    version = obj.get("version")
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
        newer = type(version) is int and version > max(SUPPORTED_VERSIONS)
        advice = (
            "it was written by a newer trio-agent: upgrade to read it"
            if newer
            else "this build cannot read it"
        )
        raise SessionFormatError(
            f"session log {where}: format version {version!r} is not supported (this build "
            f"reads version {supported}); {advice}",
            path=path,
            found=version,
            supported=SUPPORTED_VERSIONS,
        )
    keys = set(obj)
    if keys != _HEADER_KEYS:
        missing = sorted(_HEADER_KEYS - keys)
        extra = sorted(keys - _HEADER_KEYS)
        corrupt(f"header keys are wrong (missing: {missing}, unexpected: {extra})")
    sid = obj["session_id"]
    if sid != session_id:
        corrupt(f"header names session {sid!r}, but this log is stored as {session_id!r}")
    created_at = obj["created_at"]
    if not _is_number(created_at):
        corrupt(f"created_at is {created_at!r}, expected epoch seconds")
    cwd = obj["cwd"]
    if cwd is not None and type(cwd) is not str:
        corrupt(f"cwd is {cwd!r}, expected a string or null")
    parent = obj["parent_session"]
    if parent is not None and (type(parent) is not str or not SESSION_ID_PATTERN.fullmatch(parent)):
        corrupt(f"parent_session is {parent!r}, expected a session id or null")
    seed_length = obj["seed_length"]
    if seed_length is not None and (type(seed_length) is not int or seed_length < 0):
        corrupt(f"seed_length is {seed_length!r}, expected a count or null")
    meta = obj["meta"]
    if type(meta) is not dict:
        corrupt(f"meta is {type(meta).__name__}, expected an object")
    return SessionHeader(
        session_id=session_id,
        created_at=float(created_at),
        cwd=cwd,
        parent_session=None if parent is None else SessionId(parent),
        seed_length=seed_length,
        meta=meta,
        version=version,
    )


def event_from_json(obj: object, seq: int) -> SessionEvent | str:
    """Build the event with seq ``seq`` from a parsed object, or say what is wrong with it."""
    if type(obj) is not dict:
        return f"expected an event object, found {type(obj).__name__}"
    if len(obj) != 4 or obj.keys() != _EVENT_KEYS:
        return f"event keys are {sorted(obj)}, expected ['data', 'seq', 'time', 'type']"
    found = obj["seq"]
    if found != seq or type(found) is not int:
        return f"seq is {found!r}, expected {seq} (events are numbered from 0 without gaps)"
    kind = obj["type"]
    if type(kind) is not str or not kind:
        return f"type is {kind!r}, expected a non-empty string"
    stamp = obj["time"]
    if not _is_number(stamp):
        return f"time is {stamp!r}, expected epoch seconds"
    data = obj["data"]
    if type(data) is not dict:
        return f"data is {type(data).__name__}, expected an object"
    return SessionEvent(seq, kind, float(stamp), data)


def _is_number(value: object) -> bool:
    kind = type(value)
    return (kind is float and math.isfinite(value)) or kind is int  # type: ignore[arg-type]


def title_of(data: object) -> str | None:
    """The first line of the prompt in a ``user/message`` event's data, or ``None``."""
    if type(data) is not dict:
        return None
    message = data.get("message")
    content = message.get("content") if type(message) is dict else None
    if type(content) is not list:
        return None
    parts = [
        block["text"]
        for block in content
        if type(block) is dict and block.get("type") == "text" and type(block.get("text")) is str
    ]
    text = "".join(parts).strip()
    if not text:
        return None
    return text.splitlines()[0].strip()


class InfoBuilder:
    """Folds a log's events into its :class:`SessionInfo`."""

    __slots__ = ("header", "prompted", "title", "turns", "updated_at")

    def __init__(self, header: SessionHeader) -> None:
        self.header = header
        self.turns = 0
        self.title: str | None = None
        #: Whether the first ``user/message`` was seen (it alone gives the title).
        self.prompted = False
        self.updated_at = header.created_at

    def add(self, kind: str, stamp: float, data: object) -> None:
        """Fold one event in (``data`` is only read for the first ``user/message``)."""
        if kind == "turn/start":
            self.turns += 1
        elif kind == "user/message" and not self.prompted:
            self.prompted = True
            self.title = title_of(data)
        self.updated_at = stamp

    def add_all(self, events: Iterable[SessionEvent]) -> InfoBuilder:
        """Fold every event in; return self."""
        for event in events:
            self.add(event.type, event.time, event.data)
        return self

    def info(self) -> SessionInfo:
        """The :class:`SessionInfo`."""
        return SessionInfo(
            session_id=self.header.session_id,
            created_at=self.header.created_at,
            updated_at=self.updated_at,
            turns=self.turns,
            title=self.title,
        )
