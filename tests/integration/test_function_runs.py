"""Hosted functions running on events: the dispatcher queues a run per subscribed function, the
runner runs it in a real sandbox pool with a minted token, and the run's outcome, logs and the
data it wrote through ``context.api`` are there to see."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio

from ledgerport import apps, catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import FunctionRunner, Scheduler
from ledgerport.http import in_process_api
from ledgerport.platform import Platform
from ledgerport.runtime import RunLimits, SandboxPool
from ledgerport.storage import Store

from .data_api import Api, owner_api
from .webhook_world import Console, console_for, engine_for

TIMEOUT = 60


@dataclass
class Functions:
    api: Api
    console: Console
    runner: FunctionRunner
    pool: SandboxPool


@asynccontextmanager
async def functions_world(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, **limits: Any
) -> AsyncIterator[Functions]:
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    async with in_process_api(app, "http://localhost") as call:
        runner = FunctionRunner(platform, workers=1, limits=RunLimits(**limits), api=call)
        async with runner.running():
            yield Functions(api, console, runner, runner.pool)


async def run_queued(platform: Platform, world: Functions) -> None:
    """Fan out what was committed, then run every run that is due."""
    async with engine_for(platform) as engine:
        await engine.dispatch_once()
        await engine.settle()
    while await world.runner.claim_once():
        await world.runner.settle()


async def runs(world: Functions, name: str) -> list[dict[str, Any]]:
    page = await world.console.ok("GET", f"/functions/{name}/runs")
    return page["data"]  # type: ignore[no-any-return]


LISTS_AND_WRITES = """
export async function handler(event, context) {
  context.log("invoice", event.data.id, "created");
  const invoices = await context.api.get("/invoices");
  await context.api.post("/app-data", { values: [
    { resourceType: "invoice", resourceId: event.data.id, key: "seen", value: "by function" } ] });
  return { invoices: invoices.data.length, business: event.businessId };
}
"""


async def test_a_function_runs_on_its_event_lists_invoices_and_writes_app_data(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            await world.console.ok(
                "POST",
                "/app-data-fields",
                {"resourceType": "invoice", "key": "seen", "type": "TEXT"},
                201,
            )
            await world.console.ok(
                "PUT",
                "/functions/on-invoice",
                {"source": LISTS_AND_WRITES, "events": ["invoice.created"]},
            )
            customer = await world.api.customer()
            invoice = await world.api.invoice(customer["id"])
            await run_queued(platform, world)
            (run,) = await runs(world, "on-invoice")
            data = await world.api.ok(
                "GET", f"/app-data?resourceType=invoice&resourceId={invoice['id']}"
            )
            async with store.transaction() as tx:
                tokens = await tx.fetch(
                    "SELECT f.revoked_at, f.revoked_reason, t.created_at, t.expires_at"
                    " FROM token_families f JOIN access_tokens t ON t.family_id = f.id"
                    " WHERE f.grant_type = 'function_run'"
                )
    assert run["status"] == "succeeded", run
    assert run["attempts"] == 1
    assert run["version"] == 1
    assert run["logs"] == [f"invoice {invoice['id']} created"]
    assert run["result"] == {"invoices": 1, "business": world.api.world.business_id}
    assert [(v["key"], v["value"]) for v in data["data"]] == [("seen", "by function")]
    # The run's token lived no longer than the wall limit and was revoked when it ended.
    (token,) = tokens
    assert token["revoked_reason"] == "run_ended"
    assert token["revoked_at"] is not None
    assert token["expires_at"] - token["created_at"] <= RunLimits().wall


async def test_a_run_cannot_reach_another_business(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    source = """
    export async function handler(event, context) {
      try { await context.api.get("/customers/" + event.data.name); return "reached"; }
      catch (error) { return error.status; }
    }
    """
    with trio.fail_after(TIMEOUT):
        other = await owner_api(client, admin_headers)
        theirs = await other.customer("Theirs")
        async with functions_world(client, admin_headers, app, platform) as world:
            await world.console.ok(
                "PUT", "/functions/peek", {"source": source, "events": ["customer.created"]}
            )
            # The new customer is named after the other business's customer, whom the run looks
            # up: its token is not theirs.
            await world.api.customer(theirs["id"])
            await run_queued(platform, world)
            (run,) = await runs(world, "peek")
    assert run["status"] == "succeeded"
    assert run["result"] == 404


async def test_a_throwing_handler_fails_its_run_once_and_for_all(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    source = "export function handler() { throw new TypeError('broken on purpose') }"
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            await world.console.ok(
                "PUT", "/functions/broken", {"source": source, "events": ["customer.created"]}
            )
            await world.api.customer()
            await run_queued(platform, world)
            assert await world.runner.claim_once() == 0
            (run,) = await runs(world, "broken")
    assert (run["status"], run["attempts"], run["error"]) == (
        "failed",
        1,
        "TypeError: broken on purpose",
    )


async def test_a_worker_killed_mid_run_is_replaced_and_the_run_goes_again(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    looping = "export function handler() { for (;;) {} }"
    fixed = "export function handler(event) { return 'second time: ' + event.type }"
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform, wall=30, cpu=30) as world:
            await world.console.ok(
                "PUT", "/functions/f", {"source": looping, "events": ["customer.created"]}
            )
            await world.api.customer()
            async with engine_for(platform) as engine:
                await engine.dispatch_once()
            (pid,) = world.pool.pids()
            assert await world.runner.claim_once() == 1
            await trio.sleep(0.3)
            os.kill(pid, signal.SIGKILL)
            await world.runner.settle()
            (first,) = await runs(world, "f")
            # The platform failed the run: it goes again, with the version that runs by then.
            await world.console.ok(
                "PUT", "/functions/f", {"source": fixed, "events": ["customer.created"]}
            )
            await world.pool.until_full()
            clock.advance(1)
            assert await world.runner.claim_once() == 1
            await world.runner.settle()
            (second,) = await runs(world, "f")
            replacement = world.pool.pids()
    assert first["status"] == "retrying"
    assert first["error"] == "the sandbox worker ended during the run (signal 9)"
    assert (second["status"], second["attempts"], second["version"]) == ("succeeded", 2, 2)
    assert json.loads(json.dumps(second["result"])) == "second time: customer.created"
    assert replacement != [pid]


async def test_a_run_of_a_deleted_function_fails_unrun(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            await world.console.ok(
                "PUT",
                "/functions/gone",
                {"source": "export const handler = () => 1", "events": ["customer.created"]},
            )
            await world.api.customer()
            async with engine_for(platform) as engine:
                await engine.dispatch_once()
            await world.console.ok("DELETE", "/functions/gone", status=204)
            while await world.runner.claim_once():
                await world.runner.settle()
            async with store.transaction() as tx:
                row = await tx.fetchrow("SELECT status, attempts, error FROM function_runs")
    assert row == {"status": "failed", "attempts": 0, "error": "not run: function deleted"}


async def test_only_subscribed_functions_of_entitled_apps_run(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            body = {"source": "export const handler = (e) => e.type", "events": ["invoice.created"]}
            await world.console.ok("PUT", "/functions/invoices-only", body)
            await world.api.customer()  # customer.created: no run
            stranger = await owner_api(client, admin_headers)
            await stranger.customer()  # another business: no run either
            await run_queued(platform, world)
            listed = await runs(world, "invoices-only")
    assert listed == []


async def test_the_cleanup_removes_runs_after_30_days_and_deleted_functions_with_them(
    client: Any,
    admin_headers: dict[str, str],
    app: Any,
    platform: Platform,
    store: Store,
    clock: FrozenClock,
) -> None:
    body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            await world.console.ok("PUT", "/functions/kept", body)
            await world.console.ok("PUT", "/functions/dropped", body)
            await world.api.customer()
            await run_queued(platform, world)
            await world.console.ok("DELETE", "/functions/dropped", status=204)
            clock.advance(29 * 86400)
            early = await Scheduler(platform).cleanup_once()
            clock.advance(2 * 86400)
            late = await Scheduler(platform).cleanup_once()
            async with store.transaction() as tx:
                functions = await tx.fetch("SELECT name FROM functions")
                versions = await tx.fetchval("SELECT COUNT(*) FROM function_versions")
            kept_runs = await runs(world, "kept")
    assert (early["function_run"], late["function_run"]) == (0, 2)
    assert [row["name"] for row in functions] == ["kept"]
    assert versions == 1
    assert kept_runs == []


async def test_a_stopping_runner_gives_its_runs_back(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, store: Store
) -> None:
    looping = "export function handler() { for (;;) {} }"
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        await console.ok("PUT", "/functions/f", {"source": looping, "events": ["customer.created"]})
        await api.customer()
        async with engine_for(platform) as engine:
            await engine.dispatch_once()
        runner = FunctionRunner(platform, workers=1, limits=RunLimits(wall=30, cpu=30))
        with trio.CancelScope() as stopping:
            async with runner.running():
                assert await runner.claim_once() == 1
                stopping.deadline = trio.current_time() + 0.5  # the run loops meanwhile
                await trio.sleep_forever()
        async with store.transaction() as tx:
            row = await tx.fetchrow(
                "SELECT status, attempts, lease, next_attempt_at FROM function_runs"
            )
    assert row is not None
    assert (row["status"], row["attempts"], row["lease"]) == ("queued", 0, None)
    assert row["next_attempt_at"] <= platform.now()


async def test_a_claim_still_going_on_when_the_runner_is_left_starts_its_runs(
    client: Any, admin_headers: dict[str, str], platform: Platform, store: Store
) -> None:
    """The claim loop, a task of the runner's nursery, may resume a claim when the body of
    ``running()`` has already left (after a shielded checkpoint, taking a lock): what it
    claims runs, and leaving waits for it."""
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        late = "export function handler() { return 'late' }"
        await console.ok("PUT", "/functions/f", {"source": late, "events": ["customer.created"]})
        await api.customer()
        async with engine_for(platform) as engine:
            await engine.dispatch_once()
        runner = FunctionRunner(platform, workers=1, limits=RunLimits())
        claimed: list[int] = []
        async with runner.running() as nursery:

            async def claims_once_the_body_has_left() -> None:
                await trio.lowlevel.checkpoint()  # the body has left by now
                claimed.append(await runner.claim_once())

            nursery.start_soon(claims_once_the_body_has_left)
        async with store.transaction() as tx:
            status = await tx.fetchval("SELECT status FROM function_runs")
    assert claimed == [1]
    assert status == "succeeded"


PENDING_CALL_ATTACK = """
export function handler(event, context) {
  context.api.get("/customers").then((page) => context.api.post("/customers",
    { name: "copied: " + page.data.map((customer) => customer.name).join(", ") }));
  return "returned before its calls";
}
"""
READS_ITS_CUSTOMERS = """
export async function handler(event, context) {
  const page = await context.api.get("/customers");
  return page.data.map((customer) => customer.name).sort();
}
"""


async def test_calls_left_pending_at_return_act_for_their_own_run_only(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    """The attack that once read and wrote another business: a sync handler starts a chain
    of calls and returns; the next run on the same worker is another app's in another
    business. The chain acts in the attacker's business, and nothing in the other."""
    with trio.fail_after(TIMEOUT):
        attacker = await owner_api(client, admin_headers)
        attacker_console = await console_for(client, admin_headers, attacker)
        victim = await owner_api(client, admin_headers)
        victim_console = await console_for(client, admin_headers, victim)
        async with in_process_api(app, "http://localhost") as call:
            runner = FunctionRunner(platform, workers=1, api=call)
            async with runner.running():
                world = Functions(attacker, attacker_console, runner, runner.pool)
                await attacker_console.ok(
                    "PUT",
                    "/functions/copy",
                    {"source": PENDING_CALL_ATTACK, "events": ["customer.created"]},
                )
                await victim_console.ok(
                    "PUT",
                    "/functions/read",
                    {"source": READS_ITS_CUSTOMERS, "events": ["customer.created"]},
                )
                await attacker.customer("Attacker Co")
                await victim.customer("Victim Secret")
                await run_queued(platform, world)
                (attack,) = await runs(world, "copy")
                (read,) = (await victim_console.ok("GET", "/functions/read/runs"))["data"]
        theirs = await victim.ok("GET", "/customers")
        ours = await attacker.ok("GET", "/customers")
    assert attack["status"] == "succeeded"
    assert read["status"] == "succeeded"
    assert read["result"] == ["Victim Secret"]
    assert [customer["name"] for customer in theirs["data"]] == ["Victim Secret"]
    assert sorted(customer["name"] for customer in ours["data"]) == [
        "Attacker Co",
        "copied: Attacker Co",
    ]


