"""A fake OpenAI-compatible HTTP server on trio, for testing code that talks to real endpoints.

It speaks just enough HTTP/1.1 (one request per connection, ``Connection: close``, chunked
event streams) to drive :class:`~trio_agent.llm.OpenAiAdapter` or any other client through
real sockets on 127.0.0.1, with a script of responses::

    async with open_fake_openai_server([sse_reply("Hello ", "world")]) as server:
        adapter = OpenAiAdapter(base_url=server.base_url, api_key_env=None)
        ...
        assert server.requests[0].json["model"] == "m"

A hostile server: :func:`echo_key_response` answers in one of :data:`ECHO_MODES` and echoes the
request's API key back everywhere it can (status text, headers, error body, SSE events), for
tests that prove the key is found nowhere afterwards.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import functools
import http
import json
import urllib.parse
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any, TypeAlias, final

import attrs
import trio

from ..llm._groups import raise_single

__all__ = [
    "DROP",
    "ECHO_MODES",
    "HANG",
    "FakeOpenAiServer",
    "FakeResponse",
    "HangResponse",
    "JsonResponse",
    "Pause",
    "RecordedRequest",
    "SseResponse",
    "completion_chunk",
    "echo_key_response",
    "error_response",
    "hang_response",
    "json_response",
    "open_fake_openai_server",
    "sse_comment",
    "sse_done",
    "sse_event",
    "sse_finish",
    "sse_reasoning",
    "sse_reply",
    "sse_response",
    "sse_text",
    "sse_tool_call",
    "sse_usage",
]

_MAX_HEAD = 64 * 1024
_WRITE_SIZE = 64 * 1024


class _Marker(enum.Enum):
    HANG = "HANG"
    DROP = "DROP"


#: An SSE piece: stop sending and wait until the client goes away (or the server closes).
HANG = _Marker.HANG
#: An SSE piece: close the connection abruptly, without ending the chunked body.
DROP = _Marker.DROP


@attrs.frozen
class Pause:
    """An SSE piece: wait ``seconds`` (on the trio clock) before sending the next piece."""

    seconds: float


SsePiece: TypeAlias = str | bytes | Pause | _Marker


@attrs.frozen
class SseResponse:
    """A streamed response: ``pieces`` are written in order as one chunked body."""

    pieces: tuple[SsePiece, ...]
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    #: The status line's reason phrase (default: the standard one for ``status``).
    reason: str | None = None


@attrs.frozen
class JsonResponse:
    """A plain response with a JSON (or raw bytes) body, e.g. an API error."""

    status: int
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    #: The status line's reason phrase (default: the standard one for ``status``).
    reason: str | None = None


@attrs.frozen
class HangResponse:
    """Read the request, then never answer."""


FakeResponse: TypeAlias = SseResponse | JsonResponse | HangResponse


@final
@attrs.define(eq=False)
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    #: Header names lower-cased; repeated headers joined with ``", "``.
    headers: dict[str, str]
    body: bytes
    #: The parsed JSON body, or ``None`` if it was not JSON.
    json: Any
    #: Set when the client closed the connection before the response was completely sent.
    disconnected: trio.Event = attrs.field(factory=trio.Event)
    #: Set when the server is done with this request (answered, or the client went away).
    finished: trio.Event = attrs.field(factory=trio.Event)


ResponseItem: TypeAlias = FakeResponse | Callable[[RecordedRequest], FakeResponse]


# --- builders ---------------------------------------------------------------------------------


def _headers(headers: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    return tuple((headers or {}).items())


def sse_response(
    *pieces: SsePiece,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    reason: str | None = None,
) -> SseResponse:
    """A streamed response from SSE pieces: strings/bytes (see :func:`sse_text` and friends),
    :class:`Pause`, :data:`HANG` or :data:`DROP`; ``reason`` replaces the status line's
    standard reason phrase."""
    return SseResponse(tuple(pieces), status, _headers(headers), reason)


def json_response(
    body: Any,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
    reason: str | None = None,
) -> JsonResponse:
    """A plain JSON response (``body`` may also be raw ``bytes``); ``reason`` replaces the
    status line's standard reason phrase."""
    return JsonResponse(status, body, _headers(headers), reason)


