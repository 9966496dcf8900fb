"""Schedules of hosted functions (contract.md, third round: Hosted functions, schedules): the
developer API takes and answers a schedule and its next tick; each tick runs the function once
for every ACTIVE installation of its app, with a token for that business, on a ``schedule``
event; a tick runs once per installation however many processes tick; a tick missed while
nothing ran runs once at the next start. Time is the frozen clock's: tests set it."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import pytest
import trio

from ledgerport import apps, books, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import FunctionRunner, Scheduler, ScheduleTicker
from ledgerport.http import in_process_api
from ledgerport.platform import Platform
from ledgerport.runtime import RunLimits, RunOutcome, RunRequest
from ledgerport.storage import Store, open_postgres

from .data_api import Api, owner_api
from .test_console_manage import alert, csrf, developer, field_value, page_of, post
from .test_function_doc_examples import example
from .webhook_world import Console, console_for

TIMEOUT = 60
T0 = 1_790_000_040.0
"""A whole minute (2026-09-21T14:14:00Z)."""
REPORTS = """
export async function handler(event, context) {
  const customers = await context.api.get("/customers");
  return { event, customers: customers.data.map((c) => c.name) };
}
"""


def iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat().replace("+00:00", "Z")


def millis(moment: float) -> str:
    """A moment as the console API answers it."""
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


@dataclass
class Scheduled:
    api: Api
    console: Console
    businesses: list[str]
    """Every business the app is installed in, the first the world's own."""


async def scheduled(
    client: Any, admin_headers: dict[str, str], platform: Platform, *, more: int = 2
) -> Scheduled:
    """A business with the app installed (a customer of its own in it) and ``more`` businesses
    of the same owner with the app installed too."""
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    await api.customer("Only in the first")
    businesses = [api.world.business_id]
    async with platform.store.transaction() as tx:
        now = platform.now()
        for index in range(more):
            business = await books.create_business(tx, now=now, name=f"Branch {index}")
            await books.set_membership(
                tx,
                now=now,
                business_id=business.id,
                user_id=api.world.user_id,
                role="owner",
                active=True,
            )
            await apps.install(
                tx,
                now=now,
                app_id=api.world.app_id,
                business_id=business.id,
                user_id=api.world.user_id,
                scopes=["customers:read"],
            )
            businesses.append(business.id)
    return Scheduled(api, console, sorted(businesses))


async def put(world: Scheduled, schedule: str | None, name: str = "report") -> dict[str, Any]:
    body = {"source": REPORTS, "events": [], "schedule": schedule}
    return await world.console.ok("PUT", f"/functions/{name}", body)  # type: ignore[no-any-return]


async def scheduled_runs(store: Store) -> list[dict[str, Any]]:
    async with store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT id, function_id, business_id, event_id, type, body, status, error, result"
            " FROM function_runs WHERE type = 'schedule' ORDER BY business_id, created_at"
        )
    return [dict(row) for row in rows]


@asynccontextmanager
async def runner_for(app: Any, platform: Platform) -> AsyncIterator[FunctionRunner]:
    async with in_process_api(app, "http://localhost") as call:
        runner = FunctionRunner(platform, workers=1, limits=RunLimits(), api=call)
        async with runner.running():
            yield runner


async def run_all(runner: FunctionRunner) -> None:
    while await runner.claim_once():
        await runner.settle()


# --- The developer API ---------------------------------------------------------------------------


async def test_a_schedule_is_answered_with_its_next_tick_and_kept_across_uploads(
    client: Any, admin_headers: dict[str, str], platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 + 10)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=0)
        first = await put(world, "*/5 * * * *")
        read = await world.console.ok("GET", "/functions/report")
        listed = await world.console.ok("GET", "/functions")
        # Uploaded again as it was, a minute later: the tick due is kept.
        clock.advance(60)
        again = await put(world, " */5  *  * * * ")
        # A new schedule starts from the first tick after now.
        other = await put(world, "0 9 * * 1-5")
        none = await put(world, None)
        plain = await world.console.ok(
            "PUT", "/functions/plain", {"source": REPORTS, "events": ["customer.created"]}
        )
    due = apps.next_tick("*/5 * * * *", T0 + 10)
    assert due == T0 + 60  # 14:15
    assert (first["schedule"], first["nextRunAt"]) == ("*/5 * * * *", millis(due))
    assert (read["schedule"], read["nextRunAt"]) == ("*/5 * * * *", millis(due))
    assert (listed["data"][0]["schedule"], listed["data"][0]["nextRunAt"]) == (
        "*/5 * * * *",
        millis(due),
    )
    assert (again["schedule"], again["nextRunAt"], again["version"]) == (
        "*/5 * * * *",
        millis(due),
        2,
    )
    assert other["nextRunAt"] == millis(apps.next_tick("0 9 * * 1-5", T0 + 70) or 0)
    assert (none["schedule"], none["nextRunAt"]) == (None, None)
    assert (plain["schedule"], plain["nextRunAt"]) == (None, None)


