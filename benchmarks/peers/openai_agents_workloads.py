"""openai-agents on trio-agent's workloads 1 and 5, with a canned ``Model`` (no network, no key).

Run by ``benchmarks/bench_peers.py`` under the ``.venv-peers`` interpreter:
``.venv-peers/bin/python benchmarks/peers/openai_agents_workloads.py --steps 300 --agents 1000``.

The SDK ships no test model, so ``_Canned`` implements its ``Model`` interface directly and
returns prebuilt Responses-format items. Tracing is off three ways: the environment variable
(set by ``_common``), ``set_tracing_disabled(True)`` and ``RunConfig(tracing_disabled=True)``; the
default trace processors (an exporter to the platform) are removed as well.
"""

from __future__ import annotations

import _common

_common.forbid_network()

try:
    import asyncio
    import time
    from collections.abc import AsyncIterator, Callable
    from typing import Any

    from agents import (
        Agent,
        RunConfig,
        Runner,
        function_tool,
        set_trace_processors,
        set_tracing_disabled,
    )
    from agents.items import ModelResponse, TResponseStreamEvent
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )
except ImportError as exc:
    _common.not_installed("openai-agents", exc)
    raise SystemExit(0) from None

PEER = "openai-agents"
set_tracing_disabled(True)
set_trace_processors([])
_RUN_CONFIG = RunConfig(tracing_disabled=True)


@function_tool
async def noop() -> str:
    """Do nothing."""
    return "ok"


def _text(text: str) -> ModelResponse:
    content = [ResponseOutputText(type="output_text", text=text, annotations=[])]
    message = ResponseOutputMessage(
        id="msg", type="message", role="assistant", status="completed", content=content
    )
    return ModelResponse(output=[message], usage=Usage(), response_id=None)


def _call(call_id: str) -> ModelResponse:
    call = ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name="noop", arguments="{}"
    )
    return ModelResponse(output=[call], usage=Usage(), response_id=None)


class _Canned(Model):
    """Answers ``get_response`` with ``respond()``; the runner's non-streamed path only."""

    def __init__(self, respond: Callable[[], Any]) -> None:
        self._respond = respond

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return await self._respond()

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the benchmark uses Runner.run (not streamed)")


def _scripted(steps: int) -> _Canned:
    """One ``noop`` call per request, then text on request ``steps`` (a counter)."""
    calls = 0

    async def respond() -> ModelResponse:
        nonlocal calls
        calls += 1
        return _call(f"c{calls}") if calls < steps else _text("done")

    return _Canned(respond)


async def loop(steps: int) -> float:
    agent = Agent(name="a", model=_scripted(steps), tools=[noop])
    start = time.perf_counter()
    # max_turns counts model calls; the default (10) would stop the run.
    result = await Runner.run(agent, "go", max_turns=steps, run_config=_RUN_CONFIG)
    elapsed = time.perf_counter() - start
    assert result.final_output == "done", result.final_output
    assert len(result.raw_responses) == steps, len(result.raw_responses)
    return elapsed / steps


async def agents(count: int, latency: float) -> dict[str, float]:
    async def respond() -> ModelResponse:
        await asyncio.sleep(latency)
        return _text("hi")

    model = _Canned(respond)

    def make(n: int) -> list[Agent[Any]]:
        return [Agent(name=f"a{i}", model=model) for i in range(n)]

    async def run_one(agent: Agent[Any]) -> None:
        result = await Runner.run(agent, "hello", run_config=_RUN_CONFIG)
        assert result.final_output == "hi", result.final_output

    return await _common.many_agents(make, run_one, count)


if __name__ == "__main__":
    _common.main(PEER, "openai-agents", loop, agents)
