"""The delivery engine's recorder: attempt outcomes written in batches, one transaction each.

An attempt's outcome waits in the book (``DeliveryBook.add_outcome``) until a transaction
writes it: a fan-out's, which takes the outcomes waiting along (``_dispatcher.py``: one commit
for both), or the recorder's own, RECORD_LINGER after the first outcome woke it, or at once
when RECORD_SOON wait. A delivery stays claimed (its lease renewed) until its outcome is
written, so no claim takes it meanwhile; a batch a transaction failed to write is written
again, first. Attempts answered beyond UNRECORDED_MAX wait for the recorder before they send
(:meth:`Recorder.caught_up`), and :meth:`Recorder.settle` waits until the engine holds nothing.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import trio

from ledgerport import queues
from ledgerport.platform import Platform
from ledgerport.storage import StorageError

from ._delivery_book import DeliveryBook
from ._lifecycle import count_switched_off, record_batch
from ._shared import Wakeup

log = logging.getLogger("ledgerport.engine.delivery")

RECORD_LINGER = 0.05
"""Seconds the recorder waits before it writes the outcomes it was woken for. Meanwhile a
fan-out's transaction takes them along (one commit for both); what is left is written in one
transaction for all, not one each. The recorder's transactions, fewer, get less often in the
way of a fan-out waiting for the database (on SQLite, the one writer). An engine asked to
settle, or stopping, writes at once."""
RECORD_BATCH = 128
"""Attempt outcomes written per transaction at most."""
RECORD_SOON = 16
"""Outcomes waiting that end the recorder's linger at once: a batch this big is worth its
transaction now."""
UNRECORDED_MAX = 32
"""Answered attempts whose outcome is not written yet, at most: beyond it, attempts wait for
the recorder before they send. What a crash can send twice is the attempts in flight and these;
a database slower than the receivers slows the sending instead of piling answers up in
memory."""

Batch = list[tuple[str, str, queues.AttemptOutcome]]
"""Outcomes a transaction writes: (app id, webhook id, outcome) each."""


class Recorder:
    """Writes the outcomes waiting in ``book`` (see the module docstring); wakes the claimer
    (``claim_wake``) when what it wrote let room go or set a next due time."""

    def __init__(
        self,
        platform: Platform,
        book: DeliveryBook[Any, queues.AttemptOutcome],
        claim_wake: Wakeup,
        *,
        linger: float = RECORD_LINGER,
    ) -> None:
        self._platform = platform
        self._book = book
        self._claim_wake = claim_wake
        self._linger = linger
        self._wake = Wakeup()
        """Set when an outcome waits."""
        self._now = Wakeup()
        """Set to end the linger at once."""
        self._recorded = trio.Event()
        """Set (and replaced) each time a recording transaction ends."""
        self._settled = trio.Event()
        self._counted: dict[tuple[str, str], Any] = {}
        """The deliveries metric's child of each (outcome, type) counted so far: its labels
        are looked up once, not per attempt (a lock and a validation each time)."""

    def add(self, delivery: queues.ClaimedDelivery, outcome: queues.AttemptOutcome) -> None:
        """An attempt's outcome (its fan-out committed, or it had none) to write."""
        key = (outcome.status, delivery.type)
        counted = self._counted.get(key)
        if counted is None:
            counted = self._counted[key] = self._platform.metrics.deliveries.labels(*key)
        counted.inc()
        self._book.add_outcome(delivery.app_id, delivery.webhook_id, outcome)
        self._wake.set()
        if self._book.outcomes_waiting >= RECORD_SOON:
            self._now.set()

    async def caught_up(self) -> None:
        """Return once fewer than UNRECORDED_MAX outcomes are unwritten (an attempt about to
        send waits here), writing at once meanwhile."""
        while self._book.unwritten >= UNRECORDED_MAX:
            self._now.set()
            await self._recorded.wait()

    async def run(self) -> None:
        """The recorder's loop: woken by an outcome, it lingers, then writes all that waits."""
        while True:
            await self._wake.wait(math.inf)
            await self._now.wait(self._linger)
            while self._book.outcomes_waiting:
                if not await self.write_some():
                    await trio.sleep(1.0)

    async def write_some(self) -> bool:
        """Write one batch of outcomes; False when the store failed (they stay to be written)."""
        batch = self._book.take_outcomes(RECORD_BATCH)
        p = self._platform
        try:
            async with p.store.transaction(background=True) as tx:
                switched_off = await record_batch(
                    tx, batch, now=p.now(), disable_after=p.config.webhook_disable_after
                )
        except BaseException as exc:
            self.not_written(batch)
            if isinstance(exc, StorageError):
                log.warning("delivery engine: recording outcomes: %s", exc)
                return False
            raise
        count_switched_off(p.metrics, switched_off)
        self.written(batch)
        return True

    async def write_all(self) -> None:
        """Write what waits, until done or the store fails (the engine stops)."""
        while self._book.outcomes_waiting and await self.write_some():
            pass

    def not_written(self, batch: Batch) -> None:
        """A transaction that took ``batch`` failed: it is written again, first."""
        self._book.outcomes_not_written(batch)
        if batch:
            self._wake.set()
        self._recording_ended()

    def written(self, batch: Batch) -> None:
        """A transaction wrote ``batch``."""
        self._book.outcomes_written(batch)
        if self._book.short or any(_sets_a_due_time(outcome) for *_, outcome in batch):
            self._claim_wake.set()  # room again, or a next due time that may be sooner
        self._recording_ended()
        self.check_settled()

    def _recording_ended(self) -> None:
        """Wake the attempts waiting for outcomes to be written (UNRECORDED_MAX)."""
        self._recorded.set()
        self._recorded = trio.Event()

    def check_settled(self) -> None:
        """Wake :meth:`settle` when the engine holds nothing any more."""
        if self._book.settled:
            self._settled.set()

    async def settle(self) -> None:
        """Wait until the engine holds nothing: every delivery it claimed was attempted (or
        refused) and its outcome written."""
        while not self._book.settled:
            self._now.set()
            self._settled = trio.Event()
            await self._settled.wait()


def _sets_a_due_time(outcome: queues.AttemptOutcome) -> bool:
    """Whether writing ``outcome`` made a delivery due: its own next attempt, or, when it ended
    a delivery ordered by record, the next one about that record (due at once)."""
    if outcome.next_attempt_at is not None:
        return True
    return outcome.ordered and outcome.status in ("delivered", "failed")
