"""The OpenAI adapter's event decoder: its fast path for plain text and reasoning deltas (a
template, #17) means exactly what decoding every event in full means, whatever the events
look like."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_agent.llm import ReasoningDelta, StreamChunk, TextDelta
from trio_agent.llm._openai import _TEMPLATE_TRIES, _Decoder, _Malformed


def chunk(delta: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk`` as OpenAI sends it (``system_fingerprint``, ``logprobs``)."""
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "logprobs": None}
    choice["finish_reason"] = extra.pop("finish_reason", None)
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "gpt-x",
        "system_fingerprint": "fp_1",
        "choices": [choice],
        **extra,
    }


def decode(events: list[str], *, fast: bool) -> list[object]:
    """What a decoder makes of ``events``: its chunks, failures and malformed reports, in
    order; ``fast=False`` never derives a template (every event decoded in full)."""
    decoder = _Decoder()
    if not fast:
        decoder.template_tries = _TEMPLATE_TRIES
    seen: list[object] = []
    for data in events:
        out: deque[StreamChunk] = deque()
        try:
            failure = decoder.event(data, out)
        except _Malformed as exc:
            seen += [*out, ("malformed", str(exc))]
            continue
        seen += [*out, failure]
    return seen


texts = st.text(st.characters(codec="utf-8") | st.sampled_from(["\\", '"', "\n", "\x00", "é"]))


@st.composite
def events(draw: st.DrawFn) -> list[str]:
    """Plain text events (in compact, spaced or ASCII-escaped JSON) mixed with events that
    share their text around the content but are not plain text, and with broken ones."""
    separators = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    ascii_only = draw(st.booleans())

    def dumps(obj: object) -> str:
        return json.dumps(obj, separators=separators, ensure_ascii=ascii_only)

    out = []
    for _ in range(draw(st.integers(1, 12))):
        text = draw(texts)
        kind = draw(
            st.sampled_from(
                ["text"] * 4
                + ["deepseek text", "deepseek reasoning", "reasoning", "openrouter reasoning"] * 2
                + ["finish", "logprobs", "both", "tail", "broken", "usage", "lone surrogate"]
                + ["role", "tool"]
            )
        )
        if kind == "text":
            out.append(dumps(chunk({"content": text})))
        elif kind == "deepseek text":  # DeepSeek's reasoner names the other field, null
            out.append(dumps(chunk({"content": text, "reasoning_content": None})))
        elif kind == "deepseek reasoning":
            out.append(dumps(chunk({"content": None, "reasoning_content": text})))
        elif kind == "openrouter reasoning":
            out.append(dumps(chunk({"reasoning": text})))
        elif kind == "both":
            out.append(dumps(chunk({"reasoning_content": text, "content": text})))
        elif kind == "role":  # the first event of many providers
            out.append(dumps(chunk({"role": "assistant", "content": text})))
        elif kind == "tool":
            call = {"index": 0, "id": "c1", "function": {"name": "f", "arguments": text}}
            out.append(dumps(chunk({"content": None, "tool_calls": [call]})))
        elif kind == "finish":
            out.append(dumps(chunk({"content": text}, finish_reason="stop")))
        elif kind == "logprobs":
            event = chunk({"content": text})
            event["choices"][0]["logprobs"] = {"content": []}
            out.append(dumps(event))
        elif kind == "reasoning":
            out.append(dumps(chunk({"reasoning_content": text})))
        elif kind == "usage":
            out.append(dumps(chunk({"content": text}, usage={"prompt_tokens": 1})))
        elif kind == "tail":  # the content literal, then something after the event
            out.append(dumps(chunk({"content": text})) + draw(st.sampled_from(["x", " ", "}"])))
        elif kind == "broken":  # a raw control character in the literal: not JSON
            out.append(dumps(chunk({"content": "x"})).replace('"x"', '"a\x01b"'))
        else:  # a lone surrogate, escaped: JSON allows it, and both paths must keep it
            out.append(dumps(chunk({"content": "a"})).replace('"a"', '"a\\ud800"'))
    return out


@given(events())
def test_the_fast_path_decodes_what_the_full_decode_does(events: list[str]) -> None:
    assert decode(events, fast=True) == decode(events, fast=False)


def test_plain_text_events_take_the_template() -> None:
    decoder = _Decoder()
    out: deque[StreamChunk] = deque()
    for text in ["Hel", 'lo \\ "world" \u2603']:
        event = json.dumps(chunk({"content": text}), separators=(",", ":"))
        assert decoder.event(event, out) is None
    [template] = decoder.templates
    assert template.prefix.endswith('"content":"')
    assert template.suffix == '"},"logprobs":null,"finish_reason":null}]}'
    assert "".join(getattr(c, "text", "") for c in out) == 'Hello \\ "world" \u2603'


def test_deepseek_reasoning_then_text_take_one_template_each() -> None:
    decoder = _Decoder()
    out: deque[StreamChunk] = deque()
    for delta in [
        {"content": None, "reasoning_content": "think"},
        {"content": None, "reasoning_content": "ing"},
        {"content": "an", "reasoning_content": None},
        {"content": "swer", "reasoning_content": None},
    ]:
        decoder.event(json.dumps(chunk(delta), separators=(",", ":")), out)
    assert [t.chunk for t in decoder.templates] == [ReasoningDelta, TextDelta]
    assert [type(c).__name__ for c in out] == [
        "BlockStart",
        "ReasoningDelta",
        "ReasoningDelta",
        "BlockStart",
        "TextDelta",
        "TextDelta",
    ]


@pytest.mark.parametrize(
    "event",
    [
        # "content" twice: which literal is the delta's is not proven, so no template.
        chunk({"content": "a"}, note={"content": "b"}),
        # Two chunks from one event, or a finish, or usage: more than a plain delta.
        chunk({"content": "a", "reasoning_content": "b"}),
        chunk({"content": "a"}, finish_reason="stop"),
        chunk({"content": "a"}, usage={"prompt_tokens": 1}),
    ],
)
def test_no_template_when_the_event_is_not_a_plain_delta(event: dict[str, Any]) -> None:
    decoder = _Decoder()
    out: deque[StreamChunk] = deque()
    decoder.event(json.dumps(chunk({"reasoning_content": "open"})), out)  # both blocks open
    decoder.event(json.dumps(chunk({"content": "open"})), out)
    decoder.templates = []
    decoder.template_tries = 0
    decoder.event(json.dumps(event), out)
    assert decoder.templates == []


def test_a_provider_whose_events_always_differ_stops_deriving_templates() -> None:
    decoder = _Decoder()
    out: deque[StreamChunk] = deque()
    for nonce in range(10):
        decoder.event(json.dumps(chunk({"content": "t"}, obfuscation="x" * nonce)), out)
    assert decoder.template_tries == _TEMPLATE_TRIES
    assert sum(getattr(c, "text", None) == "t" for c in out) == 10


def test_reasoning_under_its_other_name_takes_a_template_too() -> None:
    decoder = _Decoder()
    out: deque[StreamChunk] = deque()
    for text in ["a", "b", "c"]:
        decoder.event(json.dumps(chunk({"reasoning": text})), out)
    assert [t.chunk for t in decoder.templates] == [ReasoningDelta]
    assert [getattr(c, "text", None) for c in out] == [None, "a", "b", "c"]
