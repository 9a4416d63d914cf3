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
      protect: ["secrets/**"]
    durability: step            # or turn: flush at turn ends only
    max_steps: 50               # model requests per turn (null: unlimited); agents[] may override
    mcp:
      servers:
        - {name: fs, command: npx, args: [-y, "@modelcontextprotocol/server-filesystem", .]}
    plugins:
      - use: my_package.plugins:Greeter        # an import path ...
        config: {greeting: hello}
      - use: some-installed-plugin             # ... or an entry point in trio_agent.plugins
    agents:
      - id: coder
        resume_session_id: ${TRIO_AGENT_RESUME:-}

String values may use ``${VAR}`` (the variable must be set) and ``${VAR:-default}``; ``$${`` is a
literal ``${``. The file is structured into the attrs classes below with the project's cattrs
converter: each ``llm.providers`` entry, by its ``type``, straight into that provider plugin's
``Config`` (see :data:`ProviderConfig`), ``llm.retry`` into :class:`~trio_agent.llm.RetryPolicy`,
``persistence`` by its ``type`` into that backend plugin's ``Config``, each built-in integration
section (``mcp``) and each ``plugins`` entry's ``config`` into its plugin's ``Config``. An unknown
key (a key of another provider type included), a wrong type or a value out of range is a
:class:`ConfigError` naming its key path (``$.plugins[2].config.timeout: expected a number``).
docs/configuration.md is the full reference, docs/plugins.md the guide to plugins.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.metadata
import logging
import os
import re
import types
import typing
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs
import cattrs
import yaml
from cattrs.gen import make_dict_structure_fn, override
from cattrs.v import format_exception

from . import _serde
from .agent import AgentRegistry, RetryPlugin
from .approval import ApprovalPolicy
from .errors import TrioAgentError
from .llm import LlmService, OfflineProvider, OpenAiProvider, RetryPolicy, ScriptedProvider
from .loop import AgentConfig, AgentLoop
from .prompt import SystemPrompt
from .redaction import Redactor
from .runtime import Context, Fiber, FiberState, Plugin, open_runtime
from .session import SessionStore
from .tools import ToolRegistry
from .tools.builtin import (
    BUILTIN_TOOL_NAMES,
    BuiltinTools,
    BuiltinToolsConfig,
    BuiltinToolsConfigError,
)
from .usage import UsageService

__all__ = [
    "DEFAULT_PERSONA",
    "PLUGIN_ENTRY_POINT_GROUP",
    "ConfigError",
    "ConfiguredPlugin",
    "HarnessConfig",
    "LlmConfig",
    "PersistenceConfig",
    "PluginEntry",
    "ProviderConfig",
    "ResolvedPlugin",
    "SystemPromptConfig",
    "ToolsConfig",
    "configured_plugins",
    "default_config",
    "installed_plugins",
    "load_config",
    "mount_config",
    "mount_persistence",
    "mount_redactor",
    "open_harness",
    "parse_config",
    "resolve_plugins",
]

logger = logging.getLogger("trio_agent.config")

DEFAULT_PERSONA = (
    "You are trio-agent, a careful assistant working in the directory {{cwd}} with the model "
    "{{model}}. Use the tools to look before you answer, keep changes small, and say plainly what "
    "you did."
)

#: The entry-point group a distribution lists its plugins under, so that
#: ``plugins: [{use: NAME}]`` finds them (see docs/plugins.md).
PLUGIN_ENTRY_POINT_GROUP = "trio_agent.plugins"

_DEFAULT_MODELS = {"offline": "offline", "scripted": "scripted"}
#: The model agents on a plugin's provider send when they name none; the adapter decides what
#: it means (as for an openai provider without ``models``).
_PLUGIN_PROVIDER_MODEL = "default"


class ConfigError(TrioAgentError, ValueError):
    """The configuration file (or value) is invalid; the message names the key path."""


# --- plugins named by import path ---------------------------------------------------------------


@attrs.frozen
class _Lazy:
    """A plugin named by import path, imported only when a config uses it.

    ``extra`` is the trio-agent extra its dependencies come with (for the install hint);
    ``parse`` names a function of the same module, ``parse(data, *, path) -> Config``, that
    structures the section with errors naming ``path`` (otherwise the shared converter does).
    """

    use: str
    extra: str | None = None
    parse: str | None = None


#: The top-level sections that configure a built-in integration, in the order they are mounted
#: (after the core services, before ``plugins:``). Each section is structured into its plugin's
#: ``Config`` and mounted like a ``plugins:`` entry named after its key. The core imports none
#: of them unless the section is present. Adding an integration is one row (docs/plugins.md).
_INTEGRATIONS: dict[str, _Lazy] = {
    "mcp": _Lazy("trio_agent.mcp:McpServers", extra="mcp", parse="parse_mcp_config"),
    "subagents": _Lazy("trio_agent.subagents:SubagentService", parse="parse_subagents_config"),
    "compaction": _Lazy("trio_agent.compaction:Compaction"),
    "otel": _Lazy("trio_agent.otel:OtelTracing", extra="otel"),
}

#: ``persistence.type`` -> the backend plugin (None: no persistence); the section's other keys
#: are that plugin's ``Config``. Adding a backend is one row.
_PERSISTENCE_BACKENDS: dict[str, _Lazy | None] = {
    "jsonl": _Lazy("trio_agent.persistence:JsonlPersistence"),
    "sqlite": _Lazy("trio_agent.persistence:SqlitePersistence"),
    "memory": _Lazy("trio_agent.persistence:MemoryPersistence"),
    "postgres": _Lazy("trio_agent.persistence:PostgresPersistence", extra="postgres"),
    "none": None,
}

_IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _at(where: str, message: str) -> str:
    return f"{where}: {message}" if where else message


def _import(use: str, where: str, *, extra: str | None = None) -> Any:
    """The object ``use`` (``package.module:Name``) names, imported now.

    Raises:
        ConfigError: the path is malformed, the module cannot be imported (with the install
            hint when ``extra`` is given and a dependency is missing), or it has no such name.
    """
    if _IMPORT_PATH.fullmatch(use) is None:
        raise ConfigError(
            _at(where, f"{use!r} is not an import path; expected package.module:Name")
        )
    module_name, _, attribute = use.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ImportError as exc:
        missing = exc.name or ""
        if extra is not None and missing.partition(".")[0] != "trio_agent":
            raise ConfigError(
                _at(
                    where,
                    f"{use} needs the {extra!r} extra, which is not installed (no module "
                    f"{missing!r}): pip install 'trio-agent[{extra}]'",
                )
            ) from exc
        raise ConfigError(_at(where, f"cannot import {use}: {exc}")) from exc
    except Exception as exc:
        raise ConfigError(
            _at(where, f"importing {module_name} for {use} failed: {type(exc).__name__}: {exc}")
        ) from exc
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise ConfigError(
                _at(where, f"cannot import {use}: module {module_name} has no {attribute!r}")
            ) from None
    return found


def installed_plugins() -> tuple[importlib.metadata.EntryPoint, ...]:
    """The plugins installed in the :data:`PLUGIN_ENTRY_POINT_GROUP` entry-point group, by
    name (``ep.name``, ``ep.value`` is the import path, ``ep.dist`` the distribution)."""
    found = importlib.metadata.entry_points(group=PLUGIN_ENTRY_POINT_GROUP)
    # The same distribution seen twice on sys.path lists the same entry point twice.
    unique = {(ep.name, ep.value): ep for ep in found}
    return tuple(sorted(unique.values(), key=lambda ep: (ep.name, ep.value)))


def _load_entry_point(name: str, where: str) -> Any:
    installed = installed_plugins()
    found = [ep for ep in installed if ep.name == name]
    if not found:
        known = ", ".join(ep.name for ep in installed) or "none"
        raise ConfigError(
            _at(
                where,
                f"no installed plugin is called {name!r} (the {PLUGIN_ENTRY_POINT_GROUP} entry "
                f"points are: {known}); install its distribution, or write an import path "
                "package.module:Name",
            )
        )
    if len(found) > 1:
        raise ConfigError(
            _at(
                where,
                f"several installed plugins are called {name!r} "
                f"({', '.join(ep.value for ep in found)}); write the import path of the one "
                "you mean",
            )
        )
    try:
        return found[0].load()
    except Exception as exc:
        raise ConfigError(
            _at(
                where,
                f"cannot import plugin {name!r} ({found[0].value}): {type(exc).__name__}: {exc}",
            )
        ) from exc


def _structure_plugin_config(
    plugin: Any, data: object, path: str, parse: Callable[..., object] | None = None
) -> object:
    """``data`` structured into ``plugin.Config`` (an instance passes through; a plugin without
    an attrs ``Config`` gets ``data`` as it is); errors name the key path under ``path``."""
    config_cls = getattr(plugin, "Config", None)
    if parse is not None:
        if config_cls is not None and isinstance(data, config_cls):
            return data
        try:
            return parse(data, path=path)
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
    if config_cls is None or not attrs.has(config_cls) or isinstance(data, config_cls):
        return data
    try:
        return _serde.structure({} if data is None else data, config_cls)
    except cattrs.BaseValidationError as exc:
        raise ConfigError("; ".join(_problems(exc, path))) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _declared_providers(plugin: Any, config: object, where: str) -> tuple[str, ...]:
    """The provider names a plugin says it registers: its Config's ``llm_providers()``, else
    the plugin's ``llm_providers`` attribute, else none."""
    method = getattr(config, "llm_providers", None)
    names = method() if callable(method) else getattr(plugin, "llm_providers", ())
    if not isinstance(names, tuple | list) or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(
            f"{where}: the plugin's llm_providers is {names!r}; expected a tuple of provider "
            "names (non-empty strings)"
        )
    return tuple(names)


# --- the config classes ---------------------------------------------------------------------


#: One ``llm.providers`` entry: the ``Config`` of the provider plugin its ``type`` names
#: (``openai``: any OpenAI-compatible server, ``offline``: the built-in rule-based model,
#: ``scripted``: canned replies, for tests). Each is structured straight into that class, so a
#: key another type has is an unknown key here.
ProviderConfig: TypeAlias = OpenAiProvider.Config | OfflineProvider.Config | ScriptedProvider.Config

#: The plugin that mounts each kind of provider entry.
_PROVIDER_PLUGINS: dict[type[ProviderConfig], Plugin] = {
    OpenAiProvider.Config: OpenAiProvider,
    OfflineProvider.Config: OfflineProvider,
    ScriptedProvider.Config: ScriptedProvider,
}

_serde.register_tagged_union(ProviderConfig, {cls: cls.type for cls in _PROVIDER_PLUGINS})


def _default_model(provider: ProviderConfig) -> str:
    """The model agents on ``provider`` use when they name none."""
    if provider.models:
        return provider.models[0]
    return _DEFAULT_MODELS.get(provider.type, "default")


@attrs.frozen
class LlmConfig:
    """Providers, which one agents use by default, and the retry policy (omit ``retry`` to
    use each provider's own)."""

    providers: tuple[ProviderConfig, ...] = (OfflineProvider.Config(),)
    default_provider: str | None = None
    retry: RetryPolicy | None = None


def _check_backend_type(_: object, __: object, value: object) -> None:
    if not isinstance(value, str) or value not in _PERSISTENCE_BACKENDS:
        raise ConfigError(
            f"type {value!r} is not a persistence backend; expected one of: "
            f"{', '.join(_PERSISTENCE_BACKENDS)}"
        )


@attrs.frozen
class PersistenceConfig:
    """Where sessions are stored: the backend ``type`` and that backend plugin's own
    ``config``.

    ``type`` is ``jsonl`` (default: ``JsonlPersistence``, a directory), ``sqlite``
    (``SqlitePersistence``, a file), ``memory`` (``MemoryPersistence``) or ``none``. In
    ``trio-agent.yml`` the section's other keys are structured into that plugin's ``Config``
    (``{type: sqlite, path: s.db}``); in a program, ``config`` is that ``Config`` (or None for
    its defaults): ``PersistenceConfig("sqlite", SqlitePersistence.Config("s.db"))``.
    """

    type: str = attrs.field(default="jsonl", validator=_check_backend_type)
    config: object = attrs.field(default=None, hash=False)


def _backend(persistence: PersistenceConfig) -> tuple[Any, object] | None:
    """The backend plugin ``persistence`` names and its structured ``Config`` (None for
    ``none``)."""
    row = _PERSISTENCE_BACKENDS[persistence.type]
    if row is None:
        if persistence.config is not None:
            raise ConfigError("$.persistence: type none takes no other keys")
        return None
    plugin = _import(row.use, "$.persistence", extra=row.extra)
    return plugin, _structure_plugin_config(plugin, persistence.config, "$.persistence")


@attrs.frozen
class SystemPromptConfig:
    """The persona every agent shares (``{{model}}`` and ``{{cwd}}`` are filled per agent)."""

    persona: str = DEFAULT_PERSONA


@attrs.frozen
class ToolsConfig:
    """Built-in tools: which ones, the workspace root they are confined to (default: the current
    directory), the shell policy (``deny``, ``allow``, or a list of allowed command prefixes),
    the paths they never touch besides the harness's own (``protect``), the environment
    variables shell commands get besides the basic ones (``shell_env``), and how long a shell
    command and a ``grep`` may take (``search_timeout``: None for the tool's default), and
    which calls need a yes (``approval``: see docs/approvals.md)."""

    builtin: tuple[str, ...] = BUILTIN_TOOL_NAMES
    root: str | None = None
    shell: str | tuple[str, ...] = "deny"
    shell_timeout: float = 30.0
    protect: tuple[str, ...] = ()
    shell_env: tuple[str, ...] = ()
    search_timeout: float | None = None
    approval: ApprovalPolicy.Config = attrs.field(factory=ApprovalPolicy.Config)


@attrs.frozen
class PluginEntry:
    """One ``plugins:`` entry: the plugin ``use`` names (``package.module:Name``, or the name
    of an entry point in :data:`PLUGIN_ENTRY_POINT_GROUP`), its fiber ``name`` (default:
    ``use``) and its ``config`` (a mapping structured into the plugin's ``Config``, or that
    ``Config`` itself; None for its defaults)."""

    use: str
    name: str | None = None
    config: object = attrs.field(default=None, hash=False)


def _read_only(value: Mapping[str, object]) -> Mapping[str, object]:
    return types.MappingProxyType(dict(value))


@attrs.frozen
class HarnessConfig:
    """The whole ``trio-agent.yml``.

    ``integrations`` holds the built-in integration sections present (``mcp``), each the
    section's data or its plugin's ``Config``; ``path`` is the file :func:`load_config` read
    (the built-in tools never read or write it).
    """

    llm: LlmConfig = LlmConfig()
    persistence: PersistenceConfig = PersistenceConfig()
    system_prompt: SystemPromptConfig = SystemPromptConfig()
    tools: ToolsConfig = ToolsConfig()
    agents: tuple[AgentConfig, ...] = ()
    max_parallel_tool_calls: int = 10
    #: When agents make their session durable (``AgentOptions.durability``), unless their
    #: ``agents[]`` row says otherwise.
    durability: Literal["step", "turn"] = "step"
    #: ``AgentOptions.max_steps`` of every ``agents[]`` row that sets none (``null``: unlimited).
    max_steps: int | None = 50
    plugins: tuple[PluginEntry, ...] = ()
    integrations: Mapping[str, object] = attrs.field(factory=dict, converter=_read_only, hash=False)
    path: str | None = attrs.field(default=None, eq=False, kw_only=True)

    @property
    def default_provider_name(self) -> str:
        """The name of the provider agents use when they name none (``llm.default_provider``,
        else the first of ``llm.providers``); it may be a plugin's provider."""
        return self.llm.default_provider or self.llm.providers[0].name

    @property
    def default_provider(self) -> ProviderConfig:
        """The ``llm.providers`` entry agents use when they name none.

        Raises:
            ConfigError: ``llm.default_provider`` names a plugin's provider (use
                :attr:`default_provider_name`).
        """
        return self.provider(self.default_provider_name)

    def default_model(self, provider: str) -> str:
        """The model agents on ``provider`` use when they name none: the entry's first
        ``models`` name (else ``offline``, ``scripted`` or ``default`` by type), or
        ``default`` for a plugin's provider (its adapter decides what that means)."""
        for entry in self.llm.providers:
            if entry.name == provider:
                return _default_model(entry)
        return _PLUGIN_PROVIDER_MODEL

    def provider(self, name: str) -> ProviderConfig:
        """The ``llm.providers`` entry called ``name``.

        Raises:
            ConfigError: there is none (a plugin's provider has no entry).
        """
        for provider in self.llm.providers:
            if provider.name == name:
                return provider
        known = ", ".join(p.name for p in self.llm.providers)
        raise ConfigError(
            f"no llm.providers entry is called {name!r} (a plugin may register it); the "
            f"config defines: {known}"
        )


# --- structuring hooks --------------------------------------------------------------------------


def _text(value: object, _: object) -> str:
    if isinstance(value, str):
        return value
    raise ConfigError(f"expected a string, got {value!r}")


def _optional_text(value: object, _: object) -> str | None:
    return None if value is None else _text(value, _)


def _strings(what: str) -> Callable[[object, object], tuple[str, ...]]:
    def structure(value: object, _: object) -> tuple[str, ...]:
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise ConfigError(f"expected a list of {what}, got {value!r}")

    return structure


def _mapping_or_none(value: object, _: object) -> object:
    if value is None or isinstance(value, Mapping):
        return value
    raise ConfigError(f"expected a mapping of the plugin's config keys, got {value!r}")


def _structure_persistence(value: object, _: object) -> PersistenceConfig:
    if value is None:
        return PersistenceConfig()
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"expected a mapping with a type ({', '.join(_PERSISTENCE_BACKENDS)}), got {value!r}"
        )
    kind = value.get("type", "jsonl")
    _check_backend_type(None, None, kind)
    rest = {k: v for k, v in value.items() if k != "type"}
    row = _PERSISTENCE_BACKENDS[kind]
    if row is None:
        if rest:
            raise ConfigError(
                f"unknown key(s) {', '.join(sorted(rest))}: type {kind} takes no other keys"
            )
        return PersistenceConfig(kind)
    # Errors raised here get their key path from the converter ($.persistence.<key>).
    plugin = _import(row.use, "", extra=row.extra)
    return PersistenceConfig(kind, _serde.structure(rest, plugin.Config))


_serde.converter.register_structure_hook(PersistenceConfig, _structure_persistence)

# --- tools.approval (#14) ---
_APPROVAL_DEFAULTS = ("ask", "allow", "deny")


def _approval_default(value: object, _: object) -> str | None:
    if value is None or (isinstance(value, str) and value in _APPROVAL_DEFAULTS):
        return value
    raise ConfigError(f"expected one of {', '.join(_APPROVAL_DEFAULTS)}; got {value!r}")


_structure_approval_fields = make_dict_structure_fn(
    ApprovalPolicy.Config,
    _serde.converter,
    _cattrs_forbid_extra_keys=True,
    default=override(struct_hook=_approval_default),
    allow=override(struct_hook=_strings("tool names")),
    deny=override(struct_hook=_strings("tool names")),
    mode=override(omit=True),
)


def _structure_approval(value: object, cls: type[ApprovalPolicy.Config]) -> ApprovalPolicy.Config:
    if value is None:
        return ApprovalPolicy.Config()
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"expected a mapping ({{default: ask|allow|deny, allow: [...], deny: [...]}}), "
            f"got {value!r}"
        )
    return _structure_approval_fields(value, cls)


