"""Provider ``models`` entries: a name or ``{name, context_window}``; plain names keep working."""

from __future__ import annotations

import pickle

import pytest

from trio_agent import _serde
from trio_agent.config import ConfigError, parse_config
from trio_agent.llm import ModelList, ModelSpec, OfflineProvider, OpenAiProvider, ScriptedProvider


def test_a_model_list_is_a_tuple_of_names() -> None:
    models = ModelList(["a", ModelSpec("b", context_window=8_000)])
    assert models == ("a", "b") and models[0] == "a" and type(models[0]) is str
    assert list(models) == ["a", "b"]
    assert models.specs == (ModelSpec("a"), ModelSpec("b", context_window=8_000))
    assert models.context_window("b") == 8_000
    assert models.context_window("a") is None and models.context_window("zzz") is None
    assert models != ModelList(["a", ModelSpec("b", context_window=4_000)])
    assert hash(models) == hash(("a", "b"))
    assert pickle.loads(pickle.dumps(models)).specs == models.specs
    with pytest.raises(ValueError, match="listed twice"):
        ModelList(["a", "a"])
    with pytest.raises(TypeError, match="give a model name or a ModelSpec"):
        ModelList([3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="positive number of tokens"):
        ModelSpec("a", context_window=0)


@pytest.mark.parametrize(
    "config", [OpenAiProvider.Config, OfflineProvider.Config, ScriptedProvider.Config]
)
def test_every_provider_config_takes_names_or_specs(config: type) -> None:
    extra = {"base_url": "http://127.0.0.1:1/v1"} if config is OpenAiProvider.Config else {}
    plain = config(models=("m1", "m2"), **extra)
    assert plain.models == ("m1", "m2") and plain.models[0] == "m1"
    rich = config(models=["m1", ModelSpec("m2", context_window=1_000)], **extra)
    assert rich.models.context_window("m2") == 1_000
    assert config(**extra).models == ()


def test_the_config_file_form() -> None:
    config = parse_config(
        """
llm:
  providers:
    - name: ds
      type: openai
      base_url: http://127.0.0.1:1/v1
      models: [ds-chat, {name: ds-reasoner, context_window: 65536}]
"""
    )
    models = config.llm.providers[0].models
    assert models == ("ds-chat", "ds-reasoner")
    assert models.context_window("ds-reasoner") == 65_536
    assert _serde.unstructure(models) == [
        "ds-chat",
        {"name": "ds-reasoner", "context_window": 65536},
    ]
    assert _serde.structure(_serde.unstructure(models), ModelList) == models


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ("[a, {name: b, context_window: -3}]", r"models\[1\]: .*positive number of tokens"),
        ("[a, {name: b, window: 3}]", r"models\[1\]: unknown key\(s\) window"),
        ("[a, a]", r"models\[1\]: model 'a' is listed twice"),
        ("[a, 3]", r"models\[1\]: .*got int"),
        (
            "[{context_window: 3}]",
            r"\$\.llm\.providers\[0\]\.models\[0\]\.name: required key missing",
        ),
    ],
)
def test_a_bad_entry_is_a_config_error_naming_its_path(models: str, message: str) -> None:
    text = f"llm:\n  providers:\n    - {{name: s, type: scripted, models: {models}}}\n"
    with pytest.raises(ConfigError, match=message):
        parse_config(text)
