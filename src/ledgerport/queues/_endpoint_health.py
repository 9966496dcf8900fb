"""What the endpoint lifecycle reads and writes (contract.md, third round): endpoints' lifecycle
columns, locked for the transaction that records outcomes; their hourly counts of deliveries
delivered and failed for good; and the operational deliveries to an app's operational endpoint.
The transitions themselves are the engine's pure core (``engine/_health.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ledgerport.apps import DisabledReason, EndpointState, OperationalEvent, operational_webhook
from ledgerport.ids import new_id
from ledgerport.storage import Row, Transaction, placeholders

from ._deliveries import FAN_OUT_LOCK, INSERT_DELIVERY
from ._fan_out import open_records

_LIFECYCLE = (
    "id, app_id, kind, enabled, disabled_reason, disabled_at, health, consecutive_failures,"
    " last_delivery_at, last_error, switched_on_at, failing_since, recent_failures"
)


async def lock_endpoints(tx: Transaction, webhook_ids: Sequence[str]) -> dict[str, Row]:
    """The lifecycle columns of ``webhook_ids`` (those that exist), locked until the
    transaction ends, in the order of their ids (every transaction locks them in it).

    On PostgreSQL the lock is ``FOR NO KEY UPDATE``, the one an update of these columns takes:
    it does not wait for, nor hold up, the key-share locks that inserting a delivery takes on
    its webhook (the foreign key), so a fan-out writing deliveries and a recorder writing
    outcomes of the same webhook never wait for each other here."""
    if not webhook_ids:
        return {}
    lock = " FOR NO KEY UPDATE" if tx.kind == "postgresql" else tx.row_lock
    rows = await tx.fetch(
        f"SELECT {_LIFECYCLE} FROM webhooks"
        f" WHERE id IN ({placeholders(len(webhook_ids))}) ORDER BY id{lock}",
        *sorted(webhook_ids),
    )
    return {row["id"]: row for row in rows}


@dataclass(frozen=True)
class EndpointWrite:
    """An endpoint's lifecycle after a transaction's outcomes."""

    webhook_id: str
    enabled: bool
    disabled_reason: DisabledReason | None
    disabled_at: float | None
    health: EndpointState


async def write_endpoints(
    tx: Transaction,
    writes: Sequence[EndpointWrite],
    *,
    now: float,
    hours: Sequence[tuple[str, int, int, int]] = (),
) -> None:
    """Write the endpoints' lifecycle columns, and add ``hours``' (webhook id, hour, delivered,
    failed) to their hourly counts (:func:`count_hours`), in as few statements as the store
    allows: one on PostgreSQL (the update rides in the upsert's ``WITH``), one each on SQLite
    (every endpoint of a batch in one ``UPDATE ... FROM``), whatever the number of endpoints.
    A recording transaction wrote them with a statement an endpoint and a statement an hour
    before: on SQLite every statement of the engine's is a hop to the worker thread, on
    PostgreSQL a round trip."""
    if not writes:
        await count_hours(tx, hours)
        return
    ordered = sorted(writes, key=lambda w: w.webhook_id)
    if tx.kind == "postgresql":
        columns = [list(column) for column in zip(*map(_endpoint_values, ordered), strict=True)]
        counts = [list(column) for column in zip(*_summed(hours), strict=True)] or [[]] * 4
        await tx.execute(_WRITE_POSTGRES, *columns, now, *counts)
        return
    values = ", ".join(
        f"({placeholders(_WRITTEN, start=1 + index * _WRITTEN)})" for index in range(len(ordered))
    )
    await tx.execute(
        f"WITH v({_WRITE_COLUMNS}) AS (VALUES {values})"
        f" {_SET}${len(ordered) * _WRITTEN + 1} END FROM v WHERE webhooks.id = v.id",
        *[value for w in ordered for value in _endpoint_values(w)],
        now,
    )
    await count_hours(tx, hours)


_WRITE_COLUMNS = (
    "id, enabled, disabled_reason, disabled_at, health, consecutive_failures, last_delivery_at,"
    " last_error, switched_on_at, failing_since, recent_failures"
)
_WRITTEN = len(_WRITE_COLUMNS.split(","))
_SET = (
    "UPDATE webhooks SET enabled = v.enabled, disabled_reason = v.disabled_reason,"
    " disabled_at = v.disabled_at, health = v.health,"
    " consecutive_failures = v.consecutive_failures, last_delivery_at = v.last_delivery_at,"
    " last_error = v.last_error, switched_on_at = v.switched_on_at,"
    " failing_since = v.failing_since, recent_failures = v.recent_failures,"
    " updated_at = CASE WHEN webhooks.enabled = v.enabled THEN webhooks.updated_at ELSE "
)
"""The endpoints' update from ``v`` (their new columns), completed with ``now``'s placeholder
(the time an endpoint switched on or off was updated) and ``FROM v``."""
_WRITE_POSTGRES = (
    "WITH written AS ("
    + _SET
    + "$12 END FROM unnest($1::text[], $2::bool[], $3::text[], $4::float8[], $5::text[],"
    " $6::int[], $7::float8[], $8::text[], $9::float8[], $10::float8[], $11::text[])"
    f" AS v({_WRITE_COLUMNS}) WHERE webhooks.id = v.id)"
    " INSERT INTO webhook_health_hours AS h (webhook_id, hour, delivered, failed)"
    " SELECT * FROM unnest($13::text[], $14::bigint[], $15::int[], $16::int[])"
    " ON CONFLICT (webhook_id, hour) DO UPDATE"
    " SET delivered = h.delivered + EXCLUDED.delivered, failed = h.failed + EXCLUDED.failed"
)
"""The endpoints' update and their hourly counts on PostgreSQL, one statement: the update
(``$1``-``$11`` as arrays, ``$12`` now) in the ``WITH`` of the counts' upsert (``$13``-``$16``
as arrays). Both run whatever the other does (a data-modifying ``WITH`` runs to its end,
read or not), on different tables."""


def _endpoint_values(w: EndpointWrite) -> tuple[object, ...]:
    return (
        w.webhook_id,
        w.enabled,
        w.disabled_reason,
        w.disabled_at,
        w.health.state,
        w.health.consecutive_failures,
        w.health.last_delivery_at,
        w.health.last_error,
        w.health.switched_on_at,
        w.health.failing_since,
        json.dumps(list(w.health.recent_failures)),
    )


async def count_hours(tx: Transaction, counts: Sequence[tuple[str, int, int, int]]) -> None:
    """Add (webhook id, hour, delivered, failed) to the endpoints' hourly counts: one
    statement for all."""
    if not counts:
        return
    ordered = _summed(counts)
    if tx.kind == "postgresql":
        await tx.execute(_COUNT_POSTGRES, *[list(column) for column in zip(*ordered, strict=True)])
        return
    values = ", ".join(f"({placeholders(4, start=1 + index * 4)})" for index in range(len(ordered)))
    await tx.execute(
        "INSERT INTO webhook_health_hours AS h (webhook_id, hour, delivered, failed)"
        f" VALUES {values} ON CONFLICT (webhook_id, hour) DO UPDATE"
        " SET delivered = h.delivered + EXCLUDED.delivered, failed = h.failed + EXCLUDED.failed",
        *[value for count in ordered for value in count],
    )


def _summed(counts: Sequence[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
    """``counts`` one per (webhook id, hour), in that order: one statement upserts a row once
    at most."""
    summed: dict[tuple[str, int], tuple[int, int]] = {}
    for webhook_id, hour, delivered, failed in counts:
        before = summed.get((webhook_id, hour), (0, 0))
        summed[webhook_id, hour] = (before[0] + delivered, before[1] + failed)
    return [(key[0], key[1], *added) for key, added in sorted(summed.items())]


_COUNT_POSTGRES = (
    "INSERT INTO webhook_health_hours AS h (webhook_id, hour, delivered, failed)"
    " SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::int[])"
    " ON CONFLICT (webhook_id, hour) DO UPDATE"
    " SET delivered = h.delivered + EXCLUDED.delivered, failed = h.failed + EXCLUDED.failed"
)


async def purge_health_hours(tx: Transaction, *, before_hour: int) -> int:
    """Delete the hourly counts older than ``before_hour`` (out of every window)."""
    return await tx.execute("DELETE FROM webhook_health_hours WHERE hour < $1", before_hour)


async def queue_operational_delivery(
    tx: Transaction, event: OperationalEvent, *, now: float
) -> str | None:
    """Queue ``event`` for its app's operational endpoint, when the app has one switched on;
    answers the delivery's id (None: nowhere to send it). It has no event of the log, so it
    carries no cursor; it is ordered by the endpoint it is about (its record is that endpoint's
    id, its place the event's time in microseconds), so that the operational endpoint receives
    one endpoint's ``failing``, ``disabled`` and ``recovered`` one at a time, in the order they
    were raised."""
    endpoint = await operational_webhook(tx, event.app_id)
    if endpoint is None or not endpoint["enabled"]:
        return None
    if tx.kind == "postgresql":
        # As a fan-out parks behind an open delivery: see ``_deliveries.FAN_OUT_LOCK``.
        await tx.execute("SELECT pg_advisory_xact_lock($1)", FAN_OUT_LOCK)
    waits = bool(await open_records(tx, [endpoint["id"]], [event.webhook_id]))
    delivery_id = new_id("dlv")
    await tx.execute(
        INSERT_DELIVERY,
        delivery_id,
        endpoint["id"],
        event.app_id,
        None,
        None,
        event.type,
        event.body(),
        now,
        None if waits else now,
        None,
        event.webhook_id,
        round(event.created_at * 1_000_000),
    )
    return delivery_id


async def endpoints_failing(tx: Transaction) -> list[str]:
    """Switched-on endpoints whose last deliveries failed (candidates for the disable rule,
    which the clock alone can complete)."""
    rows = await tx.fetch(
        "SELECT id FROM webhooks WHERE enabled AND deleted_at IS NULL AND health = 'failing'"
        " ORDER BY id"
    )
    return [row["id"] for row in rows]