# --- end tools.approval ---
_serde.converter.register_structure_hook(
    ToolsConfig,
    make_dict_structure_fn(
        ToolsConfig,
        _serde.converter,
        _cattrs_forbid_extra_keys=True,
        builtin=override(struct_hook=_strings("tool names")),
        protect=override(struct_hook=_strings("globs or paths")),
        shell_env=override(struct_hook=_strings("environment variable names")),
        approval=override(struct_hook=_structure_approval),
    ),
)
_serde.converter.register_structure_hook(
    PluginEntry,
    make_dict_structure_fn(
        PluginEntry,
        _serde.converter,
        _cattrs_forbid_extra_keys=True,
        use=override(struct_hook=_text),
        name=override(struct_hook=_optional_text),
        config=override(struct_hook=_mapping_or_none),
    ),
)


def _plugin_entries(value: object, _: object) -> tuple[PluginEntry, ...]:
    if not isinstance(value, list | tuple):
        raise ConfigError(
            f"expected a list of plugin entries ({{use: package.module:Name}}), got {value!r}"
        )
    return _serde.structure(value, tuple[PluginEntry, ...])


_structure_harness_fields = make_dict_structure_fn(
    HarnessConfig,
    _serde.converter,
    _cattrs_forbid_extra_keys=True,
    plugins=override(struct_hook=_plugin_entries),
    integrations=override(omit=True),
    path=override(omit=True),
)


