"""What each app keeps of run output and attempt bodies, and the trimming that keeps it within
the storage quota (``LEDGERPORT_APP_STORAGE_QUOTA_MB``, docs/operations.md).

A run's output is what it wrote: its log lines and their times, its result, its error and its
stack (``function_runs.output_bytes`` counts them, in UTF-8, as the run is recorded); an
attempt's body is the first 4 KiB of the answer it got. ``app_storage.kept_bytes`` is their sum
for each app, changed in the transaction that changes them: recording a run or an outcome,
trimming, purging past the history kept. No write scans what an app keeps.

Past the quota, the app's oldest output goes first, runs' and attempts' taken together by
age, in batches of a transaction each: a run keeps its row, its status and its event, and says
when its output was dropped (``output_dropped_at``); an attempt keeps everything but its body
(``body_dropped_at``). ``app_storage`` counts what was dropped, for the console to say so.
Nothing of another app is read or written.

Every transaction changes ``app_storage`` last, just before it commits, in the order of the
apps' ids (:func:`count_kept` queues the changes; on SQLite the outcome recorder writes its own
at once, the one writer holding the database): the rows it locks before (runs, deliveries,
attempts) are never waited for while holding an app's row, so no two transactions wait on each
other in a circle.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ledgerport.apps import App, AppNotFound
from ledgerport.storage import Row, Transaction

TRIM_BATCH = 256
"""Runs' outputs and attempts' bodies one trimming transaction drops at most."""
_COUNT = (
    "INSERT INTO app_storage AS s (app_id, kept_bytes) VALUES ($1, $2)"
    " ON CONFLICT (app_id) DO UPDATE SET kept_bytes = s.kept_bytes + EXCLUDED.kept_bytes"
)


@dataclass(frozen=True)
class AppStorage:
    """What an app keeps of run output and attempt bodies, and what was dropped for the quota
    (in all, since the app began)."""

    kept_bytes: int = 0
    trimmed_bytes: int = 0
    trimmed_runs: int = 0
    trimmed_attempts: int = 0
    trimmed_at: float | None = None
    """When output was last dropped (None: never)."""


def text_bytes(*texts: str | None) -> int:
    """The bytes of ``texts`` in UTF-8 (None counting none)."""
    return sum(len(text.encode()) for text in texts if text is not None)


def count_kept(tx: Transaction, changes: Iterable[tuple[str, int]]) -> None:
    """Add each ``(app id, bytes)`` of ``changes`` to what the app keeps (negative: take away),
    written just before ``tx`` commits, every app's changes summed, in app id order."""
    tx.queue("app_storage", _write_counts).extend(
        (app_id, change) for app_id, change in changes if change
    )


async def _write_counts(tx: Transaction, changes: list[tuple[str, int]]) -> None:
    summed: defaultdict[str, int] = defaultdict(int)
    for app_id, change in changes:
        summed[app_id] += change
    rows = [(app_id, change) for app_id, change in sorted(summed.items()) if change]
    if rows:
        await tx.executemany(_COUNT, rows)


async def app_storage(tx: Transaction, app_id: str) -> AppStorage:
    """What the app keeps and what was dropped of it for the quota."""
    row = await tx.fetchrow(
        "SELECT kept_bytes, trimmed_bytes, trimmed_runs, trimmed_attempts, trimmed_at"
        " FROM app_storage WHERE app_id = $1",
        app_id,
    )
    return AppStorage() if row is None else _storage(row)


async def developed_app_storage(
    tx: Transaction, app_id: str, developer_user_id: str
) -> tuple[App, AppStorage]:
    """The app, when ``developer_user_id`` develops it (AppNotFound otherwise, as
    ``apps.get_developed_app``), with what it keeps (:func:`app_storage`), in one statement:
    what the console's pages of a webhook and of a function read first."""
    row = await tx.fetchrow(
        "SELECT a.*, s.app_id AS storage_app_id, s.kept_bytes, s.trimmed_bytes,"
        " s.trimmed_runs, s.trimmed_attempts, s.trimmed_at"
        " FROM apps a LEFT JOIN app_storage s ON s.app_id = a.id WHERE a.id = $1",
        app_id,
    )
    if row is None:
        raise AppNotFound(app_id)
    app = App.from_row(row)
    if app.developer_user_id != developer_user_id:
        raise AppNotFound(app_id)
    return app, AppStorage() if row["storage_app_id"] is None else _storage(row)


def _storage(row: Row) -> AppStorage:
    return AppStorage(
        kept_bytes=int(row["kept_bytes"]),
        trimmed_bytes=int(row["trimmed_bytes"]),
        trimmed_runs=int(row["trimmed_runs"]),
        trimmed_attempts=int(row["trimmed_attempts"]),
        trimmed_at=None if row["trimmed_at"] is None else float(row["trimmed_at"]),
    )


