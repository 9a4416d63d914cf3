"""The models a provider serves: names, and what is known about each (its context window).

A provider config's ``models`` entry is a name or ``{name, context_window}``::

    models: [deepseek-chat, {name: deepseek-reasoner, context_window: 65536}]

:class:`ModelList` keeps the shape every existing caller reads - a tuple of names, the first
being the provider's default model - and carries each name's :class:`ModelSpec`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, final

import attrs
import cattrs
from cattrs.errors import IterableValidationNote

from .. import _serde

__all__ = ["ModelList", "ModelSpec", "to_model_list"]


def _name(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"a model name must be a non-empty string, got {value!r}")


def _window(instance: object, attribute: attrs.Attribute[int | None], value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(
            f"context_window must be a positive number of tokens (or omitted), got {value!r}"
        )


@attrs.frozen
class ModelSpec:
    """One model a provider serves: its ``name`` and, when known, its ``context_window`` in
    tokens (what the compaction threshold is measured against)."""

    name: str = attrs.field(validator=_name)
    context_window: int | None = attrs.field(default=None, kw_only=True, validator=_window)


@final
class ModelList(tuple[str, ...]):
    """A provider's models: a tuple of model names (``models[0]`` is the default model), with
    :attr:`specs` holding each one's :class:`ModelSpec`.

    Build it from names and specs: ``ModelList(["gpt-4o-mini", ModelSpec("gpt-4o",
    context_window=128_000)])``. Equal to a plain tuple of the same names; two lists are equal
    when their specs are.

    Raises:
        ValueError: a name is empty or listed twice.
        TypeError: an entry is neither a name nor a :class:`ModelSpec`.
    """

    specs: tuple[ModelSpec, ...]
    _windows: dict[str, int | None]

    def __new__(cls, entries: Iterable[str | ModelSpec] = ()) -> ModelList:
        specs: list[ModelSpec] = []
        seen: set[str] = set()
        for index, entry in enumerate(entries):
            if isinstance(entry, str):
                entry = ModelSpec(entry)
            elif not isinstance(entry, ModelSpec):
                raise TypeError(
                    f"models[{index}] is a {type(entry).__name__}; give a model name or a "
                    "ModelSpec(name, context_window=...)"
                )
            if entry.name in seen:
                raise ValueError(f"models[{index}]: model {entry.name!r} is listed twice")
            seen.add(entry.name)
            specs.append(entry)
        self = super().__new__(cls, (spec.name for spec in specs))
        self.specs = tuple(specs)
        # Names are unique; usage gates ask for a window every step.
        self._windows = {spec.name: spec.context_window for spec in specs}
        return self

    def context_window(self, name: str) -> int | None:
        """The context window configured for model ``name``, or ``None`` if none is known."""
        return self._windows.get(name)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ModelList):
            return self.specs == other.specs
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return f"ModelList({list(self.specs)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ModelList, (self.specs,))


def to_model_list(entries: Iterable[str | ModelSpec]) -> ModelList:
    """``entries`` as a :class:`ModelList` (a ``ModelList`` is returned as it is)."""
    return entries if isinstance(entries, ModelList) else ModelList(entries)


def _structure_models(data: Any, _: Any) -> ModelList:
    if isinstance(data, str) or not isinstance(data, list | tuple):
        raise ValueError(
            f"expected a list of model names or {{name, context_window}} objects, got "
            f"{type(data).__name__}"
        )
    entries: list[str | ModelSpec] = []
    problems: list[Exception] = []
    seen: set[str] = set()
    for index, item in enumerate(data):
        try:
            if isinstance(item, dict):
                entry = _serde.structure(item, ModelSpec)
            elif isinstance(item, str):
                entry = ModelSpec(item)
            else:
                raise ValueError(
                    f"expected a model name or a {{name, context_window}} object, got "
                    f"{type(item).__name__}"
                )
            if entry.name in seen:
                raise ValueError(f"model {entry.name!r} is listed twice")
        except Exception as exc:
            # A note without a type keeps the message in the config error (it names the path).
            exc.__notes__ = [
                *getattr(exc, "__notes__", ()),
                IterableValidationNote(f"Structuring models @ index {index}", index, None),
            ]
            problems.append(exc)
            continue
        seen.add(entry.name)
        entries.append(entry)
    if problems:
        raise cattrs.IterableValidationError("While structuring models", problems, ModelList)
    return ModelList(entries)


def _unstructure_models(models: ModelList) -> list[Any]:
    return [
        spec.name if spec.context_window is None else _serde.unstructure(spec)
        for spec in models.specs
    ]


_serde.converter.register_structure_hook(ModelList, _structure_models)
_serde.converter.register_unstructure_hook(ModelList, _unstructure_models)