def _default_max_steps(value: Any, config: HarnessConfig) -> HarnessConfig:
    """Give each ``agents[]`` row without its own ``max_steps`` the top-level one."""
    rows = value.get("agents")
    if "max_steps" not in value or not isinstance(rows, list | tuple):
        return config
    agents = tuple(
        row
        if isinstance(raw, Mapping) and "max_steps" in raw
        else attrs.evolve(row, max_steps=config.max_steps)
        for raw, row in zip(rows, config.agents, strict=False)
    )
    return attrs.evolve(config, agents=agents)


def _structure_harness(value: Any, cls: type[HarnessConfig]) -> HarnessConfig:
    sections = {key: value[key] for key in _INTEGRATIONS if key in value}
    config = _structure_harness_fields(
        {key: item for key, item in value.items() if key not in _INTEGRATIONS}, cls
    )
    config = _default_max_steps(value, config)
    return attrs.evolve(config, integrations=sections) if sections else config


_serde.converter.register_structure_hook(HarnessConfig, _structure_harness)


# --- plugins from config --------------------------------------------------------------------


@attrs.frozen
class ConfiguredPlugin:
    """A plugin the config names, not imported yet: a built-in integration section or a
    ``plugins:`` entry (:func:`configured_plugins` lists them in mount order).

    Attributes:
        source: Its key path (``$.mcp``, ``$.plugins[0]``).
        name: Its fiber's name (the entry's ``name``, the section's key, or ``use``).
        use: The import path, or the entry-point name.
        config: Its config as given (a mapping, the plugin's ``Config``, or None).
        section: The top-level key of a built-in integration; None for a ``plugins:`` entry.
    """

    source: str
    name: str
    use: str
    config: object = attrs.field(hash=False)
    section: str | None = None

    def resolve(self) -> ResolvedPlugin:
        """Import the plugin and structure its config.

        Raises:
            ConfigError: the plugin cannot be imported (naming it, with the install hint when
                an integration's extra is missing), or its config is invalid (naming the key
                path).
        """
        parse = None
        if self.section is not None:
            row = _INTEGRATIONS[self.section]
            plugin = _import(row.use, self.source, extra=row.extra)
            if row.parse is not None:
                module = row.use.partition(":")[0]
                parse = _import(f"{module}:{row.parse}", self.source)
            config_path = self.source
        else:
            if ":" in self.use:
                plugin = _import(self.use, self.source)
            else:
                plugin = _load_entry_point(self.use, self.source)
            config_path = f"{self.source}.config"
        if not callable(plugin):
            raise ConfigError(
                f"{self.source}: {self.use} is a {type(plugin).__name__}, not a plugin (a "
                "class or function called with (ctx, config))"
            )
        config = _structure_plugin_config(plugin, self.config, config_path, parse)
        providers = _declared_providers(plugin, config, self.source)
        return ResolvedPlugin(self, plugin, config, providers)