@pytest.mark.parametrize(
    ("schedule", "said"),
    [
        ("* * * * * *", "has 6 fields: it must have five"),
        ("@hourly", "write '0 * * * *'"),
        ("61 * * * *", "the minute field is not valid"),
        ("", "must be five cron fields"),
    ],
)
async def test_a_schedule_that_is_not_five_valid_fields_is_a_validation_error(
    client: Any, admin_headers: dict[str, str], platform: Platform, schedule: str, said: str
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=0)
        response = await world.console.call(
            "PUT", "/functions/report", {"source": REPORTS, "events": [], "schedule": schedule}
        )
        error = await response.get_json()
        listed = await world.console.ok("GET", "/functions")
    assert response.status_code == 400, error
    assert (error["statusCode"], error["error"]) == (400, "Bad Request")
    (message,) = error["message"]
    assert said in message
    assert listed["data"] == []


async def test_a_schedule_that_is_not_text_is_a_validation_error(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=0)
        response = await world.console.call(
            "PUT", "/functions/report", {"source": REPORTS, "events": [], "schedule": 5}
        )
    error = await response.get_json()
    assert response.status_code == 400
    assert (error["statusCode"], error["error"]) == (400, "Bad Request")


# --- Ticks ---------------------------------------------------------------------------------------


async def test_each_tick_runs_the_function_once_for_each_active_installation_with_its_token(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 - 30)
    ticker = ScheduleTicker(platform)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform)
        function = await put(world, "* * * * *")
        before = await ticker.tick_once()  # not due yet
        clock.set(T0 + 0.25)
        ticked = await ticker.tick_once()
        again = await ticker.tick_once()  # the same tick: nothing more
        async with runner_for(app, platform) as runner:
            await run_all(runner)
        runs = await scheduled_runs(platform.store)
        read = await world.console.ok("GET", "/functions/report")
        listed = await world.console.ok("GET", "/functions/report/runs")
    assert before == []
    assert [(tick.function_id, tick.at, tick.runs) for tick in ticked] == [(function["id"], T0, 3)]
    assert again == []
    assert read["nextRunAt"] == millis(T0 + 60)
    assert [run["business_id"] for run in runs] == world.businesses
    for run in runs:
        assert run["status"] == "succeeded", run
        assert run["event_id"] is None
        assert run["id"] == queues.scheduled_run_id(function["id"], run["business_id"], T0)
        result = json.loads(run["result"])
        assert result["event"] == {
            "id": run["id"],
            "eventId": None,
            "type": "schedule",
            "apiVersion": result["event"]["apiVersion"],
            "businessId": run["business_id"],
            "created": int(T0),
            "data": {"scheduledAt": iso(T0)},
        }
        # Its token is for its business: it sees that business's customers only.
        own = run["business_id"] == world.api.world.business_id
        assert result["customers"] == (["Only in the first"] if own else [])
    assert {run["type"] for run in listed["data"]} == {"schedule"}
    assert {run["eventId"] for run in listed["data"]} == {None}


async def test_the_next_tick_runs_again_and_each_tick_once(
    client: Any, admin_headers: dict[str, str], platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 - 1)
    ticker = ScheduleTicker(platform)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=1)
        await put(world, "* * * * *")
        ticks = []
        for second in range(0, 181, 15):  # three minutes, every 15 seconds
            clock.set(T0 + second)
            ticks += await ticker.tick_once()
        runs = await scheduled_runs(platform.store)
    assert [tick.at for tick in ticks] == [T0, T0 + 60, T0 + 120, T0 + 180]
    scheduled_at = sorted(
        (run["business_id"], json.loads(run["body"])["data"]["scheduledAt"]) for run in runs
    )
    assert scheduled_at == sorted(
        (business, iso(T0 + minute * 60)) for business in world.businesses for minute in range(4)
    )


