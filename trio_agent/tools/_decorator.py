"""The ``@tool`` decorator: a :class:`Tool` from a typed ``async def``."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any, overload

import attrs

from ._docstring import parse_docstring
from ._errors import ToolDefinitionError
from ._schema import JsonSchema, json_default, object_schema, schema_for
from ._types import Tool, ToolCallContext

__all__ = ["tool"]

ToolFunction = Callable[..., Awaitable[object]]


@overload
def tool(fn: ToolFunction, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    concurrency_safe: bool = False,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    concurrency_safe: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Build a :class:`Tool` from a typed ``async def``; usable bare or with options::

        @tool
        async def read(path: str, limit: int = 100) -> str:
            \"\"\"Read a text file.

            Args:
                path: The file to read.
                limit: At most this many lines.
            \"\"\"

        @tool(name="search", timeout=5.0, concurrency_safe=True)
        async def search_files(pattern: str, *, call: ToolCallContext) -> list[str]: ...

    The name is the function's (or ``name=``); the description is the docstring's text before
    its first section (or ``description=``); each parameter becomes a property whose schema
    comes from its annotation (see :mod:`trio_agent.tools._schema` for what is supported) and
    whose description comes from the Google-style ``Args:`` section. Parameters with defaults
    are optional. A keyword-only parameter annotated :class:`ToolCallContext` is not part of the
    schema; it receives the call's context.

    Arguments are validated strictly (no coercion) and structured with the shared cattrs
    converter before the body runs; problems end the call ``INVALID_ARGS`` naming each path.

    Raises:
        ToolDefinitionError: the function is not ``async``, a parameter is unannotated,
            variadic, positional-only or of an unsupported type, or the docstring documents a
            parameter that does not exist.
    """

    def build(fn: ToolFunction) -> Tool:
        return _build(fn, name, description, timeout, concurrency_safe)

    return build if fn is None else build(fn)


def _build(
    fn: ToolFunction,
    name: str | None,
    description: str | None,
    timeout: float | None,
    concurrency_safe: bool,
) -> Tool:
    label = getattr(fn, "__qualname__", repr(fn))
    if not inspect.iscoroutinefunction(fn):
        raise ToolDefinitionError(
            f"@tool needs an 'async def' function, got {label}; run blocking work inside it "
            "with trio.to_thread.run_sync"
        )
    tool_name = name if name is not None else fn.__name__
    try:
        hints = typing.get_type_hints(fn)
    except NameError as exc:
        raise ToolDefinitionError(
            f"cannot resolve the annotations of tool {tool_name!r} ({label}): {exc}; define "
            "the types it names at module level"
        ) from exc
    doc = parse_docstring(fn.__doc__)
    context_param: str | None = None
    properties: dict[str, tuple[JsonSchema, bool]] = {}
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        where = f"parameter {param.name!r} of tool {tool_name!r}"
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(
                f"{where}: {param.kind.description} parameters cannot be tool arguments; "
                "use named parameters"
            )
        if param.name not in hints:
            raise ToolDefinitionError(f"{where} has no annotation; annotate every parameter")
        annotation = hints[param.name]
        if annotation is ToolCallContext:
            if param.kind is not param.KEYWORD_ONLY or context_param is not None:
                raise ToolDefinitionError(
                    f"{where}: the ToolCallContext parameter must be keyword-only (after '*') "
                    "and there can be only one"
                )
            context_param = param.name
            continue
        schema = schema_for(annotation, where)
        required = param.default is param.empty
        if required:
            fields[param.name] = attrs.field(type=annotation)
        else:
            schema["default"] = json_default(param.default, where)
            fields[param.name] = attrs.field(type=annotation, default=param.default)
        if param.name in doc.params:
            schema["description"] = doc.params[param.name]
        properties[param.name] = (schema, required)
    documented = set(doc.params) - set(properties) - {context_param}
    if documented:
        raise ToolDefinitionError(
            f"the docstring of tool {tool_name!r} documents {', '.join(sorted(documented))}, "
            "which the function does not take; fix the Args: section"
        )
    arguments_type = attrs.make_class(
        f"{tool_name}_arguments", fields, kw_only=True, frozen=True, slots=True
    )
    names = tuple(properties)

    async def body(arguments: Any, call: ToolCallContext) -> object:
        kwargs = {n: getattr(arguments, n) for n in names}
        if context_param is not None:
            kwargs[context_param] = call
        return await fn(**kwargs)

    return Tool(
        tool_name,
        doc.description if description is None else description,
        object_schema(properties),
        body,
        timeout=timeout,
        concurrency_safe=concurrency_safe,
        arguments_type=arguments_type,
    )
