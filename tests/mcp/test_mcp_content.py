"""MCP results mapped to content blocks; ``isError`` to ``TOOL_ERROR``."""

from __future__ import annotations

import base64

import mcp.types as mcp_types

from trio_agent.ids import CallId
from trio_agent.llm import ImageBlock, TextBlock
from trio_agent.mcp._content import tool_result
from trio_agent.tools import TOOL_ERROR

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()


def result(*content: mcp_types.ContentBlock, **fields: object) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=list(content), **fields)  # type: ignore[arg-type]


def test_text_and_images_become_blocks() -> None:
    mapped = tool_result(
        CallId("c1"),
        result(
            mcp_types.TextContent(type="text", text="hello"),
            mcp_types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        ),
    )
    assert mapped.call_id == "c1" and not mapped.is_error and mapped.code is None
    assert mapped.content == (TextBlock("hello"), ImageBlock("image/png", PNG))


def test_is_error_is_a_tool_error() -> None:
    mapped = tool_result(
        CallId("c1"), result(mcp_types.TextContent(type="text", text="no such file"), is_error=True)
    )
    assert (mapped.is_error, mapped.code, mapped.text) == (True, TOOL_ERROR, "no such file")
    empty = tool_result(CallId("c1"), result(is_error=True))
    assert empty.is_error and "gave no details" in empty.text


def test_resources() -> None:
    mapped = tool_result(
        CallId("c1"),
        result(
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.TextResourceContents(uri="file:///a.txt", text="A"),
            ),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(
                    uri="file:///a.png", blob=PNG, mime_type="image/png"
                ),
            ),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(uri="file:///a.bin", blob=PNG),
            ),
            mcp_types.ResourceLink(
                type="resource_link", uri="file:///b.txt", name="b", description="the b file"
            ),
        ),
    )
    assert mapped.content == (
        TextBlock("[resource file:///a.txt]\nA"),
        ImageBlock("image/png", PNG),
        TextBlock(
            "[resource file:///a.bin (application/octet-stream) omitted: binary content is not "
            "passed to the model]"
        ),
        TextBlock("[resource link file:///b.txt (b): the b file]"),
    )


def test_what_a_model_cannot_take_is_described_not_passed() -> None:
    mapped = tool_result(
        CallId("c1"),
        result(
            mcp_types.AudioContent(type="audio", data=PNG, mime_type="audio/wav"),
            mcp_types.ImageContent(type="image", data="not base64!", mime_type="image/png"),
            mcp_types.ImageContent(type="image", data=PNG, mime_type="text/html"),
        ),
    )
    texts = [block.text for block in mapped.content if isinstance(block, TextBlock)]
    assert len(texts) == 3
    assert "audio" in texts[0] and "not valid base64" in texts[1] and "not an image" in texts[2]


def test_structured_content_alone_becomes_json_text() -> None:
    mapped = tool_result(CallId("c1"), result(structured_content={"answer": 42}))
    assert mapped.content == (TextBlock('{"answer": 42}'),)
