"""OpenTelemetry GenAI semantic-convention names, and the JSON forms of captured content.

The names follow the GenAI conventions (status *Development*): operations ``invoke_agent``,
``chat`` and ``execute_tool``; ``gen_ai.provider.name`` (not the older ``gen_ai.system``);
``gen_ai.usage.input_tokens`` counting all input, cached included. Attributes the conventions
have no name for are ``trio_agent.*``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..llm import (
    FinishReason,
    ImageBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
)

__all__ = [
    "AGENT_ID",
    "AGENT_NAME",
    "CONVERSATION_ID",
    "ERROR_TYPE",
    "FINISH_REASONS",
    "INPUT_MESSAGES",
    "OPERATION",
    "OUTPUT_MESSAGES",
    "PROVIDER",
    "REQUEST_MAX_TOKENS",
    "REQUEST_MODEL",
    "REQUEST_STOP",
    "REQUEST_TEMPERATURE",
    "RESPONSE_FINISH_REASONS",
    "SYSTEM_INSTRUCTIONS",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_DEFINITIONS",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "TOOL_TYPE",
    "TURN",
    "TURN_END_REASON",
    "USAGE_CACHE_CREATION",
    "USAGE_CACHE_READ",
    "USAGE_INPUT",
    "USAGE_OUTPUT",
    "USAGE_REASONING",
    "input_messages",
    "output_messages",
    "system_instructions",
    "tool_definitions",
]

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_STOP = "gen_ai.request.stop_sequences"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
USAGE_INPUT = "gen_ai.usage.input_tokens"
USAGE_OUTPUT = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
ERROR_TYPE = "error.type"
# Opt-in content (``capture_content: true``).
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
# Ours.
TURN = "trio_agent.turn"
TURN_END_REASON = "trio_agent.turn.end_reason"

#: trio-agent finish reasons → the values the conventions use (OpenAI's vocabulary).
FINISH_REASONS: dict[FinishReason, str] = {
    "stop": "stop",
    "tool-calls": "tool_calls",
    "max-tokens": "length",
    "aborted": "aborted",
    "error": "error",
}


def _parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ReasoningBlock):
            parts.append({"type": "reasoning", "content": block.text})
        elif isinstance(block, ToolCallBlock):
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
        elif isinstance(block, ToolResultBlock):
            text = "".join(b.text for b in block.content if isinstance(b, TextBlock))
            parts.append({"type": "tool_call_response", "id": block.tool_call_id, "response": text})
        elif isinstance(block, ImageBlock):
            parts.append({"type": "blob", "modality": "image", "mime_type": block.media_type})
    return parts


def _role(message: Message) -> str:
    if message.content and isinstance(message.content[0], ToolResultBlock):
        return "tool"
    return message.role


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def input_messages(messages: Iterable[Message]) -> str:
    """``gen_ai.input.messages``: the request's messages as convention JSON."""
    return _dump([{"role": _role(m), "parts": _parts(m)} for m in messages])


def output_messages(message: Message, finish: FinishReason) -> str:
    """``gen_ai.output.messages``: the answer as convention JSON."""
    return _dump(
        [{"role": "assistant", "parts": _parts(message), "finish_reason": FINISH_REASONS[finish]}]
    )


def system_instructions(system: str) -> str:
    """``gen_ai.system_instructions``: the system prompt as convention JSON."""
    return _dump([{"type": "text", "content": system}])


def tool_definitions(tools: Sequence[ToolSchema]) -> str:
    """``gen_ai.tool.definitions``: the request's tools as convention JSON."""
    return _dump(
        [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
            }
            for t in tools
        ]
    )
