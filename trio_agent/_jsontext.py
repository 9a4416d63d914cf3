"""``json.loads`` for the hot paths: the same value or error, for less on a small text."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["loads"]

_PLAIN = json.JSONDecoder()


def loads(text: str, decoder: json.JSONDecoder = _PLAIN) -> Any:
    """``json.loads(text)`` with ``decoder``'s options: the same value, or the same error.

    ``raw_decode`` first: ``json.loads``'s whitespace handling is most of the cost of a short
    text (#17). What it does not take whole (surrounding whitespace, extra data, a BOM, an
    error) goes the way ``json.loads`` goes.
    """
    try:
        value, end = decoder.raw_decode(text)
    except (ValueError, RecursionError):
        end = -1
    if end == len(text):
        return value
    if text.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return decoder.decode(text)
