"""The CLI's error line for an unexpected bug (``INTERNAL``), an ``OS_ERROR`` and the
``TRIO_AGENT_DEBUG`` traceback mask every secret the process loaded (issue 15), although the
harness - and with it the redactor - has closed by the time the error reaches ``main``.

``main`` runs in this process (it owns its ``trio.run``, so these tests are synchronous) with
the ``run`` command replaced by one that mounts a real :class:`Redactor` with the key, closes
it, then fails with the key in its error in every form.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import pytest
import trio
from key_forms import SPECIAL_KEY, forms, leaks

from trio_agent.cli import _main
from trio_agent.redaction import REDACTED, Redactor
from trio_agent.runtime import open_runtime

KEY = "sk-cli-error-Wq3Er6Ty9Ui2Op5As8"


def _all_forms(key: str) -> str:
    return " ".join(forms(key).values())


def _failing(error: Callable[[str], BaseException], key: str) -> object:
    async def command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
        async with open_runtime() as ctx:
            await ctx.plugin(Redactor, [key])
        async with trio.open_nursery():  # the error reaches main inside a group, as in a run
            raise error(key)

    return command


def _run_main(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Callable[[str], BaseException],
    key: str,
) -> tuple[int, str]:
    monkeypatch.setattr(_main, "run_command", _failing(error, key))
    status = _main.main(["run", "hi"])
    captured = capsys.readouterr()
    assert not leaks(key, captured.out + captured.err), captured
    return status, captured.err


@pytest.mark.parametrize("key", [KEY, SPECIAL_KEY], ids=["key", "special-key"])
def test_an_internal_error_is_redacted(
    key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TRIO_AGENT_DEBUG", raising=False)
    status, err = _run_main(
        monkeypatch, capsys, lambda k: RuntimeError(f"a bug with {_all_forms(k)}"), key
    )
    assert status == 1
    first, hint = err.splitlines()
    assert first.startswith("trio-agent: INTERNAL: RuntimeError: a bug with [redacted]")
    assert first.count(REDACTED) >= len(forms(key)) - 2  # equal forms are one mask
    assert hint.startswith("hint: a bug in trio-agent")


@pytest.mark.parametrize("key", [KEY, SPECIAL_KEY], ids=["key", "special-key"])
def test_an_os_error_is_redacted(
    key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = _run_main(
        monkeypatch,
        capsys,
        lambda k: FileNotFoundError(2, "No such file or directory", f"/tmp/{_all_forms(k)}"),
        key,
    )
    assert status == 1
    assert err.startswith(
        "trio-agent: OS_ERROR: [Errno 2] No such file or directory: '/tmp/[redacted]"
    )
    assert len(err.splitlines()) == 1


def test_the_debug_traceback_is_redacted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIO_AGENT_DEBUG", "1")
    status, err = _run_main(
        monkeypatch, capsys, lambda k: RuntimeError(f"a bug with {_all_forms(k)}"), SPECIAL_KEY
    )
    assert status == 1
    assert "Traceback (most recent call last)" in err
    assert "RuntimeError: a bug with [redacted]" in err


async def test_sessions_masks_the_keys_the_config_reads(tmp_path: Path) -> None:
    # `sessions` mounts only the persistence part of the harness: the redactor too.
    (tmp_path / "afile").write_text("")
    (tmp_path / "trio-agent.yml").write_text(
        "llm: {providers: [{name: o, type: openai, api_key_env: MY_TEST_KEY, "
        'base_url: "http://127.0.0.1:9/v1", models: [m]}]}\n'
        'persistence: {type: jsonl, path: "afile/${MY_TEST_KEY}"}\n'
    )
    env = {**os.environ, "MY_TEST_KEY": KEY}
    with trio.fail_after(60):
        result = await trio.run_process(
            [str(Path(sys.executable).parent / "trio-agent"), "sessions", "list"],
            cwd=tmp_path,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    err = result.stderr.decode()
    assert result.returncode == 1 and "trio-agent: OS_ERROR: " in err, err
    assert REDACTED in err and not leaks(KEY, err + result.stdout.decode())
