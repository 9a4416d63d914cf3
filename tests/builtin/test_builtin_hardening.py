"""The hardening pieces one by one: the linear glob matcher, the protection rules and their
config, the scrubbed environment and the git argv defence (the adversarial suite in
tests/security plays them against a hostile model)."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest
from builtin_helpers import Mount, fails, ok
from hypothesis import given
from hypothesis import strategies as st

from trio_agent.runtime import Context
from trio_agent.tools import DENIED
from trio_agent.tools.builtin import (
    BuiltinToolsConfig,
    BuiltinToolsConfigError,
    ProtectedPathError,
    ShellPolicy,
    ShellPolicyError,
    Workspace,
    WorkspacePathError,
)
from trio_agent.tools.builtin._environment import shell_environment
from trio_agent.tools.builtin._git import git_argv, git_environment
from trio_agent.tools.builtin._globs import GlobPattern, GlobTooComplex

# --- the glob matcher -------------------------------------------------------------------------


def _reference(pattern: list[str], names: list[str]) -> bool:
    """The obvious (exponential) recursive matcher, as the specification."""
    if not pattern:
        return not names
    if pattern[0] == "**":
        return any(_reference(pattern[1:], names[i:]) for i in range(len(names) + 1))
    return (
        bool(names)
        and fnmatch.fnmatchcase(names[0], pattern[0])
        and _reference(pattern[1:], names[1:])
    )


@given(
    st.lists(
        st.sampled_from(["**", "*", "a", "a*", "?", "[ab]", "b", "*b*"]), min_size=1, max_size=6
    ),
    st.lists(st.sampled_from(["a", "b", "ab", "ba", "aa", "c"]), max_size=6),
)
def test_glob_matches_like_the_reference(pattern: list[str], names: list[str]) -> None:
    assert GlobPattern.compile(pattern).match(names) == _reference(pattern, names)


def test_glob_folding_and_bounds() -> None:
    folded = GlobPattern.compile(["Secrets", "*.PEM"], fold=True)
    assert folded.match(["secrets", "key.pem"]) and folded.match(["SECRETS", "KEY.pem"])
    assert not GlobPattern.compile(["*.PEM"]).match(["key.pem"])
    with pytest.raises(GlobTooComplex, match="the limit is 64 components"):
        GlobPattern.compile(["a"] * 65)
    with pytest.raises(GlobTooComplex, match="1024 characters"):
        GlobPattern.compile(["a" * 1025])


async def test_glob_refuses_a_too_complex_pattern(ctx: Context, mount: Mount) -> None:
    await mount()
    assert "too complex" in await fails(ctx, "glob", pattern="a/" * 70)


# --- protection -------------------------------------------------------------------------------


def test_workspace_protection_rules(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    ws = Workspace(tmp_path, protect_paths=[str(tmp_path / "conf" / "a.yml")], protect=["*.key"])
    root = str(ws.root)
    assert ws.protection(f"{root}/.git/config") is not None
    assert ws.protection(f"{root}/src/.GIT") is not None
    assert ws.protection(f"{root}/.gitignore") is None  # not .git itself
    assert ws.protection(f"{root}/.trio-agent") is not None
    assert ws.protection(f"{root}/src/.trio-agent") is None  # only the root's
    assert ws.protection(f"{root}/trio-agent.yml") is not None
    assert ws.protection(f"{root}/src/trio-agent.yml") is None
    assert ws.protection(f"{root}/conf/a.yml") is not None
    assert ws.protection(f"{root}/conf/a.yml.bak") is None
    assert ws.protection(f"{root}/x.key") is not None and ws.protection(f"{root}/d/x.key") is None
    assert ws.protection(f"{root}/conftest.py") is None
    assert ws.protection(f"{root}/conftest.py", write=True) is not None
    assert ws.protection(root) is None
    with pytest.raises(ProtectedPathError, match="is protected: it is git's repository data"):
        ws.resolve(".git/config")
    assert issubclass(ProtectedPathError, WorkspacePathError)
    lifted = Workspace(tmp_path, protect_writes=[])
    assert lifted.protection(f"{root}/conftest.py", write=True) is None


def test_protect_config_validation() -> None:
    config = BuiltinToolsConfig(protect=("secrets/**", "~/keys"), shell_env=("CARGO_HOME",))
    assert config.protect_writes == ("**/conftest.py",)
    for bad, message in [
        ({"protect": ("../up",)}, r"protect\[0\]: '../up' is not a usable glob"),
        ({"protect": ("",)}, "expected a list of non-empty strings"),
        ({"protect_writes": ("/abs",)}, r"protect_writes\[0\]: '/abs' is a path"),
        ({"protect": ("a/" * 70,)}, "the limit is 64 components"),
        ({"shell_env": ("A=B",)}, "cannot be environment variable names"),
        (
            {"shell_env": ("KEY",), "shell_env_deny": ("KEY",)},
            "KEY is a provider's API key variable",
        ),
    ]:
        with pytest.raises(BuiltinToolsConfigError, match=message):
            BuiltinToolsConfig(**bad)  # type: ignore[arg-type]


async def test_config_from_data(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "secret.key").write_text("k\n")
    (root / "conftest.py").write_text("# fixtures\n")
    await mount(protect=["*.key"], protect_writes=[], search_timeout=5)
    assert "is protected" in await fails(ctx, "read_file", DENIED, path="secret.key")
    assert await ok(ctx, "edit_file", path="conftest.py", old="fixtures", new="more")


# --- the environment --------------------------------------------------------------------------


def test_shell_environment(tmp_path: Path) -> None:
    source = {
        "PATH": f"/usr/bin:.::relative/bin:{tmp_path}/bin:{tmp_path}:/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
        "USER": "u",
        "OPENAI_API_KEY": "sk-1",
        "CARGO_HOME": "/c",
        "AWS_SECRET_ACCESS_KEY": "x",
        "GIT_CONFIG_COUNT": "0",
    }
    env = shell_environment(
        source, extra=("CARGO_HOME", "OPENAI_API_KEY"), deny=("OPENAI_API_KEY",), root=tmp_path
    )
    assert env["PATH"] == "/usr/bin:/bin"
    assert {k: env[k] for k in ("HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER")} == {
        k: source[k] for k in ("HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER")
    }
    assert env["CARGO_HOME"] == "/c"
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert {k: v for k, v in env.items() if k.startswith("GIT_")} == git_environment()
    assert git_environment()["GIT_CONFIG_COUNT"] == "3"


async def test_shell_gets_only_the_scrubbed_environment(
    ctx: Context, mount: Mount, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_PROVIDER_KEY", "sk-secret")
    monkeypatch.setenv("WANTED", "yes")
    await mount(shell=["env"], shell_env=["WANTED"], shell_env_deny=["MY_PROVIDER_KEY"])
    text = await ok(ctx, "shell", command="env")
    assert "WANTED=yes" in text and "sk-secret" not in text and "PATH=" in text


# --- git --------------------------------------------------------------------------------------


def test_git_argv() -> None:
    defence = ["-c", "core.fsmonitor=", "-c", "core.hooksPath=/dev/null", "-c"]
    assert git_argv(["git", "log", "-1"], "c")[: len(defence) + 1] == ["git", *defence]
    assert git_argv(["git", "--no-pager", "log"], "c")[-4:] == [
        "-c",
        "alias.log=",
        "--no-pager",
        "log",
    ]
    assert git_argv(["git"], "git")[-1] == "safe.bareRepository=explicit"
    assert git_argv(["git", "clean", "-x", "-n"], "c")[-3:] == ["clean", "-x", "-n"]
    assert git_argv(["git", "log", "--", "--exec"], "c")[-1] == "--exec"  # a path after --
    for words, message in [
        (["git", "-c", "a=b", "status"], "option '-c' before the subcommand"),
        (["git", "config", "user.name"], "'git config' is not available here"),
        (["git", "submodule", "foreach", "ls"], "'git submodule foreach' runs programs"),
        (["git", "rebase", "-ix", "ls"], "git option '-x' runs programs"),
        (["git", "fetch", "--upload-pack=x"], "git option '--upload-pack' runs programs"),
    ]:
        with pytest.raises(ShellPolicyError, match=message):
            git_argv(words, " ".join(words))


def test_prefix_policy_applies_the_git_defence_only_to_git() -> None:
    policy = ShellPolicy.parse(["git", "/usr/bin/git log", "echo"])
    assert policy.argv("echo git -c x") == ["echo", "git", "-c", "x"]
    assert "alias.log=" in policy.argv("/usr/bin/git log")
    with pytest.raises(ShellPolicyError, match="before the subcommand"):
        policy.argv("git -c alias.x='!ls' x")


async def test_arguments_naming_protected_paths(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "a.txt").write_text("a\n")
    await mount(shell=["cat"])
    assert await ok(ctx, "shell", command="cat a.txt") == "a\n[exit code 0]"
    message = await fails(ctx, "shell", DENIED, command="cat --x=.git/config")
    assert "its argument '.git/config' names a protected path" in message
    os.symlink(".trio-agent", root / "state")
    assert "names a protected path" in await fails(ctx, "shell", DENIED, command="cat state/x")
