"""A 300-turn conversation against a small context window, persisted and reloaded elsewhere."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from trio_agent import _serde
from trio_agent.persistence import JsonlPersistence
from trio_agent.session import (
    CompactionSummary,
    SessionAppended,
    SessionEvent,
    TurnStart,
    UserMessageEvent,
    message_of,
)
from trio_agent.testing import turn_end_reasons

from .helpers import WindowedModel, assert_pairs_intact, is_summary_request, open_compaction_harness

TURNS = 300
WINDOW = 2_000
KEEP = 3
RELOAD = Path(__file__).with_name("reload_main.py")


def _seq_of(events: tuple[SessionEvent, ...], kind: type, turn: int) -> int:
    return next(
        e.seq
        for e in events
        if e.type == kind.event_type and e.data["turn"] == turn  # type: ignore[attr-defined]
    )


async def test_300_turns_under_a_small_window(tmp_path: Path) -> None:
    model = WindowedModel(window=WINDOW)
    appended: list[SessionEvent] = []
    async with open_compaction_harness(
        [model] * (3 * TURNS),
        window=WINDOW,
        keep_turns=KEEP,
        persistence=JsonlPersistence,
        persistence_config=JsonlPersistence.Config(path=str(tmp_path)),
    ) as h:

        def record(appended_event: SessionAppended) -> None:
            appended.append(appended_event.event)

        h.ctx.on("session/event", record)
        handle = await h.ctx.agents.create(agent_id="a", session_id="long")
        async with handle:
            agent = handle.agent
            with trio.fail_after(300):
                for turn in range(1, TURNS + 1):
                    agent.send(f"Please read turn {turn}")
                    await agent.wait_idle()
            session = agent.session
            live = tuple(session.derive_messages())
            events = tuple(session.events)

    # Compaction triggered again and again, and every request stayed under the window.
    assert len([e for e in events if e.type == CompactionSummary.event_type]) >= 20
    assert turn_end_reasons(session) == ["completed"] * TURNS
    assert max(model.sizes) <= WINDOW
    assert len(model.requests) == 2 * TURNS + model.summaries

    # Tool calls and results stay paired, and the latest KEEP turns are always verbatim: the
    # first request of turn t ends with turns t-KEEP .. t-1 as logged, then t's prompt.
    for request in model.requests:
        if is_summary_request(request):
            continue
        assert_pairs_intact(request.messages)
        last = request.messages[-1]
        if last.source != "user":
            continue
        turn = int(last.text.split()[-1])
        first = _seq_of(events, TurnStart, max(turn - KEEP, 1))
        prompt = _seq_of(events, UserMessageEvent, turn)
        expected = [m for e in events[first : prompt + 1] if (m := message_of(e)) is not None]
        assert tuple(request.messages[-len(expected) :]) == tuple(expected), turn

    # The log is append-only: every event was appended once, in seq order, and never replaced.
    assert [e.seq for e in appended] == list(range(events[0].seq, len(events)))
    assert all(a is b for a, b in zip(appended, events, strict=True))

    # Another process resumes the stored log to the same projection.
    with trio.fail_after(120):
        child = await trio.run_process(
            [sys.executable, str(RELOAD), str(tmp_path), "long"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert child.returncode == 0, child.stderr.decode()
    assert json.loads(child.stdout) == _serde.unstructure(live)
