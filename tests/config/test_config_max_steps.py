"""``max_steps:`` (top level) and ``agents[].max_steps`` (issue 15)."""

from __future__ import annotations

import pytest

from trio_agent.config import ConfigError, parse_config


def test_default_is_50() -> None:
    config = parse_config("agents: [{id: a}]")
    assert config.max_steps == 50
    assert config.agents[0].options.max_steps == 50


def test_top_level_fills_rows_without_their_own() -> None:
    config = parse_config(
        "max_steps: 7\nagents: [{id: a}, {id: b, max_steps: 3}, {id: c, max_steps: null}]"
    )
    assert [row.options.max_steps for row in config.agents] == [7, 3, None]


@pytest.mark.parametrize("text", ["max_steps: 0", "agents: [{id: a, max_steps: -2}]"])
def test_bad_values_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError, match="max_steps"):
        parse_config(text)
