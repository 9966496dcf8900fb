"""PostgreSQL's listening connection lost (its backend ended, as by a restart of PostgreSQL or
a cut connection): the store listens again on a new connection for every listener left, wakes
them all once (what was notified meanwhile is looked for again), and they hear the next
notification from another process, which without it only their slow polls would find."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
import trio

from ledgerport.storage import PostgresStore, open_postgres

from ..stores import POSTGRES_ADMIN_URL, end_listening_backends

pytestmark = pytest.mark.postgres

TIMEOUT = 30
CHANNELS = ("events", "deliveries")


class Heard:
    """Each channel's wake-ups, as a listener counts them."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(CHANNELS, 0)
        self._changed = trio.Event()

    def listener(self, channel: str) -> Callable[[], None]:
        def heard() -> None:
            self.counts[channel] += 1
            self._changed.set()
            self._changed = trio.Event()

        return heard

    async def until(self, channel: str, count: int) -> None:
        while self.counts[channel] < count:
            await self._changed.wait()


async def test_a_lost_listening_connection_is_replaced_and_its_listeners_hear_again(
    postgres_url: str,
) -> None:
    heard = Heard()
    with trio.fail_after(TIMEOUT):
        async with (
            open_postgres(postgres_url, max_size=3) as store,
            open_postgres(postgres_url, max_size=2) as other,
            store.listen("events", heard.listener("events")),
            store.listen("deliveries", heard.listener("deliveries")),
        ):
            async with other.transaction() as tx:
                await tx.notify("events")
            await heard.until("events", 1)
            assert heard.counts == {"events": 1, "deliveries": 0}

            assert await end_listening_backends(other) == 1
            # Listening again wakes every listener once: a notification sent while nobody
            # listened is not lost.
            await heard.until("events", 2)
            await heard.until("deliveries", 1)
            assert heard.counts == {"events": 2, "deliveries": 1}

            async with other.transaction() as tx:
                await tx.notify("deliveries")
            await heard.until("deliveries", 2)
            async with other.transaction() as tx:
                await tx.notify("events")
            await heard.until("events", 3)
            assert heard.counts == {"events": 3, "deliveries": 2}

            # Lost again, and again replaced.
            assert await end_listening_backends(other) == 1
            await heard.until("deliveries", 3)
            async with other.transaction() as tx:
                await tx.notify("deliveries")
            await heard.until("deliveries", 4)
            # Operators see it in the metrics (ledgerport_store_listens_lost_total).
            assert store.statistics().listens_lost == 2
            assert other.statistics().listens_lost == 0


async def test_listeners_leave_cleanly_after_the_connection_was_replaced(
    postgres_url: str,
) -> None:
    """Leaving undoes each LISTEN on the new connection and gives it back: the whole pool
    serves transactions afterwards, and a new listener hears its channel."""
    heard = Heard()
    with trio.fail_after(TIMEOUT):
        async with (
            open_postgres(postgres_url, max_size=3) as store,
            open_postgres(postgres_url, max_size=2) as other,
        ):
            async with (
                store.listen("events", heard.listener("events")),
                store.listen("deliveries", heard.listener("deliveries")),
            ):
                assert await end_listening_backends(other) == 1
                await heard.until("events", 1)
            async with store.transaction() as one, store.transaction() as two:
                async with store.transaction() as three:
                    for tx in (one, two, three):
                        assert await tx.fetchval("SELECT 1") == 1
            async with store.listen("events", heard.listener("events")):
                async with other.transaction() as tx:
                    await tx.notify("events")
                await heard.until("events", 2)


async def test_a_listener_that_comes_while_the_connection_is_lost_is_heard_after(
    postgres_url: str,
) -> None:
    heard = Heard()
    with trio.fail_after(TIMEOUT):
        async with (
            open_postgres(postgres_url, max_size=3) as store,
            open_postgres(postgres_url, max_size=2) as other,
            store.listen("events", heard.listener("events")),
        ):
            assert await end_listening_backends(other) == 1
            # No checkpoint between the loss and the new listener would let the store notice
            # it first; either way the new listener must hear its channel.
            async with store.listen("deliveries", heard.listener("deliveries")):
                await heard.until("events", 1)
                async with other.transaction() as tx:
                    await tx.notify("deliveries")
                await heard.until("deliveries", 1)


async def _set_connections(admin: PostgresStore, database: str, allowed: bool) -> None:
    async with admin.transaction() as tx:
        await tx.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(allowed).lower()}')


async def test_listening_again_is_retried_until_postgresql_takes_connections_again(
    postgres_url: str,
) -> None:
    """Every connection of the store ended and no new one allowed (PostgreSQL restarting): the
    store keeps trying, and listens again once connections are taken."""
    heard = Heard()
    database = urlsplit(postgres_url).path.lstrip("/")
    with trio.fail_after(TIMEOUT):
        async with (
            open_postgres(POSTGRES_ADMIN_URL, max_size=1) as admin,
            open_postgres(postgres_url, max_size=3) as store,
            store.listen("events", heard.listener("events")),
        ):
            await _set_connections(admin, database, allowed=False)
            try:
                async with admin.transaction() as tx:
                    await tx.fetchval(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                        " WHERE datname = $1",
                        database,
                    )
                # A try to listen again has failed: the store is refused connections.
                while store.statistics().unavailable < 1:  # noqa: ASYNC110 - no event for it
                    await trio.sleep(0.05)
                assert heard.counts["events"] == 0
            finally:
                await _set_connections(admin, database, allowed=True)
            await heard.until("events", 1)  # listening again wakes the listener
            async with open_postgres(postgres_url, max_size=1) as other:
                async with other.transaction() as tx:
                    await tx.notify("events")
                await heard.until("events", 2)
    assert store.statistics().listens_lost == 1
