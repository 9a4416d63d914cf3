"""The model layer: message and stream vocabulary, the ``ctx.llm`` service and adapters."""

from ._adapter import LlmAdapter as LlmAdapter
from ._assembler import BlockAssembler as BlockAssembler
from ._errors import AdapterConflictError as AdapterConflictError
from ._errors import NoAdapterError as NoAdapterError
from ._errors import ScriptExhaustedError as ScriptExhaustedError
from ._models import ModelList as ModelList
from ._models import ModelSpec as ModelSpec
from ._offline import OfflineAdapter as OfflineAdapter
from ._offline import OfflineProvider as OfflineProvider
from ._openai import OpenAiAdapter as OpenAiAdapter
from ._openai import OpenAiProvider as OpenAiProvider
from ._openai import encode_request as encode_request
from ._openai import http_failure as http_failure
from ._retry import DEFAULT_RETRY_CODES as DEFAULT_RETRY_CODES
from ._retry import RetryPolicy as RetryPolicy
from ._scripted import ScriptedAdapter as ScriptedAdapter
from ._scripted import ScriptedProvider as ScriptedProvider
from ._scripted import ScriptedResponse as ScriptedResponse
from ._service import Generation as Generation
from ._service import LlmService as LlmService
from ._service import LlmStreamCall as LlmStreamCall
from ._sse import SseEvent as SseEvent
from ._sse import SseParser as SseParser
from ._types import BlockEnd as BlockEnd
from ._types import BlockKind as BlockKind
from ._types import BlockStart as BlockStart
from ._types import ContentBlock as ContentBlock
from ._types import Finish as Finish
from ._types import FinishReason as FinishReason
from ._types import FrozenMessages as FrozenMessages
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
    "DEFAULT_RETRY_CODES",
    "AdapterConflictError",
    "BlockAssembler",
    "BlockEnd",
    "BlockKind",
    "BlockStart",
    "ContentBlock",
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
    "ModelList",
    "ModelSpec",
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
]
