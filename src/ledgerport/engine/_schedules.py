"""The ticker of hosted functions' schedules: each due tick becomes one run per ACTIVE
installation, in the run queue the function runner claims from (``queues.run_due_tick``: once
per tick and installation however many processes tick).

Every process ticks (the scheduler starts it, whether or not the process runs functions): a
tick is due at a whole minute, and the ticker looks when the earliest known tick is due and at
least every TICK_POLL seconds (a schedule uploaded meanwhile may be due sooner), so a tick's
runs are queued within about that of it. At start it runs what fell due while nothing ran, once
a function. "Now" is the platform's clock: tests set it and call :meth:`ScheduleTicker.tick_once`.
"""

from __future__ import annotations

import logging

import trio

from ledgerport import queues
from ledgerport.platform import Platform
from ledgerport.storage import StorageError

log = logging.getLogger("ledgerport.engine.schedules")

TICK_POLL = 1.0
"""Seconds between two looks for due ticks at most: how late a tick's runs may be queued."""
TICKS_PER_PASS = 1000
"""Ticks one pass runs at most (one transaction each), so a pass ends however many are due."""


class ScheduleTicker:
    """Runs the due ticks of functions' schedules (see the module docstring)."""

    def __init__(
        self, platform: Platform, *, poll: float = TICK_POLL, per_pass: int = TICKS_PER_PASS
    ) -> None:
        self._platform = platform
        self._poll = poll
        self._per_pass = per_pass

    async def tick_once(self) -> list[queues.ScheduleTick]:
        """Run every tick due now (TICKS_PER_PASS at most), one transaction each; answers
        them."""
        p = self._platform
        ticks: list[queues.ScheduleTick] = []
        for _ in range(self._per_pass):
            async with p.store.transaction(background=True) as tx:
                tick = await queues.run_due_tick(tx, now=p.now())
            if tick is None:
                break
            ticks.append(tick)
            if tick.runs:
                p.metrics.function_schedule_runs.inc(tick.runs)
        return ticks

    async def _until_next(self) -> float:
        """Seconds until the earliest tick not run yet is due, TICK_POLL at most."""
        p = self._platform
        async with p.store.transaction(background=True) as tx:
            due = await queues.next_tick_due_at(tx)
        if due is None:
            return self._poll
        return min(self._poll, max(due - p.now(), 0.0))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            try:
                ticks = await self.tick_once()
                wait = 0.0 if len(ticks) >= self._per_pass else await self._until_next()
            except StorageError as exc:
                log.warning("schedules: %s", exc)
                self._platform.metrics.task_crashes.labels("schedules").inc()
                wait = self._poll
            # The store's times and trio's clock are both in seconds: a tick due within the
            # poll is waited for to the moment.
            await trio.sleep(max(wait, 0.001))
