"""Real worker processes sharing sessions through PostgreSQL: one lease per session, a takeover
after a SIGKILL, a partitioned holder fenced off, and prompts delivered across processes.

The test process is the "third process" that enqueues prompts and reads the database."""

from __future__ import annotations

import socket
from pathlib import Path

from pg_helpers import admin
from workers import Worker, open_worker

from trio_agent.agent import AgentRegistry
from trio_agent.ids import SessionId
from trio_agent.persistence import PostgresBackend, PostgresPersistence, send_prompt
from trio_agent.session import (
    INTERRUPTED_OUTCOME_UNKNOWN_TEXT,
    SessionEvent,
    ToolResultEvent,
    TurnEnd,
    repair_events,
)
from trio_agent.testing import open_test_harness, text
from trio_agent.tools import TOOL_OUTCOME_UNKNOWN

HOST = socket.gethostname()


async def seed(dsn: str, session_id: str) -> None:
    """Store ``session_id`` with one completed turn."""
    config = PostgresPersistence.Config(dsn=dsn)
    async with open_test_harness(
        [text("hi")], persistence=PostgresPersistence, persistence_config=config
    ) as h:
        await h.ctx.session_persistence.acquire(session_id)
        handle = await h.ctx.require(AgentRegistry).create(agent_id="a", session_id=session_id)
        handle.agent.send("first")
        await handle.agent.wait_idle()
        await handle.aclose()


async def stored(dsn: str, session_id: str) -> tuple[SessionEvent, ...]:
    backend = PostgresBackend(dsn)
    try:
        read = await backend.read(SessionId(session_id))
    finally:
        await backend.aclose()
    assert read is not None
    return read.events


def stored_prompts(dsn: str, session_id: str) -> list[str]:
    with admin(dsn) as conn:
        rows = conn.execute(
            "SELECT data FROM trio_agent_events WHERE session_id = %s AND type = 'user/message' "
            "ORDER BY seq",
            (session_id,),
        ).fetchall()
    return [row[0].split('"text":"', 1)[1].split('"', 1)[0] for row in rows]


