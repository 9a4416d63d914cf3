"""Errors raised by the prompt package.

::

    TrioAgentError
    └── PromptError
        ├── PromptConflictError (ValueError)    a section/variable name is taken in that layer
        ├── PromptDefinitionError (ValueError)  a bad section/variable name, order or provider
        └── PromptVariableError (ValueError)    render() met an unknown, unset or malformed {{x}}
"""

from __future__ import annotations

from ..errors import TrioAgentError

__all__ = ["PromptConflictError", "PromptDefinitionError", "PromptError", "PromptVariableError"]


class PromptError(TrioAgentError):
    """Base class of the errors the prompt package raises."""


class PromptConflictError(PromptError, ValueError):
    """A section or variable name is already registered in the same layer."""


class PromptDefinitionError(PromptError, ValueError):
    """A section or variable registration is malformed, or a provider returned a non-str."""


class PromptVariableError(PromptError, ValueError):
    """A ``{{name}}`` reference could not be rendered.

    Attributes:
        section: The section that holds the reference.
        variable: The reference as written (the text between the braces).
        registered: The names of the variables the assembly has.
    """

    def __init__(
        self, message: str, *, section: str, variable: str, registered: tuple[str, ...]
    ) -> None:
        super().__init__(message)
        self.section = section
        self.variable = variable
        self.registered = registered
