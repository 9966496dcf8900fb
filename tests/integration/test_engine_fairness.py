"""No tenant holds back another: the probe's starvation and delay scenarios, with their bounds.

- An app with twenty webhooks at an endpoint that accepts and never answers, and a backlog of
  deliveries to them, leaves the engine room for another app: its delivery to a fast receiver
  arrives while the flood's attempts still hang (before their timeout), where without shares
  it waited for them.
- An app whose runs each hold a worker (waiting on a call that does not answer) keeps at most
  its share of the workers: another app's run starts at once, and with two runners (two
  processes) on one store as well.
- The shares are the developer's: a developer with 1, 4 or 16 apps, each flooding runs or
  deliveries, holds what one app would, and another developer's run starts (or its delivery
  arrives) at once whatever the number of apps, where with shares per app four apps took every
  worker (or the whole engine) and the victim waited for the flood's work to end.
- Below the app, its businesses take turns: an app's burst of due deliveries in one business
  leaves its delivery in another business in the first claim, attempted among the first, where
  claimed oldest first across the app's businesses it waited for the whole burst.

Every wait is bounded; the bounds sit far below what the flood's work takes (a 10 s attempt
timeout, a 30 s call), so they fail on starvation and not on a slow machine."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
import trio

from ledgerport import queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import DeliveryEngine, FunctionRunner
from ledgerport.http import in_process_api
from ledgerport.platform import Platform
from ledgerport.runtime import ApiAnswer, ApiCall, RunLimits
from ledgerport.storage import Store

from ..receiver import Answer, receiving
from .data_api import ALL_SCOPES, Api, owner_api
from .oauth_helpers import REDIRECT_URI, exchange, install, session_token
from .webhook_world import Console, console_for

TIMEOUT = 90
NEVER = Answer(delay=3600.0)
"""An endpoint that accepts and never answers."""


async def test_an_apps_dead_endpoints_leave_the_engine_room_for_another_app(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    flood = await owner_api(client, admin_headers)
    flood_console = await console_for(client, admin_headers, flood)
    victim = await owner_api(client, admin_headers)
    victim_console = await console_for(client, admin_headers, victim)
    with trio.fail_after(TIMEOUT):
        async with receiving() as dead, receiving() as fast, trio.open_nursery() as nursery:
            dead.default = NEVER
            for _ in range(20):
                await flood_console.webhook(dead.url, ["customer.created"])
            await victim_console.webhook(fast.url, ["customer.created"])
            engine = DeliveryEngine(
                platform, held_total=48, held_per_developer=16, held_per_webhook=8
            )
            await nursery.start(engine.run)
            for index in range(6):
                await flood.customer(f"Flood {index}")  # 120 deliveries to a dead endpoint
            await dead.wait_for(16, within=30)
            started = trio.current_time()
            await victim.customer("Victim")
            await fast.wait_for(1, within=5)  # the flood's attempts hang for 10 s
            took = trio.current_time() - started
            held = engine.held
            nursery.cancel_scope.cancel()
    # The flood holds its share, past it by at most one delivery for each of its twenty
    # webhooks (and never twice its share); the victim holds its delivery.
    assert held <= 2 * 16 + 1
    assert took < 5
    held_back = platform.metrics.fairness_held_back.labels("delivery", "own_cap")._value.get()
    assert held_back > 0


class SlowApi:
    """The data API, except ``/slow``, which answers after ``delay`` seconds: a handler that
    calls it holds its worker while using no CPU."""

    def __init__(self, call: Any, delay: float) -> None:
        self._call = call
        self._delay = delay

    async def __call__(self, token: str, call: ApiCall) -> ApiAnswer:
        if call.path == "/slow":
            await trio.sleep(self._delay)
            return ApiAnswer(200, {"data": []})
        answer: ApiAnswer = await self._call(token, call)
        return answer


WAITS = "export async function handler(e, c) { await c.api.get('/slow'); return 'waited' }"
QUICK = "export async function handler(e, c) { return (await c.api.get('/customers')).data.length }"


async def _function(console: Console, name: str, source: str) -> None:
    await console.ok(
        "PUT", f"/functions/{name}", {"source": source, "events": ["customer.created"]}
    )


async def _runs(console: Console, name: str) -> list[dict[str, Any]]:
    page = await console.ok("GET", f"/functions/{name}/runs")
    return page["data"]  # type: ignore[no-any-return]


@asynccontextmanager
async def runners(
    platform: Platform, app: Any, count: int, workers: int
) -> AsyncIterator[list[FunctionRunner]]:
    """``count`` runners (as ``count`` processes would have) on one store, running."""
    async with in_process_api(app, "http://localhost") as call, trio.open_nursery() as nursery:
        made = [
            FunctionRunner(
                platform, workers=workers, limits=RunLimits(wall=60), api=SlowApi(call, 30.0)
            )
            for _ in range(count)
        ]
        for runner in made:
            await nursery.start(runner.run)
        yield made
        nursery.cancel_scope.cancel()


async def _dispatch(platform: Platform) -> None:
    engine = DeliveryEngine(platform)
    async with engine.running():
        while await engine.dispatch_once():
            pass


async def _flood_then_victim(
    platform: Platform, client: Any, admin_headers: dict[str, str], flood_runs: int
) -> tuple[Console, Api, Console]:
    """A flood app with ``flood_runs`` runs of a function that waits, queued; a victim app
    with a quick function."""
    flood = await owner_api(client, admin_headers)
    flood_console = await console_for(client, admin_headers, flood)
    victim = await owner_api(client, admin_headers)
    victim_console = await console_for(client, admin_headers, victim)
    await _function(flood_console, "waits", WAITS)
    await _function(victim_console, "quick", QUICK)
    for index in range(flood_runs):
        await flood.customer(f"Flood {index}")
    return flood_console, victim, victim_console


async def _until(predicate: Any, within: float) -> None:
    """Look every 50 ms until ``predicate`` holds (what it reads signals nothing)."""
    with trio.fail_after(within):
        while True:
            if await predicate():
                return
            await trio.sleep(0.05)


async def test_an_apps_waiting_runs_keep_its_share_and_another_apps_run_starts_at_once(
    platform: Platform, client: Any, admin_headers: dict[str, str], app: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        flood_console, victim, victim_console = await _flood_then_victim(
            platform, client, admin_headers, flood_runs=8
        )
        async with runners(platform, app, count=1, workers=2) as running:
            await _dispatch(platform)

            (runner,) = running

            async def one_flood_run_holds_a_worker() -> bool:
                return runner.busy == 1

            await _until(one_flood_run_holds_a_worker, within=30)
            await victim.customer("Victim")
            await _dispatch(platform)
            started = trio.current_time()

            async def victim_ran() -> bool:
                return [r["status"] for r in await _runs(victim_console, "quick")] == ["succeeded"]

            await _until(victim_ran, within=10)  # a flood run waits 30 s on its call
            took = trio.current_time() - started
            flood_runs = await _runs(flood_console, "waits")
    assert took < 10
    assert [run["status"] for run in flood_runs].count("queued") == 8, "none of them ended"
    held_back = platform.metrics.fairness_held_back.labels("run", "own_cap")._value.get()
    assert held_back > 0


async def test_with_two_runners_on_one_store_each_keeps_the_flood_to_its_share(
    platform: Platform, client: Any, admin_headers: dict[str, str], app: Any, store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        _, victim, victim_console = await _flood_then_victim(
            platform, client, admin_headers, flood_runs=10
        )
        async with runners(platform, app, count=2, workers=2) as both:
            await _dispatch(platform)

            async def flood_holds_two_workers() -> bool:
                return sum(runner.busy for runner in both) == 2

            await _until(flood_holds_two_workers, within=30)
            await victim.customer("Victim")
            await _dispatch(platform)

            async def victim_ran() -> bool:
                return [r["status"] for r in await _runs(victim_console, "quick")] == ["succeeded"]

            await _until(victim_ran, within=10)
            async with store.transaction() as tx:
                leases = await tx.fetch(
                    "SELECT lease, COUNT(*) AS n FROM function_runs WHERE lease IS NOT NULL"
                    " GROUP BY lease"
                )
    assert sorted(int(row["n"]) for row in leases) == [1, 1], "one flood run a runner"


async def test_an_apps_attempts_in_flight_keep_to_their_cap_and_their_send_slots_are_let_go(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """Twenty dead webhooks of one app and a backlog: the app has its cap of attempts hanging
    at once, more than the engine's sending slots (each is let go once its request is
    written), and no more."""
    flood = await owner_api(client, admin_headers)
    flood_console = await console_for(client, admin_headers, flood)
    with trio.fail_after(TIMEOUT):
        async with receiving() as dead, trio.open_nursery() as nursery:
            dead.default = NEVER
            for _ in range(20):
                await flood_console.webhook(dead.url, ["customer.created"])
            engine = DeliveryEngine(platform, in_flight_per_developer=24)
            await nursery.start(engine.run)
            for index in range(3):
                await flood.customer(f"Flood {index}")  # 60 deliveries
            await dead.wait_for(24, within=30)
            await trio.sleep(0.5)  # room for any more to (wrongly) arrive
            hanging = len(dead.received)
            nursery.cancel_scope.cancel()
    assert hanging == 24


async def test_a_backlog_passed_over_at_a_full_webhook_is_claimed_as_its_room_frees(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """A webhook at its cap has its due deliveries passed over by a claim (not refused one by
    one): the room its attempts let go still wakes the claimer, so its backlog goes out as fast
    as the endpoint answers, never after the engine's poll (60 s here)."""
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    with trio.fail_after(TIMEOUT):
        async with receiving() as slow, trio.open_nursery() as nursery:
            slow.default = Answer(delay=0.5)  # the cap's two attempts outlast the claims
            await console.webhook(slow.url, ["customer.created"])
            engine = DeliveryEngine(platform, held_per_webhook=2, poll=60.0)
            await nursery.start(engine.run)
            for index in range(8):
                await api.customer(f"Backlog {index}")
            await slow.wait_for(8, within=20)
            nursery.cancel_scope.cancel()


