"""``trio-agent plugins``: the installed and the configured plugins."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

import trio

from ..config import (
    PLUGIN_ENTRY_POINT_GROUP,
    ConfigError,
    configured_plugins,
    installed_plugins,
    resolve_plugins,
)
from ._agents import load_cli_config
from ._errors import CliExit


async def plugins_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """List the installed plugins (entry points) and the configured ones, each resolved."""
    await trio.lowlevel.checkpoint()
    installed = [
        {
            "name": ep.name,
            "use": ep.value,
            "distribution": None if ep.dist is None else f"{ep.dist.name} {ep.dist.version}",
        }
        for ep in installed_plugins()
    ]
    config, _ = load_cli_config(args.config, import_plugins=False)
    configured: list[dict[str, Any]] = []
    for entry in configured_plugins(config):
        row: dict[str, Any] = {"source": entry.source, "name": entry.name, "use": entry.use}
        try:
            resolved = entry.resolve()
        except ConfigError as exc:
            row["error"] = str(exc)
        else:
            row["providers"] = list(resolved.providers)
        configured.append(row)
    failed = sum("error" in row for row in configured)
    if args.json:
        out.write(json.dumps({"installed": installed, "configured": configured}) + "\n")
    else:
        out.write(f"installed ({PLUGIN_ENTRY_POINT_GROUP} entry points):\n")
        for item in installed:
            origin = f"  ({item['distribution']})" if item["distribution"] else ""
            out.write(f"  {item['name']}\t{item['use']}{origin}\n")
        if not installed:
            out.write("  none\n")
        out.write(f"configured ({config.path or 'no config file'}):\n")
        for row in configured:
            if "error" in row:
                status = f"error: {row['error']}"
            else:
                status = "ok" + (
                    f"; providers {', '.join(row['providers'])}" if row["providers"] else ""
                )
            out.write(f"  {row['source']}\t{row['name']}\t{row['use']}\t{status}\n")
        if not configured:
            out.write("  none\n")
    if failed:
        raise CliExit(2, "CONFIG", f"{failed} configured plugin(s) cannot be loaded (see above)")
    try:
        resolve_plugins(config)  # what spans entries: unique names, unique provider names
    except ConfigError as exc:
        raise CliExit(2, "CONFIG", f"{config.path}: {exc}") from exc
    return 0