async def test_a_tick_missed_while_nothing_ran_is_run_once_at_the_next_start(
    client: Any, admin_headers: dict[str, str], platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 - 1)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=1)
        await put(world, "*/5 * * * *")
        # Nothing ran for an hour and a half: 18 ticks passed. The next start runs one, the
        # latest, and the next tick is the first after now.
        clock.set(T0 + 5400 + 125)
        ticked = await ScheduleTicker(platform).tick_once()
        read = await world.console.ok("GET", "/functions/report")
        runs = await scheduled_runs(platform.store)
    latest = T0 + 5400 + 60  # 15:45 ("*/5": 14:14 is not a tick, 14:15 is)
    assert [(tick.at, tick.runs, tick.next_at) for tick in ticked] == [(latest, 2, latest + 300)]
    assert read["nextRunAt"] == millis(latest + 300)
    assert sorted(run["business_id"] for run in runs) == world.businesses
    assert {json.loads(run["body"])["data"]["scheduledAt"] for run in runs} == {iso(latest)}


@asynccontextmanager
async def other_process(platform: Platform, store: Store) -> AsyncIterator[Platform]:
    """The platform as another process has it: on PostgreSQL a store of its own (its own
    connections to the database); SQLite has one process, so the same store."""
    if not store.shared:
        yield platform
        return
    url: str = store._url  # type: ignore[attr-defined]
    async with open_postgres(url, max_size=3) as other:
        yield replace(platform, store=other)


async def test_the_schedule_across_two_processes_runs_one_run_per_tick_and_installation(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    clock: FrozenClock,
    store: Store,
) -> None:
    clock.set(T0 - 1)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=4)
        names = [f"report-{index}" for index in range(3)]
        for name in names:
            await put(world, "* * * * *", name)
        async with AsyncExitStack() as stack:
            there = await stack.enter_async_context(other_process(platform, store))
            tickers = [ScheduleTicker(platform), ScheduleTicker(there)]
            ticked: list[queues.ScheduleTick] = []

            async def tick(ticker: ScheduleTicker) -> None:
                ticked.extend(await ticker.tick_once())

            for minute in range(5):
                clock.set(T0 + minute * 60 + 1)
                # Both tick the same due ticks at once, each a few times.
                async with trio.open_nursery() as nursery:
                    for _ in range(3):
                        for ticker in tickers:
                            nursery.start_soon(tick, ticker)
        runs = await scheduled_runs(store)
    keys = [
        (run["function_id"], run["business_id"], json.loads(run["body"])["data"]["scheduledAt"])
        for run in runs
    ]
    assert len(keys) == len(set(keys)) == 3 * 5 * 5
    assert sum(tick.runs for tick in ticked) == 3 * 5 * 5
    assert len([tick for tick in ticked if tick.runs]) == 3 * 5


async def test_an_installation_ended_after_its_tick_fails_its_run_unrun_and_gets_no_more(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 - 1)
    ticker = ScheduleTicker(platform)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=1)
        await put(world, "* * * * *")
        clock.set(T0)
        await ticker.tick_once()
        ended = world.businesses[-1]
        async with platform.store.transaction() as tx:
            await tx.execute(
                "UPDATE installations SET state = 'UNINSTALLED' WHERE business_id = $1", ended
            )
        async with runner_for(app, platform) as runner:
            await run_all(runner)
        clock.set(T0 + 60)
        (later,) = await ticker.tick_once()
        runs = await scheduled_runs(platform.store)
    outcome = {
        (run["business_id"], json.loads(run["body"])["data"]["scheduledAt"]): (
            run["status"],
            run["error"],
        )
        for run in runs
    }
    assert outcome[ended, iso(T0)] == ("failed", "not run: app not installed in the business")
    assert (ended, iso(T0 + 60)) not in outcome
    assert later.runs == 1