async def test_a_run_gets_no_token_once_its_installing_user_is_no_longer_an_active_member(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    source = """
    export async function handler(event, context) {
      try { await context.api.get("/customers"); return "reached"; }
      catch (error) { return error.status; }
    }
    """
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            await world.console.ok(
                "PUT", "/functions/reach", {"source": source, "events": ["customer.created"]}
            )
            await world.api.customer()
            member = world.api.world
            response = await client.put(
                f"/admin/businesses/{member.business_id}/members/{member.user_id}",
                json={"role": "owner", "active": False},
                headers=admin_headers,
            )
            assert response.status_code == 200
            await run_queued(platform, world)
            (run,) = await runs(world, "reach")
    assert run["status"] == "succeeded"
    assert run["result"] == 503


WRITES_A_LOT = """
export function handler(event, context) {
  for (let i = 0; i < 200; i++) context.log("line " + i + " " + "x".repeat(90));
  return { padding: "y".repeat(10000) };
}
"""
THROWS = """
function deep() { throw new RangeError("out of range on purpose"); }
export function handler() { deep(); }
"""


async def test_the_listing_answers_excerpts_and_a_runs_own_route_answers_it_whole(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            for name, source in (("writes", WRITES_A_LOT), ("throws", THROWS)):
                await world.console.ok(
                    "PUT", f"/functions/{name}", {"source": source, "events": ["customer.created"]}
                )
            await world.api.customer()
            await run_queued(platform, world)
            (listed,) = await runs(world, "writes")
            whole = await world.console.ok("GET", f"/functions/writes/runs/{listed['id']}")
            (thrown,) = await runs(world, "throws")
            thrown_whole = await world.console.ok("GET", f"/functions/throws/runs/{thrown['id']}")
            elsewhere = await world.console.call("GET", f"/functions/throws/runs/{listed['id']}")
            unknown = await world.console.call("GET", "/functions/writes/runs/run_unknown")
    lines = [f"line {i} " + "x" * 90 for i in range(200)]
    assert listed["status"] == "succeeded"
    assert listed["logsTruncated"] is True
    assert 0 < len(listed["logs"]) < 200
    assert listed["logs"] == lines[: len(listed["logs"])]
    assert sum(len(line) for line in listed["logs"]) <= queues.RUN_EXCERPT_CHARS
    assert (listed["result"], listed["resultTruncated"]) == (None, True)
    assert [line["message"] for line in whole["logs"]] == lines
    assert all(line["at"] >= whole["startedAt"] for line in whole["logs"])
    assert "logsTruncated" not in whole
    assert whole["result"] == {"padding": "y" * 10000}
    assert whole["event"]["type"] == "customer.created"
    assert whole["event"]["id"] == listed["id"]
    assert whole["stack"] is None
    assert thrown["error"] == "RangeError: out of range on purpose"
    assert thrown["logsTruncated"] is False
    # The stack's positions are the uploaded source's: the throw on line 2, column 25, called
    # from the handler on line 3, column 29 (THROWS begins with a line break).
    assert thrown_whole["stack"].splitlines() == [
        "RangeError: out of range on purpose",
        f"    at deep ({apps.SCRIPT_NAME}:2:25)",
        f"    at handler ({apps.SCRIPT_NAME}:3:29)",
    ]
    assert elsewhere.status_code == unknown.status_code == 404
    assert (await unknown.get_json())["code"] == "RUN_NOT_FOUND"


TELLS_ITS_EVENT = """
export async function handler(event, context) {
  context.log("sample", event.type, event.data.test, event.businessId);
  const answer = await context.api.get("/invoices").catch((e) => String(e));
  return { eventId: event.eventId, api: typeof answer === "string" ? "refused" : answer.status };
}
"""


async def test_a_test_run_runs_the_function_on_its_first_events_sample_in_no_business(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            await world.console.ok(
                "PUT",
                "/functions/tells",
                {"source": TELLS_ITS_EVENT, "events": ["invoice.created", "invoice.paid"]},
            )
            queued = await world.console.ok("POST", "/functions/tells/test", None, 202)
            missing = await world.console.call("POST", "/functions/nothing/test")
            while await world.runner.claim_once():
                await world.runner.settle()
            (run,) = await runs(world, "tells")
            whole = await world.console.ok("GET", f"/functions/tells/runs/{queued['runId']}")
    assert missing.status_code == 404
    assert run["id"] == queued["runId"]
    assert run["status"] == "succeeded", run
    assert run["logs"] == ["sample invoice.created true test"]
    assert run["result"]["eventId"] is None
    assert run["result"]["api"] == "refused"  # no business: no token, its calls answer 503
    assert whole["event"]["type"] == "invoice.created"


async def test_a_test_run_of_a_function_on_no_event_runs_on_the_default_sample(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    """A function subscribed to no event still has a test run: on invoice.created's sample, as
    a test delivery to a webhook on no event."""
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            await world.console.ok(
                "PUT", "/functions/idle", {"source": TELLS_ITS_EVENT, "events": []}
            )
            queued = await world.console.ok("POST", "/functions/idle/test", None, 202)
            while await world.runner.claim_once():
                await world.runner.settle()
            whole = await world.console.ok("GET", f"/functions/idle/runs/{queued['runId']}")
    assert whole["status"] == "succeeded", whole
    assert whole["event"]["type"] == catalog.DEFAULT_TEST_EVENT
