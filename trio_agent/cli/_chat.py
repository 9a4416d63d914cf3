"""``trio-agent chat``: the interactive session.

Input has three shapes (docs/design.md, "#23 chat"): on a terminal the idle prompt is GNU
readline in a worker thread (line editing, persistent history) and the lines typed while a turn
runs are read in cooked mode with ``trio.lowlevel.wait_readable``; with piped input every line
is read by :class:`_LineReader` and runs one turn.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import signal
import sys
import termios
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

import attrs
import trio

from ..agent import Agent, AgentHandle, RequestConfig, TurnEnded
from ..compaction import Compaction, CompactionError, CompactionResult, Strategy
from ..config import HarnessConfig, mount_config
from ..errors import TrioAgentError
from ..llm import LlmCallConfig
from ..persistence import SESSION_PERSISTENCE
from ..runtime import Context, open_runtime
from ..session import (
    AssistantMessageEvent,
    PromptBlocked,
    Session,
    TurnEnd,
    TurnStart,
    UserMessageEvent,
)
from ..tools import APPROVAL
from ._agents import STOP_SIGNALS, check_id_args, load_cli_config, open_agent, report_servers_down
from ._approval import ChatApprovals
from ._output import Printer, clean, escape_controls, failure_of, last_turn_end, shorten

#: How many turns ``--resume`` / ``--continue`` recap, and how long each text may be.
_RECAP_TURNS = 3
_RECAP_WIDTH = 100
#: How many sessions ``/sessions`` lists (the most recent last).
_SESSIONS_LISTED = 10
#: How many lines the history file keeps.
_HISTORY_LINES = 1000


async def chat_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``trio-agent chat``: read lines, send or steer them, until ``/exit``, Ctrl-D or a stop
    signal."""
    check_id_args(args)
    config, note = load_cli_config(args.config)
    printer = Printer(
        out,
        err,
        text="live",  # chat streams even to a pipe: it is read as it happens
        max_attempts=config.llm.retry.max_attempts if config.llm.retry else None,
    )
    if note:
        printer.note(f"trio-agent: {note}")
    interactive = _isatty(sys.stdin)
    editor = _Editor.open(sys.stdin, out, printer.note) if interactive else None
    try:
        async with open_runtime() as ctx:
            # The tools never read or write the history (a model could plant a line in it).
            fibers = await mount_config(
                ctx, config, protect_paths=_history_protected(), approval_mode="cli"
            )
            report_servers_down(fibers, err)
            approvals = ChatApprovals(out, printer.end_line)
            ctx.provide(APPROVAL.name, approvals)
            agent, handle = await open_agent(ctx, config, args)
            chat = _Chat(ctx, config, args, out, printer, approvals, interactive, editor)
            chat.attach(agent, handle)
            await chat.serve()
            if editor is not None:
                editor.restore()
            session_id = chat.agent.session.id
            if chat.handle is not None:
                await chat.handle.aclose()
            if chat.persisted:
                err.write(f"resume with: trio-agent chat --resume {session_id}\n")
    finally:
        if editor is not None:
            editor.restore()
    if chat.terminated:
        err.write(f"trio-agent: stopped by {signal.Signals(chat.terminated[0]).name}\n")
        return 128 + chat.terminated[0]
    return 0