@dataclass
class Sibling:
    """An app of the flood's developer: its console, and the data API of a business of the
    developer's own that only this app is installed in."""

    console: Console
    api: Api


async def _apps_of(
    client: Any, admin_headers: dict[str, str], owner: Api, console: Console, count: int
) -> list[Sibling]:
    """The owner's app and ``count - 1`` more apps of its developer, each installed with every
    area scope in a business of its own (a business keeps at most half the workers, whatever
    apps its events run: a developer's apps in one business would be held by that)."""
    siblings = [Sibling(console, owner)]
    admin = {"headers": admin_headers}
    for index in range(1, count):
        business = await (
            await client.post("/admin/businesses", json={"name": f"Sibling {index}"}, **admin)
        ).get_json()
        user_id = owner.world.user_id
        member = await client.put(
            f"/admin/businesses/{business['id']}/members/{user_id}", json={"role": "owner"}, **admin
        )
        assert member.status_code == 200
        made = await client.post(
            "/admin/apps",
            json={
                "name": f"Sibling {index}",
                "type": "CONFIDENTIAL",
                "redirectUris": [REDIRECT_URI],
                "scopes": list(ALL_SCOPES),
                "developerUserId": user_id,
                "reviewed": True,
            },
            **admin,
        )
        assert made.status_code == 201
        app = await made.get_json()
        world = replace(
            owner.world,
            business_id=business["id"],
            app_id=app["id"],
            client_id=app["clientId"],
            client_secret=app["clientSecret"],
        )
        await install(client, admin_headers, world, ALL_SCOPES)
        answer = await exchange(client, world, await session_token(client, admin_headers, world))
        assert answer.status_code == 200
        token = (await answer.get_json())["access_token"]
        siblings.append(
            Sibling(Console(client, console.token, app["id"]), Api(client, token, world))
        )
    return siblings


