"""The character estimator: tokens guessed from text length, for what no provider reported.

The rule is deliberately simple and documented rather than tokenizer-exact (a tokenizer per
provider would be a dependency per provider, and the estimate only has to tell "far from the
window" from "close to it"): a token is :data:`CHARS_PER_TOKEN` characters, rounded up, plus
:data:`MESSAGE_OVERHEAD_TOKENS` per message for the role and framing, and a flat
:data:`IMAGE_TOKENS` per image.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..llm import (
    ContentBlock,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "estimate_message_tokens",
    "estimate_messages_tokens",
    "estimate_request_tokens",
    "estimate_tokens",
]

#: Characters per token: about right for English prose and code under GPT-style tokenizers.
CHARS_PER_TOKEN = 4
#: Tokens per message for its role and framing.
MESSAGE_OVERHEAD_TOKENS = 4
#: Tokens per image, whatever its size (providers charge by tiles; this is a middle value).
IMAGE_TOKENS = 1_000


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` is estimated to take: ``ceil(len(text) / CHARS_PER_TOKEN)``."""
    return -(-len(text) // CHARS_PER_TOKEN)


def _chars(blocks: Iterable[ContentBlock]) -> tuple[int, int]:
    """(characters, images) in ``blocks``."""
    chars = images = 0
    for block in blocks:
        kind = type(block)
        # exact classes first: a failed isinstance walks the MRO, and this runs every step
        if kind is TextBlock or kind is ReasoningBlock:
            chars += len(block.text)  # type: ignore[union-attr]
        elif isinstance(block, TextBlock) or isinstance(block, ReasoningBlock):  # noqa: SIM101
            chars += len(block.text)
        elif isinstance(block, ToolResultBlock):
            inner, inner_images = _chars(block.content)
            chars += len(block.tool_call_id) + inner
            images += inner_images
        elif isinstance(block, ToolCallBlock):
            chars += len(block.id) + len(block.name) + len(block.arguments)
        elif isinstance(block, ImageBlock):
            images += 1
    return chars, images


def estimate_message_tokens(message: Message) -> int:
    """Tokens one message is estimated to take (text, reasoning, tool calls and results)."""
    chars, images = _chars(message.content)
    return MESSAGE_OVERHEAD_TOKENS + -(-chars // CHARS_PER_TOKEN) + images * IMAGE_TOKENS


def estimate_messages_tokens(messages: Iterable[Message]) -> int:
    """The sum of :func:`estimate_message_tokens` over ``messages``."""
    total = 0
    for message in messages:
        total += estimate_message_tokens(message)
    return total


def estimate_request_tokens(
    system: str | None,
    tools: Iterable[ToolSchema] = (),
    messages: Iterable[Message] = (),
) -> int:
    """Tokens a whole request is estimated to take: system prompt, tool schemas (as JSON) and
    messages."""
    total = 0 if system is None else MESSAGE_OVERHEAD_TOKENS + estimate_tokens(system)
    for tool in tools:
        schema = json.dumps(dict(tool.parameters), separators=(",", ":"), default=str)
        total += estimate_tokens(tool.name) + estimate_tokens(tool.description)
        total += estimate_tokens(schema)
    return total + estimate_messages_tokens(messages)
