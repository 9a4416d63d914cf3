"""The shell tool keeps the first and last halves of a long output and drops the middle: a
known secret (in any form) across either cut must leave no piece, since the loop's redaction
of the tool result comes after the cut and cannot recognise a piece (issue 15)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from key_forms import forms, leaks
from security_helpers import SECRET, call

from trio_agent.llm import TextBlock
from trio_agent.redaction import Redactor
from trio_agent.runtime import Context

CAP = 200  # bytes: the first 100 and the last 100 are kept


@pytest.mark.parametrize("form", ["raw", "base64", "url-quoted", "json-escaped"])
async def test_a_secret_across_the_output_cuts_leaves_no_piece(
    form: str, ctx: Context, tools: Callable[..., Any], root: Path
) -> None:
    await ctx.plugin(Redactor, [SECRET])
    await tools(shell="allow", max_output_bytes=CAP)
    shown = forms(SECRET)[form]
    half = CAP // 2
    # One copy across the end of the kept head, one across the start of the kept tail.
    output = (
        "h" * (half - len(shown) // 2) + shown + "m" * 1000 + shown + "t" * (half - len(shown) // 2)
    )
    assert half - len(shown) < output.index(shown) < half
    (root / "notes.txt").write_text(output)
    result = await call(ctx, "shell", command="cat notes.txt")
    logged = ctx.require(Redactor).redact_result(result)  # what the loop logs
    text = "".join(b.text for b in logged.content if isinstance(b, TextBlock))
    assert "bytes of output omitted" in text, text
    assert not leaks(SECRET, text), text
