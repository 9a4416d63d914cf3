"""trio-agent-hello: the plugins of the test distribution (see ../README.md).

* ``EchoModel`` (entry point ``hello``): registers a model provider that answers
  ``<greeting>, <the last user message>``; it declares the provider through its Config's
  ``llm_providers()``.
* ``fixed_model``: a function plugin registering the provider ``fixed``, declared by the
  ``llm_providers`` attribute.
* ``stamp_plugin``: registers a ``stamp`` tool (a plugin mounted before the config agents start).
* ``AgentWitness``: records the ids of the agents created after it loaded.
* ``waiting_plugin``: needs a service nobody provides; ``liar_model``: declares a provider it
  never registers.
* ``Broken`` (entry point ``broken``): fails to load.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from trio_agent import tool
from trio_agent.llm import GenerateRequest, LlmService, ScriptedAdapter, message_text
from trio_agent.runtime import Context
from trio_agent.tools import ToolRegistry


def _echo(greeting: str) -> Callable[[GenerateRequest], str]:
    def reply(request: GenerateRequest) -> str:
        users = [m for m in request.messages if m.role == "user"]
        return f"{greeting}, {message_text(users[-1].content) if users else 'nobody'}"

    return reply


class EchoModel:
    """Plugin: a model provider that greets back."""

    inject = ("llm",)

    @attrs.frozen
    class Config:
        """``provider``: the provider name; ``greeting``: the first word of every answer;
        ``timeout``: seconds (unused; a number to get wrong in the tests)."""

        provider: str = "echo"
        greeting: str = "hello"
        timeout: float = 1.0
        api_key_env: str | None = None

        def llm_providers(self) -> tuple[str, ...]:
            """The provider this plugin registers."""
            return (self.provider,)

    def __init__(self, ctx: Context, config: EchoModel.Config) -> None:
        self.adapter = ScriptedAdapter(
            name=config.provider, responses=[_echo(config.greeting)] * 50
        )
        ctx.require(LlmService).register(self.adapter)


def fixed_model(ctx: Context, config: object) -> None:
    """Plugin: the provider ``fixed``, which always answers ``fixed``."""
    ctx.require(LlmService).register(ScriptedAdapter(name="fixed", responses=["fixed"] * 50))


fixed_model.llm_providers = ("fixed",)  # type: ignore[attr-defined]


@tool
async def stamp() -> str:
    """Return the stamp of the hello plugin."""
    return "stamped by trio-agent-hello"


def stamp_plugin(ctx: Context, config: object) -> None:
    """Plugin: the ``stamp`` tool."""
    ctx.require(ToolRegistry).register(stamp)


class AgentWitness:
    """Plugin: ``seen`` lists the agents created while it is loaded."""

    def __init__(self, ctx: Context, config: object) -> None:
        self.seen: list[str] = []
        ctx.on("agent/created", lambda event: self.seen.append(event.agent.id))


def waiting_plugin(ctx: Context, config: object) -> None:
    """Plugin: loads once a ``weather`` service exists."""


waiting_plugin.inject = ("weather",)  # type: ignore[attr-defined]


def liar_model(ctx: Context, config: object) -> None:
    """Plugin: declares the provider ``ghost`` and registers nothing."""


liar_model.llm_providers = ("ghost",)  # type: ignore[attr-defined]


class Broken:
    """Plugin: always fails to load."""

    def __init__(self, ctx: Context, config: object) -> None:
        raise RuntimeError("the broken plugin always fails")
