"""The CLI's approval services (#14): ``run`` denies what would be asked unless ``--yes`` /
``--allow``; ``chat`` asks the person inline. See docs/approvals.md and docs/cli.md."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import TextIO

import trio

from ..tools import ApprovalRequest, Approved, Denied
from ._output import escape_controls

__all__ = ["ChatApprovals", "RunApprovals", "allow_names"]


def allow_names(values: Iterable[str] | None) -> frozenset[str]:
    """The tool names of the repeatable ``--allow TOOL[,TOOL]`` option."""
    return frozenset(
        name.strip() for value in values or () for name in value.split(",") if name.strip()
    )


class RunApprovals:
    """``run``'s approval service: approve everything (``--yes``) or the named tools
    (``--allow``); deny the rest, one ``trio-agent: denied TOOL (CALL_ID): REASON`` line each on
    ``err``."""

    def __init__(self, err: TextIO, *, allow_all: bool, allow: frozenset[str]) -> None:
        self.err = err
        self.allow_all = allow_all
        self.allow = allow
        #: ``(tool, call id)`` of every denied call, in order.
        self.denied: list[tuple[str, str]] = []

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        """Approve under ``--yes`` / ``--allow``, else deny and say so on ``err``."""
        if self.allow_all or request.tool in self.allow:
            return Approved()
        reason = (
            f'tool "{request.tool}" needs approval and trio-agent run does not ask; '
            f"allow it with --yes or --allow {request.tool}"
        )
        call_id = printable(request.call_id)
        self.denied.append((request.tool, call_id))
        tool = printable(request.tool)
        self.err.write(f"trio-agent: {asker(request)}denied {tool} ({call_id}): {reason}\n")
        self.err.flush()
        return Denied(reason)


#: Argument values longer than this are shortened in the question.
_VALUE_LIMIT = 80


def printable(text: str) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``): the model's text
    must not move the cursor or recolour the terminal to disguise what is being asked. Line
    breaks are escaped, not collapsed (unlike :func:`~._output.clean`): the person sees exactly
    what would run."""
    return escape_controls(text)


#: A sub-agent's id: ``<parent agent id>.<definition name>-<n>`` (docs/subagents.md).
_CHILD_ID = re.compile(r".+\.[A-Za-z0-9][A-Za-z0-9_-]{0,63}-[0-9]+")


def asker(request: ApprovalRequest) -> str:
    """``"[child AGENT-ID] "`` when a sub-agent makes the call (its id has the shape
    ``<parent id>.<name>-<n>``), else ``""``: the person is asked once, by the CLI agent's
    service, for its children's calls too, and must see who asks."""
    agent = request.agent
    if agent is None or _CHILD_ID.fullmatch(agent) is None:
        return ""
    return f"[child {printable(agent)}] "


def _shorten(text: str, limit: int = _VALUE_LIMIT) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_arguments(arguments: str) -> list[str]:
    """``key: value`` lines of a call's JSON arguments, long values shortened (the model's
    text is untrusted: it is shown, never interpreted)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return [_shorten(arguments)]
    if not isinstance(parsed, dict):
        return [_shorten(arguments)]
    return [
        f"{_shorten(key)}: {_shorten(value if isinstance(value, str) else json.dumps(value))}"
        for key, value in parsed.items()
    ]


_QUESTION = "allow? [y]es once / [n]o / [a]lways for this tool in this session: "


class ChatApprovals:
    """``chat``'s approval service: print the question on ``out`` and wait for the person's
    answer, which the chat loop hands over from its one input path (:meth:`answer`).

    ``y`` approves once, ``n`` denies, ``a`` approves this tool for the session. A cancelled
    turn (Ctrl-C at the question) cancels the pending question.
    """

    def __init__(self, out: TextIO, before: Callable[[], None] = lambda: None) -> None:
        self.out = out
        self.before = before
        self._pending: trio.MemorySendChannel[str] | None = None
        #: Set for piped input, where the chat loop waits out each turn: the question reads
        #: its answer itself (end of input denies).
        self.read: Callable[[], Awaitable[str]] | None = None

    @property
    def asking(self) -> bool:
        """A question waits for its answer."""
        return self._pending is not None

    def answer(self, line: str) -> bool:
        """Give ``line`` to the pending question; False (nothing taken) when none waits."""
        if self._pending is None:
            return False
        self._pending.send_nowait(line)
        return True

    async def request(self, request: ApprovalRequest) -> Approved | Denied:
        """Ask the person; return their answer."""
        self.before()
        who = asker(request)
        lines = [f"approval: {who}{printable(request.tool)} ({printable(request.call_id)})"]
        lines += [f"  {line}" for line in describe_arguments(request.arguments)]
        if request.reason:
            lines.append(f"  reason: {_shorten(request.reason)}")
        self.out.write("\n".join(lines) + "\n")
        send, receive = trio.open_memory_channel[str](16)
        self._pending = send
        try:
            while True:
                self.out.write(_QUESTION)
                self.out.flush()
                if self.read is not None:
                    line = await self.read()
                    if not line:
                        return Denied("no answer: end of input")
                    choice = line.strip().lower()
                else:
                    choice = (await receive.receive()).strip().lower()
                if choice in ("y", "yes"):
                    return Approved()
                if choice in ("a", "always"):
                    return Approved(remember="session")
                if choice in ("n", "no"):
                    return Denied(f'the user did not allow tool "{request.tool}"')
        finally:
            self._pending = None
            send.close()
            receive.close()
