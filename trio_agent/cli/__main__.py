"""``python -m trio_agent.cli``: the ``trio-agent`` command."""

from ._main import main

raise SystemExit(main())