def lease_of(dsn: str, session_id: str) -> tuple[int, int, int]:
    """``(generation, holder pid, holder backend pid)``."""
    with admin(dsn) as conn:
        row = conn.execute(
            "SELECT generation, holder_pid, holder_backend FROM trio_agent_leases "
            "WHERE session_id = %s",
            (session_id,),
        ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


async def race(a: Worker, b: Worker, command: str) -> tuple[Worker, Worker, str]:
    """Send ``command`` to both at once; the one that got the session, the other, and the
    other's answer."""
    await a.send(command)
    await b.send(command)
    answers = {}
    for worker in (a, b):
        answers[worker] = await worker.expect("acquired", "agent", "busy")
    winners = [w for w, answer in answers.items() if not answer.startswith("busy")]
    assert len(winners) == 1, answers
    (winner,) = winners
    loser = b if winner is a else a
    return winner, loser, answers[loser]


async def test_one_worker_gets_the_lease_and_the_other_takes_over_after_a_sigkill(
    dsn: str, tmp_path: Path
) -> None:
    await seed(dsn, "shared")
    async with open_worker(dsn, tmp_path, "w1") as w1, open_worker(dsn, tmp_path, "w2") as w2:
        winner, loser, refusal = await race(w1, w2, "acquire shared")
        assert refusal == f"busy shared {winner.pid} {HOST}"
        await winner.send("resume shared")
        await winner.expect("agent")
        await winner.send("send tool:write the report")
        await winner.expect("in-tool")  # the tool/call is stored; its effect may have happened
        before = await stored(dsn, "shared")
        assert before[-1].type == "tool/call"

        await winner.kill()  # mid-turn
        await loser.send("take shared")
        taken = await loser.expect("acquired")
        assert taken.startswith("acquired shared ")  # promptly: the wait is a benchmark row
        generation, holder, _ = lease_of(dsn, "shared")
        assert holder == loser.pid and generation == 3  # seed, winner, loser
        await loser.send("resume shared")
        await loser.expect("agent")
        # A started call of a tool with effects: its outcome is unknown, never re-run.
        assert [line for line in loser.seen if line.startswith("repaired")] == [
            "repaired TOOL_OUTCOME_UNKNOWN"
        ]
        await loser.send("send and now?")
        assert await loser.expect("turn-end") == "turn-end 3 completed"
        await loser.send("close")
        await loser.expect("closed")

    events = await stored(dsn, "shared")
    # Nothing the dead worker held back lands after the takeover: the log continues with the
    # new holder's repair of the open turn, then its own turn.
    assert events[: len(before)] == before
    after = [e.type for e in events[len(before) :] if e.type != "assistant/chunk"]
    assert after[:4] == ["tool/result", "step/end", "turn/end", "session/end-seed"]
    repaired = events[len(before)].payload_as(ToolResultEvent).result
    assert repaired.code == TOOL_OUTCOME_UNKNOWN
    assert repaired.is_error and repaired.text == INTERRUPTED_OUTCOME_UNKNOWN_TEXT
    assert events[len(before) + 2].payload_as(TurnEnd).reason == "interrupted"
    assert [e.seq for e in events] == list(range(len(events)))
    assert repair_events(events) == []
    assert stored_prompts(dsn, "shared") == ["first", "tool:write the report", "and now?"]


async def test_resume_claims_the_session_and_repair_marks_the_effect_unknown(
    dsn: str, tmp_path: Path
) -> None:
    # No explicit acquire: ctx.agents.resume claims the session itself (the loser is refused
    # before anything is published), and the loop's write-ahead flush stores the tool/call
    # before the tool body runs (the tool itself flushes nothing).
    await seed(dsn, "shared")
    async with open_worker(dsn, tmp_path, "w1") as w1, open_worker(dsn, tmp_path, "w2") as w2:
        winner, loser, refusal = await race(w1, w2, "resume shared")
        assert refusal == f"busy shared {winner.pid} {HOST}"
        await winner.send("send tool:write the report")
        await winner.expect("in-tool")
        before = await stored(dsn, "shared")
        assert before[-1].type == "tool/call"  # on disk before the effect
        assert before[-1].data.get("read_only") is False
        await winner.kill()
        await loser.send("take shared")
        await loser.expect("acquired")
        await loser.send("resume shared")
        await loser.expect("agent")
        assert [line for line in loser.seen if line.startswith("repaired")] == [
            "repaired TOOL_OUTCOME_UNKNOWN"
        ]
        await loser.send("close")
        await loser.expect("closed")
    events = await stored(dsn, "shared")
    assert events[: len(before)] == before
    repaired = events[len(before)].payload_as(ToolResultEvent).result
    assert repaired.code == TOOL_OUTCOME_UNKNOWN
    assert repair_events(events) == []


async def test_a_partitioned_worker_stops_writing_and_reports_it(dsn: str, tmp_path: Path) -> None:
    async with open_worker(dsn, tmp_path, "w1") as w1, open_worker(dsn, tmp_path, "w2") as w2:
        await w1.send("acquire p")
        await w1.expect("acquired")
        await w1.send("create p")
        await w1.expect("agent")
        await w1.send("send hello")
        assert await w1.expect("turn-end") == "turn-end 1 completed"
        assert stored_prompts(dsn, "p") == ["hello"]

        # The server ends w1's lease connection (what a partition noticed by keepalives does).
        with admin(dsn) as conn:
            ended = conn.execute(
                "SELECT pg_terminate_backend(%s, 30000)", (lease_of(dsn, "p")[2],)
            ).fetchone()
        assert ended == (True,)
        await w1.expect("lost")
        await w1.send("send after the partition")
        # The turn runs in memory; its turn-end flush is refused and reported.
        assert await w1.expect("agent-error") == "agent-error SessionTamperedError"
        await w1.expect("turn-end")
        assert stored_prompts(dsn, "p") == ["hello"]

        # Another worker takes the session over; the partitioned one still cannot write.
        await w2.send("take p")
        await w2.expect("acquired")
        await w2.send("resume p")
        await w2.expect("agent")
        await w2.send("send from w2")
        assert await w2.expect("turn-end") == "turn-end 2 completed"
        await w1.send("send still there?")
        assert await w1.expect("agent-error") == "agent-error SessionTamperedError"
        await w1.expect("turn-end")
        assert stored_prompts(dsn, "p") == ["hello", "from w2"]


async def test_prompts_from_a_third_process_run_once_each_in_order_on_the_holder(
    dsn: str, tmp_path: Path
) -> None:
    async with open_worker(dsn, tmp_path, "w1") as w1:
        await w1.send("acquire d")
        await w1.expect("acquired")
        await w1.send("create d")
        await w1.expect("agent")
        for prompt in ("p1", "p2", "p3"):
            await send_prompt(dsn, "d", prompt)
        assert [await w1.expect("prompt") for _ in range(3)] == [
            "prompt p1",
            "prompt p2",
            "prompt p3",
        ]
        await w1.send("close")
        await w1.expect("closed")
    # Nobody holds the session now: the prompt waits for the next worker to resume it.
    await send_prompt(dsn, "d", "p4")
    async with open_worker(dsn, tmp_path, "w2") as w2:
        await w2.send("take d")
        await w2.expect("acquired")
        await w2.send("resume d")
        await w2.expect("agent")
        assert await w2.expect("prompt") == "prompt p4"
        await w2.expect("turn-end")
        await w2.send("close")
        await w2.expect("closed")
    assert stored_prompts(dsn, "d") == ["p1", "p2", "p3", "p4"]
    with admin(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM trio_agent_inbox").fetchone() == (0,)
    assert "prompt p4" not in w1.seen
