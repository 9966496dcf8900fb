"""An endpoint's health as the console and the CLI show it first (contract.md, third round:
the ``health`` field): kept as outcomes are recorded, never counted by scanning history.

The engine keeps, on the endpoint's row, its state (``healthy``, or ``failing`` from the first of
its deliveries to fail for good until one is delivered), the deliveries failed for good since the
last delivered, the last delivered one and the last error; and, per hour, the deliveries
delivered and failed for good (``webhook_health_hours``). The last 24 hours are the newest 24
hours' counts: the current hour and the 23 before it, so a count leaves the window between 23
and 24 hours after it was made. The transitions themselves are the engine's
(``engine/_health.py``); this module reads what they wrote.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ledgerport import catalog
from ledgerport.storage import Reader, Row, placeholders

HOUR = 3600


def hour_of(moment: float) -> int:
    """The hour a moment falls in (its bucket in ``webhook_health_hours``)."""
    return math.floor(moment / HOUR)


def health_window_start(now: float) -> int:
    """The first hour of the last 24 hours at ``now``: the current hour and the 23 before it."""
    return hour_of(now) - int(catalog.HEALTH_WINDOW // HOUR) + 1


@dataclass(frozen=True)
class EndpointState:
    """What an endpoint's row keeps of its health."""

    state: Literal["healthy", "failing"] = "healthy"
    consecutive_failures: int = 0
    last_delivery_at: float | None = None
    last_error: str | None = None
    switched_on_at: float | None = None
    failing_since: float | None = None
    """When the first delivery of the current run of failures failed for good."""
    recent_failures: tuple[float, ...] = field(default_factory=tuple)

    @classmethod
    def from_row(cls, row: Row) -> EndpointState:
        return cls(
            state=row["health"],
            consecutive_failures=int(row["consecutive_failures"]),
            last_delivery_at=row["last_delivery_at"],
            last_error=row["last_error"],
            switched_on_at=row["switched_on_at"],
            failing_since=row["failing_since"],
            recent_failures=tuple(json.loads(row["recent_failures"])),
        )


@dataclass(frozen=True)
class Counts:
    """Deliveries delivered and failed for good in the last 24 hours."""

    delivered: int = 0
    failed: int = 0


async def health_counts(
    reader: Reader, webhook_ids: Sequence[str], *, now: float
) -> dict[str, Counts]:
    """Each endpoint's counts of the last 24 hours (those with none are left out), in one
    query of at most 24 rows an endpoint."""
    if not webhook_ids:
        return {}
    first = health_window_start(now)
    rows = await reader.fetch(
        "SELECT webhook_id, SUM(delivered) AS delivered, SUM(failed) AS failed"
        " FROM webhook_health_hours"
        f" WHERE hour >= $1 AND webhook_id IN ({placeholders(len(webhook_ids), start=2)})"
        " GROUP BY webhook_id",
        first,
        *webhook_ids,
    )
    return {row["webhook_id"]: Counts(int(row["delivered"]), int(row["failed"])) for row in rows}
