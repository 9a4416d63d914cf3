"""The model's side: the ``subagent``, ``subagent_wait`` and ``subagent_status`` tools.

The tool bodies only translate: arguments into a :class:`~._types.SubagentRequest`, a
:class:`~._types.SubagentResult` into the tool result the parent's model reads (the child's
answer, then a footer naming the child's session and its usage), and the service's refusals
into ``INVALID_ARGS`` / ``DENIED`` / ``TOOL_ERROR`` results.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from ..agent import Agent
from ..llm import TextBlock, ToolResult
from ..runtime import ServiceKey
from ..tools import (
    DENIED,
    INVALID_ARGS,
    TOOL_ERROR,
    Tool,
    ToolCallContext,
    error_result,
    tool,
)
from ._errors import (
    SubagentDepthError,
    SubagentError,
    UnknownHandleError,
    UnknownSubagentError,
)
from ._run import render_output
from ._types import SubagentDefinition, SubagentRequest, SubagentResult, SubagentStatus

if TYPE_CHECKING:
    from ._service import SubagentService

__all__ = ["SUBAGENT_TOOLS", "result_content", "subagent_tools"]

#: The names of the tools this package registers.
SUBAGENT_TOOLS = ("subagent", "subagent_wait", "subagent_status")


#: How a tool body finds the service (the tools are built once; the service is per runtime).
_SUBAGENTS: ServiceKey[SubagentService] = ServiceKey("subagents")


@tool(name="subagent", concurrency_safe=True)
async def _run_subagent(
    task: str,
    agent: str | None = None,
    mode: Literal["spawn", "fork"] = "spawn",
    background: bool = False,
    *,
    call: ToolCallContext,
) -> object:
    """Delegate a task (the description is set per set of definitions).

    Args:
        task: The complete task for the sub-agent, with everything it needs to know.
        agent: Which sub-agent to use.
        mode: "spawn" (a fresh context) or "fork" (a copy of this conversation).
        background: Return a handle at once; collect the answer with subagent_wait.
    """
    found = _caller(call)
    if isinstance(found, ToolResult):
        return found
    service, parent = found
    if background and not service.config.background:
        return error_result(
            call.call_id, INVALID_ARGS, 'background sub-agents are disabled: omit "background"'
        )
    request = SubagentRequest(
        parent=parent,
        task=task,
        agent=agent,
        mode=mode,
        background=background,
        call_id=call.call_id,
    )
    try:
        result = await service.run(request)
    except SubagentDepthError as exc:
        return error_result(call.call_id, DENIED, str(exc))
    except (UnknownSubagentError, ValueError) as exc:
        return error_result(call.call_id, INVALID_ARGS, str(exc))
    except SubagentError as exc:
        return error_result(call.call_id, TOOL_ERROR, str(exc))
    if result.reason == "running":
        return _started(result)
    return result_content(call, result)


@tool(
    name="subagent_wait",
    description="Wait for a background sub-agent started with subagent and return its answer "
    "(or its state, when the timeout passes first).",
    concurrency_safe=True,
)
async def _wait_subagent(
    handle: str,
    timeout: float | None = None,  # noqa: ASYNC109 - the model's argument, applied below
    *,
    call: ToolCallContext,
) -> object:
    """Wait for a background sub-agent.

    Args:
        handle: The handle the subagent call returned.
        timeout: Give up waiting after this many seconds (the sub-agent keeps working).
    """
    found = _caller(call)
    if isinstance(found, ToolResult):
        return found
    service, parent = found
    if timeout is not None and (not math.isfinite(timeout) or timeout < 0):
        return error_result(
            call.call_id, INVALID_ARGS, f"timeout must be a number of seconds >= 0, got {timeout}"
        )
    try:
        with trio.move_on_after(math.inf if timeout is None else timeout):
            return result_content(call, await service.wait(parent, handle))
    except UnknownHandleError as exc:
        return error_result(call.call_id, INVALID_ARGS, str(exc))
    return _status_text(service.status(parent, handle), waited=timeout)


@tool(
    name="subagent_status",
    description="Report the state of your background sub-agents: pending, running or done, "
    "with each one's session.",
    concurrency_safe=True,
)
async def _subagent_status(handle: str | None = None, *, call: ToolCallContext) -> object:
    """Report on background sub-agents.

    Args:
        handle: One handle; omit it for every background sub-agent of yours.
    """
    found = _caller(call)
    if isinstance(found, ToolResult):
        return found
    service, parent = found
    try:
        return _status_text(service.status(parent, handle))
    except UnknownHandleError as exc:
        return error_result(call.call_id, INVALID_ARGS, str(exc))


def subagent_tools(
    definitions: Sequence[SubagentDefinition], *, background: bool
) -> tuple[Tool, ...]:
    """The tools for the current ``definitions``: rebuilt whenever they change, so the
    ``subagent`` description lists them and its ``agent`` argument enumerates them."""
    names = [d.name for d in definitions]
    listing = "\n".join(f"- {d.name}: {d.description}" for d in definitions)
    default = f'Omit "agent" to use {names[0]}.' if len(names) == 1 else 'Name one in "agent".'
    later = (
        " With background: true the call returns a handle at once and the sub-agent keeps "
        "working after this turn; collect its answer with subagent_wait, check on it with "
        "subagent_status."
        if background
        else ""
    )
    description = (
        "Delegate a task to a sub-agent: a separate agent with its own instructions that "
        "works on the task and answers; its answer is this tool's result. It starts with a "
        'fresh context (mode "spawn", the default; put everything it needs in the task) or '
        'with a copy of this conversation up to the current turn (mode "fork"). Several '
        f"calls in one message run in parallel.{later}\n\nSub-agents:\n{listing}\n{default}"
    )
    parameters = copy.deepcopy(dict(_run_subagent.parameters))
    properties: dict[str, Any] = parameters["properties"]
    properties["agent"] = {
        "type": "string",
        "enum": names,
        "description": properties["agent"].get("description", ""),
    }
    if not background:
        del properties["background"]
    main = attrs.evolve(_run_subagent, description=description, parameters=parameters)
    return (main, _wait_subagent, _subagent_status) if background else (main,)


def _caller(call: ToolCallContext) -> tuple[SubagentService, Agent] | ToolResult:
    """The service and the live agent making the call (the tools mean nothing outside one)."""
    service = None if call.agent is None else call.agent.ctx.get(_SUBAGENTS)
    parent = None if service is None else service.live_agent(call.agent)
    if service is None or parent is None:
        return error_result(
            call.call_id,
            TOOL_ERROR,
            f"{call.name} must be called by a live agent of a runtime with the subagents "
            "service (a call made through ctx.tools.execute without a registered agent has no "
            "parent for a sub-agent)",
        )
    return service, parent


def result_content(call: ToolCallContext, result: SubagentResult) -> ToolResult:
    """The tool result for a finished child: its answer (or structured output as JSON), then
    a footer naming its session, its end and its token usage. An unsuccessful child is a
    ``TOOL_ERROR`` whose text names the child's session."""
    if result.ok:
        body = render_output(result.output) if result.output is not None else result.text
        body = body or "(the sub-agent gave no answer text)"
    else:
        partial = f"\n\nIts last answer text:\n{result.text}" if result.text else ""
        body = f"Error: {result.error}{partial}"
    usage = result.usage
    footer = (
        f"[subagent {result.definition}: session {result.session_id}, agent {result.agent_id}, "
        f"reason {result.reason}, tokens in {usage.input_tokens} out {usage.output_tokens}]"
    )
    return ToolResult(
        call.call_id,
        (TextBlock(f"{body}\n\n{footer}"),),
        is_error=not result.ok,
        code=None if result.ok else TOOL_ERROR,
    )


def _started(result: SubagentResult) -> str:
    return (
        f"Started sub-agent {result.definition} in the background. Handle: {result.agent_id} "
        f"(session {result.session_id}). Collect its answer with subagent_wait."
    )


def _status_text(statuses: Sequence[SubagentStatus], waited: float | None = None) -> str:
    if not statuses:
        return "You have no background sub-agents."
    lines = []
    if waited is not None:
        lines.append(f"Still running after waiting {waited:g}s.")
    for status in statuses:
        line = (
            f"- {status.handle} ({status.definition}, session {status.session_id}): {status.state}"
        )
        if status.result is not None:
            line += f", reason {status.result.reason}"
            if status.result.error:
                line += f": {status.result.error}"
        lines.append(line)
    return "\n".join(lines)
