"""The public surface of trio_agent.llm is pinned; stateful classes are final."""

from __future__ import annotations

import typing

import trio_agent.llm as llm
import trio_agent.testing as testing

EXPECTED = {
    "AdapterConflictError",
    "BlockAssembler",
    "BlockEnd",
    "BlockKind",
    "BlockStart",
    "ContentBlock",
    "DEFAULT_RETRY_CODES",
    "Finish",
    "FinishReason",
    "FrozenMessages",
    "GenerateRequest",
    "Generation",
    "ImageBlock",
    "LlmAdapter",
    "LlmCallConfig",
    "LlmError",
    "LlmFailure",
    "LlmService",
    "LlmStreamCall",
    "Message",
    "MessageSource",
    "NoAdapterError",
    "OfflineAdapter",
    "OfflineProvider",
    "OpenAiAdapter",
    "OpenAiProvider",
    "ReasoningBlock",
    "ReasoningDelta",
    "RetryPolicy",
    "Role",
    "ScriptExhaustedError",
    "ScriptedAdapter",
    "ScriptedProvider",
    "ScriptedResponse",
    "SseEvent",
    "SseParser",
    "StreamChunk",
    "TextBlock",
    "TextDelta",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResult",
    "ToolResultBlock",
    "ToolSchema",
    "Usage",
    "UsageChunk",
    "encode_request",
    "http_failure",
    "message_text",
}


def test_all_is_pinned_and_sorted() -> None:
    assert set(llm.__all__) == EXPECTED

    # isort-style order (ruff RUF022): CONSTANTS, then Classes, then functions
    def key(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(llm.__all__) == sorted(llm.__all__, key=key)
    for name in llm.__all__:
        assert hasattr(llm, name), name


def test_testing_reexports_the_llm_fakes() -> None:
    for name in (
        "ScriptedAdapter",
        "text",
        "tool_call",
        "max_tokens",
        "error",
        "hang",
        "open_fake_openai_server",
        "sse_reply",
    ):
        assert name in testing.__all__
    assert testing.ScriptedAdapter is llm.ScriptedAdapter


def test_stateful_classes_are_final() -> None:
    for cls in (
        llm.BlockAssembler,
        llm.LlmService,
        llm.LlmStreamCall,
        llm.OfflineAdapter,
        llm.OfflineProvider,
        llm.OpenAiAdapter,
        llm.OpenAiProvider,
        llm.ScriptedAdapter,
        llm.ScriptedProvider,
        llm.SseParser,
        testing.FakeOpenAiServer,
        testing.RecordedRequest,
    ):
        assert getattr(cls, "__final__", False), cls


def test_errors_derive_from_the_base_and_builtins() -> None:
    from trio_agent.errors import TrioAgentError

    assert issubclass(llm.NoAdapterError, llm.LlmError) and issubclass(
        llm.NoAdapterError, LookupError
    )
    assert issubclass(llm.ScriptExhaustedError, llm.LlmError) and issubclass(
        llm.ScriptExhaustedError, LookupError
    )
    assert issubclass(llm.AdapterConflictError, TrioAgentError) and issubclass(
        llm.AdapterConflictError, ValueError
    )


def test_adapters_satisfy_the_protocol() -> None:
    assert isinstance(llm.ScriptedAdapter(), llm.LlmAdapter)
    assert isinstance(llm.OfflineAdapter(), llm.LlmAdapter)
    assert typing.get_type_hints(llm.LlmAdapter.stream)
