"""Context compaction: keep a long-running agent under its model's context window.

* :class:`Compaction` - the ``ctx.compaction`` plugin (``agent/pre-step`` threshold,
  ``CONTEXT_WINDOW_EXCEEDED`` recovery, ``await ctx.compaction.compact(agent)``).
* :class:`CompactionResult`, :class:`CompactionFailed`, :class:`CompactionError` - what it
  reports; :data:`Strategy` and :data:`Trigger` - its vocabularies.
* :data:`DEFAULT_PROMPT`, :data:`SUMMARY_HEADING`, :data:`PRUNE_STUB` - the texts it uses.

The events it logs (``compaction/summary``, ``compaction/prune``) and how the history honours
them live in :mod:`trio_agent.session`.
"""

from ._plugin import DEFAULT_PROMPT as DEFAULT_PROMPT
from ._plugin import PRUNE_STUB as PRUNE_STUB
from ._plugin import SUMMARY_HEADING as SUMMARY_HEADING
from ._plugin import Compaction as Compaction
from ._transcript import render_transcript as render_transcript
from ._types import CompactionError as CompactionError
from ._types import CompactionFailed as CompactionFailed
from ._types import CompactionResult as CompactionResult
from ._types import Strategy as Strategy
from ._types import Trigger as Trigger

__all__ = [
    "DEFAULT_PROMPT",
    "PRUNE_STUB",
    "SUMMARY_HEADING",
    "Compaction",
    "CompactionError",
    "CompactionFailed",
    "CompactionResult",
    "Strategy",
    "Trigger",
    "render_transcript",
]
