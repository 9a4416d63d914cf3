"""``trio-agent.yml``: the configuration file, and the one call that mounts a whole harness.

::

    llm:
      default_provider: deepseek
      providers:
        - {name: deepseek, type: openai, base_url: https://api.deepseek.com,
           api_key_env: DEEPSEEK_API_KEY, models: [deepseek-chat]}
        - {name: offline, type: offline}
      retry: {max_attempts: 5}
    persistence: {type: jsonl, path: .trio-agent/sessions}
    system_prompt:
      persona: You are a careful coding agent working in {{cwd}}.
    tools:
      builtin: [read_file, write_file, edit_file, list_dir, glob, grep, shell]
      root: .
      shell: [git status, ls]
    agents:
      - id: coder
        resume_session_id: ${TRIO_AGENT_RESUME:-}

String values may use ``${VAR}`` (the variable must be set) and ``${VAR:-default}``; ``$${`` is a
literal ``${``. The file is structured into the attrs classes below with the project's cattrs
converter: an unknown key or a wrong type is a :class:`ConfigError` naming its key path.
docs/configuration.md is the full reference.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs
import yaml

from . import _serde
from .agent import AgentRegistry, RetryPlugin
from .errors import TrioAgentError
from .llm import LlmService, RetryPolicy
from .llm._offline import OfflineProvider
from .llm._openai import OpenAiProvider
from .llm._scripted import ScriptedProvider
from .loop import AgentConfig, AgentLoop
from .persistence import JsonlPersistence, MemoryPersistence, SqlitePersistence
from .prompt import SystemPrompt
from .runtime import Context, open_runtime
from .session import SessionStore
from .tools import ToolRegistry
from .tools.builtin import BUILTIN_TOOL_NAMES, BuiltinTools

__all__ = [
    "DEFAULT_PERSONA",
    "ConfigError",
    "HarnessConfig",
    "LlmConfig",
    "PersistenceConfig",
    "ProviderConfig",
    "SystemPromptConfig",
    "ToolsConfig",
    "default_config",
    "load_config",
    "mount_config",
    "mount_persistence",
    "open_harness",
    "parse_config",
]

DEFAULT_PERSONA = (
    "You are trio-agent, a careful assistant working in the directory {{cwd}} with the model "
    "{{model}}. Use the tools to look before you answer, keep changes small, and say plainly what "
    "you did."
)

_DEFAULT_MODELS = {"offline": "offline", "scripted": "scripted"}


class ConfigError(TrioAgentError, ValueError):
    """The configuration file (or value) is invalid; the message names the key path."""


@attrs.frozen
class ProviderConfig:
    """One model provider: ``type`` is ``openai`` (any OpenAI-compatible server), ``offline``
    (the built-in rule-based model) or ``scripted`` (canned replies, for tests)."""

    name: str
    type: Literal["openai", "offline", "scripted"]
    base_url: str | None = None
    api_key_env: str | None = None
    models: tuple[str, ...] = ()
    idle_timeout: float | None = None
    delay: float | None = None
    responses: tuple[str, ...] = ()

    @property
    def default_model(self) -> str:
        """The model used when an agent names none."""
        if self.models:
            return self.models[0]
        return _DEFAULT_MODELS.get(self.type, "default")


@attrs.frozen
class RetryConfig:
    """The retry plugin's policy for every provider (omit ``retry`` to use each provider's own)."""

    max_attempts: int = 5
    initial_delay: float = 0.5
    max_delay: float = 10.0
    jitter: float = 0.1


@attrs.frozen
class LlmConfig:
    """Providers, which one agents use by default, and the retry policy."""

    providers: tuple[ProviderConfig, ...] = (ProviderConfig(name="offline", type="offline"),)
    default_provider: str | None = None
    retry: RetryConfig | None = None


@attrs.frozen
class PersistenceConfig:
    """Where sessions are stored: ``jsonl`` (default, a directory), ``sqlite`` (a file),
    ``memory`` or ``none``."""

    type: Literal["jsonl", "sqlite", "memory", "none"] = "jsonl"
    path: str | None = None


@attrs.frozen
class SystemPromptConfig:
    """The persona every agent shares (``{{model}}`` and ``{{cwd}}`` are filled per agent)."""

    persona: str = DEFAULT_PERSONA


@attrs.frozen
class ToolsConfig:
    """Built-in tools: which ones, the workspace root they are confined to (default: the current
    directory) and the shell policy (``deny``, ``allow``, or a list of allowed command prefixes)."""

    builtin: tuple[str, ...] = BUILTIN_TOOL_NAMES
    root: str | None = None
    shell: str | tuple[str, ...] = "deny"
    shell_timeout: float = 30.0


@attrs.frozen
class HarnessConfig:
    """The whole ``trio-agent.yml``."""

    llm: LlmConfig = LlmConfig()
    persistence: PersistenceConfig = PersistenceConfig()
    system_prompt: SystemPromptConfig = SystemPromptConfig()
    tools: ToolsConfig = ToolsConfig()
    agents: tuple[AgentConfig, ...] = ()
    max_parallel_tool_calls: int = 10

    @property
    def default_provider(self) -> ProviderConfig:
        """The provider agents use when they name none."""
        wanted = self.llm.default_provider or self.llm.providers[0].name
        return self.provider(wanted)

    def provider(self, name: str) -> ProviderConfig:
        """The provider called ``name``."""
        for provider in self.llm.providers:
            if provider.name == name:
                return provider
        known = ", ".join(p.name for p in self.llm.providers)
        raise ConfigError(f"unknown provider {name!r}; the config defines: {known}")


# --- loading ------------------------------------------------------------------------------------

_VARIABLE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _expand(value: str, path: str, environ: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        if name in environ:
            found = environ[name]
            return found if found or default is None else default
        if default is not None:
            return default
        raise ConfigError(
            f"{path}: environment variable {name} is not set; set it, or write "
            f"${{{name}:-default}} to give a default"
        )

    return _VARIABLE.sub(substitute, value)


def _expand_tree(node: Any, path: str, environ: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return _expand(node, path, environ)
    if isinstance(node, list):
        return [_expand_tree(item, f"{path}[{i}]", environ) for i, item in enumerate(node)]
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if not isinstance(key, str):
                raise ConfigError(f"{path}: key {key!r} must be a string")
            out[key] = _expand_tree(value, f"{path}.{key}", environ)
        return out
    return node


def parse_config(
    text: str, *, source: str = "<config>", environ: Mapping[str, str] | None = None
) -> HarnessConfig:
    """Parse YAML ``text`` into a :class:`HarnessConfig`.

    Raises:
        ConfigError: invalid YAML, an unset ``${VAR}``, an unknown key, a wrong type or an
            inconsistent value; the message names ``source`` and the key path.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: not valid YAML: {exc}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of sections, got {type(data).__name__}"
        )
    try:
        data = _expand_tree(data, "$", os.environ if environ is None else environ)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    try:
        config = _serde.structure(data, HarnessConfig)
    except cattrs.BaseValidationError as exc:
        problems = "; ".join(cattrs.transform_error(exc, path="$"))
        raise ConfigError(f"{source}: {problems}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: {exc}") from None
    _validate(config, source)
    return config


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> HarnessConfig:
    """Read and parse the config file at ``path`` (see :func:`parse_config`)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the config file: {exc.strerror or exc}") from exc
    return parse_config(text, source=str(file), environ=environ)


def _validate(config: HarnessConfig, source: str) -> None:
    def fail(message: str) -> None:
        raise ConfigError(f"{source}: {message}")

    if not config.llm.providers:
        fail("$.llm.providers: define at least one provider")
    names = [p.name for p in config.llm.providers]
    for i, provider in enumerate(config.llm.providers):
        if names.count(provider.name) > 1:
            fail(f"$.llm.providers[{i}].name: provider {provider.name!r} is defined twice")
        if provider.type != "openai":
            for key in ("base_url", "api_key_env", "idle_timeout"):
                if getattr(provider, key) is not None:
                    fail(f"$.llm.providers[{i}].{key}: only valid for type openai")
        elif provider.base_url is None:
            fail(f"$.llm.providers[{i}].base_url: required for type openai")
    if config.llm.default_provider is not None and config.llm.default_provider not in names:
        fail(
            f"$.llm.default_provider: {config.llm.default_provider!r} is not a defined provider ({', '.join(names)})"
        )
    seen: set[str] = set()
    for i, agent in enumerate(config.agents):
        if agent.id in seen:
            fail(f"$.agents[{i}].id: agent {agent.id!r} is defined twice")
        seen.add(agent.id)
        if agent.provider is not None and agent.provider not in names:
            fail(
                f"$.agents[{i}].provider: {agent.provider!r} is not a defined provider ({', '.join(names)})"
            )
    unknown = sorted(set(config.tools.builtin) - set(BUILTIN_TOOL_NAMES))
    if unknown:
        fail(
            f"$.tools.builtin: unknown tool(s) {', '.join(unknown)}; known: {', '.join(BUILTIN_TOOL_NAMES)}"
        )
    if isinstance(config.tools.shell, str) and config.tools.shell not in ("allow", "deny"):
        fail(
            f"$.tools.shell: expected 'allow', 'deny' or a list of command prefixes, got {config.tools.shell!r}"
        )
    if config.max_parallel_tool_calls < 1:
        fail("$.max_parallel_tool_calls: must be at least 1")


def default_config(environ: Mapping[str, str] | None = None) -> tuple[HarnessConfig, str]:
    """The embedded defaults the CLI runs on without a config file, and a note saying which
    provider was picked: DeepSeek if ``DEEPSEEK_API_KEY`` is set, else OpenAI if
    ``OPENAI_API_KEY`` is set, else the offline model."""
    env = os.environ if environ is None else environ
    offline = ProviderConfig(name="offline", type="offline")
    if env.get("DEEPSEEK_API_KEY"):
        provider = ProviderConfig(
            name="deepseek",
            type="openai",
            base_url="https://api.deepseek.com",
            api_key_env="DEEPSEEK_API_KEY",
            models=("deepseek-chat",),
        )
        note = "using DeepSeek (deepseek-chat): DEEPSEEK_API_KEY is set"
    elif env.get("OPENAI_API_KEY"):
        provider = ProviderConfig(
            name="openai",
            type="openai",
            base_url="https://api.openai.com/v1",
            api_key_env="OPENAI_API_KEY",
            models=("gpt-4o-mini",),
        )
        note = "using OpenAI (gpt-4o-mini): OPENAI_API_KEY is set"
    else:
        return (
            HarnessConfig(),
            "using the offline model (set DEEPSEEK_API_KEY or OPENAI_API_KEY for a real one)",
        )
    return (
        HarnessConfig(llm=LlmConfig(providers=(provider, offline), retry=RetryConfig())),
        note,
    )


# --- mounting -----------------------------------------------------------------------------------


async def mount_config(ctx: Context, config: HarnessConfig) -> None:
    """Mount the standard plugin set described by ``config`` on ``ctx``, in dependency order.

    llm (+ one provider plugin each, + the retry plugin), sessions, persistence, tools (+ the
    built-in tools), system prompt, agents and the agent loop (which creates ``config.agents``).
    Each is a child fiber of ``ctx``'s, so disposing that fiber (or closing the runtime)
    unloads everything in reverse.
    """
    await ctx.plugin(LlmService)
    for provider in config.llm.providers:
        if provider.type == "openai":
            options: dict[str, Any] = {
                "name": provider.name,
                "base_url": provider.base_url,
                "api_key_env": provider.api_key_env,
                "models": provider.models,
            }
            if provider.idle_timeout is not None:
                options["idle_timeout"] = provider.idle_timeout
            await ctx.plugin(
                OpenAiProvider, OpenAiProvider.Config(**options), name=f"llm:{provider.name}"
            )
        elif provider.type == "offline":
            delay = 0.01 if provider.delay is None else provider.delay
            await ctx.plugin(
                OfflineProvider,
                OfflineProvider.Config(provider.name, delay),
                name=f"llm:{provider.name}",
            )
        else:
            await ctx.plugin(
                ScriptedProvider,
                ScriptedProvider.Config(provider.name, provider.responses, provider.delay or 0.0),
                name=f"llm:{provider.name}",
            )
    if config.llm.retry is not None:
        retry = config.llm.retry
        policy = RetryPolicy(
            max_attempts=retry.max_attempts,
            initial_delay=retry.initial_delay,
            max_delay=retry.max_delay,
            jitter=retry.jitter,
        )
        await ctx.plugin(RetryPlugin, RetryPlugin.Config(policy=policy))
    else:
        await ctx.plugin(RetryPlugin)
    await ctx.plugin(SessionStore)
    await mount_persistence(ctx, config.persistence)
    await ctx.plugin(ToolRegistry)
    if config.tools.builtin:
        await ctx.plugin(
            BuiltinTools,
            BuiltinTools.Config(
                root=config.tools.root,
                enabled=config.tools.builtin,
                shell=config.tools.shell,
                shell_timeout=config.tools.shell_timeout,
            ),
        )
    await ctx.plugin(SystemPrompt, SystemPrompt.Config(persona=config.system_prompt.persona))
    await ctx.plugin(AgentRegistry)
    default = config.default_provider
    agents = tuple(
        attrs.evolve(
            row,
            model=row.model or config.provider(row.provider or default.name).default_model,
            resume_session_id=row.resume_session_id or None,
        )
        for row in config.agents
    )
    await ctx.plugin(
        AgentLoop,
        AgentLoop.Config(
            agents=agents,
            provider=default.name,
            model=default.default_model,
            max_parallel_tool_calls=config.max_parallel_tool_calls,
        ),
    )


async def mount_persistence(ctx: Context, persistence: PersistenceConfig) -> None:
    """Mount the ``session_persistence`` plugin ``persistence`` describes (none for ``none``)."""
    if persistence.type == "jsonl":
        await ctx.plugin(
            JsonlPersistence, JsonlPersistence.Config(persistence.path or ".trio-agent/sessions")
        )
    elif persistence.type == "sqlite":
        await ctx.plugin(
            SqlitePersistence,
            SqlitePersistence.Config(persistence.path or ".trio-agent/sessions.sqlite3"),
        )
    elif persistence.type == "memory":
        await ctx.plugin(MemoryPersistence)


@contextlib.asynccontextmanager
async def open_harness(config: HarnessConfig | None = None) -> AsyncIterator[Context]:
    """Open a runtime with the whole standard harness mounted; yield its root context.

    ``config`` defaults to the embedded defaults (the offline model, the built-in tools in the
    current directory, jsonl sessions under ``.trio-agent/sessions``)::

        async with trio_agent.open_harness(load_config("trio-agent.yml")) as ctx:
            agent = ctx.agent_loop.create("helper")
            agent.send("list files")
            await agent.wait_idle()
    """
    async with open_runtime() as ctx:
        await mount_config(ctx, config or HarnessConfig())
        yield ctx
