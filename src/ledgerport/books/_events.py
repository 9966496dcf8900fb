"""The event log: every write records its events in the same transaction (transactional outbox).

The engine reads committed events and owns everything that happens later (deliveries, function
runs); the pull feed reads the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ledgerport import catalog
from ledgerport.ids import new_id
from ledgerport.storage import Row, Transaction


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
    """Append an event inside the caller's transaction; answers its id."""
    if catalog.event_type(type) is None:
        raise UnknownEventType(type)
    event_id = new_id("evt")
    await tx.execute(
        "INSERT INTO events (id, business_id, app_id, type, api_version, data, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7)",
        event_id,
        business_id,
        app_id,
        type,
        catalog.CURRENT_API_VERSION,
        json.dumps(data, separators=(",", ":")),
        now,
    )
    return event_id


async def events_after(tx: Transaction, after_seq: int, limit: int) -> list[Event]:
    rows = await tx.fetch(
        "SELECT * FROM events WHERE seq > $1 ORDER BY seq LIMIT $2", after_seq, limit
    )
    return [Event.from_row(r) for r in rows]
