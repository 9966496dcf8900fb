"""A hosted function's health, as the console shows it first (as an endpoint's ``health``,
``apps/_endpoint_health.py``): kept as runs end, in the transaction that records them
(:func:`record_health`, called by ``record_runs``), never counted by scanning the runs.

What a recorded end says of its function:

- a run that **succeeded** or **failed** for good ended: it counts in its hour
  (``function_health_hours``: runs succeeded and failed per function and hour) and is the
  function's last run when it ended after the one kept;
- a run that failed for good, or an attempt that failed and goes again (``retrying`` with a
  duration: the handler ran, or its worker died), has an error: the function's last error,
  with when and the run's id, when it is newer than the one kept;
- a run given back unattempted (the service stopped: no duration) says nothing of the function.

A run refused by its check just before it started (``not run: ...``) failed for good and
counts as failed. The last 24 hours are the newest 24 hours' counts, as for endpoints: the
current hour and the 23 before it. An error is kept to its first FUNCTION_HEALTH_ERROR_CHARS
characters (an ellipsis says it goes on): the run's own page shows it whole while the run is
kept.

:func:`function_health` answers every function of an app with its state, schedule, counts,
last run and last error in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ledgerport.apps import HostedFunction, health_window_start, hour_of
from ledgerport.storage import Reader, Transaction, placeholders

FUNCTION_HEALTH_ERROR_CHARS = 300
"""Characters of a function's last error its health keeps (as many as the console's list of
runs shows of an error)."""
EndedStatus = Literal["succeeded", "failed"]


@dataclass(frozen=True)
class LastRun:
    """The last run of a function that ended: its id, when it ended, and how."""

    run_id: str
    at: float
    status: EndedStatus


@dataclass(frozen=True)
class LastError:
    """The last error of a function's runs: its message (cut to FUNCTION_HEALTH_ERROR_CHARS,
    ending in an ellipsis when it was), when, and the run that had it."""

    message: str
    at: float
    run_id: str


@dataclass(frozen=True)
class FunctionHealth:
    """A function as the console's list shows it first: its configuration (schedule and next
    tick included), whether it runs, and its health."""

    function: HostedFunction
    stopped: str | None
    """Why none of its runs runs now: ``"app suspended"`` or ``"app deactivated"`` (its queued
    runs fail unrun, its ticks pass without runs); None while it runs. A function has no
    switch of its own: it runs while its app is ACTIVE."""
    runs_last_24h: int
    """Runs ended (succeeded or failed for good) in the last 24 hours."""
    failed_last_24h: int
    """Of those, the runs that failed for good."""
    last_run: LastRun | None
    last_error: LastError | None

    @property
    def schedule(self) -> str | None:
        return self.function.schedule

    @property
    def next_run_at(self) -> float | None:
        """The tick its schedule is due at next (None: no schedule)."""
        return self.function.next_run_at


@dataclass(frozen=True)
class RunHealth:
    """What one recorded end of a run says of its function (see the module docstring)."""

    function_id: str
    run_id: str
    at: float
    status: str
    error: str | None
    attempted: bool
    """Whether an attempt was made (the handler was called, or its worker died under it)."""

    @property
    def ended(self) -> EndedStatus | None:
        if self.status == "succeeded":
            return "succeeded"
        if self.status == "failed":
            return "failed"
        return None

    @property
    def erred(self) -> bool:
        return self.ended == "failed" or (self.attempted and self.error is not None)


def _kept_error(error: str | None) -> str:
    message = error or "failed"
    if len(message) > FUNCTION_HEALTH_ERROR_CHARS:
        return message[:FUNCTION_HEALTH_ERROR_CHARS] + "\u2026"
    return message


_HEALTH_COLUMNS = (
    "function_id, last_run_id, last_run_at, last_run_status, last_error, last_error_at,"
    " last_error_run_id"
)
_NEWER_RUN = (
    "EXCLUDED.last_run_at IS NOT NULL"
    " AND (h.last_run_at IS NULL OR EXCLUDED.last_run_at >= h.last_run_at)"
)
_NEWER_ERROR = (
    "EXCLUDED.last_error_at IS NOT NULL"
    " AND (h.last_error_at IS NULL OR EXCLUDED.last_error_at >= h.last_error_at)"
)
_UPSERT_HEALTH = " ON CONFLICT (function_id) DO UPDATE SET" + ",".join(
    f" {column} = CASE WHEN {newer} THEN EXCLUDED.{column} ELSE h.{column} END"
    for newer, columns in (
        (_NEWER_RUN, ("last_run_id", "last_run_status", "last_run_at")),
        (_NEWER_ERROR, ("last_error", "last_error_run_id", "last_error_at")),
    )
    for column in columns
)
"""A function's health row, its last run and its last error each replaced by the one upserted
when that is newer (or as new: the later recorded wins); every condition reads the row as it
was."""
_UPSERT_HOURS = (
    " ON CONFLICT (function_id, hour) DO UPDATE"
    " SET succeeded = c.succeeded + EXCLUDED.succeeded, failed = c.failed + EXCLUDED.failed"
)
_RECORD_POSTGRES = (
    "WITH health AS (INSERT INTO function_health AS h"
    f" ({_HEALTH_COLUMNS}) SELECT * FROM unnest($1::text[], $2::text[], $3::float8[],"
    " $4::text[], $5::text[], $6::float8[], $7::text[])"
    f"{_UPSERT_HEALTH})"
    " INSERT INTO function_health_hours AS c (function_id, hour, succeeded, failed)"
    " SELECT * FROM unnest($8::text[], $9::bigint[], $10::int[], $11::int[])"
    f"{_UPSERT_HOURS}"
)
"""The health rows and the hourly counts on PostgreSQL in one statement: the rows' upsert in the
``WITH`` of the counts' (a data-modifying ``WITH`` runs to its end, read or not)."""


