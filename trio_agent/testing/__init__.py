"""Test helpers for code built on trio-agent: a scripted model, a complete test harness, a
fake OpenAI server, a persistence backend kit and a task-leak check.

Use :class:`ScriptedAdapter` with the response builders (:func:`text`, :func:`tool_call`,
:func:`max_tokens`, :func:`error`, :func:`hang` ...) to drive an agent without a network,
:func:`open_fake_openai_server` to test HTTP-level behaviour against real sockets, and
:func:`assert_no_leaked_tasks` to prove that closing what you built leaves no task running,
and :func:`count_schedule_points` to pin how often a hot path yields to the scheduler.

For persistence: :class:`FaultyBackend` wraps any backend and fails, holds or loses the sync of
chosen writes; :class:`BackendConformance` (or :func:`check_backend`) is the test suite every
backend passes; :func:`append_tool_turn` and :func:`append_every_event_type` build logs to store.
"""

from ..llm._scripted import ScriptedAdapter as ScriptedAdapter
from ..llm._scripted import ScriptedProvider as ScriptedProvider
from ..llm._scripted import ScriptedResponse as ScriptedResponse
from ..llm._scripted import ScriptItem as ScriptItem
from ..llm._scripted import error as error
from ..llm._scripted import hang as hang
from ..llm._scripted import max_tokens as max_tokens
from ..llm._scripted import raises as raises
from ..llm._scripted import raw as raw
from ..llm._scripted import reasoning as reasoning
from ..llm._scripted import text as text
from ..llm._scripted import tool_call as tool_call
from ._check_backend import BackendConformance as BackendConformance
from ._check_backend import check_backend as check_backend
from ._faulty import BackendCall as BackendCall
from ._faulty import Fault as Fault
from ._faulty import FaultyBackend as FaultyBackend
from ._harness import TestHarness as TestHarness
from ._harness import event_types as event_types
from ._harness import open_test_harness as open_test_harness
from ._harness import turn_end_reasons as turn_end_reasons
from ._leaks import TaskLeakCheck as TaskLeakCheck
from ._leaks import TaskLeakError as TaskLeakError
from ._leaks import assert_no_leaked_tasks as assert_no_leaked_tasks
from ._logs import append_every_event_type as append_every_event_type
from ._logs import append_tool_turn as append_tool_turn
from ._openai_server import DROP as DROP
from ._openai_server import ECHO_MODES as ECHO_MODES
from ._openai_server import HANG as HANG
from ._openai_server import FakeOpenAiServer as FakeOpenAiServer
from ._openai_server import FakeResponse as FakeResponse
from ._openai_server import HangResponse as HangResponse
from ._openai_server import JsonResponse as JsonResponse
from ._openai_server import Pause as Pause
from ._openai_server import RecordedRequest as RecordedRequest
from ._openai_server import SseResponse as SseResponse
from ._openai_server import completion_chunk as completion_chunk
from ._openai_server import echo_key_response as echo_key_response
from ._openai_server import error_response as error_response
from ._openai_server import hang_response as hang_response
from ._openai_server import json_response as json_response
from ._openai_server import open_fake_openai_server as open_fake_openai_server
from ._openai_server import sse_comment as sse_comment
from ._openai_server import sse_done as sse_done
from ._openai_server import sse_event as sse_event
from ._openai_server import sse_finish as sse_finish
from ._openai_server import sse_reasoning as sse_reasoning
from ._openai_server import sse_reply as sse_reply
from ._openai_server import sse_response as sse_response
from ._openai_server import sse_text as sse_text
from ._openai_server import sse_tool_call as sse_tool_call
from ._openai_server import sse_usage as sse_usage
from ._yields import ScheduleCount as ScheduleCount
from ._yields import count_schedule_points as count_schedule_points

__all__ = [
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
]
