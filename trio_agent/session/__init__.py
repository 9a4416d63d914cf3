"""The session layer: the append-only event log every model-visible fact lives in.

* :class:`SessionEvent` - one log entry; :data:`EVENT_PAYLOADS` maps each core event type to its
  typed payload class (:class:`TurnStart`, :class:`AssistantMessageEvent` ...).
* :class:`Session` - ``append`` (sync, validated lossless JSON), ``events``, ``derive_messages``
  (incremental, O(1) per call; honours ``compaction/summary`` and ``compaction/prune``),
  ``subscribe`` (a cursor-backed receive channel for UIs).
* :class:`SessionStore` - the ``ctx.sessions`` service: ``create``, ``get``, ``list``, ``fork``,
  ``flush``, ``detach`` and the ``session/*`` events.
* :func:`repair_closers` - the events that close a turn a crash left open, with a result code
  per unfinished call that says what may have happened (``INTERRUPTED``, or
  ``TOOL_OUTCOME_UNKNOWN`` for a started call of a tool with effects).
"""

from ._errors import CompactionRangeError as CompactionRangeError
from ._errors import EventPayloadError as EventPayloadError
from ._errors import ForkBoundaryError as ForkBoundaryError
from ._errors import InvalidSeedError as InvalidSeedError
from ._errors import JsonValueError as JsonValueError
from ._errors import SessionDetachedError as SessionDetachedError
from ._errors import SessionError as SessionError
from ._errors import SessionExistsError as SessionExistsError
from ._errors import SessionNotFoundError as SessionNotFoundError
from ._errors import SessionReentrancyError as SessionReentrancyError
from ._errors import SubscriberLaggedError as SubscriberLaggedError
from ._events import EVENT_PAYLOADS as EVENT_PAYLOADS
from ._events import SESSION_FORMAT_VERSION as SESSION_FORMAT_VERSION
from ._events import ApprovalDecisionEvent as ApprovalDecisionEvent
from ._events import ApprovalRequestEvent as ApprovalRequestEvent
from ._events import AssistantChunk as AssistantChunk
from ._events import AssistantMessageEvent as AssistantMessageEvent
from ._events import CompactionPrune as CompactionPrune
from ._events import CompactionSummary as CompactionSummary
from ._events import ContextMessageEvent as ContextMessageEvent
from ._events import LlmRetry as LlmRetry
from ._events import PromptBlocked as PromptBlocked
from ._events import RequestHeader as RequestHeader
from ._events import SessionEndSeed as SessionEndSeed
from ._events import SessionEvent as SessionEvent
from ._events import SessionHeader as SessionHeader
from ._events import SteeringMessageEvent as SteeringMessageEvent
from ._events import StepEnd as StepEnd
from ._events import StepStart as StepStart
from ._events import ToolCallEvent as ToolCallEvent
from ._events import ToolResultEvent as ToolResultEvent
from ._events import TurnEnd as TurnEnd
from ._events import TurnEndReason as TurnEndReason
from ._events import TurnStart as TurnStart
from ._events import UserMessageEvent as UserMessageEvent
from ._json import snapshot_json as snapshot_json
from ._projection import COMPACTION_SOURCE as COMPACTION_SOURCE
from ._projection import MessageHistory as MessageHistory
from ._projection import message_of as message_of
from ._projection import project_messages as project_messages
from ._projection import would_prune as would_prune
from ._repair import INTERRUPTED_NOT_STARTED_TEXT as INTERRUPTED_NOT_STARTED_TEXT
from ._repair import INTERRUPTED_OUTCOME_UNKNOWN_TEXT as INTERRUPTED_OUTCOME_UNKNOWN_TEXT
from ._repair import INTERRUPTED_READ_ONLY_TEXT as INTERRUPTED_READ_ONLY_TEXT
from ._repair import repair_closers as repair_closers
from ._repair import repair_events as repair_events
from ._session import EventLog as EventLog
from ._session import Session as Session
from ._session import SessionAppended as SessionAppended
from ._session import SessionSubscription as SessionSubscription
from ._store import SessionCreated as SessionCreated
from ._store import SessionDisposed as SessionDisposed
from ._store import SessionFlush as SessionFlush
from ._store import SessionStore as SessionStore

__all__ = [
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
]
