"""``trio-agent acp``: the process around :func:`serve`.

Before anything else runs, the protocol gets private copies of file descriptors 0 and 1, and
fd 1 is pointed at a pipe whose lines go to the log, so nothing but protocol messages can ever
reach stdout (a stray ``print``, a child process, a C library) and no such write can block.
``sys.stdout`` and ``sys.stderr`` become writers on the bounded, non-blocking
:class:`StderrSink`, and so does the log (WARNING by default). SIGTERM, SIGINT and SIGHUP end
the server like a closed stdin.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence

import trio

from ..config import ConfigError, HarnessConfig
from ..errors import TrioAgentError
from ._serve import Setup, resolve_config, serve
from ._server import AcpOptions
from ._stderr import SinkHandler, SinkWriter, StderrSink

__all__ = ["main_acp"]

logger = logging.getLogger("trio_agent.acp")

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-agent acp",
        description=(
            "Serve the Agent Client Protocol on stdin/stdout, for editors such as Zed. "
            "Logs go to stderr."
        ),
        epilog="docs: docs/acp.md",
    )
    parser.add_argument(
        "-c", "--config", metavar="FILE", help="config file (default: ./trio-agent.yml if present)"
    )
    parser.add_argument(
        "--agent", metavar="ID", help="a configured agent whose provider and model sessions use"
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="stderr log level (default: WARNING)",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=AcpOptions().context_window,
        metavar="TOKENS",
        help="context window size reported to the client in usage updates (default: %(default)s)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=AcpOptions().max_message_bytes,
        metavar="BYTES",
        help="longest message accepted from the client (default: %(default)s)",
    )
    return parser


def main_acp(argv: Sequence[str] | None = None, *, setup: Setup | None = None) -> int:
    """Run ``trio-agent acp [-c FILE] ...`` in this process; return the exit status.

    0 after the client closed stdin (or a SIGTERM/SIGINT/SIGHUP) and the teardown finished;
    2 for usage and configuration errors; 1 if the server failed. ``setup`` is passed to
    :func:`serve` (extra plugins for embedders and tests).
    """
    args = _parser().parse_args(argv)
    try:
        options = AcpOptions(
            agent=args.agent,
            context_window=args.context_window,
            max_message_bytes=args.max_message_bytes,
        )
    except ValueError as exc:
        sys.stderr.write(f"trio-agent: USAGE: {exc}\n")
        return 2
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    sink = StderrSink(2)
    sink.capture(1, "[stdout] ")
    sys.stdout = SinkWriter(sink)
    sys.stderr = SinkWriter(sink)
    handler = SinkHandler(sink)
    handler.setFormatter(logging.Formatter("trio-agent %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler], force=True)
    logging.captureWarnings(True)
    logging.raiseExceptions = False
    try:
        config = resolve_config(args.config)
        trio.run(_run, config, protocol_in, protocol_out, options, setup)
    except Exception as exc:
        error = _sole_error(exc)
        if isinstance(error, ConfigError):
            sink.write_line(f"trio-agent: CONFIG: {error}")
            return 2
        if isinstance(error, TrioAgentError):
            sink.write_line(f"trio-agent: {type(error).__name__}: {error}")
        else:
            logger.error("trio-agent acp failed", exc_info=exc)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sink.close(timeout=1.0)
    return 0


def _sole_error(exc: BaseException) -> BaseException:
    """The one real error inside (nested) exception groups, else ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup):
        real = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        if len(real) != 1:
            break
        exc = real[0]
    return exc


async def _run(
    config: HarnessConfig,
    protocol_in: int,
    protocol_out: int,
    options: AcpOptions,
    setup: Setup | None,
) -> None:
    stdin = trio.lowlevel.FdStream(protocol_in)
    stdout = trio.lowlevel.FdStream(protocol_out)
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_signals, shutdown)
        try:
            await serve(config, stdin, stdout, options=options, setup=setup, shutdown=shutdown)
        finally:
            nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await stdin.aclose()


async def _signals(shutdown: trio.Event) -> None:
    with trio.open_signal_receiver(*_SIGNALS) as received:
        async for signum in received:
            logger.info("received %s: shutting down", signal.Signals(signum).name)
            shutdown.set()
