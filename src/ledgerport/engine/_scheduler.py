"""Periodic housekeeping on fixed intervals: expired rows and events past retention are purged,
sent invoices past their due date are marked overdue, and the apps keeping more run output and
attempt bodies than their storage quota have their oldest dropped."""

from __future__ import annotations

import logging

import trio

from ledgerport import apps, auth, books, catalog, queues
from ledgerport.platform import Platform

log = logging.getLogger("ledgerport.scheduler")


OVERDUE_BATCH = 100
"""Invoices marked overdue per transaction."""
TRIM_INTERVAL = 5.0
"""Seconds between two passes of the storage quota's trimming: an app goes past its quota by
what it writes in that time at most (about 25 MB for the heaviest measured, 118 KiB a run)."""
TRIM_APPS = 100
"""Apps over their quota one pass trims at most, those keeping the most first."""
TRIM_BATCHES = 40
"""Trimming transactions one pass spends on one app at most (of queues.TRIM_BATCH items)."""


class Scheduler:
    """Runs the hourly work (the cleanup of expired rows and events past their retention, and
    overdue invoices) and, every few seconds, the storage quota's trimming."""

    def __init__(
        self,
        platform: Platform,
        *,
        interval: float = catalog.CLEANUP_INTERVAL,
        overdue_batch: int = OVERDUE_BATCH,
        trim_interval: float = TRIM_INTERVAL,
    ) -> None:
        self._platform = platform
        self._interval = interval
        self._overdue_batch = overdue_batch
        self._trim_interval = trim_interval

    async def cleanup_once(self) -> dict[str, int]:
        """Purge what has expired; answers the rows removed by kind."""
        p = self._platform
        now = p.now()
        async with p.store.transaction(background=True) as tx:
            removed = {
                "login_session": await auth.purge_expired_login_sessions(tx, now=now),
                "authorization_request": await auth.purge_expired_requests(tx, now=now),
                **await auth.purge_expired_grants(tx, now=now),
                "device_code": await auth.purge_expired_device_codes(tx, now=now),
                "spent_session_token": await auth.purge_spent_session_tokens(tx, now=now),
                "signing_key": await auth.purge_expired_signing_keys(tx, now=now),
                "event": await books.purge_expired_events(tx, now=now),
                "idempotency_key": await apps.purge_idempotency_keys(tx, now=now),
                "delivery": await queues.purge_deliveries(tx, now=now),
                "function_run": await queues.purge_runs(tx, now=now),
            }
            # What the purged deliveries and runs kept: deleted webhooks and functions.
            await apps.purge_deleted_webhooks(tx, now=now)
            await apps.purge_deleted_functions(tx, now=now)
            # The next session-token signing key is published ahead of its first use.
            await auth.rotate_signing_keys(tx, p.keyring, now=now)
        for kind, count in removed.items():
            p.metrics.cleanup_rows.labels(kind).inc(count)
        return removed

    async def mark_overdue(self) -> int:
        """Mark every sent invoice whose due date has passed overdue, a batch per transaction;
        answers how many."""
        p = self._platform
        marked = 0
        while True:
            async with p.store.transaction(background=True) as tx:
                looked_at, batch = await books.mark_overdue_invoices(
                    tx, now=p.now(), limit=self._overdue_batch
                )
            marked += batch
            if looked_at < self._overdue_batch:
                return marked

    async def trim_once(self) -> dict[str, queues.Trimmed]:
        """Drop the oldest run output and attempt bodies of every app keeping more than the
        storage quota (``LEDGERPORT_APP_STORAGE_QUOTA_MB``), until it keeps no more, a batch a
        transaction; answers what was dropped, by app."""
        p = self._platform
        quota = p.config.app_storage_quota
        async with p.store.transaction(background=True) as tx:
            over = await queues.apps_over_quota(tx, quota=quota, limit=TRIM_APPS)
        p.metrics.app_storage_over_quota.set(len(over))
        dropped: dict[str, queues.Trimmed] = {}
        for app_id, _ in over:
            for _ in range(TRIM_BATCHES):
                async with p.store.transaction(background=True) as tx:
                    trimmed = await queues.trim_oldest(tx, app_id=app_id, quota=quota, now=p.now())
                self._count(trimmed)
                dropped[app_id] = dropped.get(app_id, queues.Trimmed()) + trimmed
                if trimmed.items < queues.TRIM_BATCH:
                    break  # within the quota, or nothing more it can drop now
        return dropped

    def _count(self, trimmed: queues.Trimmed) -> None:
        metrics = self._platform.metrics
        for kind, size, items in (
            ("run_output", trimmed.run_bytes, trimmed.runs),
            ("attempt_body", trimmed.attempt_bytes, trimmed.attempts),
        ):
            if items:
                metrics.app_storage_trimmed_bytes.labels(kind).inc(size)
                metrics.app_storage_trimmed_items.labels(kind).inc(items)

    async def _trimming(self) -> None:
        while True:
            await self.trim_once()
            await trio.sleep(self._trim_interval)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._trimming)
            task_status.started()
            while True:
                await self.cleanup_once()
                await self.mark_overdue()
                await trio.sleep(self._interval)
