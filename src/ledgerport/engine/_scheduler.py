"""Periodic housekeeping on fixed intervals: expired rows and events past retention are purged,
sent invoices past their due date are marked overdue, the apps keeping more run output and
attempt bodies than their storage quota have their oldest dropped, and every minute the disable
rule of failing endpoints is checked against the clock (``_lifecycle.tick_endpoints``: an
endpoint's window can close with no attempt at all) and stream endpoints no listener pulled
from for an hour are deleted. The ticker of functions' schedules
(``_schedules.py``) runs beside them."""

from __future__ import annotations

import logging

import trio

from ledgerport import apps, auth, books, catalog, queues
from ledgerport.platform import Platform
from ledgerport.storage import StorageError

from ._lifecycle import tick_endpoints
from ._schedules import ScheduleTicker

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
ENDPOINT_CHECK_INTERVAL = 60.0
"""Seconds between two checks of failing endpoints against the disable rule's clock."""


class Scheduler:
    """Runs the hourly work (the cleanup of expired rows and events past their retention, and
    overdue invoices), every few seconds the storage quota's trimming, and the ticks of
    functions' schedules (:attr:`schedules`)."""

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
        self.schedules = ScheduleTicker(platform)

    async def cleanup_once(self) -> dict[str, int]:
        """Purge what has expired; answers the rows removed by kind."""
        p = self._platform
        now = p.now()
        async with p.store.transaction(background=True) as tx:
            removed = {
                "login_session": await auth.purge_expired_login_sessions(tx, now=now),
                "authorization_request": await auth.purge_expired_requests(tx, now=now),
                "pushed_request": await auth.purge_expired_pushed_requests(tx, now=now),
                "dpop_proof": await auth.purge_spent_proofs(tx, now=now),
                "client_metadata_document": await auth.purge_expired_documents(tx, now=now),
                **await auth.purge_expired_grants(tx, now=now),
                "device_code": await auth.purge_expired_device_codes(tx, now=now),
                "cli_login": await auth.purge_expired_cli_logins(tx, now=now),
                "spent_session_token": await auth.purge_spent_session_tokens(tx, now=now),
                "signing_key": await auth.purge_expired_signing_keys(tx, now=now),
                "event": await books.purge_expired_events(tx, now=now),
                "idempotency_key": await apps.purge_idempotency_keys(tx, now=now),
                "delivery": await queues.purge_deliveries(tx, now=now),
                "function_run": await queues.purge_runs(tx, now=now),
                "operational_event": await apps.purge_operational_events(tx, now=now),
                "endpoint_health_hour": await queues.purge_health_hours(
                    tx, before_hour=apps.hour_of(now - catalog.HEALTH_WINDOW)
                ),
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

    async def check_endpoints_once(self) -> int:
        """Switch off the endpoints whose disable rule the clock completed; answers how
        many."""
        p = self._platform
        async with p.store.transaction(background=True) as tx:
            switched_off = await tick_endpoints(
                tx, now=p.now(), disable_after=p.config.webhook_disable_after
            )
        for reason, count in switched_off.items():
            p.metrics.webhook_endpoints_disabled.labels(reason).inc(count)
        return sum(switched_off.values())

    async def end_abandoned_streams_once(self) -> int:
        """Delete the stream endpoints no listener pulled from for an hour
        (``apps.STREAM_ABANDONED``), failing unsent what waits for them; answers how many."""
        p = self._platform
        async with p.store.transaction(background=True) as tx:
            now = p.now()
            ended = await apps.abandoned_streams(tx, now=now)
            await queues.end_stream_deliveries(
                tx, ended, now=now, why="no listener pulled from the stream endpoint for an hour"
            )
        return len(ended)

    async def _checking_endpoints(self) -> None:
        while True:
            try:
                await self.end_abandoned_streams_once()
                await self.check_endpoints_once()
            except StorageError as exc:
                log.warning("scheduler: checking failing endpoints: %s", exc)
            await trio.sleep(ENDPOINT_CHECK_INTERVAL)

    async def _trimming(self) -> None:
        while True:
            try:
                await self.trim_once()
            except StorageError as exc:
                log.warning("scheduler: trimming what apps keep over their quota: %s", exc)
            await trio.sleep(self._trim_interval)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._trimming)
            nursery.start_soon(self._checking_endpoints)
            await nursery.start(self.schedules.run)
            task_status.started()
            while True:
                try:
                    await self.cleanup_once()
                    await self.mark_overdue()
                except StorageError as exc:
                    log.warning("scheduler: cleaning up: %s", exc)  # again at the next turn
                await trio.sleep(self._interval)
