"""A hosted function end to end on a served ``ledgerport serve``: upload through the console,
create an invoice through the API, and see the run with its logs and the app data it wrote."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from .served import provision, served

ADMIN_TOKEN = "lp_admin_e2e-functions-token-0123456789abcdef"
HTTP_TIMEOUT = 10.0
RUN_TIMEOUT = 30.0
SCOPES = [
    "customers:read",
    "customers:write",
    "invoices:read",
    "invoices:write",
    "app-data:read",
    "app-data:write",
]
LINE = {"description": "Consulting", "quantity": "2", "unitPrice": "150.50"}
SOURCE = """
export async function handler(event, context) {
  context.log("invoice", event.data.id, "created");
  const invoices = await context.api.get("/invoices");
  await context.api.post("/app-data", { values: [{
    resourceType: "invoice", resourceId: event.data.id, key: "reviewed", value: "by function" }] });
  return { invoices: invoices.data.length };
}
"""


def _ok(response: httpx.Response) -> Any:
    assert response.status_code in (200, 201), response.text
    return response.json()


def _client(base: str, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=base,
        timeout=HTTP_TIMEOUT,
        trust_env=False,
        headers={"Authorization": f"Bearer {token}"},
    )


@contextmanager
def _provision(base: str) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """The console of an app's developer, and the data API with an access token of that app
    installed in the developer's business."""
    made = provision(base, ADMIN_TOKEN, SCOPES, "Reviewer")
    with (
        _client(f"{base}/developer/apps/{made.app_id}", made.developer_token) as console,
        _client(base, made.access_token) as api,
    ):
        yield console, api


def test_upload_create_an_invoice_and_see_the_run_and_what_it_wrote(tmp_path: Path) -> None:
    with served(tmp_path, ADMIN_TOKEN, {"LEDGERPORT_PASSWORD_HASHING": "fast"}) as server:
        with _provision(server.base) as (console, api):
            _ok(
                console.post(
                    "/app-data-fields",
                    json={"resourceType": "invoice", "key": "reviewed", "type": "TEXT"},
                )
            )
            uploaded = _ok(
                console.put(
                    "/functions/review", json={"source": SOURCE, "events": ["invoice.created"]}
                )
            )
            customer = _ok(api.post("/customers", json={"name": "Acme"}))
            invoice = _ok(
                api.post("/invoices", json={"customerId": customer["id"], "lines": [LINE]})
            )
            deadline = time.monotonic() + RUN_TIMEOUT
            while True:
                runs = _ok(console.get("/functions/review/runs"))["data"]
                if runs and runs[0]["status"] not in ("queued", "retrying"):
                    break
                assert time.monotonic() < deadline, f"no run ended in {RUN_TIMEOUT} s: {runs}"
                time.sleep(0.1)
            values = _ok(
                api.get(
                    "/app-data", params={"resourceType": "invoice", "resourceId": invoice["id"]}
                )
            )
            metrics = httpx.get(f"{server.base}/metrics", timeout=HTTP_TIMEOUT).text
    (run,) = runs
    assert uploaded["version"] == 1
    assert run["status"] == "succeeded", run
    assert run["logs"] == [f"invoice {invoice['id']} created"]
    assert run["result"] == {"invoices": 1}
    assert run["eventId"] is not None
    assert run["durationMs"] > 0
    assert [(v["key"], v["value"]) for v in values["data"]] == [("reviewed", "by function")]
    assert 'ledgerport_function_runs_total{outcome="succeeded"} 1.0' in metrics
    assert "ledgerport_function_workers 2.0" in metrics


HOSTILE: dict[str, tuple[str, frozenset[str | None]]] = {
    # A loop meets the CPU limit (2 s) first when it gets most of a core, the wall limit (5 s)
    # when a loaded machine gives it less than 40%: either ends it.
    "loop": (
        "export const handler = () => { for (;;) {} }",
        frozenset({"CPU time limit of 2 s exceeded", "wall time limit of 5 s exceeded"}),
    ),
    "bomb": (
        "export const handler = () => { const a = []; for (;;) a.push(new Array(1e6).fill(1)) }",
        frozenset({"heap limit of 67108864 bytes exceeded"}),
    ),
    "log": (
        "export const handler = (e, c) => { for (;;) c.log('x'.repeat(1000)) }",
        frozenset({"log limit of 65536 bytes exceeded"}),
    ),
    "pending": (
        "export const handler = () => new Promise(() => {})",
        frozenset(
            {
                "the handler's promise can never settle: it waits for nothing that is pending"
                " (no context.api call, and a function has no timers)"
            }
        ),
    ),
    "fine": ("export const handler = (event) => event.data.name", frozenset({None})),
}
"""Each function's source, and the errors its runs may end with (None: it succeeds)."""


def test_hostile_runs_end_on_their_limits_while_the_service_keeps_answering(
    tmp_path: Path,
) -> None:
    # Five seconds: time for the bomb (8 MB at a time) to reach its heap limit first even on a
    # loaded machine, where the sandbox workers (ten below the service's priority) get little
    # CPU (two seconds were not always enough).
    env = {"LEDGERPORT_PASSWORD_HASHING": "fast", "LEDGERPORT_FUNCTION_WALL_LIMIT": "5"}
    customers = 3
    with served(tmp_path, ADMIN_TOKEN, env) as server:
        with _provision(server.base) as (console, api):
            for name, (source, _) in HOSTILE.items():
                _ok(
                    console.put(
                        f"/functions/{name}",
                        json={"source": source, "events": ["customer.created"]},
                    )
                )
            for index in range(customers):
                _ok(api.post("/customers", json={"name": f"Customer {index}"}))
            slowest = 0.0
            deadline = time.monotonic() + 120
            with httpx.Client(base_url=server.base, timeout=HTTP_TIMEOUT, trust_env=False) as probe:
                while True:
                    asked = time.perf_counter()
                    assert probe.get("/healthz").status_code == 200
                    slowest = max(slowest, time.perf_counter() - asked)
                    ended = {
                        name: [
                            run
                            for run in _ok(console.get(f"/functions/{name}/runs"))["data"]
                            if run["status"] in ("succeeded", "failed")
                        ]
                        for name in HOSTILE
                    }
                    if all(len(runs) == customers for runs in ended.values()):
                        break
                    assert time.monotonic() < deadline, ended
                    time.sleep(0.05)
    assert slowest < 1.0
    for name, (_, errors) in HOSTILE.items():
        assert {run["error"] for run in ended[name]} <= errors, name
        failed = errors != {None}
        assert {run["status"] for run in ended[name]} == {"failed" if failed else "succeeded"}
    assert {run["result"] for run in ended["fine"]} == {f"Customer {i}" for i in range(customers)}
