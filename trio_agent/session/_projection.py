"""The model history projected from a session log.

The history is folded event by event (:class:`Projection`). ``compaction/summary`` and
``compaction/prune`` events rewrite the *projection*, never the log: a summary replaces the
messages of its range with one message, a prune stubs the tool results of its range. Each costs
one pass over the history when it is logged; every other event costs O(1).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, final, overload

from ..ids import CallId, MessageId
from ..llm import (
    FrozenMessages,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from ._errors import CompactionRangeError
from ._events import (
    AssistantMessageEvent,
    CompactionPrune,
    CompactionSummary,
    ContextMessageEvent,
    SessionEvent,
    SteeringMessageEvent,
    ToolResultEvent,
    UserMessageEvent,
)

__all__ = [
    "COMPACTION_SOURCE",
    "MessageHistory",
    "Projection",
    "message_of",
    "project_messages",
    "summary_message_id",
    "tool_result_message_id",
    "would_prune",
]

#: The ``source`` of the message a ``compaction/summary`` puts in the history.
COMPACTION_SOURCE = "plugin:compaction"


def tool_result_message_id(seq: int) -> MessageId:
    """The id of the tool-result message derived from the ``tool/result`` event at ``seq``.

    Deterministic, so a fork, a resumed session and a from-scratch projection all agree.
    """
    return MessageId(f"tool-result-{seq}")


def summary_message_id(seq: int) -> MessageId:
    """The id of the summary message derived from the ``compaction/summary`` event at ``seq``."""
    return MessageId(f"compaction-summary-{seq}")


def _is_empty(message: Message) -> bool:
    for block in message.content:
        if type(block) is TextBlock or type(block) is ReasoningBlock:
            if block.text:
                return False
        else:
            return False
    return True


def _user(event: SessionEvent) -> Message | None:
    return event.payload_as(UserMessageEvent).message


def _context(event: SessionEvent) -> Message | None:
    return event.payload_as(ContextMessageEvent).message


def _steering(event: SessionEvent) -> Message | None:
    return event.payload_as(SteeringMessageEvent).message


def _assistant(event: SessionEvent) -> Message | None:
    message = event.payload_as(AssistantMessageEvent).message
    return None if _is_empty(message) else message


def _tool_result(event: SessionEvent) -> Message | None:
    payload = event.payload_as(ToolResultEvent)
    # Seed 002: the logged call_id is authoritative, never result.call_id.
    return Message.tool_result(
        payload.call_id,
        payload.result.content,
        is_error=payload.result.is_error,
        id=tool_result_message_id(event.seq),
    )


_PROJECTORS: dict[str, Callable[[SessionEvent], Message | None]] = {
    "user/message": _user,
    "context/message": _context,
    "steering/message": _steering,
    "assistant/message": _assistant,
    "tool/result": _tool_result,
}

#: Event types that can contribute a message to the model history.
SURFACE_TYPES = frozenset(_PROJECTORS)


def message_of(event: SessionEvent) -> Message | None:
    """The model-history message ``event`` contributes, or ``None``.

    ``user/message``, ``context/message`` and ``steering/message`` contribute their message;
    ``assistant/message`` its message unless it is empty (no blocks, or only empty text and
    reasoning); ``tool/result`` a tool-result message answering the logged ``call_id``. Every
    other event contributes nothing on its own (``compaction/*`` events change what earlier
    events contribute, which only :func:`project_messages` and the session can tell).
    """
    projector = _PROJECTORS.get(event.type)
    return None if projector is None else projector(event)


def project_messages(events: Iterable[SessionEvent]) -> tuple[Message, ...]:
    """Project the model history from ``events`` from scratch, compaction included.

    :meth:`Session.derive_messages` gives the same result incrementally; use this on logs that
    are not live sessions (a loaded file, a slice of events).

    Raises:
        CompactionRangeError: a compaction event has a range the log cannot honour (a session
            would have refused to log it).
    """
    projection = Projection()
    for event in events:
        projection.feed(event)
    return projection.history().as_tuple()


def would_prune(message: Message, stub: str) -> bool:
    """Whether a ``compaction/prune`` with ``stub`` replaces ``message``: a tool-result message
    holding an image or more text than ``stub``."""
    if len(message.content) != 1:
        return False
    block = message.content[0]
    if type(block) is not ToolResultBlock:
        return False
    size = 0
    for part in block.content:
        if type(part) is ImageBlock:
            return True
        if type(part) is TextBlock:
            size += len(part.text)
    return size > len(stub)


@final
class Projection:
    """The model history of one log, folded event by event (package-internal).

    Per message it keeps the seq range it stands for (one seq, or a summary's range) and how
    many tool call/result pairs the cut just before it would split, so a compaction range is
    checked in O(log n) and applied in one pass. Later appends never show through a
    :class:`MessageHistory` taken earlier: a compaction builds new lists.
    """

    __slots__ = ("_crossing", "_first", "_history", "_last", "_messages", "_pending")

    def __init__(self) -> None:
        self._messages: list[Message] = []
        #: The lowest and highest seq each message stands for (equal, except for a summary).
        self._first: list[int] = []
        self._last: list[int] = []
        #: ``_crossing[i]``: call/result pairs with the call before message ``i`` and the result
        #: at or after it (a cut there would orphan them).
        self._crossing: list[int] = []
        #: Call id → positions of calls with that id still waiting for their result.
        self._pending: dict[CallId, list[int]] = {}
        self._history: MessageHistory | None = None

    def history(self) -> MessageHistory:
        """The current history as an immutable O(1) snapshot."""
        history = self._history
        if history is None:
            history = self._history = MessageHistory(self._messages, len(self._messages))
        return history

    def index_after(self, seq: int) -> int:
        """How many history messages stand for events at or before ``seq``."""
        first = self._first
        # The usual question is about the last few messages (usage: "what came after the
        # latest answer"): look back a few before bisecting a list as long as the history.
        index = len(first)
        stop = max(index - 4, 0)
        while index > stop:
            if first[index - 1] <= seq:
                return index
            index -= 1
        return bisect.bisect_right(first, seq, 0, index)

    def feed(self, event: SessionEvent) -> None:
        """Fold ``event`` in.

        Raises:
            CompactionRangeError: a compaction event's range cannot be honoured; nothing changed.
        """
        kind = event.type
        projector = _PROJECTORS.get(kind)
        if projector is not None:
            message = projector(event)
            if message is not None:
                self._add(message, event.seq)
        elif kind == "compaction/summary":
            self._summarise(event.seq, event.payload_as(CompactionSummary))
        elif kind == "compaction/prune":
            self._prune(event.seq, event.payload_as(CompactionPrune))

    def _add(self, message: Message, seq: int) -> None:
        position = len(self._messages)
        self._messages.append(message)
        self._first.append(seq)
        self._last.append(seq)
        self._crossing.append(0)
        self._history = None
        pending = self._pending
        for block in message.content:
            if type(block) is ToolCallBlock:
                pending.setdefault(block.id, []).append(position)
            elif type(block) is ToolResultBlock:
                waiting = pending.get(block.tool_call_id)
                if waiting:
                    call = waiting.pop(0)
                    if not waiting:
                        del pending[block.tool_call_id]
                    crossing = self._crossing
                    for cut in range(call + 1, position + 1):
                        crossing[cut] += 1

    def _summarise(self, seq: int, payload: CompactionSummary) -> None:
        first, last = payload.first_seq, payload.last_seq
        start, stop = self._check(seq, "compaction/summary", first, last)
        message = Message(
            summary_message_id(seq), "user", (TextBlock(payload.summary),), COMPACTION_SOURCE
        )
        self._messages = [*self._messages[:start], message, *self._messages[stop:]]
        self._first = [*self._first[:start], first, *self._first[stop:]]
        self._last = [*self._last[:start], last, *self._last[stop:]]
        self._crossing = [*self._crossing[:start], 0, *self._crossing[stop:]]
        shift = stop - start - 1
        if shift:
            for positions in self._pending.values():
                positions[:] = [p - shift for p in positions]
        self._history = None

    def _check(self, seq: int, kind: str, first: int, last: int) -> tuple[int, int]:
        """Positions ``[start, stop)`` of the messages ``first..last`` covers, or raise."""
        where = f"{kind} at seq {seq} (range {first}..{last})"
        if last >= seq:
            raise CompactionRangeError(
                f"{where}: the range reaches the event itself; it must end before seq {seq}"
            )
        count = len(self._messages)
        start = bisect.bisect_left(self._last, first)
        stop = bisect.bisect_right(self._first, last)
        if start < count and self._first[start] < first:
            raise CompactionRangeError(
                f"{where}: first_seq falls inside the message standing for seqs "
                f"{self._first[start]}..{self._last[start]}; start at {self._first[start]} or "
                f"after {self._last[start]}"
            )
        if stop > start and self._last[stop - 1] > last:
            raise CompactionRangeError(
                f"{where}: last_seq falls inside the message standing for seqs "
                f"{self._first[stop - 1]}..{self._last[stop - 1]}; end at "
                f"{self._last[stop - 1]} or before {self._first[stop - 1]}"
            )
        for cut, side in ((start, "first_seq"), (stop, "last_seq")):
            if cut < count and self._crossing[cut]:
                raise CompactionRangeError(
                    f"{where}: the {side} boundary separates a tool call from its result; "
                    "compact whole closed turns"
                )
        for call_id, positions in self._pending.items():
            if positions[0] < stop:
                raise CompactionRangeError(
                    f"{where}: tool call {call_id!r} at or before the range has no result yet; "
                    "compact only closed turns"
                )
        return start, stop

    def _prune(self, seq: int, payload: CompactionPrune) -> None:
        first, last = payload.first_seq, payload.last_seq
        if last >= seq:
            raise CompactionRangeError(
                f"compaction/prune at seq {seq} (range {first}..{last}): the range reaches the "
                f"event itself; it must end before seq {seq}"
            )
        stub = payload.stub
        start = bisect.bisect_left(self._first, first)
        stop = bisect.bisect_right(self._first, last)
        messages: list[Message] | None = None
        for position in range(start, stop):
            message = self._messages[position]
            if not would_prune(message, stub):
                continue
            block = message.content[0]
            assert type(block) is ToolResultBlock
            if messages is None:
                messages = list(self._messages)
            messages[position] = Message.tool_result(
                block.tool_call_id, (TextBlock(stub),), is_error=block.is_error, id=message.id
            )
        if messages is not None:
            self._messages = messages
            self._history = None


@final
class MessageHistory(FrozenMessages):
    """An immutable snapshot of a session's model history, made in O(1).

    It is a read-only window of fixed length onto the session's append-only message list, so
    taking one costs nothing however long the history is, and later appends never show through.
    It behaves like a tuple: indexing and slicing (a slice is a ``tuple``), iteration, ``len``,
    ``==`` with tuples and other histories, hashing, and ``+`` with a tuple, which gives a
    ``tuple`` (``prefix + history``). :meth:`as_tuple` returns (and caches) a real tuple.
    """

    __slots__ = ("_hash", "_items", "_len", "_tuple")

    def __init__(self, items: list[Message], length: int) -> None:
        # Invariant: ``items`` is only ever appended to, so items[:length] never changes.
        self._items = items
        self._len = length
        self._tuple: tuple[Message, ...] | None = None
        self._hash: int | None = None

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...

    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if step > 0:
                return tuple(self._items[start:stop:step])
            return tuple(self._items[i] for i in range(start, stop, step))
        n = self._len
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("MessageHistory index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        return itertools.islice(self._items, self._len)

    def __reversed__(self) -> Iterator[Message]:
        items = self._items
        return (items[i] for i in range(self._len - 1, -1, -1))

    def as_tuple(self) -> tuple[Message, ...]:
        """This history as a tuple (O(n) the first time, cached)."""
        if self._tuple is None:
            self._tuple = tuple(self)
        return self._tuple

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MessageHistory):
            if other._items is self._items:
                return other._len == self._len
            return other._len == self._len and all(a == b for a, b in zip(self, other, strict=True))
        if isinstance(other, tuple):
            return len(other) == self._len and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self.as_tuple())
        return self._hash

    def __add__(self, other: Sequence[Message]) -> tuple[Message, ...]:
        if not isinstance(other, (tuple, MessageHistory)):
            return NotImplemented
        return (*self, *other)

    def __radd__(self, other: Sequence[Message]) -> tuple[Message, ...]:
        if not isinstance(other, (tuple, MessageHistory)):
            return NotImplemented
        return (*other, *self)

    def __repr__(self) -> str:
        return f"MessageHistory({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (MessageHistory, (list(self), self._len))
