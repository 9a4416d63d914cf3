"""The built-in tools' configuration."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeAlias

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from ..._serde import converter
from ._errors import BuiltinToolsConfigError
from ._protect import DEFAULT_PROTECT_WRITES, check_globs
from ._shell import ShellPolicy

__all__ = ["BUILTIN_TOOL_NAMES", "BuiltinToolsConfig", "ShellSetting"]

#: Every built-in tool, in the order they are registered.
BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "glob",
    "grep",
    "shell",
)

#: The ``shell`` setting: ``"allow"``, ``"deny"`` or a tuple of allowed command prefixes.
ShellSetting: TypeAlias = str | tuple[str, ...]


def _check_root(_: object, __: object, value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not value or "\0" in value):
        raise BuiltinToolsConfigError(
            f"BuiltinToolsConfig.root: got {value!r}; expected a directory path, or None for "
            "the current directory"
        )


def _check_enabled(_: object, __: object, value: tuple[str, ...]) -> None:
    if not isinstance(value, tuple | list) or not all(isinstance(n, str) for n in value):
        raise BuiltinToolsConfigError(
            f"BuiltinToolsConfig.enabled: got {value!r}; expected a list of tool names from "
            f"{', '.join(BUILTIN_TOOL_NAMES)}"
        )
    unknown = [n for n in value if n not in BUILTIN_TOOL_NAMES]
    if unknown:
        raise BuiltinToolsConfigError(
            f"BuiltinToolsConfig.enabled: unknown tool(s) {', '.join(map(repr, unknown))}; "
            f"the built-in tools are {', '.join(BUILTIN_TOOL_NAMES)}"
        )
    twice = sorted({n for n in value if value.count(n) > 1})
    if twice:
        raise BuiltinToolsConfigError(
            f"BuiltinToolsConfig.enabled: {', '.join(map(repr, twice))} listed more than once; "
            "list each tool once"
        )


def _check_shell(_: object, __: object, value: ShellSetting) -> None:
    ShellPolicy.parse(value, where="BuiltinToolsConfig.shell")


def _check_seconds(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise BuiltinToolsConfigError(
            f"BuiltinToolsConfig.{attribute.name}: got {value!r}; expected a positive, finite "
            "number of seconds"
        )


def _check_strings(_: object, attribute: attrs.Attribute[tuple[str, ...]], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
        raise BuiltinToolsConfigError(
            f"BuiltinToolsConfig.{attribute.name}: got {value!r}; expected a list of non-empty "
            "strings"
        )


def _check_globs(_: object, attribute: attrs.Attribute[tuple[str, ...]], value: object) -> None:
    _check_strings(_, attribute, value)
    where = f"BuiltinToolsConfig.{attribute.name}"
    check_globs(value, where, paths=attribute.name == "protect")  # type: ignore[arg-type]


def _check_env_names(_: object, attribute: attrs.Attribute[tuple[str, ...]], value: object) -> None:
    _check_strings(_, attribute, value)
    bad = [n for n in value if "=" in n or "\0" in n]  # type: ignore[attr-defined]
    if bad:
        raise BuiltinToolsConfigError(
            f"BuiltinToolsConfig.{attribute.name}: {', '.join(map(repr, bad))} cannot be "
            "environment variable names; list names such as CARGO_HOME or VIRTUAL_ENV"
        )


def _check_cap(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BuiltinToolsConfigError(
            f"BuiltinToolsConfig.{attribute.name}: got {value!r}; expected a positive integer"
        )


@attrs.frozen
class BuiltinToolsConfig:
    """Configuration of the built-in tools (``BuiltinTools.Config``).

    Attributes:
        root: The workspace root the tools are confined to; ``None`` means the current
            directory when the tools are built. ``~`` is expanded; it must exist.
        enabled: Which tools to offer, from :data:`BUILTIN_TOOL_NAMES` (default: all).
        shell: The shell policy: ``"deny"`` (default; ``shell`` refuses every command),
            ``"allow"`` (commands run with ``/bin/sh -c``), or a list of allowed command
            prefixes such as ``["git status", "pytest"]`` (matched word by word; such commands
            run without a shell). See :class:`ShellPolicy`.
        shell_timeout: The longest a command may run, in seconds; a call may ask for less.
        max_output_bytes: Cap on ``shell`` output (first and last halves kept) and on the
            text ``grep`` returns.
        max_read_bytes: Cap on the bytes ``read_file`` returns per call.
        max_read_lines: Cap on the lines ``read_file`` returns per call.
        max_results: Cap on the entries ``list_dir``, the paths ``glob`` and the matches
            ``grep`` return.
        search_timeout: The longest one ``grep`` call may take, in seconds (choosing the
            files and matching); its search process is killed then.
        protect: Globs relative to the root (``"secrets/**"``, ``"**/*.pem"``), or absolute
            paths (starting with ``/`` or ``~``), that the file tools never read or write, in
            addition to the ones always protected (``.git``, ``.trio-agent/``,
            ``trio-agent.yml``); matching is case-insensitive.
        protect_paths: The harness's own files, protected like ``protect``'s paths: the
            config file in use, the session store (a directory, or a SQLite file with its
            side files), the chat history file. ``mount_config`` and the CLI fill it.
        protect_writes: Globs of files the file tools may read but never write (default:
            ``**/conftest.py``, which pytest runs whatever tests it is asked to run); this
            list replaces the default, ``[]`` lifts it.
        shell_env: Names of further environment variables a ``shell`` command gets (it
            always gets only ``PATH``, ``HOME``, ``LANG``, ``LC_*``, ``TERM``, ``TMPDIR`` and
            ``USER``).
        shell_env_deny: Names a command never gets, whatever ``shell_env`` says: each
            provider's ``api_key_env``. ``mount_config`` fills it; naming one of them in
            ``shell_env`` is an error.

    Raises:
        BuiltinToolsConfigError: a value is invalid (the message names the field).
    """

    root: str | None = attrs.field(default=None, validator=_check_root)
    enabled: tuple[str, ...] = attrs.field(default=BUILTIN_TOOL_NAMES, validator=_check_enabled)
    shell: ShellSetting = attrs.field(default="deny", validator=_check_shell)
    shell_timeout: float = attrs.field(default=30.0, validator=_check_seconds)
    max_output_bytes: int = attrs.field(default=32 * 1024, validator=_check_cap)
    max_read_bytes: int = attrs.field(default=256 * 1024, validator=_check_cap)
    max_read_lines: int = attrs.field(default=2000, validator=_check_cap)
    max_results: int = attrs.field(default=500, validator=_check_cap)
    search_timeout: float = attrs.field(default=30.0, validator=_check_seconds)
    protect: tuple[str, ...] = attrs.field(default=(), validator=_check_globs)
    protect_paths: tuple[str, ...] = attrs.field(default=(), validator=_check_strings)
    protect_writes: tuple[str, ...] = attrs.field(
        default=DEFAULT_PROTECT_WRITES, validator=_check_globs
    )
    shell_env: tuple[str, ...] = attrs.field(default=(), validator=_check_env_names)
    shell_env_deny: tuple[str, ...] = attrs.field(default=(), validator=_check_env_names)

    def __attrs_post_init__(self) -> None:
        both = sorted(set(self.shell_env) & set(self.shell_env_deny))
        if both:
            raise BuiltinToolsConfigError(
                f"BuiltinToolsConfig.shell_env: {', '.join(both)} is a provider's API key "
                "variable (shell_env_deny); shell commands never get API keys: remove it "
                "from shell_env"
            )

    @property
    def shell_policy(self) -> ShellPolicy:
        """The parsed :attr:`shell` setting."""
        return ShellPolicy.parse(self.shell, where="BuiltinToolsConfig.shell")


# --- structuring from config data (YAML / dicts) ----------------------------------------------


def _structure_shell(value: object, _: object) -> ShellSetting:
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(
        f'expected "allow", "deny" or a list of command prefixes (strings), got {value!r}'
    )


def _structure_strings(what: str) -> Callable[[object, object], tuple[str, ...]]:
    def structure(value: object, _: object) -> tuple[str, ...]:
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise TypeError(f"expected a list of {what}, got {value!r}")

    return structure


# Registered on the shared converter so any config class with a ``ShellSetting`` field (such as
# the YAML config's tools section) structures it the same way.
converter.register_structure_hook(ShellSetting, _structure_shell)

_structure_fields = make_dict_structure_fn(
    BuiltinToolsConfig,
    converter,
    _cattrs_forbid_extra_keys=True,
    enabled=override(struct_hook=_structure_strings("tool names")),
    protect=override(struct_hook=_structure_strings("globs or paths")),
    protect_paths=override(struct_hook=_structure_strings("paths")),
    protect_writes=override(struct_hook=_structure_strings("globs")),
    shell_env=override(struct_hook=_structure_strings("variable names")),
    shell_env_deny=override(struct_hook=_structure_strings("variable names")),
)


def _structure_config(value: Any, cls: type[BuiltinToolsConfig]) -> BuiltinToolsConfig:
    try:
        return _structure_fields(value, cls)
    except cattrs.ClassValidationError as group:
        # cattrs reports a failing validator as a bare "invalid value"; surface our message,
        # which names the field and says what is expected.
        for exc in group.exceptions:
            if isinstance(exc, BuiltinToolsConfigError):
                raise exc from None
        raise


converter.register_structure_hook(BuiltinToolsConfig, _structure_config)
