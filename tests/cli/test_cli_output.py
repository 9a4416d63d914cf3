"""#23: ``run``'s output contract: the answer exactly once on a pipe whatever the retries,
retry progress on stderr, stdin prompts, ``-v``'s closing line, ``--continue``."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import run_cli

from trio_agent.testing import (
    DROP,
    completion_chunk,
    open_fake_openai_server,
    sse_event,
    sse_reply,
    sse_response,
    sse_text,
)


async def test_a_dropped_stream_is_retried_and_the_answer_lands_once(tmp_path: Path) -> None:
    dropped = sse_response(
        sse_event(completion_chunk({"role": "assistant", "content": ""})),
        sse_text("The answer is "),
        DROP,
    )
    async with open_fake_openai_server([dropped, sse_reply("The answer is ", "42.")]) as server:
        (tmp_path / "trio-agent.yml").write_text(
            "llm:\n"
            "  providers:\n"
            f"    - {{name: local, type: openai, base_url: '{server.base_url}', models: [m]}}\n"
            "  retry: {max_attempts: 3, initial_delay: 0.05, max_delay: 0.1}\n"
            "tools: {builtin: []}\n"
        )
        with open(tmp_path / "out.txt", "wb") as out:  # noqa: ASYNC230 - a child inherits it
            result = await run_cli(tmp_path, "run", "-v", "question", stdout=out)
    err = result.stderr.decode()
    assert result.returncode == 0, err
    assert (tmp_path / "out.txt").read_text() == "The answer is 42.\n"
    assert "retrying in " in err and "(attempt 2/3)" in err
    assert "Traceback" not in err
    assert "done: 1 step(s), tokens in 10 / out 5 / cached 0" in err


async def test_prompt_from_stdin_and_dash_and_continue(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n")
    piped = await run_cli(tmp_path, "run", stdin=b"read notes.txt\n")
    assert piped.returncode == 0, piped.stderr.decode()
    assert b"alpha" in piped.stdout
    dash = await run_cli(tmp_path, "run", "-", stdin=b"list files\n")
    assert dash.returncode == 0
    assert b"notes.txt" in dash.stdout
    empty = await run_cli(tmp_path, "run", "-", stdin=b"  \n")
    assert empty.returncode == 2
    assert b"trio-agent: USAGE: the prompt is empty" in empty.stderr
    latest = dash.stderr.decode().split("session: ")[1].split()[0]
    again = await run_cli(tmp_path, "run", "--continue", "list files")
    assert again.returncode == 0
    assert f"session: {latest}" in again.stderr.decode()
    # -c before the subcommand, as a global option
    (tmp_path / "other.yml").write_text("tools: {builtin: read_file}\n")
    bad = await run_cli(tmp_path, "-c", "other.yml", "run", "hi")
    assert bad.returncode == 2
    assert b"trio-agent: CONFIG: other.yml: $.tools.builtin" in bad.stderr
