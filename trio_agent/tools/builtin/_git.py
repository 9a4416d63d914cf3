"""The git defence: what the ``shell`` tool does about git's ways of running other programs.

``git status`` looks read-only, but git runs programs its configuration names (an fsmonitor
hook, hooks, aliases starting with ``!``, pagers, diff and merge drivers). The defence:

* Every child of the shell tool gets, through ``GIT_CONFIG_COUNT`` / ``GIT_CONFIG_KEY_n`` /
  ``GIT_CONFIG_VALUE_n`` (git 2.31+; command-line precedence, so a repository's own
  configuration cannot override it), ``core.fsmonitor=`` (no fsmonitor program),
  ``core.hooksPath=/dev/null`` (no hooks) and ``safe.bareRepository=explicit`` (a bare
  repository the model assembled from plain files in the workspace is not used). This reaches
  every git the command starts, including one run by a script or a test.
* With an allowed-prefix policy, a command whose program is ``git`` also gets the same
  settings as ``-c`` options (for older git), plus ``-c alias.<subcommand>=`` so that no alias
  can stand in for the subcommand (builtins are unaffected: they take precedence over aliases).
  Options before the subcommand other than a few harmless ones are refused (``-c`` and
  ``--config-env`` set configuration, so ``git -c alias.x='!cmd' x`` would run ``cmd``;
  ``-C``, ``--git-dir`` and ``--work-tree`` point git at another repository; ``--exec-path``
  picks the programs git runs), as are the subcommands and options that run a program named
  on the command line or rewrite git's configuration (:data:`_REFUSED_SUBCOMMANDS`,
  :data:`_REFUSED_OPTIONS`).

The file tools never write ``.git`` (see :mod:`._protect`), so the repository's configuration
and hooks can only be what the user put there. None of this makes an allowed prefix a sandbox.
"""

from __future__ import annotations

import os

from ._errors import ShellPolicyError

__all__ = ["GIT_CONFIG_DEFENCE", "git_argv", "git_environment", "is_git"]

#: The configuration every git the shell tool starts runs with.
GIT_CONFIG_DEFENCE: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", ""),
    ("core.hooksPath", "/dev/null"),
    ("safe.bareRepository", "explicit"),
)

_SAFE_GLOBAL_OPTIONS = frozenset(
    {
        "--no-pager",
        "-P",
        "--no-optional-locks",
        "--literal-pathspecs",
        "--glob-pathspecs",
        "--noglob-pathspecs",
        "--icase-pathspecs",
        "--no-replace-objects",
        "--version",
        "--help",
        "-h",
    }
)

_RUNS_ARGUMENTS = "runs programs named on its command line"
_REFUSED_SUBCOMMANDS: dict[str, str] = {
    "config": "rewrites git's configuration, which names programs git runs (aliases, "
    "fsmonitor, pagers, diff and merge drivers)",
    "filter-branch": _RUNS_ARGUMENTS,
    "difftool": _RUNS_ARGUMENTS,
    "mergetool": _RUNS_ARGUMENTS,
    "instaweb": "starts a web server and a browser",
    "send-email": "sends e-mail",
    "daemon": "starts a server",
    "web--browse": "starts a browser",
    "credential": "reads and stores credentials",
    "credential-store": "reads and stores credentials",
    "credential-cache": "reads and stores credentials",
    "upload-pack": "is a server-side program",
    "receive-pack": "is a server-side program",
    "upload-archive": "is a server-side program",
    "shell": "is a login shell",
}
#: Words after these subcommands that make them run a program given as an argument.
_REFUSED_ACTIONS: dict[str, frozenset[str]] = {
    "submodule": frozenset({"foreach"}),
    "bisect": frozenset({"run"}),
}
#: Options (long ones also as ``--opt=value``) that name a program to run, per subcommand
#: (``*``: any subcommand).
_REFUSED_OPTIONS: dict[str, frozenset[str]] = {
    "*": frozenset({"--exec", "--upload-pack", "--receive-pack", "--extcmd"}),
    "rebase": frozenset({"-x"}),
    "grep": frozenset({"-O", "--open-files-in-pager"}),
    "clone": frozenset({"-u", "-c", "--config"}),
    "ls-remote": frozenset({"-u"}),
}


def is_git(program: str) -> bool:
    """Whether ``program`` (an argv[0]) is git."""
    return os.path.basename(program) == "git"


def git_environment() -> dict[str, str]:
    """The environment variables that give every git :data:`GIT_CONFIG_DEFENCE`."""
    env = {"GIT_CONFIG_COUNT": str(len(GIT_CONFIG_DEFENCE)), "GIT_TERMINAL_PROMPT": "0"}
    for i, (key, value) in enumerate(GIT_CONFIG_DEFENCE):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _refused(command: str, why: str) -> ShellPolicyError:
    return ShellPolicyError(
        f"command {command!r} is refused: {why}. The shell tool does not let git run "
        "other programs or change its configuration; ask the user to run it if it is needed"
    )


def _has_option(word: str, option: str) -> bool:
    if option.startswith("--"):
        return word == option or word.startswith(option + "=")
    # A short option, alone, with an attached value, or inside a cluster such as -ix.
    return word.startswith("-") and not word.startswith("--") and option[1] in word[1:]


def git_argv(words: list[str], command: str) -> list[str]:
    """The argv to run for the git command ``words`` (``words[0]`` is git), with the defence
    settings as ``-c`` options.

    Raises:
        ShellPolicyError: a refused option before the subcommand, subcommand, action or
            option (see the module documentation).
    """
    i = 1
    while i < len(words) and words[i].startswith("-"):
        if words[i] not in _SAFE_GLOBAL_OPTIONS:
            raise _refused(
                command,
                f"git option {words[i]!r} before the subcommand can set configuration (such as "
                "an alias that runs a program) or point git at another repository; put options "
                "after the subcommand",
            )
        i += 1
    sub = words[i] if i < len(words) else None
    if sub is not None:
        if sub in _REFUSED_SUBCOMMANDS:
            raise _refused(
                command, f"'git {sub}' is not available here: it {_REFUSED_SUBCOMMANDS[sub]}"
            )
        rest = words[i + 1 :]
        for action in _REFUSED_ACTIONS.get(sub, frozenset()):
            if action in rest:
                raise _refused(command, f"'git {sub} {action}' {_RUNS_ARGUMENTS}")
        options = _REFUSED_OPTIONS["*"] | _REFUSED_OPTIONS.get(sub, frozenset())
        for word in rest:
            if word == "--":
                break
            for option in options:
                if _has_option(word, option):
                    raise _refused(command, f"git option {option!r} {_RUNS_ARGUMENTS}")
    defence = [f"{key}={value}" for key, value in GIT_CONFIG_DEFENCE]
    if sub is not None:
        defence.append(f"alias.{sub}=")
    return [words[0], *(arg for setting in defence for arg in ("-c", setting)), *words[1:]]