def _summed(
    ends: Sequence[RunHealth],
) -> tuple[list[tuple[object, ...]], list[tuple[str, int, int, int]]]:
    """The health rows (one a function: its newest end and its newest error of ``ends``) and
    the hourly counts (one a function and hour), in the order of their keys: a statement
    upserts a row once at most, and every transaction locks them in that order."""
    newest_end: dict[str, RunHealth] = {}
    newest_error: dict[str, RunHealth] = {}
    hours: dict[tuple[str, int], tuple[int, int]] = {}
    for end in ends:
        key = end.function_id
        if end.ended is not None:
            before = newest_end.get(key)
            if before is None or end.at >= before.at:
                newest_end[key] = end
            succeeded, failed = hours.get((key, hour_of(end.at)), (0, 0))
            hours[key, hour_of(end.at)] = (
                succeeded + (end.ended == "succeeded"),
                failed + (end.ended == "failed"),
            )
        if end.erred:
            before = newest_error.get(key)
            if before is None or end.at >= before.at:
                newest_error[key] = end
    rows: list[tuple[object, ...]] = []
    for key in sorted(newest_end.keys() | newest_error.keys()):
        run = newest_end.get(key)
        error = newest_error.get(key)
        rows.append(
            (
                key,
                None if run is None else run.run_id,
                None if run is None else run.at,
                None if run is None else run.ended,
                None if error is None else _kept_error(error.error),
                None if error is None else error.at,
                None if error is None else error.run_id,
            )
        )
    counts = [(key[0], key[1], *added) for key, added in sorted(hours.items())]
    return rows, counts


async def record_health(tx: Transaction, ends: Sequence[RunHealth]) -> None:
    """Apply recorded ends of runs to their functions' health: one statement on PostgreSQL, two
    on SQLite, whatever their number."""
    rows, counts = _summed(ends)
    if not rows:
        return
    if tx.kind == "postgresql":
        await tx.execute(
            _RECORD_POSTGRES,
            *[list(column) for column in zip(*rows, strict=True)],
            *([list(column) for column in zip(*counts, strict=True)] or [[]] * 4),
        )
        return
    values = ", ".join(f"({placeholders(7, start=1 + index * 7)})" for index in range(len(rows)))
    await tx.execute(
        f"INSERT INTO function_health AS h ({_HEALTH_COLUMNS}) VALUES {values}{_UPSERT_HEALTH}",
        *[value for row in rows for value in row],
    )
    if counts:
        values = ", ".join(
            f"({placeholders(4, start=1 + index * 4)})" for index in range(len(counts))
        )
        await tx.execute(
            "INSERT INTO function_health_hours AS c (function_id, hour, succeeded, failed)"
            f" VALUES {values}{_UPSERT_HOURS}",
            *[value for count in counts for value in count],
        )


async def purge_function_health_hours(tx: Transaction, *, before_hour: int) -> int:
    """Delete the functions' hourly counts older than ``before_hour`` (out of every window)."""
    return await tx.execute("DELETE FROM function_health_hours WHERE hour < $1", before_hour)


_HEALTH_OF_APP = (
    "SELECT f.*, a.status AS app_status, h.last_run_id, h.last_run_at, h.last_run_status,"
    " h.last_error AS health_error, h.last_error_at, h.last_error_run_id,"
    " COALESCE(c.succeeded, 0) AS succeeded, COALESCE(c.failed, 0) AS failed"
    " FROM functions f JOIN apps a ON a.id = f.app_id"
    " LEFT JOIN function_health h ON h.function_id = f.id"
    " LEFT JOIN (SELECT function_id, SUM(succeeded) AS succeeded, SUM(failed) AS failed"
    " FROM function_health_hours WHERE hour >= $2 AND function_id IN"
    " (SELECT id FROM functions WHERE app_id = $1 AND deleted_at IS NULL)"
    " GROUP BY function_id) c ON c.function_id = f.id"
    " WHERE f.app_id = $1 AND f.deleted_at IS NULL ORDER BY f.created_at, f.id"
)


async def function_health(reader: Reader, app_id: str, *, now: float) -> list[FunctionHealth]:
    """Every function of the app (not deleted), oldest first as ``apps.list_functions`` lists
    them, each with its health at ``now``: one statement for all."""
    rows = await reader.fetch(_HEALTH_OF_APP, app_id, health_window_start(now))
    answered = []
    for row in rows:
        status: str = row["app_status"]
        succeeded, failed = int(row["succeeded"]), int(row["failed"])
        answered.append(
            FunctionHealth(
                function=HostedFunction.from_row(row),
                stopped=None if status == "ACTIVE" else f"app {status.lower()}",
                runs_last_24h=succeeded + failed,
                failed_last_24h=failed,
                last_run=None
                if row["last_run_id"] is None
                else LastRun(row["last_run_id"], float(row["last_run_at"]), row["last_run_status"]),
                last_error=None
                if row["last_error_run_id"] is None
                else LastError(
                    row["health_error"], float(row["last_error_at"]), row["last_error_run_id"]
                ),
            )
        )
    return answered
