"""The fair claims read the tenants with due work, (app, business) for deliveries as for runs,
with their app's developer, on both stores: the engine's shares are the developer's, and an app
with none (a client registered dynamically) is its own developer. Each read of the hot queue of
deliveries is one index step per tenant (its plan, checked on both stores), whatever one
tenant's backlog."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import trio

from ledgerport import apps, queues
from ledgerport.platform import Platform
from ledgerport.storage import Row, Store, Transaction

from ..receiver import receiving
from .data_api import owner_api
from .oauth_helpers import REDIRECT_URI
from .webhook_world import console_for

TIMEOUT = 30
QUICK = "export function handler(event) { return event.type }"


async def test_the_tenants_with_due_work_come_with_their_apps_developer(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    p = platform
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        async with receiving() as receiver:
            await console.webhook(receiver.url, ["customer.created"])
            await console.ok(
                "PUT", "/functions/quick", {"source": QUICK, "events": ["customer.created"]}
            )
            await api.customer("Due")
            async with p.store.transaction() as tx:
                now = p.now()
                # The event fanned out into a queued delivery and run, none taken at once.
                pending = await queues.pending_events(tx, 10)
                fanned = queues.plan_fan_out(
                    pending,
                    keyring=p.keyring,
                    now=now,
                    lease="nobody",
                    lease_until=now,
                    take=lambda _app, _business, _webhook: False,
                )
                await queues.write_fan_out(tx, fanned)
                registered, _ = await apps.create_app(
                    tx,
                    p.keyring,
                    now=now,
                    name="Registered client",
                    type="PUBLIC",
                    redirect_uris=[REDIRECT_URI],
                    scopes=["customers:read"],
                    developer_user_id=None,
                )
                webhook, _ = await apps.create_webhook(
                    tx,
                    p.keyring,
                    now=now,
                    app_id=registered.id,
                    url=receiver.url,
                    events=["customer.created"],
                    development=True,
                )
                await queues.create_test_delivery(tx, now=now, webhook=webhook, pinned_version=None)
            async with p.store.transaction() as tx:
                deliveries = await queues.delivery_due_times(tx)
                runs = await queues.run_due_times(tx)
    world = api.world
    assert sorted(deliveries, key=lambda tenant: tenant.app_id) == sorted(
        [
            queues.DueTenant(world.user_id, world.app_id, world.business_id, now),
            queues.DueTenant(registered.id, registered.id, "", now),
        ],
        key=lambda tenant: tenant.app_id,
    )
    assert runs == [queues.DueTenant(world.user_id, world.app_id, world.business_id, now)]


# --- One index step per tenant -------------------------------------------------------------------

BACKLOG = 2000
"""Due deliveries of the one tenant with a backlog (and as many of history, not due)."""
TENANTS = [("a1", "b1"), ("a1", "b2"), ("a1", ""), ("a2", "b1")]
"""The tenants with due deliveries: a1's backlog in b1, one delivery in b2 and one test
delivery (no business); a2's one delivery in b1."""


async def _hot_queue(store: Store) -> None:
    """Apps a1 and a2 (their own developers, one webhook each), the due deliveries of
    :data:`TENANTS`, due one second apart (the backlog first), and a1's history in b1."""
    rows: list[tuple[object, ...]] = []
    for n in range(BACKLOG):
        rows.append((f"d_backlog{n}", "w1", "a1", "b1", "queued", float(n)))
        rows.append((f"d_history{n}", "w1", "a1", "b1", "delivered", None))
    rows += [
        ("d_other", "w1", "a1", "b2", "retrying", float(BACKLOG)),
        ("d_test", "w1", "a1", None, "queued", float(BACKLOG + 1)),
        ("d_a2", "w2", "a2", "b1", "queued", float(BACKLOG + 2)),
    ]
    async with store.transaction() as tx:
        await tx.executemany(
            "INSERT INTO apps (id, client_id, name, type, redirect_uris, scopes, reviewed, status,"
            " created_at) VALUES ($1, $1, 'A', 'CONFIDENTIAL', '[]', '[]', true, 'ACTIVE', 0)",
            [("a1",), ("a2",)],
        )
        await tx.executemany(
            "INSERT INTO webhooks (id, app_id, url, events, enabled, secret, created_at,"
            " updated_at) VALUES ($1, $2, 'https://hooks.example/', '[]', true, 's', 0, 0)",
            [("w1", "a1"), ("w2", "a2")],
        )
        await tx.executemany(
            "INSERT INTO webhook_deliveries (id, webhook_id, app_id, event_id, business_id, type,"
            " body, status, attempts, created_at, updated_at, next_attempt_at)"
            " VALUES ($1, $2, $3, NULL, $4, 'customer.created', '{}', $5, 0, 0, 0, $6)",
            rows,
        )
    if store.kind == "postgresql":
        await store.autocommit.fetchval("ANALYZE")


