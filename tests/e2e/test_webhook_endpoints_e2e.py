"""Webhook endpoints beyond the spec (contract.md, third round) as a receiver on loopback sees
them from a served ``ledgerport serve``: Standard Webhooks deliveries verified by the released
libraries as they are, and Ed25519 ones with the answered public key alone; the disable rule
(``failing`` after the window, ``gone`` at once) told to an operational endpoint; an endpoint's
rate limit held by two processes on one PostgreSQL database; the event cursor followed into the
Events API; deliveries ordered by record through a receiver that fails some attempts; and
retries falling due one after another, each on time.

Every wait is bounded; the times allowed are generous for a loaded machine, and nothing assumes
how fast it is."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks
import stripe
import svix.webhooks
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .served import Provisioned, Server, postgres_database, provision, served

ADMIN_TOKEN = "lp_admin_e2e-endpoints-token-0123456789abcdef"
SECRET_KEY = "e2e-endpoints-secret-key-0123456789abcdef012345"
HTTP_TIMEOUT = 10.0
SCOPES = ["customers:read", "customers:write", "events:read"]
TOLERANCE = 300
CURSOR = "x-webhook-event-cursor"
BASE_ENV = {
    "LEDGERPORT_SECRET_KEY": SECRET_KEY,
    "LEDGERPORT_PASSWORD_HASHING": "fast",
    # Dozens of writes at once from one client: the API's own limits are not under test.
    "LEDGERPORT_RATE_LIMIT_FACTOR": "100",
    "LEDGERPORT_WEBHOOK_TIMEOUT": "5",
}
FAST_RETRIES = {"LEDGERPORT_WEBHOOK_RETRY_DELAYS": "0,1,1,1,1,1"}
"""A failed attempt is retried a second later (the config wants six delays: one an attempt)."""


# --- a receiver ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    """Names in lower case."""
    body: bytes
    arrived: float
    """The receiver's wall clock (time.time()) when the request's body was read."""

    def json(self) -> dict[str, Any]:
        payload: dict[str, Any] = json.loads(self.body)
        return payload


@dataclass
class Receiver:
    """What a threaded receiver got; ``answer`` decides each request's status, in the handling
    thread, before any of the answer is written."""

    answer: Callable[[Received], int] = lambda _request: 200
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    def got(self, path: str | None = None) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if path is None or r.path == path]


@contextmanager
def receiving(receiver: Receiver) -> Iterator[Receiver]:
    """``receiver`` listening on a free loopback port (its ``url`` ends in ``/``) for the
    block's length."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            request = Received(
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                body,
                time.time(),
            )
            with receiver.lock:
                receiver.requests.append(request)
            status = receiver.answer(request)
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    class Listener(ThreadingHTTPServer):
        request_queue_size = 256

        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a sender that stopped is no receiver's error

    listener = Listener(("127.0.0.1", 0), Handler)
    listener.daemon_threads = True
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    receiver.url = f"http://127.0.0.1:{listener.server_address[1]}/"
    try:
        yield receiver
    finally:
        listener.shutdown()
        listener.server_close()


# --- clients --------------------------------------------------------------------------------------


def wait_until(
    check: Callable[[], bool], timeout: float, what: str, state: Callable[[], object] = str
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s: {state()}")
        time.sleep(0.05)


def _answer(response: httpx.Response, *codes: int) -> dict[str, Any]:
    assert response.status_code in (codes or (200, 201)), response.text
    body: dict[str, Any] = response.json()
    return body


@dataclass
class App:
    """An app provisioned on a served instance: the console as its developer, and the data API
    with its installation's access token."""

    made: Provisioned
    console: httpx.Client
    api: httpx.Client

    def webhook(self, url: str, events: list[str], **fields: Any) -> dict[str, Any]:
        return _answer(
            self.console.post("/webhooks", json={"url": url, "events": events, **fields}), 201
        )

    def read_webhook(self, webhook_id: str) -> dict[str, Any]:
        return _answer(self.console.get(f"/webhooks/{webhook_id}"), 200)

    def customer(self, name: str) -> dict[str, Any]:
        return _answer(self.api.post("/customers", json={"name": name}), 201)


@contextmanager
def app_on(server: Server, name: str) -> Iterator[App]:
    """A new app holding SCOPES, installed in a new business."""
    made = provision(server.base, ADMIN_TOKEN, SCOPES, name)
    with (
        httpx.Client(
            base_url=f"{server.base}/developer/apps/{made.app_id}",
            headers={"Authorization": f"Bearer {made.developer_token}"},
            timeout=HTTP_TIMEOUT,
            trust_env=False,
        ) as console,
        httpx.Client(
            base_url=server.base,
            headers={"Authorization": f"Bearer {made.access_token}"},
            timeout=HTTP_TIMEOUT,
            trust_env=False,
        ) as api,
    ):
        yield App(made, console, api)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One instance (SQLite) for the tests that need no setting of their own."""
    workdir = tmp_path_factory.mktemp("endpoints-e2e")
    with served(workdir, ADMIN_TOKEN, BASE_ENV | FAST_RETRIES) as running:
        yield running


# --- 1. Standard Webhooks -------------------------------------------------------------------------


def _verify_v1a(request: Received, public_key: str) -> None:
    """What a receiver holding only the public key does: one ``v1a`` signature must verify
    under it (cryptography's Ed25519 raises InvalidSignature otherwise)."""
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key.removeprefix("whpk_")))
    headers = request.headers
    msg_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
    assert abs(time.time() - int(timestamp)) <= TOLERANCE
    signatures = [
        value
        for version, _, value in (s.partition(",") for s in headers["webhook-signature"].split())
        if version == "v1a"
    ]
    assert len(signatures) == 1, headers["webhook-signature"]
    key.verify(base64.b64decode(signatures[0]), f"{msg_id}.{timestamp}.".encode() + request.body)


