"""The public surface of trio_agent.session."""

from __future__ import annotations

import inspect

import trio

import trio_agent.session as session_pkg
from trio_agent.errors import TrioAgentError
from trio_agent.session import (
    EventLog,
    EventPayloadError,
    ForkBoundaryError,
    InvalidSeedError,
    JsonValueError,
    MessageHistory,
    Session,
    SessionDetachedError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    SessionReentrancyError,
    SessionStore,
    SessionSubscription,
    SubscriberLaggedError,
)

EXPECTED = [
    "EVENT_PAYLOADS",
    "INTERRUPTED_NOT_STARTED_TEXT",
    "INTERRUPTED_OUTCOME_UNKNOWN_TEXT",
    "SESSION_FORMAT_VERSION",
    "AssistantChunk",
    "AssistantMessageEvent",
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
]


def test_all_is_pinned() -> None:
    assert session_pkg.__all__ == EXPECTED
    for name in EXPECTED:
        assert hasattr(session_pkg, name)
        obj = getattr(session_pkg, name)
        if isinstance(obj, type) or inspect.isfunction(obj):
            assert obj.__module__.startswith("trio_agent.session._"), name
            assert obj.__doc__, name


def test_stateful_classes_are_final() -> None:
    for cls in (Session, SessionStore, SessionSubscription, EventLog, MessageHistory):
        assert getattr(cls, "__final__", False), cls


def test_error_tree() -> None:
    assert issubclass(SessionError, TrioAgentError)
    builtin = {
        JsonValueError: ValueError,
        EventPayloadError: ValueError,
        InvalidSeedError: ValueError,
        SessionExistsError: ValueError,
        SessionNotFoundError: LookupError,
        ForkBoundaryError: ValueError,
        SessionReentrancyError: RuntimeError,
        SessionDetachedError: RuntimeError,
        SubscriberLaggedError: trio.BrokenResourceError,
    }
    for cls, base in builtin.items():
        assert issubclass(cls, SessionError) and issubclass(cls, base), cls
        assert cls.__doc__


def test_store_is_the_sessions_service() -> None:
    assert SessionStore.service_name == "sessions"
