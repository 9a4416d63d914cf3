"""A real MCP server for the tests, written with the SDK's own ``MCPServer``.

Run it as ``python tests/mcp/mcp_server.py [options]``: over stdio by default, or with
``--http`` over streamable HTTP on 127.0.0.1 (it prints ``PORT <n>`` first). Options:

``--stubborn``   ignore SIGTERM and keep running after stdin closes (only SIGKILL stops it)
``--collide``    also offer the tools ``a.b`` and ``a_b`` (one trio-agent name)
``--die``        write a line to stderr (and $TRIO_AGENT_TEST_LEAK, if set) and exit 3 before
                 speaking MCP
``--mute``       never answer anything (start-up times out)
``--marker=X``   ignored; lets a test find its processes by command line
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import EmbeddedResource, TextContent, TextResourceContents, ToolAnnotations

OPTIONS = set(sys.argv[1:])

server = MCPServer("trio-agent-test", log_level="WARNING")

# What the waiting tools watch; an event replaced on every change wakes them.
state: dict[str, Any] = {"sleeping": 0, "cancelled": 0, "changed": None}


def _changed() -> None:
    event = state["changed"]
    state["changed"] = None
    if event is not None:
        event.set()


async def _until(condition: Any) -> None:
    with anyio.fail_after(60):
        while not condition():
            if state["changed"] is None:
                state["changed"] = anyio.Event()
            await state["changed"].wait()


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def sleep() -> str:
    """Sleep until cancelled."""
    state["sleeping"] += 1
    _changed()
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        state["cancelled"] += 1
        _changed()
        raise
    finally:
        state["sleeping"] -= 1
    return "woke up"  # pragma: no cover


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def wait_sleeping() -> str:
    """Return once a call to sleep is in progress."""
    await _until(lambda: state["sleeping"] > 0)
    return "sleeping"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def wait_cancelled(count: int) -> str:
    """Return once `count` calls to sleep have been cancelled."""
    await _until(lambda: state["cancelled"] >= count)
    return f"cancelled {state['cancelled']}"


@server.tool()
def fail(message: str) -> str:
    """Fail with the message."""
    raise ToolError(message)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def image() -> Image:
    """Return a small PNG."""
    return Image(data=b"\x89PNG\r\n\x1a\n" + bytes(range(16)), format="png")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def resource() -> list[TextContent | EmbeddedResource]:
    """Return a text and an embedded text resource."""
    return [
        TextContent(type="text", text="see the resource"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="file:///notes.txt", text="the notes"),
        ),
    ]


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Offer a new tool called `name` and announce the changed list."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"The added tool {name}.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Withdraw the tool called `name` and announce the changed list."""
    server.remove_tool(name)
    await ctx.session.send_tool_list_changed()
    return f"removed {name}"


@server.tool()
def crash() -> str:
    """Die at once, without answering."""
    os.kill(os.getpid(), signal.SIGKILL)
    return "unreachable"  # pragma: no cover


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def env(name: str) -> str:
    """The value of the environment variable `name`, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def header(name: str, ctx: Context) -> str:
    """The value of the HTTP request header `name`, or <none>."""
    return (ctx.headers or {}).get(name.lower(), "<none>")


if "--collide" in OPTIONS:
    server.add_tool(lambda: "dot", name="a.b", description="A dotted name.")
    server.add_tool(lambda: "underscore", name="a_b", description="An underscored name.")


def main() -> None:
    if "--die" in OPTIONS:
        leak = os.environ.get("TRIO_AGENT_TEST_LEAK")
        if leak:
            print(f"my key is {leak}", file=sys.stderr, flush=True)
        print("the test server refuses to start", file=sys.stderr, flush=True)
        sys.exit(3)
    if "--mute" in OPTIONS:
        time.sleep(3600)
    if "--stubborn" in OPTIONS:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--http" in OPTIONS:
        import uvicorn

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        app = server.streamable_http_app(host="127.0.0.1")
        config = uvicorn.Config(app, log_level="warning")
        anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))
        return
    server.run()
    if "--stubborn" in OPTIONS:
        time.sleep(3600)


if __name__ == "__main__":
    main()