def test_standard_webhooks_verify_with_the_released_libraries_and_the_public_key(
    server: Server,
) -> None:
    """A data API write makes one event; the ``standard`` endpoint's delivery verifies with
    ``standardwebhooks`` and ``svix`` given the answered secret as it is, the
    ``standard-asymmetric`` one with the answered public key alone; each carries the event
    cursor."""
    with receiving(Receiver()) as hooks, app_on(server, "Standard") as app:
        standard = app.webhook(f"{hooks.url}standard", ["customer.created"], signature="standard")
        asymmetric = app.webhook(
            f"{hooks.url}asymmetric", ["customer.created"], signature="standard-asymmetric"
        )
        customer = app.customer("Acme")
        wait_until(lambda: len(hooks.got()) >= 2, 30, "both deliveries", hooks.got)
    assert standard["signature"] == "standard"
    assert standard["secret"].startswith("whsec_")
    assert asymmetric["signature"] == "standard-asymmetric"
    assert asymmetric["publicKey"].startswith("whpk_")
    assert asymmetric.get("secret") is None
    (plain,) = hooks.got("/standard")
    (signed,) = hooks.got("/asymmetric")

    verified = standardwebhooks.Webhook(standard["secret"]).verify(plain.body, plain.headers)
    assert verified == plain.json()
    svix.webhooks.Webhook(standard["secret"]).verify(plain.body, plain.headers)
    _verify_v1a(signed, asymmetric["publicKey"])
    # The public key's holder cannot be served a symmetric signature instead: none is sent.
    assert not any(s.startswith("v1,") for s in signed.headers["webhook-signature"].split())
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(standard["secret"]).verify(signed.body, signed.headers)

    for request in (plain, signed):
        body = request.json()
        assert request.headers["webhook-id"] == body["id"]
        assert (body["type"], body["data"]["id"]) == ("customer.created", customer["id"])
        assert request.headers[CURSOR]
        assert request.headers["x-webhook-event-id"] == body["eventId"]
    assert plain.json()["eventId"] == signed.json()["eventId"]


# --- 2. the disable rule --------------------------------------------------------------------------

DISABLE_AFTER = 5.0
"""The disable rule's window in this test: long enough for three deliveries to fail for good
(six immediate attempts each) inside it on a loaded machine, short for the test's length."""


@dataclass(frozen=True)
class Operational:
    """The operational events that reached the endpoint, each once, verified."""

    events: list[dict[str, Any]]

    def about(self, webhook_id: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["data"]["webhookId"] == webhook_id]


def _operational(hooks: Receiver, secret: str) -> Operational:
    seen: dict[str, dict[str, Any]] = {}
    for request in hooks.got("/ops"):
        stripe.WebhookSignature.verify_header(
            request.body.decode(), request.headers["x-webhook-signature"], secret, TOLERANCE
        )
        assert CURSOR not in request.headers
        event = request.json()
        seen.setdefault(event["id"], event)
    return Operational(list(seen.values()))


