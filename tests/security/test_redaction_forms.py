"""Redaction of encoded secrets where texts are cut, and the process-wide redaction (issue 15).

A hostile server can place an encoded form of the key (base64, url-quoted, JSON-escaped)
across the 120th character of a malformed event, where the OpenAI adapter cuts its quote of
the event: the adapter masks every form of every known secret *before* it cuts, so no piece
of one is left. :func:`~trio_agent.redaction.redact_known` masks what any redactor of the
process has learned, after its context has closed too (the CLI's error line).
"""

from __future__ import annotations

import base64
import urllib.parse
from collections.abc import Callable

import pytest
import trio
from key_forms import SPECIAL_KEY, forms, leaks

from trio_agent.llm import (
    Finish,
    GenerateRequest,
    LlmCallConfig,
    LlmFailure,
    Message,
    OpenAiAdapter,
)
from trio_agent.mcp._server import Redactor as McpRedactor
from trio_agent.redaction import REDACTED, Redactor, redact_known, redact_text
from trio_agent.runtime import open_runtime
from trio_agent.testing import (
    FakeResponse,
    RecordedRequest,
    open_fake_openai_server,
    sse_done,
    sse_event,
    sse_response,
)

ENV = "TRIO_AGENT_FORMS_TEST_KEY"
KEYS = {"plain": "sk-forms-4Rt8Yu1Io6Pa3Sd9Fg2Hj", "special": SPECIAL_KEY}
#: Where the adapter cuts its quote of a malformed event.
CUT = 120


def _sse_garbage(data: str) -> Callable[[RecordedRequest], FakeResponse]:
    """A response whose second event is ``data`` (not JSON), as a callable of the request."""

    def respond(request: RecordedRequest) -> FakeResponse:
        del request
        return sse_response(sse_event({"choices": []}), sse_event(data), sse_done())

    return respond


