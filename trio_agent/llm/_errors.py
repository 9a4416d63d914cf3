"""Errors of the model layer.

::

    TrioAgentError
    ├── LlmError                 a model call failed; ``failure`` holds the facts
    │   ├── NoAdapterError       (also LookupError) no adapter is registered for the provider
    │   └── ScriptExhaustedError (also LookupError) a scripted adapter ran out of responses
    └── AdapterConflictError     (also ValueError) an adapter name is already registered
"""

from __future__ import annotations

from ..errors import TrioAgentError
from ._types import LlmError, LlmFailure

__all__ = ["AdapterConflictError", "NoAdapterError", "ScriptExhaustedError"]


class NoAdapterError(LlmError, LookupError):
    """No adapter is registered under the requested provider name (code ``NO_ADAPTER``)."""

    def __init__(self, provider: str, registered: tuple[str, ...]) -> None:
        known = ", ".join(repr(n) for n in registered) or "none"
        super().__init__(
            LlmFailure(
                "NO_ADAPTER",
                f"no LLM adapter is registered for provider {provider!r} (registered: {known}); "
                "mount the provider plugin or fix the provider name in the call config",
            )
        )
        self.provider = provider


class ScriptExhaustedError(LlmError, LookupError):
    """A :class:`~trio_agent.llm.ScriptedAdapter` was asked for more responses than it holds
    (code ``SCRIPT_EXHAUSTED``)."""

    def __init__(self, adapter: str, scripted: int) -> None:
        plural = "response" if scripted == 1 else "responses"
        super().__init__(
            LlmFailure(
                "SCRIPT_EXHAUSTED",
                f"scripted adapter {adapter!r} was asked for response #{scripted + 1} but its "
                f"script had {scripted} {plural}; add more responses to the script (or "
                "adapter.push(...)) for every model call the test makes",
            )
        )
        self.adapter = adapter
        self.scripted = scripted


class AdapterConflictError(TrioAgentError, ValueError):
    """An adapter with the same name is already registered with ``ctx.llm``."""
