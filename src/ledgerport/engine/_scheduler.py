"""Periodic housekeeping: expired rows are purged on a fixed interval."""

from __future__ import annotations

import logging

import trio

from ledgerport import auth, catalog
from ledgerport.platform import Platform

log = logging.getLogger("ledgerport.scheduler")


class Scheduler:
    """Runs the hourly cleanup; later work (due retries, retention purges) joins it here."""

    def __init__(self, platform: Platform, *, interval: float = catalog.CLEANUP_INTERVAL) -> None:
        self._platform = platform
        self._interval = interval

    async def cleanup_once(self) -> dict[str, int]:
        """Purge what has expired; answers the rows removed by kind."""
        p = self._platform
        now = p.now()
        async with p.store.transaction() as tx:
            removed = {
                "login_session": await auth.purge_expired_login_sessions(tx, now=now),
                "authorization_request": await auth.purge_expired_requests(tx, now=now),
                **await auth.purge_expired_grants(tx, now=now),
                "device_code": await auth.purge_expired_device_codes(tx, now=now),
                "spent_session_token": await auth.purge_spent_session_tokens(tx, now=now),
                "signing_key": await auth.purge_expired_signing_keys(tx, now=now),
            }
            # The next session-token signing key is published ahead of its first use.
            await auth.rotate_signing_keys(tx, p.keyring, now=now)
        for kind, count in removed.items():
            p.metrics.cleanup_rows.labels(kind).inc(count)
        return removed

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            await self.cleanup_once()
            await trio.sleep(self._interval)
