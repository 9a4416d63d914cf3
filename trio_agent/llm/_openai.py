"""An adapter for OpenAI-compatible ``/chat/completions`` endpoints (OpenAI, DeepSeek, vLLM ...)."""

from __future__ import annotations

import contextlib
import email.utils
import importlib.metadata
import json
import math
import os
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, ClassVar, NamedTuple, final

import attrs
import httpx
import trio

from .._jsontext import loads
from ..ids import CallId
from ..redaction import redact_known, redact_text
from ..runtime import Context
from ._models import ModelList, to_model_list
from ._retry import RetryPolicy
from ._service import LlmService
from ._sse import SseParser
from ._types import (
    BlockEnd,
    BlockKind,
    BlockStart,
    ContentBlock,
    Finish,
    GenerateRequest,
    ImageBlock,
    LlmFailure,
    Message,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    UsageChunk,
)

__all__ = ["OpenAiAdapter", "OpenAiProvider", "encode_request", "http_failure"]


def _user_agent() -> str:
    try:
        version = importlib.metadata.version("trio-agent")
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    return f"trio-agent/{version}"


_USER_AGENT = _user_agent()
#: How long shielded cleanup (closing the response) may take after a cancel.
_CLOSE_BUDGET = 5.0
#: After ``[DONE]``, how long to wait for the end of the body so the connection can be reused.
_DRAIN_BUDGET = 0.1
_API_KEY = re.compile(r"[\x21-\x7e]+")
#: How much of a malformed event its failure message quotes (masked before the cut).
_QUOTED_EVENT_CHARS = 120

_CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context length exceeded"
    r"|too (?:long|large) for the (?:model|context)|prompt is too long"
    r"|exceeds? (?:the )?(?:model'?s? )?(?:maximum )?context(?: window| length)?"
    r"|context window (?:exceeded|is too small)",
    re.I,
)
_QUOTA = re.compile(
    r"insufficient[_ ]quota|insufficient[_ ]balance|quota exceeded|exceeded your current quota"
    r"|balance (?:is )?(?:depleted|insufficient|exhausted)|out of credits|billing hard limit",
    re.I,
)
_RATE = re.compile(r"rate[_ ]limit|too many requests|overloaded", re.I)


# ------------------------------------------------------------------------------------------------
# Request encoding
# ------------------------------------------------------------------------------------------------


def _text_of(content: tuple[ContentBlock, ...]) -> str:
    return "".join(b.text for b in content if isinstance(b, TextBlock))


def _encode_message(message: Message, out: list[dict[str, Any]]) -> None:
    if message.role == "system":
        out.append({"role": "system", "content": _text_of(message.content)})
        return
    if message.role == "assistant":
        wire: dict[str, Any] = {"role": "assistant", "content": _text_of(message.content)}
        reasoning = "".join(b.text for b in message.content if isinstance(b, ReasoningBlock))
        if reasoning:
            wire["reasoning_content"] = reasoning
        calls = [
            {
                "id": b.id,
                "type": "function",
                "function": {"name": b.name, "arguments": b.arguments},
            }
            for b in message.content
            if isinstance(b, ToolCallBlock)
        ]
        if calls:
            wire["tool_calls"] = calls
        out.append(wire)
        return
    # user: tool results first (they must follow the assistant's tool calls), then the text
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": block.tool_call_id,
                    "content": _text_of(block.content) or "(no output)",
                }
            )
    visible = [b for b in message.content if isinstance(b, TextBlock | ImageBlock)]
    if any(isinstance(b, ImageBlock) for b in visible):
        parts: list[dict[str, Any]] = []
        for b in visible:
            if isinstance(b, TextBlock):
                parts.append({"type": "text", "text": b.text})
            else:
                url = f"data:{b.media_type};base64,{b.data}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
        out.append({"role": "user", "content": parts})
    elif visible or not any(isinstance(b, ToolResultBlock) for b in message.content):
        out.append({"role": "user", "content": _text_of(message.content)})


