"""trio_agent._buffers.appended: a buffer is () while empty and a list from its first item."""

from __future__ import annotations

from collections.abc import Sequence

from trio_agent._buffers import appended


def test_the_first_item_makes_a_list_and_later_ones_extend_it() -> None:
    buffer: Sequence[int] = ()
    buffer = appended(buffer, 1)
    assert buffer == [1]
    same = appended(buffer, 2)
    assert same is buffer and buffer == [1, 2]
