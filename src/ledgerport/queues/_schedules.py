"""Ticks of hosted functions' schedules become runs, once per tick and installation however
many processes tick (contract.md, third round: Hosted functions, schedules).

A function with a schedule keeps the tick due next (``functions.schedule_next_at``, set by the
upload: ``apps.put_function``). Running a tick is one transaction (:func:`run_due_tick`): it
takes the function whose tick is the oldest due (on PostgreSQL, of those no other transaction
holds), moves its ``schedule_next_at`` to the first tick after now with a compare-and-set on the
value it read, and, only when that changed the row, queues one run per ACTIVE installation of
the app in the run queue (``_runs.py``), each run's id derived from the function, the business
and the tick. A second process reading the same due tick either skips the row (held), or finds
it moved when its update waits for the first's commit and re-reads it (PostgreSQL), or runs
after the first committed (SQLite's one writer): its update changes nothing and it queues
nothing; were two inserts ever made for one tick, the derived ids would make the second insert
nothing. A crash before the commit leaves the tick due.

The tick a late ticker runs is the latest at or before now, once: a tick missed while nothing
ran is run once at the next start, not once per missed tick. Scheduled runs go through the run
queue as event runs do, so they take the same fair shares (``engine.RunBook``), are checked
just before they start (``run_plan``: an installation ended since the tick fails its run
unrun) and get a token for their business.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ledgerport import apps
from ledgerport.storage import Transaction

from ._bodies import SCHEDULE_TYPE, schedule_body
from ._runs import FUNCTION_RUNS_CHANNEL

_INSERT_SCHEDULED_RUN = (
    "INSERT INTO function_runs (id, function_id, app_id, event_id, business_id, type,"
    " body, status, attempts, created_at, updated_at, next_attempt_at, replay_of)"
    " VALUES ($1, $2, $3, NULL, $4, $5, $6, 'queued', 0, $7, $7, $7, NULL)"
    " ON CONFLICT (id) DO NOTHING"
)


@dataclass(frozen=True)
class ScheduleTick:
    """A tick run: the function's, when (``at``), the runs it queued, and the function's next
    tick (None: its schedule fires no more)."""

    function_id: str
    app_id: str
    at: float
    runs: int
    next_at: float | None


def scheduled_run_id(function_id: str, business_id: str, tick: float) -> str:
    """The id of the run of a function for a business at a tick: derived from the three, so
    that one tick can queue one run per installation only."""
    digest = hashlib.sha256(f"{function_id}/{business_id}/{int(tick)}".encode()).hexdigest()
    return f"run_{digest[:24]}"


async def run_due_tick(tx: Transaction, *, now: float) -> ScheduleTick | None:
    """Run the oldest due tick of any function's schedule (see the module docstring); None
    when no tick is due (that this transaction may take). A tick another process ran meanwhile
    answers as run here with no run and no next tick."""
    row = await tx.fetchrow(
        "SELECT id, app_id, schedule, schedule_next_at FROM functions"
        " WHERE schedule_next_at IS NOT NULL AND schedule_next_at <= $1 AND deleted_at IS NULL"
        f" ORDER BY schedule_next_at LIMIT 1{tx.skip_locked}",
        now,
    )
    if row is None:
        return None
    schedule: str = row["schedule"]
    due = float(row["schedule_next_at"])
    # The latest tick at or before now: everything missed since ``due`` runs once, as that.
    at = max(due, apps.last_tick(schedule, now) or due)
    following = apps.next_tick(schedule, now)
    moved = await tx.execute(
        "UPDATE functions SET schedule_next_at = $1"
        " WHERE id = $2 AND schedule_next_at = $3 AND schedule = $4 AND deleted_at IS NULL",
        following,
        row["id"],
        row["schedule_next_at"],
        schedule,
    )
    if moved != 1:
        return ScheduleTick(row["id"], row["app_id"], at, 0, None)  # another process ran it
    app = await tx.fetchrow("SELECT status, pinned_version FROM apps WHERE id = $1", row["app_id"])
    businesses: list[str] = []
    if app is not None and app["status"] == "ACTIVE":
        # A stopped app's ticks pass without runs: they would all fail unrun.
        businesses = [
            installation["business_id"]
            for installation in await tx.fetch(
                "SELECT business_id FROM installations WHERE app_id = $1 AND state = 'ACTIVE'"
                " ORDER BY business_id",
                row["app_id"],
            )
        ]
    if businesses:
        assert app is not None
        runs = []
        for business_id in businesses:
            run_id = scheduled_run_id(row["id"], business_id, at)
            body = schedule_body(
                run_id,
                business_id=business_id,
                tick=at,
                now=now,
                pinned_version=app["pinned_version"],
            )
            runs.append((run_id, row["id"], row["app_id"], business_id, SCHEDULE_TYPE, body, now))
        await tx.executemany(_INSERT_SCHEDULED_RUN, runs)
        await tx.notify(FUNCTION_RUNS_CHANNEL)
    return ScheduleTick(row["id"], row["app_id"], at, len(businesses), following)


async def next_tick_due_at(tx: Transaction) -> float | None:
    """When the earliest tick of any function's schedule is due (None: no schedule)."""
    value = await tx.fetchval(
        "SELECT MIN(schedule_next_at) FROM functions"
        " WHERE schedule_next_at IS NOT NULL AND deleted_at IS NULL"
    )
    return None if value is None else float(value)