def test_an_endpoint_failing_past_the_window_and_one_answering_410_are_switched_off(
    tmp_path: Path,
) -> None:
    """Three deliveries failing for good within the window that began when the endpoint was
    created do not switch it off; failures after that window has passed do (``failing``). A
    410 switches another off at once (``gone``). The operational endpoint receives, signed with
    its answered secret, ``failing`` then ``disabled`` for each."""
    statuses = {"/failing": 500, "/gone": 410, "/ops": 200}
    env = BASE_ENV | {
        "LEDGERPORT_WEBHOOK_RETRY_DELAYS": "0,0,0,0,0,0",
        "LEDGERPORT_WEBHOOK_DISABLE_AFTER": str(DISABLE_AFTER),
    }
    hooks = Receiver(answer=lambda request: statuses[request.path])
    with (
        receiving(hooks),
        served(tmp_path, ADMIN_TOKEN, env) as server,
        app_on(server, "Failing") as app,
    ):
        ops = _answer(app.console.put("/operational-webhook", json={"url": f"{hooks.url}ops"}))
        before_create = time.time()
        failing = app.webhook(f"{hooks.url}failing", ["customer.created"])
        gone = app.webhook(f"{hooks.url}gone", ["customer.updated"])

        def failed_for_good() -> int:
            count: int = app.read_webhook(failing["id"])["health"]["failedLast24h"]
            return count

        for index in range(3):
            app.customer(f"Early {index}")
        wait_until(lambda: failed_for_good() >= 3, 30, "three failed for good", failed_for_good)
        early = app.read_webhook(failing["id"])
        assert time.time() < before_create + DISABLE_AFTER, (
            "the machine took the whole window to fail three deliveries: nothing was checked"
        )

        wait_until(lambda: time.time() > before_create + DISABLE_AFTER + 0.5, 30, "the window")
        for index in range(3):
            app.customer(f"Late {index}")

        def switched_off() -> bool:
            return not app.read_webhook(failing["id"])["enabled"]

        wait_until(switched_off, 30, "the failing endpoint switched off")
        late = app.read_webhook(failing["id"])

        customer = app.customer("Gone")
        _answer(app.api.patch(f"/customers/{customer['id']}", json={"name": "Gone too"}), 200)
        wait_until(lambda: not app.read_webhook(gone["id"])["enabled"], 30, "410 switched off")
        gone_read = app.read_webhook(gone["id"])

        def told() -> Operational:
            return _operational(hooks, ops["secret"])

        wait_until(
            lambda: len(told().about(failing["id"])) >= 2 and len(told().about(gone["id"])) >= 2,
            30,
            "the operational events",
            lambda: told().events,
        )
        time.sleep(0.5)  # anything more (it should not come) would be in by now
        operational = told()
    assert ops["url"] == f"{hooks.url}ops"
    assert ops["secret"].startswith("whsec_")

    assert (early["enabled"], early["disabledReason"]) == (True, None)
    assert early["health"]["consecutiveFailures"] >= 3
    assert early["health"]["lastError"] == "HTTP 500"
    assert (late["enabled"], late["disabledReason"]) == (False, "failing")
    assert late["health"]["failedLast24h"] >= 4
    assert late["health"]["lastDeliveryAt"] is None
    assert [(e["type"], e["data"]) for e in operational.about(failing["id"])] == [
        ("webhook.endpoint.failing", {"webhookId": failing["id"]}),
        ("webhook.endpoint.disabled", {"webhookId": failing["id"], "reason": "failing"}),
    ]

    assert (gone_read["enabled"], gone_read["disabledReason"]) == (False, "gone")
    assert len(hooks.got("/gone")) == 1, "a 410 was attempted again"
    assert sorted((e["type"], e["data"].get("reason")) for e in operational.about(gone["id"])) == [
        ("webhook.endpoint.disabled", "gone"),
        ("webhook.endpoint.failing", None),
    ]
    for event in operational.events:
        assert event["id"].startswith("oev_")
        assert isinstance(event["created"], int)
        assert set(event) == {"id", "type", "created", "data"}


# --- 3. the rate limit across two processes -------------------------------------------------------

RATE_LIMIT = 5
RATED_EVENTS = 40
ARRIVAL_LAG = 3.0
"""Seconds an attempt may take, on a loaded machine, from its start (the second it is signed
in) to the receiver."""


def _delivered_count(server: Server) -> float:
    """The deliveries this process recorded delivered (its metrics)."""
    text = httpx.get(f"{server.base}/metrics", timeout=HTTP_TIMEOUT, trust_env=False).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("ledgerport_webhook_deliveries_total{") and 'outcome="delivered"' in line
    )


def _signed_second(request: Received) -> int:
    """The service's second of the attempt's start: the ``t=`` its signature was made at."""
    fields = dict(part.split("=", 1) for part in request.headers["x-webhook-signature"].split(","))
    return int(fields["t"])


