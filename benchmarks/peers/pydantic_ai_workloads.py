"""pydantic-ai on trio-agent's workloads 1 and 5, with its own ``FunctionModel`` (no network).

Run by ``benchmarks/bench_peers.py`` under the ``.venv-peers`` interpreter:
``.venv-peers/bin/python benchmarks/peers/pydantic_ai_workloads.py --steps 300 --agents 1000``.

Fairness notes (see ``bench_peers.py``): the model functions are ``async def`` (a plain ``def`` is
run in a worker thread), and every response carries a usage value, because without one the
``FunctionModel`` test double estimates tokens over the whole history on every request, a cost
no real provider adapter has. Instrumentation is off (the default; no logfire configured).
"""

from __future__ import annotations

import _common

_common.forbid_network()

try:
    import asyncio
    import time

    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import RequestUsage, UsageLimits
except ImportError as exc:
    _common.not_installed("pydantic-ai", exc)
    raise SystemExit(0) from None

PEER = "pydantic-ai"
_USAGE = RequestUsage(input_tokens=1, output_tokens=1)
_NO_LIMIT = UsageLimits(request_limit=None)  # the default stops a run at 50 requests


async def noop() -> str:
    """Do nothing."""
    return "ok"


def _scripted(steps: int) -> FunctionModel:
    """One ``noop`` call per request, then text on request ``steps`` (a counter, like the
    scripted adapter's queue: no look at the history)."""
    calls = 0

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        if calls < steps:
            part = ToolCallPart("noop", "{}", tool_call_id=f"c{calls}")
            return ModelResponse(parts=[part], usage=_USAGE)
        return ModelResponse(parts=[TextPart("done")], usage=_USAGE)

    return FunctionModel(respond, model_name="scripted")


async def loop(steps: int) -> float:
    agent = Agent(_scripted(steps), tools=[noop])
    start = time.perf_counter()
    result = await agent.run("go", usage_limits=_NO_LIMIT)
    elapsed = time.perf_counter() - start
    assert result.output == "done", result.output
    assert result.usage.requests == steps, result.usage
    assert result.usage.tool_calls == steps - 1, result.usage
    return elapsed / steps


async def agents(count: int, latency: float) -> dict[str, float]:
    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(latency)
        return ModelResponse(parts=[TextPart("hi")], usage=_USAGE)

    model = FunctionModel(respond, model_name="latency")

    def make(n: int) -> list[Agent[None, str]]:
        return [Agent(model, name=f"a{i}") for i in range(n)]

    async def run_one(agent: Agent[None, str]) -> None:
        result = await agent.run("hello")
        assert result.output == "hi", result.output

    return await _common.many_agents(make, run_one, count)


if __name__ == "__main__":
    _common.main(PEER, "pydantic-ai-slim", loop, agents)
