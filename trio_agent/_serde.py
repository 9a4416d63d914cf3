"""The one cattrs converter that turns trio-agent values into JSON-ready data and back.

Every frozen attrs value that crosses a persistence or wire edge (messages, stream chunks,
session payloads, config) goes through :data:`converter`. Packages register hooks for their own
unions when they are imported; nothing else in the code base calls cattrs directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn

__all__ = ["converter", "register_tagged_union", "structure", "unstructure"]

T = TypeVar("T")

#: ``forbid_extra_keys`` makes a typo in a payload or a config file an error with a path.
converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)


def register_tagged_union(union: Any, tags: dict[type, str], *, tag_name: str = "type") -> None:
    """Teach :data:`converter` a union of attrs classes told apart by a ``type`` tag.

    Each member always carries its tag first (``{"type": "text", "text": ...}``), whether it is
    unstructured on its own or inside a container, so a value round-trips either way.
    """
    by_tag: dict[str, type] = {}
    for cls, tag in tags.items():
        by_tag[tag] = cls
        _register_tagged_member(cls, tag, tag_name)

    def structure_union(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(
                f"expected an object with a {tag_name!r} tag, got {type(data).__name__}"
            )
        tag = data.get(tag_name)
        cls = by_tag.get(tag) if isinstance(tag, str) else None
        if cls is None:
            known = ", ".join(sorted(by_tag))
            raise ValueError(f"unknown {tag_name} {tag!r}; expected one of: {known}")
        return converter.structure(data, cls)

    converter.register_structure_hook(union, structure_union)


def _register_tagged_member(cls: type, tag: str, tag_name: str) -> None:
    plain_unstructure: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(cls, converter)
    plain_structure: Callable[[Any, Any], Any] = make_dict_structure_fn(
        cls, converter, _cattrs_forbid_extra_keys=True
    )

    def unstructure_member(value: Any) -> dict[str, Any]:
        return {tag_name: tag, **plain_unstructure(value)}

    def structure_member(data: Any, _: Any) -> Any:
        if not isinstance(data, dict):
            raise TypeError(f"expected an object for {cls.__name__}, got {type(data).__name__}")
        found = data.get(tag_name, tag)
        if found != tag:
            raise ValueError(f"expected {tag_name} {tag!r} for {cls.__name__}, got {found!r}")
        return plain_structure({k: v for k, v in data.items() if k != tag_name}, cls)

    converter.register_unstructure_hook(cls, unstructure_member)
    converter.register_structure_hook(cls, structure_member)


def unstructure(value: object) -> Any:
    """Return the JSON-ready form (dicts, lists, str, numbers, bool, None) of ``value``."""
    return converter.unstructure(value)


def structure(data: object, cls: type[T]) -> T:
    """Build a ``cls`` from its JSON-ready form; raises a cattrs error naming the bad path."""
    return converter.structure(data, cls)
