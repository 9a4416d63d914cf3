"""The built-in tools as :class:`Tool` objects, and the plugin that registers them."""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Awaitable, Callable
from typing import final

import trio

from ...llm import ToolResult
from ...runtime import Context
from .._decorator import tool
from .._types import TOOL_TIMEOUT, Tool, ToolCallContext, error_result
from . import _files, _grep
from ._config import BUILTIN_TOOL_NAMES, BuiltinToolsConfig
from ._environment import shell_environment
from ._errors import BuiltinToolError
from ._shell import ShellPolicy, refuse_protected_arguments, run_command
from ._workspace import Workspace

__all__ = ["BuiltinTools", "builtin_tools"]


async def _reported(
    call: ToolCallContext, work: Callable[[], Awaitable[str | ToolResult]]
) -> str | ToolResult:
    """Run ``work``; a :class:`BuiltinToolError` becomes an error result with its code.

    Returning the result (instead of letting the registry turn a raise into ``TOOL_ERROR``)
    keeps expected failures such as a missing file out of the warning log.
    """
    try:
        return await work()
    except BuiltinToolError as exc:
        return error_result(call.call_id, exc.code, str(exc))


def workspace_for(config: BuiltinToolsConfig) -> Workspace:
    """The :class:`Workspace` ``config`` describes: its root (default: the current directory)
    with its protected paths."""
    return Workspace(
        config.root or ".",
        protect_paths=config.protect_paths,
        protect=config.protect,
        protect_writes=config.protect_writes,
    )


def builtin_tools(
    config: BuiltinToolsConfig | None = None, *, workspace: Workspace | None = None
) -> tuple[Tool, ...]:
    """Build the enabled built-in tools for ``config``, in :data:`BUILTIN_TOOL_NAMES` order.

    The tools are confined to ``workspace`` (default: the root and protected paths of
    ``config``; the current directory when ``config.root`` is None). Register them on a
    registry yourself, or mount :class:`BuiltinTools` to have a plugin do it.

    Raises:
        BuiltinToolsConfigError: the workspace root is not an existing directory.
    """
    config = BuiltinToolsConfig() if config is None else config
    ws = workspace_for(config) if workspace is None else workspace
    limits = _files.Limits(
        max_read_bytes=config.max_read_bytes,
        max_read_lines=config.max_read_lines,
        max_results=config.max_results,
        max_output_bytes=config.max_output_bytes,
    )
    policy = config.shell_policy
    makers: dict[str, Callable[[], Tool]] = {
        "read_file": lambda: _read_file_tool(ws, limits),
        "write_file": lambda: _write_file_tool(ws),
        "edit_file": lambda: _edit_file_tool(ws),
        "list_dir": lambda: _list_dir_tool(ws, limits),
        "glob": lambda: _glob_tool(ws, limits),
        "grep": lambda: _grep_tool(ws, limits, config.search_timeout),
        "shell": lambda: _shell_tool(ws, policy, config),
    }
    return tuple(makers[name]() for name in BUILTIN_TOOL_NAMES if name in config.enabled)


# --- the tools (their docstrings are what the model reads) ------------------------------------


def _read_file_tool(ws: Workspace, limits: _files.Limits) -> Tool:
    async def read_file(
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
        *,
        call: ToolCallContext,
    ) -> str | ToolResult:
        """Read a text file in the workspace.

        Returns the file's text as is (no line numbers). Read a part with start_line and
        end_line (1-based, inclusive). At most {max_read_lines} lines / {max_read_bytes} bytes
        come back per call; a longer result ends with a note saying which lines were shown and
        the start_line to continue from. Binary files are refused.

        Args:
            path: The file, relative to the workspace root (an absolute path must lie inside it).
            start_line: The first line to return (1 = the first line of the file).
            end_line: The last line to return (inclusive); omit it to read to the end.
        """
        work = functools.partial(_files.read_file, ws, limits, path, start_line, end_line)
        return await _reported(call, lambda: _files.in_thread(work))

    read_file.__doc__ = _format(read_file.__doc__, limits)
    return tool(concurrency_safe=True, read_only=True)(read_file)


