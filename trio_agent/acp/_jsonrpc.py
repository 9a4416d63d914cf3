"""JSON-RPC 2.0 over newline-delimited frames on a pair of trio streams (ACP's stdio transport).

One :class:`JsonRpcPeer` is one connection. Its parts:

* :class:`FrameReader` splits the incoming byte stream into lines, refusing (and skipping) a line
  longer than the size limit without ever holding more than the limit in memory.
* :meth:`JsonRpcPeer.serve_incoming` classifies every frame in arrival order: a malformed one is
  answered with the matching error code and reading goes on; a request goes to the handler; a
  response resolves one of our own pending requests.
* Output (responses, notifications, our requests) goes through one ordered, unbounded outbox, so
  synchronous code (event listeners) can post without waiting, and one writer task
  (:meth:`JsonRpcPeer.run_writer`) owns the output stream. Frames never interleave.

The handler sees a request synchronously, in arrival order, and either answers at once or returns
an async callable that the peer runs as a task in the connection's nursery; that is how a long
``session/prompt`` never blocks the ``session/cancel`` that follows it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeAlias, final

import attrs
import trio

from ..redaction import redact_known
from ._errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ConnectionClosedError,
    RpcError,
)

__all__ = ["FrameReader", "JsonRpcPeer", "Oversized", "Reply", "RequestHandler"]

logger = logging.getLogger("trio_agent.acp")

#: A JSON-RPC id: a string, an integer or null.
JsonId: TypeAlias = str | int | None
#: A JSON object as Python data.
JsonObject: TypeAlias = dict[str, Any]
#: What a handler returns for a request: the result now, or an async callable producing it.
Reply: TypeAlias = JsonObject | Callable[[], Awaitable[JsonObject]]

_READ_SIZE = 64 * 1024


class RequestHandler(Protocol):
    """What :meth:`JsonRpcPeer.serve_incoming` dispatches to (the ACP server)."""

    def handle_request(self, method: str, params: JsonObject) -> Reply:
        """Answer a request, or return an async callable that will; raise :class:`RpcError`
        to answer with an error."""
        ...

    def handle_notification(self, method: str, params: JsonObject) -> None:
        """Act on a notification (it gets no answer, not even an error)."""
        ...


@attrs.frozen
class Oversized:
    """A frame that exceeded the size limit; its bytes were skipped."""

    size: int


@final
class FrameReader:
    """Newline-delimited frames from a byte stream, each at most ``limit`` bytes.

    A frame longer than ``limit`` is skipped up to its newline and reported as :class:`Oversized`
    (memory stays bounded by the limit plus one read). A trailing ``\\r`` is stripped; a last
    frame without a newline before the end of the stream still counts.
    """

    def __init__(self, stream: trio.abc.ReceiveStream, limit: int) -> None:
        self._stream = stream
        self._limit = limit
        self._buffer = bytearray()
        self._start = 0  # where the next frame begins in the buffer
        self._scanned = 0  # no newline before this position
        self._eof = False

    async def next(self) -> bytes | Oversized | None:
        """The next frame, an :class:`Oversized` marker, or None at the end of the stream."""
        while True:
            newline = self._buffer.find(b"\n", max(self._start, self._scanned))
            if newline >= 0:
                start, self._start = self._start, newline + 1
                size = newline - start
                frame = bytes(self._buffer[start:newline]) if size <= self._limit else None
                self._compact()
                return Oversized(size) if frame is None else frame.removesuffix(b"\r")
            if len(self._buffer) - self._start > self._limit:
                return await self._skip_oversized()
            if self._eof:
                return self._rest()
            self._scanned = len(self._buffer)
            data = await self._receive()
            self._buffer += data

    async def _receive(self) -> bytes:
        try:
            data = await self._stream.receive_some(_READ_SIZE)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            data = b""  # a broken input is the end of the input
        if not data:
            self._eof = True
        return bytes(data)

    def _rest(self) -> bytes | None:
        rest = bytes(self._buffer[self._start :])
        self._buffer.clear()
        self._start = self._scanned = 0
        return rest.removesuffix(b"\r") if rest else None

    async def _skip_oversized(self) -> Oversized:
        size = len(self._buffer) - self._start
        self._buffer.clear()
        self._start = self._scanned = 0
        while not self._eof:
            data = await self._receive()
            if not data:
                break
            newline = data.find(b"\n")
            if newline >= 0:
                self._buffer += data[newline + 1 :]
                return Oversized(size + newline)
            size += len(data)
        return Oversized(size)

    def _compact(self) -> None:
        if self._start > _READ_SIZE and self._start * 2 > len(self._buffer):
            del self._buffer[: self._start]
            self._start = 0
        self._scanned = self._start


def encode(message: JsonObject) -> bytes:
    """One frame: compact ASCII JSON (any string survives, lone surrogates too) and a newline."""
    return json.dumps(message, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _valid_id(value: object) -> bool:
    return value is None or isinstance(value, str) or (type(value) is int)


@final
@attrs.define(eq=False)
class _Pending:
    done: trio.Event = attrs.field(factory=trio.Event)
    result: Any = None
    error: BaseException | None = None


@final
class JsonRpcPeer:
    """One JSON-RPC 2.0 connection: the ordered outbox, our pending requests, incoming dispatch.

    Run :meth:`run_writer` in a task that outlives everything that posts; call :meth:`finish`
    when nothing more will be posted, and the writer writes what is queued, closes the stream
    and returns.
    """

    def __init__(self, output: trio.abc.SendStream, *, max_message_bytes: int) -> None:
        self._output = output
        self._max_message_bytes = max_message_bytes
        self._outbox_in, self._outbox = trio.open_memory_channel[bytes](math.inf)
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._finished = False
        self._connected = True
        #: Set when the writer has written everything and closed the output.
        self.flushed = trio.Event()

    # --- output ---------------------------------------------------------------------------

    def notify(self, method: str, params: JsonObject) -> None:
        """Post a notification (never blocks)."""
        self._post({"jsonrpc": "2.0", "method": method, "params": params})

    def respond(self, request_id: JsonId, result: JsonObject) -> None:
        """Post the result of request ``request_id``."""
        self._post({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: JsonId, error: RpcError) -> None:
        """Post an error answer to request ``request_id`` (null when it could not be read)."""
        self._post({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()})

    async def request(self, method: str, params: JsonObject) -> Any:
        """Send a request to the client and wait for its result.

        Cancellation abandons the request (a late answer is ignored).

        Raises:
            RpcError: the client answered with an error.
            ConnectionClosedError: the connection closed (or was never readable again) first.
        """
        if self._finished or not self._connected:
            raise ConnectionClosedError(
                f"cannot send {method}: the connection to the client is closed"
            )
        request_id = self._next_id
        self._next_id += 1
        slot = _Pending()
        self._pending[request_id] = slot
        try:
            self._post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            await slot.done.wait()
        finally:
            self._pending.pop(request_id, None)
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _post(self, message: JsonObject) -> None:
        if self._finished:
            logger.debug("dropped a message posted after the connection finished: %.200r", message)
            return
        self._outbox_in.send_nowait(encode(message))

    def finish(self) -> None:
        """No more output: the writer writes what is queued, then closes the stream."""
        if not self._finished:
            self._finished = True
            self._outbox_in.close()

    async def run_writer(self) -> None:
        """Write queued frames in order until :meth:`finish`; then close the output stream.

        A broken output (the client went away) is logged once; later frames are discarded.
        """
        broken = False
        try:
            async for frame in self._outbox:
                frames = [frame]
                while True:
                    try:
                        frames.append(self._outbox.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                if broken:
                    continue
                try:
                    await self._output.send_all(b"".join(frames))
                except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                    broken = True
                    logger.warning(
                        "the client stopped reading our output (%s); later messages are dropped",
                        exc,
                    )
            with trio.move_on_after(1) as cleanup:
                cleanup.shield = True
                await self._output.aclose()
        finally:
            self.flushed.set()

    # --- input ----------------------------------------------------------------------------

    async def serve_incoming(
        self, stream: trio.abc.ReceiveStream, handler: RequestHandler, nursery: trio.Nursery
    ) -> None:
        """Read and dispatch frames until the end of ``stream``.

        Malformed frames are answered with an error and reading goes on. Request bodies that
        the handler defers run in ``nursery``. Returns at the end of the stream; then every
        request still waiting for the client fails with :class:`ConnectionClosedError`.
        """
        reader = FrameReader(stream, self._max_message_bytes)
        try:
            while (frame := await reader.next()) is not None:
                self._dispatch_frame(frame, handler, nursery)
        finally:
            self._disconnected()

    def _disconnected(self) -> None:
        self._connected = False
        for slot in self._pending.values():
            slot.error = ConnectionClosedError("the client closed the connection before answering")
            slot.done.set()

    def _dispatch_frame(
        self, frame: bytes | Oversized, handler: RequestHandler, nursery: trio.Nursery
    ) -> None:
        if isinstance(frame, Oversized):
            self.respond_error(
                None,
                RpcError(
                    PARSE_ERROR,
                    f"message of {frame.size} bytes exceeds the limit of "
                    f"{self._max_message_bytes} bytes; it was skipped",
                    {"limit": self._max_message_bytes},
                ),
            )
            return
        if not frame.strip():
            return
        try:
            message = json.loads(frame.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError as exc:
            self.respond_error(None, RpcError(PARSE_ERROR, f"message is not valid UTF-8: {exc}"))
            return
        except (ValueError, RecursionError) as exc:
            self.respond_error(None, RpcError(PARSE_ERROR, f"message is not valid JSON: {exc}"))
            return
        if isinstance(message, list):
            self.respond_error(
                None,
                RpcError(
                    INVALID_REQUEST, "batch messages are not supported: send one object per line"
                ),
            )
            return
        if not isinstance(message, dict):
            self.respond_error(
                None,
                RpcError(
                    INVALID_REQUEST,
                    f"a message must be a JSON object, got {type(message).__name__}",
                ),
            )
            return
        if "method" not in message and ("result" in message or "error" in message):
            self._on_response(message)
            return
        self._on_request(message, handler, nursery)

    def _on_request(
        self, message: JsonObject, handler: RequestHandler, nursery: trio.Nursery
    ) -> None:
        has_id = "id" in message
        raw_id = message.get("id")
        reply_id: JsonId = raw_id if _valid_id(raw_id) else None

        def invalid(text: str, code: int = INVALID_REQUEST) -> None:
            self.respond_error(reply_id, RpcError(code, text))

        if message.get("jsonrpc") != "2.0":
            return invalid('"jsonrpc" must be "2.0"')
        if not _valid_id(raw_id):
            return invalid(f'"id" must be a string, an integer or null, got {raw_id!r:.80}')
        method = message.get("method")
        if not isinstance(method, str):
            return invalid(f'"method" must be a string, got {method!r:.80}')
        params = message.get("params")
        if params is None:
            params = {}
        if isinstance(params, list):
            return invalid(
                f"{method}: params must be an object of named parameters, got an array",
                INVALID_PARAMS,
            )
        if not isinstance(params, dict):
            return invalid(f'"params" must be an object, got {type(params).__name__}')
        if not has_id:
            try:
                handler.handle_notification(method, params)
            except Exception:
                logger.exception("the %s notification failed", method)
            return
        try:
            reply = handler.handle_request(method, params)
        except RpcError as exc:
            self.respond_error(reply_id, exc)
            return
        except Exception as exc:
            logger.exception("the %s request failed", method)
            self.respond_error(reply_id, _internal(method, exc))
            return
        if callable(reply):
            nursery.start_soon(self._answer_later, reply_id, method, reply, name=method)
        else:
            self.respond(reply_id, reply)

    async def _answer_later(
        self, request_id: JsonId, method: str, body: Callable[[], Awaitable[JsonObject]]
    ) -> None:
        answered = False
        try:
            result = await body()
            answered = True
            self.respond(request_id, result)
        except RpcError as exc:
            answered = True
            self.respond_error(request_id, exc)
        except Exception as exc:
            answered = True
            logger.exception("the %s request failed", method)
            self.respond_error(request_id, _internal(method, exc))
        finally:
            if not answered:
                self.respond_error(
                    request_id,
                    RpcError(INTERNAL_ERROR, f"{method} was not completed: the server is closing"),
                )

    def _on_response(self, message: JsonObject) -> None:
        raw_id = message.get("id")
        slot = self._pending.get(raw_id) if type(raw_id) is int else None
        if slot is None:
            logger.debug("ignored a response to no pending request: id %.80r", raw_id)
            return
        error = message.get("error")
        if error is not None:
            if isinstance(error, dict) and type(error.get("code")) is int:
                slot.error = RpcError(
                    error["code"], str(error.get("message", "")), error.get("data")
                )
            else:
                slot.error = RpcError(
                    INTERNAL_ERROR, f"the client sent a malformed error: {error!r:.200}"
                )
        else:
            slot.result = message.get("result")
        slot.done.set()


def _internal(method: str, exc: Exception) -> RpcError:
    return RpcError(
        INTERNAL_ERROR,
        f"{method} failed: {type(exc).__name__}",
        {"code": type(exc).__name__, "message": redact_known(str(exc))[:500]},
    )
