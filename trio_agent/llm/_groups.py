"""Unwrapping the exception group of a nursery that wraps a context manager body."""

from __future__ import annotations

from typing import NoReturn

import trio

__all__ = ["raise_single"]


def raise_single(
    group: BaseExceptionGroup[BaseException], prefer: BaseException | None = None
) -> NoReturn:
    """Re-raise the one real exception in ``group`` as itself.

    The group of a nursery that hosts a helper task next to a context manager's body holds the
    body's exception plus, at most, the helper's ``Cancelled``. Raise the only exception that
    is not :class:`trio.Cancelled`; if all are ``Cancelled``, raise ``prefer`` (the one the
    body raised, to keep its identity) when it is among them, else the first. With more than
    one real exception the group itself is re-raised.
    """
    real = [e for e in group.exceptions if not isinstance(e, trio.Cancelled)]
    if len(real) > 1:
        raise group
    if real:
        exc = real[0]
    elif prefer is not None and any(e is prefer for e in group.exceptions):
        exc = prefer
    else:
        exc = group.exceptions[0]
    context = exc.__context__
    try:
        raise exc
    finally:
        # Keep the traceback readable: the group is an implementation detail.
        exc.__context__ = context
        del exc, group, prefer
