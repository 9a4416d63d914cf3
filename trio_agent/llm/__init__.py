"""The model layer: message and stream vocabulary, the ``ctx.llm`` service and adapters."""

from ._types import BlockEnd as BlockEnd
from ._types import BlockKind as BlockKind
from ._types import BlockStart as BlockStart
from ._types import ContentBlock as ContentBlock
from ._types import Finish as Finish
from ._types import FinishReason as FinishReason
from ._types import GenerateRequest as GenerateRequest
from ._types import ImageBlock as ImageBlock
from ._types import LlmCallConfig as LlmCallConfig
from ._types import LlmError as LlmError
from ._types import LlmFailure as LlmFailure
from ._types import Message as Message
from ._types import MessageSource as MessageSource
from ._types import ReasoningBlock as ReasoningBlock
from ._types import ReasoningDelta as ReasoningDelta
from ._types import Role as Role
from ._types import StreamChunk as StreamChunk
from ._types import TextBlock as TextBlock
from ._types import TextDelta as TextDelta
from ._types import ToolCallBlock as ToolCallBlock
from ._types import ToolCallDelta as ToolCallDelta
from ._types import ToolResult as ToolResult
from ._types import ToolResultBlock as ToolResultBlock
from ._types import ToolSchema as ToolSchema
from ._types import Usage as Usage
from ._types import UsageChunk as UsageChunk
from ._types import message_text as message_text

__all__ = [
    "BlockEnd",
    "BlockKind",
    "BlockStart",
    "ContentBlock",
    "Finish",
    "FinishReason",
    "GenerateRequest",
    "ImageBlock",
    "LlmCallConfig",
    "LlmError",
    "LlmFailure",
    "Message",
    "MessageSource",
    "ReasoningBlock",
    "ReasoningDelta",
    "Role",
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
    "message_text",
]
