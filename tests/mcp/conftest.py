"""Fixtures for the MCP tests: a marker per test, the test server over HTTP, the npm
filesystem server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio
from mcp_helpers import GUARD, SERVER, HttpServer, marked_processes


@pytest.fixture
def marker() -> Iterator[str]:
    """A token for this test's server command lines; no marked process may outlive the test."""
    token = f"trio-agent-mcp-test-{uuid.uuid4().hex}"
    yield token
    assert marked_processes(token) == [], "a server process outlived its test"


@pytest.fixture
async def http_server() -> AsyncIterator[HttpServer]:
    """The test server over streamable HTTP, started by the test and killed after it."""
    process = await trio.lowlevel.open_process(
        [sys.executable, str(SERVER), "--http"], stdout=subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        seen = b""
        with trio.fail_after(GUARD):
            while b"\n" not in seen:
                chunk = await process.stdout.receive_some()
                assert chunk, "the HTTP test server exited before printing its port"
                seen += chunk
        port = int(seen.split(b"\n", 1)[0].removeprefix(b"PORT "))
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", process.pid)
    finally:
        with trio.CancelScope(shield=True):
            process.kill()
            await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


#: Where the npm reference server is installed (override with TRIO_AGENT_MCP_NPM_CACHE).
NPM_CACHE = Path(os.environ.get("TRIO_AGENT_MCP_NPM_CACHE") or Path(sys.prefix) / "mcp-npm-cache")
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"


@pytest.fixture(scope="session")
def filesystem_server() -> Path:
    """The entry point of npm's reference filesystem server, installed on first use.

    Skips (with the reason in the summary) only when node or npm is not on PATH.
    """
    entry = NPM_CACHE / "node_modules" / FILESYSTEM_PACKAGE / "dist" / "index.js"
    if not entry.exists():
        npm = shutil.which("npm")
        if npm is None or shutil.which("node") is None:
            pytest.skip(f"npm and node are needed to install {FILESYSTEM_PACKAGE}; not found")
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(NPM_CACHE),
                FILESYSTEM_PACKAGE,
            ],
            check=True,
            timeout=600,
            capture_output=True,
        )
    assert entry.exists(), f"npm installed {FILESYSTEM_PACKAGE} but {entry} is missing"
    return entry
