"""Snapshots of the loop's own payloads, built directly (``Session.append``'s hot path).

Each encoder returns exactly what ``snapshot_json(_serde.unstructure(payload), "data")``
returns (same keys in the same order; tests pin it), checking the library's own values in
place instead of unstructuring with cattrs and then copying the result again. Anything unusual
(another block kind, a ``str`` subclass, a lone surrogate, a non-``int`` counter, an error)
returns ``None``: the generic path then logs it or reports the problem. Every class here but
those in :data:`UNSHARED` is frozen with nothing mutable inside, so the caller's payload can be
kept as the typed payload.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..llm import (
    BlockEnd,
    BlockStart,
    Finish,
    LlmCallConfig,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResult,
    ToolSchema,
    Usage,
    UsageChunk,
)
from ._errors import JsonValueError
from ._events import (
    AssistantChunk,
    AssistantMessageEvent,
    RequestHeader,
    StepEnd,
    StepStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from ._json import snapshot_json

__all__ = ["FAST_ENCODERS", "UNSHARED", "encode_chunk"]

_Snapshot = dict[str, Any]


def _plain_str(*values: object) -> bool:
    """Every value is an exact ``str`` that is valid Unicode (what ``snapshot_json`` accepts).

    One call checks a block's or an event's strings together, and the hottest sites test
    ``type(text) is str and text.isascii()`` in place first: a Python call is most of what
    checking a short string costs (#17)."""
    for value in values:
        if type(value) is not str:
            return False
        if value.isascii():
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def _counters(data: TurnStart | StepStart | StepEnd) -> _Snapshot | None:
    """``turn/start``, ``step/start``, ``step/end``."""
    turn = data.turn
    if type(turn) is not int:
        return None
    if type(data) is TurnStart:
        return {"turn": turn}
    step = data.step  # type: ignore[union-attr]
    if type(step) is not int:
        return None
    return {"turn": turn, "step": step}


def _turn_end(data: TurnEnd) -> _Snapshot | None:
    """A ``turn/end`` without an error."""
    turn = data.turn
    reason = data.reason
    if data.error is not None or type(turn) is not int or not _plain_str(reason):
        return None
    return {"turn": turn, "reason": reason, "error": None}


def _chunk(data: AssistantChunk) -> _Snapshot | None:
    return encode_chunk(data.turn, data.step, data.chunk)


def encode_chunk(turn: int, step: int, chunk: StreamChunk) -> _Snapshot | None:
    """The data of ``assistant/chunk`` ``(turn, step, chunk)``, checked in place, or ``None``
    for a chunk this fast path does not know (the per-chunk hot path)."""
    if type(turn) is not int or type(step) is not int:
        return None
    kind = type(chunk)
    if kind is TextDelta or kind is ReasoningDelta:
        index = chunk.index  # type: ignore[union-attr]
        text = chunk.text  # type: ignore[union-attr]
        if type(index) is not int or not (
            (type(text) is str and text.isascii()) or _plain_str(text)
        ):
            return None
        tag = "text-delta" if kind is TextDelta else "reasoning-delta"
        return {"turn": turn, "step": step, "chunk": {"type": tag, "index": index, "text": text}}
    if kind is ToolCallDelta:
        index = chunk.index  # type: ignore[union-attr]
        call_id = chunk.id  # type: ignore[union-attr]
        name = chunk.name  # type: ignore[union-attr]
        delta = chunk.arguments_delta  # type: ignore[union-attr]
        if not (type(index) is int and _plain_str(call_id, name, delta)):
            return None
        return {
            "turn": turn,
            "step": step,
            "chunk": {
                "type": "tool-call-delta",
                "index": index,
                "id": call_id,
                "name": name,
                "arguments_delta": delta,
            },
        }
    encoded = _stream_marker(chunk, kind)
    if encoded is None:
        return None
    return {"turn": turn, "step": step, "chunk": encoded}


def _stream_marker(chunk: object, kind: type) -> _Snapshot | None:
    """The chunks around the deltas: block start and end, usage, a finish without failure."""
    if kind is BlockStart:
        index, block_kind = chunk.index, chunk.kind  # type: ignore[attr-defined]
        if type(index) is not int or not (
            (type(block_kind) is str and block_kind.isascii()) or _plain_str(block_kind)
        ):
            return None
        return {"type": "block-start", "index": index, "kind": block_kind}
    if kind is BlockEnd:
        index = chunk.index  # type: ignore[attr-defined]
        blocks = _blocks((chunk.block,))  # type: ignore[attr-defined]
        if type(index) is not int or blocks is None:
            return None
        return {"type": "block-end", "index": index, "block": blocks[0]}
    if kind is Finish:
        reason = chunk.reason  # type: ignore[attr-defined]
        if chunk.failure is not None:  # type: ignore[attr-defined]
            return None
        if not ((type(reason) is str and reason.isascii()) or _plain_str(reason)):
            return None
        return {"type": "finish", "reason": reason, "failure": None}
    if kind is UsageChunk:
        encoded = _usage(chunk.usage)  # type: ignore[attr-defined]
        return None if encoded is None else {"type": "usage", "usage": encoded}
    return None


def _blocks(content: object) -> list[_Snapshot] | None:
    """Text, reasoning and tool-call blocks (others: ``None``)."""
    if type(content) is not tuple:
        return None
    out: list[_Snapshot] = []
    for block in content:
        kind = type(block)
        if kind is TextBlock or kind is ReasoningBlock:
            text = block.text
            if not ((type(text) is str and text.isascii()) or _plain_str(text)):
                return None
            out.append({"type": "text" if kind is TextBlock else "reasoning", "text": text})
        elif kind is ToolCallBlock:
            call_id, name, arguments = block.id, block.name, block.arguments
            if not _plain_str(call_id, name, arguments):
                return None
            out.append({"type": "tool-call", "id": call_id, "name": name, "arguments": arguments})
        else:
            return None
    return out


def _message(message: object) -> _Snapshot | None:
    if type(message) is not Message:
        return None
    content = _blocks(message.content)
    if content is None:
        return None
    id_, role, source = message.id, message.role, message.source
    if not _plain_str(id_, role, source):
        return None
    return {"id": id_, "role": role, "content": content, "source": source}


def _usage(usage: object) -> _Snapshot | None:
    if type(usage) is not Usage:
        return None
    values = (
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.reasoning_tokens,
    )
    for value in values:
        if type(value) is not int:
            return None
    return dict(zip(_USAGE_KEYS, values, strict=True))


_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def _user_message(data: UserMessageEvent) -> _Snapshot | None:
    turn = data.turn
    message = _message(data.message)
    if type(turn) is not int or message is None:
        return None
    return {"turn": turn, "message": message}


def _assistant_message(data: AssistantMessageEvent) -> _Snapshot | None:
    turn, step, interrupted = data.turn, data.step, data.interrupted
    finish: object = data.finish  # typed a Literal; checked as any value
    if type(turn) is not int or type(step) is not int or type(interrupted) is not bool:
        return None
    if not ((type(finish) is str and finish.isascii()) or _plain_str(finish)):
        return None
    message = _message(data.message)
    if message is None:
        return None
    usage = None
    if data.usage is not None:
        usage = _usage(data.usage)
        if usage is None:
            return None
    return {
        "turn": turn,
        "step": step,
        "message": message,
        "finish": finish,
        "usage": usage,
        "interrupted": interrupted,
    }


def _tool_call(data: ToolCallEvent) -> _Snapshot | None:
    turn, step, read_only = data.turn, data.step, data.read_only
    call_id, name, arguments = data.call_id, data.name, data.arguments
    if type(turn) is not int or type(step) is not int or type(read_only) is not bool:
        return None
    if not _plain_str(call_id, name, arguments):
        return None
    return {
        "turn": turn,
        "step": step,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "read_only": read_only,
    }


def _tool_result(data: ToolResultEvent) -> _Snapshot | None:
    """A ``tool/result`` of text blocks with no additional context."""
    turn, step, call_id, result = data.turn, data.step, data.call_id, data.result
    if type(turn) is not int or type(step) is not int or type(result) is not ToolResult:
        return None
    code, is_error, concludes = result.code, result.is_error, result.concludes_turn
    if result.additional_context != () or type(is_error) is not bool:
        return None
    if type(concludes) is not bool or not (code is None or _plain_str(code)):
        return None
    if not _plain_str(call_id, result.call_id):
        return None
    content = _blocks(result.content)
    if content is None:
        return None
    return {
        "turn": turn,
        "step": step,
        "call_id": call_id,
        "result": {
            "call_id": result.call_id,
            "content": content,
            "is_error": is_error,
            "code": code,
            "additional_context": [],
            "concludes_turn": concludes,
        },
    }


def _request_header(data: RequestHeader) -> _Snapshot | None:
    """A ``request/header``: logged once per agent and again whenever it changes."""
    turn, step, system = data.turn, data.step, data.system
    if type(turn) is not int or type(step) is not int:
        return None
    if not (system is None or _plain_str(system)):
        return None
    config = _call_config(data.config)
    tools = _tools(data.tools)
    if config is None or tools is None or type(data.prefix) is not tuple:
        return None
    prefix = []
    for message in data.prefix:
        encoded = _message(message)
        if encoded is None:
            return None
        prefix.append(encoded)
    return {
        "turn": turn,
        "step": step,
        "config": config,
        "system": system,
        "tools": tools,
        "prefix": prefix,
    }


def _call_config(config: object) -> _Snapshot | None:
    if type(config) is not LlmCallConfig:
        return None
    provider, model, max_tokens = config.provider, config.model, config.max_tokens
    temperature, stop, effort = config.temperature, config.stop, config.reasoning_effort
    if not _plain_str(provider, model):
        return None
    if not (max_tokens is None or type(max_tokens) is int):
        return None
    # A float is logged as given; anything else (an int temperature) takes the generic path.
    if not (temperature is None or (type(temperature) is float and math.isfinite(temperature))):
        return None
    if not (effort is None or _plain_str(effort)):
        return None
    stops: list[str] | None = None
    if stop is not None:
        if type(stop) is not tuple or not all(_plain_str(item) for item in stop):
            return None
        stops = list(stop)
    return {
        "provider": provider,
        "model": model,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stop": stops,
        "reasoning_effort": effort,
    }


def _tools(tools: object) -> list[_Snapshot] | None:
    if type(tools) is not tuple:
        return None
    out: list[_Snapshot] = []
    for schema in tools:
        if type(schema) is not ToolSchema:
            return None
        name, description, parameters = schema.name, schema.description, schema.parameters
        if not _plain_str(name, description) or type(parameters) is not dict:
            return None
        try:
            copied = snapshot_json(parameters, "parameters")  # validated and copied, one pass
        except JsonValueError:
            return None  # the generic path reports it, with the path from the payload's root
        out.append({"name": name, "description": description, "parameters": copied})
    return out


#: Payload class -> its direct encoder (``None``: take the generic path).
FAST_ENCODERS: dict[type, Callable[[Any], _Snapshot | None]] = {
    TurnStart: _counters,
    StepStart: _counters,
    StepEnd: _counters,
    TurnEnd: _turn_end,
    AssistantChunk: _chunk,
    UserMessageEvent: _user_message,
    AssistantMessageEvent: _assistant_message,
    ToolCallEvent: _tool_call,
    ToolResultEvent: _tool_result,
    RequestHeader: _request_header,
}

#: Encoded payload classes that hold something mutable (a tool schema's parameters): the log
#: keeps the snapshot and structures the typed payload from it on first read, never sharing
#: the caller's object.
UNSHARED: frozenset[type] = frozenset({RequestHeader})
