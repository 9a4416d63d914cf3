"""npm's reference ``@modelcontextprotocol/server-filesystem`` through a trio-agent turn."""

from __future__ import annotations

import json
from pathlib import Path

import trio
from mcp_helpers import GUARD, leftover_processes, mount

from trio_agent.mcp import StdioServerConfig
from trio_agent.session import ToolCallEvent, ToolResultEvent
from trio_agent.testing import event_types, open_test_harness, text, tool_call, turn_end_reasons


async def test_the_filesystem_server_lists_and_reads_files_in_a_turn(
    filesystem_server: Path, tmp_path: Path, marker: str
) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (root / "notes.txt").write_text("remember the milk\n")
    # A second allowed directory named after the marker, so the test can find the process.
    (tmp_path / marker).mkdir()
    script = [
        tool_call("c1", "fs__list_directory", {"path": str(root)}),
        tool_call("c2", "fs__read_text_file", {"path": str(root / "notes.txt")}),
        text("The notes say to remember the milk."),
    ]
    with trio.fail_after(GUARD):
        async with open_test_harness(script) as h:
            servers = await mount(
                h.ctx,
                StdioServerConfig(
                    name="fs",
                    command="node",
                    args=(str(filesystem_server), str(root), str(tmp_path / marker)),
                ),
            )
            (status,) = servers.servers()
            assert status.state == "up"
            assert {"fs__list_directory", "fs__read_text_file", "fs__write_file"} <= set(
                status.tools
            )
            agent = h.agent()
            agent.send("What do my notes say?")
            await agent.wait_idle()

            session = agent.session
            assert turn_end_reasons(session) == ["completed"]
            assert event_types(session).count("tool/call") == 2
            calls = [e.payload_as(ToolCallEvent) for e in session.events if e.type == "tool/call"]
            assert [(c.call_id, c.name) for c in calls] == [
                ("c1", "fs__list_directory"),
                ("c2", "fs__read_text_file"),
            ]
            assert json.loads(calls[1].arguments) == {"path": str(root / "notes.txt")}
            listed, read = [
                e.payload_as(ToolResultEvent).result
                for e in session.events
                if e.type == "tool/result"
            ]
            assert not listed.is_error and "[FILE] notes.txt" in listed.text
            assert (read.is_error, read.text) == (False, "remember the milk\n")
    assert leftover_processes(marker) == []
