"""raise_single: unwrapping a helper nursery's group to the body's own exception."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_agent.llm._groups import raise_single


def test_single_real_exception_is_raised_as_itself() -> None:
    error = KeyError("x")
    with pytest.raises(KeyError) as info:
        raise_single(BaseExceptionGroup("g", [error]))
    assert info.value is error


def test_several_real_exceptions_keep_the_group() -> None:
    group = ExceptionGroup("g", [KeyError("a"), ValueError("b")])
    with pytest.raises(ExceptionGroup) as info:
        raise_single(group)
    assert info.value is group


async def test_all_cancelled_raises_the_preferred_one() -> None:
    caught: list[BaseException] = []
    groups: list[BaseExceptionGroup[BaseException]] = []

    async def body() -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled as exc:
            caught.append(exc)
            raise

    with trio.CancelScope() as scope:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.sleep_forever)
                nursery.start_soon(body)
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()
                await trio.sleep_forever()
        except BaseExceptionGroup as eg:
            groups.append(eg)
            raise
    assert scope.cancelled_caught
    (group,) = groups
    assert all(isinstance(e, trio.Cancelled) for e in group.exceptions)
    assert caught[0] in group.exceptions
    with pytest.raises(trio.Cancelled) as info:
        raise_single(group, caught[0])
    assert info.value is caught[0]
