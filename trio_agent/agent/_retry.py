"""The default retry plugin: back off and retry failed model calls within the same step."""

from __future__ import annotations

import logging
import random
from typing import Any

import attrs
import trio

from ..llm import LlmService, RetryPolicy
from ..runtime import Context, Next
from ..session import LlmRetry
from ._events import RequestFailed, Retry

__all__ = ["RetryPlugin"]

logger = logging.getLogger("trio_agent.retry")


class RetryPlugin:
    """Answers ``agent/request-error`` with :class:`Retry` while the provider's policy allows.

    The policy is the one the adapter was registered with (``LlmService.retry_policy(provider)``),
    unless the config gives one for every provider. Before waiting it logs an ``llm/retry``
    session event; the wait happens inside the step, so ``agent.cancel()`` beats a pending retry.
    When the policy gives up it defers to later listeners (``await next()``).
    """

    inject = ("llm",)

    @attrs.frozen
    class Config:
        """``policy`` overrides every provider's own policy; ``seed`` makes jitter reproducible."""

        policy: RetryPolicy | None = None
        seed: int | None = None

    def __init__(self, ctx: Context, config: RetryPlugin.Config) -> None:
        self._llm = ctx.require(LlmService)
        self._policy = config.policy
        self._rng = random.Random(config.seed)
        ctx.on("agent/request-error", self._on_request_error)

    async def _on_request_error(self, event: RequestFailed, next: Next) -> Any:
        policy = self._policy or self._llm.retry_policy(event.config.provider)
        delay = policy.delay_for(event.attempt, event.failure, self._rng)
        if delay is None:
            return await next()
        event.agent.session.append(
            LlmRetry(
                turn=event.turn,
                step=event.step,
                attempt=event.attempt,
                delay=delay,
                failure=event.failure,
            ),
        )
        logger.info(
            "agent %r: %s from %r (attempt %d); retrying in %.2fs",
            event.agent.id,
            event.failure.code,
            event.config.provider,
            event.attempt,
            delay,
        )
        await trio.sleep(delay)
        return Retry()
