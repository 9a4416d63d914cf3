"""Tool names: ``<server>__<tool>``, sanitised, shortened with a stable hash."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from trio_agent.mcp import mcp_tool_name

VALID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def test_plain_names_are_joined_by_two_underscores() -> None:
    assert mcp_tool_name("fs", "read_file") == "fs__read_file"
    assert mcp_tool_name("fs", "read-file") == "fs__read-file"


def test_characters_outside_the_allowed_set_become_underscores() -> None:
    assert mcp_tool_name("fs", "files.read") == "fs__files_read"
    assert mcp_tool_name("fs", "lire un fichier é") == "fs__lire_un_fichier__"
    assert mcp_tool_name("fs", "a/b:c") == "fs__a_b_c"


def test_long_names_are_cut_at_64_with_a_stable_hash() -> None:
    long = "x" * 100
    name = mcp_tool_name("server", long)
    assert len(name) == 64
    assert name.startswith("server__xxx")
    assert re.fullmatch(r"[A-Za-z0-9_-]{55}_[0-9a-f]{8}", name)
    assert mcp_tool_name("server", long) == name  # stable
    # Two long names sharing their first 64 characters stay apart.
    assert mcp_tool_name("server", long + "a") != mcp_tool_name("server", long + "b")


def test_exactly_64_characters_are_kept() -> None:
    tool = "y" * (64 - len("s__"))
    assert mcp_tool_name("s", tool) == f"s__{tool}"


@given(st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True), st.text(max_size=200))
def test_every_name_is_valid_for_a_model_api(server: str, tool: str) -> None:
    assert VALID.fullmatch(mcp_tool_name(server, tool))
