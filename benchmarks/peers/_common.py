"""Shared driver for the peer workload scripts (run by the ``.venv-peers`` interpreter, not ours).

Each ``benchmarks/peers/<peer>_workloads.py`` supplies two coroutines that mirror
``benchmarks/bench_loop.py`` and hands them to :func:`main`, which prints one JSON line:

- workload 1, ``loop(steps) -> seconds per step``: one agent, a scripted zero-latency model that
  asks for one ``noop()`` tool call per step and answers with text on the last step;
- workload 5, ``agents(count, latency) -> {"wall": s, "rss_per_agent_kib": KiB}``: ``count``
  agents each run one turn concurrently; the model answers every request with one short text
  after ``asyncio.sleep(latency)``.

Workload 5 runs first, in this fresh process, so its peak-RSS reading is not masked by the
high-water mark of workload 1 (``ru_maxrss`` only ever grows). Any network access is refused and
counted: these are offline benchmarks and must never reach a provider.

Only the standard library is imported here; the peer packages are imported by the peer script.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import socket
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from importlib.metadata import version
from typing import Any

# Telemetry off before any peer package is imported (they read these at import or first use).
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
os.environ["OTEL_SDK_DISABLED"] = "true"

NETWORK_ATTEMPTS: list[str] = []


def _refuse(what: str) -> OSError:
    NETWORK_ATTEMPTS.append(what)
    return OSError(f"network access is disabled in the peer benchmarks: {what}")


def forbid_network() -> None:
    """Make every outbound connection and DNS lookup fail (and record it). Local socketpairs,
    which asyncio uses for its self-pipe, keep working."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if self.family == socket.AF_UNIX:
            return real_connect(self, address)
        raise _refuse(f"connect {address!r}")

    def connect_ex(self: socket.socket, address: Any) -> int:
        if self.family == socket.AF_UNIX:
            return real_connect_ex(self, address)
        raise _refuse(f"connect {address!r}")

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        raise _refuse(f"getaddrinfo {host!r}:{port!r}")

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> Any:
        raise _refuse(f"create_connection {address!r}")

    # A monkeypatch: the replacements take the Python subclass, typeshed's slots the C base.
    socket.socket.connect = connect  # type: ignore[method-assign, assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign, assignment]
    socket.getaddrinfo = getaddrinfo
    socket.create_connection = create_connection


def maxrss_kib() -> int:
    """Peak resident set size of this process so far, in KiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def many_agents(
    make_agents: Callable[[int], Sequence[Any]],
    run_one: Callable[[Any], Awaitable[None]],
    count: int,
) -> dict[str, float]:
    """Workload 5, measured exactly like ``bench_loop._many_agents``: RSS baseline after setup,
    agents built outside the timed region, then every turn started at once."""
    baseline = maxrss_kib()
    agents = make_agents(count)
    start = time.perf_counter()
    await asyncio.gather(*(run_one(agent) for agent in agents))
    wall = time.perf_counter() - start
    peak = maxrss_kib()
    return {"wall": wall, "rss_per_agent_kib": (peak - baseline) / count}


def _error(exc: BaseException) -> str:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
    return f"{type(exc).__name__}: {exc}{where}"[:300]


def main(
    peer: str,
    package: str,
    loop: Callable[[int], Coroutine[Any, Any, float]],
    agents: Callable[[int, float], Coroutine[Any, Any, dict[str, float]]],
    argv: Sequence[str] | None = None,
) -> None:
    """Parse ``--steps S --agents N [--latency s] [--repeats R]``, run both workloads, print
    ``{"peer", "package", "version", "python", "loop": {...} | {"error"}, "agents": {...} | {"error"},
    "network_attempts": [...]}`` as the last line of stdout."""
    parser = argparse.ArgumentParser(description=f"{peer}: trio-agent benchmark workloads 1 and 5")
    parser.add_argument("--steps", type=int, default=300, help="workload 1: model steps per turn")
    parser.add_argument("--agents", type=int, default=1_000, help="workload 5: concurrent agents")
    parser.add_argument("--latency", type=float, default=0.01, help="workload 5: model latency, s")
    parser.add_argument("--repeats", type=int, default=5, help="workload 1: best of R runs")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "peer": peer,
        "package": package,
        "version": version(package),
        "python": sys.version.split()[0],
        "steps": args.steps,
        "agents_count": args.agents,
    }
    try:
        result["agents"] = asyncio.run(agents(args.agents, args.latency))
    except Exception as exc:
        result["agents"] = {"error": _error(exc)}
    try:
        best = float("inf")
        for _ in range(args.repeats):
            gc.collect()
            best = min(best, asyncio.run(loop(args.steps)))
        result["loop"] = {"seconds_per_step": best}
    except Exception as exc:
        result["loop"] = {"error": _error(exc)}
    result["network_attempts"] = NETWORK_ATTEMPTS[:10]
    print(json.dumps(result))


def not_installed(peer: str, exc: ImportError) -> None:
    """Print the result line for a peer whose package is missing from this interpreter."""
    error = f"not installed ({exc.name or exc}): run make bench-peers"
    print(json.dumps({"peer": peer, "loop": {"error": error}, "agents": {"error": error}}))