@pytest.mark.postgres
def test_the_rate_limit_holds_across_two_processes_on_one_database(tmp_path: Path) -> None:
    """Two processes on one PostgreSQL database, one endpoint with ``rateLimit: 5``, 40 events
    written at once through both: all 40 arrive, once each, both processes sent some, and no
    second of the service's clock saw more than 5 attempts start.

    The seconds are counted on the signature's ``t=``, the service's second of each attempt's
    start, with no slack. The receiver's seconds of arrival are not: an attempt started at
    x.999 arrives in the next second (seen here), so they may show one more than the limit
    without any having started beyond it."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with postgres_database() as url, receiving(Receiver()) as hooks:
        env = BASE_ENV | {"LEDGERPORT_DATABASE_URL": url}
        with (
            served(tmp_path / "a", ADMIN_TOKEN, env) as first,
            served(tmp_path / "b", ADMIN_TOKEN, env) as second,
            app_on(first, "Rated") as app,
            httpx.Client(
                base_url=second.base,
                headers={"Authorization": f"Bearer {app.made.access_token}"},
                timeout=HTTP_TIMEOUT,
                trust_env=False,
            ) as api_second,
        ):
            webhook = app.webhook(f"{hooks.url}rated", ["customer.created"], rateLimit=RATE_LIMIT)
            with ThreadPoolExecutor(max_workers=16) as pool:
                writes = [
                    pool.submit(
                        (app.api if index % 2 else api_second).post,
                        "/customers",
                        json={"name": f"Customer {index}"},
                    )
                    for index in range(RATED_EVENTS)
                ]
                assert [w.result().status_code for w in writes] == [201] * RATED_EVENTS
            wait_until(
                lambda: len(hooks.got()) >= RATED_EVENTS,
                60,
                "all deliveries arrived",
                lambda: len(hooks.got()),
            )
            time.sleep(1.0)  # anything sent twice would be in by now
            shares = (_delivered_count(first), _delivered_count(second))
            logs = first.output() + second.output()
    received = hooks.got()
    by_second = Counter(_signed_second(r) for r in received)
    assert webhook["rateLimit"] == RATE_LIMIT
    assert len({r.headers["x-webhook-id"] for r in received}) == len(received) == RATED_EVENTS
    assert max(by_second.values()) <= RATE_LIMIT, sorted(by_second.items())
    for request in received:
        assert 0 <= request.arrived - _signed_second(request) < 1 + ARRIVAL_LAG
    assert sum(shares) == RATED_EVENTS
    assert min(shares) > 0, f"one process sent everything: {shares}"
    assert "Traceback" not in logs, logs


# --- 4. the event cursor --------------------------------------------------------------------------


def test_the_event_cursor_leads_the_receiver_into_the_events_api(server: Server) -> None:
    """Three writes, each delivered before the next: after the last delivery's cursor the Events
    API lists nothing; after the first's, the two later events in order."""
    with receiving(Receiver()) as hooks, app_on(server, "Cursor") as app:
        app.webhook(f"{hooks.url}cursor", ["customer.created", "customer.updated"])
        customer = app.customer("First")

        def arrived(count: int) -> Callable[[], bool]:
            return lambda: len(hooks.got()) >= count

        wait_until(arrived(1), 30, "the first delivery")
        _answer(app.api.patch(f"/customers/{customer['id']}", json={"name": "Renamed"}), 200)
        wait_until(arrived(2), 30, "the second delivery")
        app.customer("Second")
        wait_until(arrived(3), 30, "the third delivery")
        first, second, third = hooks.got()
        after_last = _answer(app.api.get("/events", params={"after": third.headers[CURSOR]}))
        after_first = _answer(app.api.get("/events", params={"after": first.headers[CURSOR]}))
    assert [r.json()["type"] for r in (first, second, third)] == [
        "customer.created",
        "customer.updated",
        "customer.created",
    ]
    assert after_last == {"data": [], "next": None}
    assert [(e["id"], e["type"]) for e in after_first["data"]] == [
        (second.json()["eventId"], "customer.updated"),
        (third.json()["eventId"], "customer.created"),
    ]
    assert after_first["data"][0]["data"]["name"] == "Renamed"


# --- 5. ordering by record ------------------------------------------------------------------------

RECORDS = 4
UPDATES = 5
HELD = 0.05
"""Seconds the receiver holds each request before answering: a second attempt about the same
record sent meanwhile would be seen in flight."""


