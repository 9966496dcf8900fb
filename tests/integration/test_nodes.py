"""Nodes and the takeover of a dead node's claims (``queues.take_over``, ``engine.Node``), and the
graceful drain of the engine and the runner.

A node's claims are given back as soon as the node is known dead: on PostgreSQL when the mark
its process held (a session advisory lock) is free, which a second store on the same database
plays here as another process; on SQLite, which one process owns, every claim not of this
process's nodes at once. Claims given back are due at their creation: before newer work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from ledgerport import queues
from ledgerport.engine import UNRECORDED_MAX, FunctionRunner, Node
from ledgerport.http import in_process_api
from ledgerport.platform import Platform
from ledgerport.runtime import RunLimits
from ledgerport.storage import StorageUnavailable, Store, open_postgres, serving

from ..receiver import Answer
from .data_api import owner_api
from .webhook_world import console_for, engine_for, hooked

TIMEOUT = 60
DEAD = "node_dead"
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
POSTGRES_ONLY = pytest.mark.parametrize(
    "backend", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)


async def _fan_out(platform: Platform, *, lease: str | None) -> list[str]:
    """Fan the committed events out as the engine does: the deliveries claimed by ``lease``,
    or queued (due now) when it is None; answers their ids."""
    before = set(await _rows(platform.store))
    async with platform.store.transaction() as tx:
        pending = await queues.pending_events(tx, 100)
        now = platform.now()
        fanned = queues.plan_fan_out(
            pending,
            keyring=platform.keyring,
            now=now,
            lease=lease or "",
            lease_until=now + 30,
            take=lambda _app, _business, _webhook: lease is not None,
            max_rows=512,
        )
        await queues.write_fan_out(tx, fanned)
    return sorted(set(await _rows(platform.store)) - before)


async def _rows(store: Store) -> dict[str, dict[str, Any]]:
    async with store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT id, lease, next_attempt_at, created_at FROM webhook_deliveries"
        )
    return {row["id"]: row for row in rows}


async def _node_ids(store: Store) -> list[str]:
    async with store.transaction() as tx:
        return [row["id"] for row in await tx.fetch("SELECT id FROM nodes ORDER BY id")]


@asynccontextmanager
async def _other_process(store: Store, postgres_url: str | None) -> AsyncIterator[Store]:
    """The store as another process sees it: on PostgreSQL a pool of its own (its marks on
    a session of its own); SQLite has one process, so the same store."""
    if postgres_url is None:
        yield store
        return
    async with open_postgres(postgres_url) as other:
        yield other


async def _take_over_when_gone(store: Store) -> queues.TakenOver:
    while True:
        async with store.transaction() as tx:
            taken = await queues.take_over(tx, alive=[])
        if taken.nodes or not store.shared:
            return taken
        await trio.sleep(0.02)


async def _dead_node_with_claims(
    platform: Platform, client: Any, admin_headers: dict[str, str], other: Store
) -> tuple[tuple[str, str], list[str], list[str]]:
    """A node of ``other``'s that claimed the deliveries of one event (to two webhooks), then
    the deliveries of a newer event queued behind them; answers ((app id, business id),
    claimed, newer)."""
    async with hooked(client, admin_headers, ["customer.created"]) as hook:
        await hook.console.webhook(hook.receiver.url, ["customer.created"])
        await hook.api.customer()
        async with other.transaction() as tx:
            await queues.register_node(tx, node_id=DEAD, host="elsewhere", pid=1, now=0.0)
        claimed = await _fan_out(platform, lease=DEAD)
        platform.clock.advance(1.0)  # type: ignore[attr-defined]
        await hook.api.customer()
        newer = await _fan_out(platform, lease=None)
    return (hook.api.world.app_id, hook.api.world.business_id), claimed, newer


async def test_a_dead_nodes_claims_go_back_to_the_queue_before_newer_work(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
) -> None:
    other_url: str | None = store._url if store.shared else None  # type: ignore[attr-defined]
    with trio.fail_after(TIMEOUT):
        async with _other_process(store, other_url) as other:
            if store.shared:
                await other.hold(queues.NODE_KEY_PREFIX + DEAD)
            tenant, claimed, newer = await _dead_node_with_claims(
                platform, client, admin_headers, other
            )
            assert len(claimed) == 2
            assert len(newer) == 2
            if store.shared:
                # Alive: its process holds the mark. Nothing is taken.
                async with store.transaction() as tx:
                    alive = await queues.take_over(tx, alive=[])
                assert alive == queues.TakenOver((), 0, 0)
                assert await _node_ids(store) == [DEAD]
        # The other process ended (on SQLite: it is not this one). Its session's marks go when
        # the server has seen the connection close, a moment after the socket closed here.
        taken = await _take_over_when_gone(store)
        rows = await _rows(store)
        async with store.transaction() as tx:
            now = platform.now()
            claims = await queues.claim_due(
                tx,
                now=now,
                lease="node_here",
                lease_until=now + 30,
                quotas=[(tenant, 2)],
                take=lambda _app, _business, _webhook: True,
            )
    assert taken == queues.TakenOver((DEAD,), 2, 0)
    assert await _node_ids(store) == []
    for delivery_id in claimed:
        assert rows[delivery_id]["lease"] is None
        assert rows[delivery_id]["next_attempt_at"] == rows[delivery_id]["created_at"]
    assert max(rows[i]["next_attempt_at"] for i in claimed) < min(
        rows[i]["next_attempt_at"] for i in newer
    )
    # Taken-over work goes first.
    assert sorted(c.id for c in claims) == sorted(claimed)


@SQLITE_ONLY
async def test_on_sqlite_every_claim_of_another_process_is_taken_over_at_once(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    """Even a claim no node row names (a process of an older version): one process owns the
    file, so no claim but this process's can be alive."""
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await hook.api.customer()
            claimed = await _fan_out(platform, lease="engine_of_a_process_before")
        await store.hold(queues.NODE_KEY_PREFIX + "node_here")
        async with store.transaction() as tx:
            taken = await queues.take_over(tx, alive=["node_here"])
    assert taken == queues.TakenOver((), len(claimed), 0)
    assert all(row["lease"] is None for row in (await _rows(store)).values())


