"""What the engine's components share: the flag their loops sleep on, the fairness figures
they publish, the guard around a loop's step, and the delivery engine's state.

The delivery engine (``_delivery.py``) is a supervisor over components that each own one thing
(``_dispatcher.py``, ``_claimer.py``, ``_actors.py``, ``_recorder.py``); besides the book
(``_delivery_book.py``), what they all read or set is one :class:`DeliveryState` the
supervisor owns and hands to each. The
function runner (``_functions.py``) sleeps on the same :class:`Wakeup` and publishes its
fairness the same way, and looks for work every POLL seconds by default too.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import trio

from ledgerport.ops import Metrics
from ledgerport.platform import Platform
from ledgerport.storage import StorageError

from ._core import Capped, Refusal

log = logging.getLogger("ledgerport.engine.delivery")

POLL = 5.0
"""The safety net: seconds between looks for work when nothing has woken an engine (the
delivery engine, the function runner)."""


@dataclass
class Wakeup:
    """A flag a waiter sleeps on until something sets it."""

    _event: trio.Event = field(default_factory=trio.Event)

    def set(self) -> None:
        self._event.set()

    async def wait(self, at_most: float) -> None:
        with trio.move_on_after(max(at_most, 0.0)):
            await self._event.wait()
        self._event = trio.Event()


def publish_fairness(
    metrics: Metrics,
    kind: Literal["delivery", "run"],
    held_back: Counter[Refusal],
    published: dict[Refusal, int],
    developers: Capped[str],
    *,
    waiting: int | None = None,
) -> None:
    """An engine's fairness figures to the metrics: what its book held back since ``published``
    (updated), the busiest developer's share, the developers holding some and, for the
    delivery engine, the developers waiting for room."""
    for refusal, count in held_back.items():
        added = count - published.get(refusal, 0)
        if added:
            metrics.fairness_held_back.labels(kind, refusal.value).inc(added)
            published[refusal] = count
    metrics.fairness_busiest_share.labels(kind).set(developers.busiest() / developers.cap)
    metrics.fairness_tenants_holding.labels(kind).set(developers.holders())
    if waiting is not None:
        metrics.fairness_tenants_waiting.labels(kind).set(waiting)


@dataclass
class DeliveryState:
    """What the delivery engine's components share, owned by the engine (its supervisor)."""

    platform: Platform
    lease: str
    """What the engine's claims hold their lease by: its node's id (``Node``)."""
    lease_seconds: float
    """Seconds a claim holds a delivery (renewed while held)."""
    poll: float
    """The safety net: seconds between looks for work when nothing has woken the engine; and
    how long a delivery given back unattempted waits."""
    claim_wake: Wakeup = field(default_factory=Wakeup)
    """Wakes the claimer: deliveries were queued, room was let go, a next due time came."""
    draining: bool = False
    """Asked to stop (``DeliveryEngine.drain``): no new work is taken, no attempt starts."""
    generation: int = 0
    """Entitlement changes seen (``apps.ENTITLEMENTS_CHANNEL``): a send-time check made before
    the latest one is made again."""


async def guarded(platform: Platform, step: Callable[[], Awaitable[int]]) -> int:
    """A step of one of the delivery engine's loops; a storage failure is logged and counted,
    and the step answers 0 (the loop tries again at its next wake-up)."""
    try:
        count = await step()
    except StorageError as exc:
        log.warning("delivery engine: %s", exc)
        platform.metrics.task_crashes.labels("delivery_engine").inc()
        return 0
    return count