class _Chat:
    """The prompt loop: one agent at a time (``/new`` replaces it), its listeners and state."""

    def __init__(
        self,
        ctx: Context,
        config: HarnessConfig,
        args: argparse.Namespace,
        out: TextIO,
        printer: Printer,
        approvals: ChatApprovals,
        interactive: bool,
        editor: _Editor | None,
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.args = args
        self.out = out
        self.printer = printer
        self.approvals = approvals
        self.interactive = interactive
        self.editor = editor
        self.persisted = config.persistence.type not in ("none", "memory")
        self.agent: Agent
        self.handle: AgentHandle | None = None
        #: A turn was sent and has not ended (``agent.status`` turns idle only after the
        #: ``agent/turn-end`` listeners ran).
        self.busy = False
        #: ``/model NAME``: the model every later request uses (None: the agent's own).
        self.model: str | None = None
        #: The scope of a read made while a turn runs: the turn's end cancels it, so the loop
        #: goes back to the idle prompt.
        self.busy_read: trio.CancelScope | None = None
        #: The scope of a running ``/compact``: Ctrl-C cancels it instead of quitting.
        self.compacting: trio.CancelScope | None = None
        self.terminated: list[int] = []
        fd = sys.stdin.fileno()
        self.tty = _TtyReader(fd) if interactive else None
        self.lines = None if interactive else _LineReader(fd)

    # --- the agent ----------------------------------------------------------------------

    def attach(self, agent: Agent, handle: AgentHandle | None) -> None:
        """Talk to ``agent`` from now on: print its stream, tool activity and turn ends."""
        self.agent, self.handle = agent, handle
        agent.ctx.on("agent/stream-chunk", self.printer.on_chunk)
        agent.ctx.on("session/event", self.printer.on_session_event)
        agent.ctx.on("agent/subagent", self.printer.on_subagent)
        agent.ctx.on("agent/turn-end", self.on_turn_end)
        # Outermost (prepend): the override holds whatever other listeners chose.
        agent.ctx.on("agent/request", self.on_request, prepend=True)

    def on_turn_end(self, event: TurnEnded) -> None:
        self.printer.end_line()
        self.busy = False
        failure = failure_of(last_turn_end(self.agent.session, 0))
        if failure is not None:
            self.printer.note(f"{failure[0]}: {failure[1]}")
        if self.busy_read is not None:
            self.busy_read.cancel()

    async def on_request(
        self, payload: RequestConfig, next_: Callable[[], Awaitable[LlmCallConfig]]
    ) -> LlmCallConfig:
        config = await next_()
        return config if self.model is None else attrs.evolve(config, model=self.model)

    @property
    def model_name(self) -> str:
        """The model the next request uses."""
        options = self.agent.options
        return (
            self.model
            or options.model
            or self.config.default_model(options.provider or self.config.default_provider_name)
        )

    # --- the loop -----------------------------------------------------------------------

    async def serve(self) -> None:
        """Read and handle lines until ``/exit``, end of input, Ctrl-C at the prompt or a stop
        signal; a running turn is waited out (Ctrl-D) or cancelled (the signals)."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.signals, nursery.cancel_scope)
            self.printer.note(
                f"session: {self.agent.session.id}  (type /help for commands, /exit to quit; "
                "Ctrl-C cancels a running turn)"
            )
            _recap(self.agent.session, self.printer.note)  # a resumed session's last turns
            if self.lines is not None:  # the loop waits out each turn: the question reads itself
                self.approvals.read = self.lines.readline
            while True:
                line = await self.read()
                if line is None:
                    continue  # the turn ended while we waited for steering: back to the prompt
                if line and self.approvals.answer(line):
                    continue  # the answer to a pending approval question
                if not line:
                    if self.busy:
                        self.printer.end_line()
                        self.printer.note("(exiting after this turn; Ctrl-C cancels it)")
                        # Nobody reads any more: a question of this turn is denied.
                        self.approvals.read = _end_of_input
                        self.approvals.answer("")
                    elif self.interactive:
                        self.out.write("\n")  # Ctrl-D left the cursor after the prompt
                    break
                if not await self.handle_line(line.strip()):
                    break
            await self.agent.wait_idle()
            nursery.cancel_scope.cancel()

    async def read(self) -> str | None:
        """The next line ("" at end of input); None when a running turn ended first."""
        if self.lines is not None:
            return await self.lines.readline()
        assert self.tty is not None
        if self.busy:
            with trio.CancelScope() as self.busy_read:
                if self.busy:  # the turn may have ended between the check and the scope
                    return await self.tty.readline()
            self.busy_read = None
            return None
        status = f"[{_short_id(self.agent.session.id)} · {escape_controls(self.model_name)}]\n"
        if self.editor is not None and not self.tty.pending():
            self.out.write(status)
            self.out.flush()
            return await self.editor.readline(_IDLE_PROMPT)
        # No editor, or a line (or Ctrl-D) typed before the prompt, still in cooked mode: read
        # it as typed (readline would turn a pending end of input into a NUL byte).
        self.out.write(status + _IDLE_PROMPT)
        self.out.flush()
        line = await self.tty.readline()
        if self.editor is not None:
            self.editor.remember(line)
        return line

    async def handle_line(self, text: str) -> bool:
        """Run one typed line: a command, steering or a prompt; False to quit."""
        if not text:
            if self.busy:  # Enter on an empty line while a turn runs: say what is going on
                if self.interactive:
                    self.printer.line_ended()
                self.printer.end_line()
                self.printer.note(_BUSY)
            return True
        if text.startswith("/") and not text.startswith("//"):
            name, _, rest = text.partition(" ")
            return await self.command(name, rest.strip())
        if text.startswith("//"):
            text = text[1:]
        if self.busy:
            if self.interactive:  # the terminal's echo of the line ended the streamed one
                self.printer.line_ended()
            else:
                self.printer.end_line()
            self.agent.steer(text)
            self.printer.note(f"(steering) {escape_controls(text)}")
            return True
        self.busy = True
        self.agent.send(text)
        if self.lines is not None:
            await self.agent.wait_idle()  # piped input: one turn per line
        return True

    async def command(self, name: str, rest: str) -> bool:
        """A slash command; False for ``/exit``."""
        note = self.printer.note
        if name in ("/exit", "/quit"):
            return False
        if name in ("/help", "/?"):
            note(_CHAT_HELP)
        elif name == "/cancel":
            if self.busy:
                self.agent.cancel("cancelled (/cancel)")
            else:
                note("/cancel: no turn is running")
        elif name == "/model":
            if not rest:
                note(f"model: {escape_controls(self.model_name)}")
            elif any(c.isspace() or not c.isprintable() for c in rest):
                note("/model: a model name has no spaces or control characters")
            else:
                self.model = rest
                when = "from the next request on" if self.busy else "from the next turn on"
                note(f"model: {rest} ({when})")
        elif name == "/new":
            await self.new_session()
        elif name == "/sessions":
            await self.list_sessions()
        elif name == "/compact":
            await self.compact(rest)
        else:
            note(f"unknown command {escape_controls(name)!r}; /help lists them")
        return True

    async def new_session(self) -> None:
        """``/new``: close this session and talk to a fresh agent."""
        note = self.printer.note
        if self.busy:
            note("/new: a turn is running; /cancel it first")
            return
        if self.handle is None:
            note(f"/new: agent {self.agent.id!r} comes from the config and keeps its session")
            return
        previous = self.agent.session.id
        await self.agent.wait_idle()
        await self.handle.aclose()
        fresh = argparse.Namespace(**{**vars(self.args), "resume": None, "continue_": False})
        agent, handle = await open_agent(self.ctx, self.config, fresh)
        self.attach(agent, handle)
        hint = (
            f"  (the previous one: trio-agent chat --resume {previous})" if self.persisted else ""
        )
        note(f"new session: {agent.session.id}{hint}")

    async def compact(self, strategy: str) -> None:
        """``/compact [summary|prune]``: compact the session's older turns now."""
        note = self.printer.note
        strategies: dict[str, Strategy | None] = {"": None, "summary": "summary", "prune": "prune"}
        if strategy not in strategies:
            note("/compact: the strategy is summary or prune (none: the configured one)")
            return
        compaction = self.ctx.get(Compaction)
        if compaction is None:
            note("/compact: compaction is not configured (add a compaction: section to the config)")
            return
        if self.busy:
            note("/compact: a turn is running; wait for it or /cancel it first")
            return
        result: CompactionResult | None = None
        scope = self.compacting = trio.CancelScope()
        try:
            with scope:
                result = await compaction.compact(self.agent, strategy=strategies[strategy])
        except CompactionError as error:
            note(f"/compact: failed, the history is as it was: {escape_controls(str(error))}")
            return
        finally:
            self.compacting = None
        if scope.cancelled_caught:
            note("/compact: cancelled, the history is as it was")
        elif result is None:
            kept = compaction.settings.keep_turns
            note(
                f"/compact: nothing to compact (the latest {kept} closed turn(s) are kept as they are)"
            )
        else:
            note(
                f"compacted ({result.strategy}): events {result.first_seq}-{result.last_seq}; "
                f"next request ~{result.before.tokens} -> ~{result.after.tokens} tokens"
            )

    async def list_sessions(self) -> None:
        """``/sessions``: the most recently updated persisted sessions, the latest last."""
        try:
            store = self.ctx.require(SESSION_PERSISTENCE)
        except TrioAgentError:
            self.printer.note("/sessions: the config keeps no sessions (persistence type none)")
            return
        infos = sorted(await store.list(), key=lambda info: info.updated_at)
        if not infos:
            self.printer.note("no persisted sessions yet")
            return
        lines = []
        for info in infos[-_SESSIONS_LISTED:]:
            mark = "*" if info.session_id == self.agent.session.id else " "
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.updated_at))
            title = clean(info.title or "", 50)
            lines.append(f"{mark} {info.session_id}  {info.turns} turn(s)  {when}  {title}")
        more = len(infos) - _SESSIONS_LISTED
        if more > 0:
            lines.insert(0, f"({more} older; trio-agent sessions list shows all)")
        lines.append("resume one with: trio-agent chat --resume ID")
        self.printer.note("\n".join(lines))

    async def signals(
        self, cancel_scope: trio.CancelScope, *, task_status: trio.TaskStatus[None]
    ) -> None:
        with trio.open_signal_receiver(*STOP_SIGNALS) as received:
            task_status.started()
            async for signum in received:
                if signum != signal.SIGINT:
                    # SIGTERM / SIGHUP: end the running turn (aborted, flushed), quit.
                    self.terminated.append(signum)
                    self.agent.cancel(f"interrupted ({signal.Signals(signum).name})")
                    await self.agent.wait_idle()
                    cancel_scope.cancel()
                elif self.busy:
                    self.printer.end_line()
                    self.printer.note("^C: cancelling the turn")
                    self.agent.cancel("interrupted (SIGINT)")
                elif self.compacting is not None:
                    self.printer.note("^C: cancelling the compaction")
                    self.compacting.cancel()
                else:  # the idle prompt: exit at once
                    if self.interactive:
                        self.out.write("\n")
                        self.out.flush()
                    cancel_scope.cancel()