def error_response(
    status: int,
    message: str = "fake error",
    *,
    type: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
    reason: str | None = None,
) -> JsonResponse:
    """An API error in OpenAI's shape: ``{"error": {"message", "type", "code"}}``."""
    return JsonResponse(
        status,
        {"error": {"message": message, "type": type, "code": code}},
        _headers(headers),
        reason,
    )


def hang_response() -> HangResponse:
    """A response that never comes (not even the status line)."""
    return HangResponse()


def sse_event(payload: Any) -> str:
    """One ``data:`` event; ``payload`` is JSON-encoded unless it is already a string."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"


def sse_done() -> str:
    """The ``data: [DONE]`` terminator."""
    return "data: [DONE]\n\n"


def sse_comment(text: str = "keep-alive") -> str:
    """An SSE comment line (ignored by parsers, but it is traffic)."""
    return f": {text}\n"


def completion_chunk(
    delta: Mapping[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: Mapping[str, Any] | None = None,
    model: str = "fake-model",
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` payload with one choice (no choices if ``delta`` is None
    and there is no finish reason: the usage-only tail chunk)."""
    chunk: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [],
    }
    if delta is not None or finish_reason is not None:
        chunk["choices"] = [
            {"index": 0, "delta": dict(delta or {}), "finish_reason": finish_reason}
        ]
    if usage is not None:
        chunk["usage"] = dict(usage)
    return chunk


def sse_text(text: str) -> str:
    """An event carrying a ``content`` delta."""
    return sse_event(completion_chunk({"content": text}))


def sse_reasoning(text: str) -> str:
    """An event carrying a DeepSeek ``reasoning_content`` delta."""
    return sse_event(completion_chunk({"reasoning_content": text}))


def sse_tool_call(
    index: int, *, id: str | None = None, name: str | None = None, arguments: str = ""
) -> str:
    """An event carrying one ``tool_calls`` delta for wire ``index``."""
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    return sse_event(completion_chunk({"tool_calls": [call]}))


def sse_finish(reason: str = "stop") -> str:
    """An event with an empty delta and ``finish_reason``."""
    return sse_event(completion_chunk({}, finish_reason=reason))


