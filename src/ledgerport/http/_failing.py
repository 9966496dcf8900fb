"""Webhooks whose deliveries keep failing, per app: counted for ``/metrics`` (two gauges of the
whole database, never an app id as a label) and listed for operators at
``GET /admin/webhooks/failing``.

The gauges are counted when a scrape finds them older than :data:`REFRESH` seconds, so several
scrapers (or a fast one) cost one query per interval and process. A count that fails or takes
longer than :data:`COUNT_TIMEOUT` leaves the gauges as they were: ``/metrics`` answers whatever
the database does.
"""

from __future__ import annotations

import trio

from ledgerport import queues, storage
from ledgerport.platform import Platform

REFRESH = 30.0
"""Seconds a count of the failing webhooks serves scrapes before it is made again."""
COUNT_TIMEOUT = 5.0
"""Seconds a scrape waits for the count before it answers the previous one."""


async def failing_webhooks(
    p: Platform, *, window: float = queues.FAILING_WINDOW, at_least: int = queues.FAILING_AT_LEAST
) -> list[queues.FailingWebhook]:
    """The webhooks whose deliveries that ended in the last ``window`` seconds are ``at_least``
    or more and mostly failed or wait for a retry (``queues.failing_webhooks``)."""
    return await queues.failing_webhooks(
        p.store.autocommit, since=p.now() - window, at_least=at_least
    )


async def refresh_failing_gauges(p: Platform) -> None:
    """Count the failing webhooks and their apps into the metrics, when the last count is more
    than :data:`REFRESH` seconds old."""
    metrics, now = p.metrics, p.now()
    if now - metrics.failing_counted_at < REFRESH:
        return
    # Marked first: scrapes arriving meanwhile serve the previous count instead of counting too.
    metrics.failing_counted_at = now
    with trio.move_on_after(COUNT_TIMEOUT):
        try:
            failing = await failing_webhooks(p)
        except storage.StorageError:
            return
        metrics.webhooks_failing.set(len(failing))
        metrics.webhook_apps_failing.set(len({webhook.app_id for webhook in failing}))