async def apps_over_quota(tx: Transaction, *, quota: int, limit: int) -> list[tuple[str, int]]:
    """At most ``limit`` apps keeping more than ``quota`` bytes, the most first, each with how
    many bytes it keeps (one row an app: read whole, it is read a few times a minute)."""
    rows = await tx.fetch(
        "SELECT app_id, kept_bytes FROM app_storage WHERE kept_bytes > $1"
        " ORDER BY kept_bytes DESC, app_id LIMIT $2",
        quota,
        limit,
    )
    return [(row["app_id"], int(row["kept_bytes"])) for row in rows]


@dataclass(frozen=True)
class Trimmed:
    """What one trimming transaction dropped of an app's output."""

    run_bytes: int = 0
    runs: int = 0
    attempt_bytes: int = 0
    attempts: int = 0

    @property
    def bytes(self) -> int:
        return self.run_bytes + self.attempt_bytes

    @property
    def items(self) -> int:
        return self.runs + self.attempts

    def __add__(self, other: Trimmed) -> Trimmed:
        return Trimmed(
            self.run_bytes + other.run_bytes,
            self.runs + other.runs,
            self.attempt_bytes + other.attempt_bytes,
            self.attempts + other.attempts,
        )


async def trim_oldest(
    tx: Transaction, *, app_id: str, quota: int, now: float, limit: int = TRIM_BATCH
) -> Trimmed:
    """Drop the app's oldest run outputs and attempt bodies, oldest first by when the run was
    created or the attempt started, until it keeps no more than ``quota`` bytes or ``limit``
    items are dropped, whichever comes first; answers what was dropped. Only ended runs are
    trimmed (a run queued or retrying gets its output written again).

    Trimmings of one app wait for each other (``Transaction.serialize``), and each reads what
    the app keeps once the one before committed: side by side, in several processes, they drop
    no more than one would. On PostgreSQL, rows another transaction holds are left for the next
    time."""
    await tx.serialize(f"app_storage:{app_id}")
    kept = await tx.fetchval("SELECT kept_bytes FROM app_storage WHERE app_id = $1", app_id)
    at_least = 0 if kept is None else int(kept) - quota
    if at_least <= 0:
        return Trimmed()
    runs = await tx.fetch(
        "SELECT id, created_at AS at, output_bytes AS size FROM function_runs"
        " WHERE app_id = $1 AND output_bytes > 0 AND status IN ('succeeded', 'failed')"
        f" ORDER BY created_at, id LIMIT $2{tx.skip_locked}",
        app_id,
        limit,
    )
    attempts = await tx.fetch(
        "SELECT delivery_id, attempt, started_at AS at, length(response_body) AS size"
        " FROM webhook_attempts WHERE app_id = $1 AND length(response_body) > 0"
        f" ORDER BY started_at, delivery_id, attempt LIMIT $2{tx.skip_locked}",
        app_id,
        limit,
    )
    oldest: list[tuple[float, int, Row]] = sorted(
        [(float(r["at"]), 0, r) for r in runs] + [(float(r["at"]), 1, r) for r in attempts],
        key=lambda item: (item[0], item[1]),
    )
    dropped_runs: list[Row] = []
    dropped_attempts: list[Row] = []
    dropped = 0
    for _, kind, row in oldest[:limit]:
        if dropped >= at_least:
            break
        (dropped_attempts if kind else dropped_runs).append(row)
        dropped += int(row["size"])
    if dropped_runs:
        await tx.executemany(
            "UPDATE function_runs SET logs = NULL, result = NULL, error = NULL,"
            " error_stack = NULL, log_times = NULL, output_bytes = 0, output_dropped_at = $2"
            " WHERE id = $1",
            [(row["id"], now) for row in dropped_runs],
        )
    if dropped_attempts:
        await tx.executemany(
            "UPDATE webhook_attempts SET response_body = NULL, body_dropped_at = $3"
            " WHERE delivery_id = $1 AND attempt = $2",
            [(row["delivery_id"], row["attempt"], now) for row in dropped_attempts],
        )
    trimmed = Trimmed(
        run_bytes=sum(int(row["size"]) for row in dropped_runs),
        runs=len(dropped_runs),
        attempt_bytes=sum(int(row["size"]) for row in dropped_attempts),
        attempts=len(dropped_attempts),
    )
    if trimmed.items:
        await tx.execute(
            "UPDATE app_storage SET kept_bytes = kept_bytes - $2,"
            " trimmed_bytes = trimmed_bytes + $2, trimmed_runs = trimmed_runs + $3,"
            " trimmed_attempts = trimmed_attempts + $4, trimmed_at = $5 WHERE app_id = $1",
            app_id,
            trimmed.bytes,
            trimmed.runs,
            trimmed.attempts,
            now,
        )
    return trimmed
