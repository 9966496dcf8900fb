"""What the live streams read: the delivery attempts and the runs of an app that ended after a
cursor, in the order a cursor passes them (contract.md: Live streams for the console and the
CLI).

A recording transaction notifies ATTEMPTS_ENDED_CHANNEL or RUNS_ENDED_CHANNEL (one call in
``record_outcomes`` and ``record_runs``), and the process's streams then read from their
cursors, each with one indexed query. The cursor is what the database gives the row as it is
recorded (migration 0032):

- SQLite: one writer commits in order, so a number that grows with each commit is the whole
  cursor: an attempt's rowid, a run's ``ended_seq``.
- PostgreSQL: transactions commit in another order than they draw numbers, so a row carries the
  transaction that recorded it too (``ended_xid``), and the cursor is ``(ended_xid,
  ended_seq)``. A read takes only rows of transactions older than every one still running
  (``pg_snapshot_xmin``): nothing can commit behind them any more, so a cursor never passes a
  row that appears later. A row held back so (its transaction younger than one still running)
  is reported (:attr:`Ended.held`), and the stream looks again shortly.

An event's id is the cursor as text, ``<xid>-<seq>`` (``0-<seq>`` on SQLite): ``Last-Event-ID``
resumes after it, within :data:`RESUME_WINDOW`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ledgerport.storage import Reader

from ._deliveries import ATTEMPTS_ENDED_CHANNEL, Delivery
from ._runs import _RUN_LIST_COLUMNS, RUN_EXCERPT_CHARS, RUNS_ENDED_CHANNEL, FunctionRun

StreamKind = Literal["deliveries", "runs"]
STREAM_KINDS: tuple[StreamKind, ...] = ("deliveries", "runs")
STREAM_CHANNELS: dict[StreamKind, str] = {
    "deliveries": ATTEMPTS_ENDED_CHANNEL,
    "runs": RUNS_ENDED_CHANNEL,
}
RESUME_WINDOW = 3600.0
"""Seconds back a ``Last-Event-ID`` resumes within: what ended earlier is not sent again."""
STREAM_PAGE = 500
"""Rows one read answers at most; a stream reads on while pages come full."""

_CURSOR = re.compile(r"(\d{1,18})-(\d{1,18})")


class Cursor(NamedTuple):
    """Where a stream stands: after the row recorded by transaction ``xid`` (0 on SQLite) with
    number ``seq`` (ordered as the pair; a tuple, made once an event of every stream's
    read)."""

    xid: int
    seq: int

    @property
    def text(self) -> str:
        return f"{self.xid}-{self.seq}"

    @classmethod
    def parse(cls, text: str) -> Cursor | None:
        """The cursor an event id names, or None when ``text`` is none."""
        match = _CURSOR.fullmatch(text.strip())
        if match is None:
            return None
        return cls(int(match[1]), int(match[2]))


class EndedAttempt(NamedTuple):
    """A delivery attempt that ended: the delivery as it stands now, and the attempt's number."""

    cursor: Cursor
    delivery: Delivery
    attempt: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> EndedAttempt:
        """A row of :attr:`Ended.rows` of a deliveries stream, as an object."""
        named = dict(zip(ATTEMPT_COLUMNS, row, strict=True))
        return cls(row_cursor(row), Delivery.from_row(named), int(named["attempt"]))


class EndedRun(NamedTuple):
    """A run that ended (an attempt of it: ``retrying`` when another is due), as listed."""

    cursor: Cursor
    run: FunctionRun
    function_id: str
    function_name: str

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> EndedRun:
        """A row of :attr:`Ended.rows` of a runs stream, as an object."""
        named = dict(zip(RUN_COLUMNS, row, strict=True))
        return cls(
            row_cursor(row),
            FunctionRun.from_row(named),
            named["function_id"],
            named["function_name"],
        )


ATTEMPT_COLUMNS = (
    "xid",
    "seq",
    "horizon",
    "attempt",
    "id",
    "webhook_id",
    "event_id",
    "type",
    "status",
    "attempts",
    "response_code",
    "last_error",
    "created_at",
    "next_attempt_at",
)
"""The values of a row of a deliveries stream's :attr:`Ended.rows`, in order: the cursor, the
oldest transaction running as it was read (PostgreSQL; 0 on SQLite), the attempt that ended,
and the delivery's columns as listed."""
RUN_COLUMNS = (
    "xid",
    "seq",
    "horizon",
    "function_id",
    "function_name",
    "id",
    "event_id",
    "type",
    "status",
    "attempts",
    "version",
    "duration_ms",
    "created_at",
    "replay_of",
    "output_dropped_at",
    "error",
    "error_size",
    "logs_head",
    "logs_size",
    "result",
    "result_size",
)
"""The values of a row of a runs stream's :attr:`Ended.rows`, in order: the cursor, the
horizon, the function, and the run's columns as listed."""


def row_cursor(row: Sequence[Any]) -> Cursor:
    """The cursor of a row of :attr:`Ended.rows` (its first two values)."""
    return Cursor(int(row[0]), int(row[1]))


