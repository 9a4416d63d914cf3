"""Tool-call ids the loop can trust: unique within one assistant message (package-internal).

The ids are the model's strings. A model (or an ``agent/step-result`` listener) can repeat one or
leave it empty, and then a ``tool/result`` cannot say which call it answers and providers reject
the next request. So before ``assistant/message`` is logged the loop rewrites them: the first
use of an id keeps it, later repeats become ``<id>~2``, ``<id>~3``, ..., an empty id becomes
``call_<turn>_<step>_<index>`` (``index``: the call's position among the message's tool calls,
from 0), and a rewritten id never takes an id another call of the message already has.
"""

from __future__ import annotations

import attrs

from ..ids import CallId
from ..llm import Message, ToolCallBlock

__all__ = ["unique_call_ids"]


def unique_call_ids(message: Message, *, turn: int, step: int) -> Message:
    """``message`` with every tool-call id unique and non-empty (``message`` itself if they are)."""
    calls = [block for block in message.content if isinstance(block, ToolCallBlock)]
    ids = [call.id for call in calls]
    if "" not in ids and len(set(ids)) == len(ids):
        return message
    # Every id's first use keeps it, whatever comes before it.
    taken: set[str] = set()
    keeps: set[int] = set()
    for position, call_id in enumerate(ids):
        if call_id and call_id not in taken:
            taken.add(call_id)
            keeps.add(position)
    renamed: dict[int, CallId] = {}
    # Next suffix to try per base, so a message with many repeats stays linear.
    suffixes: dict[str, int] = {}
    for position, call_id in enumerate(ids):
        if position in keeps:
            continue
        base = call_id or f"call_{turn}_{step}_{position}"
        candidate = base
        while candidate in taken:
            n = suffixes.get(base, 2)
            suffixes[base] = n + 1
            candidate = f"{base}~{n}"
        taken.add(candidate)
        renamed[position] = CallId(candidate)
    content = []
    position = 0
    for block in message.content:
        if isinstance(block, ToolCallBlock):
            if position in renamed:
                block = attrs.evolve(block, id=renamed[position])
            position += 1
        content.append(block)
    return attrs.evolve(message, content=tuple(content))
