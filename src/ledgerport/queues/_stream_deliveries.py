"""Deliveries to stream endpoints (contract.md: ``ledgerport listen``): their listener pulls them
over HTTP instead of an engine posting them.

Such a delivery never has a ``next_attempt_at``, so no engine's claim ever sees it (the hot
queue's claims and due times read only deliveries that have one). It waits with
``stream_due_at`` instead: when its listener may lease it next. A pull leases the due ones
(:func:`lease_stream`) under a lease of its own, random, which the listener must name to report
an answer: the lease runs out after STREAM_LEASE, and the delivery is due again (what was
forwarded but not reported may be forwarded twice, never lost). A report ends the lease
(``queues.record_outcomes`` writes only the outcome of the lease that holds), so a delivery
leased once is reported once. Every path that queues a delivery of a stream endpoint
again (a redelivery, a recovery, a test) parks it for the listener (:func:`park_for_listener`).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ledgerport.storage import Transaction, placeholders

from ._deliveries import ClaimedDelivery, DeliveryStatus

STREAM_DELIVERIES_CHANNEL = "stream_deliveries"
"""Notified by every commit that makes a delivery of a stream endpoint due: a pull waiting for
one reads again."""
STREAM_LEASE = 60.0
"""Seconds a pull leases a delivery for: reported within them, its answer is its attempt; not
reported, it is due again."""
STREAM_HELD = 64
"""Deliveries of one stream endpoint leased at once, at most: a listener holds no more, and what
it holds takes nothing of the delivery engine's shares."""

INSERT_STREAM_DELIVERY = (
    "INSERT INTO webhook_deliveries (id, webhook_id, app_id, event_id, business_id, type, body,"
    " status, attempts, created_at, updated_at, next_attempt_at, lease, order_key, event_seq,"
    " stream_due_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', 0, $8, $8, $9, $10, $11, $12, $8)"
)
"""A new delivery of a stream endpoint, due for its listener at once: the parameters of
``INSERT_DELIVERY`` (its ``next_attempt_at`` and ``lease`` None)."""


def new_stream_lease() -> str:
    """A pull's lease: 128 random bits, which only the listener that pulled knows."""
    return f"lst_{secrets.token_urlsafe(16)}"


async def park_for_listener(tx: Transaction, delivery_ids: Sequence[str]) -> int:
    """Of ``delivery_ids`` just queued (due at their ``next_attempt_at``), those of stream
    endpoints wait for their listener instead, due for it then; answers how many."""
    if not delivery_ids:
        return 0
    parked = await tx.execute(
        "UPDATE webhook_deliveries SET stream_due_at = next_attempt_at, next_attempt_at = NULL"
        f" WHERE id IN ({placeholders(len(delivery_ids))}) AND next_attempt_at IS NOT NULL"
        " AND webhook_id IN (SELECT id FROM webhooks WHERE kind = 'stream')",
        *delivery_ids,
    )
    if parked:
        await tx.notify(STREAM_DELIVERIES_CHANNEL)
    return parked


async def lease_stream(
    tx: Transaction, *, webhook_id: str, now: float, limit: int, lease: str
) -> list[ClaimedDelivery]:
    """Lease the stream endpoint's due deliveries, oldest due first, as many as ``limit`` and
    the endpoint's room (STREAM_HELD less those leased and not run out) allow."""
    held = int(
        await tx.fetchval(
            "SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = $1"
            " AND stream_due_at > $2 AND lease IS NOT NULL AND status IN ('queued', 'retrying')",
            webhook_id,
            now,
        )
    )
    room = min(limit, STREAM_HELD - held)
    if room <= 0:
        return []
    rows = await tx.fetch(
        "SELECT id, webhook_id, app_id, event_id, business_id, type, body, attempts,"
        " created_at, order_key FROM webhook_deliveries WHERE webhook_id = $1"
        " AND stream_due_at <= $2 AND status IN ('queued', 'retrying')"
        f" ORDER BY stream_due_at, id LIMIT $3{tx.row_lock}",
        webhook_id,
        now,
        room,
    )
    if rows:
        await tx.executemany(
            "UPDATE webhook_deliveries SET lease = $1, stream_due_at = $2 WHERE id = $3",
            [(lease, now + STREAM_LEASE, row["id"]) for row in rows],
        )
    return [ClaimedDelivery.from_row(row, lease) for row in rows]