def sse_usage(
    prompt_tokens: int,
    completion_tokens: int,
    *,
    cached_tokens: int | None = None,
    reasoning_tokens: int | None = None,
    deepseek: bool = False,
) -> str:
    """The usage-only tail event (``choices: []``). ``cached_tokens`` goes to
    ``prompt_tokens_details.cached_tokens``, or ``prompt_cache_hit_tokens`` if ``deepseek``."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        if deepseek:
            usage["prompt_cache_hit_tokens"] = cached_tokens
            usage["prompt_cache_miss_tokens"] = prompt_tokens - cached_tokens
        else:
            usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return sse_event(completion_chunk(usage=usage))


def sse_reply(
    *texts: str, finish: str = "stop", usage: tuple[int, int] | None = (10, 5)
) -> SseResponse:
    """A complete streamed text answer: one event per text piece, the finish, the usage
    ``(prompt_tokens, completion_tokens)`` and ``[DONE]``."""
    pieces: list[SsePiece] = [sse_event(completion_chunk({"role": "assistant", "content": ""}))]
    pieces.extend(sse_text(t) for t in texts)
    pieces.append(sse_finish(finish))
    if usage is not None:
        pieces.append(sse_usage(*usage))
    pieces.append(sse_done())
    return SseResponse(tuple(pieces))


# --- a server that echoes the API key --------------------------------------------------------

#: The error modes of :func:`echo_key_response`.
ECHO_MODES = ("401", "429", "500", "redirect", "sse-error", "malformed-sse", "drop")


def _echo_forms(request: RecordedRequest) -> tuple[str, str, str, str]:
    """(the ``Authorization`` value, the bare key, its url-quoted and its base64 forms)."""
    auth = request.headers.get("authorization", "")
    key = auth.removeprefix("Bearer ").strip()
    quoted = urllib.parse.quote(key, safe="")
    b64 = base64.b64encode(key.encode()).decode("ascii")
    return auth, key, quoted, b64


def echo_key_response(
    mode: str, *, retry_after: float = 0
) -> Callable[[RecordedRequest], FakeResponse]:
    """A scripted response (a callable of the request) that fails in ``mode`` - one of
    :data:`ECHO_MODES` - and echoes the request's API key everywhere it can.

    Every mode puts the ``Authorization`` value into the status line's reason phrase and into
    headers (``x-request-id``, ``www-authenticate``, ``x-echo-*`` with the key, url-quoted and
    base64 forms too). Then: ``401``, ``429`` (with ``retry-after``) and ``500`` answer an
    OpenAI-shaped JSON error whose message, type, code and param carry the key; ``redirect``
    is a 307 whose ``Location`` carries it; ``sse-error`` streams a first chunk (id and model
    set to the key) then a mid-stream ``{"error": ...}`` event with the key; ``malformed-sse``
    streams that chunk, then an event that is not JSON and holds the key at its start and
    again across its 120th character, then the error event; ``drop`` streams the chunk and an SSE comment with the key, then drops the
    connection mid-body. Without an ``Authorization`` header the echoes are empty strings.
    """
    if mode not in ECHO_MODES:
        raise ValueError(f"unknown echo mode {mode!r}; expected one of {', '.join(ECHO_MODES)}")

    def respond(request: RecordedRequest) -> FakeResponse:
        auth, key, quoted, b64 = _echo_forms(request)
        headers = {
            "x-request-id": auth,
            "www-authenticate": f'Bearer realm="{key}", error="invalid_token"',
            "x-echo-authorization": auth,
            "x-echo-key": key,
            "x-echo-key-quoted": quoted,
            "x-echo-key-base64": b64,
        }
        error = {
            "message": f"invalid key {auth} (quoted {quoted}, base64 {b64})",
            "type": key,
            "code": key,
            "param": b64,
        }
        if mode in ("401", "429", "500"):
            status = int(mode)
            if status == 429:
                headers["retry-after"] = f"{retry_after:g}"
            return json_response(
                {"error": error},
                status=status,
                headers=headers,
                reason=f"{http.HTTPStatus(status).phrase} {auth}",
            )
        if mode == "redirect":
            headers["location"] = f"http://127.0.0.1:9/steal?key={quoted}&b64={b64}"
            return json_response(None, status=307, headers=headers, reason=f"Moved {auth}")
        first = sse_event(
            completion_chunk({"role": "assistant", "content": ""}, model=key) | {"id": key}
        )
        error_event = sse_event({"error": error})
        pieces: tuple[SsePiece, ...]
        if mode == "sse-error":
            pieces = (first, error_event, sse_done())
        elif mode == "malformed-sse":
            # The key at the start, and again across the 120th character (where error texts
            # are often cut, which would leave a prefix of the key that no redactor knows).
            garbage = f"{{{auth} "
            garbage += "." * max(0, 100 - len(garbage)) + f"{key} not json"
            pieces = (first, sse_event(garbage), error_event, sse_done())
        else:
            pieces = (first, sse_comment(f"echo {auth}"), DROP)
        return sse_response(*pieces, headers=headers, reason=f"OK {auth}")

    return respond


# --- the server -------------------------------------------------------------------------------


class _BadRequest(Exception):
    pass


@final
class FakeOpenAiServer:
    """The running server: its :attr:`base_url`, the script, and what it received.

    Each request takes the next scripted response (a :data:`FakeResponse`, or a callable
    ``(RecordedRequest) -> FakeResponse``); when the script is empty it answers 500 with an
    error naming the request. Requests are recorded in :attr:`requests` in arrival order.
    """

    def __init__(self, port: int, responses: Iterable[ResponseItem]) -> None:
        self.port = port
        #: ``http://127.0.0.1:<port>/v1`` - pass it as the adapter's base URL.
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.requests: list[RecordedRequest] = []
        self._script: deque[ResponseItem] = deque(responses)

    def push(self, *responses: ResponseItem) -> None:
        """Append responses to the script."""
        self._script.extend(responses)

    @property
    def remaining(self) -> int:
        """How many scripted responses are left."""
        return len(self._script)

    def _next(self, request: RecordedRequest) -> FakeResponse:
        if not self._script:
            return error_response(
                500,
                f"fake OpenAI server: no scripted response left for request #{len(self.requests)} "
                f"({request.method} {request.path})",
                type="script_exhausted",
            )
        item = self._script.popleft()
        return (
            item if isinstance(item, SseResponse | JsonResponse | HangResponse) else item(request)
        )

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            try:
                request = await _read_request(stream)
            except (_BadRequest, trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if request is None:
                return
            self.requests.append(request)
            response = self._next(request)
            sent = _Progress()
            try:
                async with trio.open_nursery() as nursery:

                    async def watch() -> None:
                        try:
                            while await stream.receive_some(_WRITE_SIZE):
                                pass
                        except (trio.BrokenResourceError, trio.ClosedResourceError):
                            pass
                        if not sent.complete:
                            request.disconnected.set()
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(watch)
                    try:
                        await _respond(stream, response, sent)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        request.disconnected.set()
                    nursery.cancel_scope.cancel()
            finally:
                request.finished.set()


@final
class _Progress:
    __slots__ = ("complete",)

    def __init__(self) -> None:
        self.complete = False


async def _read_request(stream: trio.SocketStream) -> RecordedRequest | None:
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(_WRITE_SIZE)
        if not data:
            if buffer:
                raise _BadRequest("connection closed inside the request head")
            return None
        buffer += data
        if len(buffer) > _MAX_HEAD:
            raise _BadRequest("request head too large")
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, path, _version = lines[0].split(" ", 2)
    except ValueError:
        raise _BadRequest(f"bad request line {lines[0]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    length = int(headers.get("content-length", "0") or "0")
    while len(rest) < length:
        data = await stream.receive_some(_WRITE_SIZE)
        if not data:
            raise _BadRequest("connection closed inside the request body")
        rest += data
    body = rest[:length]
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    return RecordedRequest(method, path, headers, body, parsed)


def _status_line(status: int, reason: str | None = None) -> str:
    if reason is not None:
        phrase = reason
    else:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "Status"
    return f"HTTP/1.1 {status} {phrase}\r\n"


def _head(status: int, headers: Iterable[tuple[str, str]], reason: str | None = None) -> bytes:
    lines = [_status_line(status, reason)]
    lines.extend(f"{k}: {v}\r\n" for k, v in headers)
    lines.append("\r\n")
    return "".join(lines).encode("latin-1")


async def _respond(stream: trio.SocketStream, response: FakeResponse, sent: _Progress) -> None:
    if isinstance(response, HangResponse):
        await trio.sleep_forever()
    if isinstance(response, JsonResponse):
        body = (
            response.body
            if isinstance(response.body, bytes)
            else json.dumps(response.body).encode("utf-8")
        )
        head = _head(
            response.status,
            [
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
                ("connection", "close"),
                *response.headers,
            ],
            response.reason,
        )
        sent.complete = True
        await stream.send_all(head + body)
        return
    head = _head(
        response.status,
        [
            ("content-type", "text/event-stream"),
            ("cache-control", "no-cache"),
            ("transfer-encoding", "chunked"),
            ("connection", "close"),
            *response.headers,
        ],
        response.reason,
    )
    pending: list[bytes] = [head]
    size = len(head)

    async def flush(last: bytes = b"") -> None:
        nonlocal pending, size
        data = b"".join(pending) + last
        pending, size = [], 0
        if data:
            await stream.send_all(data)

    for piece in response.pieces:
        if isinstance(piece, Pause):
            await flush()
            await trio.sleep(piece.seconds)
        elif isinstance(piece, _Marker):
            await flush()
            if piece is HANG:
                await trio.sleep_forever()
            return
        else:
            data = piece.encode("utf-8") if isinstance(piece, str) else piece
            if data:
                pending.append(b"%x\r\n%s\r\n" % (len(data), data))
                size += len(data)
                if size >= _WRITE_SIZE:
                    await flush()
    sent.complete = True
    await flush(b"0\r\n\r\n")


@contextlib.asynccontextmanager
async def open_fake_openai_server(
    responses: Iterable[ResponseItem] = (),
) -> AsyncIterator[FakeOpenAiServer]:
    """Serve ``responses`` on 127.0.0.1 (a free port) for the duration of the block.

    The server and all connection tasks live in a nursery inside this context manager and are
    cancelled when the block exits, so nothing outlives it. Exceptions: an exception from the
    body propagates unchanged (not wrapped in a group); so does a bug in the server itself
    (expected network errors - a client going away - are absorbed and recorded).
    """
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            holder: list[FakeOpenAiServer] = []

            async def handler(stream: trio.SocketStream) -> None:
                await holder[0]._handle(stream)

            listeners: list[trio.SocketListener] = await nursery.start(
                functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1")
            )
            port = listeners[0].socket.getsockname()[1]
            server = FakeOpenAiServer(port, responses)
            holder.append(server)
            try:
                yield server
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise_single(group, body_error)
    finally:
        body_error = None
