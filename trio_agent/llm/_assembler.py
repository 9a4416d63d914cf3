"""The one fold from stream chunks to an assistant :class:`Message`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import final

from ..ids import CallId, MessageId, new_message_id
from ._types import (
    BlockEnd,
    BlockKind,
    BlockStart,
    ContentBlock,
    Finish,
    Message,
    MessageSource,
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

__all__ = ["BlockAssembler"]

_DEFAULT_FINISH = Finish("stop")


@final
class _Block:
    __slots__ = ("call_id", "done", "final", "kind", "name", "parts")

    def __init__(self, kind: BlockKind) -> None:
        self.kind: BlockKind = kind
        self.parts: list[str] = []
        self.call_id = ""
        self.name = ""
        self.done = False
        #: The authoritative block from the first BlockEnd, if one arrived.
        self.final: ContentBlock | None = None

    def build(self, index: int) -> ContentBlock | None:
        final = self.final
        if final is not None:
            if isinstance(final, TextBlock | ReasoningBlock) and not final.text:
                return None
            return final
        text = "".join(self.parts)
        if self.kind == "tool-call":
            return ToolCallBlock(CallId(self.call_id or f"call-{index}"), self.name, text)
        if not text:
            return None
        return TextBlock(text) if self.kind == "text" else ReasoningBlock(text)


def _kind_of(block: ContentBlock) -> BlockKind:
    if isinstance(block, ToolCallBlock):
        return "tool-call"
    if isinstance(block, ReasoningBlock):
        return "reasoning"
    return "text"


@final
class BlockAssembler:
    """Fold a stream of :data:`StreamChunk` s into one assistant :class:`Message`.

    The fold is forgiving, because adapters differ in what they send:

    * a block may arrive without :class:`BlockStart` (its first delta opens it) or without
      :class:`BlockEnd` (its deltas are joined); a duplicate start is ignored, and so is a delta
      whose kind does not match its block;
    * the first :class:`BlockEnd` of an index wins and is authoritative: its block replaces
      whatever the deltas said, and later deltas or ends for that index are ignored;
    * a tool call without an id becomes ``call-<index>``, without a name ``""``;
    * text and reasoning blocks that end up empty are left out of the message;
    * blocks appear in index order; usage is the latest :class:`UsageChunk`; everything after
      the first :class:`Finish` is ignored, and a stream without one finishes ``"stop"``;
    * on a ``max-tokens`` finish every tool-call block is dropped: the model was cut off, so
      its calls cannot be trusted.

    Raises:
        TypeError: :meth:`feed` got something that is not a stream chunk.
    """

    __slots__ = ("_blocks", "_finish", "_usage")

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._usage: Usage | None = None
        self._finish: Finish | None = None

    def feed(self, chunk: StreamChunk) -> None:
        """Fold one chunk in."""
        if self._finish is not None:
            return
        if isinstance(chunk, TextDelta):
            block = self._open(chunk.index, "text")
            if not block.done and block.kind == "text":
                block.parts.append(chunk.text)
        elif isinstance(chunk, ReasoningDelta):
            block = self._open(chunk.index, "reasoning")
            if not block.done and block.kind == "reasoning":
                block.parts.append(chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            block = self._open(chunk.index, "tool-call")
            if not block.done and block.kind == "tool-call":
                if chunk.id and not block.call_id:
                    block.call_id = chunk.id
                if chunk.name and not block.name:
                    block.name = chunk.name
                block.parts.append(chunk.arguments_delta)
        elif isinstance(chunk, BlockStart):
            self._open(chunk.index, chunk.kind)
        elif isinstance(chunk, BlockEnd):
            block = self._open(chunk.index, _kind_of(chunk.block))
            if not block.done:
                block.done = True
                block.final = chunk.block
        elif isinstance(chunk, UsageChunk):
            self._usage = chunk.usage
        elif isinstance(chunk, Finish):
            self._finish = chunk
        else:
            raise TypeError(
                f"BlockAssembler.feed() got {type(chunk).__name__}; expected one of the stream "
                "chunk types (BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd, "
                "UsageChunk, Finish)"
            )

    def feed_all(self, chunks: Iterable[StreamChunk]) -> None:
        """Fold every chunk of ``chunks`` in, in order."""
        for chunk in chunks:
            self.feed(chunk)

    def _open(self, index: int, kind: BlockKind) -> _Block:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block(kind)
        return block

    @property
    def usage(self) -> Usage | None:
        """The usage the stream reported, or ``None`` if it reported none."""
        return self._usage

    @property
    def finish(self) -> Finish:
        """The stream's :class:`Finish`; ``Finish("stop")`` while none has arrived."""
        return self._finish or _DEFAULT_FINISH

    @property
    def finished(self) -> bool:
        """Whether a :class:`Finish` has arrived."""
        return self._finish is not None

    def content(self) -> tuple[ContentBlock, ...]:
        """The assembled blocks, in index order (see the class docstring for the rules)."""
        drop_calls = self.finish.reason == "max-tokens"
        out: list[ContentBlock] = []
        for index in sorted(self._blocks):
            block = self._blocks[index].build(index)
            if block is None or (drop_calls and isinstance(block, ToolCallBlock)):
                continue
            out.append(block)
        return tuple(out)

    def message(self, *, id: MessageId | None = None, source: MessageSource = "model") -> Message:
        """The assistant message the chunks so far add up to."""
        return Message(id or new_message_id(), "assistant", self.content(), source)

    def interrupted_message(
        self, *, id: MessageId | None = None, source: MessageSource = "model"
    ) -> Message | None:
        """What the user already saw of a stream that was cut off (cancelled).

        Only text and reasoning blocks with non-blank text are kept; tool calls are dropped
        (a half-streamed call must never run). Returns ``None`` when nothing visible remains.
        """
        out: list[ContentBlock] = []
        for index in sorted(self._blocks):
            block = self._blocks[index].build(index)
            if isinstance(block, TextBlock | ReasoningBlock) and block.text.strip():
                out.append(block)
        if not out:
            return None
        return Message(id or new_message_id(), "assistant", tuple(out), source)
