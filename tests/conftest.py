"""Shared fixtures, and the guarantees every test of this suite gets (docs/testing.md).

pytest-trio runs every ``async def`` test (``trio_mode = true``). On top of that:

- Every trio test runs under a deadline of ``trio_timeout`` real seconds (ini, 60), or what
  ``@pytest.mark.trio_timeout(seconds)`` says. On the real clock it is a trio cancel scope; on
  a ``MockClock`` a wall-clock timer cancels the same way, because a virtual deadline is one
  more deadline for an autojump clock to jump to while a thread or socket is pending. A test
  past its deadline is cancelled and fails, with the traceback of where it waited, instead of
  hanging the suite.
- Nothing a trio test started may still run when it is done, and the ``ctx`` fixture checks the
  same when its runtime closes: both use :func:`trio_agent.testing.assert_no_leaked_tasks`.

Both the deadline and the end-of-test check cover the test with its fixtures; for a Hypothesis
test, which pytest-trio runs with plain ``trio.run``, each example's body.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, settings

from trio_agent.runtime import Context, open_runtime
from trio_agent.testing import assert_no_leaked_tasks

# CI machines are small and busy: a slow first draw is not a bug in a strategy, and wall-clock
# deadlines would make property tests flaky. Every test still runs its full example budget.
settings.register_profile("trio-agent", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("trio-agent")


@pytest.fixture
async def ctx() -> AsyncIterator[Context]:
    """A fresh runtime's root context; closing it after the test must leave no task running."""
    with assert_no_leaked_tasks():
        async with open_runtime() as root:
            yield root


# --- the per-test deadline ------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("trio_timeout", "real seconds a trio test may run", default="60")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "trio_timeout(seconds): this trio test's deadline in real seconds, instead of the "
        "trio_timeout ini value",
    )


@attrs.frozen
class _Deadline:
    """How long one trio test may run."""

    test: str
    seconds: float


@pytest.hookimpl(trylast=True)  # after pytest-trio has marked the async tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function) or item.get_closest_marker("trio") is None:
            continue
        deadline = _Deadline(item.nodeid, _seconds_of(item))
        hypothesis = getattr(item.obj, "hypothesis", None)
        if hypothesis is not None:
            _guard_examples(hypothesis, deadline)
        else:
            # pytest-trio runs the test with the first ``trio`` marker's ``run``.
            item.add_marker(pytest.mark.trio(run=functools.partial(_run, deadline)), append=False)


def _seconds_of(item: pytest.Function) -> float:
    marker = item.get_closest_marker("trio_timeout")
    if marker is None:
        return float(item.config.getini("trio_timeout"))
    if marker.kwargs or len(marker.args) != 1 or not isinstance(marker.args[0], int | float):
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.trio_timeout takes one number of seconds, got "
            f"args {marker.args!r} and kwargs {marker.kwargs!r}"
        )
    return float(marker.args[0])


def _run(
    deadline: _Deadline,
    async_fn: Callable[[], Awaitable[object]],
    *,
    clock: trio.abc.Clock | None,
    instruments: list[trio.abc.Instrument],
) -> object:
    """pytest-trio's ``run``: ``trio.run`` with the test and its fixtures under ``deadline``."""
    return trio.run(_guarded, async_fn, deadline, clock, clock=clock, instruments=instruments)


def _guard_examples(hypothesis: Any, deadline: _Deadline) -> None:
    """Put each example of a Hypothesis trio test under ``deadline`` (pytest-trio runs those
    with plain ``trio.run``, ignoring the marker's ``run``)."""
    inner = hypothesis.inner_test
    if getattr(inner, "_trio_deadline", None) is not None:  # parametrized: one function
        return

    @functools.wraps(inner)
    async def guarded(**kwargs: Any) -> None:
        clock = next((v for v in kwargs.values() if isinstance(v, trio.abc.Clock)), None)
        await _guarded(functools.partial(inner, **kwargs), deadline, clock)

    guarded._trio_deadline = deadline  # type: ignore[attr-defined]
    hypothesis.inner_test = guarded


async def _guarded(
    async_fn: Callable[[], Awaitable[object]], deadline: _Deadline, clock: trio.abc.Clock | None
) -> None:
    __tracebackhide__ = True
    mock = isinstance(clock, trio.testing.MockClock)
    waited: BaseException | None = None
    # On a MockClock a virtual deadline would be one more deadline for autojump to jump to.
    scope = trio.CancelScope() if mock else trio.move_on_after(deadline.seconds)
    timer = _wall_clock_deadline(scope, deadline.seconds) if mock else contextlib.nullcontext()
    with scope, timer:
        try:
            with assert_no_leaked_tasks():
                await async_fn()
        except BaseException as exc:
            if scope.cancel_called:
                waited = _only_leaf(exc)
            raise
        finally:
            if scope.cancel_called:
                clock_name = " (wall clock; the test runs on a MockClock)" if mock else ""
                raise pytest.fail.Exception(
                    f"{deadline.test} did not finish within {deadline.seconds:g} s of real "
                    f"time{clock_name}; it was cancelled where it waited (the traceback above). "
                    "If it is meant to take longer, mark it @pytest.mark.trio_timeout(seconds)."
                ) from waited


def _only_leaf(exc: BaseException) -> BaseException:
    """``exc`` without the groups around it, if they hold one exception (clearer tracebacks)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@contextlib.contextmanager
def _wall_clock_deadline(scope: trio.CancelScope, seconds: float) -> Iterator[None]:
    """Cancel ``scope`` after ``seconds`` of real time, whatever the run's clock says."""
    token = trio.lowlevel.current_trio_token()

    def cancel_soon() -> None:
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(scope.cancel)

    timer = threading.Timer(seconds, cancel_soon)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
