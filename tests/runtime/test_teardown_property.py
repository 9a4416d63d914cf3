"""Property: random plugin trees tear down in exact LIFO order, each disposer exactly once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_agent.runtime import Context, Fiber, open_runtime


@dataclass
class Node:
    """A plugin: an ordered list of items, each an effect (sync or async) or a child plugin."""

    id: int = 0
    items: list[Any] = field(default_factory=list)


def _trees() -> st.SearchStrategy[Node]:
    effect = st.sampled_from(["sync", "async"])

    def extend(children: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
        return st.lists(st.one_of(effect, children), max_size=5).map(
            lambda items: Node(items=items)
        )

    leaf = st.lists(effect, max_size=4).map(lambda items: Node(items=items))
    return st.recursive(leaf, extend, max_leaves=12)


def _number(root: Node) -> list[Node]:
    nodes: list[Node] = []

    def walk(node: Node) -> None:
        node.id = len(nodes)
        nodes.append(node)
        for item in node.items:
            if isinstance(item, Node):
                walk(item)

    walk(root)
    return nodes


def _expected_dispose(node: Node, done: set[int], log: list[tuple[int, int]]) -> None:
    """What disposing ``node`` must log, given the nodes already disposed."""
    if node.id in done:
        return
    done.add(node.id)
    for index in reversed(range(len(node.items))):
        item = node.items[index]
        if isinstance(item, Node):
            _expected_dispose(item, done, log)
        else:
            log.append((node.id, index))


@settings(max_examples=150, deadline=None)
@given(tree=_trees(), data=st.data())
def test_random_trees_unwind_in_reverse_and_once(tree: Node, data: st.DataObject) -> None:
    nodes = _number(tree)
    order = data.draw(st.permutations(range(len(nodes))))
    explicit = order[: data.draw(st.integers(0, len(nodes)))]

    log: list[tuple[int, int]] = []
    fibers: dict[int, Fiber] = {}

    def make_plugin(node: Node) -> Any:
        async def plugin(ctx: Context, config: None) -> None:
            fibers[node.id] = ctx.fiber
            for index, item in enumerate(node.items):
                if isinstance(item, Node):
                    await ctx.plugin(make_plugin(item), name=f"n{item.id}")
                elif item == "sync":

                    def sync_teardown(i: int = index) -> None:
                        log.append((node.id, i))

                    ctx.defer(sync_teardown)
                else:

                    async def teardown(i: int = index) -> None:
                        await trio.lowlevel.checkpoint()
                        log.append((node.id, i))

                    ctx.defer(teardown)

        return plugin

    async def main() -> None:
        async with open_runtime() as ctx:
            await ctx.plugin(make_plugin(tree), name="n0")
            for node_id in explicit:
                await fibers[node_id].dispose()

    trio.run(main)

    expected: list[tuple[int, int]] = []
    done: set[int] = set()
    for node_id in explicit:
        _expected_dispose(nodes[node_id], done, expected)
    _expected_dispose(tree, done, expected)
    assert log == expected
    assert len(set(log)) == len(log)
