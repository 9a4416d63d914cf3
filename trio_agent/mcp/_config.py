"""The ``McpServers`` configuration: one entry per server, stdio or streamable HTTP.

::

    mcp:
      startup_timeout: 30
      servers:
        - name: fs
          command: npx
          args: [-y, "@modelcontextprotocol/server-filesystem", /srv/data]
          env: {LOG_LEVEL: warn}
          env_passthrough: [HOME]
          timeout: 60
          restart: {max_attempts: 3, backoff: 1}
        - name: search
          url: http://127.0.0.1:8931/mcp
          headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}

An entry with ``command`` is a stdio server (a subprocess), one with ``url`` an HTTP server.
Structuring is strict: an unknown key, a wrong type or a bad value is a :class:`McpConfigError`
naming the key path. Values of ``env`` and ``headers`` are secrets: they never appear in a repr.
"""

from __future__ import annotations

import math
import re
import types
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeAlias

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from .._serde import converter
from ._errors import McpConfigError

__all__ = [
    "HttpServerConfig",
    "McpServersConfig",
    "RestartPolicy",
    "ServerConfig",
    "StdioServerConfig",
    "parse_mcp_config",
]

_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


# --- validators (they also guard values built in Python, not only from config data) ----------


def _fail(attribute: attrs.Attribute[Any], message: str) -> McpConfigError:
    return McpConfigError(message, key=attribute.name)


