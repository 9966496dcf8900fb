"""Webhooks whose deliveries mostly fail (operators: the failing-webhooks alert and
``GET /admin/webhooks/failing``), counted over the whole database."""

from __future__ import annotations

from dataclasses import dataclass

from ledgerport.storage import Reader

FAILING_WINDOW = 900.0
"""Seconds of attempt outcomes :func:`failing_webhooks` looks back on."""
FAILING_AT_LEAST = 5
"""Deliveries a webhook needs to have ended in the window before it can count as failing."""


@dataclass(frozen=True)
class FailingWebhook:
    """A webhook whose recent deliveries mostly fail, with its app and its latest failure."""

    webhook_id: str
    url: str
    enabled: bool
    app_id: str
    app_name: str
    app_status: str
    developer_email: str
    ended: int
    """Its deliveries whose latest attempt ended in the window."""
    failed: int
    """Of those, the ones that failed for good."""
    retrying: int
    """Of those, the ones whose attempt failed and that wait for a retry."""
    last_ended_at: float
    last_error: str | None
    """The latest failed attempt's error (``HTTP 500``, a timeout, a refused connection)."""
    last_response_code: int | None


async def failing_webhooks(reader: Reader, *, since: float, at_least: int) -> list[FailingWebhook]:
    """The webhooks (not deleted) whose deliveries that ended at or after ``since`` (their
    latest attempt's outcome was recorded then) are ``at_least`` or more, and more than half of
    them failed for good or wait for a retry; ordered by app and webhook.

    A delivery ended when an attempt was made: deliveries refused unsent (a switched-off
    webhook, a suspended app; their error says ``not sent``) and deliveries still waiting for
    their first attempt say nothing of the receiver and are not counted. Both the count and the
    lookup of each failing webhook's latest failure read the index on ``updated_at`` (which an
    outcome sets): one range of the window's length, however much history is kept."""
    ended = (
        "d.updated_at >= $1 AND d.attempts > 0"
        " AND d.status IN ('delivered', 'failed', 'retrying')"
        " AND (d.last_error IS NULL OR d.last_error NOT LIKE 'not sent:%')"
    )
    rows = await reader.fetch(
        # Materialized: read through the index on updated_at, not in the order of the index on
        # the webhook (which spares the grouping a sort, and reads the whole history).
        "WITH recent AS MATERIALIZED (SELECT d.webhook_id, d.status, d.updated_at"
        f" FROM webhook_deliveries d WHERE {ended})"
        " SELECT g.webhook_id, g.ended, g.failed, g.retrying, g.last_ended_at, w.url, w.enabled,"
        " w.app_id, a.name AS app_name, a.status AS app_status, u.email AS developer_email,"
        " l.last_error, l.response_code"
        " FROM (SELECT r.webhook_id, COUNT(*) AS ended,"
        " SUM(CASE WHEN r.status = 'failed' THEN 1 ELSE 0 END) AS failed,"
        " SUM(CASE WHEN r.status = 'retrying' THEN 1 ELSE 0 END) AS retrying,"
        " MAX(r.updated_at) AS last_ended_at,"
        " MAX(CASE WHEN r.status = 'delivered' THEN NULL ELSE r.updated_at END) AS last_failed_at"
        " FROM recent r GROUP BY r.webhook_id HAVING COUNT(*) >= $2"
        " AND 2 * SUM(CASE WHEN r.status = 'delivered' THEN 0 ELSE 1 END) > COUNT(*)) g"
        " JOIN webhooks w ON w.id = g.webhook_id"
        " JOIN apps a ON a.id = w.app_id"
        " JOIN users u ON u.id = a.developer_user_id"
        " LEFT JOIN webhook_deliveries l ON l.id = (SELECT d.id FROM webhook_deliveries d"
        " WHERE d.updated_at = g.last_failed_at AND d.webhook_id = g.webhook_id"
        f" AND d.status IN ('failed', 'retrying') AND {ended} ORDER BY d.id DESC LIMIT 1)"
        " WHERE w.deleted_at IS NULL ORDER BY w.app_id, w.id",
        since,
        at_least,
    )
    return [
        FailingWebhook(
            webhook_id=row["webhook_id"],
            url=row["url"],
            enabled=bool(row["enabled"]),
            app_id=row["app_id"],
            app_name=row["app_name"],
            app_status=row["app_status"],
            developer_email=row["developer_email"],
            ended=int(row["ended"]),
            failed=int(row["failed"]),
            retrying=int(row["retrying"]),
            last_ended_at=float(row["last_ended_at"]),
            last_error=row["last_error"],
            last_response_code=row["response_code"],
        )
        for row in rows
    ]
