"""The system prompt vocabulary: sections, assemblies and the assemble payload."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeAlias

import attrs

from ..llm import ToolSchema
from ..runtime import Context

__all__ = [
    "AgentLike",
    "PromptAssembleRequest",
    "PromptAssembly",
    "PromptSection",
    "SectionText",
    "VariableProvider",
]


class AgentLike(Protocol):
    """What the prompt service needs of an agent: its id and its scoped context.

    Structurally the same as :class:`trio_agent.tools.AgentLike`; the agent's scope
    (``agent.ctx.scope``) decides which sections, variables and listeners apply.
    """

    @property
    def id(self) -> str:
        """The agent's id."""
        ...

    @property
    def ctx(self) -> Context:
        """The agent's scoped context."""
        ...


#: A section's text: a str, or a provider ``(agent) -> str`` (sync or async; None means empty).
SectionText: TypeAlias = str | Callable[[AgentLike | None], "str | Awaitable[str | None] | None"]
#: A variable's value: a str, or a provider ``(agent) -> str | None`` (sync or async). None
#: means "no value for this assembly": rendering a reference to it raises.
VariableProvider: TypeAlias = SectionText


@attrs.frozen
class PromptSection:
    """One resolved section: its text is not interpolated yet (see ``render``)."""

    name: str
    text: str
    order: float = 0


@attrs.frozen
class PromptAssembly:
    """Everything a model request takes from the system prompt service.

    ``sections`` in render order; ``tools`` the schemas visible to the agent (a separate field
    of the request, sorted by name); ``variables`` the values ``{{name}}`` references resolve to
    (None = registered but without a value).
    """

    sections: tuple[PromptSection, ...] = ()
    tools: tuple[ToolSchema, ...] = ()
    variables: Mapping[str, str | None] = attrs.field(factory=dict, hash=False)


@attrs.frozen
class PromptAssembleRequest:
    """The payload of the ``system-prompt/assemble`` waterfall.

    A listener ``async def l(request, next)`` returns the :class:`PromptAssembly` to use —
    usually ``attrs.evolve(await next(), ...)``; the innermost default returns ``assembly``.
    """

    assembly: PromptAssembly
    agent: AgentLike | None
