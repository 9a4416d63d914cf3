"""The text a summary call reads: a stretch of history rendered as a plain transcript.

A transcript rather than the messages themselves, so the summary call needs no tool schemas and
cannot be refused for a tool call the provider does not know, and so a huge tool output costs
the summariser at most :data:`RESULT_CHARS` characters.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..llm import ImageBlock, Message, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from ..session import COMPACTION_SOURCE

__all__ = ["RESULT_CHARS", "render_transcript"]

#: At most this many characters of one tool result (or tool-call arguments) reach the summariser.
RESULT_CHARS = 4_000

_SPEAKERS = {"steering": "User (while the agent worked)", "context": "Context"}


def _cut(text: str) -> str:
    if len(text) <= RESULT_CHARS:
        return text
    return f"{text[:RESULT_CHARS]}\n[... {len(text) - RESULT_CHARS} more characters omitted]"


def _render(message: Message) -> list[str]:
    if message.source == COMPACTION_SOURCE:
        return [f"Summary of the conversation before this point:\n{message.text}"]
    lines: list[str] = []
    speaker = "Assistant" if message.role == "assistant" else _SPEAKERS.get(message.source, "User")
    for block in message.content:
        if isinstance(block, TextBlock):
            if block.text:
                lines.append(f"{speaker}: {block.text}")
        elif isinstance(block, ToolCallBlock):
            lines.append(f"Assistant called tool {block.name} with {_cut(block.arguments)}")
        elif isinstance(block, ToolResultBlock):
            parts = [
                b.text if isinstance(b, TextBlock) else "[image]"
                for b in block.content
                if isinstance(b, TextBlock | ImageBlock)
            ]
            status = "error" if block.is_error else "result"
            lines.append(f"Tool {status}: {_cut(''.join(parts))}")
        elif isinstance(block, ImageBlock):
            lines.append(f"{speaker}: [image]")
        elif isinstance(block, ReasoningBlock):
            continue  # the model's private reasoning is not part of what happened
    return lines


def render_transcript(messages: Iterable[Message]) -> str:
    """``messages`` as a transcript: one paragraph per utterance, tool call and result."""
    return "\n\n".join(line for message in messages for line in _render(message))
