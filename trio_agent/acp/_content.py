"""ACP content blocks ⇄ trio-agent content blocks.

Prompts from the client become :class:`~trio_agent.llm.TextBlock` / :class:`ImageBlock` values:
text as is; images checked (an ``image/*`` type, valid base64); resource links and embedded
text resources as text that names their URI; an embedded binary resource as an image when it is
one, else as a note. Audio is refused, as ``promptCapabilities.audio`` says.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ..llm import ContentBlock, ImageBlock, TextBlock
from ._errors import RpcError, invalid_params

__all__ = ["acp_content", "prompt_blocks"]

JsonObject = dict[str, Any]


def _bad(path: str, problem: str) -> RpcError:
    return invalid_params("session/prompt", path, problem)


def _string(block: JsonObject, key: str, path: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise _bad(f"{path}.{key}", f"expected a string, got {type(value).__name__}")
    return value


def _image(data: str, mime_type: str, path: str) -> ImageBlock:
    if not mime_type.startswith("image/"):
        raise _bad(f"{path}.mimeType", f"expected an image/* type, got {mime_type!r:.80}")
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(f"{path}.data", "expected base64 text") from None
    return ImageBlock(mime_type, data)


def _block(block: object, path: str) -> ContentBlock:
    if not isinstance(block, dict):
        raise _bad(path, f"expected a content block object, got {type(block).__name__}")
    kind = block.get("type")
    if kind == "text":
        return TextBlock(_string(block, "text", path))
    if kind == "image":
        return _image(_string(block, "data", path), _string(block, "mimeType", path), path)
    if kind == "resource_link":
        uri = _string(block, "uri", path)
        name = _string(block, "name", path)
        return TextBlock(f"[resource: {name}]({uri})")
    if kind == "resource":
        resource = block.get("resource")
        where = f"{path}.resource"
        if not isinstance(resource, dict):
            raise _bad(where, f"expected an object, got {type(resource).__name__}")
        uri = _string(resource, "uri", where)
        if "text" in resource:
            text = _string(resource, "text", where)
            return TextBlock(f'<resource uri="{uri}">\n{text}\n</resource>')
        blob = _string(resource, "blob", where)
        mime_type = resource.get("mimeType")
        if isinstance(mime_type, str) and mime_type.startswith("image/"):
            return _image(blob, mime_type, where)
        shown = mime_type if isinstance(mime_type, str) else "unknown type"
        return TextBlock(
            f"[binary resource {uri} ({shown}, {len(blob)} base64 characters) not shown]"
        )
    if kind == "audio":
        raise _bad(f"{path}.type", "audio is not supported (promptCapabilities.audio is false)")
    raise _bad(
        f"{path}.type",
        f"unknown content type {kind!r:.80}; expected text, image, resource_link or resource",
    )


def prompt_blocks(value: object) -> tuple[ContentBlock, ...]:
    """The content blocks of a ``session/prompt`` ``prompt`` parameter.

    Raises:
        RpcError: ``INVALID_PARAMS``, naming the offending path (``prompt[2].mimeType``).
    """
    if not isinstance(value, list):
        raise _bad("prompt", f"expected an array of content blocks, got {type(value).__name__}")
    if not value:
        raise _bad("prompt", "expected at least one content block")
    return tuple(_block(block, f"prompt[{i}]") for i, block in enumerate(value))


def acp_content(block: ContentBlock) -> JsonObject | None:
    """The ACP content block showing ``block`` to the user (text or image), or None."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        return {"type": "image", "mimeType": block.media_type, "data": block.data}
    return None
