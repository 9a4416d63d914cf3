"""The ``subagents:`` config section, the definition's checks, and the service's wiring."""

from __future__ import annotations

import pytest
import yaml

from trio_agent.lowlevel import PluginConfigError
from trio_agent.runtime import open_runtime
from trio_agent.subagents import (
    SubagentConfigError,
    SubagentDefinition,
    SubagentsConfig,
    SubagentService,
    parse_subagents_config,
)
from trio_agent.testing import open_test_harness

LIST_FORM = """
subagents:
  - name: reviewer
    description: Reviews a diff.
    instructions: List bugs.
    tools: [read_file, grep]
    max_steps: 10
  - name: researcher
    description: Finds things.
    instructions: Search and answer.
    provider: local
    model: small
    output_schema: {type: object, properties: {paths: {type: array, items: {type: string}}}}
"""


def test_the_service_takes_its_config_and_services() -> None:
    assert SubagentService.Config is SubagentsConfig
    assert SubagentService.inject == ("agents", "sessions", "tools", "system_prompt")


def test_the_list_form() -> None:
    config = parse_subagents_config(yaml.safe_load(LIST_FORM)["subagents"])
    reviewer, researcher = config.definitions
    assert reviewer == SubagentDefinition(
        "reviewer", "Reviews a diff.", "List bugs.", tools=("read_file", "grep"), max_steps=10
    )
    assert (researcher.provider, researcher.model, researcher.max_steps) == ("local", "small", 25)
    assert researcher.output_schema == {
        "type": "object",
        "properties": {"paths": {"type": "array", "items": {"type": "string"}}},
    }
    assert (config.max_depth, config.max_parallel, config.background) == (3, 4, True)


def test_the_mapping_form_and_none() -> None:
    config = parse_subagents_config(
        {"max_depth": 1, "max_parallel": 2, "background": False, "definitions": []}
    )
    assert config == SubagentsConfig(max_depth=1, max_parallel=2, background=False)
    assert parse_subagents_config(None) == SubagentsConfig()


@pytest.mark.parametrize(
    ("data", "problems"),
    [
        ("reviewer", ["$.subagents: got str; expected a list of definitions or a mapping"]),
        (
            [{"name": "a b", "description": "d", "instructions": "i"}],
            ["$.subagents[0].name: got 'a b'"],
        ),
        (
            [{"name": "a", "instructions": "i", "tool": ["x"]}],
            [
                "$.subagents[0]: unknown key 'tool'",
                "$.subagents[0].description: required key missing",
            ],
        ),
        (
            [{"name": "a", "description": "d", "instructions": "i", "tools": "read_file"}],
            ["$.subagents[0].tools: got str; expected a list"],
        ),
        (
            [{"name": "a", "description": "d", "instructions": "i", "max_steps": 0}],
            ["$.subagents[0].max_steps: got 0; expected a positive integer"],
        ),
        (
            [{"name": "a", "description": "d", "instructions": "i", "max_steps": True}],
            ["$.subagents[0].max_steps: got bool; expected an integer"],
        ),
        (
            [
                {"name": "a", "description": "d", "instructions": "i"},
                {"name": "a", "description": "d", "instructions": "i"},
            ],
            ["$.subagents: the name 'a' is defined more than once"],
        ),
        (
            {"max_depth": 0, "extra": 1},
            ["$.subagents: unknown key 'extra'", "$.subagents.max_depth: got 0"],
        ),
        (
            [
                {
                    "name": "a",
                    "description": "d",
                    "instructions": "i",
                    "output_schema": {"type": "x"},
                }
            ],
            ["$.subagents[0].output_schema: $.type: got 'x'"],
        ),
    ],
)
def test_problems_name_their_key_path(data: object, problems: list[str]) -> None:
    with pytest.raises(SubagentConfigError) as caught:
        parse_subagents_config(data)
    message = str(caught.value)
    for problem in problems:
        assert problem in message


def test_definitions_check_themselves() -> None:
    with pytest.raises(SubagentConfigError, match=r"^name: got '-x'"):
        SubagentDefinition("-x", "d", "i")
    with pytest.raises(SubagentConfigError, match=r"^description: got ''"):
        SubagentDefinition("x", "", "i")
    with pytest.raises(SubagentConfigError, match=r"^tools: got 'bad name'"):
        SubagentDefinition("x", "d", "i", tools=["bad name"])
    with pytest.raises(SubagentConfigError, match="defined twice"):
        SubagentsConfig(definitions=(SubagentDefinition("x", "d", "i"),) * 2)


async def test_the_plugin_takes_the_yaml_section_as_its_config(autojump_clock: object) -> None:
    section = yaml.safe_load(LIST_FORM)["subagents"]
    async with open_test_harness() as h:
        fiber = await h.ctx.plugin(SubagentService, section)
        assert [d.name for d in fiber.instance.list()] == ["reviewer", "researcher"]
    async with open_runtime() as ctx:
        with pytest.raises(PluginConfigError, match=r"max_steps: got 0"):
            await ctx.plugin(
                SubagentService,
                [{"name": "a", "description": "d", "instructions": "i", "max_steps": 0}],
            )
