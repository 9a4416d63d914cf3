"""An error raised while a turn is being cancelled is reported, never dropped (docs/design.md,
"#16 stress kit").

A listener or an adapter whose clean-up raises during the cancel unwind replaces the turn's
``trio.Cancelled`` with its own error. The turn still ends ``aborted`` (or ``disposed``): the
cancel is what the user asked for. The error is logged at ERROR by ``trio_agent.loop`` and
announced as ``agent/error``, like any failure of a turn.
"""

from __future__ import annotations

from typing import Any

import trio

from trio_agent.agent import AgentFailed, PreStep
from trio_agent.testing import TestHarness, text, turn_end_reasons
from trio_agent.testing.stress import RunRecord, replay, scenario

UNWIND_ERROR = "clean-up failed while cancelled"


async def _fragile_pre_step(event: PreStep) -> None:
    """An ``agent/pre-step`` listener whose clean-up raises when it is cancelled."""
    try:
        await trio.sleep(1)
    except trio.Cancelled as cancelled:
        raise RuntimeError(UNWIND_ERROR) from cancelled


async def listener_raises_on_cancel(h: TestHarness) -> None:
    """One prompt; the pre-step listener raises if the cancel lands while it sleeps. Every
    such error must come back as ``agent/error``."""
    reported: list[BaseException] = []
    raised: list[int] = []

    async def listener(event: PreStep) -> None:
        try:
            await _fragile_pre_step(event)
        except RuntimeError:
            raised.append(event.turn)
            raise

    def on_error(event: AgentFailed) -> None:
        reported.append(event.error)

    h.ctx.on("agent/pre-step", listener)
    h.ctx.on("agent/error", on_error)
    agent = h.agent()
    agent.send("go")
    await agent.wait_idle()
    assert len(reported) == len(raised), (
        f"the listener raised {len(raised)} time(s) during the cancel, "
        f"agent/error reported {len(reported)}"
    )
    assert all(UNWIND_ERROR in str(e) for e in reported), reported


def _aborted_when_raised(record: RunRecord) -> None:
    """Whenever the error was logged, the turn still ended as the kit's action says."""
    if any(UNWIND_ERROR in str(e.exception) for e in record.errors):
        expected = "disposed" if record.actions[0].kind == "close" else "aborted"
        assert turn_end_reasons(record.sessions[0]) == [expected], "the cancel must win"


unwind_error = scenario(
    responses=[text("done")],
    checks=[_aborted_when_raised],
    allowed_errors=[r"raised while turn \d+ was being (cancelled|closed)"],
)(listener_raises_on_cancel)


def test_an_error_raised_during_the_cancel_unwind_is_reported_at_every_point(
    stress: Any,
) -> None:
    report = stress.explore(unwind_error)
    assert report.failures == () and report.replayable
    # Some point lands in the listener's sleep, so the error path is really taken.
    hits = [
        k
        for k in report.explored
        if any(UNWIND_ERROR in str(e.exception) for e in replay(unwind_error, point=k).errors)
    ]
    assert hits, "no cancel landed in the listener"
    record = replay(unwind_error, point=hits[0])
    assert turn_end_reasons(record.sessions[0]) == ["aborted"]
    logged = [e for e in record.errors if e.logger == "trio_agent.loop"]
    assert logged and "was being cancelled" in logged[0].message


def test_on_close_the_error_is_reported_too(stress: Any) -> None:
    assert stress.explore(unwind_error, action="close").failures == ()
