"""A deterministic, rule-based model for the demo and air-gapped runs."""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, final

import attrs
import trio

from ..runtime import Context
from ._models import ModelList, to_model_list
from ._playback import Playback, PlaybackStream
from ._scripted import ScriptedResponse, text, tool_call
from ._service import LlmService
from ._types import (
    GenerateRequest,
    Message,
    StreamChunk,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolCallDelta,
    ToolResultBlock,
    Usage,
    message_text,
)

__all__ = ["OfflineAdapter", "OfflineProvider"]

_MAX_LINES = 40
_MAX_CHARS = 2000

_PLEASE = r"(?:please\s+)?"
_ARG = r"(?P<{0}>\"[^\"]+\"|'[^']+'|`[^`]+`|\S+)"


@attrs.frozen
class _Rule:
    tool: str
    pattern: re.Pattern[str]
    strip_punctuation: bool
    arguments: Callable[[re.Match[str]], dict[str, str]]
    intro: Callable[[dict[str, str]], str]
    wish: Callable[[dict[str, str]], str]


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'`":
        return value[1:-1]
    return value


_RULES: tuple[_Rule, ...] = (
    _Rule(
        "list_dir",
        re.compile(
            _PLEASE + r"list\s+(?:the\s+)?files(?:\s+in\s+" + _ARG.format("path") + r")?", re.I
        ),
        True,
        lambda m: {"path": _unquote(m["path"]) if m["path"] else "."},
        lambda a: f"Listing the files in `{a['path']}`.",
        lambda a: f"list the files in `{a['path']}`",
    ),
    _Rule(
        "read_file",
        re.compile(_PLEASE + r"read\s+(?:the\s+)?(?:file\s+)?" + _ARG.format("path"), re.I),
        True,
        lambda m: {"path": _unquote(m["path"])},
        lambda a: f"Reading `{a['path']}`.",
        lambda a: f"read `{a['path']}`",
    ),
    _Rule(
        "write_file",
        re.compile(
            _PLEASE + r"write\s+(?:to\s+)?(?P<path>[^\s:]+):[ \t]?(?P<content>.*)", re.I | re.S
        ),
        False,
        lambda m: {"path": _unquote(m["path"]), "content": m["content"]},
        lambda a: f"Writing {len(a['content'])} characters to `{a['path']}`.",
        lambda a: f"write `{a['path']}`",
    ),
    _Rule(
        "shell",
        re.compile(_PLEASE + r"run\s+(?P<command>\S.*)", re.I | re.S),
        False,
        lambda m: {"command": _unquote(m["command"])},
        lambda a: f"Running `{a['command']}`.",
        lambda a: f"run `{a['command']}`",
    ),
    _Rule(
        "glob",
        re.compile(
            _PLEASE + r"find\s+(?:files\s+)?(?:matching\s+)?" + _ARG.format("pattern"), re.I
        ),
        True,
        lambda m: {"pattern": _unquote(m["pattern"])},
        lambda a: f"Finding files matching `{a['pattern']}`.",
        lambda a: f"find files matching `{a['pattern']}`",
    ),
)

_CAPABILITIES = {
    "list_dir": 'list files ("list files" or "list files in DIR")',
    "read_file": 'read a file ("read PATH")',
    "write_file": 'write a file ("write PATH: TEXT")',
    "shell": 'run a command ("run CMD")',
    "glob": 'find files ("find PATTERN")',
}
_TRAILING_PUNCTUATION = re.compile(r"(?<=[\w\"'`/)\]])[.!?]+$")
_GREETING = re.compile(r"(?:hi|hello|hey)\b", re.I)
_TOKEN = re.compile(r"\S+\s*|\s+")


def _tokens(value: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(value))


def _clip(value: str) -> str:
    value = value.rstrip("\n")
    if not value.strip():
        return "(no output)"
    lines = value.split("\n")
    suffix = ""
    if len(lines) > _MAX_LINES:
        suffix = f"\n… ({len(lines) - _MAX_LINES} more lines)"
        value = "\n".join(lines[:_MAX_LINES])
    if len(value) > _MAX_CHARS:
        value = value[:_MAX_CHARS].rstrip()
        suffix = "\n… (truncated)"
    return value + suffix