def _write_file_tool(ws: Workspace) -> Tool:
    async def write_file(path: str, content: str, *, call: ToolCallContext) -> str | ToolResult:
        """Create a file, or replace a file's whole content, in the workspace.

        Missing parent directories are created. The file is written as UTF-8 and replaced in
        one step (readers never see half a file). To change part of an existing file, prefer
        edit_file. Returns how many bytes were written.

        Args:
            path: The file, relative to the workspace root (an absolute path must lie inside it).
            content: The complete new content of the file.
        """
        return await _reported(
            call, lambda: trio.to_thread.run_sync(_files.write_file, ws, path, content)
        )

    return tool(write_file)


def _edit_file_tool(ws: Workspace) -> Tool:
    async def edit_file(
        path: str, old: str, new: str, *, call: ToolCallContext
    ) -> str | ToolResult:
        """Replace one exact piece of text in a file with new text.

        old must occur in the file exactly once, character for character (indentation,
        whitespace and line breaks included); otherwise nothing changes and the error says
        whether it was not found or found several times. Copy old from read_file output and
        include enough surrounding lines to make it unique. To delete text, pass an empty new.

        Args:
            path: The file, relative to the workspace root (an absolute path must lie inside it).
            old: The exact text to replace; it must occur exactly once.
            new: The text to put in its place.
        """
        return await _reported(
            call, lambda: trio.to_thread.run_sync(_files.edit_file, ws, path, old, new)
        )

    return tool(edit_file)


def _list_dir_tool(ws: Workspace, limits: _files.Limits) -> Tool:
    async def list_dir(path: str = ".", *, call: ToolCallContext) -> str | ToolResult:
        """List a directory of the workspace: one name per line, sorted, directories ending
        in "/". At most {max_results} entries are shown.

        Args:
            path: The directory, relative to the workspace root ("." is the root).
        """
        work = functools.partial(_files.list_dir, ws, limits, path)
        return await _reported(call, lambda: _files.in_thread(lambda stop: work()))

    list_dir.__doc__ = _format(list_dir.__doc__, limits)
    return tool(concurrency_safe=True, read_only=True)(list_dir)


def _glob_tool(ws: Workspace, limits: _files.Limits) -> Tool:
    async def glob(pattern: str, *, call: ToolCallContext) -> str | ToolResult:
        """Find files and directories whose path matches a glob pattern.

        Patterns are relative to the workspace root: "*" matches within one path component
        (hidden names included), "?" one character, "[abc]" a set, and "**" any number of
        directories ("**/*.py" finds Python files everywhere, "src/*" lists src). A trailing
        "/" matches directories only. "**" does not enter {skipped} unless the pattern names
        them. Returns sorted paths, directories ending in "/"; at most {max_results}.

        Args:
            pattern: The glob pattern, for example "**/*.py" or "docs/*.md".
        """
        work = functools.partial(_files.glob_paths, ws, limits, pattern)
        return await _reported(call, lambda: _files.in_thread(work))

    glob.__doc__ = _format(glob.__doc__, limits)
    return tool(concurrency_safe=True, read_only=True)(glob)


def _grep_tool(ws: Workspace, limits: _files.Limits, seconds: float) -> Tool:
    async def grep(
        pattern: str,
        path: str = ".",
        glob: str | None = None,
        ignore_case: bool = False,
        *,
        call: ToolCallContext,
    ) -> str | ToolResult:
        """Search file contents with a regular expression (Python re syntax).

        Prints each matching line as "path:line: text" (paths relative to the workspace root,
        lines numbered from 1), files in name order. Searches a file, or a directory
        recursively; binary files and {skipped} are skipped. At most
        {max_results} matches are shown; narrow the pattern, path or glob if the output says
        it stopped. A search that takes longer than {seconds:g} seconds is stopped.

        Args:
            pattern: The regular expression to search each line for.
            path: A file or directory to search, relative to the workspace root.
            glob: Only search files matching this glob: a name pattern such as "*.py", or a
                path pattern relative to the root such as "src/**/*.py".
            ignore_case: Match letters regardless of case.
        """
        return await _reported(
            call, lambda: _grep.grep(ws, limits, seconds, pattern, path, glob, ignore_case)
        )

    grep.__doc__ = _format(grep.__doc__, limits, seconds=seconds)
    return tool(concurrency_safe=True, read_only=True)(grep)


