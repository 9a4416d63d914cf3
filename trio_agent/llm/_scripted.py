"""A scripted model for tests: a queue of canned responses."""

from __future__ import annotations

import collections
import contextlib
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeAlias, final

import attrs
import trio

from ..ids import CallId
from ..runtime import Context
from ._errors import ScriptExhaustedError
from ._models import ModelList, to_model_list
from ._playback import Playback, PlaybackStream
from ._service import LlmService
from ._types import (
    BlockEnd,
    BlockStart,
    Finish,
    GenerateRequest,
    LlmFailure,
    ReasoningBlock,
    ReasoningDelta,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    Usage,
    UsageChunk,
)

__all__ = [
    "ScriptItem",
    "ScriptedAdapter",
    "ScriptedProvider",
    "ScriptedResponse",
    "error",
    "hang",
    "max_tokens",
    "raises",
    "raw",
    "reasoning",
    "text",
    "tool_call",
]


@attrs.frozen
class _Text:
    pieces: tuple[str, ...]


@attrs.frozen
class _Reasoning:
    pieces: tuple[str, ...]


@attrs.frozen
class _ToolCall:
    id: str
    name: str
    pieces: tuple[str, ...]


@attrs.frozen
class _Raw:
    chunks: tuple[StreamChunk, ...]


_Part: TypeAlias = _Text | _Reasoning | _ToolCall | _Raw


@attrs.frozen
class ScriptedResponse:
    """One canned model response; build it with :func:`text`, :func:`tool_call`,
    :func:`max_tokens`, :func:`error`, :func:`hang`, :func:`raises` or :func:`raw`.

    Responses concatenate with ``+``: ``text("Let me look.") + tool_call("c1", "read_file",
    {"path": "a"}) + tool_call("c2", "read_file", {"path": "b"})`` streams a text block and
    two tool calls. The blocks of both sides are kept in order; the ending (finish, usage,
    hang, raise) is the right side's where it sets one, else the left side's. Without an
    explicit finish a response ends ``"tool-calls"`` if it holds a tool call, else ``"stop"``.
    """

    parts: tuple[_Part, ...] = ()
    finish: Finish | None = None
    usage: Usage | None = None
    hang: bool = False
    error: BaseException | None = attrs.field(default=None, eq=False)
    auto_finish: bool = True

    def __add__(self, other: ScriptedResponse) -> ScriptedResponse:
        if not isinstance(other, ScriptedResponse):
            return NotImplemented
        return ScriptedResponse(
            self.parts + other.parts,
            finish=other.finish or self.finish,
            usage=other.usage or self.usage,
            hang=self.hang or other.hang,
            error=other.error or self.error,
            auto_finish=self.auto_finish and other.auto_finish,
        )

    def with_usage(self, usage: Usage) -> ScriptedResponse:
        """This response, reporting ``usage`` just before its finish."""
        return attrs.evolve(self, usage=usage)

    def chunks(self) -> tuple[StreamChunk, ...]:
        """The chunks this response streams (before it hangs or raises, if it does)."""
        out: list[StreamChunk] = []
        index = 0
        has_call = False
        for part in self.parts:
            if isinstance(part, _Raw):
                out.extend(part.chunks)
                continue
            if isinstance(part, _Text):
                out.append(BlockStart(index, "text"))
                out.extend(TextDelta(index, p) for p in part.pieces)
                out.append(BlockEnd(index, TextBlock("".join(part.pieces))))
            elif isinstance(part, _Reasoning):
                out.append(BlockStart(index, "reasoning"))
                out.extend(ReasoningDelta(index, p) for p in part.pieces)
                out.append(BlockEnd(index, ReasoningBlock("".join(part.pieces))))
            else:
                has_call = True
                call_id = CallId(part.id)
                out.append(BlockStart(index, "tool-call"))
                out.extend(ToolCallDelta(index, call_id, part.name, p) for p in part.pieces)
                out.append(BlockEnd(index, ToolCallBlock(call_id, part.name, "".join(part.pieces))))
            index += 1
        if self.hang or self.error is not None or not self.auto_finish:
            return tuple(out)
        if self.usage is not None:
            out.append(UsageChunk(self.usage))
        out.append(self.finish or Finish("tool-calls" if has_call else "stop"))
        return tuple(out)


#: What a script holds: a response, a plain string (a text reply), or a callable that builds
#: one from the request.
ScriptItem: TypeAlias = (
    ScriptedResponse | str | Callable[[GenerateRequest], "ScriptedResponse | str"]
)


def _pieces(parts: Iterable[str] | str | None) -> tuple[str, ...]:
    if parts is None:
        return ()
    if isinstance(parts, str):
        return (parts,) if parts else ()
    return tuple(parts)


def text(*pieces: str) -> ScriptedResponse:
    """A text reply streamed as one delta per piece: ``text("Hello ", "world")``."""
    return ScriptedResponse((_Text(pieces),) if pieces else ())


def reasoning(*pieces: str) -> ScriptedResponse:
    """A reasoning block streamed as one delta per piece (combine it with ``+``)."""
    return ScriptedResponse((_Reasoning(pieces),) if pieces else ())


