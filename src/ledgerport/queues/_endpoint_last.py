"""The newest delivery of each of an app's endpoints, for the console's list of webhooks: the
endpoint's health keeps when it last delivered and its last error, not what its newest
delivery is doing now (queued, retrying, failed), which the list shows beside them."""

from __future__ import annotations

from ledgerport.storage import Reader

from ._deliveries import Delivery

_COLUMNS = (
    "d.id, d.webhook_id, d.event_id, d.type, d.status, d.attempts, d.response_code,"
    " d.last_error, d.created_at, d.next_attempt_at"
)


async def last_deliveries(reader: Reader, app_id: str) -> dict[str, Delivery]:
    """Each of the app's endpoints' newest delivery (by creation, then id), by webhook id;
    those with none are left out. One statement for the whole app: one index probe an
    endpoint (``webhook_deliveries (webhook_id, created_at)``, read from its newest end), so
    at most WEBHOOKS_PER_APP_MAX probes whatever the history kept."""
    rows = await reader.fetch(
        f"SELECT {_COLUMNS} FROM webhooks w JOIN webhook_deliveries d ON d.id = ("
        " SELECT n.id FROM webhook_deliveries n WHERE n.webhook_id = w.id"
        " ORDER BY n.created_at DESC, n.id DESC LIMIT 1)"
        " WHERE w.app_id = $1 AND w.deleted_at IS NULL AND w.kind = 'endpoint'",
        app_id,
    )
    return {row["webhook_id"]: Delivery.from_row(row) for row in rows}
