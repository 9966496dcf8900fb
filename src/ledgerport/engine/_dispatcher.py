"""The delivery engine's dispatcher: committed events fanned out into deliveries.

Woken by every commit that records events (in process on SQLite, LISTEN/NOTIFY on PostgreSQL)
and by a slow poll as a safety net, the dispatcher reads a batch of committed events with their
audiences in one statement (``queues.pending_events``) and works their deliveries and runs out
(``queues.plan_fan_out``), within FAN_OUT_ROWS rows. The deliveries the engine has room for
(``DeliveryBook.reserving``) go to their actors at once (``_actors.py``), and their first
attempts start while the transaction writes the deliveries and commits: their outcomes wait for
that commit (``DeliveryBook.attempt_ended``), and are dropped if it fails (then nothing of the
fan-out exists, and the events are fanned out again, under the same delivery ids). The outcomes
waiting for the recorder ride along in the fan-out's transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import trio

from ledgerport import queues

from ._actors import Actors, Ended
from ._delivery_book import DeliveryBook, FanOut
from ._lifecycle import count_switched_off, record_batch
from ._recorder import RECORD_BATCH, Batch, Recorder
from ._send_check import Planned
from ._shared import DeliveryState, Wakeup, guarded

DISPATCH_BATCH = 200
"""Events fanned out per transaction at most."""
FAN_OUT_ROWS = 512
"""Deliveries and runs a fan-out's transaction creates at most (whole events: at least one):
on SQLite every transaction holds the one writer, and an event reaching many webhooks must
not hold it for long."""


class Dispatcher:
    """Fans committed events out (see the module docstring); ``publish``: the engine's fairness
    figures to the metrics, after each fan-out."""

    def __init__(
        self,
        state: DeliveryState,
        book: DeliveryBook[Ended, queues.AttemptOutcome],
        actors: Actors,
        recorder: Recorder,
        *,
        publish: Callable[[], None],
    ) -> None:
        self._state = state
        self._book = book
        self._actors = actors
        self._recorder = recorder
        self._publish = publish
        self.wake = Wakeup()
        """Wakes the dispatcher: events were committed."""
        self._more = False
        """The last fan-out left committed events for the next one (a batch's worth, or its
        rows' budget)."""

    async def run(self) -> None:
        """The dispatch loop, until the engine drains."""
        state = self._state
        while not state.draining:
            # First what was committed before the engine started (or while it slept).
            self._more = True
            while self._more and not state.draining:
                if not await guarded(state.platform, self.dispatch_once):
                    break
            if not state.draining:
                await self.wake.wait(state.poll)

    async def dispatch_once(self) -> int:
        """Fan out one batch of committed events; answers how many events it took."""
        state = self._state
        p = state.platform
        book = self._book
        fan_out = book.fan_out_began()
        outcomes: Batch = []
        switched_off: Counter[str] = Counter()
        with book.reserving() as reservation:
            try:
                async with p.store.transaction(background=True) as tx:
                    checked_at, generation = trio.current_time(), state.generation
                    pending = await queues.pending_events(tx, DISPATCH_BATCH)
                    book.note_developers(
                        (hook["app_id"], hook["developer"]) for hook in pending.webhooks
                    )
                    now = p.now()
                    fanned = queues.plan_fan_out(
                        pending,
                        keyring=p.keyring,
                        now=now,
                        lease=state.lease,
                        lease_until=now + state.lease_seconds,
                        take=reservation.take,
                        max_rows=FAN_OUT_ROWS,
                    )
                    event_times = {event.id: event.created for event in pending.events}
                    for delivery in fanned.claimed:
                        book.awaits_commit(delivery.id, fan_out)
                        plan = fanned.plans[delivery.webhook_id]
                        self._actors.hand_over(
                            delivery,
                            Planned(plan, checked_at, generation),
                            event_times[delivery.event_id or ""],
                        )
                    reservation.handed_over()
                    await queues.write_fan_out(tx, fanned)
                    if fanned.positions and book.outcomes_waiting:
                        # The outcomes waiting for the recorder ride along: one commit for both.
                        outcomes = book.take_outcomes(RECORD_BATCH)
                        switched_off = await record_batch(
                            tx, outcomes, now=now, disable_after=p.config.webhook_disable_after
                        )
            except BaseException:
                self._recorder.not_written(outcomes)
                self._fan_out_ended(fan_out, committed=False)
                raise
        count_switched_off(p.metrics, switched_off)
        self._recorder.written(outcomes)
        self._fan_out_ended(fan_out, committed=True)
        self._more = (
            len(fanned.positions) < len(pending.positions)
            or len(pending.positions) >= DISPATCH_BATCH
        )
        if fanned.queued:
            state.claim_wake.set()
        self._publish()
        return len(fanned.positions)

    def _fan_out_ended(self, fan_out: FanOut[Ended], *, committed: bool) -> None:
        for ended in self._book.fan_out_ended(fan_out, committed=committed):
            self._actors.settle(ended, record=committed)
