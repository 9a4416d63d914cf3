"""The core never imports the MCP SDK, and a missing extra says how to install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN_A_HARNESS = """
import sys
import trio
import trio_agent, trio_agent.cli, trio_agent.config, trio_agent.testing
from trio_agent.testing import open_test_harness, text

async def main():
    async with open_test_harness([text("hi")]) as h:
        agent = h.agent()
        agent.send("hello")
        await agent.wait_idle()
    async with trio_agent.open_harness() as ctx:
        agent = ctx.agent_loop.create("offline")
        agent.send("hello")
        await agent.wait_idle()

trio.run(main)
print(sorted(m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "mcp_types", "trio_agent.mcp"))))
"""

WITHOUT_THE_SDK = """
import sys

class NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoMcp())
try:
    import trio_agent.mcp
except ImportError as exc:
    print(type(exc).__name__, exc.name, exc)
"""


def run(code: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_importing_trio_agent_and_running_a_harness_loads_no_mcp_module(tmp_path: Path) -> None:
    assert run(RUN_A_HARNESS, tmp_path) == "[]"


def test_without_the_sdk_the_import_error_names_the_extra(tmp_path: Path) -> None:
    line = run(WITHOUT_THE_SDK, tmp_path)
    assert line.startswith("ImportError mcp ")
    assert "pip install 'trio-agent[mcp]'" in line
