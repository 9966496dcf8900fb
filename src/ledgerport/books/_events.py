"""The event log: every write records its events in the same transaction (transactional outbox).

The engine reads committed events and owns everything that happens later (deliveries, function
runs); the pull feed reads the same rows.

A business's events become visible in ``seq`` order. A reader pages the log by ``seq`` (the
feed's cursor is the last event it saw), so an event that became visible after a later one would
be skipped for good, and a sequence alone does not prevent that on PostgreSQL: two transactions
draw ``seq`` 10 and 11 and the second may commit first. So ``record_event`` only queues the event
in the transaction (``Transaction.queue``); just before the commit, the transaction takes its
businesses' event keys (``Transaction.serialize``'s locks, in sorted order; on PostgreSQL in the
statement that inserts the events), inserts its events, which draw their ``seq`` now, and
commits, releasing the keys. The next transaction with events of the
same business draws its ``seq`` only after this one has committed or rolled back. The keys are
held only for the insert and the commit, and a transaction holding one waits for nothing but
another's commit: no deadlock with the rows the write itself locked. Writers of different
businesses do not wait on each other; SQLite has one writer at a time anyway.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgerport import catalog
from ledgerport.ids import new_id
from ledgerport.storage import Row, Transaction

EVENTS_CHANNEL = "events"
"""Notified by every commit that records events. Each event is also marked for the dispatcher
(``event_dispatch``) in the same transaction, so what was committed is fanned out exactly once
(``queues.write_fan_out``)."""


class UnknownEventType(ValueError):
    """Code tried to record an event that is not in the catalog."""


@dataclass(frozen=True)
class Event:
    id: str
    seq: int
    type: str
    business_id: str | None
    app_id: str | None
    api_version: str
    created: float
    data: Mapping[str, Any]

    @classmethod
    def from_row(cls, row: Row) -> Event:
        return cls(
            id=row["id"],
            seq=int(row["seq"]),
            type=row["type"],
            business_id=row["business_id"],
            app_id=row["app_id"],
            api_version=row["api_version"],
            created=float(row["created_at"]),
            data=json.loads(row["data"]),
        )


async def record_event(
    tx: Transaction,
    *,
    now: float,
    type: str,
    data: Mapping[str, Any],
    business_id: str | None,
    app_id: str | None = None,
) -> str:
    """Record an event in the caller's transaction (written at its commit); answers its id."""
    if catalog.event_type(type) is None:
        raise UnknownEventType(type)
    event_id = new_id("evt")
    tx.queue("events", _insert_events).append(
        (
            event_id,
            business_id,
            app_id,
            type,
            catalog.CURRENT_API_VERSION,
            json.dumps(data, separators=(",", ":")),
            now,
        )
    )
    return event_id


async def _insert_events(tx: Transaction, rows: list[Any]) -> None:
    """The transaction's queued events, inserted at its commit (see the module's docstring)."""
    keys = [f"events:{business_id}" for business_id in sorted({row[1] or "" for row in rows})]
    if tx.kind == "postgresql":
        # One statement: the businesses' keys (Transaction.serialize's locks, in sorted order),
        # then the events, then the dispatcher's marks in the events' order. The keys are an
        # uncorrelated subquery of the insert's condition: evaluated once, before any event
        # row is made, so before any seq is drawn.
        await tx.execute(
            "WITH added AS (INSERT INTO events"
            " (id, business_id, app_id, type, api_version, data, created_at)"
            " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],"
            " $5::text[], $6::text[], $7::float8[])"
            " WHERE (SELECT count(pg_advisory_xact_lock(hashtextextended(key, 0))) FROM"
            " (SELECT key FROM unnest($8::text[]) AS key ORDER BY key) AS keys) >= 0"
            " RETURNING id, seq)"
            " INSERT INTO event_dispatch (event_id) SELECT id FROM added ORDER BY seq",
            *map(list, zip(*rows, strict=True)),
            keys,
        )
    else:
        for key in keys:
            await tx.serialize(key)
        await tx.executemany(
            "INSERT INTO events (id, business_id, app_id, type, api_version, data, created_at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7)",
            rows,
        )
        # The dispatcher's marks, drawn in the same order (see EVENTS_CHANNEL).
        await tx.executemany(
            "INSERT INTO event_dispatch (event_id) VALUES ($1)", [(r[0],) for r in rows]
        )
    await tx.notify(EVENTS_CHANNEL)


async def events_after(tx: Transaction, after_seq: int, limit: int) -> list[Event]:
    rows = await tx.fetch(
        "SELECT * FROM events WHERE seq > $1 ORDER BY seq LIMIT $2", after_seq, limit
    )
    return [Event.from_row(r) for r in rows]
