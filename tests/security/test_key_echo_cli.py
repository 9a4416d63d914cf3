"""Redaction through the real command (issue 15, "the echoing key server across every error
mode: the key string found nowhere").

For each mode of :func:`~trio_agent.testing.echo_key_response` (401, 429 retried, 500, a
redirect, a mid-stream SSE error event, malformed SSE, a connection dropped mid-stream) a
server on 127.0.0.1 echoes the API key into the reason phrase, the headers, the error body and
the stream; the real ``trio-agent`` runs against it in a subprocess (``run`` as text with
``-v``, then ``run --json --continue`` with a plugin that sends every log record at ``DEBUG``
to stderr and to a log file), then ``sessions list --json``, ``sessions show`` and
``sessions export`` in every format. The key - its ``Bearer`` header, url-quoted and base64
forms, and any 12-character piece of it - is in none of their stdout or stderr, and in no file
under the workspace or ``HOME`` (the session store and the log file included).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import trio
from key_forms import SPECIAL_KEY, forms, leaks

from trio_agent.redaction import REDACTED, Redactor
from trio_agent.runtime import open_runtime
from trio_agent.testing import (
    ECHO_MODES,
    FakeResponse,
    RecordedRequest,
    echo_key_response,
    open_fake_openai_server,
    sse_done,
    sse_event,
    sse_response,
)

CLI = Path(sys.executable).parent / "trio-agent"
KEY = "sk-echo-7Hq2Zr9Xw4Lm0Pa3Ns8Kd1"
ENV = "TRIO_AGENT_ECHO_TEST_KEY"
#: Every form of the key a leak could take.
FORMS = {
    "key": KEY,
    "url-quoted": urllib.parse.quote(KEY, safe=""),
    "base64": base64.b64encode(KEY.encode()).decode(),
    "urlsafe-base64": base64.urlsafe_b64encode(KEY.encode()).decode(),
    "json-escaped": json.dumps(KEY)[1:-1],
}
#: The code each mode's turn ends with on stderr (``trio-agent: CODE: ...``).
CODES = {
    "401": "AUTH",
    "429": "RATE_LIMIT",
    "500": "SERVER",
    "redirect": "HTTP_307",
    "sse-error": "SERVER",
    "malformed-sse": "MALFORMED_RESPONSE",
    "drop": "TRANSPORT",
}

DEBUG_LOG_PLUGIN = '''\
"""A plugin that sends every log record, DEBUG included, to stderr and to a file."""

import logging
import sys


def debug_log(ctx, config):
    root = logging.getLogger()
    formatter = logging.Formatter("%(levelname)s %(name)s: %(message)s")
    for handler in (logging.FileHandler(config["path"]), logging.StreamHandler(sys.stderr)):
        handler.setFormatter(formatter)
        root.addHandler(handler)
    root.setLevel(logging.DEBUG)
'''


def _config(base_url: str, *, debug_log: Path | None = None) -> str:
    text = f"""\
llm:
  providers:
    - {{name: echo, type: openai, base_url: "{base_url}", api_key_env: {ENV}, models: [m]}}
  retry: {{max_attempts: 2, initial_delay: 0.01, max_delay: 0.02}}
