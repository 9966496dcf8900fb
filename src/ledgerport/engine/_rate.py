"""Endpoints' rate limits in the engine: before an attempt of an endpoint with a ``rateLimit``
starts, it takes one of the attempts that second allows, from the budget every process shares
(``queues.take_sends``).

A process takes a second's units in small batches (as many as attempts wait for them here, at
most the limit) and keeps what it took for that second only, so the store is asked about once a
second per busy endpoint, not once an attempt; what a process took and did not use is lost
with the second, which can only leave the receiver fewer attempts than its limit, never more.
When a second's units are gone, attempts wait for the next second. Endpoints without a limit
never come here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import trio

from ledgerport import queues
from ledgerport.ops import Metrics
from ledgerport.storage import StorageError, Store

log = logging.getLogger("ledgerport.engine.rate")


@dataclass
class _Kept:
    second: int
    units: int
    lock: trio.Lock
    waiting: int = 0


class SendRate:
    """Units of endpoints' per-second budgets taken by this process."""

    def __init__(self, store: Store, now: Callable[[], float], metrics: Metrics) -> None:
        self._store = store
        self._now = now
        self._metrics = metrics
        self._kept: dict[str, _Kept] = {}

    async def take(self, webhook_id: str, limit: int) -> int:
        """Wait until an attempt of ``webhook_id`` may start under ``limit`` a second; answers
        the second its unit is of."""
        kept = self._kept.get(webhook_id)
        if kept is None:
            kept = self._kept[webhook_id] = _Kept(-1, 0, trio.Lock())
        kept.waiting += 1
        try:
            async with kept.lock:
                while True:
                    now = self._now()
                    second = math.floor(now)
                    if kept.second != second:
                        kept.second, kept.units = second, 0
                    if kept.units == 0:
                        kept.units = await self._granted(webhook_id, second, kept.waiting, limit)
                        if math.floor(self._now()) != second:
                            # Granted for a second that ended while the store answered: spent
                            # now, they would start attempts in the next one beyond its limit.
                            kept.units = 0
                            continue
                    if kept.units > 0:
                        kept.units -= 1
                        return second
                    self._metrics.webhook_rate_limited.inc()
                    await trio.sleep(max(second + 1 - self._now(), 0.001))
        finally:
            kept.waiting -= 1
            if not kept.waiting and not kept.lock.locked():
                self._kept.pop(webhook_id, None)

    async def starting(self, webhook_id: str, limit: int, second: int) -> None:
        """An attempt whose unit is of ``second`` starts now: when that second is over (it
        waited meanwhile for its developer's room or the recorder), it takes a unit of this
        one, so that no second sees more than ``limit`` attempts start."""
        if math.floor(self._now()) != second:
            await self.take(webhook_id, limit)

    async def _granted(self, webhook_id: str, second: int, want: int, limit: int) -> int:
        try:
            async with self._store.transaction(background=True) as tx:
                return await queues.take_sends(
                    tx, webhook_id=webhook_id, second=second, want=min(want, limit), limit=limit
                )
        except StorageError as exc:
            log.warning("delivery engine: rate limit of %s: %s", webhook_id, exc)
            return 0
