"""Lossless-JSON validation and snapshotting in one iterative pass."""

from __future__ import annotations

import json
import math
from typing import Any, NoReturn, cast

from ._errors import JsonValueError

__all__ = ["snapshot_json"]

_EXPECTED = "expected dict, list, tuple, str, int, float, bool or None"


def snapshot_json(value: object, root: str = "data") -> Any:
    """Validate that ``value`` is lossless JSON and return a fresh copy of it.

    Lossless JSON here is: ``dict`` with ``str`` keys, ``list``, ``tuple`` (copied as a list),
    ``str`` (valid Unicode: no lone surrogates), ``int``, finite ``float``, ``bool`` and ``None``,
    exact types only (no subclasses), no cycles. Shared, non-cyclic references are copied
    separately. The walk is iterative, so nesting depth is bounded by memory, not the
    recursion limit.

    Raises:
        JsonValueError: naming the path below ``root`` (``data["a"][0]``) and what was found.
    """
    kind = type(value)
    if kind is dict or kind is list or kind is tuple:
        return _snapshot_container(value, root)
    if kind is str:
        _check_str(cast(str, value), root, ())
        return value
    if kind is int or kind is bool or value is None:
        return value
    if kind is float:
        _check_float(cast(float, value), root, ())
        return value
    _reject(value, root, ())


def _snapshot_container(value: Any, root: str) -> Any:
    out: Any = {} if type(value) is dict else []
    # One frame per open container: (source id, items iterator, copy, is_dict).
    frames: list[tuple[int, Any, Any, bool]] = []
    # Keys/indices leading from the root to the open containers, for error paths only.
    path: list[object] = []
    active: set[int] = set()

    def push(src: Any, dst: Any) -> None:
        is_dict = type(src) is dict
        active.add(id(src))
        frames.append((id(src), iter(src.items()) if is_dict else enumerate(src), dst, is_dict))

    push(value, out)
    while frames:
        src_id, items, dst, is_dict = frames[-1]
        for key, item in items:
            if is_dict and type(key) is not str:
                raise JsonValueError(
                    f"{_render(root, path, ())}: found a dict key of type "
                    f"{type(key).__name__} ({_short(key)}); JSON object keys must be str",
                    path=_render(root, path, ()),
                    found=f"{type(key).__name__} key",
                )
            kind = type(item)
            if kind is str:
                if not item.isascii():
                    _check_str(item, root, (*path, key))
            elif kind is int or kind is bool or item is None:
                pass
            elif kind is float:
                if not math.isfinite(item):
                    _check_float(item, root, (*path, key))
            elif kind is dict or kind is list or kind is tuple:
                if id(item) in active:
                    where = _render(root, (*path, key), ())
                    raise JsonValueError(
                        f"{where}: found a cycle (this {kind.__name__} is one of its own ancestors); "
                        "JSON cannot represent cycles, log a copy without the back-reference",
                        path=where,
                        found="cycle",
                    )
                child: Any = {} if kind is dict else []
                if is_dict:
                    dst[key] = child
                else:
                    dst.append(child)
                path.append(key)
                push(item, child)
                break
            else:
                _reject(item, root, (*path, key))
            if is_dict:
                dst[key] = item
            else:
                dst.append(item)
        else:
            frames.pop()
            active.discard(src_id)
            if path:
                path.pop()
    return out


def _check_str(value: str, root: str, path: tuple[object, ...]) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = _render(root, path, ())
        raise JsonValueError(
            f"{where}: found a str with a lone surrogate at index {exc.start}; JSON text must be "
            "valid Unicode (decode bytes with errors='replace' before logging them)",
            path=where,
            found="lone surrogate",
        ) from None


def _check_float(value: float, root: str, path: tuple[object, ...]) -> None:
    if math.isfinite(value):
        return
    where = _render(root, path, ())
    raise JsonValueError(
        f"{where}: found float {value!r}; JSON has no NaN or Infinity, log a finite number, "
        "None or a string instead",
        path=where,
        found=repr(value),
    )


def _reject(value: object, root: str, path: tuple[object, ...]) -> NoReturn:
    where = _render(root, path, ())
    found = type(value).__name__
    raise JsonValueError(
        f"{where}: found {found} ({_short(value)}); {_EXPECTED} (unstructure attrs values first)",
        path=where,
        found=found,
    )


def _render(root: str, path: tuple[object, ...] | list[object], extra: tuple[object, ...]) -> str:
    parts = [root]
    for key in (*path, *extra):
        parts.append(f"[{json.dumps(key)}]" if isinstance(key, str) else f"[{key!r}]")
    return "".join(parts)


def _short(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."