@dataclass
class OrderedReceiver:
    """Tracks, per record, the request in flight and the events processed (answered 2xx); the
    first attempt of every other delivery about a record is answered 500."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: set[str] = field(default_factory=set)
    overlaps: list[tuple[str, str]] = field(default_factory=list)
    processed: dict[str, list[str]] = field(default_factory=dict)
    deliveries: dict[str, list[str]] = field(default_factory=dict)
    """Per record, the delivery ids in the order they first arrived."""
    refused: int = 0

    def answer(self, request: Received) -> int:
        body = request.json()
        record, delivery = body["data"]["id"], body["id"]
        with self.lock:
            if record in self.in_flight:
                self.overlaps.append((record, body["eventId"]))
            self.in_flight.add(record)
            seen = self.deliveries.setdefault(record, [])
            first_attempt = delivery not in seen
            if first_attempt:
                seen.append(delivery)
            fail = first_attempt and len(seen) % 2 == 0
        time.sleep(HELD)
        with self.lock:
            # Out of flight before the answer is written: the service cannot have seen it yet.
            self.in_flight.discard(record)
            if fail:
                self.refused += 1
                return 500
            self.processed.setdefault(record, []).append(body["eventId"])
        return 200


def test_deliveries_ordered_by_record_go_one_at_a_time_in_event_order_through_failures(
    server: Server,
) -> None:
    """4 records, 5 updates each, written in parallel (each record's in turn); the receiver
    fails the first attempt of every other delivery about a record. Each record's events are
    processed in the order of the Events API, never two about one record in flight, all in the
    end."""
    tracker = OrderedReceiver()
    with receiving(Receiver(answer=tracker.answer)) as hooks, app_on(server, "Ordered") as app:
        webhook = app.webhook(
            f"{hooks.url}ordered", ["customer.created", "customer.updated"], ordering="record"
        )
        assert webhook["ordering"] == "record"

        def one_record(index: int) -> str:
            record: str = app.customer(f"Record {index}")["id"]
            for update in range(UPDATES):
                changed = app.api.patch(f"/customers/{record}", json={"name": f"{index}.{update}"})
                assert changed.status_code == 200, changed.text
            return record

        with ThreadPoolExecutor(max_workers=RECORDS) as pool:
            records = list(pool.map(one_record, range(RECORDS)))
        total = RECORDS * (UPDATES + 1)

        def processed() -> int:
            with tracker.lock:
                return sum(len(events) for events in tracker.processed.values())

        wait_until(lambda: processed() >= total, 60, "all processed", processed)
        feed = _answer(
            app.api.get(
                "/events", params={"types": "customer.created,customer.updated", "limit": 100}
            )
        )
    assert feed["next"] is None
    in_order: dict[str, list[str]] = {}
    for event in feed["data"]:
        in_order.setdefault(event["data"]["id"], []).append(event["id"])
    assert sorted(in_order) == sorted(records)
    assert tracker.overlaps == [], "two attempts about one record were in flight at once"
    assert tracker.processed == in_order
    assert tracker.refused == RECORDS * ((UPDATES + 1) // 2)
    assert len(hooks.got()) == total + tracker.refused


# --- retries on time ------------------------------------------------------------------------------

RETRY_SLACK = 2.5
"""Seconds a retry may come after its delay (one second here, and its jitter) on a loaded
machine; the engine's safety poll, which a retry whose due time the engine lost waits for, is
five."""


def test_retries_due_one_after_another_are_each_attempted_on_time(server: Server) -> None:
    """Two deliveries whose first attempts fail 0.4 s apart: each is retried after its delay
    (one second), the second too, although its retry fell due just after the first's was
    claimed."""
    attempts: Counter[str] = Counter()

    def fail_first(request: Received) -> int:
        delivery = request.json()["id"]
        attempts[delivery] += 1
        return 500 if attempts[delivery] == 1 else 200

    with receiving(Receiver(answer=fail_first)) as hooks, app_on(server, "Retried") as app:
        app.webhook(f"{hooks.url}retried", ["customer.created"])
        app.customer("First")
        wait_until(lambda: len(hooks.got()) >= 1, 30, "the first attempt")
        time.sleep(0.4)
        app.customer("Second")
        wait_until(lambda: len(hooks.got()) >= 4, 30, "both retried", hooks.got)
    by_delivery: dict[str, list[float]] = {}
    for request in hooks.got():
        by_delivery.setdefault(request.json()["id"], []).append(request.arrived)
    assert len(by_delivery) == 2
    for first, retry in by_delivery.values():
        assert 1.0 <= retry - first <= 1.1 + RETRY_SLACK, f"retried {retry - first:.2f} s after"
