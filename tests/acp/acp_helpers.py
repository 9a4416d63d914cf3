"""Helpers for the ACP tests: configs, the recording ACP client, session logs, processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

from acp import spawn_agent_process
from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

T = TypeVar("T")

#: The ``trio-agent`` command of the venv running the tests.
TRIO_AGENT = str(Path(sys.executable).with_name("trio-agent"))
#: The scripted server process (``acp_child.py SCENARIO ...``).
CHILD = str(Path(__file__).with_name("acp_child.py"))
#: The generous guard around every client conversation (a hang fails, it never passes).
GUARD = 60.0


def write_config(
    directory: Path,
    *,
    provider: str,
    sessions: Path,
    shell: str = "deny",
    delay: float = 0,
    allow: tuple[str, ...] = (),
) -> Path:
    """A config file with one provider (``offline`` or ``scripted``) and jsonl sessions;
    ``allow`` names the tools ``tools.approval`` allows without asking."""
    path = directory / f"{provider}.yml"
    path.write_text(
        "llm:\n"
        f"  providers: [{{name: {provider}, type: {provider}, delay: {delay}}}]\n"
        f"persistence: {{type: jsonl, path: {json.dumps(str(sessions))}}}\n"
        f"tools: {{shell: {shell}, approval: {{allow: {json.dumps(list(allow))}}}}}\n"
    )
    return path


@contextlib.asynccontextmanager
async def spawn(
    client: Any, *command: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Any, asyncio.subprocess.Process]]:
    """The official client's ``spawn_agent_process`` (trimmed environment, stderr piped and
    never read while the server runs). Afterwards stderr is drained, so its pipe is closed,
    and kept for :func:`stderr_text`. ``PYTHONPATH`` is passed on when set, so the server runs
    the code under test (a worktree) rather than what the venv's editable install points at."""
    env = dict(env or {})
    if "PYTHONPATH" in os.environ:
        env.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
    async with spawn_agent_process(client, *command, env=env) as (conn, process):
        yield conn, process
    assert process.stderr is not None
    process.stderr_text = (await process.stderr.read()).decode(errors="replace")  # type: ignore[attr-defined]


def stderr_text(process: asyncio.subprocess.Process) -> str:
    """What :func:`spawn` drained from the process's stderr once it ended."""
    text = vars(process)["stderr_text"]
    assert isinstance(text, str)
    return text


def run_client(conversation: Awaitable[T]) -> T:
    """Run an asyncio conversation with the official client under the guard."""

    async def guarded() -> T:
        return await asyncio.wait_for(conversation, GUARD)

    return asyncio.run(guarded())


class RecordingClient:
    """An ACP client that records every ``session/update`` and answers permission requests
    from a list of option ids (``None``: wait until :meth:`release` and answer cancelled)."""

    def __init__(self, answers: list[str | None] | None = None) -> None:
        self.updates: list[dict[str, Any]] = []
        self.permission_requests: list[dict[str, Any]] = []
        self._answers = list(answers or [])
        self._events: dict[str, asyncio.Event] = {}
        self._released = asyncio.Event()

    def seen(self, name: str) -> asyncio.Event:
        """Set when an update of kind ``name`` (or ``permission``) arrives."""
        return self._events.setdefault(name, asyncio.Event())

    def release(self) -> None:
        """Let a withheld permission request answer ``cancelled``."""
        self._released.set()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        data = update.model_dump(by_alias=True, exclude_none=True, mode="json")
        self.updates.append(data)
        self.seen(data["sessionUpdate"]).set()
        if data["sessionUpdate"] == "tool_call_update" and data.get("status") == "in_progress":
            self.seen("in_progress").set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permission_requests.append(
            {
                "sessionId": session_id,
                "toolCall": tool_call.model_dump(by_alias=True, exclude_none=True, mode="json"),
                "options": [o.model_dump(by_alias=True, mode="json") for o in options],
            }
        )
        self.seen("permission").set()
        answer = self._answers.pop(0)
        if answer is None:
            await self._released.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer)
        )

    def take(self) -> list[dict[str, Any]]:
        """The updates so far, and forget them."""
        taken, self.updates = self.updates, []
        return taken


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    """The ``sessionUpdate`` kinds in order, runs of the same chunk kind collapsed."""
    out: list[str] = []
    for update in updates:
        kind = update["sessionUpdate"]
        if not (out and out[-1] == kind and kind.endswith("_chunk")):
            out.append(kind)
    return out


def joined(updates: list[dict[str, Any]], kind: str) -> str:
    """The text of every ``kind`` chunk, concatenated."""
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def read_log(sessions: Path, session_id: str) -> list[dict[str, Any]]:
    """The events of a jsonl session log (without the header)."""
    lines = (sessions / f"{session_id}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[1:]]


def of_type(events: list[dict[str, Any]], event_type: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["type"] == event_type]


def processes_mentioning(marker: str) -> list[int]:
    """Pids of live processes whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found
