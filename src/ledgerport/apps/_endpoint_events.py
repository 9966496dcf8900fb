"""One endpoint's operational events (contract.md, third round: ``webhook.endpoint.failing``,
``disabled`` and ``recovered``), for the endpoint's own page in the console; the app's page
lists those of all its endpoints (``_operational.py``)."""

from __future__ import annotations

from ledgerport.storage import Reader

from ._operational import OperationalEvent

ENDPOINT_EVENTS_SHOWN = 10
"""Operational events the endpoint's page shows, the newest."""


async def endpoint_events(
    reader: Reader, app_id: str, webhook_id: str, *, limit: int = ENDPOINT_EVENTS_SHOWN
) -> list[OperationalEvent]:
    """The endpoint's newest operational events, newest first (``limit`` at most); read by the
    app's index (``operational_events (app_id, created_at)``), an app having few."""
    rows = await reader.fetch(
        "SELECT * FROM operational_events WHERE app_id = $1 AND webhook_id = $2"
        " ORDER BY created_at DESC, id DESC LIMIT $3",
        app_id,
        webhook_id,
        limit,
    )
    return [OperationalEvent.from_row(row) for row in rows]
