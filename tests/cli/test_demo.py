"""``make demo`` runs the offline tour and exits 0."""

from __future__ import annotations

import os
import sys

import trio


async def test_demo_tour_runs_offline() -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with trio.fail_after(120):
        result = await trio.run_process(
            [sys.executable, "-m", "trio_agent.demo"],
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    out = result.stdout.decode()
    assert result.returncode == 0, out + result.stderr.decode()
    for step in (
        "1. A multi-step, tool-using turn",
        "2. A second process resumes that session by id",
        "3. A turn cancelled with Ctrl-C",
        "4. The sessions on disk",
        "## Turn 2",
        "*(interrupted)*",
        "turn 1 ended: aborted",
        "== done",
    ):
        assert step in out, step