@attrs.frozen
class ResolvedPlugin:
    """A :class:`ConfiguredPlugin` imported: the ``plugin`` callable, its structured
    ``config``, and the LLM ``providers`` it declares it registers."""

    entry: ConfiguredPlugin
    plugin: Plugin
    config: object = attrs.field(hash=False)
    providers: tuple[str, ...] = ()


def configured_plugins(config: HarnessConfig) -> tuple[ConfiguredPlugin, ...]:
    """The plugins ``config`` names, in mount order: the built-in integration sections in
    their fixed order, then the ``plugins:`` entries in file order. Nothing is imported.

    Raises:
        ConfigError: ``config.integrations`` has a key that is no built-in integration.
    """
    unknown = sorted(set(config.integrations) - set(_INTEGRATIONS))
    if unknown:
        raise ConfigError(
            f"integrations: unknown section(s) {', '.join(unknown)}; the built-in "
            f"integrations are: {', '.join(_INTEGRATIONS)}"
        )
    sections = [
        ConfiguredPlugin(f"$.{key}", key, row.use, config.integrations[key], key)
        for key, row in _INTEGRATIONS.items()
        if key in config.integrations
    ]
    entries = [
        ConfiguredPlugin(f"$.plugins[{i}]", entry.name or entry.use, entry.use, entry.config)
        for i, entry in enumerate(config.plugins)
    ]
    return (*sections, *entries)