# --- the recap ------------------------------------------------------------------------------


def _recap(session: Session, note: Callable[[str], None]) -> None:
    """Print the last turns of a resumed session: each prompt and the final answer, shortened
    and with control characters escaped (the model's text must not drive the terminal)."""
    turns: dict[int, dict[str, Any]] = {}
    for event in session.events:
        if event.type == TurnStart.event_type:
            turns[event.payload_as(TurnStart).turn] = {}
        elif event.type == UserMessageEvent.event_type:
            payload = event.payload_as(UserMessageEvent)
            turns.setdefault(payload.turn, {}).setdefault("you", payload.message.text)
        elif event.type == PromptBlocked.event_type:
            blocked = event.payload_as(PromptBlocked)
            turns.setdefault(blocked.turn, {}).setdefault("you", blocked.message.text)
        elif event.type == AssistantMessageEvent.event_type:
            message = event.payload_as(AssistantMessageEvent)
            if message.message.text.strip():
                turns.setdefault(message.turn, {})["agent"] = message.message.text
        elif event.type == TurnEnd.event_type:
            end = event.payload_as(TurnEnd)
            turns.setdefault(end.turn, {})["end"] = end
    if not turns:
        return
    shown = sorted(turns)[-_RECAP_TURNS:]
    lines = [f"recap: {len(turns)} turn(s) so far; the last {len(shown)}:"]
    for number in shown:
        turn = turns[number]
        lines.append(f"  [{number}] you: {clean(turn.get('you', ''), _RECAP_WIDTH)}")
        failure = failure_of(turn["end"]) if "end" in turn else None
        if "agent" in turn:
            lines.append(f"      agent: {clean(turn['agent'], _RECAP_WIDTH)}")
        if "end" not in turn:
            lines.append("      (the turn did not end: the program stopped during it)")
        elif failure is not None:
            lines.append(f"      ({failure[0]}: {clean(failure[1], _RECAP_WIDTH)})")
    note("\n".join(lines))


