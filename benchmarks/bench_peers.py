"""trio-agent next to peer frameworks on workloads 1 and 5 of ``bench_loop``.

Each peer (pydantic-ai, openai-agents) runs the same scripted workloads with its own test/function
model under asyncio, in a subprocess of the separate ``.venv-peers`` interpreter (``make
bench-peers`` creates it from the ``bench-peers`` extra; the main venv never depends on them):

1. loop overhead per step: one agent, a zero-latency model asking for one ``noop()`` tool call per
   step and answering with text on the last, wall time per step;
5. N agents, one turn each, model latency 10 ms: wall time, and peak RSS per agent measured in a
   fresh process.

trio-agent's own numbers are measured in the same run with ``bench_loop``'s code and become each
row's floor, so ``ratio = peer / trio-agent``: above 1, trio-agent is the faster (or smaller) one.
A peer that is not installed or fails a workload gets a row with value 0 and the reason in its
note; when ``.venv-peers`` is absent every row says so at once, without measuring (CI never
downloads the peers).

``python -m benchmarks.bench_peers --requirements`` prints the extra's requirements, one per line,
for the Makefile to install into ``.venv-peers``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import trio

from benchmarks._harness import Metric, print_table
from benchmarks.bench_loop import _harness_steps, _in_subprocess

ROOT = Path(__file__).resolve().parent.parent
PEERS_DIR = Path(__file__).resolve().parent / "peers"
#: The interpreter holding the peers; ``TRIO_AGENT_PEERS_PYTHON`` points elsewhere.
PEERS_PYTHON = Path(
    os.environ.get("TRIO_AGENT_PEERS_PYTHON", ROOT / ".venv-peers" / "bin" / "python")
)
#: (display name, script in benchmarks/peers/)
PEERS = (
    ("pydantic-ai", "pydantic_ai_workloads.py"),
    ("openai-agents", "openai_agents_workloads.py"),
)
LATENCY = 0.01
NOT_INSTALLED = "skipped: peers not installed (make bench-peers)"


def requirements() -> list[str]:
    """The ``bench-peers`` optional dependencies from pyproject.toml."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["project"]["optional-dependencies"]["bench-peers"])


def _names(count: int) -> tuple[str, str, str]:
    return (
        "loop overhead per step (1 no-op tool call)",
        f"{count:,} agents, one turn each (10 ms model)",
        f"peak RSS per agent ({count:,} agents)",
    )


def _units() -> tuple[str, str, str]:
    return ("µs", "ms", "KiB")


def _failed(peer: str, count: int, reason: str) -> list[Metric]:
    return [
        Metric(f"peer {peer}: {name}", 0.0, unit, None, reason)
        for name, unit in zip(_names(count), _units(), strict=True)
    ]


def _peer_env() -> dict[str, str]:
    """Our environment without credentials, with the peers' telemetry off."""
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}
    env.update(OPENAI_AGENTS_DISABLE_TRACING="1", OTEL_SDK_DISABLED="true")
    return env


def _run_peer(script: str, steps: int, count: int, repeats: int, timeout: float) -> dict[str, Any]:
    """Run one peer script; return its JSON line, or ``{"error": why}``."""
    command = [
        str(PEERS_PYTHON),
        str(PEERS_DIR / script),
        *("--steps", str(steps), "--agents", str(count)),
        *("--latency", str(LATENCY), "--repeats", str(repeats)),
    ]
    try:
        out = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_peer_env(),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"error: timed out after {timeout:.0f}s"}
    except OSError as exc:
        return {"error": f"error: cannot start {PEERS_PYTHON}: {exc}"}
    lines = out.stdout.strip().splitlines()
    try:
        return dict(json.loads(lines[-1]))
    except (IndexError, ValueError):
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"error: exit {out.returncode}: {tail}"[:300]}


def _peer_metrics(
    peer: str, result: dict[str, Any], ours: dict[str, float | None], count: int
) -> list[Metric]:
    if "error" in result:
        return _failed(peer, count, result["error"])
    label = (
        f"ratio = {peer} / trio-agent; {result.get('package', peer)} {result.get('version', '?')}"
    )
    if result.get("network_attempts"):
        label += f"; NETWORK ATTEMPTED (refused): {result['network_attempts'][0]}"
    loop_name, wall_name, rss_name = _names(count)
    metrics: list[Metric] = []
    loop = result.get("loop", {})
    if "seconds_per_step" in loop:
        metrics.append(
            Metric(
                f"peer {peer}: {loop_name}",
                loop["seconds_per_step"] * 1e6,
                "µs",
                _scaled(ours["loop"], 1e6),
                label,
            )
        )
    else:
        metrics.append(Metric(f"peer {peer}: {loop_name}", 0.0, "µs", None, _why(loop)))
    agents = result.get("agents", {})
    if "wall" in agents:
        metrics.append(
            Metric(
                f"peer {peer}: {wall_name}",
                agents["wall"] * 1e3,
                "ms",
                _scaled(ours["wall"], 1e3),
                label,
            )
        )
        metrics.append(
            Metric(
                f"peer {peer}: {rss_name}",
                agents["rss_per_agent_kib"],
                "KiB",
                ours["rss_per_agent_kib"],
                label,
            )
        )
    else:
        why = _why(agents)
        metrics.append(Metric(f"peer {peer}: {wall_name}", 0.0, "ms", None, why))
        metrics.append(Metric(f"peer {peer}: {rss_name}", 0.0, "KiB", None, why))
    return metrics


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _why(workload: dict[str, Any]) -> str:
    error = str(workload.get("error", "no result"))
    return error if error.startswith(("error:", "not installed", "skipped:")) else f"error: {error}"


def run(smoke: bool) -> list[Metric]:
    steps = 20 if smoke else 50  # #17's target is pinned at 50 steps (the peers grow with history)
    count = 50 if smoke else 1_000
    repeats = 1 if smoke else 5
    if not PEERS_PYTHON.exists():
        return [m for peer, _ in PEERS for m in _failed(peer, count, NOT_INSTALLED)]
    ours: dict[str, float | None] = {"loop": None, "wall": None, "rss_per_agent_kib": None}
    try:
        ours["loop"] = min(trio.run(_harness_steps, steps) for _ in range(repeats))
        ours.update(_in_subprocess(count))
    except Exception as exc:  # the peers still get their rows, without a floor
        print(f"# bench_peers: trio-agent side failed: {exc!r}", file=sys.stderr)
    timeout = 120.0 if smoke else 900.0
    metrics: list[Metric] = []
    for peer, script in PEERS:
        result = _run_peer(script, steps, count, repeats, timeout)
        metrics.extend(_peer_metrics(peer, result, ours, count))
    return metrics


if __name__ == "__main__":
    if "--requirements" in sys.argv:
        print("\n".join(requirements()))
    else:
        print_table(run(smoke="--smoke" in sys.argv))
