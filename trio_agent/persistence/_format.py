"""The JSON form of a stored log, shared by every backend.

A header is ``{"format": "trio-agent-session", "version": 1, "session_id", "created_at", "cwd",
"parent_session", "seed_length", "meta"}``; an event is ``{"seq", "type", "time", "data"}``.
Both are written as compact JSON (no NaN/Infinity; UTF-8).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, NewType, NoReturn, get_args

import attrs
import cattrs
from cattrs.errors import AttributeValidationNote, ForbiddenExtraKeysError

from .. import _serde
from .._jsontext import dumps_compact
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
    "session_info",
    "title_of",
]

#: The ``format`` tag of every header this package writes.
FORMAT_TAG = "trio-agent-session"

#: Header versions this build reads.
SUPPORTED_VERSIONS: tuple[int, ...] = (SESSION_FORMAT_VERSION,)

_EVENT_KEYS = frozenset({"seq", "type", "time", "data"})


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON (a log holds lossless JSON only)")


_decoder = json.JSONDecoder(parse_constant=_reject_constant)

#: Parse one JSON document (NaN and Infinity are refused).
decode_json = _decoder.decode
#: Compact JSON text of a lossless-JSON value.
encode_json = dumps_compact


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
    is reported as such even if its header looks different. The shape is structured by the
    project's converter; every problem found is named in one message.

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
    _check_format(obj, where, path)
    try:
        record = _serde.structure(obj, _HeaderRecord)
    except cattrs.ClassValidationError as exc:
        corrupt(_header_problems(exc))
    if record.session_id != str(session_id):
        corrupt(
            f"header names session {record.session_id!r}, but this log is stored as {session_id!r}"
        )
    return SessionHeader(
        session_id=session_id,
        created_at=record.created_at,
        cwd=record.cwd,
        parent_session=None if record.parent_session is None else SessionId(record.parent_session),
        seed_length=record.seed_length,
        meta=record.meta,
        version=record.version,
    )


def _check_format(obj: dict[str, Any], where: str, path: str) -> None:
    """Refuse a header that is not a trio-agent log of a version this build reads."""
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
    if type(version) is int and version in SUPPORTED_VERSIONS:
        return
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


# --- the stored header's shape, structured by the project's converter -----------------------
#
# JSON is stricter than cattrs' defaults (which would turn "1.5" into a float and 1.5 into an
# int), so each field has a checked type of its own. A failed check raises _Mismatch, which
# _header_problems turns into "<field> is <value>, expected <what>".


class _Mismatch(ValueError):
    def __init__(self, found: str, expected: str) -> None:
        super().__init__(f"is {found}, expected {expected}")
        self.found = found
        self.expected = expected


_Epoch = NewType("_Epoch", float)
_Text = NewType("_Text", str)
_StoredId = NewType("_StoredId", str)
_Count = NewType("_Count", int)
_Object = NewType("_Object", dict[str, Any])


def _epoch(value: object, _: object) -> float:
    if _is_number(value):
        return float(value)  # type: ignore[arg-type]
    raise _Mismatch(repr(value), "epoch seconds")


def _text(value: object, _: object) -> str:
    if type(value) is str:
        return value
    raise _Mismatch(repr(value), "a string")


def _stored_id(value: object, _: object) -> str:
    if type(value) is str and SESSION_ID_PATTERN.fullmatch(value):
        return value
    raise _Mismatch(repr(value), "a session id")


def _count(value: object, _: object) -> int:
    if type(value) is int and value >= 0:
        return value
    raise _Mismatch(repr(value), "a count")


def _object(value: object, _: object) -> dict[str, Any]:
    if type(value) is dict:
        return value
    raise _Mismatch(type(value).__name__, "an object")


for _type, _hook in (
    (_Epoch, _epoch),
    (_Text, _text),
    (_StoredId, _stored_id),
    (_Count, _count),
    (_Object, _object),
):
    _serde.converter.register_structure_hook(_type, _hook)


@attrs.frozen
class _HeaderRecord:
    """A header line as stored (``version`` is checked before, by :func:`_check_format`)."""

    format: _Text
    version: _Count
    session_id: _Text
    created_at: _Epoch
    cwd: _Text | None
    parent_session: _StoredId | None
    seed_length: _Count | None
    meta: _Object


attrs.resolve_types(_HeaderRecord)
_NULLABLE = {
    field.name: type(None) in get_args(field.type) for field in attrs.fields(_HeaderRecord)
}


def _header_problems(exc: cattrs.ClassValidationError) -> str:
    """What is wrong with a header, in one sentence: its keys, else the values of its fields."""
    missing: list[str] = []
    extra: list[str] = []
    wrong: list[str] = []
    for error in exc.exceptions:
        name = next(
            (
                n.name
                for n in getattr(error, "__notes__", ())
                if isinstance(n, AttributeValidationNote)
            ),
            None,
        )
        if isinstance(error, ForbiddenExtraKeysError):
            extra.extend(error.extra_fields)
        elif isinstance(error, KeyError) and name is not None:
            missing.append(name)
        elif isinstance(error, _Mismatch) and name is not None:
            nullable = " or null" if _NULLABLE[name] else ""
            wrong.append(f"{name} is {error.found}, expected {error.expected}{nullable}")
        else:
            wrong.append(f"{name or 'the header'}: {error}")
    if missing or extra:
        return f"header keys are wrong (missing: {sorted(missing)}, unexpected: {sorted(extra)})"
    return "; ".join(wrong)


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


def session_info(header: SessionHeader, events: Iterable[SessionEvent]) -> SessionInfo:
    """The :class:`~trio_agent.persistence.SessionInfo` of a log: what a backend's ``infos()``
    reports for it (turns, the title from the first prompt, the time of the last event)."""
    return InfoBuilder(header).add_all(events).info()


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