def _fence(value: str) -> str:
    return f"```\n{value}\n```"


def _describe_result(name: str, args: dict[str, Any], result: ToolResultBlock) -> str:
    output = _clip(message_text(result.content))
    if result.is_error:
        return f"The `{name or 'unknown'}` tool failed:\n{_fence(output)}"
    if name == "list_dir":
        return f"The directory `{args.get('path', '.')}` contains:\n{_fence(output)}"
    if name == "read_file":
        return f"Here is `{args.get('path', '?')}`:\n{_fence(output)}"
    if name == "write_file":
        return f"I wrote `{args.get('path', '?')}`. The tool said: {output}"
    if name == "shell":
        return f"`{args.get('command', '?')}` printed:\n{_fence(output)}"
    if name == "glob":
        return f"Files matching `{args.get('pattern', '?')}`:\n{_fence(output)}"
    return f"The `{name or 'unknown'}` tool returned:\n{_fence(output)}"


def _is_tool_result(message: Message) -> bool:
    return message.role == "user" and any(isinstance(b, ToolResultBlock) for b in message.content)


def _estimate_tokens(request: GenerateRequest) -> int:
    chars = len(request.system or "")
    for message in request.messages:
        for block in message.content:
            if isinstance(block, TextBlock):
                chars += len(block.text)
            elif isinstance(block, ToolCallBlock):
                chars += len(block.name) + len(block.arguments)
            elif isinstance(block, ToolResultBlock):
                chars += len(message_text(block.content))
    return max(1, math.ceil(chars / 4))


