"""SseParser: strict event-stream framing, incremental and split-invariant."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trio_agent.llm import SseEvent, SseParser


def parse(*pieces: bytes) -> list[SseEvent]:
    parser = SseParser()
    events: list[SseEvent] = []
    for piece in pieces:
        events.extend(parser.feed(piece))
    events.extend(parser.close())
    return events


def test_events_dispatch_at_blank_lines() -> None:
    assert parse(b"data: a\n\ndata: b\n\n") == [SseEvent("a"), SseEvent("b")]
    assert parse(b"data: a\n") == []  # no blank line, no event


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert parse(b"data: one\ndata: two\ndata:three\n\n") == [SseEvent("one\ntwo\nthree")]


def test_comments_and_unknown_fields_are_ignored() -> None:
    assert parse(b": keep-alive\nretry: 10\nfoo: bar\ndata: x\n\n:\n\n") == [SseEvent("x")]


def test_event_and_id_fields() -> None:
    assert parse(b"event: ping\nid: 7\ndata: x\n\ndata: y\n\n") == [
        SseEvent("x", "ping", "7"),
        SseEvent("y", "message", "7"),
    ]


def test_only_one_leading_space_is_stripped() -> None:
    assert parse(b"data:  two spaces\n\ndata\n\n") == [SseEvent(" two spaces"), SseEvent("")]


def test_line_endings_crlf_cr_lf_even_split() -> None:
    assert parse(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        SseEvent("a"),
        SseEvent("b"),
        SseEvent("c"),
    ]
    assert parse(b"data: a\r", b"\n\r", b"\n") == [SseEvent("a")]
    assert parse(b"data: a\n\r") == [SseEvent("a")]


def test_bom_and_split_utf8() -> None:
    body = "\ufeffdata: héllo ✓\n\n".encode()
    assert parse(*[body[i : i + 1] for i in range(len(body))]) == [SseEvent("héllo ✓")]


def test_invalid_utf8_is_replaced() -> None:
    assert parse(b"data: \xff\n\n") == [SseEvent("\ufffd")]


events_st = st.lists(
    st.tuples(
        st.lists(
            st.text(
                st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]), max_size=8
            ),
            min_size=1,
            max_size=3,
        ),
        st.booleans(),
    ),
    max_size=5,
)


@given(events_st, st.sampled_from(["\n", "\r\n", "\r"]), st.data())
def test_any_split_gives_the_same_events(
    spec: list[tuple[list[str], bool]], newline: str, data: st.DataObject
) -> None:
    text = ""
    for lines, comment in spec:
        if comment:
            text += f": comment{newline}"
        text += "".join(f"data: {line}{newline}" for line in lines) + newline
    body = text.encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    expected = [SseEvent("\n".join(lines)) for lines, _ in spec]
    assert parse(*pieces) == expected
    assert parse(body) == expected


def _reference(text: str) -> list[SseEvent]:
    """The event-stream rules for LF-only text, line by line, written out plainly."""
    events: list[SseEvent] = []
    data: list[str] = []
    event = ""
    last_id: str | None = None
    for line in text.split("\n")[:-1]:
        if not line:
            if data:
                events.append(SseEvent("\n".join(data), event or "message", last_id))
            data, event = [], ""
            continue
        if line.startswith(":"):
            continue
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value
        elif field == "id" and "\0" not in value:
            last_id = value
    return events


_LINES = st.sampled_from(
    ["data: a", "data:b", "data:  c", "data", "data: ", "event: e", "event:", "id: 7", "id:",
     ": note", "retry: 5", "", "", "data: {\"x\": 1}", "other: z"]
)  # fmt: skip


@given(st.lists(_LINES, max_size=24), st.data())
def test_lf_streams_match_the_rules_line_by_line(lines: list[str], data: st.DataObject) -> None:
    # The LF-only path dispatches whole one-line data events without the line-by-line pass;
    # whatever mix of fields, blank lines and feed boundaries, it must agree with the rules.
    body = "".join(f"{line}\n" for line in lines).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    expected = _reference(body.decode())
    assert parse(*pieces) == expected
    assert parse(body) == expected


def test_fields_from_an_earlier_feed_belong_to_the_event_they_started() -> None:
    assert parse(b"event: e\n", b"data: a\n\n") == [SseEvent("a", "e")]
    assert parse(b"data: a\n", b"data: b\n\n") == [SseEvent("a\nb")]
    assert parse(b"id: 3\n", b"data: a\n\ndata: b\n\n") == [
        SseEvent("a", id="3"),
        SseEvent("b", id="3"),
    ]
    assert parse(b"data: a\n", b"\ndata: b\n\n") == [SseEvent("a"), SseEvent("b")]