@dataclass
class _Recording:
    """A transaction that keeps the statements it reads with, and their arguments."""

    tx: Transaction
    statements: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]:
        return self.tx.kind

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        self.statements.append((sql, args))
        return await self.tx.fetch(sql, *args)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self.tx.executemany(sql, rows)


async def _deliveries_read(store: Store, sql: str, args: tuple[Any, ...]) -> list[str]:
    """How ``sql`` reads webhook_deliveries: SQLite's plan steps; on PostgreSQL, each plan node
    reading it as ``index rows``, rows being those it read in all (run, then rolled back)."""
    if store.kind == "sqlite":
        plan = await store.autocommit.fetch(f"EXPLAIN QUERY PLAN {sql}", *args)
        return [row["detail"] for row in plan if "webhook_deliveries" in row["detail"]]

    class RolledBack(Exception):
        pass

    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("Relation Name") == "webhook_deliveries":
                rows = node["Actual Rows"] * node["Actual Loops"]
                found.append(f"{node.get('Index Name', node['Node Type'])} {rows}")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    try:
        async with store.transaction() as tx:
            explained = await tx.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
            walk(json.loads(explained) if isinstance(explained, str) else explained)
            raise RolledBack
    except RolledBack:
        pass
    return found


def _one_step_each(store: Store, reads: list[str], most: int) -> None:
    """Every read of ``reads`` goes through the hot queue's index by tenant: on SQLite an index
    search (a first entry, or a tenant's range), on PostgreSQL at most ``most`` rows in all
    (its counts are averages per loop, rounded: a bound, far below any backlog)."""
    assert reads, "the statement reads the deliveries"
    if store.kind == "sqlite":
        for step in reads:
            assert step.startswith(
                "SEARCH webhook_deliveries USING INDEX webhook_deliveries_tenant_due"
            ), reads
        return
    read = 0
    for step in reads:
        index, rows = step.rsplit(" ", 1)
        assert index == "webhook_deliveries_tenant_due", reads
        read += int(rows)
    assert read <= most, reads


async def test_the_due_tenants_are_found_one_index_step_each(store: Store) -> None:
    """The scan for the tenants with due deliveries reads each tenant's first entry of the
    index by (tenant, due time), never the backlog behind it nor the history."""
    with trio.fail_after(TIMEOUT):
        await _hot_queue(store)
        async with store.transaction() as tx:
            recording = _Recording(tx)
            due = await queues.delivery_due_times(cast(Transaction, recording))
        ((sql, args),) = recording.statements
        reads = await _deliveries_read(store, sql, args)
    assert sorted((tenant.app_id, tenant.business, tenant.developer) for tenant in due) == [
        ("a1", "", "a1"),
        ("a1", "b1", "a1"),
        ("a1", "b2", "a1"),
        ("a2", "b1", "a2"),
    ]
    assert {(t.app_id, t.business): t.due for t in due}[("a1", "b2")] == BACKLOG
    # A few steps a tenant (the next tenant, its earliest due), none for the backlog.
    _one_step_each(store, reads, most=4 * len(TENANTS))


async def test_a_claim_reads_each_tenants_oldest_through_its_own_range(store: Store) -> None:
    """Each (app, business) of a claim is read through its own range of the index: the
    backlog of a1 in b1 costs its quota, and a1's other businesses get theirs."""
    with trio.fail_after(TIMEOUT):
        await _hot_queue(store)
        async with store.transaction() as tx:
            recording = _Recording(tx)
            claimed = await queues.claim_due(
                cast(Transaction, recording),
                now=float(BACKLOG + 10),
                lease="here",
                lease_until=float(BACKLOG + 40),
                quotas=[(tenant, 3) for tenant in TENANTS],
                take=lambda _app, _business, _webhook: True,
            )
        ((sql, args),) = recording.statements
        reads = await _deliveries_read(store, sql, args)
    # In turns: each tenant's oldest in the order asked, then the backlog's next.
    assert [delivery.id for delivery in claimed] == [
        "d_backlog0",
        "d_other",
        "d_test",
        "d_a2",
        "d_backlog1",
        "d_backlog2",
    ]
    _one_step_each(store, reads, most=4 * len(TENANTS))
