"""The model history projected from a session log."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, final, overload

from ..ids import MessageId
from ..llm import FrozenMessages, Message, ReasoningBlock, TextBlock
from ._events import (
    AssistantMessageEvent,
    ContextMessageEvent,
    SessionEvent,
    SteeringMessageEvent,
    ToolResultEvent,
    UserMessageEvent,
)

__all__ = ["MessageHistory", "message_of", "project_messages", "tool_result_message_id"]


def tool_result_message_id(seq: int) -> MessageId:
    """The id of the tool-result message derived from the ``tool/result`` event at ``seq``.

    Deterministic, so a fork, a resumed session and a from-scratch projection all agree.
    """
    return MessageId(f"tool-result-{seq}")


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
    other event contributes nothing.
    """
    projector = _PROJECTORS.get(event.type)
    return None if projector is None else projector(event)


def project_messages(events: Iterable[SessionEvent]) -> tuple[Message, ...]:
    """Project the model history from ``events`` from scratch (see :func:`message_of`).

    :meth:`Session.derive_messages` gives the same result incrementally; use this on logs that
    are not live sessions (a loaded file, a slice of events).
    """
    out: list[Message] = []
    for event in events:
        projector = _PROJECTORS.get(event.type)
        if projector is not None:
            message = projector(event)
            if message is not None:
                out.append(message)
    return tuple(out)


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
