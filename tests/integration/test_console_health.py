"""What the console's lists show first, on both stores: every function of an app with its state,
schedule, runs and failures of the last 24 hours, last run and last error (kept as runs are
recorded, in their transaction: ``queues.function_health``), and every webhook of an app with
its state and health (``apps.webhook_health``), each list in one statement whatever the
number of functions or webhooks. Time is the frozen clock's: tests set it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import count

import pytest

from ledgerport import apps, books, catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import record_health
from ledgerport.platform import Platform
from ledgerport.storage import Transaction

from ..stores import CountingTransaction

HOUR = 3600
DAY = 24 * HOUR
T0 = 1_790_002_800.0
"""The first second of an hour (2026-09-21T15:00:00Z)."""
SOURCE = "export async function handler(event, context) { return 1; }\n"
_RUN_NUMBERS = count()


async def _app(platform: Platform, *, now: float = T0 - DAY) -> apps.App:
    async with platform.store.transaction() as tx:
        user = await books.create_user(
            tx, now=now, email=f"dev{next(_RUN_NUMBERS)}@example.com", password_hash="x"
        )
        app, _ = await apps.create_app(
            tx,
            platform.keyring,
            now=now,
            name="Cockpit",
            type="PUBLIC",
            redirect_uris=["https://app.example/callback"],
            scopes=["customers:read"],
            developer_user_id=user.id,
        )
    return app


async def _function(
    tx: Transaction,
    app: apps.App,
    name: str,
    *,
    now: float = T0 - DAY,
    schedule: str | None = None,
) -> apps.HostedFunction:
    upload = apps.FunctionUpload(
        name, SOURCE, ("customer.created",), apps.compile_module(SOURCE), schedule=schedule
    )
    return await apps.put_function(tx, now=now, app=app, upload=upload)


@dataclass(frozen=True)
class End:
    """How a run ends: its status, error, and whether an attempt was made."""

    status: queues.RunStatus
    error: str | None = None
    attempted: bool = True


SUCCEEDED = End("succeeded")
THREW = End("failed", "Error: boom")
NOT_RUN = End("failed", "not run: app suspended", attempted=False)
RETRYING = End("retrying", "the worker died during the run")
GIVEN_BACK = End("retrying", "the service stopped during the run", attempted=False)


async def _claimed(tx: Transaction, function: apps.HostedFunction, at: float) -> str:
    """A test run of the function queued and claimed at ``at`` (with whatever else of the app
    is due then: a run tried again); answers its id."""
    run_id = await queues.create_test_run(
        tx,
        now=at,
        function_id=function.id,
        app_id=function.app_id,
        event_type="customer.created",
        pinned_version=None,
    )
    claimed = await queues.claim_runs(
        tx,
        now=at,
        lease=f"lease-{run_id}",
        lease_until=at + 30,
        quotas=[((function.app_id, ""), 100)],
    )
    assert run_id in {run.id for run in claimed}
    return run_id


def _ended(run_id: str, end: End, at: float) -> queues.RunEnded:
    return queues.RunEnded(
        run_id=run_id,
        lease=f"lease-{run_id}",
        status=end.status,
        attempts=1 if end.attempted else 0,
        version=1 if end.attempted else None,
        duration_ms=2.5 if end.attempted else None,
        logs=(),
        error=end.error,
        result="1" if end.status == "succeeded" else None,
        finished_at=at,
        next_attempt_at=at + 1 if end.status == "retrying" else None,
    )


async def _run(
    platform: Platform, function: apps.HostedFunction, end: End, *, at: float, took: float = 0.5
) -> str:
    """A run of the function claimed at ``at`` and recorded as ending ``took`` seconds later
    with ``end``; answers its id."""
    async with platform.store.transaction() as tx:
        run_id = await _claimed(tx, function, at)
    async with platform.store.transaction() as tx:
        await queues.record_runs(tx, [_ended(run_id, end, at + took)])
    return run_id


async def _health(platform: Platform, app: apps.App) -> dict[str, queues.FunctionHealth]:
    async with platform.store.transaction() as tx:
        answered = await queues.function_health(tx, app.id, now=platform.now())
    return {health.function.name: health for health in answered}


# --- Functions -----------------------------------------------------------------------------------


async def test_a_function_with_no_runs_has_an_empty_health_and_runs(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0)
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        made = await _function(tx, app, "quiet")
    (health,) = (await _health(platform, app)).values()
    assert health == queues.FunctionHealth(
        function=made,
        stopped=None,
        runs_last_24h=0,
        failed_last_24h=0,
        last_run=None,
        last_error=None,
    )
    assert (health.schedule, health.next_run_at) == (None, None)


async def test_each_end_counts_as_it_says_and_the_newest_run_and_error_are_kept(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 + 10 * HOUR)
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        function = await _function(tx, app, "busy")
    at = T0
    ok = await _run(platform, function, SUCCEEDED, at=at)
    threw = await _run(platform, function, THREW, at=at + 60)
    await _run(platform, function, SUCCEEDED, at=at + 120)
    not_run = await _run(platform, function, NOT_RUN, at=at + HOUR)
    # A failed attempt the platform tries again: its error is the last, it ended nothing.
    retried = await _run(platform, function, RETRYING, at=at + 2 * HOUR)
    # Given back unattempted: says nothing of the function.
    await _run(platform, function, GIVEN_BACK, at=at + 3 * HOUR)
    health = (await _health(platform, app))["busy"]
    assert (health.runs_last_24h, health.failed_last_24h) == (4, 2)
    assert health.last_run == queues.LastRun(not_run, at + HOUR + 0.5, "failed")
    assert health.last_error == queues.LastError(
        "the worker died during the run", at + 2 * HOUR + 0.5, retried
    )
    assert {ok, threw} <= {
        row["id"] for row in await _runs_of(platform, function)
    }  # the runs themselves are recorded as ever


async def _runs_of(platform: Platform, function: apps.HostedFunction) -> list[dict[str, object]]:
    async with platform.store.transaction() as tx:
        return [
            dict(row)
            for row in await tx.fetch(
                "SELECT id, status FROM function_runs WHERE function_id = $1", function.id
            )
        ]


async def test_an_older_end_recorded_later_replaces_neither_the_last_run_nor_the_last_error(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 + HOUR)
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        function = await _function(tx, app, "late")
        older = await _claimed(tx, function, T0)
        newer = await _claimed(tx, function, T0 + 10)
    async with platform.store.transaction() as tx:
        await queues.record_runs(tx, [_ended(newer, THREW, T0 + 20)])
    async with platform.store.transaction() as tx:
        await queues.record_runs(tx, [_ended(older, End("failed", "Error: older"), T0 + 15)])
    health = (await _health(platform, app))["late"]
    assert health.last_run == queues.LastRun(newer, T0 + 20, "failed")
    assert health.last_error == queues.LastError("Error: boom", T0 + 20, newer)
    assert (health.runs_last_24h, health.failed_last_24h) == (2, 2)


async def test_one_recording_of_many_runs_keeps_each_functions_newest(
    platform: Platform, clock: FrozenClock
) -> None:
    """A batch with several ends of one function, in any order, writes its newest end and
    error, and counts them all, in three statements on PostgreSQL and four on SQLite (the
    runs read and written, then the health) whatever the number of runs and functions."""
    clock.set(T0 + HOUR)
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        first = await _function(tx, app, "first")
        second = await _function(tx, app, "second")
        runs = [await _claimed(tx, fn, T0 + i) for i, fn in enumerate([first, second] * 3)]
    ends = [
        _ended(runs[0], SUCCEEDED, T0 + 50),
        _ended(runs[2], THREW, T0 + 40),
        _ended(runs[4], SUCCEEDED, T0 + 30),
        _ended(runs[1], THREW, T0 + 10),
        _ended(runs[3], RETRYING, T0 + 20),
        _ended(runs[5], SUCCEEDED, T0 + 15),
    ]
    async with platform.store.transaction() as tx:
        counting = CountingTransaction(tx)
        await queues.record_runs(counting, ends)  # type: ignore[arg-type]
    assert counting.statements == (3 if platform.store.kind == "postgresql" else 4)
    health = await _health(platform, app)
    assert health["first"].last_run == queues.LastRun(runs[0], T0 + 50, "succeeded")
    assert health["first"].last_error == queues.LastError("Error: boom", T0 + 40, runs[2])
    assert (health["first"].runs_last_24h, health["first"].failed_last_24h) == (3, 1)
    assert health["second"].last_run == queues.LastRun(runs[5], T0 + 15, "succeeded")
    assert health["second"].last_error == queues.LastError(
        "the worker died during the run", T0 + 20, runs[3]
    )
    assert (health["second"].runs_last_24h, health["second"].failed_last_24h) == (2, 1)


async def test_the_health_is_written_with_the_runs_or_not_at_all(
    platform: Platform, clock: FrozenClock
) -> None:
    """Recorded in the runs' transaction: rolled back with it; and a run whose claim no longer
    holds its lease changes nothing, health included."""
    clock.set(T0 + HOUR)
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        function = await _function(tx, app, "atomic")
        run_id = await _claimed(tx, function, T0)

    class Abandoned(Exception):
        pass

    async def abandoned_recording() -> None:
        async with platform.store.transaction() as tx:
            await queues.record_runs(tx, [_ended(run_id, THREW, T0 + 1)])
            raise Abandoned

    with pytest.raises(Abandoned):
        await abandoned_recording()
    async with platform.store.transaction() as tx:
        stale = replace(_ended(run_id, THREW, T0 + 1), lease="another claim's")
        await queues.record_runs(tx, [stale])
    health = (await _health(platform, app))["atomic"]
    assert (health.runs_last_24h, health.last_run, health.last_error) == (0, None, None)


async def test_a_long_error_is_kept_to_its_first_characters(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 + HOUR)
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        function = await _function(tx, app, "wordy")
    limit = queues.FUNCTION_HEALTH_ERROR_CHARS
    run_id = await _run(platform, function, End("failed", "é" * (limit + 1)), at=T0)
    async with platform.store.transaction() as tx:
        exact = await _function(tx, app, "exact")
    exact_run = await _run(platform, exact, End("failed", "x" * limit), at=T0)
    health = await _health(platform, app)
    assert health["wordy"].last_error == queues.LastError("é" * limit + "\u2026", T0 + 0.5, run_id)
    assert health["exact"].last_error == queues.LastError("x" * limit, T0 + 0.5, exact_run)


@pytest.mark.parametrize(
    ("ended_at", "now", "counted"),
    [
        # The window is the current hour and the 23 before it.
        (T0 - 23 * HOUR, T0 + HOUR - 1, True),  # its first second, at the current hour's last
        (T0 - 23 * HOUR - 1, T0, False),  # the last second of the hour before it
        (T0 - 23 * HOUR, T0 + HOUR, False),  # the next hour began: it left
        (T0 + HOUR - 1, T0 + HOUR - 1, True),  # just now
    ],
)
async def test_the_last_24_hours_are_the_current_hour_and_the_23_before_it(
    platform: Platform, clock: FrozenClock, ended_at: float, now: float, counted: bool
) -> None:
    app = await _app(platform, now=T0 - 3 * DAY)
    async with platform.store.transaction() as tx:
        function = await _function(tx, app, "edge", now=T0 - 3 * DAY)
    run_id = await _run(platform, function, THREW, at=ended_at, took=0)
    clock.set(now)
    health = (await _health(platform, app))["edge"]
    assert (health.runs_last_24h, health.failed_last_24h) == ((1, 1) if counted else (0, 0))
    # The last run and error stay, whatever their age.
    assert health.last_run == queues.LastRun(run_id, ended_at, "failed")
    assert health.last_error == queues.LastError("Error: boom", ended_at, run_id)


async def test_a_scheduled_function_answers_its_schedule_and_next_tick(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 + 10)
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        made = await _function(tx, app, "nightly", now=T0 + 10, schedule="30 2 * * *")
    health = (await _health(platform, app))["nightly"]
    assert health.schedule == "30 2 * * *"
    assert health.next_run_at == made.next_run_at == T0 + 11 * HOUR + 30 * 60  # 02:30 next
    assert health.stopped is None


@pytest.mark.parametrize(
    ("status", "stopped"),
    [("ACTIVE", None), ("SUSPENDED", "app suspended"), ("DEACTIVATED", "app deactivated")],
)
async def test_a_function_of_a_stopped_app_says_why_it_runs_no_more(
    platform: Platform, clock: FrozenClock, status: str, stopped: str | None
) -> None:
    """A function has no switch of its own: its app's status stops it (its queued runs fail
    unrun, its ticks pass without runs)."""
    clock.set(T0)
    app = await _app(platform)
    async with platform.store.transaction() as tx:
        await _function(tx, app, "paused")
        await apps.set_app_status(tx, app.id, status)
    assert (await _health(platform, app))["paused"].stopped == stopped


async def test_every_function_of_an_app_is_answered_in_one_statement(
    platform: Platform, clock: FrozenClock
) -> None:
    """As many functions as an app may have, each with runs in the window and out of it: one
    statement answers them all; another app's and a deleted function are not among them."""
    clock.set(T0 + HOUR)
    app = await _app(platform)
    other = await _app(platform)
    names = [f"fn{index:02}" for index in range(catalog.FUNCTIONS_PER_APP_MAX)]
    async with platform.store.transaction() as tx:
        functions = [
            await _function(tx, app, name, now=T0 - DAY + index) for index, name in enumerate(names)
        ]
        listed = await apps.list_functions(tx, app.id)
        theirs = await _function(tx, other, "theirs")
    for index, function in enumerate(functions):
        for run in range(index % 4):
            end = THREW if run % 2 else SUCCEEDED
            await _run(platform, function, end, at=T0 + run)
        await _run(platform, function, THREW, at=T0 - DAY)  # out of the window
    await _run(platform, theirs, THREW, at=T0)
    async with platform.store.transaction() as tx:
        await apps.delete_function(tx, now=T0, app_id=app.id, name=names[-1])
        counting = CountingTransaction(tx)
        answered = await queues.function_health(counting, app.id, now=platform.now())  # type: ignore[arg-type]
    assert counting.statements == 1
    assert [health.function.name for health in answered] == names[:-1]
    assert [health.function for health in answered] == listed[:-1]
    for index, health in enumerate(answered):
        assert (health.runs_last_24h, health.failed_last_24h) == (index % 4, (index % 4) // 2)
        assert health.last_run is not None
        assert health.last_error is not None


async def test_a_purge_drops_the_hours_past_the_window_and_the_health_of_purged_functions(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0)
    app = await _app(platform, now=T0 - 40 * DAY)
    async with platform.store.transaction() as tx:
        kept = await _function(tx, app, "kept", now=T0 - 40 * DAY)
        gone = await _function(tx, app, "gone", now=T0 - 40 * DAY)
    await _run(platform, kept, SUCCEEDED, at=T0 - DAY - HOUR)
    await _run(platform, kept, SUCCEEDED, at=T0 - HOUR)
    await _run(platform, gone, THREW, at=T0 - 35 * DAY)
    async with platform.store.transaction() as tx:
        await apps.delete_function(tx, now=T0 - 34 * DAY, app_id=app.id, name="gone")
        await queues.purge_runs(tx, now=T0)
        purged = await apps.purge_deleted_functions(tx, now=T0)
        hours = await tx.fetch(
            "SELECT function_id, hour FROM function_health_hours ORDER BY function_id, hour"
        )
        rows = await tx.fetch("SELECT function_id FROM function_health")
    assert purged == 1
    assert [(row["function_id"], int(row["hour"])) for row in hours] == [
        (kept.id, apps.hour_of(T0 - HOUR))
    ]
    assert [row["function_id"] for row in rows] == [kept.id]


# --- Webhooks ------------------------------------------------------------------------------------


def _outcome(
    delivery_id: str, status: queues.DeliveryStatus, at: float, code: int = 500
) -> queues.AttemptOutcome:
    delivered = status == "delivered"
    return queues.AttemptOutcome(
        delivery_id=delivery_id,
        lease="engine",
        status=status,
        attempts=1,
        response_code=200 if delivered else code,
        error=None if delivered else f"HTTP {code}",
        finished_at=at,
        next_attempt_at=None if status != "retrying" else at + 60,
        first_attempt_at=at,
        made=queues.AttemptMade(
            started_at=at,
            duration_ms=1.0,
            response_body=b"",
            response_truncated=False,
            request_headers={},
        ),
    )


async def _webhooks(platform: Platform, app: apps.App, number: int) -> list[apps.Webhook]:
    async with platform.store.transaction() as tx:
        made = [
            await apps.create_webhook(
                tx,
                platform.keyring,
                now=T0 - DAY + index,
                app_id=app.id,
                url=f"https://hooks.example/{index}",
                events=["customer.created"],
                development=True,
            )
            for index in range(number)
        ]
    return [webhook for webhook, _ in made]


async def test_every_webhook_of_an_app_is_answered_with_its_health_in_one_statement(
    platform: Platform, clock: FrozenClock
) -> None:
    """As many webhooks as an app may have, switched off by the engine (gone), by the app, or
    failing: one statement answers each as the list and ``health_counts`` would, two."""
    clock.set(T0 + HOUR - 1)
    app = await _app(platform)
    other = await _app(platform)
    hooks = await _webhooks(platform, app, catalog.WEBHOOKS_PER_APP_MAX)
    (theirs,) = await _webhooks(platform, other, 1)
    outcomes: list[tuple[str, queues.AttemptOutcome]] = []
    for index, hook in enumerate(hooks):
        for n in range(index % 3):
            outcomes.append((hook.id, _outcome(f"d{index}-{n}", "delivered", T0 + n)))
        if index % 4 == 1:
            outcomes.append((hook.id, _outcome(f"f{index}", "failed", T0 + 10)))
        outcomes.append((hook.id, _outcome(f"old{index}", "failed", T0 - 23 * HOUR - 1)))
    outcomes.append((hooks[2].id, _outcome("gone", "failed", T0 + 20, code=410)))
    outcomes.append((theirs.id, _outcome("theirs", "failed", T0)))
    async with platform.store.transaction() as tx:
        await record_health(tx, outcomes, now=T0 + 30, disable_after=5 * DAY)
        await apps.update_webhook(
            tx, now=T0 + 40, app_id=app.id, webhook_id=hooks[3].id, changes={"enabled": False}
        )
        await apps.delete_webhook(tx, now=T0 + 40, app_id=app.id, webhook_id=hooks[-1].id)
    async with platform.store.transaction() as tx:
        listed = await apps.list_webhooks(tx, app.id)
        counts = await apps.health_counts(tx, [w.id for w in listed], now=platform.now())
        counting = CountingTransaction(tx)
        answered = await apps.webhook_health(counting, app.id, now=platform.now())  # type: ignore[arg-type]
    assert counting.statements == 1
    assert answered == [
        apps.WebhookHealth(webhook, counts.get(webhook.id, apps.Counts())) for webhook in listed
    ]
    assert [row.webhook.id for row in answered] == [hook.id for hook in hooks[:-1]]
    by_id = {row.webhook.id: row for row in answered}
    gone, switched_off, failing = by_id[hooks[2].id], by_id[hooks[3].id], by_id[hooks[1].id]
    assert (gone.webhook.enabled, gone.webhook.disabled_reason) == (False, "gone")
    assert gone.counts == apps.Counts(delivered=2, failed=1)
    assert gone.webhook.health.last_error == "HTTP 410"
    assert (switched_off.webhook.enabled, switched_off.webhook.disabled_reason) == (False, None)
    assert (failing.webhook.health.state, failing.counts) == ("failing", apps.Counts(1, 1))
    assert failing.webhook.health.last_delivery_at == T0
    assert by_id[hooks[0].id].counts == apps.Counts()  # its one failure is out of the window
