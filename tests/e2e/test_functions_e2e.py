"""A hosted function end to end on a served ``ledgerport serve``: upload through the console,
create an invoice through the API, and see the run with its logs and the app data it wrote; a
function that calls another service (a real receiver on loopback) with a secret of the app in
its header; hostile runs ending on their limits while the service keeps answering."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

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


class _Provider(BaseHTTPRequestHandler):
    """Another service the function calls: records each request, answers a payment intent."""

    seen: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        answer = b'{"id":"pi_e2e"}'
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _provider() -> Iterator[tuple[str, list[tuple[str, dict[str, str], bytes]]]]:
    seen: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []
    handler = type("Provider", (_Provider,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


CHARGE = """
export async function handler(event, context) {
  const answer = await context.fetch("BASE/v1/payment_intents", {
    method: "POST",
    headers: { Authorization: "Bearer " + context.secret("PROVIDER_KEY") },
    body: JSON.stringify({ invoice: event.data.id }),
  });
  context.log("provider answered", answer.status);
  return JSON.parse(answer.body);
}
"""
KEY = "sk_e2e_the-providers-key"


def test_a_function_calls_another_service_with_a_secret_it_never_sees(tmp_path: Path) -> None:
    with (
        _provider() as (provider, seen),
        served(tmp_path, ADMIN_TOKEN, {"LEDGERPORT_PASSWORD_HASHING": "fast"}) as server,
        _provision(server.base) as (console, api),
    ):
        assert console.put("/secrets/PROVIDER_KEY", json={"value": KEY}).status_code == 200
        _ok(
            console.put(
                "/functions/charge",
                json={
                    "source": CHARGE.replace("BASE", provider),
                    "events": ["invoice.created"],
                    "allowedHosts": ["127.0.0.1"],
                },
            )
        )
        customer = _ok(api.post("/customers", json={"name": "Acme"}))
        invoice = _ok(api.post("/invoices", json={"customerId": customer["id"], "lines": [LINE]}))
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            runs = _ok(console.get("/functions/charge/runs"))["data"]
            if runs and runs[0]["status"] not in ("queued", "retrying"):
                break
            assert time.monotonic() < deadline, f"no run ended in {RUN_TIMEOUT} s: {runs}"
            time.sleep(0.1)
        detail = _ok(console.get(f"/functions/charge/runs/{runs[0]['id']}"))
        secrets = _ok(console.get("/secrets"))
        metrics = httpx.get(f"{server.base}/metrics", timeout=HTTP_TIMEOUT).text
        log = server.output()
    (run,) = runs
    assert run["status"] == "succeeded", (run["error"], detail["logs"])
    assert run["result"] == {"id": "pi_e2e"}
    ((path, headers, body),) = seen
    assert path == "/v1/payment_intents"
    assert headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(body) == {"invoice": invoice["id"]}
    messages = [line["message"] for line in detail["logs"]]
    assert messages[0].startswith("[ledgerport] fetch POST 127.0.0.1: 201 (")
    assert messages[1] == "provider answered 201"
    assert [s["name"] for s in secrets["data"]] == ["PROVIDER_KEY"]
    assert KEY not in json.dumps([detail, secrets])
    assert KEY not in log
    assert 'ledgerport_function_fetches_total{outcome="answered"} 1.0' in metrics


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
