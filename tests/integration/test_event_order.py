"""A business's events become visible in ``seq`` order, on both backends.

A reader pages the log by ``seq``: were an event with a lower ``seq`` to commit after one with a
higher, a reader between the two commits would page past it and never see it.
"""

from __future__ import annotations

import json

import pytest
import trio

from ledgerport import books
from ledgerport.storage import Store, Transaction

from ..stores import open_test_store

TIMEOUT = 30
NOW = 1_700_000_000.0


async def _business(store: Store) -> str:
    async with store.transaction() as tx:
        business = await books.create_business(tx, now=NOW, name="Northwind")
    return business.id


async def _record(tx: Transaction, business_id: str, name: str) -> str:
    return await books.record_event(
        tx, now=NOW, type="customer.created", data={"name": name}, business_id=business_id
    )


async def _log(store: Store, business_id: str) -> list[str]:
    async with store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT data FROM events WHERE business_id = $1 ORDER BY seq", business_id
        )
    return [json.loads(row["data"])["name"] for row in rows]


async def test_an_event_recorded_first_but_committed_last_comes_last(store: Store) -> None:
    """The log's order is the order of the commits (on SQLite the quick writer waits for the
    slow one to commit; on PostgreSQL it commits first)."""
    business_id = await _business(store)
    first_recorded = trio.Event()
    committed: list[str] = []

    async def slow() -> None:
        async with store.transaction() as tx:
            await _record(tx, business_id, "slow")
            first_recorded.set()
            await trio.sleep(0.3)
        committed.append("slow")

    async def quick() -> None:
        await first_recorded.wait()
        async with store.transaction() as tx:
            await _record(tx, business_id, "quick")
        committed.append("quick")

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            nursery.start_soon(quick)

    assert await _log(store, business_id) == committed
    if store.kind == "postgresql":
        assert committed == ["quick", "slow"]


@pytest.mark.parametrize("writers", [8])
async def test_concurrent_writers_never_let_a_reader_page_past_an_event(
    store: Store, writers: int
) -> None:
    """Readers page the log while writers commit; every reader, paging by ``seq`` from where it
    left off, ends up with every event exactly once."""
    business_id = await _business(store)
    done = trio.Event()
    pages: list[list[str]] = [[] for _ in range(2)]

    async def writer(index: int) -> None:
        for round_ in range(5):
            async with store.transaction() as tx:
                await _record(tx, business_id, f"w{index}-{round_}")
                await trio.sleep(0.01 * ((index + round_) % 3))

    async def reader(seen: list[str]) -> None:
        after = 0
        while True:
            finished = done.is_set()
            async with store.transaction() as tx:
                rows = await tx.fetch(
                    "SELECT seq, data FROM events WHERE business_id = $1 AND seq > $2 ORDER BY seq",
                    business_id,
                    after,
                )
            for row in rows:
                after = int(row["seq"])
                seen.append(json.loads(row["data"])["name"])
            if finished:
                return
            await trio.sleep(0.005)

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as readers:
            for seen in pages:
                readers.start_soon(reader, seen)
            async with trio.open_nursery() as nursery:
                for index in range(writers):
                    nursery.start_soon(writer, index)
            done.set()

    expected = sorted(f"w{i}-{r}" for i in range(writers) for r in range(5))
    for seen in pages:
        assert sorted(seen) == expected


@pytest.mark.postgres
async def test_events_wait_for_their_business_key_before_drawing_a_seq(
    asyncio_loop: object,
) -> None:
    """On PostgreSQL the business's key is taken in the statement that inserts the events:
    while another transaction holds it, a commit with an event of that business waits, and no
    ``seq`` is drawn until the key is free."""
    async with open_test_store("postgresql") as store:
        business_id = await _business(store)
        held, release, written = trio.Event(), trio.Event(), trio.Event()

        async def last_seq() -> int:
            value = await store.autocommit.fetchval(
                "SELECT last_value FROM pg_sequences WHERE sequencename ="
                " (SELECT pg_get_serial_sequence('events', 'seq')::regclass::text)"
            )
            return int(value or 0)

        async def holder() -> None:
            async with store.transaction() as tx:
                await tx.serialize(f"events:{business_id}")
                held.set()
                await release.wait()

        async def writer() -> None:
            await held.wait()
            async with store.transaction() as tx:
                await _record(tx, business_id, "waited")
            written.set()

        with trio.fail_after(TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(holder)
                nursery.start_soon(writer)
                await held.wait()
                before = await last_seq()
                with trio.move_on_after(0.5):
                    await written.wait()
                assert not written.is_set(), "the commit waited for the key"
                assert await last_seq() == before, "no seq drawn while waiting"
                release.set()
                await written.wait()
        assert await _log(store, business_id) == ["waited"]
        assert await last_seq() > before
