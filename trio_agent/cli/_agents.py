"""The config, the agent and the checks ``run`` and ``chat`` share."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import trio

from ..agent import Agent, AgentHandle, AgentOptions, AgentRegistry
from ..config import HarnessConfig, default_config, load_config
from ..errors import TrioAgentError
from ..ids import validate_session_id
from ..persistence import SESSION_PERSISTENCE
from ..prompt import PromptVariableError, SystemPrompt
from ..runtime import Context, Fiber
from ._errors import CliExit

_DEFAULT_CONFIG_FILE = "trio-agent.yml"


#: How long ``--agent ID`` waits for a configured agent (one that resumes a session loads it
#: first; one whose session cannot be loaded never starts).
_CONFIGURED_AGENT_TIMEOUT = 30.0


def load_cli_config(
    path: str | None, *, import_plugins: bool = True
) -> tuple[HarnessConfig, str | None]:
    """The config of ``-c FILE``, else ``./trio-agent.yml``, else the embedded defaults (with a
    note saying which model they picked)."""
    if path is None and Path(_DEFAULT_CONFIG_FILE).is_file():
        path = _DEFAULT_CONFIG_FILE
    if path is not None:
        return load_config(path, import_plugins=import_plugins), None
    return default_config()


def session_id_arg(value: str, what: str = "ID") -> str:
    """``value`` if it is a valid session id, else an ``INVALID_SESSION_ID`` exit (status 2)."""
    try:
        return validate_session_id(value)
    except (TypeError, ValueError) as exc:
        raise CliExit(2, "INVALID_SESSION_ID", f"{what}: {exc}") from None


def _agent_id_arg(value: str) -> str:
    """An ``--agent`` id: it names the session file, so it obeys the session id rules."""
    try:
        return validate_session_id(value)
    except (TypeError, ValueError) as exc:
        text = str(exc).replace("session id", "agent id", 1)
        raise CliExit(2, "USAGE", f"--agent: {text}") from None


def agent_options(config: HarnessConfig, args: argparse.Namespace) -> AgentOptions:
    """``--provider`` / ``--model`` checked against the config."""
    provider: str | None = getattr(args, "provider", None)
    model: str | None = getattr(args, "model", None)
    if provider is not None:
        known = [p.name for p in config.llm.providers]
        if provider not in known:
            raise CliExit(
                2,
                "USAGE",
                f"--provider: {provider!r} is not a configured provider (known: {', '.join(known)})",
            )
    if model is not None and not model.strip():
        raise CliExit(2, "USAGE", "--model: the model name is empty")
    return AgentOptions(durability=config.durability, provider=provider, model=model)


async def _latest_session(ctx: Context) -> str:
    """The id of the session updated most recently (``--continue``)."""
    try:
        store = ctx.require(SESSION_PERSISTENCE)
    except TrioAgentError:
        raise CliExit(
            2, "CONFIG", "--continue: the config keeps no sessions (persistence type none)"
        ) from None
    infos = await store.list()
    if not infos:
        raise CliExit(2, "SESSION_NOT_FOUND", "--continue: there is no persisted session yet")
    return max(infos, key=lambda info: info.updated_at).session_id


async def open_agent(
    ctx: Context, config: HarnessConfig, args: argparse.Namespace
) -> tuple[Agent, AgentHandle | None]:
    """The agent ``run``/``chat`` talk to: a configured one (``--agent ID`` from the config), a
    resumed one (``--resume``/``--continue``) or a new one. The handle is None for a configured
    agent, which the runtime owns."""
    agents = ctx.require(AgentRegistry)
    agent_id: str | None = args.agent
    resume: str | None = args.resume
    configured = {row.id: row for row in config.agents}
    if agent_id is not None and agent_id in configured:
        if resume is not None or args.continue_:
            raise CliExit(
                2,
                "USAGE",
                f"agent {agent_id!r} comes from the config; set its resume_session_id there "
                "instead of --resume/--continue",
            )
        wanted = configured[agent_id].resume_session_id
        if wanted:
            await _check_stored(ctx, wanted, f"agent {agent_id!r}: resume_session_id")
        with trio.move_on_after(_CONFIGURED_AGENT_TIMEOUT):
            agent = await agents.wait_for(agent_id)
            await _check_persona(agent)
            return agent, None
        raise CliExit(
            1,
            "NO_AGENT",
            f"the configured agent {agent_id!r} did not start within "
            f"{_CONFIGURED_AGENT_TIMEOUT:g} s (see the warning above)",
        )
    if args.continue_:
        resume = await _latest_session(ctx)
    agent_id = agent_id or "trio-agent"
    options = agent_options(config, args)
    if resume is not None:
        await _check_stored(ctx, resume, "--resume")
        handle: AgentHandle = await agents.resume(
            agent_id=agent_id, resume_session_id=resume, agent_options=options
        )
    else:
        handle = await agents.create(
            agent_id=agent_id,
            session_id=f"{agent_id}-session-{uuid.uuid4()}",
            meta={"cwd": os.getcwd()},
            agent_options=options,
        )
    try:
        await _check_persona(handle.agent)
    except CliExit:
        await handle.aclose()
        raise
    return handle.agent, handle


async def _check_persona(agent: Agent) -> None:
    """The system prompt renders for ``agent`` (every ``{{variable}}`` registered, plugins from
    the config included), before turn 1: else ``CONFIG`` with status 2."""
    try:
        prompt = agent.ctx.require(SystemPrompt)
    except TrioAgentError:
        return
    try:
        prompt.render(await prompt.assemble(agent))
    except PromptVariableError as exc:
        raise CliExit(2, "CONFIG", f"$.system_prompt.persona: {exc}") from None


async def _check_stored(ctx: Context, session_id: str, what: str) -> None:
    """``SESSION_NOT_FOUND`` (status 2) at once when ``session_id`` is not stored."""
    try:
        valid = validate_session_id(session_id)
    except (TypeError, ValueError) as exc:
        raise CliExit(2, "INVALID_SESSION_ID", f"{what}: {exc}") from None
    try:
        store = ctx.require(SESSION_PERSISTENCE)
    except TrioAgentError:
        raise CliExit(
            2, "CONFIG", f"{what}: the config keeps no sessions (persistence type none)"
        ) from None
    if not await store.exists(valid):
        raise CliExit(
            2,
            "SESSION_NOT_FOUND",
            f"{what}: no stored session {valid!r}",
            hint="trio-agent sessions list",
        )


#: The signals ``run`` (all three) and ``chat`` (SIGTERM, SIGHUP) turn into a cancel of the
#: running turn; the exit status is then 128 + the signal's number.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def check_id_args(args: argparse.Namespace) -> None:
    """``--agent`` and ``--resume`` obey the session id rules (status 2 otherwise)."""
    if args.agent is not None:
        _agent_id_arg(args.agent)
    if args.resume is not None:
        session_id_arg(args.resume, "--resume")


def report_servers_down(fibers: Sequence[Fiber], err: TextIO) -> None:
    """Print each configured MCP server that is not up; the rest of the harness runs on (the
    server keeps trying under its restart policy)."""
    if "trio_agent.mcp" not in sys.modules:
        return  # no MCP plugin is mounted, and the core never imports the extra
    from ..mcp import McpServers

    for fiber in fibers:
        if isinstance(fiber.instance, McpServers):
            for status in fiber.instance.servers():
                if status.state != "up":
                    error = status.error or "it did not list its tools in time"
                    err.write(
                        f"trio-agent: CONFIG: MCP server {status.name!r} did not start: {error}\n"
                    )
    err.flush()
