"""The storage quota (``LEDGERPORT_APP_STORAGE_QUOTA_MB``): what an app keeps of run output and
attempt bodies is counted in the transactions that write, replace, trim and purge it; past the
quota its oldest output goes first, runs' and attempts' by age together, a bounded batch a
transaction, until it keeps no more than the quota; nothing of another app is touched; the
console's pages and answers say what was dropped, and the metrics count it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import trio

from ledgerport import apps, catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import Scheduler
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..conftest import PLATFORM_ENV
from ..platforms import build_platform
from ..receiver import Answer
from .oauth_helpers import login
from .test_console_debug_pages import _page
from .test_function_debugging import run_all, world_of
from .test_migrations import _migrate_up_to, _seed_app_and_installation
from .webhook_world import Hooked, deliver, engine_for, hooked

TIMEOUT = 60
QUOTA = 1024 * 1024
"""The quota of these tests: LEDGERPORT_APP_STORAGE_QUOTA_MB=1."""
RUN_OUTPUT = 120_000
"""About what the heaviest app measured wrote a run (118 KiB)."""
BODY = queues.RESPONSE_BODY_KEPT


@pytest.fixture
async def platform(store: Store, clock: FrozenClock) -> AsyncIterator[Platform]:
    """The suite's platform with a storage quota of 1 MiB an app."""
    made = await build_platform(
        store, clock, {**PLATFORM_ENV, "LEDGERPORT_APP_STORAGE_QUOTA_MB": "1"}
    )
    async with made.app_directory.listening(store):
        yield made


@dataclass
class Tenant:
    """An app with a function and a webhook."""

    hook: Hooked
    function: apps.HostedFunction
    webhook: apps.Webhook

    @property
    def app_id(self) -> str:
        return self.hook.api.world.app_id


@asynccontextmanager
async def tenant(client: Any, admin_headers: dict[str, str], store: Store) -> AsyncIterator[Tenant]:
    async with hooked(client, admin_headers, ["customer.created"]) as hook:
        body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
        await hook.console.ok("PUT", "/functions/f", body)
        async with store.transaction() as tx:
            app_id = hook.api.world.app_id
            function = await apps.get_function(tx, app_id, "f")
            webhook = await apps.get_webhook(tx, app_id, hook.webhook["id"])
        yield Tenant(hook, function, webhook)


