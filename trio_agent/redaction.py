"""One redactor for the process (SPEC §12, issue 15).

:class:`Redactor` is the ``redactor`` service: it knows every secret value the process loaded
(each provider's API key, a database DSN's password, MCP server header and env values -
registered by the plugins that load them, at mount) and masks them in texts the library writes:
``LlmFailure`` fields, exception texts, log records of the ``trio_agent`` loggers, tool results.
Streamed model deltas are not scanned (see docs/design.md, "#15 redaction and step limit").

::

    redactor = ctx.require(Redactor)
    redactor.add(os.environ["MY_TOKEN"])
    safe = redactor.redact(text)

Every value a redactor learns is also remembered for the whole process: :func:`redact_known`
masks them where no context is at hand (the CLI's error line, written after the harness has
closed; an adapter quoting the start of a bad event, which must mask before it cuts). The
masking of every form of given values is :func:`redact_text`.
"""

from __future__ import annotations

import base64
import json
import logging
import urllib.parse
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, final

import attrs

from .runtime import Context, Disposer, Service

if TYPE_CHECKING:
    from .llm import LlmFailure, ToolResult

__all__ = ["REDACTED", "RedactingFilter", "Redactor", "redact_known", "redact_text"]

#: What a secret value is replaced with.
REDACTED = "[redacted]"

#: Values shorter than this are not secrets worth masking (they would mask ordinary words).
_MIN_SECRET = 4
#: Secrets at least this long are masked in their encoded forms too (see :func:`_encoded_forms`);
#: the forms of shorter ones would be short enough to mask ordinary text.
_MIN_ENCODED = 8