@POSTGRES_ONLY
async def test_a_node_takes_over_a_dead_node_within_a_second(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    """Two nodes on one PostgreSQL database: one dies (its connections close, its claims stay
    behind) and the other gives its claims back at its next look, and wakes the claimers."""
    url: str = store._url  # type: ignore[attr-defined]
    woken = trio.Event()
    with trio.fail_after(TIMEOUT):
        async with open_postgres(url) as dying:
            await dying.hold(queues.NODE_KEY_PREFIX + DEAD)
            await _dead_node_with_claims(platform, client, admin_headers, dying)
        node = Node(platform, every=0.05)
        async with (
            store.listen(queues.DELIVERIES_CHANNEL, woken.set),
            trio.open_nursery() as nursery,
        ):
            await nursery.start(node.run)
            await woken.wait()
            nursery.cancel_scope.cancel()
    rows = await _rows(store)
    assert all(row["lease"] is None for row in rows.values())
    assert await _node_ids(store) == []  # the dead one taken over, the live one stopped
    assert platform.metrics.claims_taken_over.labels("delivery")._value.get() == 2


@POSTGRES_ONLY
async def test_a_mark_held_by_a_live_process_cannot_be_taken_twice(
    store: Store,
) -> None:
    url: str = store._url  # type: ignore[attr-defined]
    key = queues.NODE_KEY_PREFIX + "node_one"
    with trio.fail_after(TIMEOUT):
        assert await store.hold(key) is True
        assert await store.hold(key) is False  # held already: nothing to do
        async with open_postgres(url) as other:
            with pytest.raises(StorageUnavailable):
                await other.hold(key)
            await store.let_go(key)
            assert await other.hold(key) is True
            assert store.holding == frozenset()
            assert other.holding == {key}


@POSTGRES_ONLY
async def test_a_lost_mark_is_taken_again(store: Store) -> None:
    """The connection holding the marks broke (PostgreSQL restarted): the next ``hold``
    takes every mark again on a new one and says so."""
    with trio.fail_after(TIMEOUT):
        await store.hold("node:a")
        await store.hold("node:b")
        store._hold_conn.terminate()  # type: ignore[attr-defined]
        assert await store.hold("node:a") is True
        async with store.transaction() as tx:
            held = await tx.fetchval(
                "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND pid <> pg_backend_pid() AND database ="
                " (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        await store.let_go("node:a")
        await store.let_go("node:b")
    assert held == 2


# --- a graceful stop --------------------------------------------------------------------------


async def test_a_draining_engine_finishes_its_attempts_and_gives_back_what_waits(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    """Attempts in flight end and are recorded; deliveries waiting for a slot are not
    attempted and are given back, due at once; nothing is sent twice."""
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            hook.receiver.default = Answer(200, delay=0.5)
            for _ in range(3):
                await hook.api.customer()
            async with engine_for(platform, in_flight=1) as engine:
                await engine.dispatch_once()
                await hook.receiver.wait_for(1)
                assert engine.held == 3
                await engine.drain()
                assert engine.held == 0
            async with store.transaction() as tx:
                rows = await tx.fetch("SELECT status, lease FROM webhook_deliveries")
    assert len(hook.receiver.received) == 1
    assert sorted((row["status"], row["lease"]) for row in rows) == [
        ("delivered", None),
        ("queued", None),
        ("queued", None),
    ]


SLOW = """
export async function handler() {
  const started = Date.now();
  while (Date.now() - started < 300) {}
  return "done";
}
"""


async def test_a_draining_runner_lets_its_run_finish_and_claims_no_more(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        await console.ok("PUT", "/functions/f", {"source": SLOW, "events": ["customer.created"]})
        await api.customer()
        await api.customer()
        async with engine_for(platform) as engine:
            await engine.dispatch_once()
        async with in_process_api(app, "http://localhost") as call:
            runner = FunctionRunner(platform, workers=1, limits=RunLimits(wall=30), api=call)
            async with trio.open_nursery() as nursery:
                await nursery.start(runner.run)
                while not runner.busy:  # noqa: ASYNC110 - the runner has no event for it
                    await trio.sleep(0.01)
                await runner.drain()
                nursery.cancel_scope.cancel()
        async with store.transaction() as tx:
            rows = await tx.fetch("SELECT status, attempts FROM function_runs ORDER BY status")
    assert [(row["status"], row["attempts"]) for row in rows] == [("queued", 0), ("succeeded", 1)]


# --- what a crash can send twice ----------------------------------------------------------------


async def test_answered_attempts_wait_for_their_outcomes_to_be_written_beyond_a_bound(
    platform: Platform, client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    """With the database held (a slow disk, a lock), the engine sends no more than
    UNRECORDED_MAX attempts whose outcome it has not written: a crash then sends at most
    those, and the attempts in flight, twice. Once the database answers, the rest goes out."""
    events = UNRECORDED_MAX * 2
    written: list[int] = []
    release = trio.Event()

    async def hold_the_database(task_status: trio.TaskStatus[None]) -> None:
        async with store.transaction() as tx:
            rows = await tx.fetch(f"SELECT status FROM webhook_deliveries{tx.row_lock}")
            written.append(sum(row["status"] == "delivered" for row in rows))
            task_status.started()
            await release.wait()

    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            for _ in range(events):
                await hook.api.customer()
            async with engine_for(platform, in_flight=1) as engine, trio.open_nursery() as n:
                await engine.dispatch_once()
                await n.start(hold_the_database)
                # Every outcome not written by then counts against the bound.
                await hook.receiver.wait_for(written[0] + UNRECORDED_MAX)
                await trio.sleep(0.5)  # room for any attempt past the bound to arrive
                sent_while_held = len(hook.receiver.received)
                release.set()
                await hook.receiver.wait_for(events)
                await engine.settle()
    assert sent_while_held <= written[0] + UNRECORDED_MAX + 1
    assert len({r.headers["x-webhook-id"] for r in hook.receiver.received}) == events


def test_a_second_process_cannot_serve_the_same_sqlite_file(tmp_path: Path) -> None:
    """A starting node on SQLite takes over every claim but its own: a second serving
    process on the same file is refused, with a reason, not let in to send twice."""
    path = str(tmp_path / "ledgerport.db")
    with serving(path):
        with pytest.raises(StorageUnavailable, match="another process serves"):
            with serving(path):
                pass  # pragma: no cover - refused
    with serving(path):
        pass  # free again once the first stopped
