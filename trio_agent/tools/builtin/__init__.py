"""Built-in workspace tools: files (read, write, edit, list, glob, grep) and a policy-bound shell.

Mount :class:`BuiltinTools` after the tool registry to offer them to every agent::

    await ctx.plugin(ToolRegistry)
    await ctx.plugin(BuiltinTools, {"root": ".", "shell": ["git status", "pytest"]})

or build the :class:`~trio_agent.tools.Tool` objects yourself with :func:`builtin_tools`.

Every path is confined to the workspace root by :meth:`Workspace.resolve` (``..``, absolute
paths elsewhere and symbolic links pointing out are refused with a ``DENIED`` result), and
protected paths (``.git``, ``.trio-agent/``, ``trio-agent.yml``, the harness's own files,
``protect`` globs) are never read or written (``DENIED``, :class:`ProtectedPathError`). The
``shell`` tool runs only what its :class:`ShellPolicy` allows, in a scrubbed environment (no
API keys) with git's program-running settings disabled. ``grep`` matches in a separate
process that is killed at its time limit or on cancellation. Failures are error results
(``Error: ...``) that say what was wrong and what to do instead.
"""

from ._config import BUILTIN_TOOL_NAMES as BUILTIN_TOOL_NAMES
from ._config import BuiltinToolsConfig as BuiltinToolsConfig
from ._config import ShellSetting as ShellSetting
from ._errors import BuiltinToolError as BuiltinToolError
from ._errors import BuiltinToolsConfigError as BuiltinToolsConfigError
from ._errors import ProtectedPathError as ProtectedPathError
from ._errors import ShellPolicyError as ShellPolicyError
from ._errors import WorkspacePathError as WorkspacePathError
from ._files import SKIPPED_DIRECTORIES as SKIPPED_DIRECTORIES
from ._shell import ShellPolicy as ShellPolicy
from ._tools import BuiltinTools as BuiltinTools
from ._tools import builtin_tools as builtin_tools
from ._workspace import Workspace as Workspace

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "SKIPPED_DIRECTORIES",
    "BuiltinToolError",
    "BuiltinTools",
    "BuiltinToolsConfig",
    "BuiltinToolsConfigError",
    "ProtectedPathError",
    "ShellPolicy",
    "ShellPolicyError",
    "ShellSetting",
    "Workspace",
    "WorkspacePathError",
    "builtin_tools",
]
