"""``ctx.inbox``: prompts enqueued from elsewhere run once each, in order, on the worker holding
the session; a prompt for a session nobody holds waits for a resume. (Across real processes:
test_postgres_workers.py.)"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
import trio
from pg_helpers import admin, make_inserts_fail, stop_failing

from trio_agent.agent import Agent, AgentRegistry
from trio_agent.llm import GenerateRequest
from trio_agent.persistence import (
    Inbox,
    InboxUnavailableError,
    MemoryPersistence,
    PostgresPersistence,
    SessionWriteError,
    StoredSessionNotFoundError,
    require_inbox,
    send_prompt,
)
from trio_agent.session import SessionStore, TurnEnd, UserMessageEvent
from trio_agent.testing import ScriptedResponse, TestHarness, open_test_harness, text

GUARD = 30.0


def echo(request: GenerateRequest) -> ScriptedResponse:
    """A reply that quotes the last prompt."""
    return text(f"echo {request.messages[-1].text}")


@contextlib.asynccontextmanager
async def open_worker(dsn: str) -> AsyncIterator[TestHarness]:
    async with open_test_harness(
        [echo] * 20,
        persistence=PostgresPersistence,
        persistence_config=PostgresPersistence.Config(dsn=dsn),
    ) as harness:
        yield harness


async def open_agent(h: TestHarness, session_id: str, *, resume: bool = False) -> Agent:
    """Open an agent on ``session_id`` (create/resume claim the session themselves)."""
    agents = h.ctx.require(AgentRegistry)
    if resume:
        handle = await agents.resume(agent_id="a", resume_session_id=session_id)
    else:
        handle = await agents.create(agent_id="a", session_id=session_id)
    return handle.agent


def prompts(agent: Agent) -> list[str]:
    """The texts of the prompts the agent's log holds, in order."""
    return [
        e.payload_as(UserMessageEvent).message.text
        for e in agent.session.events
        if e.type == "user/message"
    ]


async def until_prompts(agent: Agent, count: int) -> None:
    """Wait until ``agent`` logged ``count`` prompts and is idle again (its turn flushed)."""
    logged = trio.Event()

    def check(_: object) -> None:
        if len(prompts(agent)) >= count:
            logged.set()

    off = agent.ctx.on("session/event", check)
    try:
        with trio.fail_after(GUARD):
            check(None)
            await logged.wait()
            await agent.wait_idle()
    finally:
        off()


def waiting_rows(dsn: str) -> int:
    with admin(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM trio_agent_inbox").fetchone()
    assert row is not None
    return int(row[0])


def stored_prompts(dsn: str, session_id: str) -> int:
    with admin(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM trio_agent_events WHERE session_id = %s "
            "AND type = 'user/message'",
            (session_id,),
        ).fetchone()
    assert row is not None
    return int(row[0])


async def test_prompts_from_elsewhere_run_once_each_in_order(dsn: str) -> None:
    async with open_worker(dsn) as worker:
        agent = await open_agent(worker, "held")
        for prompt in ("one", "two", "three"):
            await send_prompt(dsn, "held", prompt)  # what `trio-agent send` does
        await until_prompts(agent, 3)
        assert prompts(agent) == ["one", "two", "three"]
        assert waiting_rows(dsn) == 0
        assert stored_prompts(dsn, "held") == 3
        # From another runtime's ctx.inbox too.
        async with open_worker(dsn) as other:
            await other.ctx.inbox.enqueue("held", "four")
        await until_prompts(agent, 4)
        assert prompts(agent) == ["one", "two", "three", "four"]
        assert waiting_rows(dsn) == 0


async def test_a_prompt_for_a_session_nobody_holds_waits_for_a_resume(dsn: str) -> None:
    async with open_worker(dsn) as first:
        agent = await open_agent(first, "away")
        agent.send("hello")
        await agent.wait_idle()
    await send_prompt(dsn, "away", "while nobody held it")
    assert waiting_rows(dsn) == 1
    async with open_worker(dsn) as second:
        agent = await open_agent(second, "away", resume=True)
        await until_prompts(agent, 2)
        assert prompts(agent) == ["hello", "while nobody held it"]
        assert waiting_rows(dsn) == 0
    assert stored_prompts(dsn, "away") == 2


async def test_a_prompt_is_consumed_by_the_write_that_logs_it(dsn: str) -> None:
    async with open_worker(dsn) as worker:
        agent = await open_agent(worker, "atomic")
        agent.send("first")
        await agent.wait_idle()
        errors: list[BaseException] = []
        agent.ctx.on("agent/error", lambda event: errors.append(event.error))
        make_inserts_fail(dsn)  # every event insert now fails in the server
        await send_prompt(dsn, "atomic", "second")
        await until_prompts(agent, 2)  # delivered and logged in memory; its writes failed
        # Its turn could not make the prompt durable, so (durable by the step) it made no model
        # call and ended "error"; the turn-end flush failed too. No failed write consumed it.
        assert [type(e) for e in errors] == [SessionWriteError, SessionWriteError]
        assert agent.session.events[-1].payload_as(TurnEnd).reason == "error"
        assert len(worker.model.requests) == 1
        assert waiting_rows(dsn) == 1 and stored_prompts(dsn, "atomic") == 1
        stop_failing(dsn)
        # The write that stores the prompt's user/message consumes its row, in one transaction.
        await worker.ctx.require(SessionStore).flush(agent.session)
        assert waiting_rows(dsn) == 0 and stored_prompts(dsn, "atomic") == 2
        # Delivered once: the next turn is the next prompt's, not the inbox prompt again.
        agent.send("third")
        await until_prompts(agent, 3)
        assert prompts(agent) == ["first", "second", "third"]
        assert [r.messages[-1].text for r in worker.model.requests] == ["first", "third"]
        assert stored_prompts(dsn, "atomic") == 3 and waiting_rows(dsn) == 0


async def test_enqueue_refuses_what_cannot_be_delivered(dsn: str) -> None:
    async with open_worker(dsn) as worker:
        inbox = require_inbox(worker.ctx)
        assert isinstance(inbox, Inbox) and worker.ctx.get(Inbox) is not None
        with pytest.raises(StoredSessionNotFoundError, match="nope"):
            await inbox.enqueue("nope", "hi")
        with pytest.raises(StoredSessionNotFoundError):
            await send_prompt(dsn, "nope", "hi")
        with pytest.raises(ValueError, match="invalid session id"):
            await inbox.enqueue("../etc/passwd", "hi")
        await worker.ctx.session_persistence.acquire("known")  # claimed, not stored yet
        with pytest.raises(ValueError, match="empty prompt"):
            await inbox.enqueue("known", "  ")
        assert await inbox.enqueue("known", "fine") > 0
    assert waiting_rows(dsn) == 1


async def test_other_backends_say_the_inbox_needs_a_shared_backend() -> None:
    async with open_test_harness(persistence=MemoryPersistence) as h:
        with pytest.raises(InboxUnavailableError, match="shared persistence backend") as caught:
            require_inbox(h.ctx)
        assert "MemoryPersistence" in str(caught.value)
        assert "type: postgres" in str(caught.value)
