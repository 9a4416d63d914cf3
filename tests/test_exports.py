"""The public import surface is pinned: adding or removing a name is a deliberate change.

(ruff's RUF022 keeps every ``__all__`` sorted.)
"""

from __future__ import annotations

import importlib
import inspect

import pytest

import trio_agent

SURFACES = {
    "trio_agent": [
        "Agent",
        "AgentHandle",
        "AgentOptions",
        "Context",
        "Disposer",
        "HarnessConfig",
        "Message",
        "ReactLoopAgent",
        "Service",
        "Session",
        "Tool",
        "ToolCallContext",
        "TrioAgentError",
        "load_config",
        "mount_config",
        "open_harness",
        "open_runtime",
        "tool",
    ],
    "trio_agent.lowlevel": [
        "Fiber",
        "FiberState",
        "InactiveContextError",
        "Next",
        "Plugin",
        "PluginConfigError",
        "Scope",
        "ServiceConflictError",
        "ServiceNotFoundError",
    ],
}


@pytest.mark.parametrize("module", sorted(SURFACES))
def test_all_is_pinned_and_documented(module: str) -> None:
    mod = importlib.import_module(module)
    assert mod.__all__ == SURFACES[module]
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__doc__, f"{module}.{name} has no docstring"


def test_every_subpackage_exports_documented_names() -> None:
    for module in (
        "trio_agent.runtime",
        "trio_agent.llm",
        "trio_agent.session",
        "trio_agent.tools",
        "trio_agent.tools.builtin",
        "trio_agent.prompt",
        "trio_agent.agent",
        "trio_agent.persistence",
        "trio_agent.loop",
        "trio_agent.testing",
    ):
        mod = importlib.import_module(module)
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                assert obj.__doc__, f"{module}.{name} has no docstring"


def test_version() -> None:
    assert trio_agent.__version__ == "0.1.0"
