"""The ``@tool`` decorator: a :class:`Tool` from a typed ``async def``."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any, overload

import attrs

from ._docstring import Docstring, parse_docstring
from ._errors import ToolDefinitionError
from ._schema import JsonSchema, json_default, object_schema, schema_for
from ._types import Tool, ToolBody, ToolCallContext

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
    read_only: bool = False,
) -> Callable[[ToolFunction], Tool]: ...


def tool(
    fn: ToolFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    concurrency_safe: bool = False,
    read_only: bool = False,
) -> Tool | Callable[[ToolFunction], Tool]:
    """Build a :class:`Tool` from a typed ``async def``; usable bare or with options::

        @tool
        async def read(path: str, limit: int = 100) -> str:
            \"\"\"Read a text file.

            Args:
                path: The file to read.
                limit: At most this many lines.
            \"\"\"

        @tool(name="search", timeout=5.0, concurrency_safe=True, read_only=True)
        async def search_files(pattern: str, *, call: ToolCallContext) -> list[str]: ...

    The name is the function's (or ``name=``); the description is the docstring's text before
    its first section (or ``description=``); each parameter becomes a property whose schema
    comes from its annotation (see :mod:`trio_agent.tools._schema` for what is supported) and
    whose description comes from the Google-style ``Args:`` section. Parameters with defaults
    are optional. A keyword-only parameter annotated :class:`ToolCallContext` is not part of the
    schema; it receives the call's context. ``read_only=True`` declares that the body has no
    effects (see :attr:`Tool.read_only`).

    Arguments are validated strictly (no coercion) and structured with the shared cattrs
    converter before the body runs; problems end the call ``INVALID_ARGS`` naming each path.

    Raises:
        ToolDefinitionError: the function is not ``async``, a parameter is unannotated,
            variadic, positional-only or of an unsupported type, or the docstring documents a
            parameter that does not exist.
    """

    def build(fn: ToolFunction) -> Tool:
        built = _build(fn, name, description, timeout, concurrency_safe)
        return attrs.evolve(built, read_only=True) if read_only else built

    return build if fn is None else build(fn)


@attrs.frozen
class _Argument:
    """One parameter the model fills in: its annotation, default and JSON schema."""

    name: str
    annotation: Any
    default: Any
    schema: JsonSchema

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty


@attrs.frozen
class _Signature:
    """A tool function's parameters: the model's arguments, and the ToolCallContext slot."""

    arguments: tuple[_Argument, ...]
    context_param: str | None


def _build(
    fn: ToolFunction,
    name: str | None,
    description: str | None,
    timeout: float | None,
    concurrency_safe: bool,
) -> Tool:
    _require_async(fn)
    tool_name = name if name is not None else fn.__name__
    doc = parse_docstring(fn.__doc__)
    signature = _inspect_signature(fn, tool_name, doc)
    _check_documented(doc, signature, tool_name)
    return Tool(
        tool_name,
        doc.description if description is None else description,
        object_schema({a.name: (a.schema, a.required) for a in signature.arguments}),
        _body(fn, signature),
        timeout=timeout,
        concurrency_safe=concurrency_safe,
        arguments_type=_arguments_type(tool_name, signature.arguments),
    )


def _label(fn: ToolFunction) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def _require_async(fn: ToolFunction) -> None:
    if not inspect.iscoroutinefunction(fn):
        raise ToolDefinitionError(
            f"@tool needs an 'async def' function, got {_label(fn)}; run blocking work inside "
            "it with trio.to_thread.run_sync"
        )


def _type_hints(fn: ToolFunction, tool_name: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except NameError as exc:
        raise ToolDefinitionError(
            f"cannot resolve the annotations of tool {tool_name!r} ({_label(fn)}): {exc}; "
            "define the types it names at module level"
        ) from exc


def _inspect_signature(fn: ToolFunction, tool_name: str, doc: Docstring) -> _Signature:
    """Check every parameter of ``fn`` and describe it; raises on the first bad one."""
    hints = _type_hints(fn, tool_name)
    context_param: str | None = None
    arguments: list[_Argument] = []
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
        schema = _argument_schema(annotation, param.default, doc.params.get(param.name), where)
        arguments.append(_Argument(param.name, annotation, param.default, schema))
    return _Signature(tuple(arguments), context_param)


def _check_documented(doc: Docstring, signature: _Signature, tool_name: str) -> None:
    taken = {a.name for a in signature.arguments} | {signature.context_param}
    documented = set(doc.params) - taken
    if documented:
        raise ToolDefinitionError(
            f"the docstring of tool {tool_name!r} documents {', '.join(sorted(documented))}, "
            "which the function does not take; fix the Args: section"
        )


def _argument_schema(
    annotation: Any, default: Any, description: str | None, where: str
) -> JsonSchema:
    """The JSON schema of one argument, with its default and its ``Args:`` description."""
    schema = schema_for(annotation, where)
    if default is not inspect.Parameter.empty:
        schema["default"] = json_default(default, where)
    if description is not None:
        schema["description"] = description
    return schema


def _arguments_type(tool_name: str, arguments: tuple[_Argument, ...]) -> type:
    """The frozen attrs class the shared converter structures the model's arguments into."""
    fields = {
        a.name: (
            attrs.field(type=a.annotation)
            if a.required
            else attrs.field(type=a.annotation, default=a.default)
        )
        for a in arguments
    }
    return attrs.make_class(f"{tool_name}_arguments", fields, kw_only=True, frozen=True, slots=True)


def _body(fn: ToolFunction, signature: _Signature) -> ToolBody:
    """The tool body: calls ``fn`` with the structured arguments (and the call's context)."""
    names = tuple(a.name for a in signature.arguments)
    context_param = signature.context_param

    async def body(arguments: Any, call: ToolCallContext) -> object:
        kwargs = {n: getattr(arguments, n) for n in names}
        if context_param is not None:
            kwargs[context_param] = call
        return await fn(**kwargs)

    return body