def resolve_plugins(config: HarnessConfig) -> tuple[ResolvedPlugin, ...]:
    """Import every plugin ``config`` names and structure its config (see
    :func:`configured_plugins` for the order).

    Raises:
        ConfigError: two plugins share a name, a plugin cannot be imported, its config is
            invalid, or it declares a provider name that is already taken.
    """
    entries = configured_plugins(config)
    first: dict[str, ConfiguredPlugin] = {}
    for entry in entries:
        if entry.name in first:
            raise ConfigError(
                f"{entry.source}: the name {entry.name!r} is already taken by "
                f"{first[entry.name].source}; give each plugin its own name"
            )
        first[entry.name] = entry
    resolved = tuple(entry.resolve() for entry in entries)
    _provider_owners(config, resolved)
    return resolved


def _provider_owners(
    config: HarnessConfig, plugins: Sequence[ResolvedPlugin]
) -> dict[str, tuple[str, object]]:
    """Every provider name, with where it is defined and its config.

    Raises:
        ConfigError: a name is defined twice.
    """
    owners: dict[str, tuple[str, object]] = {}
    for i, provider in enumerate(config.llm.providers):
        owners.setdefault(provider.name, (f"$.llm.providers[{i}]", provider))
    for plugin in plugins:
        for name in plugin.providers:
            if name in owners:
                raise ConfigError(
                    f"{plugin.entry.source}: plugin {plugin.entry.name!r} registers the "
                    f"provider {name!r}, which {owners[name][0]} already defines; rename one"
                )
            owners[name] = (plugin.entry.source, plugin.config)
    return owners


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
    text: str,
    *,
    source: str = "<config>",
    environ: Mapping[str, str] | None = None,
    import_plugins: bool = True,
) -> HarnessConfig:
    """Parse YAML ``text`` into a :class:`HarnessConfig`.

    The plugins it names (``plugins:`` and the integration sections) are imported and their
    configs structured, so a config that parses mounts. ``import_plugins=False`` leaves them
    as written and skips the checks that need them (providers named by agents), for tools
    that only list a config, such as ``trio-agent plugins``.

    Raises:
        ConfigError: invalid YAML, an unset ``${VAR}``, an unknown key, a wrong type, an
            inconsistent value, or a plugin that cannot be imported; the message names
            ``source`` and the key path.
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
        try:
            config = _serde.structure(data, HarnessConfig)
        except cattrs.BaseValidationError as exc:
            raise ConfigError("; ".join(_problems(exc, "$"))) from None
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        if import_plugins:
            config = _checked(config)[0]
        else:
            _check_shape(config)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from exc.__cause__
    return config


def _problems(exc: BaseException, path: str, expected: Any = None) -> Iterator[str]:
    """``"<key path>: <what is wrong>"`` for every leaf problem of a cattrs error tree."""
    if isinstance(exc, cattrs.IterableValidationError):
        with_index, plain = exc.group_exceptions()
        for inner, index in with_index:
            yield from _problems(inner, f"{path}[{index.index!r}]", index.type)
        for inner in plain:
            yield from _problems(inner, path)
    elif isinstance(exc, cattrs.ClassValidationError):
        with_key, plain = exc.group_exceptions()
        for inner, key in with_key:
            yield from _problems(inner, f"{path}.{key.name}", key.type)
        for inner in plain:
            yield from _problems(inner, path)
    else:
        yield f"{path}: {_describe(exc, expected)}"


_SCALARS = {float: "a number", int: "a whole number", bool: "true or false"}


def _describe(exc: BaseException, expected: Any) -> str:
    """What went wrong, in words: our own messages (and validators', which cattrs reports
    without a type) as they are; cattrs' wording otherwise, plainer for numbers."""
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown key(s) {', '.join(sorted(exc.extra_fields))}"
    if isinstance(exc, KeyError):
        return "required key missing"
    if isinstance(exc, TrioAgentError) or expected is None or expected == ProviderConfig:
        return str(exc) or format_exception(exc, expected)
    options = [t for t in typing.get_args(expected) if t is not type(None)]
    if typing.get_origin(expected) in (typing.Union, types.UnionType) and len(options) == 1:
        expected = options[0]  # X | None: say what X is
    if isinstance(exc, TypeError | ValueError) and expected in _SCALARS:
        return f"expected {_SCALARS[expected]}"
    if isinstance(exc, TypeError | AttributeError) and attrs.has(expected):
        return "expected a mapping"
    return format_exception(exc, expected)