def _shell_description(policy: ShellPolicy, limit: float, max_output_bytes: int) -> str:
    if policy.mode == "deny":
        return (
            "Run a command line in the workspace. Shell commands are disabled here: every call "
            "is refused. Use the file tools instead."
        )
    common = (
        f"It runs in the workspace root with no input; stdout and stderr are returned together "
        f"(at most {max_output_bytes} bytes: the start and the end are kept), followed by the "
        f"exit code. It is killed after {limit:g} seconds, or the timeout you pass, whichever "
        "is shorter; anything it leaves running in the background is killed when it exits."
    )
    if policy.mode == "allow":
        return (
            f"Run a shell command line with /bin/sh -c (pipes, && and redirection work). {common}"
        )
    return (
        "Run a command in the workspace. Only commands that start with one of these are "
        f"allowed: {policy.shown_prefixes}. The command is split into words like a shell "
        "would split it but runs without a shell, so pipes, ;, &&, redirection, $variables, "
        f"globs and substitutions are refused: run one plain command per call. {common}"
    )


def _shell_tool(ws: Workspace, policy: ShellPolicy, config: BuiltinToolsConfig) -> Tool:
    limit = config.shell_timeout
    max_output_bytes = config.max_output_bytes

    async def shell(
        command: str,
        timeout: float | None = None,  # noqa: ASYNC109 - a model-facing argument, not a scope
        *,
        call: ToolCallContext,
    ) -> str | ToolResult:
        """Run a command in the workspace (the description comes from _shell_description).

        Args:
            command: The command line to run.
            timeout: Seconds before the command is killed; at most the configured limit.
        """

        async def work() -> str | ToolResult:
            argv = policy.argv(command)
            if policy.mode == "prefixes":
                refuse_protected_arguments(ws, argv, command)
            if timeout is not None and (not math.isfinite(timeout) or timeout <= 0):
                raise BuiltinToolError(
                    f"timeout must be a positive number of seconds, got {timeout!r}; omit it "
                    f"for the default of {limit:g}s"
                )
            seconds = limit if timeout is None else min(timeout, limit)
            env = shell_environment(
                os.environ, extra=config.shell_env, deny=config.shell_env_deny, root=ws.root
            )
            outcome = await run_command(
                argv,
                cwd=str(ws.root),
                time_limit=seconds,
                max_output_bytes=max_output_bytes,
                env=env,
            )
            output = outcome.output or "(no output)"
            if outcome.timed_out:
                return error_result(
                    call.call_id,
                    TOOL_TIMEOUT,
                    f"command timed out after {seconds:g}s and was killed; run something "
                    f"quicker, or pass a larger timeout (at most {limit:g}s). Output before "
                    f"the timeout:\n{output}",
                )
            separator = "" if output.endswith("\n") else "\n"
            return f"{output}{separator}[{outcome.status}]"

        return await _reported(call, work)

    return tool(description=_shell_description(policy, limit, max_output_bytes))(shell)


def _format(doc: str | None, limits: _files.Limits, **more: object) -> str:
    assert doc is not None
    skipped = "version-control, virtual-environment, cache and node_modules directories"
    return doc.format(
        max_read_lines=limits.max_read_lines,
        max_read_bytes=limits.max_read_bytes,
        max_results=limits.max_results,
        skipped=skipped,
        **more,
    )


# --- the plugin -------------------------------------------------------------------------------


@final
class BuiltinTools:
    """Plugin: registers the enabled built-in tools on ``ctx.tools``.

    Mount it after :class:`~trio_agent.tools.ToolRegistry`::

        await ctx.plugin(BuiltinTools, {"root": "/path/to/project", "shell": ["git status"]})

    The workspace root (``config.root``, default: the current directory) is resolved when the
    plugin loads. The registrations belong to this plugin's fiber, so the tools disappear when
    it unloads.

    Raises:
        BuiltinToolsConfigError: the root is not an existing directory (the load fails).
    """

    inject = ("tools",)
    Config = BuiltinToolsConfig

    def __init__(self, ctx: Context, config: BuiltinToolsConfig) -> None:
        #: The directory the tools are confined to, with its protected paths.
        self.workspace = workspace_for(config)
        #: The registered tools.
        self.tools = builtin_tools(config, workspace=self.workspace)
        for built in self.tools:
            ctx.tools.register(built)
