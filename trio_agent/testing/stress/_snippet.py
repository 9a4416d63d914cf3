"""Failures as short Python snippets that reproduce them with :func:`replay`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

__all__ = ["machine_snippet", "scenario_name", "scenario_snippet", "short_repr"]

_KIT = "trio_agent.testing.stress"


def _location(obj: object, module_name: str | None = None) -> tuple[str, str] | None:
    """``(module, name)`` under which ``obj`` can be imported: looked up in ``module_name``
    (default: ``obj``'s own module) first, then in every loaded module."""
    first = sys.modules.get(module_name or getattr(obj, "__module__", None) or "")
    for module in [first, *list(sys.modules.values())]:
        if module is None:
            continue
        for name, value in list(vars(module).items()):
            if value is obj and not name.startswith("_"):
                return module.__name__, name
    return None


def _import(obj: object, fallback: str, module_name: str | None = None) -> tuple[str, str]:
    """An import line for ``obj`` (found in ``module_name``, default its own) and its name."""
    where = _location(obj, module_name)
    if where is None:
        return (
            f"# {fallback} is not importable (define it at module level to replay it)",
            fallback,
        )
    module_name, name = where
    if module_name == _KIT or module_name.startswith(_KIT + "."):
        return f"from {_KIT} import {name}", name
    path = getattr(sys.modules[module_name], "__file__", None)
    comment = f"  # {os.path.relpath(path)}" if path else ""
    return f"from {module_name} import {name}{comment}", name


def scenario_name(target: object, fn: object) -> str:
    """The name a scenario is importable under (else its function's qualified name)."""
    where = _location(target, getattr(fn, "__module__", None))
    return where[1] if where is not None else str(getattr(fn, "__qualname__", repr(fn)))


def scenario_snippet(
    target: object, fn: object, *, action: str, point: int | None, seed: int
) -> str:
    """The snippet that replays an exploration run of scenario ``target`` (whose function,
    ``fn``, tells the module to import it from)."""
    name = str(getattr(fn, "__name__", "scenario"))
    line, shown = _import(target, name, getattr(fn, "__module__", None))
    where = "" if point is None else f", action={action!r}, point={point}"
    return "\n".join(
        [
            f"from {_KIT} import replay",
            line,
            f"replay({shown}{where}, seed={seed})",
        ]
    )


def machine_snippet(machine: type, ops: Sequence[object], seed: int) -> str:
    """The snippet that replays state-machine operations ``ops`` on ``machine``."""
    imports: dict[str, list[str]] = {_KIT: ["replay"]}
    lines = []
    for obj in [machine, *_classes(ops)]:
        line, shown = _import(obj, getattr(obj, "__qualname__", repr(obj)))
        if line.startswith(f"from {_KIT} import "):
            imports[_KIT].append(shown)
        else:
            lines.append(line)
    kit = ", ".join(sorted(set(imports[_KIT])))
    body = ",\n    ".join(repr(op) for op in ops)
    call = (
        f"replay({machine.__name__}, seed={seed}, ops=[\n    {body},\n])"
        if ops
        else (f"replay({machine.__name__}, seed={seed}, ops=[])")
    )
    return "\n".join([f"from {_KIT} import {kit}", *dict.fromkeys(lines), call])


def _classes(values: Iterable[object]) -> list[type]:
    """The classes of ``values`` and of the attrs values nested in them, in first-seen order."""
    seen: dict[type, None] = {}
    stack = list(values)[::-1]
    while stack:
        value = stack.pop()
        if isinstance(value, tuple | list):
            stack.extend(reversed(value))
            continue
        if not attrs.has(type(value)):
            continue
        cls: Any = type(value)
        seen.setdefault(cls, None)
        stack.extend(reversed([getattr(value, f.name) for f in attrs.fields(cls)]))
    return list(seen)


def short_repr(value: Any) -> str:
    """``Name(arg, ...)`` of an attrs value: positional for the first field, keywords for the
    rest, leaving out fields equal to their default."""
    cls = type(value)
    parts = []
    for index, field in enumerate(attrs.fields(cls)):
        current = getattr(value, field.name)
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = default.factory()
        if index > 0 and default is not attrs.NOTHING and current == default:
            continue
        parts.append(repr(current) if index == 0 else f"{field.name}={current!r}")
    return f"{cls.__name__}({', '.join(parts)})"
