"""``ctx.tools``: the scoped tool registry and the guarded execution pipeline."""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, NoReturn, TypeVar, final

import attrs
import trio

from .._serde import unstructure
from ..ids import CallId
from ..llm import ContentBlock, TextBlock, ToolResult, ToolSchema
from ..runtime import Context, Disposer, Scope, Service
from ._arguments import (
    ArgumentsError,
    copy_json_object,
    parse_arguments_text,
    structure_arguments,
)
from ._errors import ToolConflictError, ToolRestrictionError
from ._types import (
    APPROVAL,
    DENIED,
    INVALID_ARGS,
    NO_APPROVAL_SERVICE,
    TOOL_ERROR,
    TOOL_TIMEOUT,
    UNKNOWN_TOOL,
    Accept,
    AgentLike,
    Allow,
    ApprovalNotice,
    ApprovalRequest,
    Approved,
    Ask,
    Block,
    Deny,
    PostExecute,
    Tool,
    ToolCallContext,
    ToolChange,
    ToolExecution,
    ToolInvocation,
    ToolResultNotice,
    aborted_result,
    as_content,
    error_result,
    is_content_block,
    request_approval,
)

__all__ = ["Guard", "ToolRegistry"]

logger = logging.getLogger("trio_agent.tools")

K = TypeVar("K")
V = TypeVar("V")

#: A guard: ``fn(execution)`` returns a deny reason, or None to let the call pass.
Guard = Callable[[ToolExecution], "str | None"]

#: How many names an ``UNKNOWN_TOOL`` message lists before "and N more".
_LISTED_NAMES = 20


@attrs.define(eq=False)
class _ToolEntry:
    tool: Tool
    owner: str


@attrs.define(eq=False)
class _GuardEntry:
    fn: Guard
    label: str


@attrs.frozen(eq=False)
class _Restriction:
    allow: frozenset[str] | None
    deny: frozenset[str]

    def admits(self, name: str) -> bool:
        return (self.allow is None or name in self.allow) and name not in self.deny


@final
class _Call:
    """One execution in flight: what the stages share.

    The :class:`ToolExecution` payload (with its private copy of the parsed arguments) is built
    only when a stage listener or a guard exists: a call nobody listens to or guards never
    builds it (#17).
    """

    __slots__ = ("_execution", "hook_failure", "invocation", "parsed", "scope", "started", "tool")

    def __init__(
        self,
        invocation: ToolInvocation,
        tool: Tool | None,
        scope: Scope | None,
        parsed: dict[str, Any] | str,
    ) -> None:
        self.invocation = invocation
        self.tool = tool
        self.scope = scope
        self.parsed = parsed
        self.started = False
        #: What ``before_effects`` raised: the body did not run, and ``execute`` re-raises it.
        self.hook_failure: Exception | None = None
        self._execution: ToolExecution | None = None

    def build_execution(self) -> ToolExecution:
        invocation, parsed = self.invocation, self.parsed
        self._execution = execution = ToolExecution(
            call_id=invocation.call_id,
            name=invocation.name,
            arguments=invocation.arguments,
            parsed_arguments=copy_json_object(parsed) if isinstance(parsed, dict) else None,
            agent=invocation.agent,
            tool=self.tool,
        )
        return execution

    @property
    def execution(self) -> ToolExecution:
        """The stages' payload (built by ``execute`` whenever a stage or guard may see it)."""
        return self._execution or self.build_execution()


#: The events whose listeners see a call's :class:`ToolExecution`.
_STAGES = ("tools/pre-execute", "tools/execute", "tools/post-execute", "tools/result")