def _ended(run_id: str, lease: str, at: float, size: int, status: str) -> queues.RunEnded:
    """A run's end that wrote about ``size`` bytes: half as log lines, half as its result."""
    return queues.RunEnded(
        run_id=run_id,
        lease=lease,
        status=status,  # type: ignore[arg-type]
        attempts=1,
        version=1,
        duration_ms=1.0,
        logs=["l" * (size // 2)],
        error="Error: kept" if status != "succeeded" else None,
        result=json.dumps("r" * (size // 2)),
        finished_at=at,
        next_attempt_at=at + 10 if status == "retrying" else None,
        stack="Error: kept\n    at handler (function.js:1:1)" if status != "succeeded" else None,
    )


async def ran(
    store: Store, who: Tenant, *, at: float, size: int = RUN_OUTPUT, status: str = "succeeded"
) -> str:
    """A run of the tenant's function created at ``at`` and recorded as the runner records one,
    having written about ``size`` bytes; answers its id."""
    async with store.transaction() as tx:
        run_id = await queues.create_test_run(
            tx,
            now=at,
            function_id=who.function.id,
            app_id=who.app_id,
            event_type="customer.created",
            pinned_version=None,
        )
    await record_again(store, run_id, at=at, size=size, status=status)
    return run_id


async def record_again(
    store: Store, run_id: str, *, at: float, size: int, status: str, lease: str = "lease"
) -> None:
    """Claim the run under ``lease`` and record its end as having written ``size`` bytes."""
    async with store.transaction() as tx:
        await tx.execute("UPDATE function_runs SET lease = $1 WHERE id = $2", lease, run_id)
        await queues.record_runs(tx, [_ended(run_id, lease, at, size, status)])


async def attempted(store: Store, who: Tenant, *, at: float, body: bytes | None) -> str:
    """A delivery of the tenant's webhook attempted at ``at`` and answered with ``body`` (None:
    no attempt was made), recorded as the engine records one; answers its id."""
    async with store.transaction() as tx:
        delivery_id = await queues.create_test_delivery(
            tx, now=at, webhook=who.webhook, pinned_version=None
        )
        await tx.execute("UPDATE webhook_deliveries SET lease = 'lease' WHERE id = $1", delivery_id)
        made = None if body is None else queues.AttemptMade(at, 1.0, body, False, {"A": "b"})
        await queues.record_outcomes(
            tx,
            [
                queues.AttemptOutcome(
                    delivery_id=delivery_id,
                    lease="lease",
                    status="delivered" if body is not None else "failed",
                    attempts=1,
                    response_code=200 if body is not None else None,
                    error=None,
                    finished_at=at,
                    next_attempt_at=None,
                    first_attempt_at=at,
                    made=made,
                )
            ],
        )
    return delivery_id


async def kept(store: Store, app_id: str) -> queues.AppStorage:
    async with store.transaction() as tx:
        return await queues.app_storage(tx, app_id)


async def recount(store: Store, app_id: str) -> int:
    """What the app keeps, counted from every row (what no write does)."""
    async with store.transaction() as tx:
        runs = await tx.fetchval(
            "SELECT COALESCE(SUM(output_bytes), 0) FROM function_runs WHERE app_id = $1", app_id
        )
        bodies = await tx.fetchval(
            "SELECT COALESCE(SUM(length(response_body)), 0) FROM webhook_attempts"
            " WHERE app_id = $1",
            app_id,
        )
        texts = await tx.fetch(
            "SELECT logs, result, error, error_stack, log_times FROM function_runs"
            " WHERE app_id = $1",
            app_id,
        )
    written = sum(len(value.encode()) for row in texts for value in row.values() if value)
    assert int(runs) == written
    return int(runs) + int(bodies)


async def _run_size(store: Store, who: Tenant) -> int:
    """What one run of :func:`ran` writes, measured on a run of the same size."""
    async with store.transaction() as tx:
        return int(
            await tx.fetchval(
                "SELECT MAX(output_bytes) FROM function_runs WHERE app_id = $1", who.app_id
            )
        )


async def _oldest_first(store: Store, app_id: str) -> list[tuple[str, bool]]:
    """The app's runs and attempts, oldest first, each with whether its output was dropped."""
    async with store.transaction() as tx:
        runs = await tx.fetch(
            "SELECT id, created_at AS at, output_dropped_at FROM function_runs WHERE app_id = $1",
            app_id,
        )
        attempts = await tx.fetch(
            "SELECT delivery_id AS id, started_at AS at, body_dropped_at AS output_dropped_at"
            " FROM webhook_attempts WHERE app_id = $1",
            app_id,
        )
    rows = sorted([*runs, *attempts], key=lambda row: (float(row["at"]), row["id"]))
    return [(row["id"], row["output_dropped_at"] is not None) for row in rows]


def _metric(platform: Platform, name: str, kind: str) -> float:
    value = platform.metrics.registry.get_sample_value(name, {"kind": kind})
    return 0.0 if value is None else value


# --- What an app keeps is counted ----------------------------------------------------------------


async def test_what_an_app_keeps_is_counted_as_it_is_written_replaced_and_purged(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            app = who.app_id
            start = clock.now()
            run_id = await ran(store, who, at=start, size=10_000, status="retrying")
            first = (await kept(store, app)).kept_bytes
            # Tried again: its output replaces the earlier one.
            await record_again(store, run_id, at=start + 10, size=3_000, status="failed")
            replaced = (await kept(store, app)).kept_bytes
            # A claim that lost its lease records nothing and counts nothing.
            await record_again(store, run_id, at=start + 20, size=50_000, status="succeeded")
            async with store.transaction() as tx:
                await queues.record_runs(tx, [_ended(run_id, "lost", start, 9_000, "failed")])
            await attempted(store, who, at=start, body=b"b" * BODY)
            await attempted(store, who, at=start, body=b"")
            await attempted(store, who, at=start, body=None)
            written = (await kept(store, app)).kept_bytes
            counted = await recount(store, app)
            clock.advance(catalog.DELIVERY_RETENTION + 30)
            await Scheduler(platform).cleanup_once()
            purged = await kept(store, app)
            left = await recount(store, app)
    assert 10_000 < first < 10_200
    assert 3_000 < replaced < 3_200
    assert written == counted
    assert 50_000 + BODY < written < 50_200 + BODY
    assert (purged.kept_bytes, left) == (0, 0)


async def test_the_runner_and_the_delivery_engine_count_what_they_record(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, store: Store
) -> None:
    source = (
        "export function handler(event, context) {\n"
        "  context.log('x'.repeat(20000));\n"
        "  return { name: event.data.name };\n"
        "}\n"
    )
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            body = {"source": source, "events": ["customer.created"]}
            await world.console.ok("PUT", "/functions/f", body)
            async with (
                hooked(client, admin_headers, ["customer.created"]) as hook,
                engine_for(platform) as engine,
            ):
                hook.receiver.default = Answer(200, body=b"a" * 1000)
                await hook.api.customer()
                await deliver(engine)
                await world.api.customer("Counted Ltd")
                await run_all(platform, world)
                runs_app = await kept(store, world.api.world.app_id)
                runs_counted = await recount(store, world.api.world.app_id)
                hook_app = await kept(store, hook.api.world.app_id)
    assert 20_000 < runs_app.kept_bytes == runs_counted < 21_000
    assert hook_app.kept_bytes == 1000


async def test_the_migration_counts_what_each_app_already_keeps(empty_store: Store) -> None:
    with trio.fail_after(TIMEOUT):
        await _migrate_up_to(empty_store, 25)
        await _seed_app_and_installation(empty_store)
        async with empty_store.transaction() as tx:
            await tx.execute(
                "INSERT INTO functions (id, app_id, name, events, version, created_at,"
                " updated_at, latest_version) VALUES ('fn_1', 'app_1', 'f', '[]', 1, 1, 1, 1)"
            )
            await tx.execute(
                "INSERT INTO function_runs (id, function_id, app_id, type, body, status,"
                " attempts, logs, error, result, error_stack, log_times, created_at,"
                " updated_at) VALUES ('run_1', 'fn_1', 'app_1', 'customer.created', '{}',"
                " 'failed', 1, '[\"é\"]', 'Error: x', '1', 'Error: x\n    at f', '[3]', 1, 1)"
            )
            await tx.execute(
                "INSERT INTO webhooks (id, app_id, url, events, enabled, secret, created_at,"
                " updated_at) VALUES ('whk_1', 'app_1', 'https://h.example', '[]', true, 's',"
                " 1, 1)"
            )
            await tx.execute(
                "INSERT INTO webhook_deliveries (id, webhook_id, app_id, type, body, status,"
                " attempts, created_at, updated_at) VALUES ('dlv_1', 'whk_1', 'app_1',"
                " 'customer.created', '{}', 'delivered', 1, 1, 1)"
            )
            await tx.executemany(
                "INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms,"
                " response_code, response_body, response_truncated, request_headers)"
                " VALUES ('dlv_1', $1, 1, 1, 200, $2, false, '{}')",
                [(1, b"abc"), (2, b""), (3, None)],
            )

        await empty_store.migrate()

        async with empty_store.transaction() as tx:
            storage = await queues.app_storage(tx, "app_1")
            run_bytes = await tx.fetchval("SELECT output_bytes FROM function_runs")
            owners = await tx.fetch("SELECT DISTINCT app_id FROM webhook_attempts")
    # ["é"] is 6 bytes of UTF-8; then the result, the error, the stack and the times.
    assert run_bytes == 6 + 1 + 8 + 17 + 3
    assert storage == queues.AppStorage(kept_bytes=run_bytes + 3)
    assert owners == [{"app_id": "app_1"}]


# --- Past the quota ------------------------------------------------------------------------------


@dataclass
class Trimmed:
    """Two tenants after a trimming pass: ``heavy`` wrote past the quota, ``light`` not (and
    earlier than everything of ``heavy``)."""

    heavy: Tenant
    light: Tenant
    runs: list[str]
    deliveries: list[str]
    light_before: queues.AppStorage
    trimmed_at: float
    run_size: int
    """What each of ``heavy``'s runs wrote."""


@asynccontextmanager
async def trimmed_world(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> AsyncIterator[Trimmed]:
    async with (
        tenant(client, admin_headers, store) as heavy,
        tenant(client, admin_headers, store) as light,
    ):
        start = clock.now()
        for n in range(2):
            await ran(store, light, at=start + n, size=100_000, status="failed")
            await attempted(store, light, at=start + n + 0.5, body=b"l" * BODY)
        runs, deliveries = [], []
        for n in range(12):
            runs.append(await ran(store, heavy, at=start + 100 + 2 * n))
            deliveries.append(
                await attempted(store, heavy, at=start + 101 + 2 * n, body=b"h" * BODY)
            )
        light_before = await kept(store, light.app_id)
        run_size = await _run_size(store, heavy)
        clock.advance(300)
        await Scheduler(platform).trim_once()
        yield Trimmed(heavy, light, runs, deliveries, light_before, clock.now(), run_size)


async def test_past_its_quota_an_apps_oldest_output_goes_first_and_no_other_apps(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with trimmed_world(platform, client, admin_headers, store, clock) as world:
            heavy = await kept(store, world.heavy.app_id)
            heavy_counted = await recount(store, world.heavy.app_id)
            order = await _oldest_first(store, world.heavy.app_id)
            light = await kept(store, world.light.app_id)
            light_counted = await recount(store, world.light.app_id)
            light_order = await _oldest_first(store, world.light.app_id)
            async with store.transaction() as tx:
                first = await queues.get_run(tx, world.heavy.function, world.runs[0])
                last = await queues.get_run(tx, world.heavy.function, world.runs[-1])
                (dropped_attempt,) = await queues.attempt_log(tx, world.deliveries[0])
                (kept_attempt,) = await queues.attempt_log(tx, world.deliveries[-1])
            await Scheduler(platform).trim_once()
            again = await kept(store, world.heavy.app_id)
    # Within the quota, having dropped no more than it had to: one more run's output would
    # have gone past it.
    assert heavy.kept_bytes == heavy_counted
    assert QUOTA - RUN_OUTPUT < heavy.kept_bytes <= QUOTA
    # The oldest first, runs' and attempts' together by age, and nothing newer.
    dropped = [gone for _, gone in order]
    assert dropped == [True] * dropped.count(True) + [False] * dropped.count(False)
    assert dropped.count(True) == heavy.trimmed_runs + heavy.trimmed_attempts
    assert heavy.trimmed_runs >= 4
    assert heavy.trimmed_at == world.trimmed_at
    assert heavy.trimmed_bytes + heavy.kept_bytes == 12 * world.run_size + 12 * BODY
    # A run keeps its row, its status and its event; an attempt all but its body.
    assert (first.run.status, first.run.logs, first.run.result, first.run.error) == (
        "succeeded",
        [],
        None,
        None,
    )
    assert first.stack is None
    assert first.run.output_dropped_at == world.trimmed_at
    assert first.event["type"] == "customer.created"
    assert last.run.output_dropped_at is None
    assert len(last.run.logs[0]) == RUN_OUTPUT // 2
    assert (dropped_attempt.response_code, dropped_attempt.response_body) == (200, None)
    assert dropped_attempt.body_dropped_at == world.trimmed_at
    assert kept_attempt.response_body == b"h" * BODY
    assert kept_attempt.body_dropped_at is None
    # The other app, whose output is older than all of it, is not touched.
    assert light == world.light_before
    assert light.kept_bytes == light_counted
    assert not any(gone for _, gone in light_order)
    # The metrics count what was dropped, by kind.
    assert _metric(platform, "ledgerport_app_storage_trimmed_items_total", "run_output") == (
        heavy.trimmed_runs
    )
    assert _metric(platform, "ledgerport_app_storage_trimmed_items_total", "attempt_body") == (
        heavy.trimmed_attempts
    )
    run_bytes = _metric(platform, "ledgerport_app_storage_trimmed_bytes_total", "run_output")
    body_bytes = _metric(platform, "ledgerport_app_storage_trimmed_bytes_total", "attempt_body")
    assert body_bytes == heavy.trimmed_attempts * BODY
    assert run_bytes + body_bytes == heavy.trimmed_bytes
    # Within the quota, the next pass drops nothing.
    assert again == heavy


async def test_one_trimming_transaction_drops_a_bounded_batch_oldest_first(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            start = clock.now()
            for n in range(5):
                await attempted(store, who, at=start + 2 * n + 1, body=b"b" * BODY)
                await ran(store, who, at=start + 2 * n, size=1000)
            # A run queued (or retrying) gets its output written again: it is never trimmed.
            await ran(store, who, at=start - 10, size=1000, status="retrying")
            async with store.transaction() as tx:
                trimmed = await queues.trim_oldest(
                    tx, app_id=who.app_id, quota=0, now=start + 100, limit=3
                )
            order = await _oldest_first(store, who.app_id)
            after = await kept(store, who.app_id)
            counted = await recount(store, who.app_id)
    assert (trimmed.runs, trimmed.attempts) == (2, 1)
    assert [gone for _, gone in order] == [False, True, True, True] + [False] * 7
    assert after.kept_bytes == counted
    assert (after.trimmed_runs, after.trimmed_attempts) == (2, 1)
    assert after.trimmed_bytes == trimmed.bytes


async def test_trimming_passes_side_by_side_drop_each_output_once(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with tenant(client, admin_headers, store) as who:
            start = clock.now()
            for n in range(16):
                await ran(store, who, at=start + n)
            size = await _run_size(store, who)
            clock.advance(60)
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(Scheduler(platform).trim_once)
            after = await kept(store, who.app_id)
            counted = await recount(store, who.app_id)
            order = await _oldest_first(store, who.app_id)
    assert after.kept_bytes == counted
    assert after.kept_bytes <= QUOTA
    assert after.trimmed_runs == sum(gone for _, gone in order)
    assert after.trimmed_bytes + after.kept_bytes == 16 * size
    # One pass alone would have dropped as much: the least that brings it within the quota.
    assert after.kept_bytes > QUOTA - size


# --- The console says so -------------------------------------------------------------------------


async def test_the_console_says_what_was_dropped_for_the_quota(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with trimmed_world(platform, client, admin_headers, store, clock) as world:
            heavy = await kept(store, world.heavy.app_id)
            console = world.heavy.hook.console
            runs = (await console.ok("GET", "/functions/f/runs"))["data"]
            dropped_run = await console.ok("GET", f"/functions/f/runs/{world.runs[0]}")
            kept_run = await console.ok("GET", f"/functions/f/runs/{world.runs[-1]}")
            webhook = world.heavy.hook.webhook["id"]
            dropped_delivery = await console.ok(
                "GET", f"/webhooks/{webhook}/deliveries/{world.deliveries[0]}"
            )
            await login(client, world.heavy.hook.api.world)
            base = f"/console/apps/{world.heavy.app_id}"
            function_page = await _page(client, f"{base}/functions/f")
            run_page = await _page(client, f"{base}/functions/f/runs/{world.runs[0]}")
            kept_page = await _page(client, f"{base}/functions/f/runs/{world.runs[-1]}")
            webhook_page = await _page(client, f"{base}/webhooks/{webhook}")
            delivery_page = await _page(
                client, f"{base}/webhooks/{webhook}/deliveries/{world.deliveries[0]}"
            )
            await login(client, world.light.hook.api.world)
            light = f"/console/apps/{world.light.app_id}"
            light_function = await _page(client, f"{light}/functions/f")
            light_webhook = await _page(
                client, f"{light}/webhooks/{world.light.hook.webhook['id']}"
            )
    dropped_at = "1970-01-01T00:00:00Z"
    # The console API: a dropped run and attempt say when; the kept ones say null.
    listed = {run["id"]: run for run in runs}
    assert listed[world.runs[0]]["outputDroppedAt"] is not None
    assert listed[world.runs[-1]]["outputDroppedAt"] is None
    assert dropped_run["outputDroppedAt"] == listed[world.runs[0]]["outputDroppedAt"] != dropped_at
    assert (dropped_run["logs"], dropped_run["result"], dropped_run["stack"]) == ([], None, None)
    assert kept_run["outputDroppedAt"] is None
    (attempt,) = dropped_delivery["attemptLog"]
    assert attempt["responseBodyDroppedAt"] is not None
    assert (attempt["responseCode"], attempt["responseBody"]) == (200, None)
    # The pages.
    assert (
        "Older output was dropped to keep this app within its storage quota of 1 MiB: the log"
        f" lines, result, error and stack of its {heavy.trimmed_runs} oldest runs"
    ) in function_page
    assert function_page.count("Output dropped for the storage quota") == heavy.trimmed_runs
    assert "Its output (log lines, result, error and stack) was dropped" in run_page
    assert "Its log lines were dropped for the storage quota." in run_page
    assert "was dropped" not in kept_page
    assert (
        "Older output was dropped to keep this app within its storage quota of 1 MiB: the kept"
        f" answers of its {heavy.trimmed_attempts} oldest webhook attempt"
    ) in webhook_page
    assert "to keep the app within its storage quota of 1 MiB" in delivery_page
    assert "No answer came." not in delivery_page
    for page in (light_function, light_webhook):
        assert "storage-quota" not in page
