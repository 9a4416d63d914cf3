"""The examples in examples/ run (they are what docs/embedding.md shows)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("name", ["embed.py", "plugin.py"])
async def test_example_runs(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with trio.fail_after(60):
        result = await trio.run_process(
            [sys.executable, str(EXAMPLES / name)],
            cwd=tmp_path,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    if name == "embed.py":
        assert "[turn 1: completed]" in out
        assert "sees the weather tool: True" in out
    else:
        assert "audit: ['list_dir: ok', 'write_file: DENIED']" in out
        assert "turns: ['completed', 'completed', 'rejected']" in out
        assert "audit service after dispose: None" in out
    assert not (tmp_path / ".trio-agent").exists()  # memory persistence: nothing on disk
