"""Webhook deliveries: their claims and leases, attempt outcomes and the cleanup (spec: States
and transitions: Webhook delivery, Delivery). The fan-out that creates them is ``_fan_out.py``,
the send-time check ``_send_checks.py``, the attempt log ``_attempts.py``, what the console
reads and does (the history, redelivery, recovery, test deliveries) ``_history.py``.

A delivery waits in the hot queue (status queued or retrying, indexed by ``next_attempt_at``)
until an engine claims it: the claim names itself in ``lease`` and moves ``next_attempt_at`` to
the lease's end, so a claim whose process dies is due again then and another process takes it
over. Only the claim that holds the lease records the attempt's outcome.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from ledgerport import catalog
from ledgerport.storage import Row, Transaction, first_per_key, placeholders

from ._attempts import AttemptMade, headers_text
from ._quota import count_kept
from ._tenants import TENANT, DueTenant, due_tenants, tenant_key

DeliveryStatus = Literal["queued", "retrying", "delivered", "failed"]
DELIVERY_STATUSES: tuple[DeliveryStatus, ...] = ("queued", "retrying", "delivered", "failed")
DELIVERIES_CHANNEL = "deliveries"
"""Notified by every commit that queues deliveries for an attempt (a test, a redelivery)."""
ATTEMPTS_ENDED_CHANNEL = "attempts_ended"
"""Notified by every commit that records attempts' outcomes: the live streams read then
(``_streams.py``)."""


WAITING_STATUSES = frozenset(("queued", "retrying"))
"""The statuses of a delivery that waits for an attempt (its ``next_attempt_at`` is due)."""


def next_attempt_due(status: str, next_attempt_at: float | None) -> float | None:
    """When a delivery's next attempt is due while it waits for one (queued or retrying; while
    an attempt is under way, when its claim runs out); None once it is delivered or failed."""
    return next_attempt_at if status in WAITING_STATUSES else None


class Delivery(NamedTuple):
    """A delivery as the console shows it (a tuple: the console's lists and the live streams
    make hundreds at a time, and a frozen dataclass's construction costs several times a
    tuple's)."""

    id: str
    webhook_id: str
    event_id: str | None
    type: str
    status: DeliveryStatus
    attempts: int
    response_code: int | None
    last_error: str | None
    created_at: float
    next_attempt_at: float | None

    @property
    def test(self) -> bool:
        """A test delivery (spec: Test delivery): it has no event."""
        return self.event_id is None

    @property
    def next_attempt_due(self) -> float | None:
        """When the next attempt is due while the delivery waits for one (queued or retrying;
        while an attempt is under way, when its claim runs out); None once it is delivered or
        failed."""
        return next_attempt_due(self.status, self.next_attempt_at)

    @classmethod
    def from_row(cls, row: Row) -> Delivery:
        return cls(
            id=row["id"],
            webhook_id=row["webhook_id"],
            event_id=row["event_id"],
            type=row["type"],
            status=row["status"],
            attempts=int(row["attempts"]),
            response_code=row["response_code"],
            last_error=row["last_error"],
            created_at=float(row["created_at"]),
            next_attempt_at=row["next_attempt_at"],
        )


@dataclass(frozen=True)
class ClaimedDelivery:
    """A delivery an engine holds the lease of: what its next attempt sends."""

    id: str
    webhook_id: str
    app_id: str
    event_id: str | None
    business_id: str | None
    type: str
    body: bytes
    attempts: int
    """Attempts made before this one."""
    lease: str
    created_at: float
    order_key: str | None = None
    """The record its endpoint orders it by (``ordering: record``), or None."""

    @classmethod
    def from_row(cls, row: Row, lease: str) -> ClaimedDelivery:
        return cls(
            id=row["id"],
            webhook_id=row["webhook_id"],
            app_id=row["app_id"],
            event_id=row["event_id"],
            business_id=row["business_id"],
            type=row["type"],
            body=row["body"].encode(),
            attempts=int(row["attempts"]),
            lease=lease,
            created_at=float(row["created_at"]),
            order_key=row["order_key"],
        )


FAN_OUT_LOCK = 0x6C70_6661_6E6F
"""The advisory lock fan-outs take turns by on PostgreSQL (an arbitrary constant of ours). A
redelivery or recovery holds it too while it reads which records have an open delivery and
parks its own behind them, and the recording of outcomes that end ordered deliveries holds it
shared (recorders never wait for each other): a head then never ends unseen by a transaction
parking a delivery behind it. Either the parking commits first, and the end's release finds
the parked delivery, or the end does, and the parking transaction sees the record free."""


INSERT_DELIVERY = (
    "INSERT INTO webhook_deliveries (id, webhook_id, app_id, event_id, business_id, type, body,"
    " status, attempts, created_at, updated_at, next_attempt_at, lease, order_key, event_seq)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', 0, $8, $8, $9, $10, $11, $12)"
)
"""A new delivery: id, webhook, app, event, business, type, body, now, when it is due (None:
it waits for the one before it about its record), the lease that claims it (or None), its
record when its endpoint orders by record (else None), and its event's place in the log."""


# --- Claims and attempts -------------------------------------------------------------------------


async def delivery_due_times(tx: Transaction) -> list[DueTenant]:
    """Each (app, business or '') with deliveries waiting for an attempt, its app's developer,
    and when its earliest is due (a claimed delivery is due when its claim runs out)."""
    return await due_tenants(tx, "webhook_deliveries")


async def claim_due(
    tx: Transaction,
    *,
    now: float,
    lease: str,
    lease_until: float,
    quotas: Sequence[tuple[tuple[str, str], int]],
    take: Callable[[str, str, str], bool],
    full: Sequence[str] = (),
) -> list[ClaimedDelivery]:
    """Claim due deliveries, for each ``((app_id, business), n)`` of ``quotas`` that tenant's
    ``n`` oldest due at most (a tenant's backlog is read through its own index range: it never
    hides another's work); ``take(app_id, business, webhook_id)`` says whether the caller can
    attempt one more of that webhook now, and the webhooks in ``full`` are passed over (a
    webhook with a backlog holds up no other).

    The deliveries are taken, and answered, in turns: each tenant's oldest, in the order of
    ``quotas``, then each one's next. A webhook's actor sends what it is handed in order, so a
    tenant's part of the claim never waits behind another's whole part at an endpoint they
    share (an app's webhooks get the deliveries of all its businesses)."""
    if not quotas:
        return []
    passed_over = f" AND webhook_id NOT IN ({placeholders(len(full), start=2)})" if full else ""
    sql, extra = first_per_key(
        tx,
        select=(
            "SELECT id, webhook_id, app_id, event_id, business_id, type, body, attempts,"
            " created_at, next_attempt_at, order_key FROM webhook_deliveries"
            f" WHERE status IN ('queued', 'retrying') AND next_attempt_at <= $1{passed_over}"
        ),
        key=TENANT,
        order="next_attempt_at",
        quotas=[(tenant_key(app_id, business), n) for (app_id, business), n in quotas],
        start=2 + len(full),
    )
    rows = await tx.fetch(sql, now, *full, *extra)
    chosen = [
        row
        for row in _in_turns(rows, [tenant for tenant, _ in quotas])
        if take(row["app_id"], row["business_id"] or "", row["webhook_id"])
    ]
    if chosen:
        await tx.executemany(
            "UPDATE webhook_deliveries SET lease = $1, next_attempt_at = $2 WHERE id = $3",
            [(lease, lease_until, row["id"]) for row in chosen],
        )
    return [ClaimedDelivery.from_row(row, lease) for row in chosen]


def _in_turns(rows: Sequence[Row], tenants: Sequence[tuple[str, str]]) -> list[Row]:
    """``rows`` in turns: the oldest of each tenant of ``tenants`` in that order, then the next
    of each, and so on."""
    mine: dict[tuple[str, str], list[Row]] = {tenant: [] for tenant in tenants}
    for row in rows:
        mine[row["app_id"], row["business_id"] or ""].append(row)
    backlogs = [sorted(kept, key=lambda row: row["next_attempt_at"]) for kept in mine.values()]
    return [row for turn in itertools.zip_longest(*backlogs) for row in turn if row is not None]


async def next_due_at(tx: Transaction) -> float | None:
    """When the earliest waiting delivery is due (None when none waits)."""
    value = await tx.fetchval(
        "SELECT MIN(next_attempt_at) FROM webhook_deliveries WHERE status IN ('queued', 'retrying')"
    )
    return None if value is None else float(value)


async def queue_depth(tx: Transaction) -> tuple[int, int]:
    """Deliveries waiting for their first attempt, and those waiting for a retry."""
    rows = await tx.fetch(
        "SELECT status, COUNT(*) AS n FROM webhook_deliveries"
        " WHERE status IN ('queued', 'retrying') GROUP BY status"
    )
    counts = {row["status"]: int(row["n"]) for row in rows}
    return counts.get("queued", 0), counts.get("retrying", 0)


@dataclass(frozen=True)
class AttemptOutcome:
    """What became of one claimed delivery: delivered, retrying (``next_attempt_at`` set) or
    failed; ``attempts`` counts the attempts made so far (a refusal makes none). ``made`` is
    what the attempt log keeps of the attempt this outcome is of (None: no attempt was made,
    the delivery was refused or given back unattempted)."""

    delivery_id: str
    lease: str
    status: DeliveryStatus
    attempts: int
    response_code: int | None
    error: str | None
    finished_at: float
    next_attempt_at: float | None
    first_attempt_at: float | None
    made: AttemptMade | None = None
    ordered: bool = False
    """Its delivery is ordered by record: once it is delivered or failed, the next one about
    its record is due (:func:`release_next`)."""


async def record_outcomes(tx: Transaction, outcomes: Sequence[AttemptOutcome]) -> None:
    """Record attempt outcomes, and log the attempts they are of (``_attempts.py``), their
    bodies counted to their apps' storage (``_quota.py``); an outcome whose claim no longer
    holds the lease (it expired and another process took the delivery over) changes nothing
    and logs nothing.

    Rows are locked and written in the order of their ids, the order :func:`renew_claims`
    locks them in: two transactions of an engine over the same claims wait for each other,
    never deadlock. On PostgreSQL a batch is one statement (and the apps' counts at the
    commit), after FAN_OUT_LOCK is held shared when it ends ordered deliveries; on SQLite, whose
    one writer holds the database, two and the counts."""
    by_id: dict[str, AttemptOutcome] = {}
    for outcome in outcomes:
        by_id.setdefault(outcome.delivery_id, outcome)
    ordered = [by_id[delivery_id] for delivery_id in sorted(by_id)]
    if not ordered:
        return
    await tx.notify(ATTEMPTS_ENDED_CHANNEL)
    rows = [_row(o) for o in ordered]
    ended = [o.delivery_id for o in ordered if o.ordered and o.status in ("delivered", "failed")]
    if tx.kind == "postgresql":
        if ended:
            await tx.execute("SELECT pg_advisory_xact_lock_shared($1)", FAN_OUT_LOCK)
        columns = [list(column) for column in zip(*rows, strict=True)]
        counted = await tx.fetch(_RECORD_POSTGRES, *columns)
        count_kept(tx, [(row["app_id"], int(row["size"])) for row in counted])
        await release_next(tx, ended, now=ordered[0].finished_at)
        return
    made = [row for row, o in zip(rows, ordered, strict=True) if o.made is not None]
    if made:
        await tx.executemany(_LOG_SQLITE, made)
        bodies = [(row[0], row[1], row[12]) for row in made if row[12]]
        if bodies:
            await tx.executemany(_COUNT_SQLITE, bodies)
    await tx.executemany(_RECORD_SQLITE, [row[:10] for row in rows])
    await release_next(tx, ended, now=ordered[0].finished_at)


async def release_next(tx: Transaction, delivery_ids: Sequence[str], *, now: float) -> int:
    """Ordering by record: for each of ``delivery_ids`` that is an ordered delivery now
    delivered or failed, the next one about its record (the oldest waiting by its event's place
    in the log) is due at ``now``, unless another about the record is due or under way already
    (a redelivery took the turn). Answers how many were released.

    Deliveries released are queued deliveries due now: the commit wakes every engine's claimer
    (DELIVERIES_CHANNEL), as any commit that queues deliveries does. Without it the next
    delivery about a record waited for a claim woken by something else, at worst the claimer's
    poll (5 s a delivery, when an endpoint's only backlog is one record's)."""
    if not delivery_ids:
        return 0
    released = await tx.execute(
        "UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE id IN ("
        " SELECT (SELECT n.id FROM webhook_deliveries n WHERE n.webhook_id = d.webhook_id"
        " AND n.order_key = d.order_key AND n.status IN ('queued', 'retrying')"
        " AND n.next_attempt_at IS NULL ORDER BY n.event_seq, n.id LIMIT 1)"
        " FROM webhook_deliveries d"
        f" WHERE d.id IN ({placeholders(len(delivery_ids), start=2)})"
        " AND d.order_key IS NOT NULL AND d.status IN ('delivered', 'failed')"
        " AND NOT EXISTS (SELECT 1 FROM webhook_deliveries h WHERE h.webhook_id = d.webhook_id"
        " AND h.order_key = d.order_key AND h.status IN ('queued', 'retrying')"
        " AND h.next_attempt_at IS NOT NULL))",
        now,
        *delivery_ids,
    )
    if released:
        await tx.notify(DELIVERIES_CHANNEL)
    return released


def _row(o: AttemptOutcome) -> tuple[object, ...]:
    made = o.made
    return (
        o.delivery_id,
        o.lease,
        o.status,
        o.attempts,
        o.response_code,
        o.error,
        o.finished_at,
        o.next_attempt_at,
        o.first_attempt_at,
        made is not None,
        None if made is None else made.started_at,
        None if made is None else made.duration_ms,
        None if made is None or o.response_code is None else made.response_body,
        made is not None and made.response_truncated,
        None if made is None else headers_text(made.request_headers),
    )


_LOG_COLUMNS = (
    "delivery_id, attempt, started_at, duration_ms, response_code, response_body,"
    " response_truncated, error, request_headers, app_id"
)
_RECORD_POSTGRES = (
    "WITH o AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[],"
    " $6::text[], $7::float8[], $8::float8[], $9::float8[], $10::bool[], $11::float8[],"
    " $12::float8[], $13::bytea[], $14::bool[], $15::text[]) AS o(id, lease, status, attempts,"
    " response_code, error, finished_at, next_attempt_at, first_attempt_at, made, started_at,"
    " duration_ms, response_body, response_truncated, request_headers)),"
    " held AS (SELECT d.id, d.attempts_made, d.app_id FROM webhook_deliveries d"
    " JOIN o ON o.id = d.id AND o.lease = d.lease ORDER BY d.id FOR UPDATE OF d),"
    f" logged AS (INSERT INTO webhook_attempts ({_LOG_COLUMNS})"
    " SELECT o.id, held.attempts_made + 1, o.started_at, o.duration_ms, o.response_code,"
    " o.response_body, o.response_truncated, o.error, o.request_headers, held.app_id"
    " FROM o JOIN held ON held.id = o.id WHERE o.made"
    " RETURNING app_id, length(response_body) AS size),"
    " recorded AS (UPDATE webhook_deliveries d SET status = o.status, attempts = o.attempts,"
    " response_code = o.response_code, last_error = o.error, updated_at = o.finished_at,"
    " next_attempt_at = o.next_attempt_at,"
    " first_attempt_at = COALESCE(d.first_attempt_at, o.first_attempt_at),"
    " attempts_made = d.attempts_made + CASE WHEN o.made THEN 1 ELSE 0 END, lease = NULL"
    " FROM o JOIN held ON held.id = o.id WHERE d.id = o.id)"
    " SELECT app_id, SUM(size) AS size FROM logged WHERE size > 0 GROUP BY app_id"
)
"""One batch of outcomes with their attempts, in one statement: the rows the outcomes' leases
still hold are locked in id order, the attempts logged under their next numbers, the outcomes
written; answers the bytes of the bodies logged, by app."""
_LOG_SQLITE = (
    f"INSERT INTO webhook_attempts ({_LOG_COLUMNS})"
    " SELECT id, attempts_made + 1, $11, $12, $5, $13, $14, $6, $15, app_id"
    " FROM webhook_deliveries WHERE id = $1 AND lease = $2"
)
_COUNT_SQLITE = (
    "INSERT INTO app_storage AS s (app_id, kept_bytes)"
    " SELECT app_id, length($3) FROM webhook_deliveries WHERE id = $1 AND lease = $2"
    " ON CONFLICT (app_id) DO UPDATE SET kept_bytes = s.kept_bytes + EXCLUDED.kept_bytes"
)
"""An attempt's body counted to its app, while its claim still holds."""
_RECORD_SQLITE = (
    "UPDATE webhook_deliveries SET status = $3, attempts = $4, response_code = $5,"
    " last_error = $6, updated_at = $7, next_attempt_at = $8,"
    " first_attempt_at = COALESCE(first_attempt_at, $9),"
    " attempts_made = attempts_made + CASE WHEN $10 THEN 1 ELSE 0 END, lease = NULL"
    " WHERE id = $1 AND lease = $2"
)


async def renew_claims(tx: Transaction, *, lease: str, until: float, limit: int) -> int:
    """Extend to ``until`` at most ``limit`` claims of ``lease`` still waiting for their
    outcome and ending before it; answers how many (the caller calls again, in a transaction
    of its own, while that is ``limit``: no transaction holds the store for all of them)."""
    picked = (
        "SELECT id FROM webhook_deliveries WHERE lease = $2"
        " AND status IN ('queued', 'retrying') AND next_attempt_at < $1"
        f" ORDER BY id LIMIT $3{tx.row_lock}"
    )
    if tx.kind == "postgresql":
        # The ids are picked once, as an array: as ``id IN (SELECT ... LIMIT .. FOR UPDATE)``
        # PostgreSQL may run the subquery again for each row it updates, and the locking step
        # then passes over the rows the statement itself just changed, so the LIMIT reaches
        # further each time and the batch is no longer bounded.
        picked = f"SELECT unnest(ARRAY({picked}))"
    return await tx.execute(
        f"UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE id IN ({picked})",
        until,
        lease,
        limit,
    )


async def release_claims(tx: Transaction, *, lease: str, now: float) -> int:
    """Give back every claim of ``lease`` (its engine is stopping): due again at ``now``."""
    return await tx.execute(
        "UPDATE webhook_deliveries SET lease = NULL, next_attempt_at = $1"
        " WHERE lease = $2 AND status IN ('queued', 'retrying')",
        now,
        lease,
    )


async def purge_deliveries(tx: Transaction, *, now: float) -> int:
    """Delete delivered and failed deliveries past the history kept (30 days), and their
    attempts, taking the attempts' bodies off their apps' storage; answers how many
    deliveries. ``apps.purge_deleted_webhooks`` then deletes the webhooks they kept."""
    cutoff = now - catalog.DELIVERY_RETENTION
    where = "created_at < $1 AND status IN ('delivered', 'failed')"
    gone = f"SELECT id FROM webhook_deliveries WHERE {where}"
    if tx.kind == "postgresql":
        # The attempts first, as deleted: a body a trimming dropped meanwhile counts none.
        rows = await tx.fetch(
            "WITH gone AS (DELETE FROM webhook_attempts"
            f" WHERE delivery_id IN ({gone}) RETURNING app_id, length(response_body) AS size)"
            " SELECT app_id, SUM(size) AS size FROM gone WHERE size > 0 GROUP BY app_id",
            cutoff,
        )
    else:
        # The one writer holds the database: nothing changes between the statements.
        rows = await tx.fetch(
            "SELECT app_id, SUM(length(response_body)) AS size FROM webhook_attempts"
            f" WHERE delivery_id IN ({gone}) AND length(response_body) > 0 GROUP BY app_id",
            cutoff,
        )
    count_kept(tx, [(row["app_id"], -int(row["size"])) for row in rows])
    return await tx.execute(f"DELETE FROM webhook_deliveries WHERE {where}", cutoff)