def encode_request(request: GenerateRequest) -> dict[str, Any]:
    """The JSON body of a streaming ``/chat/completions`` call for ``request``.

    The system prompt becomes a leading system message; a tool result becomes a ``tool``
    message; an assistant message keeps ``content`` as a string (``""``, never ``null``), its
    reasoning as ``reasoning_content`` (DeepSeek needs it passed back) and its ``tool_calls``.
    Unset options are omitted, never sent as ``null``.
    """
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        _encode_message(message, messages)
    config = request.config
    body: dict[str, Any] = {
        "model": config.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                },
            }
            for t in request.tools
        ]
    if config.max_tokens is not None:
        body["max_tokens"] = config.max_tokens
    if config.temperature is not None:
        body["temperature"] = config.temperature
    if config.stop:
        body["stop"] = list(config.stop)
    if config.reasoning_effort is not None:
        body["reasoning_effort"] = config.reasoning_effort
    return body


# ------------------------------------------------------------------------------------------------
# Error mapping
# ------------------------------------------------------------------------------------------------


def _retry_after(headers: Mapping[str, str], now: float) -> float | None:
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            ms = float(value)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms) and ms > 0:
            return ms / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - now
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def _error_facts(body: bytes) -> tuple[str, str]:
    """(message, everything classifiers should look at) from an error body."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    message = ""
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            message = str(error.get("message") or "")
            facts = " ".join(str(error.get(k) or "") for k in ("code", "type")) + " " + message
            return message, facts
        if isinstance(error, str):
            return error, error
    return message, text[:500]


def http_failure(
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    *,
    label: str = "API",
    now: float | None = None,
) -> LlmFailure:
    """Map an HTTP error response to an :class:`LlmFailure`.

    401/403 → ``AUTH``; 413 → ``INVALID_REQUEST``; quota or balance wording → ``QUOTA``;
    429 → ``RATE_LIMIT``; 400 with context-overflow wording → ``CONTEXT_WINDOW_EXCEEDED``,
    other 400 → ``INVALID_REQUEST``; >= 500 → ``SERVER``; anything else ``HTTP_<status>``
    (a 3xx too: redirects are not followed, since the request carries the API key; the
    message names the ``Location``).
    ``Retry-After`` (seconds or an HTTP date; ``retry-after-ms`` too) becomes ``retry_after``
    in seconds, ``x-request-id`` the ``request_id``.
    """
    message, facts = _error_facts(body)
    if status in (401, 403):
        code = "AUTH"
    elif status == 413:
        code = "INVALID_REQUEST"
    elif _QUOTA.search(facts):
        code = "QUOTA"
    elif status == 429:
        code = "RATE_LIMIT"
    elif status == 400:
        code = "CONTEXT_WINDOW_EXCEEDED" if _CONTEXT_OVERFLOW.search(facts) else "INVALID_REQUEST"
    elif status >= 500:
        code = "SERVER"
    else:
        code = f"HTTP_{status}"
    location = headers.get("location") if 300 <= status < 400 else None
    if location and not message:
        message = f"redirected to {location}; set base_url to the address that serves the API"
    request_id = headers.get("x-request-id") or headers.get("x-deepseek-request-id")
    return LlmFailure(
        code,
        f"{label} error (HTTP {status}): {message}"
        if message
        else f"{label} error (HTTP {status})",
        status=status,
        retry_after=_retry_after(headers, time.time() if now is None else now),
        request_id=request_id or None,
    )


# ------------------------------------------------------------------------------------------------
# Stream decoding
# ------------------------------------------------------------------------------------------------


class _Malformed(Exception):
    """An event the decoder cannot use; ``data`` is the event, quoted in the message."""

    def __init__(self, what: str, data: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.data = data

    def describe(self, key: str | None) -> str:
        """The message, quoting the event's start with the secrets masked first - the API key
        and every secret the process's redactors know, each in every form (url-quoted,
        base64 ...): a hostile server can place one across the cut, and a cut secret is no
        longer redactable."""
        if self.data is None:
            return self.what
        data = redact_known(redact_text(self.data, (key,)))
        return f"{self.what}: {data[:_QUOTED_EVENT_CHARS]!r}"


@final
class _WireBlock:
    __slots__ = ("call_id", "index", "kind", "name", "parts")

    def __init__(self, index: int, kind: BlockKind) -> None:
        self.index = index
        self.kind: BlockKind = kind
        self.parts: list[str] = []
        self.call_id = ""
        self.name = ""

    def build(self) -> ContentBlock:
        text = "".join(self.parts)
        if self.kind == "text":
            return TextBlock(text)
        if self.kind == "reasoning":
            return ReasoningBlock(text)
        return ToolCallBlock(CallId(self.call_id or f"call-{self.index}"), self.name, text)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usage(data: Mapping[str, Any]) -> Usage:
    prompt = _int(data.get("prompt_tokens"))
    details = data.get("prompt_tokens_details")
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    if not cached:
        cached = _int(data.get("prompt_cache_hit_tokens"))
    completion = data.get("completion_tokens_details")
    reasoning = _int(completion.get("reasoning_tokens")) if isinstance(completion, dict) else 0
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=_int(data.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
    )


def _stream_error(error: object) -> LlmFailure:
    if isinstance(error, dict):
        message = str(error.get("message") or "the provider reported an error mid-stream")
        facts = " ".join(str(error.get(k) or "") for k in ("code", "type")) + " " + message
    else:
        message = facts = str(error)
    if _QUOTA.search(facts):
        code = "QUOTA"
    elif _CONTEXT_OVERFLOW.search(facts):
        code = "CONTEXT_WINDOW_EXCEEDED"
    elif _RATE.search(facts):
        code = "RATE_LIMIT"
    else:
        code = "SERVER"
    return LlmFailure(code, f"error in the response stream: {message}")


#: How often one stream derives a template (see :class:`_Template`): a provider whose plain
#: delta events differ in more than their text (a per-event nonce) stops paying for it.
_TEMPLATE_TRIES = 3

#: ``"<key>":"`` with the spaces JSON allows, for the delta keys a template can stand for.
_KEY_PATTERNS = {
    key: re.compile(rf'"{key}"\s*:\s*"') for key in ("content", "reasoning_content", "reasoning")
}

#: ``json``'s own string-literal scanner (the C one where there is one); typeshed omits it.
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]


class _Template(NamedTuple):
    """A plain delta event of one stream split around its text literal: an event that is the
    same but for that literal means the same - more text for ``block`` - with its own text
    (``_Decoder.event`` tests that first; a tuple, unpacked there per event).

    Proven, not guessed (:func:`_template_of`): outside string literals, where every quote is
    escaped, ``"<key>":"`` only matches a key, so when it matches once in the event, that key
    is the delta's; its literal must decode to the text the full decode found. JSON is
    context-free at the token level, so any valid string literal in that place decodes to the
    same event with that text. The block stays the open one of its kind for the rest of the
    stream."""

    prefix: str
    suffix: str  # from the literal's closing quote on
    block: _WireBlock
    chunk: type[TextDelta] | type[ReasoningDelta]


def _template_of(data: str, key: str, text: str, block: _WireBlock) -> _Template | None:
    """The template of ``data``, an event whose only effect was ``text`` appended to ``block``
    from the delta's ``key`` - or ``None`` when that cannot be proven."""
    keys = [match.end() for match in _KEY_PATTERNS[key].finditer(data)]
    if len(keys) != 1:
        return None
    start = keys[0]
    try:
        literal, end = _scanstring(data, start)
    except ValueError:
        return None
    if literal != text:
        return None
    chunk = TextDelta if block.kind == "text" else ReasoningDelta
    return _Template(data[:start], data[end - 1 :], block, chunk)


