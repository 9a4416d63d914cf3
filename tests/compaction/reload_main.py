"""The second process of the long-run test: resume a stored session, print its history.

    python reload_main.py DIR SESSION_ID

Prints the JSON form of the resumed agent's ``derive_messages()`` on stdout.
"""

from __future__ import annotations

import json
import sys

import trio

from trio_agent import _serde
from trio_agent.persistence import JsonlPersistence
from trio_agent.testing import open_test_harness


async def main(directory: str, session_id: str) -> str:
    async with open_test_harness(
        persistence=JsonlPersistence, persistence_config=JsonlPersistence.Config(path=directory)
    ) as h:
        handle = await h.ctx.agents.resume(agent_id="a", resume_session_id=session_id)
        async with handle:
            history = tuple(handle.agent.session.derive_messages())
    return json.dumps(_serde.unstructure(history))


if __name__ == "__main__":
    print(trio.run(main, sys.argv[1], sys.argv[2]))
