"""A cancellation stress kit for plugin authors: every schedule point, every invariant, and a
replayable minimal failure.

* :func:`explore_cancellation` runs a :class:`Scenario` once to count its schedule points, then
  once per point, cancelling the turn (or closing the agent, or unloading the scenario's
  plugins) exactly there, and checks every run against the invariants.
* :class:`AgentStateMachine` is a Hypothesis state machine over an agent and your plugins
  (send, steer, inject, cancel, close, the clock, random model responses).
* The ``check_*`` functions are the invariants, each usable on its own.
* A failure prints a short snippet that reproduces it with :func:`replay`.
* The pytest plugin (entry point ``pytest11``) adds the ``stress`` fixture.

Every name is imported on first use, so importing this package (as the pytest plugin does in
every session) costs nothing, and Hypothesis loads only with :class:`AgentStateMachine` or a
strategy. See ``docs/testing.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._errors import ScenarioError as ScenarioError
    from ._errors import StressFailure as StressFailure
    from ._explore import ExplorationReport as ExplorationReport
    from ._explore import Failure as Failure
    from ._explore import explore_cancellation as explore_cancellation
    from ._invariants import UserCheck as UserCheck
    from ._invariants import check_cancel_drops_queued_prompts as check_cancel_drops_queued_prompts
    from ._invariants import check_cancel_ends_turn as check_cancel_ends_turn
    from ._invariants import check_cancel_not_swallowed as check_cancel_not_swallowed
    from ._invariants import check_no_child_process_left as check_no_child_process_left
    from ._invariants import check_no_hang as check_no_hang
    from ._invariants import check_no_scope_misnesting as check_no_scope_misnesting
    from ._invariants import check_no_task_left as check_no_task_left
    from ._invariants import check_no_unhandled_error as check_no_unhandled_error
    from ._invariants import check_prompts_logged_once as check_prompts_logged_once
    from ._invariants import check_run as check_run
    from ._invariants import check_seq_contiguous as check_seq_contiguous
    from ._invariants import check_session as check_session
    from ._invariants import check_status_transitions as check_status_transitions
    from ._invariants import check_steps_balanced as check_steps_balanced
    from ._invariants import check_streams_closed as check_streams_closed
    from ._invariants import check_tool_calls_answered as check_tool_calls_answered
    from ._invariants import check_turns_closed as check_turns_closed
    from ._machine import AgentStateMachine as AgentStateMachine
    from ._ops import Advance as Advance
    from ._ops import Cancel as Cancel
    from ._ops import Close as Close
    from ._ops import Inject as Inject
    from ._ops import MachineConfig as MachineConfig
    from ._ops import NewAgent as NewAgent
    from ._ops import Op as Op
    from ._ops import Respond as Respond
    from ._ops import Send as Send
    from ._ops import Settle as Settle
    from ._ops import Steer as Steer
    from ._ops import WaitIdle as WaitIdle
    from ._records import Action as Action
    from ._records import ActionRecord as ActionRecord
    from ._records import AgentAtAction as AgentAtAction
    from ._records import AgentTrace as AgentTrace
    from ._records import LoggedError as LoggedError
    from ._records import QueuedPrompt as QueuedPrompt
    from ._records import RunRecord as RunRecord
    from ._records import Violation as Violation
    from ._replay import replay as replay
    from ._responses import CallTools as CallTools
    from ._responses import Fail as Fail
    from ._responses import Hang as Hang
    from ._responses import MaxTokens as MaxTokens
    from ._responses import QueueModel as QueueModel
    from ._responses import Reply as Reply
    from ._responses import ResponseSpec as ResponseSpec
    from ._responses import ToolCallSpec as ToolCallSpec
    from ._scenario import Scenario as Scenario
    from ._scenario import ScenarioFn as ScenarioFn
    from ._scenario import scenario as scenario
    from ._scheduling import TESTED_TRIO as TESTED_TRIO
    from ._scheduling import seeded_scheduler as seeded_scheduler
    from ._strategies import json_values as json_values
    from ._strategies import model_responses as model_responses
    from ._strategies import tool_arguments as tool_arguments
    from ._world import HarnessSpec as HarnessSpec
    from ._world import PerRun as PerRun
    from ._world import PluginSpec as PluginSpec
    from ._world import World as World
    from ._world import per_run as per_run

#: Every public name and the module that defines it (imported on first access).
_LAZY = {
    "AgentStateMachine": "._machine",
    "json_values": "._strategies",
    "model_responses": "._strategies",
    "tool_arguments": "._strategies",
    "Action": "._records",
    "ActionRecord": "._records",
    "Advance": "._ops",
    "AgentAtAction": "._records",
    "AgentTrace": "._records",
    "CallTools": "._responses",
    "Cancel": "._ops",
    "Close": "._ops",
    "ExplorationReport": "._explore",
    "Fail": "._responses",
    "Failure": "._explore",
    "Hang": "._responses",
    "HarnessSpec": "._world",
    "Inject": "._ops",
    "LoggedError": "._records",
    "MachineConfig": "._ops",
    "MaxTokens": "._responses",
    "NewAgent": "._ops",
    "Op": "._ops",
    "PerRun": "._world",
    "PluginSpec": "._world",
    "QueueModel": "._responses",
    "QueuedPrompt": "._records",
    "Reply": "._responses",
    "Respond": "._ops",
    "ResponseSpec": "._responses",
    "RunRecord": "._records",
    "Scenario": "._scenario",
    "ScenarioError": "._errors",
    "ScenarioFn": "._scenario",
    "Send": "._ops",
    "Settle": "._ops",
    "Steer": "._ops",
    "StressFailure": "._errors",
    "TESTED_TRIO": "._scheduling",
    "ToolCallSpec": "._responses",
    "UserCheck": "._invariants",
    "Violation": "._records",
    "WaitIdle": "._ops",
    "World": "._world",
    "check_cancel_drops_queued_prompts": "._invariants",
    "check_cancel_ends_turn": "._invariants",
    "check_cancel_not_swallowed": "._invariants",
    "check_no_child_process_left": "._invariants",
    "check_no_hang": "._invariants",
    "check_no_scope_misnesting": "._invariants",
    "check_no_task_left": "._invariants",
    "check_no_unhandled_error": "._invariants",
    "check_prompts_logged_once": "._invariants",
    "check_run": "._invariants",
    "check_seq_contiguous": "._invariants",
    "check_session": "._invariants",
    "check_status_transitions": "._invariants",
    "check_steps_balanced": "._invariants",
    "check_streams_closed": "._invariants",
    "check_tool_calls_answered": "._invariants",
    "check_turns_closed": "._invariants",
    "explore_cancellation": "._explore",
    "per_run": "._world",
    "replay": "._replay",
    "scenario": "._scenario",
    "seeded_scheduler": "._scheduling",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
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
]
