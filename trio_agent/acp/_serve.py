"""``serve()``: run the ACP server on a pair of byte streams until the client hangs up.

Ownership, outermost first (teardown runs in the reverse order, by nesting)::

    runtime (every plugin of the config; persistence flushes when it closes)
    └── writer task: the only writer of the output stream; drains the outbox, then closes it
        └── the connection's nursery: request bodies + one task per session holding its
            AgentHandle
            └── the reader: frames in arrival order (until end of input or ``shutdown``)

When the input ends (or ``shutdown`` is set): reading stops, every session is closed newest
first (a running turn ends ``disposed``, its flush is awaited, its pending ``session/prompt``
answers ``cancelled``), requests still running after the close budget are cancelled (each is
answered with an error), the outbox is written and the output closed, then the runtime closes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import attrs
import trio

from ..agent import AgentOptions
from ..config import (
    ConfigError,
    HarnessConfig,
    default_config,
    load_config,
    mount_config,
)
from ..runtime import Context, open_runtime
from ..tools import APPROVAL
from ._jsonrpc import JsonRpcPeer
from ._server import AcpOptions, AcpServer

__all__ = ["resolve_config", "serve"]

logger = logging.getLogger("trio_agent.acp")

_DEFAULT_CONFIG_FILE = "trio-agent.yml"

#: Extra set-up for embedders and tests: called with the root context after the config's
#: plugins are mounted and before the first message is read.
Setup = Callable[[Context], Awaitable[None]]


def resolve_config(config: HarnessConfig | str | os.PathLike[str] | None) -> HarnessConfig:
    """The config to serve: ``config`` itself, the file it names, else ``./trio-agent.yml``
    when there is one, else the embedded defaults.

    Raises:
        ConfigError: the file is missing or invalid.
    """
    if isinstance(config, HarnessConfig):
        return config
    if config is not None:
        return load_config(config)
    if Path(_DEFAULT_CONFIG_FILE).is_file():
        return load_config(_DEFAULT_CONFIG_FILE)
    harness, note = default_config()
    logger.info("trio-agent acp: %s", note)
    return harness


def _agent_options(config: HarnessConfig, agent: str | None) -> AgentOptions | None:
    if agent is None:
        return None
    for row in config.agents:
        if row.id == agent:
            # A row naming another provider but no model gets that provider's first model (the
            # loop's default model belongs to the default provider).
            provider = row.provider or config.default_provider_name
            return attrs.evolve(row.options, model=row.model or config.default_model(provider))
    known = ", ".join(row.id for row in config.agents) or "none"
    raise ConfigError(f"--agent {agent!r}: no such agent in the config (agents: {known})")


async def serve(
    config: HarnessConfig | str | os.PathLike[str] | None,
    stdin: trio.abc.ReceiveStream,
    stdout: trio.abc.SendStream,
    *,
    options: AcpOptions | None = None,
    setup: Setup | None = None,
    shutdown: trio.Event | None = None,
) -> None:
    """Serve ACP: read JSON-RPC frames from ``stdin``, write frames to ``stdout``.

    ``config`` is a :class:`~trio_agent.HarnessConfig`, a config file path, or None (see
    :func:`resolve_config`); its ``agents`` are not started (every ACP session makes its own).
    Returns when ``stdin`` ends or ``shutdown`` is set, after the teardown described in the
    module documentation; ``stdout`` is closed by then.

    Raises:
        ConfigError: the config is invalid, or ``options.agent`` names no configured agent.
    """
    options = options or AcpOptions()
    harness = resolve_config(config)
    agent_options = _agent_options(harness, options.agent)
    async with open_runtime() as ctx:
        await mount_config(ctx, attrs.evolve(harness, agents=()))
        if setup is not None:
            await setup(ctx)
        peer = JsonRpcPeer(stdout, max_message_bytes=options.max_message_bytes)
        async with trio.open_nursery() as writer:
            writer.start_soon(peer.run_writer, name="acp writer")
            try:
                await _serve_connection(ctx, peer, stdin, harness, options, agent_options, shutdown)
            finally:
                peer.finish()
                with trio.move_on_after(ctx.teardown_timeout) as flushing:
                    flushing.shield = True
                    await peer.flushed.wait()
                if flushing.cancelled_caught:
                    logger.warning("the client did not read our last messages in time")
                    writer.cancel_scope.cancel()


async def _serve_connection(
    ctx: Context,
    peer: JsonRpcPeer,
    stdin: trio.abc.ReceiveStream,
    harness: HarnessConfig,
    options: AcpOptions,
    agent_options: AgentOptions | None,
    shutdown: trio.Event | None,
) -> None:
    async with trio.open_nursery() as connection:
        server = AcpServer(
            ctx,
            peer,
            connection,
            config=harness,
            options=options,
            agent_options=agent_options,
        )
        if ctx.get(APPROVAL) is None:
            ctx.provide(APPROVAL.name, server.approvals)
        else:
            logger.warning(
                "an approval service is already mounted; tool approvals will not be asked "
                "through the ACP client"
            )
        try:
            async with trio.open_nursery() as reading:
                if shutdown is not None:
                    reading.start_soon(_stop_on, shutdown, reading.cancel_scope)
                await peer.serve_incoming(stdin, server, connection)
                reading.cancel_scope.cancel()
            await server.aclose()
        finally:
            # Requests still running after the close budget are cancelled (and answered).
            connection.cancel_scope.deadline = trio.current_time() + ctx.teardown_timeout


async def _stop_on(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