def tool_call(
    id: str, name: str, arguments: str | Mapping[str, Any] = "{}", *, chunks: int = 1
) -> ScriptedResponse:
    """A tool call whose ``arguments`` (JSON text, or a mapping dumped to JSON) stream in
    ``chunks`` argument deltas. Combine several with ``+`` for parallel calls."""
    if chunks < 1:
        raise ValueError(f"tool_call(chunks=...) must be >= 1, got {chunks}")
    args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    size = max(1, -(-len(args) // chunks))
    pieces = tuple(args[i : i + size] for i in range(0, len(args), size)) or ("",)
    return ScriptedResponse((_ToolCall(id, name, pieces),))


def max_tokens(*pieces: str) -> ScriptedResponse:
    """A reply cut off by the output-token limit: the pieces, then ``Finish("max-tokens")``."""
    return ScriptedResponse((_Text(pieces),) if pieces else (), finish=Finish("max-tokens"))


def error(
    code: str = "SERVER",
    message: str | None = None,
    *,
    status: int | None = None,
    retry_after: float | None = None,
    request_id: str | None = None,
    partial: Iterable[str] | str | None = None,
) -> ScriptedResponse:
    """A failed call: optional ``partial`` text, then ``Finish("error", LlmFailure(code, ...))``
    (``Finish("aborted", ...)`` for code ``ABORTED``)."""
    failure = LlmFailure(
        code,
        message or f"scripted {code} failure",
        status=status,
        retry_after=retry_after,
        request_id=request_id,
    )
    finish = Finish("aborted", failure) if code == "ABORTED" else Finish("error", failure)
    head = _pieces(partial)
    return ScriptedResponse((_Text(head),) if head else (), finish=finish)


def hang(partial: Iterable[str] | str | None = None) -> ScriptedResponse:
    """Stream ``partial`` text (if any), then wait until cancelled; there is no finish."""
    head = _pieces(partial)
    return ScriptedResponse((_Text(head),) if head else (), hang=True)


def raises(
    exception: BaseException, partial: Iterable[str] | str | None = None
) -> ScriptedResponse:
    """Stream ``partial`` text (if any), then raise ``exception`` from the stream."""
    head = _pieces(partial)
    return ScriptedResponse((_Text(head),) if head else (), error=exception)


def raw(*chunks: StreamChunk) -> ScriptedResponse:
    """Stream exactly ``chunks``: no blocks are added, and no finish unless you pass one."""
    return ScriptedResponse((_Raw(chunks),), auto_finish=False)


def _resolve(item: ScriptItem, request: GenerateRequest) -> ScriptedResponse:
    if callable(item) and not isinstance(item, ScriptedResponse):
        item = item(request)
    if isinstance(item, str):
        return text(item)
    if isinstance(item, ScriptedResponse):
        return item
    raise TypeError(
        f"a scripted response must be a ScriptedResponse, a str or a callable returning one; "
        f"got {type(item).__name__}"
    )


def _to_deque(items: Iterable[ScriptItem]) -> collections.deque[ScriptItem]:
    return collections.deque(items)


@final
@attrs.define(eq=False)
class ScriptedAdapter:
    """A model that answers from a script, for tests.

    Each :meth:`stream` call records its request in :attr:`requests` and plays the next
    response of the script: a :class:`ScriptedResponse`, a string (a one-piece text reply), or
    a callable ``(GenerateRequest) -> response`` for answers that depend on the request. Every
    chunk waits ``delay`` seconds (default 0: just a checkpoint, so cancellation can land
    between any two chunks). A call beyond the end of the script fails with
    :class:`ScriptExhaustedError` (code ``SCRIPT_EXHAUSTED``, naming the adapter and how many
    responses it had), which ``ctx.llm`` reports as ``Finish("error")``.

    Example::

        adapter = ScriptedAdapter(
            responses=[text("Hello ", "world"), tool_call("c1", "read_file", '{"path": "a"}')]
        )
    """

    #: Its stream runs no background task: ``ctx.llm`` reads it in the caller's task (#17).
    streams_inline: ClassVar[bool] = True
    name: str = "scripted"
    responses: collections.deque[ScriptItem] = attrs.field(
        factory=collections.deque, converter=_to_deque
    )
    delay: float = 0.0
    #: Every request this adapter was asked to stream, in order.
    requests: list[GenerateRequest] = attrs.field(factory=list, init=False)
    _served: int = attrs.field(default=0, init=False)

    def push(self, *responses: ScriptItem) -> None:
        """Append responses to the script."""
        self.responses.extend(responses)

    @property
    def remaining(self) -> int:
        """How many responses are left."""
        return len(self.responses)

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        """Play the next scripted response (see the class docstring)."""
        return PlaybackStream(self._play, request)

    def _play(self, request: GenerateRequest) -> Playback:
        self.requests.append(request)
        if not self.responses:
            raise ScriptExhaustedError(self.name, self._served)
        self._served += 1
        response = _resolve(self.responses.popleft(), request)
        return Playback(
            response.chunks(), delay=self.delay, hang=response.hang, error=response.error
        )


@final
class ScriptedProvider:
    """Plugin: register a :class:`ScriptedAdapter` with ``ctx.llm``.

    ``Config.responses`` are plain text replies (the config-file form); push richer responses
    through :attr:`adapter`.
    """

    inject = ("llm",)

    @attrs.frozen
    class Config:
        """Adapter name, text replies, per-chunk delay, and the advisory model names (the
        first is the default model of agents on this provider)."""

        #: The ``type`` tag of this provider in ``trio-agent.yml``.
        type: ClassVar[str] = "scripted"

        name: str = "scripted"
        responses: tuple[str, ...] = ()
        delay: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
        #: Names (the first is the default model) or ``{name, context_window}`` entries.
        models: ModelList = attrs.field(factory=ModelList, converter=to_model_list)

    def __init__(self, ctx: Context, config: ScriptedProvider.Config) -> None:
        self.adapter = ScriptedAdapter(
            name=config.name, responses=config.responses, delay=config.delay
        )
        ctx.require(LlmService).register(self.adapter, models=config.models)
