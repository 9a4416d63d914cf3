"""Redaction (SPEC §12, issue 15): a server on 127.0.0.1 that echoes the API key back everywhere it
can - status text, every header (x-request-id included), the body, an SSE error event, a dropped
connection after the echo - and the key string appears nowhere: the session, the logs, exception
texts, tool results."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
import trio

from trio_agent.config import open_harness, parse_config
from trio_agent.llm import LlmFailure
from trio_agent.loop import AgentLoop
from trio_agent.redaction import REDACTED, Redactor
from trio_agent.testing import (
    DROP,
    FakeResponse,
    RecordedRequest,
    error_response,
    json_response,
    open_fake_openai_server,
    sse_event,
    sse_response,
)

KEY = "sk-test-echo-0123456789abcdef"
ENV = "TRIO_AGENT_TEST_ECHO_KEY"


def _echoed(request: RecordedRequest) -> str:
    return request.headers.get("authorization", "")


def _headers(request: RecordedRequest) -> dict[str, str]:
    auth = _echoed(request)
    return {"x-request-id": auth, "x-echo": auth, "retry-after": "0"}


MODES: dict[str, Callable[[RecordedRequest], FakeResponse]] = {
    "error-body-and-headers": lambda r: error_response(
        401, f"bad key {_echoed(r)}", code=_echoed(r), headers=_headers(r)
    ),
    "server-error": lambda r: error_response(500, f"boom {_echoed(r)}", headers=_headers(r)),
    "json-garbage": lambda r: json_response({"echo": _echoed(r)}, status=502, headers=_headers(r)),
    "sse-error-event": lambda r: sse_response(
        sse_event({"error": {"message": f"stream {_echoed(r)}", "code": _echoed(r)}}),
        headers=_headers(r),
    ),
    "drop-after-echo": lambda r: sse_response(
        sse_event({"echo": _echoed(r)}), DROP, headers=_headers(r)
    ),
}


async def _run(mode: str, caplog: pytest.LogCaptureFixture, tmp_path: Any) -> str:
    respond = MODES[mode]
    async with open_fake_openai_server([respond] * 10) as server:
        text = f"""
llm:
  providers:
    - {{name: echo, type: openai, base_url: "{server.base_url}", api_key_env: {ENV},
       models: [m]}}
persistence: {{type: jsonl, path: "{tmp_path}/sessions"}}
tools: {{builtin: []}}
"""
        config = parse_config(text)
        seen: list[str] = []
        with caplog.at_level(logging.DEBUG):
            async with open_harness(config) as ctx:
                agent = ctx.require(AgentLoop).create("a")
                agent.send("hi")
                with trio.fail_after(30):
                    await agent.wait_idle()
                for event in agent.session.events:
                    seen.append(json.dumps(event.payload, default=str))
        seen.append(caplog.text)
        for record in caplog.records:
            seen.append(record.getMessage())
        for path in (tmp_path / "sessions").rglob("*"):
            if path.is_file():
                seen.append(path.read_text())
        return "\n".join(seen)


@pytest.mark.parametrize("mode", sorted(MODES))
async def test_the_key_appears_nowhere(
    mode: str, caplog: pytest.LogCaptureFixture, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, KEY)
    everything = await _run(mode, caplog, tmp_path)
    assert "turn/end" in everything or "error" in everything
    assert KEY not in everything


async def test_redactor_masks_every_failure_field() -> None:
    from trio_agent.runtime import open_runtime

    async with open_runtime() as ctx:
        await ctx.plugin(Redactor, [KEY])
        redactor = ctx.require(Redactor)
        failure = LlmFailure("AUTH", f"bad {KEY}", status=401, request_id=f"Bearer {KEY}")
        clean = redactor.redact_failure(failure)
        assert KEY not in repr(clean)
        assert clean.request_id == f"Bearer {REDACTED}"
        assert clean.status == 401
        assert redactor.redact_value({"k": [KEY, (KEY,)]}) == {"k": [REDACTED, (REDACTED,)]}


async def test_log_records_of_the_library_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    from trio_agent.runtime import open_runtime

    logger = logging.getLogger("trio_agent.llm")
    async with open_runtime() as ctx:
        await ctx.plugin(Redactor, [KEY])
        with caplog.at_level(logging.DEBUG, logger="trio_agent"):
            logger.warning("key %s here", KEY)
            try:
                raise RuntimeError(f"exc {KEY}")
            except RuntimeError:
                logger.exception("failed")
    assert KEY not in caplog.text
    assert REDACTED in caplog.text


async def test_credential_headers_of_a_provider_are_secrets() -> None:
    config = parse_config(
        """
llm:
  providers:
    - {name: azure, type: openai, base_url: "http://127.0.0.1:9/v1", models: [m],
       headers: {api-key: azure-key-0123456789, Authorization: "Bearer tok-0123456789",
                 X-Trace-Tag: visible-value}}
tools: {builtin: []}
"""
    )
    async with open_harness(config) as ctx:
        secrets = ctx.require(Redactor).secrets
    assert {"azure-key-0123456789", "Bearer tok-0123456789", "tok-0123456789"} <= secrets
    assert "visible-value" not in secrets