@pytest.mark.parametrize("apps", [1, 4, 16])
async def test_a_developers_apps_together_keep_one_apps_share_of_the_workers(
    platform: Platform, client: Any, admin_headers: dict[str, str], app: Any, apps: int
) -> None:
    """Every app of the flood's developer has a run waiting 30 s on a call: together they hold
    one of the two workers (what one app would), and the victim's run starts at once."""
    with trio.fail_after(TIMEOUT):
        flood = await owner_api(client, admin_headers)
        siblings = await _apps_of(
            client, admin_headers, flood, await console_for(client, admin_headers, flood), apps
        )
        for sibling in siblings:
            await _function(sibling.console, "waits", WAITS)
        victim = await owner_api(client, admin_headers)
        victim_console = await console_for(client, admin_headers, victim)
        await _function(victim_console, "quick", QUICK)
        for sibling in siblings:
            for index in range(2):
                await sibling.api.customer(f"Flood {index}")  # two runs of each app
        async with runners(platform, app, count=1, workers=2) as running:
            await _dispatch(platform)
            (runner,) = running

            async def a_flood_run_holds_a_worker() -> bool:
                return runner.busy >= 1

            await _until(a_flood_run_holds_a_worker, within=30)
            await victim.customer("Victim")
            await _dispatch(platform)
            started = trio.current_time()

            async def victim_ran() -> bool:
                return [r["status"] for r in await _runs(victim_console, "quick")] == ["succeeded"]

            await _until(victim_ran, within=10)  # a flood run waits 30 s on its call
            took = trio.current_time() - started
            flood_busy = runner.busy
    assert took < 10
    assert flood_busy == 1, "the developer's apps together hold one worker"


