"""The ``SubagentService`` configuration: the ``subagents:`` section of ``trio-agent.yml``.

::

    subagents:
      - name: reviewer
        description: Reviews a diff and lists concrete bugs.
        instructions: You review code. Report bugs with file and line; say nothing else.
        tools: [read_file, grep]
        max_steps: 10
      - name: researcher
        description: Finds where something is implemented.
        instructions: Search the workspace and answer with paths and a short explanation.
        provider: local
        model: small-model

The section is either that list, or a mapping with the options too::

    subagents:
      max_depth: 2          # how deep children may nest (default 3)
      max_parallel: 4       # children of one parent running at once (default 4)
      background: true      # offer background children (subagent_wait / subagent_status)
      definitions: [...]

Parsing is strict: an unknown key, a wrong type or a bad value is a
:class:`~trio_agent.subagents.SubagentConfigError` naming the key path; every problem found is
reported at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._serde import converter
from ._errors import SubagentConfigError, SubagentSchemaError
from ._types import SubagentDefinition

__all__ = ["SubagentsConfig", "parse_subagents_config"]


def _check_positive(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SubagentConfigError(f"got {value!r}; expected a positive integer", key=attribute.name)


def _definitions(value: Any) -> tuple[SubagentDefinition, ...]:
    definitions = tuple(value)
    seen: set[str] = set()
    for index, definition in enumerate(definitions):
        if not isinstance(definition, SubagentDefinition):
            raise SubagentConfigError(
                f"got {type(definition).__name__}; expected a SubagentDefinition",
                key=f"definitions[{index}]",
            )
        if definition.name in seen:
            raise SubagentConfigError(
                f"the name {definition.name!r} is defined twice; names must be unique",
                key=f"definitions[{index}].name",
            )
        seen.add(definition.name)
    return definitions


@attrs.frozen
class SubagentsConfig:
    """``SubagentService.Config``.

    Attributes:
        definitions: Registered when the plugin loads (more can be registered from code).
        max_depth: How deep children may nest: a top-level agent is depth 0, its children 1;
            a child at this depth cannot spawn (``DENIED``). Recorded in every child's session
            header and enforced from there on resume.
        max_parallel: How many children of one parent run at once (foreground and background);
            more wait for a slot.
        background: Offer ``background: true`` and the ``subagent_wait`` /
            ``subagent_status`` tools.
    """

    definitions: tuple[SubagentDefinition, ...] = attrs.field(default=(), converter=_definitions)
    max_depth: int = attrs.field(default=3, validator=_check_positive)
    max_parallel: int = attrs.field(default=4, validator=_check_positive)
    background: bool = True


_DEFINITION_KEYS = {
    "name": str,
    "description": str,
    "instructions": str,
    "tools": list,
    "provider": str,
    "model": str,
    "max_steps": int,
    "output_schema": dict,
}
_REQUIRED = ("name", "description", "instructions")
_OPTION_KEYS = {"max_depth": int, "max_parallel": int, "background": bool}


def parse_subagents_config(data: object, *, path: str = "$.subagents") -> SubagentsConfig:
    """Structure config data (the ``subagents:`` section) into a :class:`SubagentsConfig`.

    ``data`` is a list of definitions, a mapping with ``definitions`` and the options, or
    ``None`` (nothing configured). ``path`` is where it sits in the whole file; each problem
    is reported with its key path::

        $.subagents[1].max_steps: got 0; expected a positive integer

    Raises:
        SubagentConfigError: the data is not a valid config.
    """
    where = path or "$"
    if data is None:
        return SubagentsConfig()
    problems: list[str] = []
    options: dict[str, Any] = {}
    if isinstance(data, list):
        rows, rows_path = data, where
    elif isinstance(data, Mapping):
        rows = data.get("definitions", [])
        rows_path = f"{path}.definitions" if path else "definitions"
        for key, value in data.items():
            if key == "definitions":
                continue
            expected = _OPTION_KEYS.get(key)
            if expected is None:
                known = ", ".join(["definitions", *_OPTION_KEYS])
                problems.append(f"{where}: unknown key {key!r} (known: {known})")
            elif not _has_type(value, expected):
                problems.append(_wrong_type(_join(path, key), value, expected))
            elif expected is int and value < 1:
                problems.append(f"{_join(path, key)}: got {value}; expected a positive integer")
            else:
                options[key] = value
        if not isinstance(rows, list):
            problems.append(f"{rows_path}: got {type(rows).__name__}; expected a list")
            rows = []
    else:
        raise SubagentConfigError(
            f"{where}: got {type(data).__name__}; expected a list of definitions or a mapping "
            "with 'definitions' and options"
        )
    definitions = [
        definition
        for index, row in enumerate(rows)
        if (definition := _definition(row, f"{rows_path}[{index}]", problems)) is not None
    ]
    names = [d.name for d in definitions]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{rows_path}: the name {name!r} is defined more than once")
    if problems:
        raise SubagentConfigError("; ".join(problems))
    return SubagentsConfig(definitions=tuple(definitions), **options)


def _definition(row: object, path: str, problems: list[str]) -> SubagentDefinition | None:
    if not isinstance(row, Mapping):
        problems.append(f"{path}: got {type(row).__name__}; expected a mapping")
        return None
    found = len(problems)
    fields: dict[str, Any] = {}
    for key, value in row.items():
        expected = _DEFINITION_KEYS.get(key)
        if expected is None:
            known = ", ".join(_DEFINITION_KEYS)
            problems.append(f"{path}: unknown key {key!r} (known: {known})")
        elif value is None and key not in _REQUIRED:
            continue
        elif _has_type(value, expected):
            fields[key] = value
        else:
            problems.append(_wrong_type(f"{path}.{key}", value, expected))
    problems.extend(f"{path}.{key}: required key missing" for key in _REQUIRED if key not in row)
    if len(problems) > found:
        return None
    try:
        return SubagentDefinition(**fields)
    except (SubagentConfigError, SubagentSchemaError) as exc:
        problems.append(_at(path, exc))
        return None


def _has_type(value: object, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is dict:
        return isinstance(value, Mapping)
    return isinstance(value, expected)


def _wrong_type(path: str, value: object, expected: type) -> str:
    names = {str: "a string", int: "an integer", bool: "true or false", list: "a list"}
    return f"{path}: got {type(value).__name__}; expected {names.get(expected, 'a mapping')}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _at(path: str, exc: SubagentConfigError | SubagentSchemaError) -> str:
    if isinstance(exc, SubagentConfigError) and exc.key is not None:
        return f"{_join(path, exc.key)}: {exc.detail}"
    return f"{path or '$'}: {exc}"


def _structure_config(value: object, _: object) -> SubagentsConfig:
    # ``await ctx.plugin(SubagentService, [...])`` structures through the shared converter; the
    # runtime names the plugin, so the paths here are relative to its config.
    return parse_subagents_config(value, path="")


converter.register_structure_hook(SubagentsConfig, _structure_config)