async def test_a_stopped_apps_ticks_pass_without_runs_and_a_deleted_function_ticks_no_more(
    client: Any, admin_headers: dict[str, str], platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0 - 1)
    ticker = ScheduleTicker(platform)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=1)
        await put(world, "* * * * *")
        async with platform.store.transaction() as tx:
            await apps.set_app_status(tx, world.api.world.app_id, "SUSPENDED")
        clock.set(T0)
        (suspended,) = await ticker.tick_once()
        async with platform.store.transaction() as tx:
            await apps.set_app_status(tx, world.api.world.app_id, "ACTIVE")
        await world.console.ok("DELETE", "/functions/report", status=204)
        clock.set(T0 + 60)
        after_delete = await ticker.tick_once()
        runs = await scheduled_runs(platform.store)
    assert (suspended.at, suspended.runs, suspended.next_at) == (T0, 0, T0 + 60)
    assert after_delete == []
    assert runs == []


async def test_the_scheduler_ticks_as_it_starts(
    client: Any, admin_headers: dict[str, str], platform: Platform, clock: FrozenClock
) -> None:
    """The scheduler each process runs starts the ticker: a tick due when it starts is run at
    once (the runs' commit wakes the listener)."""
    clock.set(T0 - 1)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=0)
        await put(world, "* * * * *")
        clock.set(T0 + 600)
        queued = trio.Event()
        async with (
            platform.store.listen(queues.FUNCTION_RUNS_CHANNEL, queued.set),
            trio.open_nursery() as nursery,
        ):
            await nursery.start(Scheduler(platform).run)
            await queued.wait()
            nursery.cancel_scope.cancel()
        runs = await scheduled_runs(platform.store)
    assert [json.loads(run["body"])["data"]["scheduledAt"] for run in runs] == [iso(T0 + 600)]


# --- The console's pages -----------------------------------------------------------------------


