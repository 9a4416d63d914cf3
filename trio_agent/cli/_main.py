"""The parser, the error classification and the ``main`` entry point."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn, TextIO

import trio

from .. import __version__
from ..config import ConfigError
from ..errors import TrioAgentError
from ..llm import LlmError
from ..persistence import PersistenceError, SessionBusyError, StoredSessionNotFoundError
from ..prompt import PromptVariableError
from ..redaction import redact_known
from ..runtime import PluginConfigError
from ..session import SessionNotFoundError
from ..tools.builtin import BuiltinToolsConfigError
from ._chat import chat_command
from ._errors import CliExit
from ._plugins import plugins_command
from ._run import run_command
from ._send import send_command
from ._sessions import sessions_command

#: The exit status table (docs/cli.md); ``--help`` prints it.
STATUS_TABLE = """\
exit status:
  0    run: the turn completed (denied tool calls are listed on stderr); chat: normal exit;
       sessions/plugins: done; send: the prompt is queued; acp: clean shutdown
  1    run: the turn did not complete (error, max-steps, rejected), or PERSISTENCE
       (a session that could not be written; send: the database failed)
  2    usage, config and input errors: USAGE, CONFIG, INVALID_SESSION_ID, SESSION_NOT_FOUND,
       SESSION_BUSY (acp: before serving)
  130 / 143 / 129  Ctrl-C / SIGTERM / SIGHUP during a turn (the turn ends aborted, flushed)

errors print one line: trio-agent: CODE: message (plus an optional hint: line).
codes: USAGE, CONFIG, INVALID_SESSION_ID, SESSION_NOT_FOUND, SESSION_BUSY, PERSISTENCE,
  MAX_STEPS, DENIED, ABORTED, REJECTED, MAX_TOKENS, INTERNAL and the model failure codes
  (RATE_LIMIT, SERVER, TIMEOUT, TRANSPORT, AUTH, INVALID_REQUEST, CONTEXT_WINDOW_EXCEEDED,
  QUOTA, EMPTY_RESPONSE, MALFORMED_RESPONSE, STREAM_CLOSED, NO_ADAPTER).

environment:
  DEEPSEEK_API_KEY, OPENAI_API_KEY   pick a real model when no config file is used
  DEEPSEEK_BASE_URL, OPENAI_BASE_URL override the endpoint of that provider
  TRIO_AGENT_DEBUG=1                 show the Python traceback of an INTERNAL error

docs: "Command line" (docs/cli.md), "Quickstart" (docs/quickstart.md),
  "Configuration" (docs/configuration.md)
"""


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's one error path: ``trio-agent: USAGE: message``, status 2."""

    def error(self, message: str) -> NoReturn:
        raise CliExit(2, "USAGE", message, hint=f"{self.prog} --help")


