"""The ``trio-agent`` command.

::

    trio-agent run [-c FILE] [--agent ID] [--resume ID] [--json] PROMPT...
    trio-agent chat [-c FILE] [--agent ID] [--resume ID]
    trio-agent sessions list [-c FILE] [--json]
    trio-agent sessions show ID [-c FILE]
    trio-agent sessions export ID [-c FILE] [--format jsonl|markdown]
    trio-agent plugins [-c FILE] [--json]          (installed and configured plugins)
    trio-agent send SESSION-ID [-c FILE] TEXT...   (queue a prompt: PostgreSQL, docs/postgres.md)
    trio-agent acp [-c FILE] [--agent ID] [--log-level LEVEL]   (see docs/acp.md)

Without ``-c`` it reads ``./trio-agent.yml`` if there is one, else runs on the embedded defaults
(the offline model unless ``DEEPSEEK_API_KEY`` or ``OPENAI_API_KEY`` is set, the built-in tools
confined to the current directory, jsonl sessions under ``.trio-agent/sessions``).

Output: assistant text streams to stdout; tool activity, the session id and notes go to stderr.
Exit status: 0 when the (last) turn completed; 1 otherwise, with ``trio-agent: CODE: message`` on
stderr (``PERSISTENCE`` when the session could not be written); 2 for usage and configuration
errors and for a session another process has open (``SESSION_BUSY``). ``run`` treats Ctrl-C,
SIGTERM and SIGHUP alike: the running turn is cancelled (it ends ``aborted`` and is flushed),
then the status is 130, 143 or 129; ``chat`` does the same for SIGTERM and SIGHUP.
"""

from ._main import main

__all__ = ["main"]
