"""Run every ``benchmarks/bench_*.py`` module, print one table, write ``benchmarks/results.json``.

Usage: ``python -m benchmarks [--smoke] [names...]``. ``--smoke`` runs each benchmark at tiny
sizes (CI runs only this; there are no thresholds, it just has to run).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

from benchmarks._harness import Metric, print_table

HERE = Path(__file__).parent


def discover() -> list[str]:
    """Names of the benchmark modules, in a stable order."""
    return sorted(p.stem for p in HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("names", nargs="*", help="benchmark modules to run (default: all)")
    args = parser.parse_args(argv)
    names = args.names or discover()
    table: list[Metric] = []
    results: dict[str, object] = {
        "smoke": args.smoke,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "modules": {},
    }
    for name in names:
        module = importlib.import_module(f"benchmarks.{name.removesuffix('.py')}")
        start = time.perf_counter()
        metrics = module.run(args.smoke)
        seconds = time.perf_counter() - start
        print(f"# {name}: {len(metrics)} metrics in {seconds:.1f}s", file=sys.stderr)
        table.extend(metrics)
        results["modules"][name] = [  # type: ignore[index]
            {
                "name": m.name,
                "value": m.value,
                "unit": m.unit,
                "floor": m.floor,
                "ratio": m.ratio,
                "note": m.note,
            }
            for m in metrics
        ]
    print_table(table)
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
