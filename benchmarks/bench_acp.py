"""ACP cancel latency: ``session/cancel`` sent → ``stopReason: cancelled`` received.

A prompt streams a little text and then the model hangs; as soon as the first
``agent_message_chunk`` arrives the client sends ``session/cancel`` and times the wait for the
``session/prompt`` response (p50 / p99):

1. in-process: :func:`trio_agent.acp.serve` over trio memory streams;
2. a real ``trio-agent acp`` server process over pipes (``main_acp`` with a scripted model).

Floor: ``agent.cancel()`` → ``wait_idle()`` returning, on the same scripted model in the same
process and run - the cancel itself without the protocol around it. Lower is better.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from benchmarks._harness import Metric, print_table
from trio_agent.acp import AcpOptions, main_acp, serve
from trio_agent.config import HarnessConfig, LlmConfig, PersistenceConfig
from trio_agent.llm import LlmService
from trio_agent.runtime import Context
from trio_agent.testing import ScriptedAdapter, ScriptedProvider, hang, open_test_harness

CONFIG = HarnessConfig(
    llm=LlmConfig(providers=(ScriptedProvider.Config(),)),
    persistence=PersistenceConfig(type="memory"),
)


def _hanging(count: int) -> Callable[[Context], Awaitable[None]]:
    """A ``setup`` giving the scripted model ``count`` responses that stream, then hang."""

    async def setup(ctx: Context) -> None:
        adapter = ctx.require(LlmService).get("scripted")
        assert isinstance(adapter, ScriptedAdapter)
        adapter.push(*[hang(["partial ", "text"]) for _ in range(count)])

    return setup


class _Client:
    """Just enough of an ACP client: frames out, frames in."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self._send = send
        self._receive = receive
        self._buffer = b""

    async def send(self, message: dict[str, Any]) -> None:
        await self._send.send_all(json.dumps(message).encode() + b"\n")

    async def frame(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            data = await self._receive.receive_some(65536)
            if not data:
                raise RuntimeError("the server closed its output")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        frame: dict[str, Any] = json.loads(line)
        return frame

    async def answer(self, request_id: int) -> dict[str, Any]:
        while True:
            frame = await self.frame()
            if frame.get("id") == request_id and "method" not in frame:
                return frame

    async def cancel_latencies(self, cwd: str, samples: int) -> list[float]:
        await self.send(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        )
        await self.answer(1)
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": cwd, "mcpServers": []},
            }
        )
        session_id = (await self.answer(2))["result"]["sessionId"]
        latencies = []
        for i in range(samples + 1):  # the first one warms up (and is dropped)
            request_id = 100 + i
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
            await self.send(
                {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": prompt}
            )
            while (await self.frame()).get("method") != "session/update":
                pass
            start = time.perf_counter()
            await self.send(
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
            )
            answer = await self.answer(request_id)
            latencies.append(time.perf_counter() - start)
            assert answer["result"]["stopReason"] == "cancelled", answer
        return latencies[1:]


async def _in_process(samples: int, cwd: str) -> list[float]:
    to_server, from_client = trio.testing.memory_stream_one_way_pair()
    to_client, from_server = trio.testing.memory_stream_one_way_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: serve(
                CONFIG, from_client, to_client, options=AcpOptions(), setup=_hanging(samples + 1)
            )
        )
        latencies = await _Client(to_server, from_server).cancel_latencies(cwd, samples)
        await to_server.aclose()
    return latencies


async def _subprocess(samples: int, cwd: str) -> list[float]:
    config = Path(cwd) / "bench-acp.yml"
    config.write_text(
        "llm: {providers: [{name: scripted, type: scripted}]}\npersistence: {type: memory}\n"
    )
    command = [
        sys.executable,
        "-m",
        "benchmarks.bench_acp",
        "--serve",
        str(config),
        str(samples + 1),
    ]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        latencies = await _Client(process.stdin, process.stdout).cancel_latencies(cwd, samples)
    finally:
        await process.stdin.aclose()
        with trio.fail_after(30):
            await process.wait()
    return latencies


async def _floor(samples: int) -> list[float]:
    async with open_test_harness([hang(["partial ", "text"]) for _ in range(samples + 1)]) as h:
        agent = h.agent()
        latencies = []
        for _ in range(samples + 1):
            chunk = trio.Event()
            off = agent.ctx.on("agent/stream-chunk", lambda _, seen=chunk: seen.set())
            agent.send("go")
            await chunk.wait()
            start = time.perf_counter()
            agent.cancel()
            await agent.wait_idle()
            latencies.append(time.perf_counter() - start)
            off()
    return latencies[1:]


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * q) - 1)] * 1e6


def run(smoke: bool) -> list[Metric]:
    samples = 5 if smoke else 200
    with tempfile.TemporaryDirectory() as cwd:
        floor = trio.run(_floor, samples)
        inproc = trio.run(_in_process, samples, cwd)
        process = trio.run(_subprocess, 5 if smoke else 50, cwd)
    floor_p50 = statistics.median(floor) * 1e6
    rows = []
    for label, values in (("in-process", inproc), ("real process, pipes", process)):
        rows.append(
            Metric(
                f"ACP session/cancel → stopReason cancelled ({label}), p50",
                statistics.median(values) * 1e6,
                "µs",
                floor_p50,
                note="floor: agent.cancel() → wait_idle()",
            )
        )
        rows.append(
            Metric(f"ACP session/cancel → cancelled ({label}), p99", _p(values, 0.99), "µs")
        )
    return rows


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        raise SystemExit(main_acp(["-c", sys.argv[2]], setup=_hanging(int(sys.argv[3]))))
    print_table(run("--smoke" in sys.argv))
