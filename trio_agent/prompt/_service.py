"""``ctx.system_prompt``: scoped sections and variables, assembly and rendering."""

from __future__ import annotations

import inspect
import itertools
import math
import operator
import types
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, final

import attrs
import trio

from ..llm import ToolSchema
from ..runtime import Context, Disposer, Scope, Service, ServiceKey
from ._errors import PromptConflictError, PromptDefinitionError
from ._render import VARIABLE_NAME, render_prompt
from ._types import (
    AgentLike,
    PromptAssembleRequest,
    PromptAssembly,
    PromptSection,
    SectionText,
    VariableProvider,
)

__all__ = ["SystemPrompt"]


class _ToolSchemas(Protocol):
    """The part of ``ctx.tools`` the prompt reads (looked up by key: tools is a sibling layer,
    not imported)."""

    def schemas(
        self, agent: AgentLike | None = None, *, fresh: bool = True
    ) -> tuple[ToolSchema, ...]: ...


_TOOLS: ServiceKey[_ToolSchemas] = ServiceKey("tools")


@attrs.define(eq=False)
class _Entry:
    name: str
    value: SectionText
    order: float
    seq: int
    owner: str


@final
class SystemPrompt(Service, name="system_prompt"):
    """The ``ctx.system_prompt`` service: what every model request says before the history.

    Sections and variables are filed under the context the service was read from: global from
    a plugin's context, per agent from ``agent.ctx`` (an agent's entry shadows a global one of
    the same name for that agent only). Each registration returns a
    :class:`~trio_agent.runtime.Disposer` and is undone when its owner unloads.

    The ``persona`` from the config becomes the global section ``persona`` (order 0).

    Events: ``system-prompt/assemble`` (waterfall, ``(PromptAssembleRequest, next)`` →
    :class:`PromptAssembly`), dispatched at the agent's scope.
    """

    @attrs.frozen
    class Config:
        """``persona``: text shared by every agent, as the first order-0 section."""

        persona: str = ""

    def __init__(self, ctx: Context, config: SystemPrompt.Config | None = None) -> None:
        super().__init__(ctx, config if config is not None else SystemPrompt.Config())
        self._sections: dict[Scope | None, dict[str, _Entry]] = {}
        self._variables: dict[Scope | None, dict[str, _Entry]] = {}
        self._seq = itertools.count()
        #: scope -> what is visible there (and the last shared assembly), until any change.
        self._visible: dict[Scope | None, _Visible] = {}
        if self.config.persona:
            self.section("persona", self.config.persona, order=0)

    # --- registration ---------------------------------------------------------------------

    def section(self, name: str, text: SectionText, order: float = 0) -> Disposer:
        """Add a section: ``text`` is a str or a provider ``(agent) -> str`` (sync or async).

        Sections render by ``order``, then by registration. A provider is called at each
        :meth:`assemble` that includes it, with the agent being assembled for (or None).

        Raises:
            PromptConflictError: ``name`` is already a section in the caller's layer.
            PromptDefinitionError: an empty name, a non-finite order, or a bad ``text``.
        """
        if not isinstance(name, str) or not name:
            raise PromptDefinitionError(f"section name must be a non-empty str, got {name!r}")
        if (
            isinstance(order, bool)
            or not isinstance(order, int | float)
            or not math.isfinite(order)
        ):
            raise PromptDefinitionError(
                f'section "{name}": order must be a finite number, got {order!r}'
            )
        return self._add(self._sections, "section", name, text, order)

    def variable(self, name: str, provider: VariableProvider) -> Disposer:
        """Add a variable for ``{{name}}`` references: a str, or ``(agent) -> str | None``.

        Raises:
            PromptConflictError: ``name`` is already a variable in the caller's layer.
            PromptDefinitionError: ``name`` does not match ``^[a-z][a-z0-9_]*$``, or a bad
                provider.
        """
        if not isinstance(name, str) or VARIABLE_NAME.fullmatch(name) is None:
            raise PromptDefinitionError(
                f"invalid prompt variable name {name!r}: expected ^[a-z][a-z0-9_]*$ "
                "(lower-case letters, digits and underscores, starting with a letter)"
            )
        return self._add(self._variables, "variable", name, provider, 0)

    def _add(
        self,
        table: dict[Scope | None, dict[str, _Entry]],
        kind: str,
        name: str,
        value: SectionText,
        order: float,
    ) -> Disposer:
        if not isinstance(value, str) and not callable(value):
            raise PromptDefinitionError(
                f'{kind} "{name}": expected a str or a callable (agent) -> str, '
                f"got {type(value).__name__}"
            )
        caller = self.caller
        caller.fiber.check_active(f"register a prompt {kind} on")
        scope = caller.scope
        existing = table.get(scope, {}).get(name)
        if existing is not None:
            where = "globally" if scope is None else f"in {scope!r}"
            raise PromptConflictError(
                f'prompt {kind} "{name}" is already registered {where} (by {existing.owner}); '
                "dispose that registration first, choose another name, or register it on an "
                "agent's context to shadow it for that agent"
            )
        entry = _Entry(name, value, order, next(self._seq), caller.fiber.name)
        table.setdefault(scope, {})[name] = entry
        self._visible.clear()

        def remove() -> None:
            layer = table.get(scope)
            if layer is not None and layer.get(name) is entry:
                del layer[name]
                if not layer:
                    del table[scope]
                self._visible.clear()

        return caller.defer(remove, label=f"prompt {kind} {name}")

    # --- assembly -------------------------------------------------------------------------

    async def assemble(
        self, agent: AgentLike | None = None, *, checkpoint: bool = True, fresh: bool = True
    ) -> PromptAssembly:
        """Resolve the sections, variables and tools ``agent`` sees, then run
        ``system-prompt/assemble``; its result is authoritative.

        Shadowing is decided before providers run: a shadowed provider is never called. Tool
        schemas come from the ``tools`` service when one is mounted (sorted by name). Every
        call returns fresh objects (but see ``fresh``). A raising provider or listener
        propagates.

        A checkpoint, unless ``checkpoint=False``: for a caller that reaches a checkpoint right
        after anyway (the loop's step, which streams the model next), the call then yields only
        where a provider or listener does. With ``fresh=False`` the tool schemas are the tools
        service's shared snapshots (read-only; see ``ToolRegistry.schemas``) unless a
        ``system-prompt/assemble`` listener is registered, which gets fresh ones to change;
        without such a listener the assembly itself is then the one returned last time at the
        same scope when every section text, variable value and tool schema is the same
        (providers still run every call; the assembly is frozen, its variables read-only).
        """
        if checkpoint:
            await trio.lowlevel.checkpoint()
        scope = None if agent is None else agent.ctx.scope
        visible = self._visible_at(scope)
        texts: list[str] = []
        for entry in visible.sections:
            text = _resolve_now(entry, "section", agent)
            if text is not None and not isinstance(text, str):
                text = await _resolve_later(entry, "section", text)
            texts.append(text or "")
        variables: dict[str, str | None] = {}
        for entry in visible.variables:
            value = _resolve_now(entry, "variable", agent)
            if value is not None and not isinstance(value, str):
                value = await _resolve_later(entry, "variable", value)
            variables[entry.name] = value
        heard = self.ctx.hears("system-prompt/assemble")
        registry = self.ctx.get(_TOOLS)
        if registry is None:
            tools: tuple[ToolSchema, ...] = ()
        elif fresh or heard:
            tools = tuple(registry.schemas(agent))
        else:  # the keyword only when asked for: a stand-in tools service may not know it
            tools = tuple(registry.schemas(agent, fresh=False))
        if not heard:
            # Unheard (#17): the waterfall's cancellation point, then its default - for a
            # shared (``fresh=False``) assembly the one made last time at this scope when
            # nothing in it changed.
            await trio.lowlevel.checkpoint_if_cancelled()
            if fresh:
                return visible.assembly_of(texts, tools, variables)
            return visible.shared_assembly(texts, tools, variables)
        request = PromptAssembleRequest(visible.assembly_of(texts, tools, variables), agent)

        async def default() -> object:
            return request.assembly

        result = await self.ctx.waterfall("system-prompt/assemble", request, default, target=scope)
        if not isinstance(result, PromptAssembly):
            raise PromptDefinitionError(
                f"a system-prompt/assemble listener returned {result!r}; expected a "
                "PromptAssembly (return attrs.evolve(await next(), ...))"
            )
        return result

    def _visible_at(self, scope: Scope | None) -> _Visible:
        """What is visible at ``scope``, kept until a registration changes (the loop assembles
        at the same scope every step)."""
        visible = self._visible.get(scope)
        if visible is None:
            if len(self._visible) >= _VISIBLE_SCOPES:
                self._visible.clear()
            sections = tuple(
                sorted(self._effective(self._sections, scope), key=lambda e: (e.order, e.seq))
            )
            visible = self._visible[scope] = _Visible(
                sections, self._effective(self._variables, scope)
            )
        return visible

    def _effective(
        self, table: dict[Scope | None, dict[str, _Entry]], scope: Scope | None
    ) -> tuple[_Entry, ...]:
        """The entries visible at ``scope``: global, overlaid by each scope out to in."""
        merged = dict(table.get(None, {}))
        for layer in reversed(scope.chain) if scope is not None else ():
            merged.update(table.get(layer, {}))
        return tuple(merged.values())

    def render(self, assembly: PromptAssembly) -> str:
        """The system prompt text of ``assembly``; see :func:`render_prompt`.

        Raises:
            PromptVariableError: an unknown or unset variable, naming section and variable.
        """
        return render_prompt(assembly)


