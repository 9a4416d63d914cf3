"""The public import surface is pinned: adding or removing a name, or a ``@final``, is a
deliberate change made here.

One table, :data:`PUBLIC`, holds every public module of trio_agent (found by walking the
package: every module whose dotted path has no ``_`` component): its ``__all__`` in order (ruff's
RUF022 keeps them sorted) and which of those names are ``@final``.

The finality rule (docs/testing.md): a public class that holds mutable state or identity -- a
service, plugin, resource, handle, parser -- is ``@final``: use it, wrap it, do not subclass it.
Open for subclassing or implementing are exceptions (a plugin derives its own from its area's
base), Protocols, the base classes documented for subclassing (:data:`EXTENSION_POINTS`), enums,
and frozen attrs values (a value may still be final, like ``Workspace``; the table pins which).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import pkgutil
import typing

import attrs
import pytest
import trio

import trio_agent
import trio_agent.acp as acp
import trio_agent.agent as agent
import trio_agent.compaction as compaction
import trio_agent.config as config
import trio_agent.llm as llm
import trio_agent.loop as loop
import trio_agent.mcp as mcp
import trio_agent.persistence as persistence
import trio_agent.prompt as prompt
import trio_agent.redaction as redaction
import trio_agent.runtime as runtime
import trio_agent.session as session
import trio_agent.subagents as subagents
import trio_agent.testing as testing
import trio_agent.testing.stress as stress
import trio_agent.tools as tools
import trio_agent.tools.builtin as builtin
import trio_agent.usage as usage
from trio_agent.errors import TrioAgentError


@attrs.frozen
class Surface:
    """One public module: its ``__all__`` in order, and the names in it that are ``@final``."""

    all: list[str]
    final: set[str] = attrs.field(factory=set)


PUBLIC: dict[str, Surface] = {
    "trio_agent": Surface(
        [
            "Agent",
            "AgentHandle",
            "AgentOptions",
            "Context",
            "Disposer",
            "HarnessConfig",
            "Message",
            "ReactLoopAgent",
            "Service",
            "ServiceKey",
            "Session",
            "Tool",
            "ToolCallContext",
            "TrioAgentError",
            "load_config",
            "mount_config",
            "open_harness",
            "open_runtime",
            "tool",
        ],
        final={
            "AgentHandle",
            "Context",
            "Disposer",
            "ReactLoopAgent",
            "ServiceKey",
            "Session",
            "ToolCallContext",
        },
    ),
    "trio_agent.acp": Surface(
        [
            "PROTOCOL_VERSION",
            "AcpApprovalService",
            "AcpError",
            "AcpOptions",
            "ClientMcpServer",
            "ConnectionClosedError",
            "PermissionAnswer",
            "PermissionBridge",
            "PermissionQuestion",
            "RpcError",
            "main_acp",
            "mount_client_mcp_servers",
            "serve",
        ],
        final={
            "AcpApprovalService",
            "PermissionBridge",
        },
    ),
    "trio_agent.agent": Surface(
        [
            "Agent",
            "AgentClosedError",
            "AgentCreated",
            "AgentDisposed",
            "AgentError",
            "AgentExistsError",
            "AgentFactory",
            "AgentFailed",
            "AgentHandle",
            "AgentOptions",
            "AgentRegistry",
            "AgentSetup",
            "AgentStatus",
            "Allow",
            "Block",
            "ContinuationDecision",
            "ContinuationStop",
            "MessageContent",
            "MessageQueued",
            "NoAgentFactoryError",
            "PersistenceUnavailableError",
            "PreStep",
            "PromptDecision",
            "PromptSubmit",
            "RequestConfig",
            "RequestFailed",
            "Retry",
            "RetryPlugin",
            "SessionPrefix",
            "SessionStart",
            "StatusChanged",
            "SteeringInjected",
            "StepEnded",
            "StepResult",
            "StepStarted",
            "StreamChunkReceived",
            "TurnContinuation",
            "TurnEndReason",
            "TurnEnded",
            "TurnStarted",
            "TurnStop",
            "to_user_message",
        ],
        final={
            "AgentHandle",
        },
    ),
    "trio_agent.cli": Surface(
        [
            "main",
        ],
    ),
    "trio_agent.compaction": Surface(
        [
            "DEFAULT_PROMPT",
            "PRUNE_STUB",
            "SUMMARY_HEADING",
            "Compaction",
            "CompactionError",
            "CompactionFailed",
            "CompactionResult",
            "Strategy",
            "Trigger",
            "render_transcript",
        ],
        final={
            "Compaction",
        },
    ),
    "trio_agent.config": Surface(
        [
            "DEFAULT_PERSONA",
            "PLUGIN_ENTRY_POINT_GROUP",
            "ConfigError",
            "ConfiguredPlugin",
            "HarnessConfig",
            "LlmConfig",
            "PersistenceConfig",
            "PluginEntry",
            "ProviderConfig",
            "ResolvedPlugin",
            "SystemPromptConfig",
            "ToolsConfig",
            "configured_plugins",
            "default_config",
            "installed_plugins",
            "load_config",
            "mount_config",
            "mount_persistence",
            "mount_redactor",
            "open_harness",
            "parse_config",
            "resolve_plugins",
        ],
    ),
    "trio_agent.demo": Surface(
        [
            "main",
        ],
    ),
    "trio_agent.errors": Surface(
        [
            "TrioAgentError",
        ],
    ),
    "trio_agent.ids": Surface(
        [
            "SESSION_ID_PATTERN",
            "AgentId",
            "CallId",
            "MessageId",
            "SessionId",
            "new_call_id",
            "new_message_id",
            "validate_session_id",
        ],
    ),
    "trio_agent.llm": Surface(
        [
            "DEFAULT_RETRY_CODES",
            "AdapterConflictError",
            "BlockAssembler",
            "BlockEnd",
            "BlockKind",
            "BlockStart",
            "ContentBlock",
            "Finish",
            "FinishReason",
            "FrozenMessages",
            "GenerateRequest",
            "Generation",
            "ImageBlock",
            "LlmAdapter",
            "LlmCallConfig",
            "LlmError",
            "LlmFailure",
            "LlmService",
            "LlmStreamCall",
            "Message",
            "MessageSource",
            "ModelList",
            "ModelSpec",
            "NoAdapterError",
            "OfflineAdapter",
            "OfflineProvider",
            "OpenAiAdapter",
            "OpenAiProvider",
            "ReasoningBlock",
            "ReasoningDelta",
            "RetryPolicy",
            "Role",
            "ScriptExhaustedError",
            "ScriptedAdapter",
            "ScriptedProvider",
            "ScriptedResponse",
            "SseEvent",
            "SseParser",
            "StreamChunk",
            "TextBlock",
            "TextDelta",
            "ToolCallBlock",
            "ToolCallDelta",
            "ToolResult",
            "ToolResultBlock",
            "ToolSchema",
            "Usage",
            "UsageChunk",
            "encode_request",
            "http_failure",
            "message_text",
        ],
        final={
            "BlockAssembler",
            "LlmService",
            "LlmStreamCall",
            "ModelList",
            "OfflineAdapter",
            "OfflineProvider",
            "OpenAiAdapter",
            "OpenAiProvider",
            "ScriptedAdapter",
            "ScriptedProvider",
            "SseEvent",
            "SseParser",
        },
    ),
    "trio_agent.loop": Surface(
        [
            "AgentConfig",
            "AgentLoop",
            "ReactLoopAgent",
        ],
        final={
            "ReactLoopAgent",
        },
    ),
    "trio_agent.lowlevel": Surface(
        [
            "Fiber",
            "FiberState",
            "InactiveContextError",
            "Next",
            "Plugin",
            "PluginConfigError",
            "Scope",
            "ServiceConflictError",
            "ServiceNotFoundError",
        ],
        final={
            "Fiber",
            "Scope",
        },
    ),
    "trio_agent.mcp": Surface(
        [
            "HttpServerConfig",
            "McpConfigError",
            "McpError",
            "McpServerStatus",
            "McpServerUnavailableError",
            "McpServers",
            "McpServersConfig",
            "McpToolNameError",
            "RestartPolicy",
            "ServerConfig",
            "ServerState",
            "StdioServerConfig",
            "mcp_tool_name",
            "parse_mcp_config",
        ],
        final={
            "McpServers",
        },
    ),
    "trio_agent.otel": Surface(
        [
            "OtelTracing",
        ],
        final={
            "OtelTracing",
        },
    ),
    "trio_agent.persistence": Surface(
        [
            "FORMAT_TAG",
            "SESSION_PERSISTENCE",
            "SUPPORTED_VERSIONS",
            "Backend",
            "Inbox",
            "InboxUnavailableError",
            "JsonlBackend",
            "JsonlPersistence",
            "MemoryBackend",
            "MemoryPersistence",
            "MemoryStorage",
            "PersistenceError",
            "PersistenceService",
            "Position",
            "PostgresBackend",
            "PostgresPersistence",
            "ReadResult",
            "SessionBusyError",
            "SessionCorruptError",
            "SessionFormatError",
            "SessionInfo",
            "SessionPersistence",
            "SessionTamperedError",
            "SessionWriteError",
            "SqliteBackend",
            "SqlitePersistence",
            "StoredSession",
            "StoredSessionExistsError",
            "StoredSessionNotFoundError",
            "jsonl_lines",
            "require_inbox",
            "send_prompt",
            "session_info",
        ],
        final={
            "Inbox",
            "JsonlBackend",
            "JsonlPersistence",
            "MemoryBackend",
            "MemoryPersistence",
            "MemoryStorage",
            "PostgresBackend",
            "PostgresPersistence",
            "SqliteBackend",
            "SqlitePersistence",
        },
    ),
    "trio_agent.prompt": Surface(
        [
            "AgentLike",
            "PromptAssembleRequest",
            "PromptAssembly",
            "PromptConflictError",
            "PromptDefinitionError",
            "PromptError",
            "PromptSection",
            "PromptVariableError",
            "SectionText",
            "SystemPrompt",
            "VariableProvider",
            "render_prompt",
        ],
        final={
            "SystemPrompt",
        },
    ),
    "trio_agent.redaction": Surface(
        ["REDACTED", "RedactingFilter", "Redactor", "redact_known", "redact_text"],
        final={"RedactingFilter", "Redactor"},
    ),
    "trio_agent.runtime": Surface(
        [
            "Context",
            "Disposer",
            "Fiber",
            "FiberState",
            "InactiveContextError",
            "Next",
            "Plugin",
            "PluginConfigError",
            "Scope",
            "Service",
            "ServiceConflictError",
            "ServiceKey",
            "ServiceNotFoundError",
            "open_runtime",
        ],
        final={
            "Context",
            "Disposer",
            "Fiber",
            "Scope",
            "ServiceKey",
        },
    ),
    "trio_agent.session": Surface(
        [
            "COMPACTION_SOURCE",
            "EVENT_PAYLOADS",
            "INTERRUPTED_NOT_STARTED_TEXT",
            "INTERRUPTED_OUTCOME_UNKNOWN_TEXT",
            "INTERRUPTED_READ_ONLY_TEXT",
            "SESSION_FORMAT_VERSION",
            "ApprovalDecisionEvent",
            "ApprovalRequestEvent",
            "AssistantChunk",
            "AssistantMessageEvent",
            "CompactionPrune",
            "CompactionRangeError",
            "CompactionSummary",
            "ContextMessageEvent",
            "EventLog",
            "EventPayloadError",
            "ForkBoundaryError",
            "InvalidSeedError",
            "JsonValueError",
            "LlmRetry",
            "MessageHistory",
            "PromptBlocked",
            "RequestHeader",
            "Session",
            "SessionAppended",
            "SessionCreated",
            "SessionDetachedError",
            "SessionDisposed",
            "SessionEndSeed",
            "SessionError",
            "SessionEvent",
            "SessionExistsError",
            "SessionFlush",
            "SessionHeader",
            "SessionNotFoundError",
            "SessionReentrancyError",
            "SessionStore",
            "SessionSubscription",
            "SteeringMessageEvent",
            "StepEnd",
            "StepStart",
            "SubscriberLaggedError",
            "ToolCallEvent",
            "ToolResultEvent",
            "TurnEnd",
            "TurnEndReason",
            "TurnStart",
            "UserMessageEvent",
            "message_of",
            "project_messages",
            "repair_closers",
            "repair_events",
            "would_prune",
        ],
        final={
            "EventLog",
            "MessageHistory",
            "Session",
            "SessionStore",
            "SessionSubscription",
        },
    ),
    "trio_agent.subagents": Surface(
        [
            "FINAL_RESULT",
            "START_EVENT",
            "SUBAGENT_TOOLS",
            "SubagentConfigError",
            "SubagentDefinition",
            "SubagentDepthError",
            "SubagentError",
            "SubagentInfo",
            "SubagentLink",
            "SubagentMode",
            "SubagentNotice",
            "SubagentReason",
            "SubagentRequest",
            "SubagentResult",
            "SubagentSchemaError",
            "SubagentService",
            "SubagentState",
            "SubagentStatus",
            "SubagentsConfig",
            "UnknownHandleError",
            "UnknownSubagentError",
            "parse_subagents_config",
            "subagent_info",
            "subagent_links",
        ],
    ),
    "trio_agent.testing": Surface(
        [
            "DROP",
            "ECHO_MODES",
            "HANG",
            "BackendCall",
            "BackendConformance",
            "FakeOpenAiServer",
            "FakeResponse",
            "Fault",
            "FaultyBackend",
            "HangResponse",
            "JsonResponse",
            "Pause",
            "RecordedRequest",
            "ScheduleCount",
            "ScriptItem",
            "ScriptedAdapter",
            "ScriptedProvider",
            "ScriptedResponse",
            "SseResponse",
            "TaskLeakCheck",
            "TaskLeakError",
            "TestHarness",
            "append_every_event_type",
            "append_tool_turn",
            "assert_no_leaked_tasks",
            "check_backend",
            "completion_chunk",
            "count_schedule_points",
            "echo_key_response",
            "error",
            "error_response",
            "event_types",
            "hang",
            "hang_response",
            "json_response",
            "max_tokens",
            "open_fake_openai_server",
            "open_test_harness",
            "raises",
            "raw",
            "reasoning",
            "sse_comment",
            "sse_done",
            "sse_event",
            "sse_finish",
            "sse_reasoning",
            "sse_reply",
            "sse_response",
            "sse_text",
            "sse_tool_call",
            "sse_usage",
            "text",
            "tool_call",
            "turn_end_reasons",
        ],
        final={
            "BackendCall",
            "FakeOpenAiServer",
            "Fault",
            "FaultyBackend",
            "RecordedRequest",
            "ScheduleCount",
            "ScriptedAdapter",
            "ScriptedProvider",
            "TaskLeakCheck",
            "TestHarness",
        },
    ),
    "trio_agent.testing.stress": Surface(
        [
            "TESTED_TRIO",
            "Action",
            "ActionRecord",
            "Advance",
            "AgentAtAction",
            "AgentStateMachine",
            "AgentTrace",
            "CallTools",
            "Cancel",
            "Close",
            "ExplorationReport",
            "Fail",
            "Failure",
            "Hang",
            "HarnessSpec",
            "Inject",
            "LoggedError",
            "MachineConfig",
            "MaxTokens",
            "NewAgent",
            "Op",
            "PerRun",
            "PluginSpec",
            "QueueModel",
            "QueuedPrompt",
            "Reply",
            "Respond",
            "ResponseSpec",
            "RunRecord",
            "Scenario",
            "ScenarioError",
            "ScenarioFn",
            "Send",
            "Settle",
            "Steer",
            "StressFailure",
            "ToolCallSpec",
            "UserCheck",
            "Violation",
            "WaitIdle",
            "World",
            "check_cancel_drops_queued_prompts",
            "check_cancel_ends_turn",
            "check_cancel_not_swallowed",
            "check_no_child_process_left",
            "check_no_hang",
            "check_no_scope_misnesting",
            "check_no_task_left",
            "check_no_unhandled_error",
            "check_prompts_logged_once",
            "check_run",
            "check_seq_contiguous",
            "check_session",
            "check_status_transitions",
            "check_steps_balanced",
            "check_streams_closed",
            "check_tool_calls_answered",
            "check_turns_closed",
            "explore_cancellation",
            "json_values",
            "model_responses",
            "per_run",
            "replay",
            "scenario",
            "seeded_scheduler",
            "tool_arguments",
        ],
        final={
            "AgentTrace",
            "QueueModel",
            "RunRecord",
            "World",
        },
    ),
    "trio_agent.approval": Surface(
        ["EFFECTFUL_BUILTINS", "ApprovalPolicy"],
        final={"ApprovalPolicy"},
    ),
    "trio_agent.tools": Surface(
        [
            "ABORTED",
            "ABORTED_BEFORE_DISPATCH",
            "APPROVAL",
            "DENIED",
            "INVALID_ARGS",
            "TOOL_ERROR",
            "TOOL_OUTCOME_UNKNOWN",
            "TOOL_TIMEOUT",
            "UNKNOWN_TOOL",
            "Accept",
            "AgentLike",
            "Allow",
            "ApprovalAnswer",
            "ApprovalNotice",
            "ApprovalRequest",
            "ApprovalService",
            "Approved",
            "Ask",
            "Block",
            "Denied",
            "Deny",
            "Guard",
            "PostExecute",
            "PostExecuteDecision",
            "PreExecuteDecision",
            "Tool",
            "ToolBody",
            "ToolCallContext",
            "ToolChange",
            "ToolConflictError",
            "ToolDefinitionError",
            "ToolError",
            "ToolExecution",
            "ToolInvocation",
            "ToolRegistry",
            "ToolRestrictionError",
            "ToolResultNotice",
            "aborted_result",
            "as_content",
            "error_result",
            "render_value",
            "tool",
        ],
        final={
            "ToolCallContext",
            "ToolRegistry",
        },
    ),
    "trio_agent.tools.builtin": Surface(
        [
            "BUILTIN_TOOL_NAMES",
            "SKIPPED_DIRECTORIES",
            "BuiltinToolError",
            "BuiltinTools",
            "BuiltinToolsConfig",
            "BuiltinToolsConfigError",
            "ProtectedPathError",
            "ShellPolicy",
            "ShellPolicyError",
            "ShellSetting",
            "Workspace",
            "WorkspacePathError",
            "builtin_tools",
        ],
        final={
            "BuiltinTools",
            "Workspace",
        },
    ),
    "trio_agent.usage": Surface(
        [
            "CHARS_PER_TOKEN",
            "IMAGE_TOKENS",
            "MESSAGE_OVERHEAD_TOKENS",
            "ContextEstimate",
            "UsageReport",
            "UsageService",
            "UsageTotals",
            "estimate_message_tokens",
            "estimate_messages_tokens",
            "estimate_request_tokens",
            "estimate_tokens",
            "tally",
        ],
        final={
            "UsageService",
        },
    ),
}

#: Stateful classes the rule says should be ``@final`` that are not yet; their owners mark them
#: (issue 12). The test fails once one is marked, so the entry is then removed here.
NOT_YET_FINAL = {agent.AgentRegistry, agent.RetryPlugin, loop.AgentLoop}

#: Base classes documented for subclassing, though they are neither Protocols nor values.
EXTENSION_POINTS = {
    runtime.Service,
    llm.FrozenMessages,
    persistence.PersistenceService,  # a backend's own service with its own Config
    subagents.SubagentService,  # "subclassable like a Service"
    testing.BackendConformance,  # a backend's test class
    stress.AgentStateMachine,  # a plugin's state machine
    stress.Op,  # a plugin's own state-machine operation
    stress.ResponseSpec,  # a scripted-response value's base
}

#: Names two modules export for different objects, on purpose.
DISTINCT_SAME_NAMES = {
    "Allow": "agent: a prompt-submit decision; tools: a guard decision",
    "Block": "agent: a prompt-submit decision; tools: a guard decision",
    "AgentLike": "each layer's own structural view of an agent",
    "main": "trio_agent.cli and trio_agent.demo are two programs",
}

#: Every public error: (its parent in the tree, the builtin it also derives from).
ERROR_TREE: dict[type[BaseException], tuple[type[BaseException], type[BaseException]]] = {
    TrioAgentError: (Exception, Exception),
    runtime.InactiveContextError: (TrioAgentError, RuntimeError),
    runtime.PluginConfigError: (TrioAgentError, ValueError),
    runtime.ServiceConflictError: (TrioAgentError, RuntimeError),
    runtime.ServiceNotFoundError: (TrioAgentError, LookupError),
    llm.LlmError: (TrioAgentError, Exception),
    llm.NoAdapterError: (llm.LlmError, LookupError),
    llm.ScriptExhaustedError: (llm.LlmError, LookupError),
    llm.AdapterConflictError: (TrioAgentError, ValueError),
    session.SessionError: (TrioAgentError, Exception),
    session.JsonValueError: (session.SessionError, ValueError),
    session.EventPayloadError: (session.SessionError, ValueError),
    session.InvalidSeedError: (session.SessionError, ValueError),
    session.SessionExistsError: (session.SessionError, ValueError),
    session.SessionNotFoundError: (session.SessionError, LookupError),
    session.ForkBoundaryError: (session.SessionError, ValueError),
    session.SessionReentrancyError: (session.SessionError, RuntimeError),
    session.SessionDetachedError: (session.SessionError, RuntimeError),
    session.SubscriberLaggedError: (session.SessionError, trio.BrokenResourceError),
    session.CompactionRangeError: (session.EventPayloadError, ValueError),
    tools.ToolError: (TrioAgentError, Exception),
    tools.ToolConflictError: (tools.ToolError, ValueError),
    tools.ToolDefinitionError: (tools.ToolError, ValueError),
    tools.ToolRestrictionError: (tools.ToolError, ValueError),
    builtin.BuiltinToolError: (tools.ToolError, Exception),
    builtin.WorkspacePathError: (builtin.BuiltinToolError, ValueError),
    builtin.ShellPolicyError: (builtin.BuiltinToolError, PermissionError),
    builtin.ProtectedPathError: (builtin.WorkspacePathError, ValueError),
    builtin.BuiltinToolsConfigError: (tools.ToolError, ValueError),
    prompt.PromptError: (TrioAgentError, Exception),
    prompt.PromptConflictError: (prompt.PromptError, ValueError),
    prompt.PromptDefinitionError: (prompt.PromptError, ValueError),
    prompt.PromptVariableError: (prompt.PromptError, ValueError),
    agent.AgentError: (TrioAgentError, Exception),
    agent.AgentExistsError: (agent.AgentError, ValueError),
    agent.NoAgentFactoryError: (agent.AgentError, LookupError),
    agent.PersistenceUnavailableError: (agent.AgentError, LookupError),
    agent.AgentClosedError: (agent.AgentError, RuntimeError),
    persistence.PersistenceError: (TrioAgentError, Exception),
    persistence.SessionCorruptError: (persistence.PersistenceError, ValueError),
    persistence.SessionFormatError: (persistence.PersistenceError, ValueError),
    persistence.StoredSessionNotFoundError: (persistence.PersistenceError, LookupError),
    persistence.StoredSessionExistsError: (persistence.PersistenceError, ValueError),
    persistence.SessionWriteError: (persistence.PersistenceError, OSError),
    persistence.SessionBusyError: (persistence.PersistenceError, RuntimeError),
    persistence.SessionTamperedError: (persistence.PersistenceError, RuntimeError),
    persistence.InboxUnavailableError: (persistence.PersistenceError, LookupError),
    config.ConfigError: (TrioAgentError, ValueError),
    testing.TaskLeakError: (TrioAgentError, AssertionError),
    stress.StressFailure: (TrioAgentError, AssertionError),
    stress.ScenarioError: (TrioAgentError, ValueError),
    acp.AcpError: (TrioAgentError, Exception),
    acp.ConnectionClosedError: (acp.AcpError, ConnectionError),
    acp.RpcError: (acp.AcpError, Exception),
    compaction.CompactionError: (TrioAgentError, Exception),
    mcp.McpError: (TrioAgentError, Exception),
    mcp.McpConfigError: (mcp.McpError, ValueError),
    mcp.McpServerUnavailableError: (mcp.McpError, RuntimeError),
    mcp.McpToolNameError: (mcp.McpError, ValueError),
    subagents.SubagentError: (TrioAgentError, Exception),
    subagents.SubagentConfigError: (subagents.SubagentError, ValueError),
    subagents.SubagentDepthError: (subagents.SubagentError, RuntimeError),
    subagents.SubagentSchemaError: (subagents.SubagentError, ValueError),
    subagents.UnknownHandleError: (subagents.SubagentError, LookupError),
    subagents.UnknownSubagentError: (subagents.SubagentError, LookupError),
}

#: The service name of every public service: ``ctx.<name>``, and the key config files use.
SERVICE_NAMES: dict[type[runtime.Service], str] = {
    agent.AgentRegistry: "agents",
    compaction.Compaction: "compaction",
    persistence.PersistenceService: "session_persistence",
    persistence.PostgresPersistence: "session_persistence",
    subagents.SubagentService: "subagents",
    usage.UsageService: "usage",
    llm.LlmService: "llm",
    loop.AgentLoop: "agent_loop",
    persistence.Inbox: "inbox",
    persistence.JsonlPersistence: "session_persistence",
    persistence.MemoryPersistence: "session_persistence",
    persistence.SqlitePersistence: "session_persistence",
    prompt.SystemPrompt: "system_prompt",
    redaction.Redactor: "redactor",
    session.SessionStore: "sessions",
    tools.ToolRegistry: "tools",
}


def public_modules() -> list[str]:
    """trio_agent and every module under it whose dotted path has no ``_`` component."""
    found = ["trio_agent"]
    for info in pkgutil.walk_packages(trio_agent.__path__, "trio_agent."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            found.append(info.name)
    return sorted(found)


def exported(module: str) -> dict[str, object]:
    mod = importlib.import_module(module)
    return {name: getattr(mod, name) for name in mod.__all__}


def exported_classes() -> dict[type, str]:
    """Every public class, by where it is first exported."""
    classes: dict[type, str] = {}
    for module in public_modules():
        for name, obj in exported(module).items():
            if inspect.isclass(obj):
                classes.setdefault(obj, f"{module}.{name}")
    return classes


def is_final(obj: object) -> bool:
    return getattr(obj, "__final__", False) is True


def should_be_final(cls: type) -> bool:
    """The finality rule (module docstring): does ``cls`` hold mutable state or identity?"""
    if issubclass(cls, BaseException | enum.Enum) or cls in EXTENSION_POINTS:
        return False
    if getattr(cls, "_is_protocol", False) or not cls.__module__.startswith("trio_agent"):
        return False
    return not (attrs.has(cls) and _is_frozen(cls))


def _is_frozen(cls: type) -> bool:
    # attrs has no public "is frozen": a frozen class refuses every attribute write.
    try:
        probe: typing.Any = object.__new__(cls)
        probe._frozen_probe = None
    except attrs.exceptions.FrozenInstanceError:
        return True
    except AttributeError:  # slotted and not frozen
        return False
    return False


def test_the_table_covers_every_public_module() -> None:
    assert sorted(PUBLIC) == public_modules()


@pytest.mark.parametrize("module", public_modules())
def test_all_is_pinned(module: str) -> None:
    mod = importlib.import_module(module)
    assert list(mod.__all__) == PUBLIC[module].all


@pytest.mark.parametrize("module", public_modules())
def test_every_exported_name_exists_and_is_documented(module: str) -> None:
    mod = importlib.import_module(module)
    for name in mod.__all__:
        assert hasattr(mod, name), f"{module}.__all__ names {name!r}, which the module lacks"
        obj = getattr(mod, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__doc__, f"{module}.{name} has no docstring"
            # A package's __init__ only re-exports; its code lives in underscore modules.
            if hasattr(mod, "__path__") and obj.__module__.startswith("trio_agent"):
                assert obj.__module__ != module, f"{module}.{name} is defined in __init__"


@pytest.mark.parametrize("module", public_modules())
def test_final_is_pinned(module: str) -> None:
    final = {
        name for name, obj in exported(module).items() if inspect.isclass(obj) and is_final(obj)
    }
    assert final == PUBLIC[module].final


def test_stateful_classes_are_final() -> None:
    missing = {
        where
        for cls, where in exported_classes().items()
        if should_be_final(cls) and not is_final(cls) and cls not in NOT_YET_FINAL
    }
    assert missing == set(), "stateful public classes must be @final (see the module docstring)"
    assert not any(is_final(cls) for cls in NOT_YET_FINAL), "now final: drop it from NOT_YET_FINAL"


def test_a_name_exported_twice_is_one_object() -> None:
    first: dict[str, tuple[str, object]] = {}
    for module in public_modules():
        for name, obj in exported(module).items():
            where, seen = first.setdefault(name, (module, obj))
            if seen is not obj:
                assert name in DISTINCT_SAME_NAMES, f"{module}.{name} is not {where}.{name}"


def test_the_error_tree() -> None:
    errors = {cls for cls in exported_classes() if issubclass(cls, BaseException)}
    assert errors == set(ERROR_TREE), "place every public error in ERROR_TREE"
    for cls, (parent, builtin_base) in ERROR_TREE.items():
        assert issubclass(cls, parent) and issubclass(cls, builtin_base), cls
        assert issubclass(cls, TrioAgentError), cls
    # A built-in tool's error says how its call ends.
    assert builtin.BuiltinToolError.code == tools.TOOL_ERROR
    assert builtin.WorkspacePathError.code == tools.DENIED
    assert builtin.ShellPolicyError.code == tools.DENIED


def test_service_names_are_pinned() -> None:
    services = {
        cls for cls in exported_classes() if issubclass(cls, runtime.Service) and cls.service_name
    }
    assert services == set(SERVICE_NAMES)
    for cls, name in SERVICE_NAMES.items():
        assert cls.service_name == name, cls


def test_result_codes_are_their_own_names() -> None:
    for code in (
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "DENIED",
        "INVALID_ARGS",
        "TOOL_ERROR",
        "TOOL_OUTCOME_UNKNOWN",
        "TOOL_TIMEOUT",
        "UNKNOWN_TOOL",
    ):
        assert getattr(tools, code) == code


def test_implementations_satisfy_their_protocols() -> None:
    assert isinstance(llm.ScriptedAdapter(), llm.LlmAdapter)
    assert isinstance(llm.OfflineAdapter(), llm.LlmAdapter)
    assert typing.get_type_hints(llm.LlmAdapter.stream)
    for cls in (
        persistence.JsonlPersistence,
        persistence.SqlitePersistence,
        persistence.MemoryPersistence,
    ):
        for method in ("load", "list", "exists"):
            assert inspect.iscoroutinefunction(getattr(cls, method)), (cls, method)
        assert hasattr(cls, "Config")


def test_version() -> None:
    assert trio_agent.__version__ == "0.1.0"