def _short_id(session_id: str) -> str:
    """The part of a session id that tells sessions apart: 8 characters after ``-session-``."""
    _, sep, tail = session_id.rpartition("-session-")
    return escape_controls(tail[:8] if sep else shorten(session_id, 16))


# --- input ----------------------------------------------------------------------------------


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _Editor:
    """GNU readline at the idle prompt: ``input()`` in a worker thread trio may abandon.

    readline blocks the thread that calls it and has no async interface, so it runs in a
    thread; Ctrl-C or a stop signal abandons that thread (it stays blocked in ``select`` until
    the process exits) and :meth:`restore` puts back the terminal modes readline changed. The
    thread blocks the stop signals, so they reach trio's handler in the main thread.
    """

    def __init__(self, readline: ModuleType, fd: int, saved: list[Any]) -> None:
        self.module = readline
        self.fd = fd
        self.saved = saved
        #: ``saved`` without canonical input. Echo stays on: readline echoes only on a
        #: terminal that echoed when it started (it takes one that does not for a password).
        self.raw = [*saved[:3], saved[3] & ~termios.ICANON, *saved[4:]]
        self.raw[6] = [*saved[6]]
        self.raw[6][termios.VMIN] = 1
        self.raw[6][termios.VTIME] = 0
        self.history: _History | None = None
        self.reading = False

    @classmethod
    def open(cls, stdin: TextIO, out: TextIO, note: Callable[[str], None]) -> _Editor | None:
        """An editor for a terminal on both ends (``input()`` uses readline only then), or
        None (no readline module, or the output is not the terminal)."""
        if out is not sys.stdout or not _isatty(out):
            return None
        try:
            import readline
        except ImportError:
            return None
        fd = stdin.fileno()
        try:
            saved = termios.tcgetattr(fd)
        except termios.error:
            return None
        editor = cls(readline, fd, saved)
        readline.set_auto_history(False)  # lines are added by hand: not every line is kept
        readline.set_completer(_complete_command)  # Tab: the slash commands, nothing else
        readline.set_completer_delims(" ")
        # Python binds Tab to insert itself; libedit (macOS) spells the binding its own way.
        libedit = "libedit" in (readline.__doc__ or "")
        readline.parse_and_bind("bind ^I rl_complete" if libedit else "tab: complete")
        eof = saved[6][termios.VEOF]
        if not libedit and isinstance(eof, bytes) and len(eof) == 1 and eof != b"\0":
            # An end of input typed in cooked mode just before the terminal left it reaches
            # readline as a NUL byte (the kernel's mark for it): make NUL act as Ctrl-D.
            readline.parse_and_bind(f'"\\C-@": "\\{eof[0]:03o}"')
        editor.history = _History.open(readline, note)
        return editor

    async def readline(self, prompt: str) -> str:
        """The next line with its newline, "" at end of input (Ctrl-D)."""
        # Leave cooked mode here, not in the thread: a Ctrl-D typed before readline set up the
        # terminal would be lost (the kernel keeps a pending end of input as a NUL byte).
        with contextlib.suppress(termios.error):
            termios.tcsetattr(self.fd, termios.TCSANOW, self.raw)
        self.reading = True
        line = await trio.to_thread.run_sync(self._read, prompt, abandon_on_cancel=True)
        self.reading = False
        with contextlib.suppress(termios.error):  # cooked again for the turn
            termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)
        self.remember(line)
        return line

    def remember(self, line: str) -> None:
        """Keep a line typed at the idle prompt in the history."""
        if line and self.history is not None:
            self.history.add(line.rstrip("\n"))

    def _read(self, prompt: str) -> str:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            return input(prompt) + "\n"
        except (EOFError, OSError):  # Ctrl-D, or the terminal went away
            return ""
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def restore(self) -> None:
        """Put the terminal back as it was before readline, if a read was abandoned."""
        if not self.reading:
            return
        self.reading = False
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(self.fd, termios.TCSANOW, self.saved)
            if os.environ.get("TERM", "dumb") != "dumb":
                # readline may turn bracketed paste on while it reads: turn it off again.
                sys.stdout.write("\x1b[?2004l")
                sys.stdout.flush()