@dataclass(frozen=True)
class Ended:
    """One read: what ended after the cursor, in cursor order, and whether rows were held back
    (PostgreSQL: recorded by a transaction younger than one still running) or the page came
    full: either way, the stream reads again.

    The rows are their values as read, not made into dicts or objects: a stream renders each
    row once for all the streams it serves, and the dicts and objects would cost it more than
    the rendering (one a delivery or run that ends, with every stream open). Their values are
    :data:`ATTEMPT_COLUMNS` or :data:`RUN_COLUMNS`, in that order (:meth:`EndedAttempt.from_row`
    and :meth:`EndedRun.from_row` make them objects)."""

    rows: Sequence[Sequence[Any]]
    held: bool
    full: bool

    @property
    def last(self) -> Cursor | None:
        return row_cursor(self.rows[-1]) if self.rows else None


@dataclass(frozen=True)
class StreamStart:
    """Where a stream that starts now stands: its cursor, and the rows past it that ended
    before it started (PostgreSQL: recorded by transactions younger than one still running),
    which it does not send."""

    cursor: Cursor
    seen: frozenset[Cursor] = frozenset()


async def stream_start(
    reader: Reader, kind: StreamKind, app_id: str, *, postgresql: bool
) -> StreamStart:
    """Where a stream of the app that starts now stands: what ended before is behind it. On
    PostgreSQL, the oldest transaction still running (a row it or a younger one records comes
    after), and the app's rows already there past it, read in the same snapshot."""
    if postgresql:
        table = "webhook_attempts" if kind == "deliveries" else "function_runs"
        row = await reader.fetchrow(
            f"SELECT {_HORIZON} AS horizon, (SELECT COALESCE(json_agg(json_build_array("
            f"ended_xid, ended_seq)), '[]')::text FROM {table} WHERE app_id = $1"
            f" AND ended_xid >= {_HORIZON}) AS seen",
            app_id,
        )
        assert row is not None
        seen = frozenset(Cursor(int(xid), int(seq)) for xid, seq in json.loads(row["seen"]))
        return StreamStart(Cursor(int(row["horizon"]), 0), seen)
    sql = (
        "SELECT COALESCE(MAX(rowid), 0) FROM webhook_attempts"
        if kind == "deliveries"
        else "SELECT COALESCE(MAX(ended_seq), 0) FROM function_runs"
    )
    return StreamStart(Cursor(0, int(await reader.fetchval(sql))))


async def ended_after(
    reader: Reader,
    kind: StreamKind,
    app_id: str,
    after: Cursor,
    *,
    since: float,
    postgresql: bool,
    limit: int = STREAM_PAGE,
) -> Ended:
    """The app's attempts or runs that ended after ``after`` (and at or after ``since``, unix
    seconds), ``limit`` at most, in cursor order: one range of the app's stream index."""
    cursor: list[Any] = [after.xid, after.seq] if postgresql else [after.seq]
    if kind == "deliveries":
        sql = _ATTEMPTS_POSTGRES if postgresql else _ATTEMPTS_SQLITE
        args = [app_id, *cursor, since, limit + 1]
    else:
        sql = _RUNS_POSTGRES if postgresql else _RUNS_SQLITE
        args = [app_id, RUN_EXCERPT_CHARS, *cursor, since, limit + 1]
    rows = await reader.fetch_values(sql, *args)
    full = len(rows) > limit
    rows = rows[:limit]
    held = False
    if postgresql:
        for index, row in enumerate(rows):
            if int(row[0]) >= int(row[2]):
                held = True  # this and every row after it: their transactions are too young
                rows = rows[:index]
                break
    return Ended(rows, held=held, full=full and not held)


_HORIZON = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_DELIVERY_COLUMNS = (
    "a.attempt, d.id, d.webhook_id, d.event_id, d.type, d.status, d.attempts, d.response_code,"
    " d.last_error, d.created_at, d.next_attempt_at"
)
_ATTEMPTS_POSTGRES = (
    f"SELECT a.ended_xid AS xid, a.ended_seq AS seq, {_HORIZON} AS horizon, {_DELIVERY_COLUMNS}"
    " FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id"
    " WHERE a.app_id = $1 AND (a.ended_xid, a.ended_seq) > ($2, $3)"
    " AND a.started_at + a.duration_ms / 1000 >= $4"
    " ORDER BY a.ended_xid, a.ended_seq LIMIT $5"
)
_ATTEMPTS_SQLITE = (
    f"SELECT 0 AS xid, a.rowid AS seq, 0 AS horizon, {_DELIVERY_COLUMNS}"
    " FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id"
    " WHERE a.app_id = $1 AND a.rowid > $2 AND a.started_at + a.duration_ms / 1000 >= $3"
    " ORDER BY a.rowid LIMIT $4"
)
_FUNCTION = (
    "function_id, (SELECT f.name FROM functions f WHERE f.id = function_runs.function_id)"
    " AS function_name"
)
_RUNS_POSTGRES = (
    f"SELECT ended_xid AS xid, ended_seq AS seq, {_HORIZON} AS horizon, {_FUNCTION},"
    f" {_RUN_LIST_COLUMNS} FROM function_runs"
    " WHERE app_id = $1 AND ended_seq IS NOT NULL AND (ended_xid, ended_seq) > ($3, $4)"
    " AND updated_at >= $5 ORDER BY ended_xid, ended_seq LIMIT $6"
)
_RUNS_SQLITE = (
    f"SELECT 0 AS xid, ended_seq AS seq, 0 AS horizon, {_FUNCTION}, {_RUN_LIST_COLUMNS}"
    " FROM function_runs"
    " WHERE app_id = $1 AND ended_seq > $3 AND updated_at >= $4"
    " ORDER BY ended_seq LIMIT $5"
)
