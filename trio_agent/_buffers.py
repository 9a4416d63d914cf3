"""Buffers of long-lived objects that are the shared empty tuple while empty (package-internal).

An empty list is an object the garbage collector tracks: an idle agent held several (its
inbox's buffers, its fiber's pending spawns and provided services), each scanned by every full
collection of a process with 10,000 agents (#17's memory per agent). A buffer typed
``Sequence[T]`` starts as ``()`` and becomes a list on its first item; only its owner writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["appended"]

T = TypeVar("T")


def appended(buffer: Sequence[T], item: T) -> list[T]:
    """``buffer`` with ``item`` at its end: the buffer itself once it is a list."""
    if isinstance(buffer, list):
        buffer.append(item)
        return buffer
    return [*buffer, item]