class _StageFailed(Exception):
    """A listener, guard or the approval service failed; ``result`` is final."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.text)
        self.result = result


async def _allow() -> object:
    return Allow()


async def _accept() -> object:
    return Accept()


@final
class ToolRegistry(Service, name="tools"):
    """The ``ctx.tools`` service: registration by scope, and the guarded execution pipeline.

    Registrations are filed under the context the service was read from: ``ctx.tools`` on a
    plugin's context registers globally (owned by that plugin's fiber), ``agent.ctx.tools``
    registers for that agent only (owned by the agent's scope). Each returns a
    :class:`~trio_agent.runtime.Disposer`; the owner unloading undoes it too.

    What a call *sees* is chosen by the ``agent`` argument (of :meth:`schemas`, :meth:`get`, or
    the :class:`ToolInvocation`): the global tools minus that agent's restrictions, overlaid by
    the agent's own tools. A tool outside that view does not exist for the call.

    Events (dispatched at the agent's scope, or globally without an agent):

    ============================  =========  =================================================
    ``tools/pre-execute``         waterfall  ``(ToolExecution, next)`` → Allow | Deny | Ask
    ``tools/execute``             waterfall  ``(ToolExecution, next)`` → ToolResult
    ``tools/post-execute``        waterfall  ``(PostExecute, next)`` → Accept | Block
    ``tools/result``              emit       ``ToolResultNotice``
    ``tools/change``              emit       ``ToolChange`` (aimed at the registering scope)
    ============================  =========  =================================================
    """

    def __init__(self, ctx: Context, config: None = None) -> None:
        super().__init__(ctx, config)
        self._tools: dict[Scope | None, dict[str, _ToolEntry]] = {}
        self._guards: dict[Scope | None, list[_GuardEntry]] = {}
        self._restrictions: dict[Scope, list[_Restriction]] = {}
        self._views = _ViewCache()
        #: The runtime's listener table (``ctx.hears`` is ``name in _listening``), tested in
        #: place on the per-call path (#17).
        self._listening = ctx.runtime.bus.table

    # --- registration ---------------------------------------------------------------------

    def register(self, tool: Tool) -> Disposer:
        """Register ``tool`` in the caller's layer (global, or the calling agent's scope).

        An agent-scoped tool shadows a global one of the same name for that agent. The
        registration is owned by the caller's fiber and undone when it unloads.

        Raises:
            ToolConflictError: a tool of this name is already registered in the same layer.
            InactiveContextError: the caller's fiber is unloading or gone.
        """
        if not isinstance(tool, Tool):
            raise TypeError(
                f"register() takes a Tool (build one with @tool), got {type(tool).__name__}"
            )
        caller = self.caller
        caller.fiber.check_active("register a tool on")
        scope = caller.scope
        existing = self._tools.get(scope, {}).get(tool.name)
        if existing is not None:
            if scope is None:
                where = "globally"
                fix = (
                    "dispose that registration first, choose another name, or register it on "
                    "an agent's context (agent.ctx.tools.register) to shadow it for one agent"
                )
            else:
                where = f"in {scope!r}"
                fix = "dispose that registration first, or choose another name"
            raise ToolConflictError(
                f'tool "{tool.name}" is already registered {where} (by {existing.owner}); {fix}'
            )
        entry = _ToolEntry(tool, caller.fiber.name)
        self._tools.setdefault(scope, {})[tool.name] = entry

        def unregister() -> None:
            layer = self._tools.get(scope)
            if layer is None or layer.get(tool.name) is not entry:
                return
            del layer[tool.name]
            if not layer:
                del self._tools[scope]
            self._changed("unregister", tool, scope)

        disposer = caller.defer(unregister, label=f"tool {tool.name}")
        self._changed("register", tool, scope)
        return disposer

    def guard(self, fn: Guard) -> Disposer:
        """Add a guard in the caller's layer: ``fn(execution) -> deny reason | None``.

        Guards are synchronous and run after ``tools/pre-execute`` allowed a call: global
        guards first, then the agent's, each layer in registration order. The first reason
        denies the call (``DENIED``); a guard can never re-allow a denied call.
        """
        if not callable(fn) or inspect.iscoroutinefunction(fn):
            raise TypeError(
                "guard() takes a synchronous callable (execution) -> reason | None; do "
                "asynchronous checks in a tools/pre-execute listener"
            )
        caller = self.caller
        caller.fiber.check_active("add a tool guard on")
        scope = caller.scope
        entry = _GuardEntry(fn, getattr(fn, "__qualname__", None) or repr(fn))
        remove = _append(self._guards, scope, entry)
        return caller.defer(remove, label=f"tool guard {entry.label}")

    def restrict(
        self, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Limit which inherited (global) tools the calling agent sees.

        ``allow`` keeps only the named tools (later globals stay hidden); ``deny`` hides the
        named ones (later globals are visible). Several restrictions intersect. The agent's own
        tools are never restricted. A restricted tool is invisible: absent from
        :meth:`schemas`, and calling it ends ``UNKNOWN_TOOL``.

        Raises:
            ToolRestrictionError: called from a global context, with neither list, or with a
                name that is not a currently known inherited tool.
        """
        caller = self.caller
        scope = caller.scope
        if scope is None:
            raise ToolRestrictionError(
                "restrict() applies to one agent: call it through the agent's context "
                "(agent.ctx.tools.restrict(...)); to refuse a tool everywhere, add a guard "
                "or unregister the tool"
            )
        if allow is None and deny is None:
            raise ToolRestrictionError("restrict() needs allow=[...], deny=[...], or both")
        caller.fiber.check_active("restrict tools on")
        known = set(self._inherited(scope))
        restriction = _Restriction(
            None if allow is None else _names(allow, "allow", known),
            frozenset() if deny is None else _names(deny, "deny", known),
        )
        remove = _append(self._restrictions, scope, restriction)
        self._views.changed()

        def lift() -> None:
            remove()
            self._views.changed()

        return caller.defer(lift, label="tool restriction")

    def _changed(
        self, action: Literal["register", "unregister"], tool: Tool, scope: Scope | None
    ) -> None:
        self._views.changed()  # before the listeners, who may ask for a view
        self.ctx.emit("tools/change", ToolChange(action, tool, scope), target=scope)

    # --- views ----------------------------------------------------------------------------

    def _inherited(self, scope: Scope) -> dict[str, Tool]:
        """Global tools overlaid by the ancestor scopes' (nearer wins), before restrictions."""
        view = {name: e.tool for name, e in self._tools.get(None, {}).items()}
        for layer in reversed(scope.chain[1:]):
            view.update((name, e.tool) for name, e in self._tools.get(layer, {}).items())
        return view

    def _view(self, scope: Scope | None) -> Mapping[str, Tool]:
        """The tools a call at ``scope`` sees (shared: never mutate it)."""
        return self._views.get(scope, self._build_view)[0]

    def _build_view(self, scope: Scope | None) -> dict[str, Tool]:
        if scope is None:
            return {name: e.tool for name, e in self._tools.get(None, {}).items()}
        view = self._inherited(scope)
        restrictions = [r for s in scope.chain for r in self._restrictions.get(s, ())]
        if restrictions:
            view = {n: t for n, t in view.items() if all(r.admits(n) for r in restrictions)}
        view.update((name, e.tool) for name, e in self._tools.get(scope, {}).items())
        return view

    def get(self, name: str, agent: AgentLike | None = None) -> Tool | None:
        """The tool ``agent`` (or a call outside any agent) sees under ``name``, or None."""
        return self._view(_scope_of(agent)).get(name)

    def schemas(
        self, agent: AgentLike | None = None, *, fresh: bool = True
    ) -> tuple[ToolSchema, ...]:
        """Schemas of the tools visible to ``agent``, sorted by name: fresh copies, or with
        ``fresh=False`` the registry's own snapshot of each (one deep copy per tool until the
        tools change, shared by every such call: read them, never mutate them). The loop takes
        the shared ones: copying every schema at every step cost ~3 µs per tool (#17)."""
        view, names = self._views.get(_scope_of(agent), self._build_view)
        if fresh:
            return tuple([view[name].schema for name in names])
        schema_of = self._views.schema_of
        return tuple([schema_of(view[name]) for name in names])  # a list: no resume per item

    def is_concurrency_safe(self, name: str, agent: AgentLike | None = None) -> bool:
        """Whether the visible tool ``name`` may run in parallel (False when unknown)."""
        tool = self.get(name, agent)
        return tool is not None and tool.concurrency_safe

    # --- execution ------------------------------------------------------------------------

    async def execute(self, invocation: ToolInvocation, *, checkpoint: bool = True) -> ToolResult:
        """Run one tool call through the pipeline and return its result.

        ``tools/pre-execute`` (Allow / Deny / Ask → ``approval``) → guards → ``tools/execute``
        around the dispatch (resolve, validate, run the body under its timeout) →
        ``tools/post-execute`` (Accept / Block) → ``tools/result``. A denial still goes through
        post-execute; a failing listener, guard or approval service ends the call at once with
        ``TOOL_ERROR`` (naming the stage). The final result always carries
        ``invocation.call_id``.

        Never raises for tool-level problems: unknown tools, invalid arguments, raising
        bodies, denials and timeouts all become error results. The one exception is the
        caller's own: what ``invocation.before_effects`` raises propagates (the body does not
        run; see :class:`ToolInvocation`).

        Cancellation: if the calling scope is cancelled, :class:`trio.Cancelled` propagates;
        ``tools/result`` first records ``ABORTED`` (the body had started) or
        ``ABORTED_BEFORE_DISPATCH``. A checkpoint before the pipeline starts, unless
        ``checkpoint=False`` (for a caller that has just passed one: the loop, right after the
        model's stream); the call then yields only where a stage or the body does.
        """
        scope = _scope_of(invocation.agent)
        parsed = parse_arguments_text(invocation.arguments)
        call = _Call(invocation, self._view(scope).get(invocation.name), scope, parsed)
        try:
            if checkpoint:
                await trio.lowlevel.checkpoint()
            # Decided after the checkpoint, so a listener or guard registered meanwhile applies.
            if self._guards or any(map(self._listening.__contains__, _STAGES)):
                # Built before the body runs: listeners see the arguments as the call began.
                call.build_execution()
                result = await self._pipeline(call)
            else:
                # No stage listener and no guard (#17): no pre-execute stage or guard pass to
                # run - execute's cancellation point stands for pre-execute's, as nothing runs
                # between them; post-execute keeps its own (the body may register a listener).
                try:
                    result = await self._execute(call)
                    if "tools/post-execute" in self._listening:
                        result = await self._post_execute(call, result)
                    else:  # its cancellation point, without a coroutine for it (#17)
                        await trio.lowlevel.checkpoint_if_cancelled()
                except _StageFailed as failed:
                    result = failed.result
        except BaseException:
            self._publish(call, aborted_result(invocation.call_id, call.started))
            raise
        self._publish(call, result)
        return result

    async def _pipeline(self, call: _Call) -> ToolResult:
        try:
            reason = await self._pre_execute(call)
            if reason is None:
                reason = self._run_guards(call)
            if reason is None:
                result = await self._execute(call)
                if call.hook_failure is not None:  # even if a listener made up a result
                    raise call.hook_failure
            else:
                result = error_result(call.invocation.call_id, DENIED, reason)
            return await self._post_execute(call, result)
        except _StageFailed as failed:
            return failed.result

    def _publish(self, call: _Call, result: ToolResult) -> None:
        if "tools/result" in self._listening:  # the notice is built only when heard (#17)
            self.ctx.emit(
                "tools/result", ToolResultNotice(call.execution, result), target=call.scope
            )

    def _fail(self, call: _Call, stage: str, problem: str | Exception) -> NoReturn:
        if isinstance(problem, Exception):
            logger.error(
                "%s failed for tool call %s (%s)",
                stage,
                call.invocation.call_id,
                call.invocation.name,
                exc_info=problem,
            )
            problem = f"{type(problem).__name__}: {problem}"
        raise _StageFailed(
            error_result(call.invocation.call_id, TOOL_ERROR, f"{stage} failed: {problem}")
        )

    # --- stages ---------------------------------------------------------------------------

    async def _pre_execute(self, call: _Call) -> str | None:
        """Run the policy; return a deny reason, or None when the call may proceed."""
        stage = "tools/pre-execute"
        if not self.ctx.hears(stage):  # unheard: the cancellation point only (#17)
            await trio.lowlevel.checkpoint_if_cancelled()
            return None
        try:
            decision = await self.ctx.waterfall(stage, call.execution, _allow, target=call.scope)
        except Exception as exc:
            self._fail(call, stage, exc)
        if isinstance(decision, Allow):
            return None
        if isinstance(decision, Deny):
            return decision.reason or f'tool "{call.invocation.name}" was denied by policy'
        if isinstance(decision, Ask):
            return await self._ask(call, decision.reason)
        self._fail(
            call,
            stage,
            f"a listener returned {decision!r}; expected Allow(), Deny(reason) or Ask()",
        )

    async def _ask(self, call: _Call, reason: str | None) -> str | None:
        execution = call.execution
        what = f'tool "{execution.name}" requires approval' + (f" ({reason})" if reason else "")
        approval = self.ctx.get(APPROVAL)
        if approval is None:
            return f"{what}, but {NO_APPROVAL_SERVICE}"
        tool = execution.tool
        request = ApprovalRequest(
            agent=execution.agent.id if execution.agent is not None else None,
            call_id=execution.call_id,
            tool=execution.name,
            arguments=execution.arguments,
            reason=reason,
            read_only=tool.read_only if tool is not None else False,
        )
        self._announce(call, "approval/request", ApprovalNotice(request))
        try:
            answer = await request_approval(approval, request, execution)
        except Exception as exc:
            self._fail(call, "approval service", exc)
        by = type(approval).__name__
        self._announce(call, "approval/decision", ApprovalNotice(request, answer, by))
        if isinstance(answer, Approved):
            return None
        return answer.reason or f"{what} and was not approved"

    def _announce(self, call: _Call, name: str, notice: ApprovalNotice) -> None:
        if call.invocation.on_approval is not None:
            call.invocation.on_approval(notice)
        self.ctx.emit(name, notice, target=call.scope)

    def _run_guards(self, call: _Call) -> str | None:
        if not self._guards:
            return None
        scope = call.scope
        layers: list[Scope | None] = [None, *(reversed(scope.chain) if scope else ())]
        for entry in [g for layer in layers for g in self._guards.get(layer, ())]:
            stage = f"guard {entry.label}"
            try:
                verdict: object = entry.fn(call.execution)
            except Exception as exc:
                self._fail(call, stage, exc)
            if verdict is None:
                continue
            if isinstance(verdict, str):
                return verdict or f'tool "{call.invocation.name}" was denied by a guard'
            if inspect.isawaitable(verdict):
                close = getattr(verdict, "close", None)
                if close is not None:
                    close()
            self._fail(
                call, stage, f"it returned {verdict!r}; expected a deny reason (str) or None"
            )
        return None

    async def _execute(self, call: _Call) -> ToolResult:
        stage = "tools/execute"
        try:
            if stage in self._listening:
                dispatch = functools.partial(self._dispatch, call)
                result = await self.ctx.waterfall(
                    stage, call.execution, dispatch, target=call.scope
                )
            else:  # unheard: the cancellation point, then the dispatch itself (#17)
                await trio.lowlevel.checkpoint_if_cancelled()
                result = await self._dispatch(call)
        except Exception as exc:
            if exc is call.hook_failure:
                raise
            self._fail(call, stage, exc)
        if not isinstance(result, ToolResult):
            self._fail(call, stage, f"a listener returned {result!r}; expected a ToolResult")
        return _with_call_id(result, call.invocation.call_id)

    async def _post_execute(self, call: _Call, result: ToolResult) -> ToolResult:
        stage = "tools/post-execute"
        if stage not in self._listening:
            await trio.lowlevel.checkpoint_if_cancelled()
            return result
        payload = PostExecute(call.execution, result)
        try:
            decision = await self.ctx.waterfall(stage, payload, _accept, target=call.scope)
        except Exception as exc:
            self._fail(call, stage, exc)
        if isinstance(decision, Accept):
            if decision.content is None:
                return result
            return attrs.evolve(result, content=decision.content)
        if isinstance(decision, Block):
            feedback = decision.feedback or "tool result blocked by post-execute policy"
            return ToolResult(
                call.invocation.call_id, (TextBlock(feedback),), is_error=True, code=DENIED
            )
        self._fail(
            call, stage, f"a listener returned {decision!r}; expected Accept() or Block(feedback)"
        )

    # --- dispatch (the innermost tools/execute) -------------------------------------------

    async def _dispatch(self, call: _Call) -> ToolResult:
        call_id, name = call.invocation.call_id, call.invocation.name
        view = self._view(call.scope)
        tool = view.get(name)
        if tool is None:
            return error_result(call_id, UNKNOWN_TOOL, _unknown_tool(name, view))
        if isinstance(call.parsed, str):
            return error_result(
                call_id, INVALID_ARGS, f'invalid arguments for tool "{name}": {call.parsed}'
            )
        try:
            arguments = structure_arguments(tool.arguments_type, call.parsed)
        except ArgumentsError as exc:
            return error_result(
                call_id, INVALID_ARGS, f'invalid arguments for tool "{name}": {exc}'
            )
        context = ToolCallContext(call_id, name, call.invocation.agent)
        timeout = math.inf if tool.timeout is None else tool.timeout
        if call.invocation.before_effects is not None and not tool.read_only:
            try:
                await call.invocation.before_effects()
            except Exception as exc:
                call.hook_failure = exc
                raise
        call.started = True
        timed_out = False
        try:
            if timeout == math.inf:
                # No timeout: no cancel scope to open and close per call (#17).
                value = await tool.body(arguments, context)
            else:
                with trio.move_on_after(timeout) as deadline:
                    value = await tool.body(arguments, context)
                timed_out = deadline.cancelled_caught
        except Exception as exc:
            logger.warning("tool %r raised (call %s)", name, call_id, exc_info=exc)
            return error_result(
                call_id,
                TOOL_ERROR,
                str(exc) or type(exc).__name__,
                additional_context=context.deferred,
            )
        if timed_out:
            return error_result(
                call_id,
                TOOL_TIMEOUT,
                f"tool call timed out after {tool.timeout:g}s",
                additional_context=context.deferred,
            )
        if isinstance(value, ToolResult):
            return attrs.evolve(
                value,
                call_id=call_id,
                additional_context=(*context.deferred, *value.additional_context),
                concludes_turn=value.concludes_turn or context.concludes_turn,
            )
        return ToolResult(
            call_id,
            render_value(value),
            additional_context=context.deferred,
            concludes_turn=context.concludes_turn,
        )


@final
class _ViewCache:
    """The latest tool views, by scope: the loop asks for one agent's view several times a
    step. Bounded (a scope holds no agent); every change of the tools or restrictions makes the
    cached views stale."""

    __slots__ = ("_generation", "_schemas", "_views")

    #: How many scopes' views are kept.
    size = 64

    def __init__(self) -> None:
        self._generation = 0
        self._views: dict[Scope | None, tuple[int, Mapping[str, Tool], tuple[str, ...]]] = {}
        #: The shared schema snapshot of each registered tool, by ``id`` (the entry keeps the
        #: tool alive and is checked against it); emptied by every change.
        self._schemas: dict[int, tuple[Tool, ToolSchema]] = {}

    def changed(self) -> None:
        self._generation += 1
        self._schemas.clear()

    def schema_of(self, tool: Tool) -> ToolSchema:
        """``tool``'s shared schema snapshot (one deep copy until the tools change)."""
        entry = self._schemas.get(id(tool))
        if entry is None or entry[0] is not tool:
            entry = self._schemas[id(tool)] = (tool, tool.schema)
        return entry[1]

    def get(
        self, scope: Scope | None, build: Callable[[Scope | None], dict[str, Tool]]
    ) -> tuple[Mapping[str, Tool], tuple[str, ...]]:
        """The view at ``scope`` (shared: never mutate it) and its names, sorted."""
        views = self._views
        cached = views.get(scope)
        if cached is None or cached[0] != self._generation:
            view = build(scope)
            cached = (self._generation, view, tuple(sorted(view)))
            if scope not in views and len(views) >= self.size:
                del views[next(iter(views))]  # the oldest
            views[scope] = cached
        return cached[1], cached[2]


def _append(table: dict[K, list[V]], key: K, item: V) -> Callable[[], None]:
    """Append ``item`` to ``table[key]``; return the function that takes it out again."""
    table.setdefault(key, []).append(item)

    def remove() -> None:
        items = table.get(key, [])
        if item in items:
            items.remove(item)
            if not items:
                del table[key]

    return remove


def _scope_of(agent: AgentLike | None) -> Scope | None:
    return None if agent is None else agent.ctx.scope


def _names(names: Iterable[str], label: str, known: set[str]) -> frozenset[str]:
    if isinstance(names, str):
        raise ToolRestrictionError(f"restrict({label}=...) takes a list of tool names, not a str")
    chosen = frozenset(names)
    unknown = sorted(chosen - known)
    if unknown:
        raise ToolRestrictionError(
            f"restrict({label}=...) names unknown tool(s) {', '.join(unknown)}; known global "
            f"tools: {', '.join(sorted(known)) or '(none)'}"
        )
    return chosen


def _unknown_tool(name: str, view: Mapping[str, Tool]) -> str:
    names = sorted(view)
    if not names:
        return f'unknown tool "{name}"; no tools are available'
    listed = ", ".join(names[:_LISTED_NAMES])
    if len(names) > _LISTED_NAMES:
        listed += f", and {len(names) - _LISTED_NAMES} more"
    return f'unknown tool "{name}"; available tools: {listed}'


def _with_call_id(result: ToolResult, call_id: CallId) -> ToolResult:
    return result if result.call_id == call_id else attrs.evolve(result, call_id=call_id)


def render_value(value: object) -> tuple[ContentBlock, ...]:
    """A tool body's return value as content.

    ``str`` → one text block; a content block or a non-empty sequence of blocks → as is;
    ``None`` → no content; anything else → JSON text via the shared converter (dicts, lists,
    attrs values, numbers), or ``str(value)`` when it has no JSON form.
    """
    if value is None:
        return ()
    if isinstance(value, str) or is_content_block(value):
        return as_content(value)
    if isinstance(value, tuple | list) and value and all(map(is_content_block, value)):
        return tuple(value)
    try:
        text = json.dumps(unstructure(value), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        text = str(value)
    return (TextBlock(text),)