@final
@attrs.define(eq=False)
class OfflineAdapter:
    """A deterministic rule-based model: no network, same answer for the same conversation.

    It reads the **last message** of the request:

    * **A tool result** (the user message carrying a ``ToolResultBlock``): it answers in plain
      text about every trailing tool result, quoting the output (at most 40 lines / 2000
      characters, then "… (N more lines)" / "… (truncated)"), e.g. "Here is `a.txt`:" and
      the file in a fenced block; a failed call is reported as "The `tool` tool failed:".
    * **A user message** whose text (trimmed; a leading "please" is allowed; matching is
      case-insensitive; a trailing ``.``/``!``/``?`` after a path is ignored) is one of:

      ===========================  ===============  ===========================
      request                      tool called      arguments
      ===========================  ===============  ===========================
      ``list files``               ``list_dir``     ``{"path": "."}``
      ``list files in DIR``        ``list_dir``     ``{"path": DIR}``
      ``read PATH``                ``read_file``    ``{"path": PATH}``
      ``write PATH: TEXT``         ``write_file``   ``{"path": PATH, "content": TEXT}``
      ``run CMD``                  ``shell``        ``{"command": CMD}``
      ``find PATTERN``             ``glob``         ``{"pattern": PATTERN}``
      ===========================  ===============  ===========================

      ("list the files in", "read the file", "write to", "find files matching" work too;
      PATH/DIR/PATTERN may be quoted with ``"``, ``'`` or backticks; the PATH of ``write``
      has no spaces or colons and TEXT is everything after the colon, newlines included;
      CMD is everything after "run ", backticks around it removed.) It says what it is about
      to do in one sentence, then calls the tool - only if a tool of that name is offered in
      ``request.tools``; otherwise it says it understood but the tool is not available. Tool
      call ids are ``offline-<n>``, counting the calls in the conversation.
    * **Anything else**: a plain answer that quotes what it got and lists what it can do with
      the tools offered (a greeting - "hi", "hello", "hey" - gets a greeting back).

    Answers stream one word per chunk, ``delay`` seconds apart (default 0.01; 0 means just a
    checkpoint per chunk), followed by a plausible :class:`Usage` (about four characters per
    token) and the finish (``tool-calls`` or ``stop``).
    """

    #: Its stream runs no background task: ``ctx.llm`` reads it in the caller's task (#17).
    streams_inline: ClassVar[bool] = True
    name: str = "offline"
    delay: float = 0.01

    def respond(self, request: GenerateRequest) -> ScriptedResponse:
        """The response this model gives to ``request`` (what :meth:`stream` plays)."""
        response = self._decide(request)
        output = sum(1 for c in response.chunks() if isinstance(c, TextDelta | ToolCallDelta))
        return response.with_usage(Usage(_estimate_tokens(request), max(output, 1)))

    def stream(
        self, request: GenerateRequest
    ) -> contextlib.AbstractAsyncContextManager[trio.abc.ReceiveChannel[StreamChunk]]:
        """Stream :meth:`respond`'s answer token by token."""
        return PlaybackStream(self._play, request)

    def _play(self, request: GenerateRequest) -> Playback:
        return Playback(self.respond(request).chunks(), delay=self.delay)

    def _decide(self, request: GenerateRequest) -> ScriptedResponse:
        messages = request.messages
        if messages and _is_tool_result(messages[-1]):
            return self._summarise(messages)
        said = ""
        for message in reversed(messages):
            if message.role == "user":
                said = message.text
                break
        offered = {t.name for t in request.tools}
        stripped = said.strip()
        for rule in _RULES:
            candidate = (
                _TRAILING_PUNCTUATION.sub("", stripped) if rule.strip_punctuation else stripped
            )
            match = rule.pattern.fullmatch(candidate)
            if match is None:
                continue
            args = rule.arguments(match)
            if rule.tool not in offered:
                return text(
                    *_tokens(
                        f"I understood that you want me to {rule.wish(args)}, but the "
                        f"`{rule.tool}` tool is not available to me here."
                    )
                )
            calls = sum(len(m.tool_calls) for m in messages)
            arguments = json.dumps(args)
            return text(*_tokens(rule.intro(args))) + tool_call(
                f"offline-{calls + 1}", rule.tool, arguments, chunks=min(3, len(arguments))
            )
        return text(*_tokens(self._plain(stripped, offered)))

    @staticmethod
    def _plain(said: str, offered: set[str]) -> str:
        abilities = [desc for tool, desc in _CAPABILITIES.items() if tool in offered]
        if abilities:
            can = "I can " + ", ".join(abilities[:-1])
            can = (can + " or " + abilities[-1]) if len(abilities) > 1 else "I can " + abilities[0]
            can += "."
        else:
            can = "No tools are available to me here, so I can only answer in plain text."
        if not said:
            return f"I am the offline model. {can}"
        if _GREETING.match(said):
            return f"Hello! I am the offline model. {can}"
        shown = said if len(said) <= 200 else said[:197] + "..."
        return f'I am the offline model and I did not understand "{shown}". {can}'

    @staticmethod
    def _summarise(messages: Sequence[Message]) -> ScriptedResponse:
        calls: dict[str, ToolCallBlock] = {}
        for message in messages:
            for call in message.tool_calls:
                calls[call.id] = call
        results: list[ToolResultBlock] = []
        for message in reversed(messages):
            if not _is_tool_result(message):
                break
            results[:0] = [b for b in message.content if isinstance(b, ToolResultBlock)]
        parts: list[str] = []
        for result in results:
            found = calls.get(result.tool_call_id)
            name = found.name if found else ""
            try:
                parsed = json.loads(found.arguments) if found else {}
            except ValueError:
                parsed = {}
            args = parsed if isinstance(parsed, dict) else {}
            parts.append(_describe_result(name, args, result))
        return text(*_tokens("\n\n".join(parts)))


@final
class OfflineProvider:
    """Plugin: register an :class:`OfflineAdapter` with ``ctx.llm``.

    Example config (YAML, one ``llm.providers`` entry): ``{name: offline, type: offline}``.
    """

    inject = ("llm",)

    @attrs.frozen
    class Config:
        """Adapter name, per-token delay in seconds, and the advisory model names (the first
        is the default model of agents on this provider)."""

        #: The ``type`` tag of this provider in ``trio-agent.yml``.
        type: ClassVar[str] = "offline"

        name: str = "offline"
        delay: float = attrs.field(default=0.01, validator=attrs.validators.ge(0))
        #: Names (the first is the default model) or ``{name, context_window}`` entries.
        models: ModelList = attrs.field(factory=ModelList, converter=to_model_list)

    def __init__(self, ctx: Context, config: OfflineProvider.Config) -> None:
        self.adapter = OfflineAdapter(name=config.name, delay=config.delay)
        ctx.require(LlmService).register(self.adapter, models=config.models)
