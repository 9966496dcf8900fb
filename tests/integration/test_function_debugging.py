"""What an app's developer debugs hosted functions with (contract.md: Developer console, second
round): the runs filtered by status, a run whole with its event, version, timed logs and the
stack of what it threw; a replay (the current version, the same event, a token of its own,
the send-time checks); the versions kept, the active one, and a rollback; and that nothing of
another app's runs or versions is reachable."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from ledgerport import apps, queues
from ledgerport.clock import FrozenClock
from ledgerport.engine import FunctionRunner
from ledgerport.http import in_process_api
from ledgerport.platform import Platform
from ledgerport.runtime import ApiAnswer, ApiCall, RunLimits
from ledgerport.storage import Store, load_migrations

from .data_api import Api, owner_api
from .webhook_world import Console, console_for, engine_for

TIMEOUT = 60


@dataclass
class World:
    api: Api
    console: Console
    runner: FunctionRunner
    tokens: list[str] = field(default_factory=list)
    """Every token a run's calls came with, in order."""


@asynccontextmanager
async def world_of(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> AsyncIterator[World]:
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    async with in_process_api(app, "http://localhost") as call:
        made = World(api, console, None)  # type: ignore[arg-type]

        async def recorded(token: str, request: ApiCall) -> ApiAnswer:
            made.tokens.append(token)
            return await call(token, request)

        made.runner = FunctionRunner(platform, workers=1, limits=RunLimits(), api=recorded)
        async with made.runner.running():
            yield made


async def run_all(platform: Platform, world: World) -> None:
    """Fan out what was committed, then run every run that is due."""
    async with engine_for(platform) as engine:
        await engine.dispatch_once()
        await engine.settle()
    while await world.runner.claim_once():
        await world.runner.settle()


async def upload(world: World, source: str, name: str = "f") -> dict[str, Any]:
    body = {"source": source, "events": ["customer.created"]}
    return await world.console.ok("PUT", f"/functions/{name}", body)  # type: ignore[no-any-return]


def answering(value: str) -> str:
    """A handler that reads the business's customers with its token and answers ``value``."""
    return (
        "export async function handler(event, context) {\n"
        "  const customers = await context.api.get('/customers');\n"
        f"  context.log('version {value}');\n"
        f"  return {{ value: '{value}', customers: customers.data.length }};\n"
        "}\n"
    )


# --- A run whole ---------------------------------------------------------------------------------

TIMED = """
export async function handler(event, context) {
  context.log("before the call");
  await context.api.get("/customers");
  context.log("after the call", event.data.name);
  throw new TypeError("stopped on purpose");
}
"""


async def test_a_run_answers_its_event_version_timed_logs_and_stack(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            await upload(world, answering("one"))
            await upload(world, TIMED)
            customer = await world.api.customer("Timed Ltd")
            await run_all(platform, world)
            (listed,) = (await world.console.ok("GET", "/functions/f/runs"))["data"]
            whole = await world.console.ok("GET", f"/functions/f/runs/{listed['id']}")
            source = await world.console.ok("GET", f"/functions/f/versions/{whole['version']}")
    assert (whole["status"], whole["version"], whole["error"]) == (
        "failed",
        2,
        "TypeError: stopped on purpose",
    )
    assert whole["event"]["data"]["id"] == customer["id"]
    assert whole["event"]["id"] == whole["id"]
    assert whole["eventId"] == listed["eventId"] is not None
    assert [line["message"] for line in whole["logs"]] == [
        "before the call",
        "after the call Timed Ltd",
    ]
    times = [line["at"] for line in whole["logs"]]
    assert whole["startedAt"] <= times[0] <= times[1]
    # The stack points into the source of the version that ran, as uploaded.
    line = source["source"].splitlines().index('  throw new TypeError("stopped on purpose");')
    column = source["source"].splitlines()[line].index("new") + 1
    assert whole["stack"].splitlines()[:2] == [
        "TypeError: stopped on purpose",
        f"    at handler ({apps.SCRIPT_NAME}:{line + 1}:{column})",
    ]


FORGES_TIME = """
export function handler(event, context) {
  context.log("first");
  Date.now = () => -1e12;
  const until = Date.prototype.getTime.call(new Date()) + 30;
  while (Date.prototype.getTime.call(new Date()) < until) {}
  context.log("thirty milliseconds later");
}
"""


async def test_a_handler_cannot_change_the_times_of_its_log_lines(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    """The harness took ``Date.now`` before the guest ran: replacing it changes nothing."""
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            await upload(world, FORGES_TIME)
            await world.api.customer()
            await run_all(platform, world)
            (listed,) = (await world.console.ok("GET", "/functions/f/runs"))["data"]
            whole = await world.console.ok("GET", f"/functions/f/runs/{listed['id']}")
            async with platform.store.transaction() as tx:
                stored = await tx.fetchval(
                    "SELECT log_times FROM function_runs WHERE id = $1", listed["id"]
                )
    assert whole["status"] == "succeeded"
    first, later = json.loads(stored)
    assert 0 <= first < later
    assert later - first >= 30
    assert all(line["at"] is not None for line in whole["logs"])


RUN_FILTERS = {
    "status=succeeded": ["ok"],
    "status=failed": ["thrown"],
    "status=succeeded,failed": ["thrown", "ok"],
    "status=queued&status=retrying": [],
    "": ["thrown", "ok"],
}


async def test_runs_are_filtered_by_status(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, clock: FrozenClock
) -> None:
    seen = {}
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            await upload(world, "export function handler(event) { return 1 }")
            await world.api.customer()
            await run_all(platform, world)
            await upload(world, "export function handler() { throw new Error('no') }")
            clock.advance(1)
            await world.api.customer("Second")
            await run_all(platform, world)
            listed = (await world.console.ok("GET", "/functions/f/runs"))["data"]
            named = {"thrown": listed[0]["id"], "ok": listed[1]["id"]}
            for query in RUN_FILTERS:
                page = await world.console.ok("GET", f"/functions/f/runs?{query}")
                seen[query] = [run["id"] for run in page["data"]]
            refused = await world.console.call("GET", "/functions/f/runs?status=finished")
            body = await refused.get_json()
    assert seen == {query: [named[n] for n in names] for query, names in RUN_FILTERS.items()}
    assert refused.status_code == 400
    assert "code" not in body
    assert body["message"][0].startswith("status must be one or more of queued, retrying")


# --- Replay --------------------------------------------------------------------------------------


async def _token_status(client: Any, token: str) -> int:
    response = await client.get("/customers", headers={"Authorization": f"Bearer {token}"})
    return int(response.status_code)


async def test_a_replay_runs_the_current_version_on_the_same_event_with_a_token_of_its_own(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            await upload(world, answering("one"))
            await world.api.customer()
            await run_all(platform, world)
            (first,) = (await world.console.ok("GET", "/functions/f/runs"))["data"]
            first_token = world.tokens[-1]
            await upload(world, answering("two"))
            queued = await world.console.ok(
                "POST", f"/functions/f/runs/{first['id']}/replay", None, 202
            )
            first_token_after = await _token_status(client, first_token)
            await run_all(platform, world)
            replayed = await world.console.ok("GET", f"/functions/f/runs/{queued['runId']}")
            original = await world.console.ok("GET", f"/functions/f/runs/{first['id']}")
            replay_token = world.tokens[-1]
            replay_token_after = await _token_status(client, replay_token)
    assert queued["runId"] != first["id"]
    assert (replayed["status"], replayed["version"]) == ("succeeded", 2)
    assert replayed["result"] == {"value": "two", "customers": 1}
    assert replayed["replayOf"] == first["id"]
    assert replayed["eventId"] == first["eventId"]
    # The same event, the new run's id in the body.
    assert {**replayed["event"], "id": None} == {**original["event"], "id": None}
    assert replayed["event"]["id"] == queued["runId"]
    # A token of its own, and neither acts once its run has ended.
    assert replay_token != first_token
    assert first_token_after == replay_token_after == 401


async def test_a_replay_is_checked_when_it_runs_as_any_run(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    """The installation is gone: the replay is queued, and fails unrun at its send-time check,
    never getting a token."""
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            await upload(world, answering("one"))
            await world.api.customer()
            await run_all(platform, world)
            (first,) = (await world.console.ok("GET", "/functions/f/runs"))["data"]
            calls = len(world.tokens)
            business = world.api.world
            response = await client.delete(
                f"/admin/businesses/{business.business_id}/apps/{business.app_id}/access",
                headers=admin_headers,
            )
            assert response.status_code == 204
            queued = await world.console.ok(
                "POST", f"/functions/f/runs/{first['id']}/replay", None, 202
            )
            await run_all(platform, world)
            replayed = await world.console.ok("GET", f"/functions/f/runs/{queued['runId']}")
    assert (replayed["status"], replayed["error"]) == (
        "failed",
        "not run: app not installed in the business",
    )
    assert len(world.tokens) == calls


async def test_a_replay_of_a_run_not_of_the_function_is_not_found(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            await upload(world, answering("one"))
            await upload(world, answering("other"), name="g")
            await world.api.customer()
            await run_all(platform, world)
            (run_of_g,) = (await world.console.ok("GET", "/functions/g/runs"))["data"]
            through_f = await world.console.call(
                "POST", f"/functions/f/runs/{run_of_g['id']}/replay"
            )
            unknown = await world.console.call("POST", "/functions/f/runs/run_unknown/replay")
            no_function = await world.console.call(
                "POST", f"/functions/h/runs/{run_of_g['id']}/replay"
            )
    assert (through_f.status_code, (await through_f.get_json())["code"]) == (404, "RUN_NOT_FOUND")
    assert (unknown.status_code, (await unknown.get_json())["code"]) == (404, "RUN_NOT_FOUND")
    assert (no_function.status_code, (await no_function.get_json())["code"]) == (
        404,
        "FUNCTION_NOT_FOUND",
    )


# --- Versions ------------------------------------------------------------------------------------


async def test_versions_are_listed_newest_first_and_a_rollback_is_what_later_runs_run(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            for value in ("one", "two", "three"):
                await upload(world, answering(value))
            listed = await world.console.ok("GET", "/functions/f/versions")
            rolled_back = await world.console.ok("POST", "/functions/f/versions/1/activate")
            read = await world.console.ok("GET", "/functions/f")
            await world.api.customer()
            await run_all(platform, world)
            (run,) = (await world.console.ok("GET", "/functions/f/runs"))["data"]
            after = await world.console.ok("GET", "/functions/f/versions")
            forward = await world.console.ok("POST", "/functions/f/versions/3/activate")
            uploaded = await upload(world, answering("four"))
    assert [v["version"] for v in listed["data"]] == [3, 2, 1]
    assert [v["active"] for v in listed["data"]] == [True, False, False]
    assert listed["next"] is None
    assert [v["sourceBytes"] for v in listed["data"]] == [
        len(answering(value).encode()) for value in ("three", "two", "one")
    ]
    assert (rolled_back["version"], rolled_back["latestVersion"]) == (1, 3)
    assert rolled_back["events"] == ["customer.created"]
    assert (read["version"], read["source"]) == (1, answering("one"))
    assert (run["version"], run["result"]["value"]) == (1, "one")
    assert [v["active"] for v in after["data"]] == [False, False, True]
    assert (forward["version"], forward["latestVersion"]) == (3, 3)
    assert (uploaded["version"], uploaded["latestVersion"]) == (4, 4)


async def test_the_ten_newest_versions_are_kept(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, store: Store
) -> None:
    kept = apps.FUNCTION_VERSIONS_KEPT
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            for value in range(kept + 2):
                await upload(world, answering(str(value)))
            listed = await world.console.ok("GET", "/functions/f/versions")
            gone = await world.console.call("POST", "/functions/f/versions/2/activate")
            oldest = await world.console.ok("POST", "/functions/f/versions/3/activate")
            await upload(world, answering("next"))
            after = await world.console.ok("GET", "/functions/f/versions")
            async with store.transaction() as tx:
                stored = await tx.fetchval("SELECT COUNT(*) FROM function_versions")
    assert [v["version"] for v in listed["data"]] == list(range(kept + 2, 2, -1))
    assert ((await gone.get_json())["code"], oldest["version"]) == (
        "FUNCTION_VERSION_NOT_FOUND",
        3,
    )
    assert [v["version"] for v in after["data"]] == list(range(kept + 3, 3, -1))
    assert int(stored) == kept


VERSION_REFUSALS = ["0", "4", "01", "-1", "1.0", "abc", "99999999999", "2147483648"]


@pytest.mark.parametrize("version", VERSION_REFUSALS)
async def test_a_version_not_kept_is_not_found(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, version: str
) -> None:
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            for value in ("one", "two", "three"):
                await upload(world, answering(value))
            activated = await world.console.call(
                "POST", f"/functions/f/versions/{version}/activate"
            )
            read = await world.console.call("GET", f"/functions/f/versions/{version}")
            function = await world.console.ok("GET", "/functions/f")
    for response in (activated, read):
        assert response.status_code == 404
        assert (await response.get_json())["code"] == "FUNCTION_VERSION_NOT_FOUND"
    assert function["version"] == 3


async def test_a_claimed_run_keeps_the_version_it_was_claimed_with(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform, store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            await upload(world, answering("one"))
            await upload(world, answering("two"))
            await world.api.customer()
            await world.api.customer("Second")
            async with engine_for(platform) as engine:
                await engine.dispatch_once()
                await engine.settle()
            now = platform.now()
            tenant = (world.api.world.app_id, world.api.world.business_id)

            async def claim_one(lease: str) -> queues.RunPlan | str:
                async with store.transaction() as tx:
                    (run,) = await queues.claim_runs(
                        tx, now=now, lease=lease, lease_until=now + 60, quotas=[(tenant, 1)]
                    )
                    return await queues.run_plan(tx, run)

            claimed = await claim_one("lease_a")
            await world.console.ok("POST", "/functions/f/versions/1/activate")
            later = await claim_one("lease_b")
    assert isinstance(claimed, queues.RunPlan)
    assert isinstance(later, queues.RunPlan)
    # Claimed before the rollback: its plan (read in its claim) holds version 2's script.
    assert (claimed.version, "'two'" in claimed.script) == (2, True)
    assert (later.version, "'one'" in later.script) == (1, True)


async def test_an_existing_function_keeps_its_versions_and_its_active_one_is_its_newest(
    empty_store: Store,
) -> None:
    migrations = load_migrations("sqlite" if empty_store.kind == "sqlite" else "postgres")
    await empty_store.migrate([m for m in migrations if m.version < 20])
    async with empty_store.transaction() as tx:
        await tx.execute(
            "INSERT INTO apps (id, name, type, client_id, redirect_uris, scopes, reviewed,"
            " status, created_at) VALUES ('app_1', 'A', 'PUBLIC', 'cid_1', '[]', '[]', TRUE,"
            " 'ACTIVE', 0)"
        )
        await tx.execute(
            "INSERT INTO functions (id, app_id, name, events, version, created_at, updated_at)"
            " VALUES ('fn_1', 'app_1', 'f', '[]', 2, 0, 0)"
        )
        for version in (1, 2):
            await tx.execute(
                "INSERT INTO function_versions (function_id, version, source, script, created_at)"
                " VALUES ('fn_1', $1, 'source', 'script', 0)",
                version,
            )
    await empty_store.migrate()
    async with empty_store.transaction() as tx:
        row = await tx.fetchrow("SELECT version, latest_version FROM functions WHERE id = 'fn_1'")
        versions = await tx.fetchval("SELECT COUNT(*) FROM function_versions")
    assert row == {"version": 2, "latest_version": 2}
    assert int(versions) == 2


# --- Another app's functions ---------------------------------------------------------------------


async def test_nothing_of_another_apps_runs_or_versions_is_reachable(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            world_of(client, admin_headers, app, platform) as theirs,
            world_of(client, admin_headers, app, platform) as mine,
        ):
            await upload(theirs, answering("theirs"))
            await upload(mine, answering("mine"))
            await theirs.api.customer()
            await run_all(platform, theirs)
            (their_run,) = (await theirs.console.ok("GET", "/functions/f/runs"))["data"]
            their_app = theirs.console.app_id
            asked = {
                "their runs": ("GET", f"/developer/apps/{their_app}/functions/f/runs"),
                "their run": (
                    "GET",
                    f"/developer/apps/{their_app}/functions/f/runs/{their_run['id']}",
                ),
                "their replay": (
                    "POST",
                    f"/developer/apps/{their_app}/functions/f/runs/{their_run['id']}/replay",
                ),
                "their versions": ("GET", f"/developer/apps/{their_app}/functions/f/versions"),
                "their version": ("GET", f"/developer/apps/{their_app}/functions/f/versions/1"),
                "their activation": (
                    "POST",
                    f"/developer/apps/{their_app}/functions/f/versions/1/activate",
                ),
                "their run under my function": (
                    "GET",
                    f"/developer/apps/{mine.console.app_id}/functions/f/runs/{their_run['id']}",
                ),
                "their run replayed under my function": (
                    "POST",
                    f"/developer/apps/{mine.console.app_id}/functions/f/runs/{their_run['id']}/replay",
                ),
            }
            answers = {}
            for name, (method, path) in asked.items():
                response = await client.open(
                    path, method=method, headers={"Authorization": f"Bearer {mine.console.token}"}
                )
                answers[name] = (response.status_code, (await response.get_json())["code"])
            mine_runs = (await mine.console.ok("GET", "/functions/f/runs"))["data"]
    assert answers == {
        "their runs": (404, "APP_NOT_FOUND"),
        "their run": (404, "APP_NOT_FOUND"),
        "their replay": (404, "APP_NOT_FOUND"),
        "their versions": (404, "APP_NOT_FOUND"),
        "their version": (404, "APP_NOT_FOUND"),
        "their activation": (404, "APP_NOT_FOUND"),
        "their run under my function": (404, "RUN_NOT_FOUND"),
        "their run replayed under my function": (404, "RUN_NOT_FOUND"),
    }
    assert mine_runs == []
