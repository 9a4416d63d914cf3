"""Path confinement: every escape is refused by every path-taking tool; legit paths work."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builtin_helpers import Mount, call, fails, ok

from trio_agent.runtime import Context
from trio_agent.tools import DENIED
from trio_agent.tools.builtin import BuiltinToolsConfigError, Workspace, WorkspacePathError

#: Arguments for each path-taking tool, given the path.
PATH_TOOLS: dict[str, Callable[[str], dict[str, Any]]] = {
    "read_file": lambda p: {"path": p},
    "write_file": lambda p: {"path": p, "content": "pwned\n"},
    "edit_file": lambda p: {"path": p, "old": "secret", "new": "pwned"},
    "list_dir": lambda p: {"path": p},
    "grep": lambda p: {"pattern": "secret", "path": p},
}


@pytest.fixture
def links(root: Path, outside: Path) -> None:
    """Symbolic links inside the workspace that point out of it (and some that do not)."""
    (root / "sub").mkdir()
    (root / "inside.txt").write_text("inside secret\n")
    (root / "file_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside)
    (root / "chain_b").symlink_to(outside / "secret.txt")
    (root / "chain_a").symlink_to(root / "chain_b")
    (root / "dangling_out").symlink_to(outside / "missing.txt")
    (root / "link_in").symlink_to(root / "inside.txt")
    (root / "dir_in").symlink_to(root / "sub")


def snapshot(directory: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def escapes(outside: Path) -> list[str]:
    return [
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "..",
        str(outside / "secret.txt"),
        str(outside),
        "/",
        "file_out",
        "dir_out",
        "dir_out/secret.txt",
        "chain_a",
        "dir_out/new.txt",
        "dir_out/deeper/new.txt",
        "dangling_out",
        "dir_in/../../outside/secret.txt",
    ]


@pytest.mark.usefixtures("links")
@pytest.mark.parametrize("name", sorted(PATH_TOOLS))
async def test_every_escape_is_refused(
    ctx: Context, mount: Mount, root: Path, outside: Path, name: str
) -> None:
    await mount()
    before = snapshot(outside)
    for path in escapes(outside):
        message = await fails(ctx, name, DENIED, **PATH_TOOLS[name](path))
        assert "outside the workspace root" in message, (path, message)
        assert str(root) in message
        assert "secret data" not in message
    assert snapshot(outside) == before  # nothing written, nothing created


@pytest.mark.parametrize("name", sorted(PATH_TOOLS))
async def test_nul_byte_is_refused(ctx: Context, mount: Mount, name: str) -> None:
    await mount()
    message = await fails(ctx, name, DENIED, **PATH_TOOLS[name]("a\0b.txt"))
    assert "NUL byte" in message


async def test_symlink_messages_say_so(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "out").symlink_to("/")
    await mount()
    message = await fails(ctx, "read_file", DENIED, path="out/etc/passwd")
    assert message == (
        f'path "out/etc/passwd" leads outside the workspace root {root} through a symbolic '
        "link; use a path inside the workspace"
    )
    message = await fails(ctx, "read_file", DENIED, path="../x")
    assert message == (
        f'path "../x" is outside the workspace root {root}; use a path inside it (relative '
        "paths start at the root)"
    )


@pytest.mark.usefixtures("links")
async def test_glob_never_leaves_the_root(
    ctx: Context, mount: Mount, root: Path, outside: Path
) -> None:
    await mount()
    for pattern in ("../*", "../outside/*", "sub/../../*", str(outside / "*"), "/etc/*"):
        message = await fails(ctx, "glob", DENIED, pattern=pattern)
        assert "workspace root" in message
    # Links out are neither listed nor entered; links in are listed.
    everything = (await ok(ctx, "glob", pattern="**")).splitlines()
    assert "file_out" not in everything and "dir_out/" not in everything
    assert "chain_a" not in everything and "dangling_out" not in everything
    assert "link_in" in everything and "dir_in/" in everything
    assert not any("secret.txt" in p for p in everything)
    assert "No paths match" in await ok(ctx, "glob", pattern="dir_out/*")
    assert "No paths match" in await ok(ctx, "glob", pattern="**/secret.txt")


@pytest.mark.usefixtures("links")
async def test_grep_never_reads_outside(ctx: Context, mount: Mount) -> None:
    await mount()
    hits = await ok(ctx, "grep", pattern="secret")
    assert hits.splitlines() == ["inside.txt:1: inside secret", "link_in:1: inside secret"]
    message = await fails(ctx, "grep", DENIED, pattern="secret", glob="../outside/*")
    assert "cannot leave" in message


@pytest.mark.usefixtures("links")
async def test_legit_paths_work(ctx: Context, mount: Mount, root: Path) -> None:
    await mount()
    # An absolute path inside the root.
    assert await ok(ctx, "read_file", path=str(root / "inside.txt")) == "inside secret\n"
    await ok(ctx, "write_file", path=str(root / "abs.txt"), content="a\n")
    assert (root / "abs.txt").read_text() == "a\n"
    # A symbolic link inside pointing inside: read, edit and write go to the target.
    assert await ok(ctx, "read_file", path="link_in") == "inside secret\n"
    await ok(ctx, "edit_file", path="link_in", old="secret", new="public")
    assert (root / "inside.txt").read_text() == "inside public\n"
    assert (root / "link_in").is_symlink()
    await ok(ctx, "write_file", path="dir_in/new.txt", content="n\n")
    assert (root / "sub" / "new.txt").read_text() == "n\n"
    assert await ok(ctx, "list_dir", path="dir_in") == "new.txt"
    # ".." that stays inside is fine.
    assert await ok(ctx, "read_file", path="sub/../inside.txt") == "inside public\n"
    assert "inside.txt" in await ok(ctx, "list_dir", path="sub/..")


def test_workspace_resolve(root: Path, outside: Path) -> None:
    (root / "dir_out").symlink_to(outside)
    ws = Workspace(str(root))
    assert ws.root == root.resolve()
    assert ws.resolve("a/b.txt") == root / "a" / "b.txt"
    assert ws.resolve("") == root
    assert ws.resolve(".") == root
    assert ws.resolve(str(root / "x")) == root / "x"
    assert ws.display(root / "a" / "b.txt") == "a/b.txt"
    assert ws.display(root) == "."
    with pytest.raises(WorkspacePathError, match="outside the workspace root"):
        ws.resolve("dir_out/not-yet/deeper.txt")
    with pytest.raises(WorkspacePathError, match="NUL"):
        ws.resolve("\0")
    with pytest.raises(TypeError):
        ws.resolve(b"x")  # type: ignore[arg-type]
    # ``~`` is an ordinary name inside the root.
    assert ws.resolve("~/x") == root / "~" / "x"


def test_workspace_root_through_a_symlink(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    ws = Workspace(alias)
    assert ws.root == root
    # The model may use the alias spelling; it resolves inside.
    assert ws.resolve(str(alias / "f.txt")) == root / "f.txt"


def test_workspace_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(BuiltinToolsConfigError, match="not an existing directory"):
        Workspace(tmp_path / "missing")
    (tmp_path / "file").write_text("")
    with pytest.raises(BuiltinToolsConfigError, match="not an existing directory"):
        Workspace(tmp_path / "file")
    with pytest.raises(BuiltinToolsConfigError, match="not a usable path"):
        Workspace("")


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_opened_file_outside_is_refused(root: Path, outside: Path) -> None:
    """The check after opening: a path that passed resolve() but was swapped to point out."""
    ws = Workspace(root)
    with pytest.raises(WorkspacePathError, match="changed while it was being opened"):
        ws.open_file(outside / "secret.txt", "swapped.txt")
    with pytest.raises(WorkspacePathError, match="changed while it was being opened"):
        ws.open_directory(outside, "swapped")


async def test_swapped_parent_directory_is_refused_on_write(
    ctx: Context, mount: Mount, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory swapped for a link out between resolve() and the write: the O_NOFOLLOW
    open of the checked directory fails, and nothing is written outside."""
    (root / "d").mkdir()
    await mount()
    real_makedirs = os.makedirs

    def swap_then_makedirs(path: Any, *args: Any, **kwargs: Any) -> None:
        if Path(path) == root / "d":
            (root / "d").rmdir()
            (root / "d").symlink_to(outside)
        real_makedirs(path, *args, **kwargs)

    monkeypatch.setattr(os, "makedirs", swap_then_makedirs)
    result = await call(ctx, "write_file", path="d/secret.txt", content="pwned")
    assert result.is_error
    assert (outside / "secret.txt").read_text() == "secret data\n"