async def next_stream_due(tx: Transaction, webhook_id: str) -> float | None:
    """When the stream endpoint's next delivery is due for its listener (None: none waits)."""
    value = await tx.fetchval(
        "SELECT MIN(stream_due_at) FROM webhook_deliveries WHERE webhook_id = $1"
        " AND stream_due_at IS NOT NULL AND status IN ('queued', 'retrying')",
        webhook_id,
    )
    return None if value is None else float(value)


async def leased(
    tx: Transaction, *, webhook_id: str, reports: Sequence[tuple[str, str]]
) -> dict[str, tuple[ClaimedDelivery, float]]:
    """Of ``reports`` (delivery id, lease), the deliveries of the stream endpoint that lease
    still holds, locked, by id, each with when it was leased (what it was signed at)."""
    if not reports:
        return {}
    wanted = dict(reports)
    rows = await tx.fetch(
        "SELECT id, webhook_id, app_id, event_id, business_id, type, body, attempts,"
        " created_at, order_key, lease, stream_due_at FROM webhook_deliveries"
        f" WHERE id IN ({placeholders(len(wanted), start=2)}) AND webhook_id = $1"
        f" AND lease IS NOT NULL AND status IN ('queued', 'retrying') ORDER BY id{tx.row_lock}",
        webhook_id,
        *sorted(wanted),
    )
    return {
        row["id"]: (
            ClaimedDelivery.from_row(row, row["lease"]),
            float(row["stream_due_at"]) - STREAM_LEASE,
        )
        for row in rows
        if secrets.compare_digest(row["lease"], wanted[row["id"]])
    }


async def set_stream_due(tx: Transaction, due: Sequence[tuple[str, float | None]]) -> None:
    """After their outcomes are recorded: each delivery due again for its listener at its
    time (None: it is delivered or failed, and waits no more)."""
    if due:
        await tx.executemany(
            "UPDATE webhook_deliveries SET stream_due_at = $2 WHERE id = $1", list(due)
        )
    if any(at is not None for _, at in due):
        await tx.notify(STREAM_DELIVERIES_CHANNEL)


async def end_stream_deliveries(
    tx: Transaction, webhook_ids: Sequence[str], *, now: float, why: str
) -> int:
    """Fail unsent what waits for the stream endpoints ``webhook_ids`` (deleted, or abandoned);
    answers how many."""
    if not webhook_ids:
        return 0
    ended = await tx.execute(
        "UPDATE webhook_deliveries SET status = 'failed', last_error = $1, updated_at = $2,"
        " stream_due_at = NULL, lease = NULL"
        f" WHERE webhook_id IN ({placeholders(len(webhook_ids), start=3)})"
        " AND status IN ('queued', 'retrying')",
        f"not sent: {why}",
        now,
        *webhook_ids,
    )
    return ended


@dataclass(frozen=True)
class Pulled:
    """A leased delivery as its listener forwards it: the headers an attempt sends (the
    signature among them, less :data:`NOT_FORWARDED`) and the body."""

    delivery: ClaimedDelivery
    headers: list[tuple[str, str]]
    lease_until: float


@dataclass(frozen=True)
class StreamReport:
    """A listener's report of one forwarded delivery: the answer's status code (None: none
    came), how long it took, the first bytes of its body, ``Retry-After``, and the listener's
    words for a failure without an answer (a refused connection, a timeout)."""

    delivery_id: str
    lease: str
    response_code: int | None
    duration_ms: float
    response_body: bytes
    response_truncated: bool
    error: str | None
    retry_after: str | None = None


@dataclass(frozen=True)
class Reported:
    """What became of a reported delivery (``recorded`` False: its lease no longer held, the
    report changed nothing)."""

    delivery_id: str
    recorded: bool
    status: DeliveryStatus | None = None
    attempts: int | None = None
    next_attempt_at: float | None = None


class StreamDesk(Protocol):
    """The delivery engine's half of stream endpoints (``engine.StreamDesk``), which the console
    API's routes reach through the platform (``Platform.stream_desk``)."""

    async def pull(self, tx: Transaction, *, webhook_id: str, limit: int) -> list[Pulled]:
        """Lease what is due of the stream endpoint, signed to forward (see the engine's)."""
        ...

    async def report(
        self, tx: Transaction, *, webhook_id: str, reports: Sequence[StreamReport]
    ) -> list[Reported]:
        """Record the answers ``reports`` give as attempts (see the engine's)."""
        ...
