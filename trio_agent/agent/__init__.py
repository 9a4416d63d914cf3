"""The agent interface: the ``Agent`` protocol, ``ctx.agents`` and the ``agent/*`` events.

This package has no loop dependency: plugins program against it, and the loop
(``trio_agent.loop``) is one swappable implementation.
"""

from ._errors import AgentClosedError as AgentClosedError
from ._errors import AgentError as AgentError
from ._errors import AgentExistsError as AgentExistsError
from ._errors import NoAgentFactoryError as NoAgentFactoryError
from ._errors import PersistenceUnavailableError as PersistenceUnavailableError
from ._events import AgentCreated as AgentCreated
from ._events import AgentDisposed as AgentDisposed
from ._events import AgentFailed as AgentFailed
from ._events import Allow as Allow
from ._events import Block as Block
from ._events import ContinuationDecision as ContinuationDecision
from ._events import ContinuationStop as ContinuationStop
from ._events import MessageQueued as MessageQueued
from ._events import PreStep as PreStep
from ._events import PromptDecision as PromptDecision
from ._events import PromptSubmit as PromptSubmit
from ._events import RequestConfig as RequestConfig
from ._events import RequestFailed as RequestFailed
from ._events import Retry as Retry
from ._events import SessionPrefix as SessionPrefix
from ._events import SessionStart as SessionStart
from ._events import StatusChanged as StatusChanged
from ._events import SteeringInjected as SteeringInjected
from ._events import StepEnded as StepEnded
from ._events import StepResult as StepResult
from ._events import StepStarted as StepStarted
from ._events import StreamChunkReceived as StreamChunkReceived
from ._events import TurnContinuation as TurnContinuation
from ._events import TurnEnded as TurnEnded
from ._events import TurnEndReason as TurnEndReason
from ._events import TurnStarted as TurnStarted
from ._events import TurnStop as TurnStop
from ._registry import AgentFactory as AgentFactory
from ._registry import AgentHandle as AgentHandle
from ._registry import AgentRegistry as AgentRegistry
from ._registry import AgentSetup as AgentSetup
from ._retry import RetryPlugin as RetryPlugin
from ._types import Agent as Agent
from ._types import AgentOptions as AgentOptions
from ._types import AgentStatus as AgentStatus
from ._types import MessageContent as MessageContent
from ._types import to_user_message as to_user_message

__all__ = [
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
]