@final
class _Decoder:
    """Turn the JSON of ``chat.completion.chunk`` events into stream chunks.

    Block indexes are allocated in first-seen order; block ends, usage and finish are held
    back until ``[DONE]``.
    """

    __slots__ = (
        "blocks",
        "done",
        "finish_reason",
        "reasoning",
        "template_tries",
        "templates",
        "text",
        "tools",
        "usage",
    )

    def __init__(self) -> None:
        self.blocks: list[_WireBlock] = []
        self.text: _WireBlock | None = None
        #: At most one per open text or reasoning block.
        self.templates: list[_Template] = []
        self.template_tries = 0
        self.reasoning: _WireBlock | None = None
        self.tools: dict[object, _WireBlock] = {}
        self.finish_reason: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.done = False

    def _open(self, kind: BlockKind, out: deque[StreamChunk]) -> _WireBlock:
        block = _WireBlock(len(self.blocks), kind)
        self.blocks.append(block)
        out.append(BlockStart(block.index, kind))
        return block

    def event(self, data: str, out: deque[StreamChunk]) -> LlmFailure | None:
        """Append the chunks of one event's ``data`` to ``out``; return the failure it reports.

        Raises :class:`_Malformed` (possibly after appending some chunks of this event)."""
        if data == "[DONE]":
            return self.close(out)
        for prefix, suffix, block, chunk in self.templates:
            # The same event as a plain delta event but for its text: no need to decode (#17).
            if data.startswith(prefix):
                try:
                    more, end = _scanstring(data, len(prefix))
                except ValueError:
                    continue  # decoded in full, which reports it
                # The suffix starts at the literal's closing quote.
                if len(data) - end == len(suffix) - 1 and data.endswith(suffix):
                    if more:
                        block.parts.append(more)
                        out.append(chunk(block.index, more))
                    return None
        try:
            obj = loads(data)
        except ValueError as exc:
            raise _Malformed(f"an SSE event is not valid JSON ({exc})", data) from None
        if type(obj) is not dict:
            raise _Malformed("an SSE event is not a JSON object", data)
        choices = obj.get("choices")
        text = self.text
        if text is not None and type(choices) is list and len(choices) == 1:
            # The common event: more text for the open text block, and nothing else (#17).
            choice = choices[0]
            if type(choice) is dict and not choice.get("finish_reason"):
                delta = choice.get("delta")
                if type(delta) is dict and len(delta) == 1 and obj.get("usage") is None:
                    content = delta.get("content")
                    if type(content) is str and content and choice.get("index", 0) == 0:
                        text.parts.append(content)
                        out.append(TextDelta(text.index, content))
                        if self.template_tries < _TEMPLATE_TRIES:
                            self._learn(data, "content", content, text)
                        return None
        if not choices and "error" in obj:
            return _stream_error(obj["error"])
        usage = obj.get("usage")
        if type(usage) is dict:
            self.usage = usage
        if choices is None:
            return None
        if type(choices) is not list:
            raise _Malformed("'choices' is not a list", data)
        before = len(out)
        for choice in choices:
            if type(choice) is not dict:
                raise _Malformed("a choice is not an object", data)
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if delta:
                if type(delta) is not dict:
                    raise _Malformed("a delta is not an object", data)
                self._delta(delta, out)
            reason = choice.get("finish_reason")
            if reason and type(reason) is str:
                self.finish_reason = reason
        if len(out) == before + 1 and self.template_tries < _TEMPLATE_TRIES:
            self._learn_plain(data, obj, choices, out[-1])
        return None

    def _learn_plain(
        self, data: str, obj: dict[str, Any], choices: list[Any], chunk: StreamChunk
    ) -> None:
        """Learn ``data``'s template when its one effect was ``chunk``, more text or reasoning
        for an open block: one choice, no usage, no finish, no tool call."""
        if len(choices) != 1 or type(obj.get("usage")) is dict:
            return
        choice = choices[0]
        delta = choice.get("delta")
        if choice.get("finish_reason") or type(delta) is not dict or delta.get("tool_calls"):
            return
        if type(chunk) is TextDelta and self.text is not None:
            self._learn(data, "content", chunk.text, self.text)
        elif type(chunk) is ReasoningDelta and self.reasoning is not None:
            key = "reasoning" if delta.get("reasoning_content") is None else "reasoning_content"
            self._learn(data, key, chunk.text, self.reasoning)

    def _learn(self, data: str, key: str, text: str, block: _WireBlock) -> None:
        self.template_tries += 1
        template = _template_of(data, key, text, block)
        if template is not None:
            self.templates = [t for t in self.templates if t.block is not block] + [template]

    def _delta(self, delta: dict[str, Any], out: deque[StreamChunk]) -> None:
        reasoning = delta.get("reasoning_content")
        if reasoning is None:
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            if self.reasoning is None:
                self.reasoning = self._open("reasoning", out)
            self.reasoning.parts.append(reasoning)
            out.append(ReasoningDelta(self.reasoning.index, reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            if self.text is None:
                self.text = self._open("text", out)
            self.text.parts.append(content)
            out.append(TextDelta(self.text.index, content))
        calls = delta.get("tool_calls")
        if not calls:
            return
        if not isinstance(calls, list):
            raise _Malformed("'tool_calls' is not a list")
        for position, call in enumerate(calls):
            if not isinstance(call, dict):
                raise _Malformed("a tool call delta is not an object")
            key = call.get("index", position)
            block = self.tools.get(key)
            if block is None:
                block = self.tools[key] = self._open("tool-call", out)
            call_id = call.get("id")
            if isinstance(call_id, str) and call_id and not block.call_id:
                block.call_id = call_id
            function = call.get("function") or {}
            if not isinstance(function, dict):
                raise _Malformed("a tool call's 'function' is not an object")
            name = function.get("name")
            if isinstance(name, str) and name and not block.name:
                block.name = name
            arguments = function.get("arguments") or ""
            if not isinstance(arguments, str):
                raise _Malformed("a tool call's 'arguments' is not a string")
            block.parts.append(arguments)
            out.append(ToolCallDelta(block.index, CallId(block.call_id), block.name, arguments))

    def close(self, out: deque[StreamChunk]) -> LlmFailure | None:
        """``[DONE]``: append the held-back block ends, usage and finish to ``out``."""
        self.done = True
        out.extend(BlockEnd(b.index, b.build()) for b in self.blocks)
        if self.usage is not None:
            out.append(UsageChunk(_usage(self.usage)))
        reason = self.finish_reason
        if reason in (None, "stop", "tool_calls", "function_call"):
            if not self.blocks:
                return LlmFailure(
                    "EMPTY_RESPONSE", "the model returned a completed response with no content"
                )
            out.append(Finish("tool-calls" if self.tools else "stop"))
        elif reason == "length":
            out.append(Finish("max-tokens"))
        else:
            return LlmFailure(reason.upper().replace("-", "_"), f"model stopped: {reason}")
        return None


# ------------------------------------------------------------------------------------------------
# The adapter
# ------------------------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@final
class OpenAiAdapter:
    """Stream chat completions from an OpenAI-compatible server over one ``httpx`` client.

    Each :meth:`stream` call is one ``POST {base_url}/chat/completions`` with
    ``stream: true`` and ``stream_options.include_usage`` (see :func:`encode_request`), parsed
    as server-sent events: ``content`` deltas become a text block, DeepSeek's
    ``reasoning_content`` a reasoning block, ``tool_calls`` deltas one tool-call block per wire
    ``index`` (blocks numbered in first-seen order); block ends, usage (``cached_tokens`` /
    ``prompt_cache_hit_tokens`` are subtracted from the input) and the finish follow
    ``[DONE]``. ``finish_reason`` maps ``stop`` → stop, ``tool_calls`` → tool-calls, ``length``
    → max-tokens (a ``stop`` that carries tool calls is reported as tool-calls); any other
    reason is an error named after it (``content_filter`` → code ``CONTENT_FILTER``).

    Failures end the stream with ``Finish("error", failure)``: HTTP errors as mapped by
    :func:`http_failure`; a refused connection or a broken body ``TRANSPORT``; no bytes for
    ``idle_timeout`` seconds (before the headers or between chunks; SSE comments count as
    bytes) ``TIMEOUT``; invalid event JSON ``MALFORMED_RESPONSE``; a body that ends without
    ``[DONE]`` ``STREAM_CLOSED``; a completed answer without any block ``EMPTY_RESPONSE``;
    a missing or unusable API key ``AUTH``.

    The API key is read from the environment variable ``api_key_env`` on every call (so a
    rotated key applies to the next call). It is sent only in the ``Authorization`` header:
    never stored on the adapter, never logged, and redacted from every failure message.

    Tasks and cancellation: the adapter starts no task of its own. The request is sent, and
    each :meth:`~trio.abc.ReceiveChannel.receive` reads the body, in the task that uses the
    stream, under a fresh idle-timeout scope per read (called through ``ctx.llm.stream``, that
    task is the service's pump task, which runs inside the caller's ``async with``).
    Cancelling that task's scope raises :class:`trio.Cancelled` out of the stream and closes
    the HTTP connection (shielded, bounded cleanup). Call :meth:`aclose` when done; streaming
    afterwards raises :class:`trio.ClosedResourceError`.

    Testing without a network: pass ``transport=httpx.MockTransport(handler)`` (or any
    :class:`httpx.AsyncBaseTransport`); the adapter builds its one :class:`httpx.AsyncClient`
    on it and closes it in :meth:`aclose`. The handler sees the real request, ``Authorization``
    header included; the adapter's ``repr`` and failures never contain the key::

        def handler(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, content=b"data: [DONE]\\n\\n")

        adapter = OpenAiAdapter(base_url="https://mock.test/v1", api_key_env=None,
                                transport=httpx.MockTransport(handler))

    Args:
        name: the provider name requests route by.
        base_url: everything before ``/chat/completions`` (``https://api.openai.com/v1``,
            ``https://api.deepseek.com``, ``http://localhost:8000/v1`` ...).
        api_key_env: the environment variable holding the key; ``None`` sends no
            ``Authorization`` header (local servers).
        models: advisory: the model names this endpoint serves.
        idle_timeout: seconds without a single byte (waiting for the response head, or
            between body reads) before the call fails with ``TIMEOUT``.
        connect_timeout: seconds allowed to connect and to write the request.
        headers: extra headers sent with every request.
        trust_env: honour proxy and CA-bundle environment variables (httpx's ``trust_env``).
        transport: the httpx transport to send requests through instead of the network
            (``httpx.MockTransport`` in tests); the adapter owns it from then on.
    """

    #: Its stream starts no task (``_EventStream`` reads in the receiving task), so ``ctx.llm``
    #: reads it in the caller's task (#17).
    streams_inline: ClassVar[bool] = True

    def __init__(
        self,
        *,
        name: str = "openai",
        base_url: str = "https://api.openai.com/v1",
        api_key_env: str | None = "OPENAI_API_KEY",
        models: tuple[str, ...] = (),
        idle_timeout: float = 300.0,
        connect_timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        trust_env: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not (idle_timeout > 0 and connect_timeout > 0):
            raise ValueError(
                f"idle_timeout and connect_timeout must be > 0 seconds, got {idle_timeout!r} "
                f"and {connect_timeout!r}"
            )
        self._name = name
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.models = tuple(models)
        self.idle_timeout = idle_timeout
        self._closed = False
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=connect_timeout, read=None, write=connect_timeout, pool=connect_timeout
            ),
            headers={"user-agent": _USER_AGENT, **(headers or {})},
            transport=transport,
            trust_env=trust_env,
        )

    @classmethod
    def from_config(
        cls, config: OpenAiProvider.Config, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> OpenAiAdapter:
        """The adapter an :class:`OpenAiProvider` config entry describes (its ``retry`` policy
        is the provider's business, not the adapter's); ``transport`` as in the constructor."""
        return cls(
            name=config.name,
            base_url=config.base_url,
            api_key_env=config.api_key_env,
            models=config.models,
            idle_timeout=config.idle_timeout,
            connect_timeout=config.connect_timeout,
            headers=config.headers,
            trust_env=config.trust_env,
            transport=transport,
        )

    @property
    def name(self) -> str:
        """The provider name this adapter serves."""
        return self._name

    def __repr__(self) -> str:
        return f"<OpenAiAdapter name={self._name!r} base_url={self.base_url!r}>"

    async def aclose(self) -> None:
        """Close the HTTP client. Idempotent."""
        self._closed = True
        await self._client.aclose()

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        """Start one streaming call; see the class docstring."""
        if self._closed:
            raise trio.ClosedResourceError(
                f"OpenAI adapter {self._name!r} is closed; streams need a live adapter"
            )
        return _OpenStream(self, request)

    def _api_key(self) -> tuple[str | None, LlmFailure | None]:
        if self.api_key_env is None:
            return None, None
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            return None, LlmFailure(
                "AUTH",
                f"no API key: the environment variable {self.api_key_env} is not set or empty; "
                f"export the key for {self.base_url} in it",
            )
        if _API_KEY.fullmatch(key) is None:
            return None, LlmFailure(
                "AUTH",
                f"the API key in {self.api_key_env} contains characters that cannot be sent in "
                "an HTTP header; expected printable ASCII without spaces",
            )
        return key, None


@final
class _OpenStream:
    """One :meth:`OpenAiAdapter.stream` call: the request is sent on entry, the connection given
    back on exit. A class, not a generator-based context manager: the loop opens one per step
    (#17)."""

    __slots__ = ("_channel", "_request")

    def __init__(self, adapter: OpenAiAdapter, request: GenerateRequest) -> None:
        self._channel = _EventStream(adapter)
        self._request = request

    async def __aenter__(self) -> trio.abc.ReceiveChannel[StreamChunk]:
        try:
            await self._channel.start(self._request)
        except BaseException:
            await self._channel.release()
            raise
        return self._channel

    async def __aexit__(self, *exc_info: object) -> None:
        await self._channel.release()


@final
class _EventStream(trio.abc.ReceiveChannel[StreamChunk]):
    """One call's chunks, parsed from the response body on demand in the receiving task.

    It starts no task: each :meth:`receive` reads the network only when no parsed chunk is
    waiting, inside its own idle-timeout scope (no scope is held across calls), so the
    receiving task's cancel scope reaches the read directly.
    """

    __slots__ = (
        "_adapter",
        "_body",
        "_closed",
        "_decoder",
        "_ended",
        "_key",
        "_parser",
        "_pending",
        "_response",
    )

    def __init__(self, adapter: OpenAiAdapter) -> None:
        self._adapter = adapter
        self._key: str | None = None
        self._pending: deque[StreamChunk] = deque()
        #: The final chunk is queued: no more reads.
        self._ended = False
        self._closed = False
        self._response: httpx.Response | None = None
        self._body: AsyncIterator[bytes] | None = None
        self._parser = SseParser()
        self._decoder = _Decoder()

    def _fail(self, failure: LlmFailure) -> None:
        message = redact_text(failure.message, (self._key,))
        if message != failure.message:
            failure = attrs.evolve(failure, message=message)
        self._pending.append(Finish("error", failure))
        self._ended = True

    async def start(self, request: GenerateRequest) -> None:
        """Send the request and wait for the response head (or a failure to report)."""
        adapter = self._adapter
        key, failure = adapter._api_key()
        self._key = key
        if failure is not None:
            await trio.lowlevel.checkpoint()
            self._fail(failure)
            return
        headers = {"accept": "text/event-stream"}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        client = adapter._client
        http_request = client.build_request(
            "POST",
            f"{adapter.base_url}/chat/completions",
            json=encode_request(request),
            headers=headers,
        )
        base = adapter.base_url
        with trio.move_on_after(adapter.idle_timeout) as waited:
            try:
                self._response = await client.send(http_request, stream=True)
            except httpx.TimeoutException as exc:
                failure = LlmFailure("TIMEOUT", f"request to {base} timed out: {_describe(exc)}")
            except httpx.TransportError as exc:
                failure = LlmFailure("TRANSPORT", f"request to {base} failed: {_describe(exc)}")
        if waited.cancelled_caught:
            failure = LlmFailure(
                "TIMEOUT", f"no response from {base} within {adapter.idle_timeout:g} s"
            )
        if failure is not None:
            self._fail(failure)
            return
        response = self._response
        assert response is not None
        self._body = response.aiter_bytes()
        if response.status_code >= 300:
            content = b""
            with trio.move_on_after(adapter.idle_timeout):
                try:
                    content = await response.aread()
                except httpx.HTTPError:
                    pass
            self._fail(
                http_failure(
                    response.status_code, response.headers, content, label=f"{adapter.name} API"
                )
            )

    async def receive(self) -> StreamChunk:
        if self._closed:
            raise trio.ClosedResourceError("this stream was closed")
        pending = self._pending
        if pending:
            # Decoded from a read that already yielded to the scheduler: a cancellation point
            # only, as for raw httpx lines (#17; a full checkpoint here was a third of a chunk).
            await trio.lowlevel.checkpoint_if_cancelled()
            return pending.popleft()
        if not self._ended:
            await self._fill()
        await trio.lowlevel.checkpoint()
        if not pending:
            raise trio.EndOfChannel
        return pending.popleft()

    async def __anext__(self) -> StreamChunk:
        # receive()'s common case without its extra coroutine per chunk (#17).
        pending = self._pending
        if pending and not self._closed:
            await trio.lowlevel.checkpoint_if_cancelled()
            return pending.popleft()
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def _fill(self) -> None:
        assert self._body is not None
        body = self._body
        while not self._pending and not self._ended:
            data, failure = await self._read(body)
            if failure is not None:
                self._fail(failure)
                return
            events = self._parser.feed(data) if data is not None else self._parser.close()
            pending = self._pending
            for event in events:
                mark = len(pending)
                try:
                    failure = self._decoder.event(event.data, pending)
                except _Malformed as exc:
                    while len(pending) > mark:  # nothing of a malformed event is delivered
                        pending.pop()
                    failure = LlmFailure("MALFORMED_RESPONSE", exc.describe(self._key))
                if failure is not None:
                    self._fail(failure)
                    return
                if self._decoder.done:
                    self._ended = True
                    await self._drain(body)
                    return
            if data is None:
                self._fail(
                    LlmFailure(
                        "STREAM_CLOSED",
                        f"the event stream from {self._adapter.base_url} ended without [DONE]",
                    )
                )

    async def _read(self, body: AsyncIterator[bytes]) -> tuple[bytes | None, LlmFailure | None]:
        """The next piece of the body (``None`` at its end), or why there is none."""
        base = self._adapter.base_url
        idle_timeout = self._adapter.idle_timeout
        with trio.move_on_after(idle_timeout) as idle:
            try:
                return await anext(body, None), None
            except httpx.TimeoutException as exc:
                return None, LlmFailure(
                    "TIMEOUT", f"reading from {base} timed out: {_describe(exc)}"
                )
            except httpx.DecodingError as exc:
                return None, LlmFailure(
                    "MALFORMED_RESPONSE",
                    f"the body from {base} could not be decoded: {_describe(exc)}",
                )
            except httpx.TransportError as exc:
                return None, LlmFailure(
                    "TRANSPORT", f"the event stream from {base} failed: {_describe(exc)}"
                )
        assert idle.cancelled_caught
        return None, LlmFailure(
            "TIMEOUT", f"no data from {base} for {idle_timeout:g} s (idle timeout)"
        )

    async def _drain(self, body: AsyncIterator[bytes]) -> None:
        # Reading the (usually already buffered) end of the body lets the connection be reused.
        with trio.move_on_after(min(_DRAIN_BUDGET, self._adapter.idle_timeout)):
            try:
                async for _ in body:
                    pass
            except httpx.HTTPError:
                pass

    async def release(self) -> None:
        """Give the connection back (or close it), shielded and bounded. Idempotent."""
        self._closed = True
        response, self._response = self._response, None
        body, self._body = self._body, None
        if response is None:
            return
        with trio.move_on_after(_CLOSE_BUDGET) as cleanup:
            cleanup.shield = True
            if body is not None:
                await _unwind(body)
            await response.aclose()

    async def aclose(self) -> None:
        await self.release()
        await trio.lowlevel.checkpoint()


async def _unwind(body: AsyncIterator[bytes]) -> None:
    """Finish httpx's chain of nested body generators now.

    ``aclose()`` on the outer generator would leave the inner ones suspended, to be collected
    later (trio reports that as a ResourceWarning). Resuming the chain inside an already
    cancelled scope makes its next network read raise ``Cancelled`` through every frame, so
    each generator ends (httpcore closes the connection on the way). Call it shielded.
    """
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            while True:
                await anext(body)
        except StopAsyncIteration:
            pass
        except Exception:
            pass  # whatever the broken stream raises while unwinding


def _header_names(headers: Mapping[str, str]) -> str:
    return f"<{', '.join(sorted(headers)) or 'none'}>"


@final
class OpenAiProvider:
    """Plugin: mount an :class:`OpenAiAdapter` on ``ctx.llm`` and close it on unload.

    Example config (YAML, one ``llm.providers`` entry)::

        name: deepseek
        type: openai
        base_url: https://api.deepseek.com
        api_key_env: DEEPSEEK_API_KEY
        models: [deepseek-chat]
    """

    inject = ("llm",)

    @attrs.frozen(kw_only=True)
    class Config:
        """Where the server is, which env var holds the key, timeouts and retry policy.

        Unlike :class:`OpenAiAdapter`'s keyword defaults, ``base_url`` is required and
        ``api_key_env`` defaults to ``None`` (no ``Authorization`` header): a config entry
        names the endpoint its key is sent to, so a key never goes to a server nobody chose.
        See :meth:`OpenAiAdapter.from_config` for what each field means.
        """

        #: The ``type`` tag of this provider in ``trio-agent.yml``.
        type: ClassVar[str] = "openai"

        name: str = "openai"
        base_url: str
        api_key_env: str | None = None
        #: Names (the first is the default model) or ``{name, context_window}`` entries.
        models: ModelList = attrs.field(factory=ModelList, converter=to_model_list)
        #: Config-file defaults (#23): with ``retry``'s 3 attempts a dead or stalled server is
        #: reported within a minute (3 x 15 s + backoff); raise both for slow reasoning models.
        idle_timeout: float = attrs.field(default=15.0, validator=attrs.validators.gt(0))
        connect_timeout: float = attrs.field(default=10.0, validator=attrs.validators.gt(0))
        #: Shown by name only in the repr: a header may carry a credential (``api-key``).
        headers: Mapping[str, str] = attrs.field(factory=dict, hash=False, repr=_header_names)
        trust_env: bool = True
        retry: RetryPolicy = attrs.field(factory=lambda: RetryPolicy(max_attempts=3))

    def __init__(self, ctx: Context, config: OpenAiProvider.Config) -> None:
        self.adapter = OpenAiAdapter.from_config(config)
        ctx.defer(self.adapter.aclose, label=f"close llm adapter {config.name}")
        ctx.require(LlmService).register(
            self.adapter, retry_policy=config.retry, models=config.models
        )