tools: {{builtin: []}}
"""
    if debug_log is not None:
        text += (
            f'plugins:\n  - {{use: "echo_debug_log:debug_log", config: {{path: "{debug_log}"}}}}\n'
        )
    return text


def _env(home: Path, plugins: Path, key: str = KEY) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        {
            ENV: key,
            "HOME": str(home),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(
                [str(plugins), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
    )
    return env


async def _cli(
    cwd: Path, env: dict[str, str], *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    # run_process kills the child if this scope is cancelled (a failed guard included).
    with trio.fail_after(90):
        return await trio.run_process(
            [str(CLI), *args],
            cwd=cwd,
            env=env,
            stdin=stdin,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


def _session_of(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.startswith("session: "):
            return line.split()[1]
    raise AssertionError(f"no session id in: {stderr}")


#: A piece of the key this long is a leak too (a text cut before it was redacted).
PIECE = 12


def _leaks(where: str, text: str, key: str = KEY) -> list[str]:
    if key != KEY:  # every form, and any 12-character piece of one
        return [f"{leak} in {where}" for leak in leaks(key, text)]
    found = [f"{name} form of the key in {where}" for name, form in FORMS.items() if form in text]
    pieces = {KEY[i : i + PIECE] for i in range(len(KEY) - PIECE + 1)}
    found += [f"the piece {piece!r} of the key in {where}" for piece in pieces if piece in text]
    return found


def _file_leaks(top: Path, key: str = KEY) -> list[str]:
    """The leaks in every file under ``top`` (workspace, session store, HOME, the log file)."""
    files = [path for path in top.rglob("*") if path.is_file()]
    assert any(path.suffix == ".jsonl" for path in files), "no session file on disk"
    found: list[str] = []
    for path in files:
        found += _leaks(str(path.relative_to(top)), path.read_text(errors="replace"), key)
    return found


def _output_leaks(
    outputs: dict[str, subprocess.CompletedProcess[bytes]], key: str = KEY
) -> list[str]:
    """The leaks in every process's stdout and stderr (and no traceback in any)."""
    found: list[str] = []
    for name, done in outputs.items():
        for stream, data in (("stdout", done.stdout), ("stderr", done.stderr)):
            text = data.decode("utf-8", errors="replace")
            assert "Traceback" not in text, f"{name} {stream}: {text}"
            found += _leaks(f"{name} {stream}", text, key)
    return found


@pytest.mark.trio_timeout(300)  # seven CLI processes on a busy machine
@pytest.mark.parametrize("mode", ECHO_MODES)
async def test_the_echoed_key_is_found_nowhere(mode: str, tmp_path: Path) -> None:
    workspace, home, plugins = tmp_path / "ws", tmp_path / "home", tmp_path / "plugins"
    for directory in (workspace, home, plugins):
        directory.mkdir()
    (plugins / "echo_debug_log.py").write_text(DEBUG_LOG_PLUGIN)
    log_file = tmp_path / "debug.log"
    env = _env(home, plugins)
    outputs: dict[str, subprocess.CompletedProcess[bytes]] = {}
    async with open_fake_openai_server([echo_key_response(mode)] * 20) as server:
        (workspace / "plain.yml").write_text(_config(server.base_url))
        (workspace / "debug.yml").write_text(_config(server.base_url, debug_log=log_file))
        outputs["run -v"] = await _cli(workspace, env, "-c", "plain.yml", "run", "-v", "hi")
        first_requests = len(server.requests)
        outputs["run --json"] = await _cli(
            workspace, env, "-c", "debug.yml", "run", "--json", "--continue", "again"
        )
    assert server.requests, "the CLI never reached the server"
    assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in server.requests)
    if mode in ("429", "500", "drop"):
        assert first_requests == 2, f"{mode} was not retried"

    text_run, json_run = outputs["run -v"], outputs["run --json"]
    err = text_run.stderr.decode()
    assert text_run.returncode == 1, err
    assert f"trio-agent: {CODES[mode]}: " in err
    assert json_run.returncode == 1, json_run.stderr.decode()
    result = json.loads(json_run.stdout)
    session = _session_of(err)
    assert result["session_id"] == session  # --continue resumed the first run's session
    assert result["error"]["code"] == CODES[mode]

    for args in (
        ("sessions", "list", "--json"),
        ("sessions", "show", session),
        ("sessions", "export", session, "--format", "jsonl"),
        ("sessions", "export", session, "--format", "json"),
        ("sessions", "export", session, "--format", "markdown"),
    ):
        done = await _cli(workspace, env, "-c", "plain.yml", *args)
        assert done.returncode == 0, done.stderr.decode()
        outputs[" ".join(args[:2] + args[3:])] = done
    assert "turn/end" in outputs["sessions export --format jsonl"].stdout.decode()
    assert log_file.stat().st_size > 0, "the DEBUG log plugin wrote nothing"

    found = _output_leaks(outputs) + _file_leaks(tmp_path)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("mode", ECHO_MODES)
