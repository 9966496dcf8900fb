"""PostgreSQL's listening connection lost (its backend ended, as by a restart of PostgreSQL or
a cut connection): the store listens again on a new connection for every listener left, wakes
them all once (what was notified meanwhile is looked for again), and they hear the next
notification from another process, which without it only their slow polls would find."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from ledgerport.storage import PostgresStore, open_postgres

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


async def _end_listening_backends(other: PostgresStore) -> int:
    """End every other backend of the database whose last statement was a LISTEN."""
    async with other.transaction() as tx:
        ended = await tx.fetchval(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND query LIKE 'LISTEN %') AS ended"
        )
    return int(ended)


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

            assert await _end_listening_backends(other) == 1
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
            assert await _end_listening_backends(other) == 1
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
                assert await _end_listening_backends(other) == 1
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
            assert await _end_listening_backends(other) == 1
            # No checkpoint between the loss and the new listener would let the store notice
            # it first; either way the new listener must hear its channel.
            async with store.listen("deliveries", heard.listener("deliveries")):
                await heard.until("events", 1)
                async with other.transaction() as tx:
                    await tx.notify("deliveries")
                await heard.until("deliveries", 1)
