"""The root of trio-agent's exception tree.

Every error the library raises on purpose derives from :class:`TrioAgentError` and, where one
fits, from the matching builtin (``ValueError``, ``LookupError``, ``RuntimeError``) so callers can
catch either. Subsystems define their own subclasses next to the code that raises them::

    TrioAgentError
    ├── runtime: InactiveContextError, ServiceConflictError, ServiceNotFoundError,
    │            PluginConfigError
    ├── llm: LlmError (NoAdapterError, ScriptExhaustedError), AdapterConflictError
    ├── session: SessionError - JsonValueError, EventPayloadError, InvalidSeedError,
    │            SessionExistsError, SessionNotFoundError, ForkBoundaryError,
    │            SessionReentrancyError, SessionDetachedError; SubscriberLaggedError
    ├── tools: ToolError - ToolConflictError, ToolDefinitionError, ToolRestrictionError
    ├── tools.builtin: BuiltinToolError - WorkspacePathError, ShellPolicyError,
    │                  BuiltinToolsConfigError
    ├── prompt: PromptError - PromptConflictError, PromptDefinitionError, PromptVariableError
    ├── agent: AgentError - AgentExistsError, NoAgentFactoryError, PersistenceUnavailableError,
    │          AgentClosedError
    ├── persistence: PersistenceError - SessionCorruptError, SessionFormatError,
    │                StoredSessionNotFoundError, StoredSessionExistsError, SessionWriteError
    └── config: ConfigError
"""

from __future__ import annotations

__all__ = ["TrioAgentError"]


class TrioAgentError(Exception):
    """Base class of every error trio-agent raises deliberately."""