@pytest.mark.parametrize("apps", [1, 4, 16])
async def test_a_developers_apps_together_hold_one_apps_share_of_the_engine(
    platform: Platform, client: Any, admin_headers: dict[str, str], apps: int
) -> None:
    """Every app of the flood's developer has two webhooks at an endpoint that never answers
    and a backlog for them: together they hold one app's share of the engine (16 of 48, and
    one more for each of their webhooks with none, never twice the share), and the victim's
    delivery arrives while the flood's attempts still hang. With shares per app, four apps
    filled the engine and the victim waited for the first attempt to time out (10 s)."""
    flood = await owner_api(client, admin_headers)
    victim = await owner_api(client, admin_headers)
    victim_console = await console_for(client, admin_headers, victim)
    with trio.fail_after(TIMEOUT):
        siblings = await _apps_of(
            client, admin_headers, flood, await console_for(client, admin_headers, flood), apps
        )
        async with receiving() as dead, receiving() as fast, trio.open_nursery() as nursery:
            dead.default = NEVER
            for sibling in siblings:
                for _ in range(2):
                    await sibling.console.webhook(dead.url, ["customer.created"])
            await victim_console.webhook(fast.url, ["customer.created"])
            engine = DeliveryEngine(
                platform, held_total=48, held_per_developer=16, held_per_webhook=8
            )
            await nursery.start(engine.run)
            for sibling in siblings:
                for index in range(8):
                    await sibling.api.customer(f"Flood {index}")  # 8 to each dead webhook
            await dead.wait_for(16, within=30)
            started = trio.current_time()
            await victim.customer("Victim")
            await fast.wait_for(1, within=5)  # the flood's attempts hang for 10 s
            took = trio.current_time() - started
            held = engine.held
            nursery.cancel_scope.cancel()
    assert held <= 2 * 16 + 1
    assert took < 5