def _add_command(
    group: argparse._SubParsersAction[_Parser], name: str, help: str
) -> argparse.ArgumentParser:
    """A (sub)command whose ``--help`` shows its summary and the exit status table."""
    return group.add_parser(
        name,
        help=help,
        description=help,
        epilog=STATUS_TABLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="trio-agent",
        description="An LLM agent harness on trio.",
        epilog=STATUS_TABLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"trio-agent {__version__}")
    parser.add_argument(
        "-c", "--config", metavar="FILE", help="config file (default: ./trio-agent.yml if present)"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="more on stderr (run: a closing usage line)"
    )
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )

    def common(sub: argparse.ArgumentParser) -> None:
        # SUPPRESS: a -c given before the subcommand is not overwritten by the default here.
        sub.add_argument(
            "-c",
            "--config",
            metavar="FILE",
            default=argparse.SUPPRESS,
            help="config file (default: ./trio-agent.yml if present)",
        )
        sub.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            default=argparse.SUPPRESS,
            help="more on stderr",
        )

    def sub(name: str, help: str) -> argparse.ArgumentParser:
        return _add_command(commands, name, help)

    def agent_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--agent", metavar="ID", help="agent id (a configured agent, or a new one)")
        which = p.add_mutually_exclusive_group()
        which.add_argument("--resume", metavar="ID", help="continue the persisted session ID")
        which.add_argument(
            "--continue",
            dest="continue_",
            action="store_true",
            help="continue the session updated most recently",
        )
        p.add_argument("--model", metavar="NAME", help="the model to use (default: the config's)")
        p.add_argument(
            "--provider",
            metavar="NAME",
            help="the configured provider to use (default: the config's)",
        )

    run = sub("run", "run one prompt to completion")
    common(run)
    agent_options(run)
    run.add_argument(
        "--json", action="store_true", help="print one JSON result object instead of streaming"
    )
    run.add_argument("--yes", action="store_true", help="approve every tool call (#14)")
    run.add_argument(
        "--allow",
        action="append",
        metavar="TOOL[,TOOL]",
        help="approve these tools' calls (repeatable); other calls that need a yes are denied",
    )
    run.add_argument(
        "prompt",
        nargs="*",
        help="the prompt (words are joined with spaces); '-' or none reads it from piped stdin",
    )

    chat = sub("chat", "interactive session (Ctrl-C cancels the running turn)")
    common(chat)
    agent_options(chat)

    sessions = sub("sessions", "list, show, export or remove persisted sessions")
    actions = sessions.add_subparsers(
        dest="action", required=True, metavar="ACTION", parser_class=_Parser
    )

    def action(name: str, help: str) -> argparse.ArgumentParser:
        p = _add_command(actions, name, help)
        common(p)
        return p

    listing = action("list", "list persisted sessions, most recent last")
    listing.add_argument("--json", action="store_true", help="print one JSON array")
    show = action("show", "print a session as a readable transcript")
    show.add_argument("id", metavar="ID", help="the session id")
    export = action("export", "export a session")
    export.add_argument("id", metavar="ID", help="the session id")
    export.add_argument(
        "--format",
        choices=("jsonl", "json", "markdown", "md"),
        default="jsonl",
        help="jsonl (the stored log, default), json (one document: header and events), "
        "markdown or md (a transcript)",
    )
    remove = action("rm", "delete a persisted session (refused while it is open)")
    remove.add_argument("id", metavar="ID", help="the session id")
    # `trio-agent acp` parses its own options (trio_agent.acp.main_acp): pass them through.
    acp = commands.add_parser(
        "acp",
        help="serve the Agent Client Protocol on stdin/stdout",
        add_help=False,
        prefix_chars="+",
    )
    acp.add_argument("argv", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    plugins = sub("plugins", "list the installed plugins and the ones the config mounts")
    common(plugins)
    plugins.add_argument("--json", action="store_true", help="print JSON")
    send = sub(
        "send",
        "queue a prompt in a session's PostgreSQL inbox and print its inbox id; the worker "
        "holding the session runs it once (or the next one to resume it)",
    )
    common(send)
    send.add_argument("id", metavar="SESSION-ID", help="the session id")
    send.add_argument(
        "prompt",
        nargs="*",
        metavar="TEXT",
        help="the prompt (words are joined with spaces); '-' or none reads it from piped stdin",
    )
    return parser


def _leaves(exc: BaseException) -> list[BaseException]:
    """The leaf exceptions of ``exc`` (trio's nurseries wrap what they raise in groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


#: Errors a user's input or config causes: status 2 with this code.
_CONFIG_ERRORS: tuple[type[BaseException], ...] = (
    ConfigError,
    BuiltinToolsConfigError,
    PluginConfigError,
    PromptVariableError,
)


def _classify(exc: BaseException) -> tuple[int, str, str, str | None] | None:
    """``(status, code, message, hint)`` for an error the CLI knows; None for a bug."""
    if isinstance(exc, CliExit):
        return exc.status, exc.code, exc.message, exc.hint
    if isinstance(exc, _CONFIG_ERRORS):
        return 2, "CONFIG", str(exc), None
    if isinstance(exc, SessionBusyError):
        holder = "" if exc.pid is None else f" (pid {exc.pid})"
        return (
            2,
            "SESSION_BUSY",
            f"session {exc.session_id} is open in another process{holder}",
            None,
        )
    if isinstance(exc, StoredSessionNotFoundError | SessionNotFoundError):
        return 2, "SESSION_NOT_FOUND", str(exc), "trio-agent sessions list"
    if isinstance(exc, PersistenceError):
        return 1, "PERSISTENCE", str(exc), None
    if isinstance(exc, LlmError):
        return 1, exc.failure.code, exc.failure.message, None
    if isinstance(exc, TrioAgentError):
        return 1, "ERROR", str(exc), None
    if isinstance(exc, OSError) and not isinstance(exc, BrokenPipeError):
        return 1, "OS_ERROR", str(exc), None
    return None


def _report(err: TextIO, code: str, message: str, hint: str | None) -> None:
    """The CLI's one error path: ``trio-agent: CODE: message`` (and ``hint: ...``) with every
    secret the process loaded masked (an unexpected bug's or an OS error's text included)."""
    message = redact_known(message)  # before the join: a secret may hold whitespace
    # One line: a message that spans lines (a config error listing problems) is joined.
    line = " ".join(message.split()) if "\n" in message else message
    err.write(f"trio-agent: {redact_known(code)}: {line}\n")
    if hint:
        err.write(f"hint: {redact_known(hint)}\n")
    err.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``trio-agent`` command; returns the exit status (table in docs/cli.md)."""
    err = sys.stderr
    try:
        return _main(argv)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        err.write("trio-agent: INTERRUPTED: stopped by Ctrl-C\n")
        return 130
    except BaseException as exc:
        leaves = _leaves(exc)
        if any(isinstance(leaf, BrokenPipeError) for leaf in leaves):
            # The reader went away (``trio-agent sessions export X | head``): not an error.
            with contextlib.suppress(OSError):
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep shutdown quiet
            return 0
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            err.write("trio-agent: INTERRUPTED: stopped by Ctrl-C\n")
            return 130
        known = [c for c in map(_classify, leaves) if c is not None]
        if known:
            status, code, message, hint = known[0]
            _report(err, code, message, hint)
            return status
        if os.environ.get("TRIO_AGENT_DEBUG"):
            # The traceback a developer asked for, with the secrets masked like any error text.
            err.write(redact_known("".join(traceback.format_exception(exc))))
            err.flush()
            return 1
        leaf = leaves[0] if leaves else exc
        _report(
            err,
            "INTERNAL",
            f"{type(leaf).__name__}: {leaf}",
            "a bug in trio-agent: rerun with TRIO_AGENT_DEBUG=1 for the traceback and report it",
        )
        return 1


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "acp":
        from ..acp import main_acp

        return main_acp(args.argv)
    out, err = sys.stdout, sys.stderr
    commands = {
        "run": run_command,
        "chat": chat_command,
        "sessions": sessions_command,
        "plugins": plugins_command,
        "send": send_command,
    }
    return trio.run(commands[args.command], args, out, err)
