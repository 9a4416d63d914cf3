"""A harness with ``ctx.usage`` and ``ctx.compaction`` on a scripted model that has a context
window, and that model."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import attrs

from trio_agent.agent import AgentRegistry, RetryPlugin
from trio_agent.compaction import DEFAULT_PROMPT, Compaction, Strategy
from trio_agent.llm import (
    GenerateRequest,
    LlmService,
    Message,
    ModelSpec,
    OpenAiProvider,
    RetryPolicy,
    ScriptedAdapter,
    ToolCallBlock,
    ToolResultBlock,
    Usage,
)
from trio_agent.loop import AgentLoop
from trio_agent.prompt import SystemPrompt
from trio_agent.runtime import Plugin, open_runtime
from trio_agent.session import SessionStore
from trio_agent.testing import ScriptedResponse, TestHarness, error, text, tool_call
from trio_agent.tools import Tool, ToolRegistry, tool
from trio_agent.usage import UsageService, estimate_request_tokens, estimate_tokens

PROVIDER = "model"
MODEL = "windowed"


@tool
async def read_page(page: int) -> str:
    """Read one page of the manual."""
    return f"page {page}: " + "lorem ipsum dolor sit amet " * 12


@contextlib.asynccontextmanager
async def open_compaction_harness(
    responses: Iterable[Any] = (),
    *,
    window: int | None,
    keep_turns: int = 2,
    threshold: float = 0.8,
    strategy: Strategy = "summary",
    tools: Sequence[Tool] = (read_page,),
    retry: RetryPolicy | None = None,
    persistence: Plugin | None = None,
    persistence_config: Any = None,
    compaction: bool = True,
    openai_base_url: str | None = None,
) -> AsyncIterator[TestHarness]:
    """Every core service, ``ctx.usage`` and ``ctx.compaction``, on a :class:`ScriptedAdapter`
    named ``model`` (or an OpenAI adapter on ``openai_base_url``) whose model ``windowed`` has
    ``window`` tokens."""
    async with open_runtime() as ctx:
        await ctx.plugin(LlmService)
        model = ScriptedAdapter(name=PROVIDER, responses=list(responses))
        models = [ModelSpec(MODEL, context_window=window)]
        if openai_base_url is None:
            ctx.require(LlmService).register(model, retry_policy=retry, models=models)
        else:
            await ctx.plugin(
                OpenAiProvider,
                OpenAiProvider.Config(
                    name=PROVIDER,
                    base_url=openai_base_url,
                    models=models,
                    retry=retry or RetryPolicy(),
                    trust_env=False,
                ),
            )
        await ctx.plugin(SessionStore)
        if persistence is not None:
            await ctx.plugin(persistence, persistence_config)
        await ctx.plugin(ToolRegistry)
        await ctx.plugin(SystemPrompt, {"persona": "You read manuals."})
        await ctx.plugin(AgentRegistry)
        if retry is not None:
            await ctx.plugin(RetryPlugin, {"seed": 0})
        await ctx.plugin(UsageService)
        if compaction:
            await ctx.plugin(
                Compaction,
                Compaction.Config(keep_turns=keep_turns, threshold=threshold, strategy=strategy),
            )
        await ctx.plugin(AgentLoop, AgentLoop.Config(provider=PROVIDER, model=MODEL))
        for item in tools:
            ctx.require(ToolRegistry).register(item)
        yield TestHarness(ctx, model)


def is_summary_request(request: GenerateRequest) -> bool:
    return request.system == DEFAULT_PROMPT


@attrs.define
class WindowedModel:
    """A scripted model with a context window, counting tokens with the usage estimator.

    Over the window it answers ``CONTEXT_WINDOW_EXCEEDED`` (as a provider does). A summary
    request gets a short summary; a prompt ``"turn N"`` gets a ``read_page`` call, then a text
    answer quoting the page. Every answer reports its usage.
    """

    window: int
    requests: list[GenerateRequest] = attrs.field(factory=list)
    sizes: list[int] = attrs.field(factory=list)
    summaries: int = 0

    def __call__(self, request: GenerateRequest) -> ScriptedResponse:
        size = estimate_request_tokens(request.system, request.tools, request.messages)
        self.requests.append(request)
        self.sizes.append(size)
        if size > self.window:
            return error("CONTEXT_WINDOW_EXCEEDED", "maximum context length exceeded", status=400)
        if is_summary_request(request):
            self.summaries += 1
            reply = text(f"Summary {self.summaries}: the user had pages read to them.")
        else:
            last = request.messages[-1]
            block = last.content[0]
            if isinstance(block, ToolResultBlock):
                reply = text(f"That page says: {_text_of(block)[:60]}")
            else:
                turn = int(last.text.split()[-1])
                reply = tool_call(f"c{turn}", "read_page", {"page": turn})
        return reply.with_usage(Usage(size, estimate_tokens(str(reply.parts))))


def _text_of(block: ToolResultBlock) -> str:
    return "".join(getattr(part, "text", "") for part in block.content)


def assert_pairs_intact(messages: Sequence[Message]) -> None:
    """Every tool call is answered right after its message, and every result answers one."""
    waiting: list[str] = []
    for message in messages:
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        if results:
            assert waiting, f"a tool result {results[0].tool_call_id!r} without its call"
            assert results[0].tool_call_id == waiting.pop(0)
            continue
        assert not waiting, f"calls {waiting} not answered before {message.role} message"
        waiting = [b.id for b in message.content if isinstance(b, ToolCallBlock)]
    assert not waiting, f"calls {waiting} never answered"
