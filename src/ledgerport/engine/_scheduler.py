"""Periodic housekeeping on a fixed interval: expired rows and events past retention are purged,
and sent invoices past their due date are marked overdue."""

from __future__ import annotations

import logging

import trio

from ledgerport import apps, auth, books, catalog, queues
from ledgerport.platform import Platform

log = logging.getLogger("ledgerport.scheduler")


OVERDUE_BATCH = 100
"""Invoices marked overdue per transaction."""


class Scheduler:
    """Runs the hourly work: the cleanup of expired rows and events past their retention, and
    overdue invoices; later work (due retries, delivery retention) joins it here."""

    def __init__(
        self,
        platform: Platform,
        *,
        interval: float = catalog.CLEANUP_INTERVAL,
        overdue_batch: int = OVERDUE_BATCH,
    ) -> None:
        self._platform = platform
        self._interval = interval
        self._overdue_batch = overdue_batch

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

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self.cleanup_once()
            await self.mark_overdue()
            await trio.sleep(self._interval)