def _encoded_forms(secret: str) -> frozenset[str]:
    """The forms a secret takes when a server or a serializer encodes it: url-quoted
    (``%XX`` and ``+`` for spaces, ``/`` quoted or not), JSON-escaped (``/`` as ``\\/`` too;
    an escaped form escaped once more as well), and base64 (standard and url-safe alphabets)
    at each of the three byte alignments it can have inside a longer encoded value (only the
    characters that depend on the secret alone, so ``base64("user:" + secret)`` is caught too).
    Empty for secrets under 8 characters; the secret itself is not included."""
    if len(secret) < _MIN_ENCODED:
        return frozenset()
    raw = secret.encode("utf-8")
    escaped = json.dumps(secret)[1:-1]
    forms = {
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),  # "/" left as it is, the default of most encoders
        urllib.parse.quote_plus(secret, safe=""),
        escaped,
        escaped.replace("/", "\\/"),  # serializers that escape "/" too (PHP, some Java)
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw).decode("ascii")
        # Base64 digit i holds bits 6i..6i+5: keep the digits made of the secret's bits only.
        core = encoded[-(-8 * shift // 6) : 8 * (shift + len(raw)) // 6]
        forms.add(core)
        forms.add(core.replace("+", "-").replace("/", "_"))
    # An escaped form escaped once more (a JSON text inside a JSON string, a repr of one).
    forms.update([form.replace("\\", "\\\\") for form in forms if "\\" in form])
    forms.discard(secret)
    return frozenset(form for form in forms if len(form) >= _MIN_ENCODED)


@final
class _Masks:
    """Secret values and what is masked for them (each value and its encoded forms), kept
    longest first so that a secret inside a longer one never leaves the longer one's rest."""

    __slots__ = ("_forms", "_secrets")

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._secrets: set[str] = set()
        self._forms: tuple[str, ...] = ()
        self.add(*values)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def add(self, *values: str | None) -> list[str]:
        """Register the values worth masking; returns the new ones."""
        new = [
            value
            for value in dict.fromkeys(values)
            if value and len(value) >= _MIN_SECRET and value not in self._secrets
        ]
        if new:
            forms = set(self._forms)
            for value in new:
                self._secrets.add(value)
                forms.add(value)
                forms.update(_encoded_forms(value))
            # One assignment: a reader in another thread sees the old tuple or the new one.
            self._forms = tuple(sorted(forms, key=lambda form: (-len(form), form)))
        return new

    def redact(self, text: str, mask: str = REDACTED) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, mask)
        return text

    def redact_edges(self, text: str, *, start: bool, end: bool) -> str:
        """Mask a piece (4 characters or more) of a form left at a cut edge of ``text``: a
        prefix of one at its end, a suffix of one at its start."""
        if end and (k := self._edge(text, lambda form, k: text.endswith(form[:k]))):
            text = text[:-k] + REDACTED
        if start and (k := self._edge(text, lambda form, k: text.startswith(form[-k:]))):
            text = REDACTED + text[k:]
        return text

    def _edge(self, text: str, matches: Callable[[str, int], bool]) -> int:
        """The length of the longest piece of any form at an edge of ``text``, or 0."""
        best = 0
        for form in self._forms:
            for k in range(min(len(form), len(text)) - 1, max(best, _MIN_SECRET - 1), -1):
                if matches(form, k):
                    best = k
                    break
        return best


#: Every secret any :class:`Redactor` in this process has learned (see :func:`redact_known`).
_PROCESS = _Masks()


def redact_text(text: str, secrets: Iterable[str | None], *, mask: str = REDACTED) -> str:
    """``text`` with every value of ``secrets`` replaced by ``mask`` as a :class:`Redactor`
    masks it: the value itself and, for values of 8 or more characters, its url-quoted,
    JSON-escaped and base64 forms, longest first; empty, ``None`` and values under 4
    characters are ignored.

    Mask a text *before* cutting it: a cut secret (or a cut encoded form of one) is no longer
    recognisable, and a piece of it would be left in the text.
    """
    return _Masks(secrets).redact(text, mask)


def redact_known(text: str, *, cut_start: bool = False, cut_end: bool = False) -> str:
    """``text`` with every secret any :class:`Redactor` in this process has learned (since
    the process started, including redactors whose context has closed) masked in every form.

    For texts written where no redactor is at hand: the CLI's ``trio-agent: CODE: message``
    line (the harness, and with it the redactor, is closed by the time an error reaches it),
    or an adapter quoting the start of a server's event (it masks the whole event, then cuts).

    Mask a text before cutting it when the whole text is at hand. When it is not (a capture
    that kept only a window of a stream), say where the window was cut: ``cut_start`` /
    ``cut_end`` also mask a piece of 4 or more characters of a secret's form left at that edge.
    """
    if cut_start or cut_end:  # first: a shorter secret inside a cut form would break it up
        text = _PROCESS.redact_edges(text, start=cut_start, end=cut_end)
    return _PROCESS.redact(text)


@final
class RedactingFilter(logging.Filter):
    """A logging filter that renders the record and masks the redactor's secrets in the message
    and the exception text; installed on the library's loggers by :class:`Redactor`."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        redactor = self._redactor
        if not redactor._masks:
            return True
        message = record.getMessage()
        clean = redactor.redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redactor.redact(record.exc_text)
            record.exc_info = None  # the formatter would render the raw traceback again
        if record.stack_info:
            record.stack_info = redactor.redact(record.stack_info)
        return True


@final
class Redactor(Service, name="redactor"):
    """The process's secret values and the masking applied wherever text leaves the library.

    ``config`` is an optional iterable of secret values to start with. Mounting installs a
    :class:`RedactingFilter` on every ``trio_agent`` logger (removed when the fiber ends).
    """

    def __init__(self, ctx: Context, config: Iterable[str] | None = None) -> None:
        super().__init__(ctx, config)
        #: What is masked: the secrets and their encoded forms.
        self._masks = _Masks()
        self._filter = RedactingFilter(self)
        self._filtered: list[logging.Logger] = []
        self.add(*(config or ()))

    async def start(self) -> None:
        """Install the logging filter on the library's loggers."""
        self.cover_loggers()

        def remove() -> None:
            for item in self._filtered:
                item.removeFilter(self._filter)
            self._filtered.clear()

        self.ctx.fiber.add(Disposer(remove, label="redactor log filter"))

    def cover_loggers(self) -> None:
        """Install the filter on library loggers created since mount (modules imported late,
        such as the HTTP client's); ``mount_config`` calls it after mounting every plugin."""
        for item in _library_loggers():
            if item not in self._filtered:
                item.addFilter(self._filter)
                self._filtered.append(item)

    @property
    def secrets(self) -> frozenset[str]:
        """The registered secret values (those of at least 4 characters)."""
        return self._masks.secrets

    def add(self, *values: str | None) -> None:
        """Register secret values; empty, ``None`` and very short values are ignored. A value
        is masked in its encoded forms too (a server may echo the key base64-encoded), and is
        remembered for the process (:func:`redact_known`)."""
        _PROCESS.add(*self._masks.add(*values))

    def redact(self, text: str) -> str:
        """``text`` with every registered secret (and encoded form of one) replaced by
        :data:`REDACTED`."""
        return self._masks.redact(text)

    def redact_failure(self, failure: LlmFailure) -> LlmFailure:
        """``failure`` with every text field (message, request id, ...) redacted."""
        if not self._masks:
            return failure
        changes: dict[str, Any] = {
            field.name: self.redact(value)
            for field in attrs.fields(type(failure))
            if isinstance(value := getattr(failure, field.name), str)
        }
        return attrs.evolve(failure, **changes)

    def redact_result(self, result: ToolResult) -> ToolResult:
        """``result`` with the secrets masked in its text blocks (shell output included)."""
        if not self._masks:
            return result
        from .llm import TextBlock

        content = tuple(
            attrs.evolve(block, text=self.redact(block.text))
            if isinstance(block, TextBlock)
            else block
            for block in result.content
        )
        return attrs.evolve(result, content=content)

    def redact_value(self, value: Any) -> Any:
        """``value`` (a string, or JSON-like lists, tuples and dicts of them) redacted."""
        if not self._masks:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_value(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self.redact_value(item) for item in value)
        if isinstance(value, dict):
            return {self.redact_value(k): self.redact_value(v) for k, v in value.items()}
        return value


#: The loggers the redactor filters: the library's, and the HTTP client's (its DEBUG records
#: carry response headers, which a hostile server can fill with the key).
_LOGGER_ROOTS = ("trio_agent", "httpx", "httpcore")


def _library_loggers() -> list[logging.Logger]:
    manager = logging.root.manager
    names = {
        name
        for name, item in manager.loggerDict.items()
        if isinstance(item, logging.Logger)
        and any(name == root or name.startswith(root + ".") for root in _LOGGER_ROOTS)
    }
    names.update(_LOGGER_ROOTS)
    return [logging.getLogger(name) for name in sorted(names)]
