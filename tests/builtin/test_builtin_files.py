"""The file tools: read_file, write_file, edit_file, list_dir, glob, grep."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from builtin_helpers import Mount, fails, ok

from trio_agent.runtime import Context
from trio_agent.tools import DENIED, INVALID_ARGS
from trio_agent.tools.builtin import Workspace, _files, _grep


def lines(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))


# --- read_file --------------------------------------------------------------------------------


async def test_read_whole_file_and_ranges(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "f.txt").write_text(lines(5))
    await mount()
    assert await ok(ctx, "read_file", path="f.txt") == lines(5)
    assert await ok(ctx, "read_file", path="f.txt", start_line=2, end_line=3) == (
        "line 2\nline 3\n[showing lines 2-3 of 5]"
    )
    assert await ok(ctx, "read_file", path="f.txt", start_line=4) == (
        "line 4\nline 5\n[showing lines 4-5 of 5]"
    )
    assert (
        await ok(ctx, "read_file", path="f.txt", end_line=1) == "line 1\n[showing lines 1-1 of 5]"
    )
    # A range past the end is clipped; a range covering the file is the file.
    assert await ok(ctx, "read_file", path="f.txt", start_line=5, end_line=99) == (
        "line 5\n[showing lines 5-5 of 5]"
    )
    assert await ok(ctx, "read_file", path="f.txt", start_line=1, end_line=5) == lines(5)


async def test_read_range_errors(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "f.txt").write_text(lines(3))
    await mount()
    message = await fails(ctx, "read_file", path="f.txt", start_line=7)
    assert (
        message
        == 'start_line 7 is past the end of "f.txt", which has 3 lines; pass a start_line from 1 to 3'
    )
    message = await fails(ctx, "read_file", path="f.txt", start_line=0)
    assert "start_line must be 1 or more" in message
    message = await fails(ctx, "read_file", path="f.txt", end_line=-1)
    assert "end_line must be 1 or more" in message
    message = await fails(ctx, "read_file", path="f.txt", start_line=3, end_line=2)
    assert "end_line 2 is before start_line 3" in message
    message = await fails(ctx, "read_file", INVALID_ARGS, path="f.txt", start_line="2")
    assert "start_line" in message


async def test_read_truncation_by_lines(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "f.txt").write_text(lines(10))
    await mount(max_read_lines=3)
    text = await ok(ctx, "read_file", path="f.txt")
    assert text == (
        "line 1\nline 2\nline 3\n[showing lines 1-3 of 10: read_file returns at most 3 lines / "
        "262144 bytes per call. To read on, call read_file with start_line=4]"
    )
    text = await ok(ctx, "read_file", path="f.txt", start_line=4)
    assert text.startswith("line 4\nline 5\nline 6\n[showing lines 4-6 of 10:")
    assert text.endswith("start_line=7]")
    # Reading on from the note reaches the end.
    text = await ok(ctx, "read_file", path="f.txt", start_line=10)
    assert text == "line 10\n[showing lines 10-10 of 10]"


async def test_read_truncation_by_bytes(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "f.txt").write_text("a" * 9 + "\n" + "b" * 9 + "\n" + "c\n")
    await mount(max_read_bytes=21)
    text = await ok(ctx, "read_file", path="f.txt")
    assert text.startswith("a" * 9 + "\n" + "b" * 9 + "\n[showing lines 1-2 of 3:")
    assert "at most 2000 lines / 21 bytes" in text and "start_line=3" in text


async def test_read_huge_file_note_gives_the_size(
    ctx: Context, mount: Mount, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "f.txt").write_text(lines(100))
    monkeypatch.setattr(_files, "_MAX_COUNT_BYTES", 10)  # "huge": do not count the rest
    await mount(max_read_lines=2)
    text = await ok(ctx, "read_file", path="f.txt")
    assert text.startswith("line 1\nline 2\n[showing lines 1-2 of a 792-byte file: ")
    assert await ok(ctx, "read_file", path="f.txt", start_line=99) == (
        "line 99\nline 100\n[showing lines 99-100 of 100]"
    )
    text = await ok(ctx, "read_file", path="f.txt", start_line=3, end_line=3)
    assert text == "line 3\n[showing lines 3-3 of a 792-byte file]"


async def test_read_long_line_is_cut(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "f.txt").write_text("x" * 100 + "\nshort\n")
    await mount(max_read_bytes=10)
    text = await ok(ctx, "read_file", path="f.txt")
    assert text.startswith("x" * 10 + "\n[showing lines 1-1 of 2:")
    assert text.endswith("[line 1 is longer than 10 bytes and was cut; use grep to search it]")
    assert await ok(ctx, "read_file", path="f.txt", start_line=2) == (
        "short\n[showing lines 2-2 of 2]"
    )


async def test_read_special_files(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "empty.txt").write_text("")
    (root / "img.bin").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    (root / "no-newline.txt").write_text("one\ntwo")
    (root / "d").mkdir()
    os.mkfifo(root / "fifo")
    await mount()
    assert await ok(ctx, "read_file", path="empty.txt") == "[empty.txt is empty]"
    assert "empty" in await fails(ctx, "read_file", path="empty.txt", start_line=2)
    message = await fails(ctx, "read_file", path="img.bin")
    assert message == (
        '"img.bin" looks like a binary file (it contains NUL bytes); the file tools only '
        "handle text"
    )
    assert await ok(ctx, "read_file", path="latin1.txt") == "caf\ufffd\n"
    assert await ok(ctx, "read_file", path="crlf.txt") == "a\r\nb\r\n"
    assert await ok(ctx, "read_file", path="no-newline.txt") == "one\ntwo"
    assert await ok(ctx, "read_file", path="no-newline.txt", start_line=2) == (
        "two\n[showing lines 2-2 of 2]"
    )
    message = await fails(ctx, "read_file", path="d")
    assert message == '"d" is a directory, not a file; use list_dir to see what it contains'
    assert "not a regular file" in await fails(ctx, "read_file", path="fifo")
    message = await fails(ctx, "read_file", path="missing.txt")
    assert message == '"missing.txt" does not exist; use list_dir or glob to find the right path'
    message = await fails(ctx, "read_file", path="empty.txt/x")
    assert "a part of the path is a file" in message


# --- write_file -------------------------------------------------------------------------------


async def test_write_creates_parents_and_reports_bytes(
    ctx: Context, mount: Mount, root: Path
) -> None:
    await mount()
    text = await ok(ctx, "write_file", path="a/b/c.txt", content="héllo\n")
    assert text == 'Wrote 7 bytes to "a/b/c.txt" (created the file)'
    assert (root / "a" / "b" / "c.txt").read_text() == "héllo\n"
    text = await ok(ctx, "write_file", path="a/b/c.txt", content="")
    assert text == 'Wrote 0 bytes to "a/b/c.txt" (replaced its previous content)'
    assert (root / "a" / "b" / "c.txt").read_bytes() == b""
    assert sorted(p.name for p in (root / "a" / "b").iterdir()) == ["c.txt"]  # no leftovers


async def test_write_keeps_permissions(ctx: Context, mount: Mount, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o750)
    await mount()
    await ok(ctx, "write_file", path="run.sh", content="#!/bin/sh\necho hi\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750


async def test_write_errors(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "d").mkdir()
    (root / "f").write_text("")
    await mount()
    assert "is a directory" in await fails(ctx, "write_file", path="d", content="x")
    assert "workspace root directory" in await fails(ctx, "write_file", path=".", content="x")
    message = await fails(ctx, "write_file", path="f/x.txt", content="x")
    assert message.startswith('cannot create the directory "f"')
    message = await fails(ctx, "write_file", path="x.txt", content="\ud800")
    assert "cannot be written as UTF-8" in message
    message = await fails(ctx, "write_file", INVALID_ARGS, path="x.txt")
    assert "content" in message


# --- edit_file --------------------------------------------------------------------------------


async def test_edit_replaces_the_unique_match(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "m.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    await mount()
    text = await ok(
        ctx, "edit_file", path="m.py", old="    return 2\n", new="    x = 2\n    return x\n"
    )
    assert text == 'Edited "m.py": replaced 2 lines at line 6 with 3 lines'
    assert (root / "m.py").read_text() == (
        "def f():\n    return 1\n\n\ndef g():\n    x = 2\n    return x\n"
    )
    await ok(ctx, "edit_file", path="m.py", old="def f():\n    return 1\n\n\n", new="")
    assert (root / "m.py").read_text() == "def g():\n    x = 2\n    return x\n"


async def test_edit_zero_and_multiple_matches(ctx: Context, mount: Mount, root: Path) -> None:
    original = "a = 1\nb = 1\na = 1\n  c = 3\n"
    (root / "m.py").write_text(original)
    await mount()
    message = await fails(ctx, "edit_file", path="m.py", old="a = 1\n", new="a = 2\n")
    assert message == (
        'old text occurs 2 times in "m.py" (at lines 1, 3); it must match exactly once: '
        "include more of the surrounding lines in old so it is unique, and make one edit per "
        "occurrence"
    )
    message = await fails(ctx, "edit_file", path="m.py", old="z = 9", new="z = 0")
    assert message == (
        'old text was not found in "m.py"; it must match the file exactly, including '
        "indentation, whitespace and line breaks: read the file with read_file and copy the "
        "text exactly"
    )
    message = await fails(ctx, "edit_file", path="m.py", old="    c = 3", new="c = 4")
    assert "it does occur with different leading or trailing whitespace" in message
    # Overlapping occurrences count too.
    (root / "o.txt").write_text("aaa")
    assert "occurs 2 times" in await fails(ctx, "edit_file", path="o.txt", old="aa", new="b")
    assert (root / "m.py").read_text() == original
    assert (root / "o.txt").read_text() == "aaa"


async def test_edit_other_errors(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "m.py").write_text("x\n")
    (root / "bin").write_bytes(b"x\0y")
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    await mount()
    assert "old is empty" in await fails(ctx, "edit_file", path="m.py", old="", new="y")
    assert "the same text" in await fails(ctx, "edit_file", path="m.py", old="x", new="x")
    assert "binary" in await fails(ctx, "edit_file", path="bin", old="x", new="z")
    message = await fails(ctx, "edit_file", path="latin1.txt", old="caf", new="tea")
    assert "not valid UTF-8" in message
    assert "does not exist" in await fails(ctx, "edit_file", path="nope.py", old="x", new="y")


async def test_edit_crlf_file_with_lf_text(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await mount()
    await ok(ctx, "edit_file", path="w.txt", old="one\ntwo\n", new="1\n2\n")
    assert (root / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


# --- list_dir ---------------------------------------------------------------------------------


async def test_list_dir(ctx: Context, mount: Mount, root: Path) -> None:
    for name in ("b.txt", "a.txt", ".hidden"):
        (root / name).write_text("")
    (root / "src").mkdir()
    (root / "src" / "m.py").write_text("")
    (root / "empty").mkdir()
    await mount()
    assert await ok(ctx, "list_dir") == ".hidden\na.txt\nb.txt\nempty/\nsrc/"
    assert await ok(ctx, "list_dir", path=".") == await ok(ctx, "list_dir", path="")
    assert await ok(ctx, "list_dir", path="src") == "m.py"
    assert await ok(ctx, "list_dir", path="empty") == "[empty is empty]"
    message = await fails(ctx, "list_dir", path="a.txt")
    assert message == '"a.txt" is a file, not a directory; use read_file to read it'
    assert "does not exist" in await fails(ctx, "list_dir", path="nope")


async def test_list_dir_cap(ctx: Context, mount: Mount, root: Path) -> None:
    for i in range(7):
        (root / f"f{i}").write_text("")
    await mount(max_results=3)
    assert await ok(ctx, "list_dir") == (
        "f0\nf1\nf2\n[... and 4 more entries, 7 in all (list_dir shows at most 3); use glob "
        "with a pattern to find specific files]"
    )


# --- glob -------------------------------------------------------------------------------------


@pytest.fixture
def tree(root: Path) -> Path:
    for path in (
        "README.md",
        ".env",
        "src/app.py",
        "src/util.py",
        "src/pkg/deep.py",
        "src/pkg/data.json",
        "docs/a.md",
        ".git/config",
        ".git/hooks/pre-commit.py",
        "node_modules/lib/index.js",
        "src/__pycache__/app.cpython-311.pyc",
    ):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"content of {path}\n")
    (root / "src" / "loop").symlink_to(root / "src")  # a cycle: ** must not follow it
    return root


@pytest.mark.usefixtures("tree")
async def test_glob_patterns(ctx: Context, mount: Mount, root: Path) -> None:
    await mount()
    assert await ok(ctx, "glob", pattern="**/*.py") == ("src/app.py\nsrc/pkg/deep.py\nsrc/util.py")
    assert await ok(ctx, "glob", pattern="*") == ".env\nREADME.md\ndocs/\nnode_modules/\nsrc/"
    assert await ok(ctx, "glob", pattern="src/*") == (
        "src/__pycache__/\nsrc/app.py\nsrc/loop/\nsrc/pkg/\nsrc/util.py"
    )
    assert await ok(ctx, "glob", pattern="src/?til.py") == "src/util.py"
    assert await ok(ctx, "glob", pattern="src/[a-b]*.py") == "src/app.py"
    # ``**`` lists skipped directories (and links) but does not enter them; .git is protected.
    assert await ok(ctx, "glob", pattern="**/") == (
        "docs/\nnode_modules/\nsrc/\nsrc/__pycache__/\nsrc/loop/\nsrc/pkg/"
    )
    assert await ok(ctx, "glob", pattern="src/**") == (
        "src/\nsrc/__pycache__/\nsrc/app.py\nsrc/loop/\nsrc/pkg/\nsrc/pkg/data.json\n"
        "src/pkg/deep.py\nsrc/util.py"
    )
    assert await ok(ctx, "glob", pattern="./docs//a.md") == "docs/a.md"
    assert await ok(ctx, "glob", pattern=str(root / "docs" / "*.md")) == "docs/a.md"
    # Skipped directories are entered only when the pattern names them (never .git).
    assert await ok(ctx, "glob", pattern=".git/**/*.py") == (
        'No paths match ".git/**/*.py" in the workspace'
    )
    assert await ok(ctx, "glob", pattern="**/node_modules/**/*.js") == ("node_modules/lib/index.js")
    assert await ok(ctx, "glob", pattern="src/loop/*.py") == "src/loop/app.py\nsrc/loop/util.py"


@pytest.mark.usefixtures("tree")
async def test_glob_no_match_and_errors(ctx: Context, mount: Mount) -> None:
    await mount()
    assert await ok(ctx, "glob", pattern="*.rs") == (
        'No paths match "*.rs" in the workspace; a pattern without "/" matches only at the '
        'top level, use "**/*.rs" to search all directories'
    )
    assert await ok(ctx, "glob", pattern="**/*.rs") == 'No paths match "**/*.rs" in the workspace'
    assert "pattern is empty" in await fails(ctx, "glob", pattern=" ")
    assert "matches only the workspace root" in await fails(ctx, "glob", pattern="./")
    assert "NUL" in await fails(ctx, "glob", pattern="a\0")


async def test_glob_cap(ctx: Context, mount: Mount, root: Path) -> None:
    for i in range(5):
        (root / f"f{i}.txt").write_text("")
    await mount(max_results=2)
    assert await ok(ctx, "glob", pattern="*.txt") == (
        "f0.txt\nf1.txt\n[... and 3 more matches, 5 in all (glob shows at most 2); narrow the "
        "pattern to see them]"
    )


# --- grep -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("tree")
async def test_grep_results_and_skipping(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "src" / "blob.bin").write_bytes(b"content\0binary")
    await mount()
    assert await ok(ctx, "grep", pattern=r"content of src/\w+\.py") == (
        "src/app.py:1: content of src/app.py\nsrc/util.py:1: content of src/util.py"
    )
    # .git, node_modules and __pycache__ are skipped; the binary file too.
    everything = await ok(ctx, "grep", pattern="content")
    assert [line.split(":")[0] for line in everything.splitlines()] == [
        ".env",
        "README.md",
        "docs/a.md",
        "src/app.py",
        "src/pkg/data.json",
        "src/pkg/deep.py",
        "src/util.py",
    ]
    # Naming a skipped directory searches it, unless it is protected.
    assert await ok(ctx, "grep", pattern="content", path="node_modules") == (
        "node_modules/lib/index.js:1: content of node_modules/lib/index.js"
    )
    assert "is protected" in await fails(ctx, "grep", DENIED, pattern="content", path=".git/hooks")
    assert await ok(ctx, "grep", pattern="CONTENT OF README", ignore_case=True) == (
        "README.md:1: content of README.md"
    )
    assert await ok(ctx, "grep", pattern="content", glob="*.json") == (
        "src/pkg/data.json:1: content of src/pkg/data.json"
    )
    assert await ok(ctx, "grep", pattern="content", glob="src/*.py", path="src") == (
        "src/app.py:1: content of src/app.py\nsrc/util.py:1: content of src/util.py"
    )
    assert (
        await ok(ctx, "grep", pattern="of", path="docs/a.md") == "docs/a.md:1: content of docs/a.md"
    )
    assert await ok(ctx, "grep", pattern="nothing here") == (
        'No matches for "nothing here" in "." (7 files searched, 1 binary file skipped)'
    )


async def test_grep_line_numbers_and_long_lines(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "f.txt").write_text("alpha\nbeta\ngamma\n" + "x" * 500 + "needle\n")
    await mount()
    assert await ok(ctx, "grep", pattern="^(beta|gamma)$") == "f.txt:2: beta\nf.txt:3: gamma"
    hit = await ok(ctx, "grep", pattern="needle")
    assert hit == "f.txt:4: " + "x" * 300 + " [...]"


async def test_grep_errors(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "bin").write_bytes(b"\0")
    await mount()
    message = await fails(ctx, "grep", pattern="foo(")
    assert message == (
        'invalid regular expression "foo(": missing ), unterminated subpattern at position 3; '
        "fix it, or escape special characters with a backslash (\\( \\. \\*) to match them "
        "literally"
    )
    assert "does not exist" in await fails(ctx, "grep", pattern="x", path="nope")
    assert "binary" in await fails(ctx, "grep", pattern="x", path="bin")


async def test_grep_caps(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "a.txt").write_text(lines(5, "hit"))
    (root / "b.txt").write_text(lines(5, "hit"))
    await mount(max_results=3)
    assert await ok(ctx, "grep", pattern="hit") == (
        "a.txt:1: hit 1\na.txt:2: hit 2\na.txt:3: hit 3\n[stopped after 3 matches: grep shows "
        "at most 3 matches / 32768 bytes; narrow the pattern, path or glob to see the rest]"
    )


async def test_grep_output_byte_cap(ctx: Context, mount: Mount, root: Path) -> None:
    (root / "a.txt").write_text(lines(50, "hit"))
    await mount(max_output_bytes=40)
    text = await ok(ctx, "grep", pattern="hit")
    assert text.splitlines()[:3] == [
        "a.txt:1: hit 1",
        "a.txt:2: hit 2",
        "[stopped after 2 matches: grep shows at most 500 matches / 40 bytes; narrow the pattern, path or glob to see the rest]",
    ]


# --- abandoned work stops ---------------------------------------------------------------------


def test_abandoned_walks_stop(root: Path) -> None:
    """A cancelled read-only call abandons its thread and sets ``stop``; the walk then ends at
    its next check instead of running on."""
    (root / "d").mkdir()
    (root / "d" / "f.txt").write_text("x\n")
    ws = Workspace(root)
    limits = _files.Limits(
        max_read_bytes=100, max_read_lines=10, max_results=10, max_output_bytes=100
    )
    stop = threading.Event()
    stop.set()
    with pytest.raises(_files.Stopped):
        _files.glob_paths(ws, limits, "**", stop)
    with pytest.raises(_files.Stopped):
        _grep._select(ws, ".", None, stop)
    with pytest.raises(_files.Stopped):
        _files.read_file(ws, limits, "d/f.txt", 2, None, stop)