#: How many scopes' visible registrations are kept (a scope holds no agent).
_VISIBLE_SCOPES = 64


@final
class _Visible:
    """What one scope sees of the registrations - the sections in render order, the variables
    - and the last shared assembly made from them there, with the texts and values it holds."""

    __slots__ = ("_assembly", "_texts", "_values", "sections", "variables")

    def __init__(self, sections: tuple[_Entry, ...], variables: tuple[_Entry, ...]) -> None:
        # Tuples, and () until an assembly is kept: an agent's scope holds one of these, and
        # an empty list is an object the collector tracks (#17's memory per agent).
        self.sections = sections
        self.variables = variables
        self._assembly: PromptAssembly | None = None
        self._texts: Sequence[str] = ()
        self._values: dict[str, str | None] = {}

    def assembly_of(
        self, texts: list[str], tools: tuple[ToolSchema, ...], values: dict[str, str | None]
    ) -> PromptAssembly:
        """A new assembly of these sections with their ``texts``, ``tools`` and ``values``."""
        sections = tuple(
            PromptSection(entry.name, text, entry.order)
            for entry, text in zip(self.sections, texts, strict=True)
        )
        return PromptAssembly(sections, tools, types.MappingProxyType(values))

    def shared_assembly(
        self, texts: list[str], tools: tuple[ToolSchema, ...], values: dict[str, str | None]
    ) -> PromptAssembly:
        """The last shared assembly when its texts, values and (shared) tool schemas are these,
        else a new one, kept for next time."""
        last = self._assembly
        if (
            last is not None
            and texts == self._texts
            and values == self._values
            and len(tools) == len(last.tools)
            and all(map(operator.is_, tools, last.tools))
        ):
            return last
        self._assembly = assembly = self.assembly_of(texts, tools, values)
        self._texts, self._values = texts, values
        return assembly