def _placements(form: str) -> list[int]:
    """Start positions that put ``form`` across the cut: one character before it, the middle,
    one character after."""
    return sorted({CUT - len(form) + 1, CUT - len(form) // 2, CUT - 1})


def _event(form: str, start: int) -> str:
    return "{" + "." * (start - 1) + form + " not json"


async def _malformed_failures(adapter: OpenAiAdapter, count: int) -> list[LlmFailure]:
    request = GenerateRequest(LlmCallConfig(adapter.name, "m"), (Message.user("hi"),))
    failures = []
    for _ in range(count):
        async with adapter.stream(request) as chunks:
            last = [chunk async for chunk in chunks][-1]
        assert isinstance(last, Finish) and last.failure is not None
        assert last.failure.code == "MALFORMED_RESPONSE", last.failure
        failures.append(last.failure)
    return failures


@pytest.mark.parametrize("which", sorted(KEYS))
async def test_an_encoded_key_across_the_cut_leaves_no_piece(
    which: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = KEYS[which]
    monkeypatch.setenv(ENV, key)
    cases = [(name, start) for name, form in forms(key).items() for start in _placements(form)]
    events = [_event(forms(key)[name], start) for name, start in cases]
    for name, start in cases:  # the setup does what it says: the form straddles the cut
        assert start < CUT < start + len(forms(key)[name])
    async with open_fake_openai_server([_sse_garbage(e) for e in events]) as server:
        # No redactor anywhere: the adapter masks its own key in every form by itself.
        adapter = OpenAiAdapter(name="forms", base_url=server.base_url, api_key_env=ENV)
        try:
            with trio.fail_after(60):
                failures = await _malformed_failures(adapter, len(events))
        finally:
            await adapter.aclose()
    assert all(r.headers["authorization"] == f"Bearer {key}" for r in server.requests)
    problems = []
    for (name, start), failure in zip(cases, failures, strict=True):
        problems += [f"{name} at {start}: {leak}" for leak in leaks(key, failure.message)]
    assert not problems, "\n".join(problems)


async def test_a_secret_only_a_redactor_knows_is_masked_before_the_cut() -> None:
    password = "db-pass-Qm7+Wn2/Xe9=Rv4%Ty"  # a DSN's password, say: not the adapter's key
    async with open_runtime() as ctx:
        await ctx.plugin(Redactor, [password])
        cases = [
            (name, start)
            for name, form in forms(password).items()
            for start in _placements(form)[1:2]
        ]
        events = [_event(forms(password)[name], start) for name, start in cases]
        async with open_fake_openai_server([_sse_garbage(e) for e in events]) as server:
            adapter = OpenAiAdapter(name="forms", base_url=server.base_url, api_key_env=None)
            try:
                with trio.fail_after(60):
                    failures = await _malformed_failures(adapter, len(events))
            finally:
                await adapter.aclose()
    problems = []
    for (name, start), failure in zip(cases, failures, strict=True):
        problems += [f"{name} at {start}: {leak}" for leak in leaks(password, failure.message)]
    assert not problems, "\n".join(problems)


def test_redact_text_masks_every_form_of_the_given_values() -> None:
    for key in KEYS.values():
        for name, form in forms(key).items():
            masked = redact_text(f"<{form}>", [key, None, ""])
            assert not leaks(key, masked), (name, masked)
            assert REDACTED in masked, (name, masked)
        # An escaped form escaped again (the repr of a path or a JSON string holding it).
        masked = redact_text(repr(forms(key)["json-escaped-slash"]), [key])
        assert not leaks(key, masked.replace("\\\\", "\\")), masked
    # Values under 4 characters are left alone (they would mask words); under 8, only as is.
    assert redact_text("an abc", ["abc"]) == "an abc"
    short = "k7-x9"
    assert redact_text(f"{short} {base64.b64encode(short.encode()).decode()}", [short]) == (
        f"{REDACTED} {base64.b64encode(short.encode()).decode()}"
    )
    # The longer of two overlapping secrets is masked whole.
    assert redact_text("pre sk-longer-secret-value", ["sk-longer", "sk-longer-secret-value"]) == (
        f"pre {REDACTED}"
    )


async def test_redact_known_remembers_what_any_redactor_learned() -> None:
    secret = "sk-known-Vb5Nm8Qw2Er7Tyu"  # 24 characters: base64 without a partial digit
    late = "sk-known-late-Zx3Cv6Bn9M"
    assert redact_known(f"early {secret}") == f"early {secret}"
    async with open_runtime() as ctx:
        await ctx.plugin(Redactor, [secret])
        ctx.require(Redactor).add(late)
        assert redact_known(f"a {secret} b {late}") == f"a {REDACTED} b {REDACTED}"
    # The context is closed: the process still knows them (the CLI reports after this point).
    encoded = base64.b64encode(secret.encode()).decode()
    assert redact_known(f"{encoded} {urllib.parse.quote(late, safe='')}") == (
        f"{REDACTED} {REDACTED}"
    )


def test_the_mcp_redactor_masks_every_form_before_its_callers_cut() -> None:
    # MCP servers' stderr lines and log messages are masked with the servers' secrets (header
    # and env values), then cut to 1000 / 2000 characters: an encoded form must go too.
    redact = McpRedactor.of(frozenset({SPECIAL_KEY}))
    for name, form in forms(SPECIAL_KEY).items():
        masked = redact("." * 990 + form)[:1000]
        assert not leaks(SPECIAL_KEY, masked), (name, masked)
        assert "***" in masked, (name, masked)


async def test_redact_known_masks_a_piece_left_at_a_cut_edge() -> None:
    secret = "sk-edge-Lk4Jh7Gf1Ds9Ap"
    quoted = urllib.parse.quote(secret + "+/=", safe="")
    async with open_runtime() as ctx:
        await ctx.plugin(Redactor, [secret, secret + "+/="])
    # The longest piece at the edge wins (the url-quoted form, not the raw prefix inside it).
    assert redact_known("out: " + quoted[:-4], cut_end=True) == f"out: {REDACTED}"
    assert redact_known(secret[5:] + " tail", cut_start=True) == f"{REDACTED} tail"
    # Not at a cut edge, or a piece under 4 characters: left as it is.
    assert redact_known("out: " + secret[:10]) == "out: " + secret[:10]
    assert redact_known("out: sk-", cut_end=True) == "out: sk-"
    assert redact_known(secret[5:] + " tail", cut_end=True) == secret[5:] + " tail"