async def test_each_echo_mode_sends_the_key_back(mode: str) -> None:
    async with (
        open_fake_openai_server([echo_key_response(mode)]) as server,
        httpx.AsyncClient() as client,
    ):
        request = client.build_request(
            "POST",
            f"{server.base_url}/chat/completions",
            headers={"authorization": f"Bearer {KEY}"},
        )
        response = await client.send(request, stream=True)
        body = b""
        try:
            async for data in response.aiter_raw():
                body += data
        except httpx.RemoteProtocolError:
            assert mode == "drop"
        finally:
            await response.aclose()
    assert response.reason_phrase.endswith(f"Bearer {KEY}")
    assert response.headers["x-request-id"] == f"Bearer {KEY}"
    assert response.headers["x-echo-key-base64"] == FORMS["base64"]
    if mode == "redirect":
        assert KEY in response.headers["location"]
    else:
        assert KEY.encode() in body
    if mode in ("sse-error", "malformed-sse"):
        assert b'data: {"error": {"message": "invalid key Bearer ' + KEY.encode() in body
    if mode == "429":
        assert response.headers["retry-after"] == "0"


def test_an_unknown_echo_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown echo mode 'teapot'"):
        echo_key_response("teapot")


async def test_the_redactor_masks_the_encoded_forms_of_a_secret() -> None:
    secret = 'sk/ab+cd ef=gh?ij&kl"é'
    async with open_runtime() as ctx:
        await ctx.plugin(Redactor, [secret, "tiny-k7"])
        redactor = ctx.require(Redactor)
        for prefix in ("", "u", "us", "user:", "Bearer "):
            for suffix in ("", "x", "xy"):
                for encode in (base64.b64encode, base64.urlsafe_b64encode):
                    encoded = encode((prefix + secret + suffix).encode()).decode()
                    assert REDACTED in redactor.redact(f"auth {encoded} end"), encoded
        for form in (
            urllib.parse.quote(secret, safe=""),
            urllib.parse.quote_plus(secret),
            json.dumps(secret),
            json.dumps(secret, ensure_ascii=False),
        ):
            assert redactor.redact(form).strip('"') == REDACTED, form
        # a secret under 8 characters is masked as it is, not in encoded forms
        short = base64.b64encode(b"tiny-k7").decode()
        assert redactor.redact(f"tiny-k7 {short}") == f"{REDACTED} {short}"
        assert redactor.secrets == {secret, "tiny-k7"}


@pytest.mark.trio_timeout(300)  # three CLI processes on a busy machine
@pytest.mark.parametrize("key", [KEY, SPECIAL_KEY], ids=["key", "special-key"])
@pytest.mark.parametrize("mode", ECHO_MODES)
async def test_chat_on_piped_stdin_leaks_the_key_nowhere(
    mode: str, key: str, tmp_path: Path
) -> None:
    """``trio-agent chat`` reading piped lines (no terminal: one turn per line) against the
    echoing server, every log record at DEBUG on stderr and in a file; the special key has
    ``+/=%`` in it, which every encoding changes."""
    workspace, home, plugins = tmp_path / "ws", tmp_path / "home", tmp_path / "plugins"
    for directory in (workspace, home, plugins):
        directory.mkdir()
    (plugins / "echo_debug_log.py").write_text(DEBUG_LOG_PLUGIN)
    log_file = tmp_path / "debug.log"
    env = _env(home, plugins, key)
    outputs: dict[str, subprocess.CompletedProcess[bytes]] = {}
    async with open_fake_openai_server([echo_key_response(mode)] * 20) as server:
        (workspace / "debug.yml").write_text(_config(server.base_url, debug_log=log_file))
        outputs["chat"] = await _cli(
            workspace, env, "-c", "debug.yml", "chat", stdin=b"hi\nagain\n"
        )
    assert len(server.requests) >= 2, "the chat did not run a turn per line"
    assert all(r.headers.get("authorization") == f"Bearer {key}" for r in server.requests)
    chat = outputs["chat"]
    err = chat.stderr.decode()
    assert chat.returncode == 0, err
    # Each line's turn failed, and the chat said so (redacted) before reading the next line.
    failed = [line for line in err.splitlines() if line.startswith(f"{CODES[mode]}: ")]
    assert len(failed) == 2, err
    session = _session_of(err)
    for args in (
        ("sessions", "show", session),
        ("sessions", "export", session, "--format", "jsonl"),
    ):
        done = await _cli(workspace, env, "-c", "debug.yml", *args)
        assert done.returncode == 0, done.stderr.decode()
        outputs[" ".join(args[:2])] = done
    assert outputs["sessions export"].stdout.decode().count('"turn/end"') == 2
    assert log_file.stat().st_size > 0, "the DEBUG log plugin wrote nothing"
    found = _output_leaks(outputs, key) + _file_leaks(tmp_path, key)
    assert not found, "\n".join(found)