def _resolve_now(
    entry: _Entry, kind: str, agent: AgentLike | None
) -> str | Awaitable[object] | None:
    """The entry's text, or the awaitable an async provider returned (for :func:`_resolve_later`);
    a plain string or a sync provider costs no coroutine (#17)."""
    value = entry.value
    if isinstance(value, str):
        return value
    provider: Callable[[AgentLike | None], object] = value
    try:
        result = provider(agent)
    except Exception as exc:
        exc.add_note(f'while resolving prompt {kind} "{entry.name}" (registered by {entry.owner})')
        raise
    if result is None or type(result) is str:  # before the (slow) Awaitable ABC test
        return result
    if inspect.isawaitable(result):
        return result
    return _checked(entry, kind, result)


async def _resolve_later(entry: _Entry, kind: str, pending: Awaitable[object]) -> str | None:
    try:
        result = await pending
    except Exception as exc:
        exc.add_note(f'while resolving prompt {kind} "{entry.name}" (registered by {entry.owner})')
        raise
    return _checked(entry, kind, result)


def _checked(entry: _Entry, kind: str, result: object) -> str | None:
    if result is not None and not isinstance(result, str):
        raise PromptDefinitionError(
            f'the provider of prompt {kind} "{entry.name}" returned {type(result).__name__}; '
            "expected a str or None"
        )
    return result