def load_config(
    path: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    import_plugins: bool = True,
) -> HarnessConfig:
    """Read and parse the config file at ``path`` (see :func:`parse_config`); the result's
    ``path`` is the file, which the built-in tools then protect."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read the config file: {exc.strerror or exc}") from exc
    config = parse_config(text, source=str(file), environ=environ, import_plugins=import_plugins)
    return attrs.evolve(config, path=str(file))


def _check_shape(config: HarnessConfig) -> None:
    """The checks that span several keys and need no plugin (each key's own shape is the
    converter's job)."""
    llm = config.llm
    if not llm.providers:
        raise ConfigError("$.llm.providers: define at least one provider")
    names = [p.name for p in llm.providers]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ConfigError(f"$.llm.providers[{i}].name: provider {name!r} is defined twice")
    ids = [agent.id for agent in config.agents]
    for i, agent_id in enumerate(ids):
        if agent_id in ids[:i]:
            raise ConfigError(f"$.agents[{i}].id: agent {agent_id!r} is defined twice")
    if config.max_parallel_tool_calls < 1:
        raise ConfigError("$.max_parallel_tool_calls: must be at least 1")
    _check_max_steps("$.max_steps", config.max_steps)
    for i, agent in enumerate(config.agents):
        _check_max_steps(f"$.agents[{i}].max_steps", agent.max_steps)
        if agent.max_tokens is not None and agent.max_tokens < 1:
            raise ConfigError(
                f"$.agents[{i}].max_tokens: must be at least 1, got {agent.max_tokens!r}"
            )
    tools = config.tools
    unknown = sorted(set(tools.builtin) - set(BUILTIN_TOOL_NAMES))
    if unknown:
        raise ConfigError(
            f"$.tools.builtin: unknown tool(s) {', '.join(unknown)}; known: "
            f"{', '.join(BUILTIN_TOOL_NAMES)}"
        )
    if isinstance(tools.shell, str) and tools.shell not in ("allow", "deny"):
        raise ConfigError(
            "$.tools.shell: expected 'allow', 'deny' or a list of command prefixes, got "
            f"{tools.shell!r}"
        )


def _check_persistence_path(persistence: PersistenceConfig) -> None:
    """#23: a file-backed store's ``path`` is a writable directory, or can become one."""
    path = getattr(persistence.config, "path", None)
    if persistence.type not in ("jsonl", "sqlite") or not isinstance(path, str):
        return
    target = Path(path)
    if persistence.type == "sqlite":
        target = target.parent
    probe = target
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe == target and not target.is_dir():
        raise ConfigError(f"$.persistence.path: {path!r} exists and is not a directory")
    if not probe.is_dir():
        raise ConfigError(f"$.persistence.path: {str(probe)!r} is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(f"$.persistence.path: {str(probe)!r} is not writable")


def _checked(
    config: HarnessConfig, protect_paths: Sequence[str] = ()
) -> tuple[HarnessConfig, tuple[ResolvedPlugin, ...], BuiltinToolsConfig]:
    """``config`` with its plugins' configs structured, the plugins, and the built-in tools'
    config, after every cross-key check.

    Raises:
        ConfigError: the first problem found, naming its key path.
    """
    _check_shape(config)
    _check_persistence_path(config.persistence)
    plugins = resolve_plugins(config)
    owners = _provider_owners(config, plugins)
    known = ", ".join(owners)
    wanted = config.llm.default_provider
    if wanted is not None and wanted not in owners:
        raise ConfigError(
            f"$.llm.default_provider: {wanted!r} is not a defined provider (known: {known})"
        )
    for i, agent in enumerate(config.agents):
        if agent.provider is not None and agent.provider not in owners:
            raise ConfigError(
                f"$.agents[{i}].provider: {agent.provider!r} is not a defined provider "
                f"(known: {known})"
            )
    keys = {name: getattr(cfg, "api_key_env", None) for name, (_, cfg) in owners.items()}
    deny = {env: name for name, env in keys.items() if isinstance(env, str) and env}
    tools = _builtin_tools_config(config.tools, deny, protect_paths)
    by_source = {plugin.entry.source: plugin.config for plugin in plugins}
    sections = {key: by_source[f"$.{key}"] for key in config.integrations}
    entries = tuple(
        attrs.evolve(entry, config=by_source[f"$.plugins[{i}]"])
        for i, entry in enumerate(config.plugins)
    )
    return attrs.evolve(config, plugins=entries, integrations=sections), plugins, tools


_TOOLS_PROBLEM = re.compile(r"BuiltinToolsConfig\.(\w+)((?:\[\d+\])?): ")
#: ``BuiltinToolsConfig`` fields whose ``tools:`` key has another name.
_TOOLS_KEYS = {"enabled": "builtin"}


def _builtin_tools_config(
    tools: ToolsConfig, deny: Mapping[str, str], protect_paths: Sequence[str]
) -> BuiltinToolsConfig:
    """The built-in tools' config: ``tools``, the harness's files to protect, and the API key
    variables (``deny``: variable -> provider) shell commands never get.

    Raises:
        ConfigError: ``tools.shell_env`` names an API key variable, or a value is invalid.
    """
    for name in tools.shell_env:
        if name in deny:
            raise ConfigError(
                f"$.tools.shell_env: {name} is the API key variable of provider "
                f"{deny[name]!r}; shell commands never get API keys: remove it from shell_env"
            )
    defaults = BuiltinToolsConfig()
    try:
        return BuiltinToolsConfig(
            root=tools.root,
            enabled=tools.builtin,
            shell=tools.shell,
            shell_timeout=tools.shell_timeout,
            search_timeout=defaults.search_timeout
            if tools.search_timeout is None
            else tools.search_timeout,
            protect=tools.protect,
            protect_paths=tuple(protect_paths),
            shell_env=tools.shell_env,
            shell_env_deny=tuple(deny),
        )
    except BuiltinToolsConfigError as exc:
        text = str(exc)
        match = _TOOLS_PROBLEM.match(text)
        if match is None:
            raise ConfigError(f"$.tools: {text}") from None
        key = _TOOLS_KEYS.get(match.group(1), match.group(1)) + match.group(2)
        raise ConfigError(f"$.tools.{key}: {text[match.end() :]}") from None


def default_config(environ: Mapping[str, str] | None = None) -> tuple[HarnessConfig, str]:
    """The embedded defaults the CLI runs on without a config file, and a note saying which
    provider was picked: DeepSeek if ``DEEPSEEK_API_KEY`` is set, else OpenAI if
    ``OPENAI_API_KEY`` is set, else the offline model. ``DEEPSEEK_BASE_URL`` /
    ``OPENAI_BASE_URL`` override the endpoint."""
    env = os.environ if environ is None else environ
    if env.get("DEEPSEEK_API_KEY"):
        provider = OpenAiProvider.Config(
            name="deepseek",
            base_url=env.get("DEEPSEEK_BASE_URL") or "https://api.deepseek.com",
            api_key_env="DEEPSEEK_API_KEY",
            models=("deepseek-chat",),
        )
        note = "using DeepSeek (deepseek-chat): DEEPSEEK_API_KEY is set"
    elif env.get("OPENAI_API_KEY"):
        provider = OpenAiProvider.Config(
            name="openai",
            base_url=env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
            api_key_env="OPENAI_API_KEY",
            models=("gpt-4o-mini",),
        )
        note = "using OpenAI (gpt-4o-mini): OPENAI_API_KEY is set"
    else:
        return (
            HarnessConfig(),
            "using the offline model (set DEEPSEEK_API_KEY or OPENAI_API_KEY for a real one)",
        )
    providers = (provider, OfflineProvider.Config())
    # 3 attempts of at most 15 s idle each: a dead server is reported within a minute (#23).
    retry = RetryPolicy(max_attempts=3)
    return HarnessConfig(llm=LlmConfig(providers=providers, retry=retry)), note


# --- mounting -----------------------------------------------------------------------------------


async def mount_config(
    ctx: Context,
    config: HarnessConfig,
    *,
    protect_paths: Sequence[str] = (),
    approval_mode: Literal["library", "cli"] = "library",
) -> tuple[Fiber, ...]:
    """Mount the plugin set described by ``config`` on ``ctx``, in dependency order.

    llm (+ one provider plugin each, + the retry plugin), sessions, usage, persistence, tools (+ the
    built-in tools), system prompt, agents; then the plugins the config names (the built-in
    integration sections, then ``plugins:``, in order: they can ``inject`` every service
    above); then the agent loop, which creates ``config.agents``. Each is a child fiber of
    ``ctx``'s, so disposing that fiber (or closing the runtime) unloads everything in reverse.

    The built-in tools never read or write the config file (``config.path``), the session
    store, or ``protect_paths`` (such as a chat history file); shell commands never get a
    provider's API key variable. The approval policy (``tools.approval``) is mounted with the
    pinned defaults of ``approval_mode`` (the CLI passes ``"cli"``; see docs/approvals.md).

    Returns:
        The fibers of the plugins the config names, in mount order.

    Raises:
        ConfigError: the config is invalid, a plugin cannot be imported, or a plugin fails to
            load (naming it).
    """
    where = config.path or ""
    try:
        backend = _backend(config.persistence)
        config, plugins, tools = _checked(config, _protected(config, backend, protect_paths))
    except ConfigError as exc:
        raise ConfigError(_at(where, str(exc))) from exc.__cause__
    await mount_redactor(ctx, config)
    await _mount_llm(ctx, config.llm)
    await ctx.plugin(SessionStore)
    await ctx.plugin(UsageService)
    if backend is not None:
        await ctx.plugin(backend[0], backend[1])
    await ctx.plugin(ToolRegistry)
    await ctx.plugin(ApprovalPolicy, attrs.evolve(config.tools.approval, mode=approval_mode))
    if tools.enabled:
        await ctx.plugin(BuiltinTools, tools)
    await ctx.plugin(SystemPrompt, SystemPrompt.Config(persona=config.system_prompt.persona))
    await ctx.plugin(AgentRegistry)
    fibers = tuple([await _mount_plugin(ctx, plugin, where) for plugin in plugins])
    _collect_secrets(ctx)
    await ctx.plugin(AgentLoop, _loop_config(config))
    _warn_if_incomplete(ctx, plugins, fibers)
    return fibers


async def mount_redactor(ctx: Context, config: HarnessConfig) -> None:
    """Mount the :class:`~trio_agent.redaction.Redactor`, knowing the API keys the config's
    providers read (``api_key_env``), before anything that could print or log one: a command
    that mounts only part of the harness (``trio-agent sessions``) still masks them."""
    await ctx.plugin(Redactor, _provider_keys(config.llm))


#: Header names whose values are credentials (``Authorization``, Azure's ``api-key``, ...).
_SECRET_HEADER = re.compile(r"auth|key|token|secret|passw|cookie|session", re.IGNORECASE)


def _provider_keys(llm: LlmConfig) -> tuple[str, ...]:
    """The secrets the providers' config holds: the values of their ``api_key_env``
    variables, and the values of ``headers`` whose names say they are credentials (with and
    without an auth scheme such as ``Bearer``)."""
    keys: list[str] = []
    for provider in llm.providers:
        name = getattr(provider, "api_key_env", None)
        if name and (value := os.environ.get(name)):
            keys.append(value)
        headers: Mapping[str, str] = getattr(provider, "headers", None) or {}
        for header, value in headers.items():
            if _SECRET_HEADER.search(header) and value:
                keys.append(value)
                scheme, _, credential = value.partition(" ")
                if credential and scheme.isalpha():
                    keys.append(credential.strip())
    return tuple(keys)


#: Services whose ``secrets()`` the redactor learns at mount (a DSN's password, MCP headers
#: and env values); other plugins call ``ctx.require(Redactor).add(...)`` themselves.
_SECRET_HOLDERS = ("session_persistence",)


def _collect_secrets(ctx: Context) -> None:
    redactor = ctx.require(Redactor)
    redactor.cover_loggers()
    for name in _SECRET_HOLDERS:
        secrets = getattr(ctx.get(name), "secrets", None)
        if callable(secrets):
            redactor.add(*secrets())


def _protected(
    config: HarnessConfig, backend: tuple[Any, object] | None, extra: Sequence[str]
) -> tuple[str, ...]:
    """The harness's own files, absolute: the config file, the session store (the backend
    config's ``path``: a jsonl directory, a SQLite file), and ``extra``."""
    store = None if backend is None else getattr(backend[1], "path", None)
    paths = (config.path, store, *extra)
    return tuple(dict.fromkeys(os.path.abspath(p) for p in paths if isinstance(p, str) and p))


async def _mount_llm(ctx: Context, llm: LlmConfig) -> None:
    """Mount ``ctx.llm``, one provider plugin per entry (fiber ``llm:<name>``) and the retry
    plugin (with ``llm.retry`` for every provider, if given)."""
    await ctx.plugin(LlmService)
    for provider in llm.providers:
        plugin = _PROVIDER_PLUGINS[type(provider)]
        await ctx.plugin(plugin, provider, name=f"llm:{provider.name}")
    await ctx.plugin(RetryPlugin, RetryPlugin.Config(policy=llm.retry))


async def _mount_plugin(ctx: Context, plugin: ResolvedPlugin, where: str) -> Fiber:
    entry = plugin.entry
    try:
        return await ctx.plugin(plugin.plugin, plugin.config, name=entry.name)
    except Exception as exc:
        raise ConfigError(
            _at(
                where,
                f"{entry.source}: plugin {entry.name!r} ({entry.use}) failed to load: "
                f"{type(exc).__name__}: {exc}",
            )
        ) from exc


def _warn_if_incomplete(
    ctx: Context, plugins: Sequence[ResolvedPlugin], fibers: Sequence[Fiber]
) -> None:
    """Log what a mounted config plugin left undone: services it waits for that nothing
    provides, providers it declared but did not register."""
    registered = set(ctx.require(LlmService).names())
    for plugin, fiber in zip(plugins, fibers, strict=True):
        entry = plugin.entry
        if fiber.state is FiberState.PENDING:
            missing = [name for name in fiber.inject if ctx.get(name) is None]
            logger.warning(
                "%s: plugin %r (%s) waits for the service(s) %s, which no mounted plugin "
                "provides; it stays unloaded until one appears",
                entry.source,
                entry.name,
                entry.use,
                ", ".join(missing),
            )
            continue
        for name in plugin.providers:
            if name not in registered:
                logger.warning(
                    "%s: plugin %r (%s) declares the provider %r but did not register it; "
                    "agents on it will fail with NO_ADAPTER",
                    entry.source,
                    entry.name,
                    entry.use,
                    name,
                )


def _check_max_steps(path: str, value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{path}: got {value!r}; expected a positive integer or null")


def _loop_config(config: HarnessConfig) -> AgentLoop.Config:
    """The agent loop's config: the configured agents with their models filled in."""
    default = config.default_provider_name
    agents = tuple(
        attrs.evolve(
            row,
            model=row.model or config.default_model(row.provider or default),
            resume_session_id=row.resume_session_id or None,
            durability=row.durability or config.durability,
        )
        for row in config.agents
    )
    return AgentLoop.Config(
        agents=agents,
        provider=default,
        model=config.default_model(default),
        max_parallel_tool_calls=config.max_parallel_tool_calls,
    )


async def mount_persistence(ctx: Context, persistence: PersistenceConfig) -> None:
    """Mount the ``session_persistence`` plugin ``persistence`` describes (none for ``none``).

    Raises:
        ConfigError: the backend cannot be imported (a missing extra names its install
            command) or its config is invalid.
    """
    backend = _backend(persistence)
    if backend is not None:
        await ctx.plugin(backend[0], backend[1])


@contextlib.asynccontextmanager
async def open_harness(
    config: HarnessConfig | None = None, *, gc_threshold: int | None = None
) -> AsyncIterator[Context]:
    """Open a runtime with the whole standard harness mounted; yield its root context.

    ``config`` defaults to the embedded defaults (the offline model, the built-in tools in the
    current directory, jsonl sessions under ``.trio-agent/sessions``). Unlike the CLI it does
    not look at ``DEEPSEEK_API_KEY`` / ``OPENAI_API_KEY``; ``open_harness(default_config()[0])``
    picks the provider up from the environment the same way the CLI does::

        async with trio_agent.open_harness(load_config("trio-agent.yml")) as ctx:
            agent = ctx.agent_loop.create("helper")
            agent.send("list files")
            await agent.wait_idle()

    ``gc_threshold`` sets the garbage collector's generation-0 threshold (Python's default is
    700) while the harness is open, and puts the previous thresholds back when it closes. An
    application that keeps thousands of agents live allocates long-lived objects in bursts,
    and with the default the collector runs full collections over the whole heap again and
    again: ``gc_threshold=50_000`` about halves the wall time of 10,000 agents running one
    turn each (docs/performance.md), at the cost of more garbage between collections. It
    changes process-wide state, so it is off unless asked for.

    Raises:
        ValueError: ``gc_threshold`` is not a positive int.
    """
    with _gc_threshold(gc_threshold):
        async with open_runtime() as ctx:
            await mount_config(ctx, config or HarnessConfig())
            yield ctx


@contextlib.contextmanager
def _gc_threshold(generation0: int | None) -> Iterator[None]:
    """The collector's generation-0 threshold set to ``generation0`` inside (None: unchanged)."""
    if generation0 is None:
        yield
        return
    if isinstance(generation0, bool) or not isinstance(generation0, int) or generation0 < 1:
        raise ValueError(f"gc_threshold must be a positive int, got {generation0!r}")
    previous = gc.get_threshold()
    gc.set_threshold(generation0, *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
