"""Lossless-JSON validation: what append accepts, what it refuses, and that it copies."""

from __future__ import annotations

import math
from typing import Any

import pytest

from trio_agent.runtime import Context
from trio_agent.session import JsonValueError, snapshot_json


class _Thing:
    pass


def _cyclic_dict() -> dict[str, Any]:
    inner: dict[str, Any] = {}
    outer = {"a": {"b": inner}}
    inner["back"] = outer
    return outer


def _cyclic_list() -> dict[str, Any]:
    items: list[Any] = [1]
    items.append(items)
    return {"items": items}


class _Str(str):
    pass


REJECTED = [
    pytest.param({"x": math.nan}, 'data["x"]', "nan", id="nan"),
    pytest.param({"x": [1, math.inf]}, 'data["x"][1]', "inf", id="inf"),
    pytest.param({"x": {"y": -math.inf}}, 'data["x"]["y"]', "-inf", id="-inf"),
    pytest.param(_cyclic_dict(), 'data["a"]["b"]["back"]', "cycle", id="cycle-in-dict"),
    pytest.param(_cyclic_list(), 'data["items"][1]', "cycle", id="cycle-in-list"),
    pytest.param({"m": {1: "one"}}, 'data["m"]', "key of type int", id="non-str-key"),
    pytest.param({"s": {1, 2}}, 'data["s"]', "found set", id="set"),
    pytest.param({"b": [b"raw"]}, 'data["b"][0]', "found bytes", id="bytes"),
    pytest.param({"o": _Thing()}, 'data["o"]', "found _Thing", id="object"),
    pytest.param({"t": _Str("sub")}, 'data["t"]', "found _Str", id="str-subclass"),
    pytest.param({"u": "bad \ud800 half"}, 'data["u"]', "lone surrogate", id="lone-surrogate"),
    pytest.param(
        {"message": {"content": [{"x": object()}]}},
        'data["message"]["content"][0]["x"]',
        "found object",
        id="deep-path",
    ),
]


@pytest.mark.parametrize(("data", "path", "found"), REJECTED)
async def test_append_rejects_non_json_and_logs_nothing(
    sctx: Context, data: dict[str, Any], path: str, found: str
) -> None:
    session = sctx.sessions.create("s")
    session.append("plugin/ok", {"n": 1})
    heard: list[object] = []
    sctx.on("session/event", heard.append)
    with pytest.raises(JsonValueError) as info:
        session.append("plugin/bad", data)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert found in message
    assert info.value.path == path
    assert isinstance(info.value, ValueError)
    assert len(session.events) == 1
    assert heard == []
    # seq stays contiguous after the refusal
    assert session.append("plugin/ok", {}).seq == 1


@pytest.mark.parametrize("data", [[1, 2], "text", None, 3])
async def test_data_must_be_an_object(sctx: Context, data: object) -> None:
    session = sctx.sessions.create("s")
    with pytest.raises(JsonValueError, match="must be a dict"):
        session.append("plugin/x", data)
    assert len(session.events) == 0


async def test_append_copies_the_callers_data(sctx: Context) -> None:
    session = sctx.sessions.create("s")
    shared = [1, 2]
    data: dict[str, Any] = {"a": shared, "b": shared, "t": (1, "x"), "f": -0.0, "big": 2**80}
    event = session.append("plugin/x", data)
    shared.append(3)
    data["a"] = "changed"
    assert event.data == {"a": [1, 2], "b": [1, 2], "t": [1, "x"], "f": -0.0, "big": 2**80}
    assert event.data["a"] is not event.data["b"]  # shared references are copied separately
    assert type(event.data["t"]) is list
    assert session.events[0] is event


def test_deep_nesting_is_not_limited_by_recursion() -> None:
    value: Any = "leaf"
    for _ in range(20_000):
        value = {"k": [value]}
    copy = snapshot_json(value)
    depth = 0
    while isinstance(copy, dict):
        copy = copy["k"][0]
        depth += 1
    assert depth == 20_000
    assert copy == "leaf"


def test_deep_error_path_is_exact() -> None:
    value: Any = {"x": {1}}
    for _ in range(3):
        value = {"k": [value]}
    with pytest.raises(JsonValueError) as info:
        snapshot_json(value, "meta")
    assert info.value.path == 'meta["k"][0]["k"][0]["k"][0]["x"]'


def test_scalars_at_the_root() -> None:
    assert snapshot_json(None) is None
    assert snapshot_json("é") == "é"
    with pytest.raises(JsonValueError, match=r"^data: found float nan"):
        snapshot_json(math.nan)
    with pytest.raises(JsonValueError, match=r"^data: found bytes"):
        snapshot_json(b"x")
