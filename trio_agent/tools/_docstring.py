"""A small Google-style docstring reader: the description and the ``Args:`` entries."""

from __future__ import annotations

import inspect
import re

import attrs

__all__ = ["Docstring", "parse_docstring"]

_PARAM_SECTIONS = frozenset(
    {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments", "attributes"}
)
_SECTION = re.compile(
    r"(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Attributes|Returns?|"
    r"Yields?|Raises|Examples?|Notes?|Warnings?|See Also|Todo|References)\s*:",
    re.IGNORECASE,
)
_ENTRY = re.compile(r"\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)")


@attrs.frozen
class Docstring:
    """The parts of a docstring a tool schema uses."""

    description: str
    #: Parameter name → its description (continuation lines joined with spaces).
    params: dict[str, str] = attrs.field(hash=False)


def parse_docstring(doc: str | None) -> Docstring:
    """Split ``doc`` into the text before the first section and the parameter descriptions."""
    lines = inspect.cleandoc(doc or "").splitlines()
    description: list[str] = []
    params: dict[str, list[str]] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if indent == 0 and stripped and _SECTION.fullmatch(stripped):
            section = stripped[:-1].strip().lower()
            entry_indent = current = None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _PARAM_SECTIONS or not stripped:
            continue
        if indent == 0:  # unindented text ends the section
            section = None
            continue
        if entry_indent is None or indent <= entry_indent:
            match = _ENTRY.fullmatch(stripped)
            if match is not None:
                entry_indent = indent
                current = params.setdefault(match[1], [])
                if match[2]:
                    current.append(match[2])
                continue
        if current is not None:
            current.append(stripped)
    return Docstring(
        "\n".join(description).strip(),
        {name: " ".join(parts) for name, parts in params.items()},
    )
