"""MCP tool results as trio-agent content blocks."""

from __future__ import annotations

import base64
import binascii
import json

import mcp.types as mcp_types

from ..ids import CallId
from ..llm import ContentBlock, ImageBlock, TextBlock, ToolResult
from ..tools import TOOL_ERROR

__all__ = ["tool_result"]


def tool_result(call_id: CallId, result: mcp_types.CallToolResult) -> ToolResult:
    """The :class:`~trio_agent.llm.ToolResult` for an MCP ``CallToolResult``.

    Text becomes text blocks, images image blocks, embedded text resources text blocks headed
    by their URI, embedded image blobs image blocks; audio, other binary resources and resource
    links become a short text saying what was left out. With no content, the structured
    content is the JSON text. ``isError`` makes the result an error with code ``TOOL_ERROR``.
    """
    blocks = tuple(_block(item) for item in result.content)
    if not blocks and result.structured_content is not None:
        blocks = (TextBlock(json.dumps(result.structured_content, ensure_ascii=False)),)
    if result.is_error:
        return ToolResult(
            call_id,
            blocks or (TextBlock("Error: the MCP tool failed and gave no details"),),
            is_error=True,
            code=TOOL_ERROR,
        )
    return ToolResult(call_id, blocks)


def _block(item: mcp_types.ContentBlock) -> ContentBlock:
    if isinstance(item, mcp_types.TextContent):
        return TextBlock(item.text)
    if isinstance(item, mcp_types.ImageContent):
        return _image(item.mime_type, item.data, "image")
    if isinstance(item, mcp_types.AudioContent):
        return TextBlock(f"[audio ({item.mime_type}) omitted: audio is not passed to the model]")
    if isinstance(item, mcp_types.EmbeddedResource):
        resource = item.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return TextBlock(f"[resource {resource.uri}]\n{resource.text}")
        mime = resource.mime_type or "application/octet-stream"
        if mime.startswith("image/"):
            return _image(mime, resource.blob, f"resource {resource.uri}")
        return TextBlock(
            f"[resource {resource.uri} ({mime}) omitted: binary content is not passed to the model]"
        )
    about = f": {item.description}" if item.description else ""
    return TextBlock(f"[resource link {item.uri} ({item.name}){about}]")


def _image(media_type: str, data: str, what: str) -> ContentBlock:
    # The server is untrusted: pass on only what a model API will accept as an image.
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return TextBlock(f"[{what} ({media_type}) omitted: its data is not valid base64]")
    if not media_type.startswith("image/"):
        return TextBlock(f"[{what} omitted: {media_type!r} is not an image type]")
    return ImageBlock(media_type, data)