#: What Tab completes at the start of a line.
_COMMANDS = ("/help", "/cancel", "/new", "/model", "/sessions", "/compact", "/exit")


def _complete_command(text: str, state: int) -> str | None:
    """readline's completer: the ``state``-th slash command starting with ``text``."""
    import readline

    if readline.get_begidx() != 0 or not text.startswith("/"):
        return None
    matches = [command for command in _COMMANDS if command.startswith(text)]
    return matches[state] if state < len(matches) else None


class _History:
    """The line editor's history file: ``$XDG_STATE_HOME/trio-agent/history`` (default
    ``~/.local/state``), 0600 in a 0700 directory, the last :data:`_HISTORY_LINES` lines.

    It holds what was typed at the idle prompt only (no approval answers, no steering), and
    not a line that starts with a space. Any failure disables it with one note.
    """

    def __init__(self, readline: ModuleType, path: Path, fd: int, note: Callable[[str], None]):
        self.readline = readline
        self.path = path
        self.fd = fd
        self.note = note
        self.last: str | None = None

    @classmethod
    def open(cls, readline: ModuleType, note: Callable[[str], None]) -> _History | None:
        try:
            path = history_path()
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(path.parent, 0o700)
            fd = os.open(
                path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
        except (OSError, RuntimeError, KeyError) as exc:
            note(f"trio-agent: history disabled: {exc}")
            return None
        try:
            os.fchmod(fd, 0o600)
            with open(path, encoding="utf-8", errors="replace") as file:
                lines = file.read().splitlines()
            if len(lines) > _HISTORY_LINES:  # keep the file bounded: rewrite its tail
                lines = lines[-_HISTORY_LINES:]
                os.ftruncate(fd, 0)
                os.write(fd, "".join(line + "\n" for line in lines).encode())
        except OSError as exc:
            os.close(fd)
            note(f"trio-agent: history disabled: {exc}")
            return None
        readline.clear_history()
        for line in lines:
            readline.add_history(line)
        history = cls(readline, path, fd, note)
        history.last = lines[-1] if lines else None
        return history

    def add(self, line: str) -> None:
        """Keep ``line`` (in memory and on disk) unless blank, a repeat or space-led."""
        if not line.strip() or line[0].isspace() or line == self.last:
            return
        self.readline.add_history(line)
        self.last = line
        try:
            os.write(self.fd, (line + "\n").encode("utf-8", errors="replace"))
        except OSError as exc:
            self.note(f"trio-agent: history not saved: {exc}")


def history_path() -> Path:
    """Where chat keeps its line history (``$XDG_STATE_HOME`` if absolute, else
    ``~/.local/state``, then ``trio-agent/history``)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    return base / "trio-agent" / "history"


def _history_protected() -> tuple[str, ...]:
    """The history file, for the built-in tools' protected paths (none without a home)."""
    try:
        return (str(history_path()),)
    except (RuntimeError, KeyError):
        return ()


class _TtyReader:
    """Lines from a terminal in cooked mode, without a thread: ``wait_readable`` then one
    ``os.read`` (which returns at most one line), so a cancelled read loses nothing."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""

    def pending(self) -> bool:
        """A line or an end of input is there to read without waiting."""
        if b"\n" in self.buffer:
            return True
        try:
            return bool(select.select([self.fd], [], [], 0)[0])
        except (OSError, ValueError):
            return False

    async def readline(self) -> str:
        """The next line with its newline, "" at end of input (Ctrl-D at a line start)."""
        while b"\n" not in self.buffer:
            await trio.lowlevel.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:  # a non-blocking terminal woke us for nothing
                continue
            except OSError:  # the terminal went away (EIO after a hangup): end of input
                chunk = b""
            if not chunk:
                line, self.buffer = self.buffer, b""
                return line.decode("utf-8", errors="replace")
            self.buffer += chunk
        line, newline, self.buffer = self.buffer.partition(b"\n")
        if line in (b"\x04", b"\0"):  # a Ctrl-D typed as the terminal switched modes
            return ""
        return (line + newline).decode("utf-8", errors="replace")


async def _end_of_input() -> str:
    return ""


class _LineReader:
    """Lines from a file descriptor, each ``os.read`` in a worker thread trio may abandon.

    Not ``sys.stdin.readline``: an abandoned thread blocked in it holds the buffered reader's
    lock, and the interpreter then hangs at exit closing stdin (a stop signal must exit at
    once). ``os.read`` holds no Python-level lock. (A regular file cannot be polled, so piped
    input does not use :class:`_TtyReader`.)
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False

    async def readline(self) -> str:
        """The next line with its newline, or what is left at end of input ("" when none)."""
        while b"\n" not in self.buffer and not self.eof:
            chunk = await trio.to_thread.run_sync(os.read, self.fd, 65536, abandon_on_cancel=True)
            if chunk:
                self.buffer += chunk
            else:
                self.eof = True
        line, newline, rest = self.buffer.partition(b"\n")
        self.buffer = rest
        return (line + newline).decode("utf-8", errors="replace")


#: Shown on a terminal when the agent is idle and waits for the next line (after a status
#: line with the session's short id and the model).
_IDLE_PROMPT = "> "


#: The answer to an empty line while a turn runs.
_BUSY = "(busy: a turn is running; type to steer it, Ctrl-C cancels it, Ctrl-D exits after it)"

_CHAT_HELP = """\
commands:
  /help          this list
  /cancel        cancel the running turn (Ctrl-C does the same)
  /new           start a fresh session (prints its id)
  /model [NAME]  use model NAME from the next request on (no NAME: show the current one)
  /sessions      list the most recent sessions
  /compact [summary|prune]  compact the older turns now (needs a compaction: section)
  /exit          quit (also /quit, Ctrl-D; Ctrl-D during a turn quits after it)
a line typed while a turn runs steers it (an empty one shows the state);
//text sends a line starting with /"""