def _check_server_name(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or _SERVER_NAME.fullmatch(value) is None:
        raise _fail(
            attribute,
            f"got {value!r}; expected 1-64 characters from [A-Za-z0-9_-] (the server's tools "
            "are named <name>__<tool>)",
        )


def _check_text(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value or "\0" in value:
        raise _fail(attribute, f"got {value!r}; expected a non-empty string")


def _check_optional_text(_: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None:
        _check_text(_, attribute, value)


def _check_args(
    _: object, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]
) -> None:
    if not isinstance(value, tuple) or not all(isinstance(a, str) and "\0" not in a for a in value):
        raise _fail(attribute, f"got {value!r}; expected a list of strings")


def _check_env_names(
    _: object, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]
) -> None:
    bad = [n for n in value if not isinstance(n, str) or _ENV_NAME.fullmatch(n) is None]
    if not isinstance(value, tuple) or bad:
        raise _fail(
            attribute,
            f"got {value!r}; expected a list of environment variable names ([A-Za-z_][A-Za-z0-9_]*)",
        )


def _check_env(
    _: object, attribute: attrs.Attribute[Mapping[str, str]], value: Mapping[str, str]
) -> None:
    for name, text in value.items():
        if not isinstance(name, str) or _ENV_NAME.fullmatch(name) is None:
            raise _fail(attribute, f"{name!r} is not an environment variable name")
        if not isinstance(text, str) or "\0" in text:
            # The value is a secret: name the variable, never echo what it holds.
            raise _fail(attribute, f"the value of {name} must be a string without NUL bytes")


def _check_headers(
    _: object, attribute: attrs.Attribute[Mapping[str, str]], value: Mapping[str, str]
) -> None:
    for name, text in value.items():
        if not isinstance(name, str) or _HEADER_NAME.fullmatch(name) is None:
            raise _fail(attribute, f"{name!r} is not an HTTP header name")
        if not isinstance(text, str) or any(c in text for c in "\r\n\0"):
            raise _fail(
                attribute, f"the value of header {name} must be a string without CR, LF or NUL"
            )


def _check_url(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    try:
        parts = urllib.parse.urlsplit(value) if isinstance(value, str) else None
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        shown = _without_password(value) if isinstance(value, str) else value
        raise _fail(
            attribute,
            f"got {shown!r}; expected an http:// or https:// URL of the server's MCP endpoint",
        )


def _check_seconds(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _fail(attribute, f"got {value!r}; expected a positive, finite number of seconds")


def _check_optional_seconds(
    _: object, attribute: attrs.Attribute[Any], value: float | None
) -> None:
    if value is not None:
        _check_seconds(_, attribute, value)


def _check_count(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(attribute, f"got {value!r}; expected a whole number, 0 or more")


def _without_password(url: str) -> str:
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<a malformed URL>"
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _frozen_map(value: Mapping[str, str], key: str) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise McpConfigError(f"got {type(value).__name__}; expected a mapping of strings", key=key)
    return types.MappingProxyType(dict(value))


def _frozen_env(value: Mapping[str, str]) -> Mapping[str, str]:
    return _frozen_map(value, "env")


def _frozen_headers(value: Mapping[str, str]) -> Mapping[str, str]:
    return _frozen_map(value, "headers")


# Typed converters: with a bare ``converter=tuple`` mypy types the parameter ``Iterable[_T_co]``
# and refuses every call that passes one.
def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _server_tuple(value: Iterable[ServerConfig]) -> tuple[ServerConfig, ...]:
    return tuple(value)


# --- the values -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RestartPolicy:
    """How a server that died (or never came up) is restarted.

    Attributes:
        max_attempts: Restarts in a row before the server is given up; 0 never restarts. The
            count starts again once a server has stayed up for a minute.
        backoff: Seconds before the first restart; each further one waits twice as long,
            up to 30 seconds.
    """

    max_attempts: int = attrs.field(default=3, validator=_check_count)
    backoff: float = attrs.field(default=1.0, validator=_check_seconds)


@attrs.frozen(kw_only=True)
class StdioServerConfig:
    """A server run as a subprocess, speaking MCP over its stdin and stdout.

    The subprocess does not inherit the environment: it gets the SDK's short baseline (``HOME``,
    ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``), the variables named in
    ``env_passthrough`` that are set, and ``env``, in that order of precedence (``env`` wins).

    Attributes:
        name: The server's name; its tools are registered as ``<name>__<tool>``.
        command: The program to run (looked up on ``PATH``).
        args: Its arguments.
        env: Variables set for the server. Their values are secrets.
        env_passthrough: Names of variables copied from this process's environment. Their
            values are secrets too.
        cwd: The working directory (default: this process's).
        timeout: Seconds a tool call may take before it ends ``TOOL_TIMEOUT``; None for none.
        restart: What happens when the server dies or does not come up.
    """

    name: str = attrs.field(validator=_check_server_name)
    command: str = attrs.field(validator=_check_text)
    args: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple, validator=_check_args)
    env: Mapping[str, str] = attrs.field(
        factory=dict, converter=_frozen_env, validator=_check_env, repr=False, hash=False
    )
    env_passthrough: tuple[str, ...] = attrs.field(
        default=(), converter=_str_tuple, validator=_check_env_names
    )
    cwd: str | None = attrs.field(default=None, validator=_check_optional_text)
    timeout: float | None = attrs.field(default=300.0, validator=_check_optional_seconds)
    restart: RestartPolicy = attrs.field(factory=RestartPolicy)

    def secrets(self) -> frozenset[str]:
        """The values of :attr:`env` (the passthrough values are read when the server starts;
        :meth:`McpServers.secrets` has those)."""
        return frozenset(self.env.values())


@attrs.frozen(kw_only=True)
class HttpServerConfig:
    """A server reached over MCP's streamable HTTP transport.

    Attributes:
        name: The server's name; its tools are registered as ``<name>__<tool>``.
        url: The server's MCP endpoint, ``http://`` or ``https://``.
        headers: HTTP headers sent with every request (an ``Authorization`` token, say).
            Their values are secrets.
        timeout: Seconds a tool call may take before it ends ``TOOL_TIMEOUT``; None for none.
        restart: What happens when the connection breaks or does not come up.
    """

    name: str = attrs.field(validator=_check_server_name)
    url: str = attrs.field(validator=_check_url, repr=lambda url: repr(_without_password(url)))
    headers: Mapping[str, str] = attrs.field(
        factory=dict,
        converter=_frozen_headers,
        validator=_check_headers,
        repr=False,
        hash=False,
    )
    timeout: float | None = attrs.field(default=300.0, validator=_check_optional_seconds)
    restart: RestartPolicy = attrs.field(factory=RestartPolicy)

    def secrets(self) -> frozenset[str]:
        """The header values, and the password of the URL if it has one."""
        found = set(self.headers.values())
        password = urllib.parse.urlsplit(self.url).password
        if password:
            found.add(password)
        return frozenset(found)


#: One configured server.
ServerConfig: TypeAlias = StdioServerConfig | HttpServerConfig


def _check_servers(
    _: object, attribute: attrs.Attribute[tuple[ServerConfig, ...]], value: tuple[ServerConfig, ...]
) -> None:
    if not isinstance(value, tuple) or not all(
        isinstance(s, StdioServerConfig | HttpServerConfig) for s in value
    ):
        raise _fail(attribute, "expected a list of StdioServerConfig / HttpServerConfig")
    first: dict[str, int] = {}
    for index, server in enumerate(value):
        if server.name in first:
            raise McpConfigError(
                f"{server.name!r} is already the name of servers[{first[server.name]}]; give "
                "every server its own name",
                key=f"servers[{index}].name",
            )
        first[server.name] = index


@attrs.frozen(kw_only=True)
class McpServersConfig:
    """The ``McpServers`` plugin's config (``McpServers.Config``): the ``mcp:`` section.

    Attributes:
        servers: The servers to connect, each a :class:`StdioServerConfig` or an
            :class:`HttpServerConfig`; names are unique.
        startup_timeout: How long loading the plugin waits for the servers to list their
            tools, in seconds; it also bounds each connection attempt. A server not up by then
            is reported and keeps trying in the background.
    """

    servers: tuple[ServerConfig, ...] = attrs.field(
        default=(), converter=_server_tuple, validator=_check_servers
    )
    startup_timeout: float = attrs.field(default=30.0, validator=_check_seconds)

    def secrets(self) -> frozenset[str]:
        """Every secret value the config holds (env values, header values, URL passwords)."""
        return frozenset().union(*(server.secrets() for server in self.servers))


# --- structuring config data ------------------------------------------------------------------


def _strings(value: object, _: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise McpConfigError(f"got {value!r}; expected a list of strings")


def _string_map(value: object, _: object) -> dict[str, str]:
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str | int | float) and not isinstance(v, bool)
        for k, v in value.items()
    ):
        return {k: str(v) for k, v in value.items()}
    raise McpConfigError("expected a mapping of names to strings")


def _text(value: object, _: object) -> str:
    if isinstance(value, str):
        return value
    raise McpConfigError(f"got {value!r}; expected a string")


def _optional_text(value: object, _: object) -> str | None:
    return None if value is None else _text(value, _)


def _seconds(value: object, _: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise McpConfigError(f"got {value!r}; expected a number of seconds")


def _optional_seconds(value: object, _: object) -> float | None:
    return None if value is None else _seconds(value, _)


def _count(value: object, _: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise McpConfigError(f"got {value!r}; expected a whole number")


def _structure_server(value: object, _: object) -> ServerConfig:
    if not isinstance(value, Mapping):
        raise McpConfigError(
            f"got {type(value).__name__}; expected a mapping with either command (a stdio "
            "server) or url (an HTTP server)"
        )
    if "command" in value and "url" in value:
        raise McpConfigError(
            "has both command and url; a server is either a subprocess (command) or an HTTP "
            "endpoint (url)"
        )
    if "url" in value:
        return converter.structure(value, HttpServerConfig)
    if "command" in value:
        return converter.structure(value, StdioServerConfig)
    raise McpConfigError(
        "needs command (a stdio server: the program to run) or url (an HTTP server: its MCP "
        "endpoint)"
    )


def _structure_servers(value: object, _: object) -> tuple[ServerConfig, ...]:
    if not isinstance(value, list | tuple):
        raise McpConfigError(f"got {type(value).__name__}; expected a list of servers")
    return converter.structure(value, tuple[ServerConfig, ...])


_NAME = override(struct_hook=_text)
_TIMEOUT = override(struct_hook=_optional_seconds)

converter.register_structure_hook(
    RestartPolicy,
    make_dict_structure_fn(
        RestartPolicy,
        converter,
        _cattrs_forbid_extra_keys=True,
        max_attempts=override(struct_hook=_count),
        backoff=override(struct_hook=_seconds),
    ),
)
converter.register_structure_hook(
    StdioServerConfig,
    make_dict_structure_fn(
        StdioServerConfig,
        converter,
        _cattrs_forbid_extra_keys=True,
        name=_NAME,
        command=override(struct_hook=_text),
        args=override(struct_hook=_strings),
        env=override(struct_hook=_string_map),
        env_passthrough=override(struct_hook=_strings),
        cwd=override(struct_hook=_optional_text),
        timeout=_TIMEOUT,
    ),
)
converter.register_structure_hook(
    HttpServerConfig,
    make_dict_structure_fn(
        HttpServerConfig,
        converter,
        _cattrs_forbid_extra_keys=True,
        name=_NAME,
        url=override(struct_hook=_text),
        headers=override(struct_hook=_string_map),
        timeout=_TIMEOUT,
    ),
)
converter.register_structure_hook(ServerConfig, _structure_server)

_structure_root: Callable[[Any, Any], McpServersConfig] = make_dict_structure_fn(
    McpServersConfig,
    converter,
    _cattrs_forbid_extra_keys=True,
    servers=override(struct_hook=_structure_servers),
    startup_timeout=override(struct_hook=_seconds),
)


def parse_mcp_config(data: object, *, path: str = "$.mcp") -> McpServersConfig:
    """Structure config data (the ``mcp:`` section of ``trio-agent.yml``) into a
    :class:`McpServersConfig`.

    ``None`` means no servers. ``path`` is where ``data`` sits in the whole file; every
    problem found is reported, each with its key path::

        $.mcp.servers[1].timeout: got -1.0; expected a positive, finite number of seconds

    Raises:
        McpConfigError: the data is not a valid config.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise McpConfigError(f"{path or '$'}: got {type(data).__name__}; expected a mapping")
    try:
        return _structure_root(data, McpServersConfig)
    except (cattrs.BaseValidationError, McpConfigError) as exc:
        raise McpConfigError("; ".join(_problems(exc, path))) from None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _problems(exc: BaseException, path: str) -> Iterator[str]:
    """``"<key path>: <what is wrong>"`` for every leaf problem of a cattrs error tree."""
    if isinstance(exc, cattrs.ClassValidationError):
        with_key, plain = exc.group_exceptions()
        for inner, key in with_key:
            yield from _problems(inner, _join(path, key.name))
        for inner in plain:
            yield from _problems(inner, path)
    elif isinstance(exc, cattrs.IterableValidationError):
        with_index, plain = exc.group_exceptions()
        for inner, index in with_index:
            yield from _problems(inner, f"{path}[{index.index!r}]")
        for inner in plain:
            yield from _problems(inner, path)
    elif isinstance(exc, cattrs.BaseValidationError):
        for inner in exc.exceptions:
            yield from _problems(inner, path)
    elif isinstance(exc, cattrs.ForbiddenExtraKeysError):
        yield f"{path or '$'}: unknown key(s) {', '.join(sorted(exc.extra_fields))}"
    elif isinstance(exc, KeyError):
        yield f"{path or '$'}: required key missing"
    elif isinstance(exc, McpConfigError):
        where = path if exc.key is None else _join(path, exc.key)
        yield f"{where}: {exc.detail}" if where else exc.detail
    else:
        yield f"{path or '$'}: {exc}"


def _structure_config(value: object, _: object) -> McpServersConfig:
    # ``await ctx.plugin(McpServers, {...})`` structures through the shared converter; the
    # runtime names the plugin, the paths here are relative to its config.
    return parse_mcp_config(value, path="")


converter.register_structure_hook(McpServersConfig, _structure_config)
