"""A minimal JSON-RPC peer on trio streams, for driving the ACP server frame by frame.

The official client (asyncio) cannot send malformed frames or run in-process next to a trio
server; this one can. Every line the server writes must be a JSON-RPC 2.0 object - anything
else fails the test at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import trio


class RawClient:
    """Writes frames to ``send``; reads the server's frames from ``receive``."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self.send_stream = send
        self.receive_stream = receive
        self.notifications: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self._buffer = b""
        self._next_id = 1000
        #: Answers the server's requests (``session/request_permission``) as they arrive: takes
        #: the request, returns its result. Without one, requests are only recorded.
        self.answer: Callable[[dict[str, Any]], Any] | None = None

    async def send_bytes(self, data: bytes) -> None:
        await self.send_stream.send_all(data)

    async def send(self, *messages: Any) -> None:
        """Send one frame per message, in one write."""
        await self.send_bytes(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def next_frame(self) -> dict[str, Any] | None:
        """The next frame the server wrote (None at the end of its output)."""
        while b"\n" not in self._buffer:
            data = await self.receive_stream.receive_some(65536)
            if not data:
                assert not self._buffer, f"trailing bytes without a newline: {self._buffer!r}"
                return None
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        frame = json.loads(line)
        assert isinstance(frame, dict) and frame.get("jsonrpc") == "2.0", f"not JSON-RPC: {line!r}"
        return frame

    async def response(self) -> dict[str, Any]:
        """The next response, recording the notifications and requests that come before it."""
        while True:
            frame = await self.next_frame()
            assert frame is not None, "the server closed its output before answering"
            if "method" in frame and "id" in frame:
                self.requests.append(frame)
                if self.answer is not None:
                    result = self.answer(frame)
                    await self.send({"jsonrpc": "2.0", "id": frame["id"], "result": result})
            elif "method" in frame:
                self.notifications.append(frame)
            else:
                return frame

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its response (responses must come in order here)."""
        self._next_id += 1
        request_id = self._next_id
        await self.send(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        )
        answer = await self.response()
        assert answer["id"] == request_id, answer
        return answer

    async def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        answer = await self.call(method, params)
        assert "result" in answer, answer
        return answer["result"]

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """The ``update`` of every ``session/update`` so far (of one session)."""
        return [
            n["params"]["update"]
            for n in self.notifications
            if n["method"] == "session/update"
            and (session_id is None or n["params"]["sessionId"] == session_id)
        ]
