"""An ``httpx.MockTransport`` that answers like an OpenAI-compatible server, in process.

It plays the fake server's response builders (``sse_reply``, ``error_response`` ...) without
sockets, for tests of request encoding, error mapping and SSE parsing. Pauses, hangs and
dropped connections need real sockets: use ``open_fake_openai_server`` for those.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from typing import Any, TypeAlias, final

import attrs
import httpx
import trio

from trio_agent.llm import OpenAiAdapter
from trio_agent.testing import FakeResponse, JsonResponse, SseResponse

BASE_URL = "https://mock.test/v1"


@attrs.frozen
class MockRequest:
    """One request the transport received."""

    method: str
    url: str
    path: str
    #: Header names lower-cased; repeated headers joined with ``", "``.
    headers: dict[str, str]
    #: The parsed JSON body, or ``None`` if it was not JSON.
    json: Any


#: What a scripted answer may be: a response, an exception the transport raises, or a callable
#: building either from the request.
Answer: TypeAlias = FakeResponse | httpx.HTTPError | Callable[[MockRequest], "Answer"]


@final
class _Pieces(httpx.AsyncByteStream):
    """A response body delivered piece by piece (a checkpoint before each, like a socket);
    an exception among the pieces is raised when the reader gets there."""

    def __init__(self, pieces: list[bytes | Exception]) -> None:
        self._pieces = deque(pieces)

    def __aiter__(self) -> _Pieces:
        return self

    async def __anext__(self) -> bytes:
        await trio.lowlevel.checkpoint()
        if not self._pieces:
            raise StopAsyncIteration
        piece = self._pieces.popleft()
        if isinstance(piece, Exception):
            raise piece
        return piece


def body_stream(*pieces: bytes | Exception) -> httpx.AsyncByteStream:
    """A streamed body of ``pieces`` for a hand-built ``httpx.Response``."""
    return _Pieces(list(pieces))


def _response(answer: FakeResponse) -> httpx.Response:
    if isinstance(answer, JsonResponse):
        body = answer.body
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = [("content-type", "application/json"), *answer.headers]
        return httpx.Response(answer.status, headers=headers, content=content)
    if not isinstance(answer, SseResponse):
        raise TypeError(f"{answer!r} needs real sockets: use open_fake_openai_server")
    pieces: list[bytes | Exception] = []
    for piece in answer.pieces:
        if not isinstance(piece, str | bytes):
            raise TypeError(f"{piece!r} needs real sockets: use open_fake_openai_server")
        pieces.append(piece.encode() if isinstance(piece, str) else piece)
    headers = [("content-type", "text/event-stream"), *answer.headers]
    return httpx.Response(answer.status, headers=headers, stream=_Pieces(pieces))


@final
class MockOpenAi:
    """A script of answers behind an ``httpx.MockTransport``; records every request."""

    base_url = BASE_URL

    def __init__(self) -> None:
        self._script: deque[Answer] = deque()
        self.requests: list[MockRequest] = []
        self.transport = httpx.MockTransport(self._handle)

    def push(self, *answers: Answer | httpx.Response) -> None:
        """Append answers to the script (an ``httpx.Response`` is returned as it is)."""
        self._script.extend(answers)  # type: ignore[arg-type]

    def adapter(self, **options: Any) -> OpenAiAdapter:
        """An adapter on this transport (no API key unless ``api_key_env`` is given)."""
        options.setdefault("base_url", self.base_url)
        options.setdefault("api_key_env", None)
        return OpenAiAdapter(transport=self.transport, **options)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        content = request.content
        try:
            parsed = json.loads(content) if content else None
        except ValueError:
            parsed = None
        record = MockRequest(
            request.method,
            str(request.url),
            request.url.path,
            {k.lower(): v for k, v in request.headers.items()},
            parsed,
        )
        self.requests.append(record)
        if not self._script:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        answer: Any = self._script.popleft()
        while callable(answer):
            answer = answer(record)
        if isinstance(answer, httpx.HTTPError):
            raise answer
        if isinstance(answer, httpx.Response):
            return answer
        return _response(answer)