def _across_the_cut(form: str) -> Callable[[RecordedRequest], FakeResponse]:
    """A malformed event with the special key's ``form`` across its 120th character (where
    the adapter cuts its quote of the event); the request's key is checked, not assumed."""
    event = "{" + "." * (120 - len(form) // 2) + form + " not json"

    def respond(request: RecordedRequest) -> FakeResponse:
        assert request.headers.get("authorization") == f"Bearer {SPECIAL_KEY}"
        return sse_response(sse_event({"choices": []}), sse_event(event), sse_done())

    return respond


@pytest.mark.trio_timeout(200)
@pytest.mark.parametrize("form", ["base64", "url-quoted", "basic-auth"])
async def test_an_encoded_key_across_the_cut_leaks_no_piece_through_the_cli(
    form: str, tmp_path: Path
) -> None:
    workspace, home, plugins = tmp_path / "ws", tmp_path / "home", tmp_path / "plugins"
    for directory in (workspace, home, plugins):
        directory.mkdir()
    env = _env(home, plugins, SPECIAL_KEY)
    outputs: dict[str, subprocess.CompletedProcess[bytes]] = {}
    async with open_fake_openai_server([_across_the_cut(forms(SPECIAL_KEY)[form])] * 5) as server:
        (workspace / "plain.yml").write_text(_config(server.base_url))
        outputs["run --json"] = await _cli(workspace, env, "-c", "plain.yml", "run", "--json", "hi")
    assert server.requests, "the CLI never reached the server"
    done = outputs["run --json"]
    assert done.returncode == 1, done.stderr.decode()
    result = json.loads(done.stdout)
    assert result["error"]["code"] == "MALFORMED_RESPONSE"
    exported = await _cli(
        workspace, env, "-c", "plain.yml", "sessions", "export", result["session_id"]
    )
    assert exported.returncode == 0, exported.stderr.decode()
    outputs["sessions export"] = exported
    found = _output_leaks(outputs, SPECIAL_KEY) + _file_leaks(tmp_path, SPECIAL_KEY)
    assert not found, "\n".join(found)


FAILING_PLUGIN = '''\
"""A plugin that fails to load with the key (and its base64 form) in its error."""

import base64
import os


def failing(ctx, config):
    key = os.environ["TRIO_AGENT_ECHO_TEST_KEY"]
    encoded = base64.b64encode(key.encode()).decode()
    raise RuntimeError(f"cannot start with {key} (as {encoded})")
'''


@pytest.mark.parametrize("key", [KEY, SPECIAL_KEY], ids=["key", "special-key"])
async def test_the_cli_error_line_is_redacted(key: str, tmp_path: Path) -> None:
    """The CLI's one error path masks what the process loaded: a plugin's load error quoting
    the key ends ``trio-agent: CONFIG: ...`` with the key masked in every form."""
    workspace, home, plugins = tmp_path / "ws", tmp_path / "home", tmp_path / "plugins"
    for directory in (workspace, home, plugins):
        directory.mkdir()
    (plugins / "failing_plugin.py").write_text(FAILING_PLUGIN)
    (workspace / "failing.yml").write_text(
        _config("http://127.0.0.1:9/v1") + 'plugins:\n  - {use: "failing_plugin:failing"}\n'
    )
    done = await _cli(workspace, _env(home, plugins, key), "-c", "failing.yml", "run", "hi")
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "trio-agent: CONFIG: " in err and "cannot start with [redacted] (as [redacted]" in err
    found = _output_leaks({"run": done}, key)
    assert not found, "\n".join(found)