async def test_the_console_writes_a_schedule_and_shows_it_with_the_next_tick(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    clock.set(T0 + 10)
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        new = f"{dev.base}/functions/new"
        form = await page_of(client, new)
        fields = {"csrf_token": csrf(form), "name": "nightly", "source": REPORTS, "events": []}
        refused, refused_page = await post(client, new, {**fields, "schedule": "@daily"})
        saved, _ = await post(client, new, {**fields, "schedule": " 0 2 * * * "})
        stored = await dev.console.ok("GET", "/functions/nightly")
        page = await page_of(client, f"{dev.base}/functions/nightly")
        listing = await page_of(client, f"{dev.base}/functions")
        edit = await page_of(client, f"{dev.base}/functions/nightly/edit")
        # Saved with the field emptied: no schedule any more.
        cleared, _ = await post(
            client,
            f"{dev.base}/functions/nightly/edit",
            {"csrf_token": csrf(edit), "source": REPORTS, "events": [], "schedule": ""},
        )
        after = await dev.console.ok("GET", "/functions/nightly")
    assert 'name="schedule"' in form
    assert refused.status_code == 400
    assert "nicknames are not supported, only five cron fields: write '0 0 * * *'" in alert(
        refused_page
    )
    assert field_value(refused_page, "schedule") == "@daily"  # kept as sent
    assert saved.status_code == 303
    next_tick = T0 + 11 * 3600 + 46 * 60  # 02:00 the next day
    assert (stored["schedule"], stored["nextRunAt"]) == ("0 2 * * *", millis(next_tick))
    facts = re.search(r'<dd id="next-tick">(.*?)</dd>', page, re.S)
    assert facts is not None
    assert "22 Sep 2026, 02:00:00 UTC" in facts[1]
    assert "<code>0 2 * * *</code> (UTC)" in page
    # The list names the next tick in words, the exact time on hover.
    assert (
        'Next tick <time datetime="2026-09-22T02:00:00Z" title="22 Sep 2026, 02:00:00 UTC">'
    ) in listing
    assert field_value(edit, "schedule") == "0 2 * * *"
    assert cleared.status_code == 303
    assert (after["schedule"], after["nextRunAt"], after["version"]) == (None, None, 2)


# --- Fair shares -------------------------------------------------------------------------------


async def test_a_ticks_runs_take_the_same_fair_shares_as_event_runs(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    """Two workers: the app with ten installations on a tick keeps one of them (its half), and
    another developer's run waiting behind them all takes the other at once."""
    clock.set(T0 - 1)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=9)
        await put(world, "* * * * *")
        clock.set(T0)
        await ScheduleTicker(platform).tick_once()
        other = await scheduled(client, admin_headers, platform, more=0)
        theirs = await put(other, None, "theirs")
        clock.advance(1)  # queued after every scheduled run
        async with platform.store.transaction() as tx:
            waiting = await queues.create_test_run(
                tx,
                now=platform.now(),
                function_id=theirs["id"],
                app_id=other.api.world.app_id,
                event_type="customer.created",
                pinned_version=None,
            )
        async with in_process_api(app, "http://localhost") as call:
            runner = FunctionRunner(platform, workers=2, limits=RunLimits(), api=call)
            async with runner.running():
                first = await runner.claim_once()
                async with platform.store.transaction() as tx:
                    leased = await tx.fetch(
                        "SELECT id, type FROM function_runs WHERE lease IS NOT NULL"
                        " OR status NOT IN ('queued', 'retrying') ORDER BY type"
                    )
                await runner.settle()
    assert first == 2
    assert [row["type"] for row in leased] == ["customer.created", "schedule"]
    assert waiting in {row["id"] for row in leased}


async def test_the_runners_claim_loop_runs_every_installations_run_of_a_tick(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    """The claim loop as ``ledgerport serve`` runs it (woken by the tick's commit, reading the
    tenants with due runs once for many claims) runs each installation's run of the tick."""
    clock.set(T0 - 1)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=24)
        await put(world, "* * * * *")
        async with (
            in_process_api(app, "http://localhost") as call,
            trio.open_nursery() as nursery,
        ):
            runner = FunctionRunner(platform, workers=2, limits=RunLimits(), api=call)
            invoke = runner.pool.invoke
            started: list[str] = []
            all_started = trio.Event()

            async def counted(request: RunRequest) -> RunOutcome:
                started.append(request.run_id)
                if len(started) == len(world.businesses):
                    all_started.set()
                return await invoke(request)

            runner.pool.invoke = counted  # type: ignore[method-assign]
            await nursery.start(runner.run)
            clock.set(T0)
            await ScheduleTicker(platform).tick_once()
            await all_started.wait()
            await runner.drain()  # the last recorded
            nursery.cancel_scope.cancel()
        runs = await scheduled_runs(platform.store)
    assert sorted(run["business_id"] for run in runs) == world.businesses
    assert len(world.businesses) == 25
    assert {run["status"] for run in runs} == {"succeeded"}
    assert sorted(started) == sorted(run["id"] for run in runs)


# --- The page's example ------------------------------------------------------------------------


async def test_the_overdue_report_example_runs_on_its_tick_as_the_page_shows_it(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    """docs/functions.md's schedule example, uploaded as written with its schedule: at 06:00
    UTC it counts the business's overdue invoices and logs the line the page shows."""
    morning = datetime(2026, 12, 8, 6, 0, tzinfo=UTC).timestamp()
    clock.set(morning - 86400 * 3)
    with trio.fail_after(TIMEOUT):
        world = await scheduled(client, admin_headers, platform, more=0)
        customer = await world.api.customer("Late Payer")
        for due in ("2026-12-06", "2026-12-30"):  # one overdue by the morning, one not
            invoice = await world.api.invoice(customer["id"], dueDate=due)
            await world.api.ok("POST", f"/invoices/{invoice['id']}/send", {}, 200)
        clock.set(morning - 3600)
        await Scheduler(platform).mark_overdue()
        uploaded = await world.console.ok(
            "PUT",
            "/functions/overdue-report",
            {"source": example("overdue-report"), "events": [], "schedule": "0 6 * * *"},
        )
        clock.set(morning)
        await ScheduleTicker(platform).tick_once()
        async with runner_for(app, platform) as runner:
            await run_all(runner)
        (run,) = await scheduled_runs(platform.store)
        detail = await world.console.ok("GET", f"/functions/overdue-report/runs/{run['id']}")
    business = world.api.world.business_id
    assert uploaded["nextRunAt"] == "2026-12-08T06:00:00.000Z"
    assert detail["status"] == "succeeded", detail
    assert detail["result"] == {"overdue": 1}
    assert [line["message"] for line in detail["logs"]] == [
        f"{business}: 1 overdue at 2026-12-08T06:00:00Z"
    ]
    assert detail["event"]["data"] == {"scheduledAt": "2026-12-08T06:00:00Z"}
