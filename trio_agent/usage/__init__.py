"""Token accounting: ``ctx.usage`` totals per step, turn and session, and the size of the next
request.

* :class:`UsageService` - the ``ctx.usage`` plugin: ``of(agent_or_session, turn=, step=)``,
  ``report``, ``estimate`` (a :class:`ContextEstimate` against the model's context window),
  ``context_window``.
* :class:`UsageTotals`, :class:`UsageReport`, :class:`ContextEstimate` - the values.
* :func:`tally` - the same totals for a stored log (no live session).
* The character estimator for what no provider reported: :func:`estimate_tokens`,
  :func:`estimate_message_tokens`, :func:`estimate_request_tokens` and its constants.
"""

from ._estimate import CHARS_PER_TOKEN as CHARS_PER_TOKEN
from ._estimate import IMAGE_TOKENS as IMAGE_TOKENS
from ._estimate import MESSAGE_OVERHEAD_TOKENS as MESSAGE_OVERHEAD_TOKENS
from ._estimate import estimate_message_tokens as estimate_message_tokens
from ._estimate import estimate_messages_tokens as estimate_messages_tokens
from ._estimate import estimate_request_tokens as estimate_request_tokens
from ._estimate import estimate_tokens as estimate_tokens
from ._service import UsageService as UsageService
from ._service import tally as tally
from ._types import ContextEstimate as ContextEstimate
from ._types import UsageReport as UsageReport
from ._types import UsageTotals as UsageTotals

__all__ = [
    "CHARS_PER_TOKEN",
    "IMAGE_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "ContextEstimate",
    "UsageReport",
    "UsageService",
    "UsageTotals",
    "estimate_message_tokens",
    "estimate_messages_tokens",
    "estimate_request_tokens",
    "estimate_tokens",
    "tally",
]
