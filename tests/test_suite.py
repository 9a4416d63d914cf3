"""The suite's own guarantees (tests/conftest.py, docs/testing.md), proven on throwaway tests that
pytester runs with this suite's conftest."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester project with this suite's conftest and a 1 s deadline."""
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        trio_mode = true
        filterwarnings = ["error"]
        addopts = "--strict-markers"
        trio_timeout = "1"
        """
    )
    return pytester


def test_a_hanging_test_fails_at_its_deadline_and_says_where_it_waited(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(
        """
        import pytest
        import trio

        @pytest.mark.trio_timeout(0.2)
        async def test_hangs():
            await trio.Event().wait()

        async def test_passes():
            await trio.sleep(0.01)
        """
    )
    result = suite.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*await trio.Event().wait()*",
            "*test_hangs did not finish within 0.2 s of real time; it was cancelled where it "
            "waited*mark it @pytest.mark.trio_timeout(seconds)*",
        ]
    )


def test_the_default_real_deadline_comes_from_the_ini(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import trio

        async def test_hangs():
            await trio.sleep_forever()
        """
    )
    result = suite.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_hangs did not finish within 1 s of real time*"])


def test_a_mock_clock_test_fails_at_its_real_time_deadline(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import pytest
        import trio

        @pytest.mark.trio_timeout(0.2)
        async def test_autojump_hangs(autojump_clock):
            await trio.Event().wait()

        @pytest.mark.trio_timeout(0.2)
        async def test_frozen_clock_hangs(mock_clock):
            await trio.sleep(1)  # virtual time never moves: this would wait forever
        """
    )
    result = suite.runpytest()
    result.assert_outcomes(failed=2)
    for name in ("test_autojump_hangs", "test_frozen_clock_hangs"):
        result.stdout.fnmatch_lines(
            [
                f"*{name} did not finish within 0.2 s of real time (wall clock; the test runs "
                "on a MockClock)*"
            ]
        )


def test_the_deadline_gives_autojump_nothing_to_jump_to(suite: pytest.Pytester) -> None:
    """Virtual time stays free, and waiting on a thread under autojump does not time out."""
    suite.makepyfile(
        """
        import time
        import trio

        async def test_a_virtual_week(autojump_clock):
            await trio.sleep(7 * 24 * 3600)

        async def test_a_thread_under_autojump(autojump_clock):
            await trio.to_thread.run_sync(time.sleep, 0.05)
        """
    )
    suite.runpytest().assert_outcomes(passed=2)


def test_each_hypothesis_example_runs_under_the_deadline(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import pytest
        import trio
        from hypothesis import given, settings, strategies as st

        @pytest.mark.trio_timeout(0.2)
        @settings(max_examples=1, database=None, deadline=None)
        @given(st.none())
        async def test_hangs(value):
            await trio.sleep_forever()
        """
    )
    result = suite.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_hangs did not finish within 0.2 s of real time*"])


def test_a_task_left_behind_fails_the_test(suite: pytest.Pytester) -> None:
    suite.makepyfile(
        """
        import trio

        async def forever():
            await trio.sleep_forever()

        async def test_leaks_a_system_task():
            trio.lowlevel.spawn_system_task(forever, name="orphan")

        async def test_leaks_past_the_runtime(ctx):
            async def start_orphan():
                trio.lowlevel.spawn_system_task(forever, name="runtime orphan")

            ctx.start_soon(start_orphan)
            await trio.testing.wait_all_tasks_blocked()
        """
    )
    result = suite.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*TaskLeakError: 1 task(s) started inside the checked block still run after it "
            "exited: 'orphan'*",
            "*TaskLeakError: 1 task(s) started inside the checked block still run after it "
            "exited: 'runtime orphan'*",
        ]
    )
