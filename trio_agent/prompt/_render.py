"""Rendering an assembly into the system prompt text."""

from __future__ import annotations

import re

from ._errors import PromptVariableError
from ._types import PromptAssembly, PromptSection

__all__ = ["VARIABLE_NAME", "render_prompt"]

#: What a variable name looks like.
VARIABLE_NAME = re.compile(r"[a-z][a-z0-9_]*")
_REFERENCE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def render_prompt(assembly: PromptAssembly) -> str:
    """Interpolate every section strictly and join the non-empty ones with a blank line.

    ``{{name}}`` is replaced by the variable's value; substituted text is not scanned again. A
    ``{{`` without a later ``}}`` is literal text. Each section is stripped of surrounding
    whitespace; sections that end up empty are dropped.

    Raises:
        PromptVariableError: a reference names an unknown variable, one whose value is None, or
            is malformed (``{{Not A Name}}``); the message names the section and the variable.
    """
    parts = []
    for section in assembly.sections:
        text = _interpolate(section, assembly).strip()
        if text:
            parts.append(text)
    return "\n\n".join(parts)


def _interpolate(section: PromptSection, assembly: PromptAssembly) -> str:
    variables = assembly.variables

    def substitute(match: re.Match[str]) -> str:
        name = match[1]
        registered = tuple(sorted(variables))
        listed = ", ".join(registered) or "(none)"

        def fail(message: str) -> PromptVariableError:
            return PromptVariableError(
                message, section=section.name, variable=name, registered=registered
            )

        if VARIABLE_NAME.fullmatch(name) is None:
            raise fail(
                f"malformed prompt variable reference {match[0]!r} in section "
                f'"{section.name}"; expected {{{{name}}}} with a name matching '
                f"^[a-z][a-z0-9_]*$"
            )
        if name not in variables:
            raise fail(
                f'unknown prompt variable "{{{{{name}}}}}" in section "{section.name}"; '
                f"registered variables: {listed}; register it with "
                f"system_prompt.variable({name!r}, provider) or fix the section"
            )
        value = variables[name]
        if value is None:
            raise fail(
                f'prompt variable "{{{{{name}}}}}" in section "{section.name}" has no value '
                "for this assembly (its provider returned None)"
            )
        return value

    return _REFERENCE.sub(substitute, section.text)
