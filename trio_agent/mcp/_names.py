"""Tool names: ``<server>__<tool>``, sanitised to what model APIs accept."""

from __future__ import annotations

import hashlib
import re

__all__ = ["MAX_TOOL_NAME", "mcp_tool_name"]

#: The longest tool name model APIs accept.
MAX_TOOL_NAME = 64

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LENGTH = 8


def mcp_tool_name(server: str, tool: str) -> str:
    """The trio-agent tool name of the MCP tool ``tool`` of server ``server``.

    ``<server>__<tool>`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``. A
    name longer than 64 characters is cut and suffixed with ``_`` and 8 hex digits of the
    SHA-256 of the unsanitised ``<server>__<tool>``, so it is stable across runs and two long
    names that share a prefix stay apart. Distinct tools can still meet (``a.b`` and ``a_b``);
    :class:`McpServers` refuses such a listing with :class:`McpToolNameError`.
    """
    full = f"{server}__{tool}"
    name = _UNSAFE.sub("_", full)
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(full.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LENGTH]
    return f"{name[: MAX_TOOL_NAME - _HASH_LENGTH - 1]}_{digest}"