async def test_a_developers_apps_together_keep_one_apps_attempts_in_flight(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """Twenty dead webhooks shared out among four apps of one developer, and a backlog: the
    developer has its cap of attempts hanging at once, what one app with the twenty would have
    (with a cap per app, each app had its own: all 60 hung)."""
    flood = await owner_api(client, admin_headers)
    with trio.fail_after(TIMEOUT):
        siblings = await _apps_of(
            client, admin_headers, flood, await console_for(client, admin_headers, flood), 4
        )
        async with receiving() as dead, trio.open_nursery() as nursery:
            dead.default = NEVER
            for sibling in siblings:
                for _ in range(5):
                    await sibling.console.webhook(dead.url, ["customer.created"])
            engine = DeliveryEngine(platform, in_flight_per_developer=24)
            await nursery.start(engine.run)
            for sibling in siblings:
                for index in range(3):
                    await sibling.api.customer(f"Flood {index}")  # 60 deliveries in all
            await dead.wait_for(24, within=30)
            await trio.sleep(0.5)  # room for any more to (wrongly) arrive
            hanging = len(dead.received)
            nursery.cancel_scope.cancel()
    assert hanging == 24


async def _in_another_business(client: Any, admin_headers: dict[str, str], owner: Api) -> Api:
    """The data API of a new business of the owner's, its app (the owner's) installed there with
    every area scope."""
    admin = {"headers": admin_headers}
    business = await (
        await client.post("/admin/businesses", json={"name": "Another"}, **admin)
    ).get_json()
    user_id = owner.world.user_id
    member = await client.put(
        f"/admin/businesses/{business['id']}/members/{user_id}", json={"role": "owner"}, **admin
    )
    assert member.status_code == 200
    world = replace(owner.world, business_id=business["id"])
    await install(client, admin_headers, world, ALL_SCOPES)
    answer = await exchange(client, world, await session_token(client, admin_headers, world))
    assert answer.status_code == 200
    return Api(client, (await answer.get_json())["access_token"], world)


async def _queue_all(platform: Platform) -> None:
    """Fan the committed events out into deliveries left in the queue, due now (none handed
    to an engine): a backlog such as retries or another process's claims leave."""
    while True:
        async with platform.store.transaction() as tx:
            pending = await queues.pending_events(tx, 100)
            if not pending.positions:
                return
            now = platform.now()
            fanned = queues.plan_fan_out(
                pending,
                keyring=platform.keyring,
                now=now,
                lease="nobody",
                lease_until=now,
                take=lambda *_: False,
            )
            await queues.write_fan_out(tx, fanned)


async def test_an_apps_burst_in_one_business_leaves_its_delivery_in_another_in_the_first_claim(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    """One app in two businesses, one webhook at an endpoint that accepts and never answers:
    200 deliveries of business A due, then one of business B, due after all of them. The
    claims go round the app's businesses, each one's oldest first and handed over in turns, so
    B's delivery is among the first attempts (the webhook's 8 in flight, which then hang).
    Taken oldest first across the app's businesses, it was the burst's 201st: behind 25 rounds
    of hanging attempts (10 s each)."""
    with trio.fail_after(TIMEOUT):
        burst = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, burst)
        other = await _in_another_business(client, admin_headers, burst)
        async with receiving() as dead, trio.open_nursery() as nursery:
            dead.default = NEVER
            await console.webhook(dead.url, ["customer.created"])
            for index in range(200):
                await burst.customer(f"Burst {index}")
            await _queue_all(platform)
            clock.advance(1.0)
            await other.customer("Other")
            await _queue_all(platform)
            engine = DeliveryEngine(platform)
            await nursery.start(engine.run)
            await dead.wait_for(8, within=30)
            await trio.sleep(0.5)  # room for any more to (wrongly) arrive
            arrived = [json.loads(received.body)["businessId"] for received in dead.received]
            nursery.cancel_scope.cancel()
    assert len(arrived) == 8
    assert arrived.count(other.world.business_id) == 1, "B's delivery is among the first"
