"""BlockAssembler: the forgiving fold from chunks to a message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent.ids import CallId
from trio_agent.llm import (
    BlockAssembler,
    BlockEnd,
    BlockKind,
    BlockStart,
    ContentBlock,
    Finish,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
)


def fold(*chunks: StreamChunk) -> BlockAssembler:
    assembler = BlockAssembler()
    assembler.feed_all(chunks)
    return assembler


def test_well_formed_stream() -> None:
    a = fold(
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "hmm"),
        BlockEnd(0, ReasoningBlock("hmm")),
        BlockStart(1, "text"),
        TextDelta(1, "Hel"),
        TextDelta(1, "lo"),
        BlockEnd(1, TextBlock("Hello")),
        BlockStart(2, "tool-call"),
        ToolCallDelta(2, CallId("c1"), "read", '{"a"'),
        ToolCallDelta(2, CallId(""), "", ":1}"),
        UsageChunk(Usage(3, 4)),
        Finish("tool-calls"),
    )
    message = a.message()
    assert message.role == "assistant" and message.source == "model"
    assert message.content == (
        ReasoningBlock("hmm"),
        TextBlock("Hello"),
        ToolCallBlock(CallId("c1"), "read", '{"a":1}'),
    )
    assert a.usage == Usage(3, 4)
    assert a.finish == Finish("tool-calls") and a.finished


def test_missing_starts_and_ends_are_tolerated() -> None:
    a = fold(TextDelta(0, "a"), TextDelta(0, "b"))
    assert a.message().content == (TextBlock("ab"),)
    assert a.finish == Finish("stop") and not a.finished
    assert a.usage is None


def test_duplicate_start_ignored_and_kind_mismatch_ignored() -> None:
    a = fold(
        BlockStart(0, "text"),
        TextDelta(0, "x"),
        BlockStart(0, "reasoning"),
        ReasoningDelta(0, "not mine"),
        TextDelta(0, "y"),
    )
    assert a.message().content == (TextBlock("xy"),)


def test_first_block_end_is_authoritative_and_later_deltas_ignored() -> None:
    a = fold(
        TextDelta(0, "typo"),
        BlockEnd(0, TextBlock("fixed")),
        TextDelta(0, "late"),
        BlockEnd(0, TextBlock("second end")),
    )
    assert a.message().content == (TextBlock("fixed"),)


def test_block_end_without_anything_before_it_creates_the_block() -> None:
    call = ToolCallBlock(CallId("x"), "f", "{}")
    assert fold(BlockEnd(3, call)).message().content == (call,)


def test_tool_call_without_id_or_name() -> None:
    a = fold(ToolCallDelta(4, CallId(""), "", "{}"))
    assert a.message().content == (ToolCallBlock(CallId("call-4"), "", "{}"),)


def test_blocks_come_out_in_index_order() -> None:
    a = fold(TextDelta(2, "c"), TextDelta(0, "a"), ReasoningDelta(1, "b"))
    assert a.message().content == (TextBlock("a"), ReasoningBlock("b"), TextBlock("c"))


def test_empty_text_blocks_are_dropped() -> None:
    a = fold(BlockStart(0, "text"), BlockEnd(1, TextBlock("")), TextDelta(2, "x"))
    assert a.message().content == (TextBlock("x"),)


def test_max_tokens_drops_every_tool_call() -> None:
    a = fold(
        TextDelta(0, "partial"),
        ToolCallDelta(1, CallId("c"), "f", "{"),
        BlockEnd(2, ToolCallBlock(CallId("d"), "g", "{}")),
        Finish("max-tokens"),
    )
    assert a.message().content == (TextBlock("partial"),)


def test_nothing_after_finish_counts() -> None:
    a = fold(
        TextDelta(0, "a"), Finish("stop"), TextDelta(0, "b"), UsageChunk(Usage(1)), Finish("error")
    )
    assert a.message().text == "a"
    assert a.finish == Finish("stop")
    assert a.usage is None


def test_latest_usage_wins() -> None:
    assert fold(UsageChunk(Usage(1)), UsageChunk(Usage(2))).usage == Usage(2)


def test_interrupted_message_keeps_visible_non_blank_text_only() -> None:
    a = fold(
        ReasoningDelta(0, "thinking"),
        TextDelta(1, "  "),
        TextDelta(2, "partial answer"),
        ToolCallDelta(3, CallId("c"), "f", "{"),
    )
    message = a.interrupted_message()
    assert message is not None
    assert message.content == (ReasoningBlock("thinking"), TextBlock("partial answer"))
    assert (
        fold(TextDelta(0, " \n"), ToolCallDelta(1, CallId("c"), "f", "{}")).interrupted_message()
        is None
    )
    assert BlockAssembler().interrupted_message() is None


def test_unknown_chunk_raises() -> None:
    with pytest.raises(TypeError, match=r"BlockAssembler\.feed"):
        BlockAssembler().feed("text")  # type: ignore[arg-type]


def test_message_id_and_source_can_be_given() -> None:
    from trio_agent.ids import MessageId

    message = fold(TextDelta(0, "a")).message(id=MessageId("m1"), source="plugin:x")
    assert message.id == "m1" and message.source == "plugin:x"


# --- property: the fold agrees with a plain model of the rules ------------------------------

KINDS: tuple[BlockKind, ...] = ("text", "reasoning", "tool-call")


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[StreamChunk], dict[int, dict[str, Any]], Finish | None]:
    """Random per-block chunk sequences, randomly interleaved, with the expected outcome."""
    count = draw(st.integers(0, 4))
    queues: list[list[StreamChunk]] = []
    expected: dict[int, dict[str, Any]] = {}
    for index in range(count):
        kind = draw(st.sampled_from(KINDS))
        deltas = draw(st.lists(st.text(max_size=5), max_size=5))
        seq: list[StreamChunk] = []
        if draw(st.booleans()):
            seq.append(BlockStart(index, kind))
        for piece in deltas:
            if kind == "text":
                seq.append(TextDelta(index, piece))
            elif kind == "reasoning":
                seq.append(ReasoningDelta(index, piece))
            else:
                seq.append(ToolCallDelta(index, CallId(f"id{index}"), "tool", piece))
            if draw(st.integers(0, 9)) == 0:
                seq.append(BlockStart(index, kind))  # duplicate start
        end: ContentBlock | None = None
        if draw(st.booleans()):
            end_text = draw(st.text(max_size=5))
            end = (
                TextBlock(end_text)
                if kind == "text"
                else ReasoningBlock(end_text)
                if kind == "reasoning"
                else ToolCallBlock(CallId(f"end{index}"), "tool", end_text)
            )
            at = draw(st.integers(0, len(seq)))
            seq.insert(at, BlockEnd(index, end))
            # deltas after the end must be ignored: only those before it count
            before = seq[:at]
        else:
            before = seq
        joined = "".join(
            c.text if isinstance(c, TextDelta | ReasoningDelta) else c.arguments_delta
            for c in before
            if isinstance(c, TextDelta | ReasoningDelta | ToolCallDelta)
        )
        if seq:  # a block that sent nothing does not exist
            expected[index] = {"kind": kind, "end": end, "joined": joined, "deltas": bool(deltas)}
            queues.append(seq)
    chunks: list[StreamChunk] = []
    while any(queues):
        live = [q for q in queues if q]
        queue = draw(st.sampled_from(live))
        chunks.append(queue.pop(0))
    finish = draw(
        st.none() | st.sampled_from([Finish("stop"), Finish("max-tokens"), Finish("tool-calls")])
    )
    if finish is not None:
        chunks.append(finish)
        chunks.append(TextDelta(0, "after finish"))
    return chunks, expected, finish


@given(streams())
def test_fold_matches_model(
    case: tuple[list[StreamChunk], dict[int, dict[str, Any]], Finish | None],
) -> None:
    chunks, expected, finish = case
    assembler = BlockAssembler()
    assembler.feed_all(chunks)
    want: list[ContentBlock] = []
    for index in sorted(expected):
        e = expected[index]
        kind = e["kind"]
        if e["end"] is not None:
            block: ContentBlock = e["end"]
        elif kind == "text":
            block = TextBlock(e["joined"])
        elif kind == "reasoning":
            block = ReasoningBlock(e["joined"])
        else:
            has_id = e["deltas"]
            block = ToolCallBlock(
                CallId(f"id{index}" if has_id else f"call-{index}"),
                "tool" if has_id else "",
                e["joined"],
            )
        if isinstance(block, TextBlock | ReasoningBlock) and not block.text:
            continue
        if isinstance(block, ToolCallBlock) and finish == Finish("max-tokens"):
            continue
        want.append(block)
    message = assembler.message()
    assert message.content == tuple(want)
    # the text is the concatenated deltas for blocks without an authoritative end
    assert message.text == "".join(b.text for b in want if isinstance(b, TextBlock))
    assert assembler.finish == (finish or Finish("stop"))
    interrupted = assembler.interrupted_message()
    # tool calls never count as visible, so max-tokens does not change the interrupted view
    visible = tuple(b for b in want if isinstance(b, TextBlock | ReasoningBlock) and b.text.strip())
    assert (interrupted.content if interrupted else ()) == visible


@given(st.lists(st.text(max_size=6), max_size=8))
def test_text_equals_concatenated_deltas(pieces: list[str]) -> None:
    assembler = BlockAssembler()
    for piece in pieces:
        assembler.feed(TextDelta(0, piece))
    assert assembler.message().text == "".join(pieces)
