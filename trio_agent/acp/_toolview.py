"""How a tool call looks to an ACP client: kind, title, locations, content, file diffs.

Everything here reads model-written arguments, so it treats them as hostile: a title is cut and
stripped of control characters, and a path becomes a location (or a diff) only after the
session's :class:`~trio_agent.tools.builtin.Workspace` resolved it inside the workspace root.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import attrs

from ..llm import ToolResult
from ..tools.builtin import Workspace, WorkspacePathError
from ._content import acp_content

__all__ = ["FileSnapshot", "ToolView", "parse_arguments", "read_snapshot"]

JsonObject = dict[str, Any]

_KINDS = {
    "read_file": "read",
    "list_dir": "read",
    "glob": "search",
    "grep": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "shell": "execute",
}
#: The built-in tools whose ``path`` argument names one file or directory.
_PATH_TOOLS = frozenset({"read_file", "write_file", "edit_file", "list_dir", "grep"})
#: The built-in tools that change one file; their successful calls carry a diff.
EDIT_TOOLS = frozenset({"write_file", "edit_file"})
_TITLE_LIMIT = 160
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")
#: Files larger than this are not shown as diffs.
_SNAPSHOT_LIMIT = 1024 * 1024


def parse_arguments(arguments: str) -> JsonObject | None:
    """The model's arguments text as a JSON object, or None when it is not one."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _clean(text: str) -> str:
    text = _CONTROL.sub(" ", text).strip()
    return text if len(text) <= _TITLE_LIMIT else text[: _TITLE_LIMIT - 1] + "…"


def _title(name: str, args: JsonObject | None) -> str:
    def arg(key: str, default: str = "") -> str:
        value = (args or {}).get(key, default)
        return value if isinstance(value, str) else default

    titles = {
        "read_file": f"Read {arg('path')}",
        "write_file": f"Write {arg('path')}",
        "edit_file": f"Edit {arg('path')}",
        "list_dir": f"List {arg('path', '.')}",
        "glob": f"Find {arg('pattern')}",
        "grep": f"Search {arg('pattern')} in {arg('path', '.')}",
        "shell": f"Run {arg('command')}",
    }
    return _clean(titles.get(name, name))


@attrs.frozen
class FileSnapshot:
    """A file's absolute path and its text (None: it did not exist) at one moment."""

    path: Path
    text: str | None


def read_snapshot(workspace: Workspace, path: object) -> FileSnapshot | None:
    """The current text of the workspace file ``path`` (blocking; run it in a thread).

    None when the path is not a string inside the workspace, or the file is not a regular UTF-8
    text file of at most 1 MiB.
    """
    if not isinstance(path, str):
        return None
    try:
        resolved = workspace.resolve(path)
    except WorkspacePathError:
        return None
    try:
        fd = workspace.open_file(resolved, path)
    except FileNotFoundError:
        return FileSnapshot(resolved, None)
    except Exception:
        return None
    try:
        with os.fdopen(fd, "rb") as file:
            data = file.read(_SNAPSHOT_LIMIT + 1)
    except OSError:
        return None
    if len(data) > _SNAPSHOT_LIMIT:
        return None
    try:
        return FileSnapshot(resolved, data.decode("utf-8"))
    except UnicodeDecodeError:
        return None


@attrs.frozen
class ToolView:
    """Presents the calls of one session; ``workspace`` is its built-in tools' root, and
    ``builtin`` says which tool names are the built-in tools it registered."""

    workspace: Workspace
    builtin: frozenset[str]

    def start(self, call_id: str, name: str, arguments: str) -> JsonObject:
        """The fields of a ``tool_call`` (also the ``toolCall`` of a permission request)."""
        args = parse_arguments(arguments)
        fields: JsonObject = {
            "toolCallId": call_id,
            "title": _title(name, args) if name in self.builtin else _clean(name),
            "kind": _KINDS.get(name, "other") if name in self.builtin else "other",
            "status": "pending",
            "rawInput": args if args is not None else {"arguments": arguments},
        }
        locations = self._locations(name, args)
        if locations:
            fields["locations"] = locations
        return fields

    def _locations(self, name: str, args: JsonObject | None) -> list[JsonObject]:
        if name not in self.builtin or name not in _PATH_TOOLS or args is None:
            return []
        path = args.get("path", "." if name in ("list_dir", "grep") else None)
        if not isinstance(path, str):
            return []
        try:
            resolved = self.workspace.resolve(path)
        except (WorkspacePathError, ValueError, OSError):
            return []
        location: JsonObject = {"path": str(resolved)}
        line = args.get("start_line")
        if name == "read_file" and type(line) is int and line >= 1:
            location["line"] = line
        return [location]

    def finish(
        self, call_id: str, result: ToolResult, diff: tuple[FileSnapshot, FileSnapshot] | None
    ) -> JsonObject:
        """The fields of the final ``tool_call_update``: status and the result's content."""
        content: list[JsonObject] = []
        if diff is not None and not result.is_error:
            before, after = diff
            content.append(
                {
                    "type": "diff",
                    "path": str(after.path),
                    "oldText": before.text,
                    "newText": after.text or "",
                }
            )
        for block in result.content:
            shown = acp_content(block)
            if shown is not None:
                content.append({"type": "content", "content": shown})
        return {
            "toolCallId": call_id,
            "status": "failed" if result.is_error else "completed",
            "content": content,
        }
