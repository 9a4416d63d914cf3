"""Resume from config: ``AgentConfig(resume_session_id=...)``, deferred until persistence loads."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from persistence_helpers import JSONL

from trio_agent.loop import AgentConfig
from trio_agent.persistence import MemoryPersistence, MemoryStorage
from trio_agent.session import TurnStart
from trio_agent.testing import open_test_harness, text


def expand(value: str, environ: dict[str, str] | os._Environ[str]) -> str:
    """``${VAR}`` / ``${VAR:-default}`` as the YAML config expands them."""

    def substitute(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(3)
        found = environ.get(name)
        return found if found else (default or "")

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}", substitute, value)


async def stored_conversation(storage: MemoryStorage) -> tuple[Any, ...]:
    """Run one turn on session ``conv`` into ``storage``; return its derived history."""
    async with open_test_harness(
        [text("Hello there.")],
        persistence=MemoryPersistence,
        persistence_config=MemoryPersistence.Config(storage=storage),
    ) as h:
        handle = await h.ctx.agents.create(agent_id="a", session_id="conv")
        handle.agent.send("Hi")
        await handle.agent.wait_idle()
        history = tuple(handle.agent.session.derive_messages())
        await handle.aclose()
    return history


def loop_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r for r in caplog.records if r.name == "trio_agent.loop" and r.levelno == logging.WARNING
    ]


async def test_a_configured_agent_resumes_its_session() -> None:
    storage = MemoryStorage()
    history = await stored_conversation(storage)
    async with open_test_harness(
        [text("Welcome back.")],
        persistence=MemoryPersistence,
        persistence_config=MemoryPersistence.Config(storage=storage),
        agents=(AgentConfig(id="a", resume_session_id="conv"),),
    ) as h:
        await trio.testing.wait_all_tasks_blocked()
        agent = h.ctx.agents.get("a")
        assert agent is not None and agent.session.id == "conv"
        assert tuple(agent.session.derive_messages()) == history
        agent.send("Again")
        await agent.wait_idle()
        turns = [
            e.payload_as(TurnStart).turn for e in agent.session.events if e.type == "turn/start"
        ]
        assert turns == [1, 2]
        assert tuple(h.model.requests[0].messages[: len(history)]) == history


async def test_the_resume_waits_for_persistence_to_load() -> None:
    storage = MemoryStorage()
    history = await stored_conversation(storage)
    async with open_test_harness(agents=(AgentConfig(id="a", resume_session_id="conv"),)) as h:
        sources: list[str] = []
        h.ctx.on("agent/session-start", lambda e: sources.append(e.source))
        await trio.testing.wait_all_tasks_blocked()
        assert h.ctx.agents.list() == ()
        await h.ctx.plugin(MemoryPersistence, MemoryPersistence.Config(storage=storage))
        await trio.testing.wait_all_tasks_blocked()
        agent = h.ctx.agents.get("a")
        assert agent is not None and tuple(agent.session.derive_messages()) == history
        assert sources == ["resume"]


@pytest.mark.parametrize("session_id", ["missing", "../etc/passwd"])
async def test_a_missing_or_invalid_id_warns_once_and_starts_no_agent(
    caplog: pytest.LogCaptureFixture, session_id: str
) -> None:
    async with open_test_harness(
        [text("I still work.")],
        persistence=MemoryPersistence,
        agents=(
            AgentConfig(id="ghost", resume_session_id=session_id),
            AgentConfig(id="live"),
        ),
    ) as h:
        await trio.testing.wait_all_tasks_blocked()
        assert [a.id for a in h.ctx.agents.list()] == ["live"]
        warnings = loop_warnings(caplog)
        assert len(warnings) == 1
        message = warnings[0].getMessage()
        assert "'ghost'" in message and "was not started" in message
        live = h.ctx.agents.get("live")
        live.send("ping")
        await live.wait_idle()
        assert [m.text for m in live.session.derive_messages()] == ["ping", "I still work."]
        assert len(loop_warnings(caplog)) == 1


async def test_an_unreadable_log_warns_once_and_starts_no_agent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    jsonl = JSONL
    directory = tmp_path / "sessions"
    directory.mkdir()
    (directory / "broken.jsonl").write_bytes(b'{"format":"trio-agent-session","version":9}\n')
    warned = trio.Event()

    class Signal(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno == logging.WARNING:
                warned.set()

    handler = Signal()
    logging.getLogger("trio_agent.loop").addHandler(handler)
    try:
        async with open_test_harness(
            persistence=jsonl.plugin,
            persistence_config=jsonl.config(tmp_path),
            agents=(AgentConfig(id="a", resume_session_id="broken"),),
        ) as h:
            # The load runs in a worker thread: wait for its outcome explicitly.
            with trio.fail_after(10):
                await warned.wait()
            assert h.ctx.agents.list() == ()
    finally:
        logging.getLogger("trio_agent.loop").removeHandler(handler)
    warnings = loop_warnings(caplog)
    assert len(warnings) == 1 and "version 9" in warnings[0].getMessage()


@pytest.mark.parametrize("resume", ["", "conv"])
async def test_the_env_var_flow(monkeypatch: pytest.MonkeyPatch, resume: str) -> None:
    # trio-agent.yml: resume_session_id: ${TRIO_AGENT_RESUME:-}
    storage = MemoryStorage()
    history = await stored_conversation(storage)
    monkeypatch.setenv("TRIO_AGENT_RESUME", resume)
    value = expand("${TRIO_AGENT_RESUME:-}", os.environ)
    assert value == resume
    async with open_test_harness(
        persistence=MemoryPersistence,
        persistence_config=MemoryPersistence.Config(storage=storage),
        agents=(AgentConfig(id="a", resume_session_id=value),),
    ) as h:
        await trio.testing.wait_all_tasks_blocked()
        agent = h.ctx.agents.get("a")
        assert agent is not None
        if resume:
            assert agent.session.id == "conv"
            assert tuple(agent.session.derive_messages()) == history
        else:  # empty: a fresh session
            assert agent.session.id.startswith("a-session-")
            assert tuple(agent.session.derive_messages()) == ()
