"""A strict, incremental (sans-IO) parser for ``text/event-stream`` bodies."""

from __future__ import annotations

import codecs
import re
from typing import final

__all__ = ["SseEvent", "SseParser"]

_LINE_END = re.compile(r"\r\n|\r|\n")


@final
class SseEvent:
    """One dispatched server-sent event."""

    __slots__ = ("data", "event", "id")

    def __init__(self, data: str, event: str = "message", id: str | None = None) -> None:
        self.data = data
        self.event = event
        self.id = id

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SseEvent):
            return NotImplemented
        return (self.data, self.event, self.id) == (other.data, other.event, other.id)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SseEvent(data={self.data!r}, event={self.event!r}, id={self.id!r})"


@final
class SseParser:
    """Feed bytes as they arrive; get back the events completed so far.

    Follows the WHATWG event-stream rules: UTF-8 (a leading BOM is dropped, invalid bytes
    become U+FFFD), lines end with CRLF, LF or CR (also when split across feeds), ``:``
    starts a comment, ``data`` lines of one event are joined with ``\\n``, and an event is
    dispatched only at a blank line - so a stream that ends mid-event yields nothing for it.
    """

    __slots__ = ("_buffer", "_data", "_decoder", "_event", "_id", "_started")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._started = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, data: bytes) -> list[SseEvent]:
        """Parse ``data`` (any slice of the body); return the events it completed."""
        text = self._decoder.decode(data)
        if not self._started and text:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        buffer = self._buffer + text
        events: list[SseEvent] = []
        if "\r" not in buffer:
            self._feed_lf(buffer, events)
            return events
        # A trailing CR may be the first half of a CRLF split across feeds: keep it back.
        hold = buffer.endswith("\r")
        if hold:
            buffer = buffer[:-1]
        lines = _LINE_END.split(buffer)
        rest = lines.pop()
        self._buffer = rest + "\r" if hold else rest
        for line in lines:
            self._line(line, events)
        return events

    def _feed_lf(self, buffer: str, events: list[SseEvent]) -> None:
        """:meth:`feed` for text whose lines all end with LF (``buffer`` starts a line).

        Every ``\n\n`` ends an event: the lines before it, then a blank line. An event that
        is one ``data: `` line, with no field of it seen before, is dispatched without the
        line-by-line pass (#17: the common event of every model API)."""
        blocks = buffer.split("\n\n")
        last = blocks.pop()
        line = self._line
        for block in blocks:
            if not self._data and not self._event and block[:6] == "data: " and "\n" not in block:
                events.append(SseEvent(block[6:], "message", self._id))
                continue
            for part in block.split("\n"):
                line(part, events)
            line("", events)
        lines = last.split("\n")
        self._buffer = lines.pop()
        for part in lines:
            line(part, events)

    def close(self) -> list[SseEvent]:
        """End of body: flush a last line; an event without its blank line is dropped."""
        text = self._decoder.decode(b"", final=True)
        buffer = self._buffer + text
        self._buffer = ""
        events: list[SseEvent] = []
        for line in _LINE_END.split(buffer)[:-1]:
            self._line(line, events)
        return events

    def _line(self, line: str, events: list[SseEvent]) -> None:
        if not line:
            if self._data:
                events.append(SseEvent("\n".join(self._data), self._event or "message", self._id))
            self._data = []
            self._event = ""
            return
        if line[0] == ":":
            return
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
