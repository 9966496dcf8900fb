"""The webhook engine of a served ``ledgerport serve`` against a real receiver on loopback:
a receiver that fails, times out and recovers; one that fails, then answers more than 4 KiB,
as the console's attempt log shows it; SIGKILL during a load of 2,000 deliveries and a restart
(none lost, duplicates counted); two processes on one PostgreSQL database sharing the work
without double sends; and production's refusal of private targets."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import stripe
import trio

from ..receiver import Answer, receiving
from .served import (
    Server,
    postgres_database,
    served,
    start_server,
    stop,
    store_env,
    wait_healthy,
)

ADMIN_TOKEN = "lp_admin_e2e-webhooks-token-0123456789abcdef"
SECRET_KEY = "e2e-webhooks-secret-key-0123456789abcdef012345"
HTTP_TIMEOUT = 10.0
GATE_TIMEOUT = 60.0
FAST_RETRIES = {"LEDGERPORT_WEBHOOK_RETRY_DELAYS": "0,1,1,1,1,1", "LEDGERPORT_WEBHOOK_TIMEOUT": "1"}


@dataclass
class Hits:
    """What a threaded receiver got; ``behave(n)`` decides the answer to the n-th request (from
    0): a status, or a number of seconds to stall before answering 200."""

    behave: Callable[[int], int | float] = lambda _n: 200
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    gate: threading.Event = field(default_factory=threading.Event)
    """Requests are held before they are answered until the gate opens (open by default)."""

    def __post_init__(self) -> None:
        self.gate.set()

    def ids(self) -> list[str]:
        with self.lock:
            return [headers["x-webhook-id"] for headers, _ in self.requests]


@contextmanager
def receiver(hits: Hits) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with hits.lock:
                number = len(hits.requests)
                hits.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
            hits.gate.wait(GATE_TIMEOUT)
            outcome = hits.behave(number)
            status = 200
            if isinstance(outcome, float):
                time.sleep(outcome)
            else:
                status = outcome
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 1024  # hundreds of connections arrive at once

        def handle_error(self, request: object, client_address: object) -> None:
            pass  # a sender that went away (the killed process) is no receiver's error

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def _created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


@dataclass
class Tenant:
    admin: httpx.Client
    developer: httpx.Client
    app_id: str
    user_id: str


@contextmanager
def tenant(server: Server) -> Iterator[Tenant]:
    """An owner who develops an app holding customers:read, and the console as that owner."""
    admin = httpx.Client(
        base_url=server.base,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=HTTP_TIMEOUT,
        trust_env=False,
    )
    user = _created(
        admin.post("/admin/users", json={"email": "dev@example.com", "password": "pw-123456789"})
    )
    app = _created(
        admin.post(
            "/admin/apps",
            json={
                "name": "Hooks",
                "type": "CONFIDENTIAL",
                "redirectUris": ["https://hooks.example.com/cb"],
                "scopes": ["customers:read"],
                "developerUserId": user["id"],
                "reviewed": True,
            },
        )
    )
    token = _created(admin.post("/admin/developer-tokens", json={"userId": user["id"]}))["token"]
    developer = httpx.Client(
        base_url=f"{server.base}/developer/apps/{app['id']}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=HTTP_TIMEOUT,
        trust_env=False,
    )
    try:
        yield Tenant(admin, developer, app["id"], user["id"])
    finally:
        admin.close()
        developer.close()


def add_webhook(t: Tenant, url: str) -> dict[str, Any]:
    """A webhook of the tenant's app on ``url``, subscribed to app.installed."""
    return _created(t.developer.post("/webhooks", json={"url": url, "events": ["app.installed"]}))


def install_in_new_businesses(t: Tenant, count: int) -> None:
    """``count`` businesses where the owner installs the app: one app.installed each."""
    for index in range(count):
        business = _created(t.admin.post("/admin/businesses", json={"name": f"Biz {index}"}))
        member = t.admin.put(
            f"/admin/businesses/{business['id']}/members/{t.user_id}", json={"role": "owner"}
        )
        assert member.status_code == 200
        _created(
            t.admin.post(
                "/admin/installations",
                json={
                    "appId": t.app_id,
                    "businessId": business["id"],
                    "userId": t.user_id,
                    "scopes": ["customers:read"],
                },
            )
        )


def wait_until(
    check: Callable[[], bool],
    timeout: float,
    what: str,
    state: Callable[[], str] = lambda: "",
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s {state()}".rstrip())
        time.sleep(0.1)


def test_a_receiver_that_fails_then_times_out_then_recovers(tmp_path: Path) -> None:
    hits = Hits(behave=lambda n: {0: 503, 1: 3.0}.get(n, 200))
    env = {"LEDGERPORT_SECRET_KEY": SECRET_KEY, **FAST_RETRIES}
    with receiver(hits) as url, served(tmp_path, ADMIN_TOKEN, env) as server, tenant(server) as t:
        webhook = add_webhook(t, url)
        install_in_new_businesses(t, 1)

        def delivered() -> bool:
            page = t.developer.get(f"/webhooks/{webhook['id']}/deliveries").json()
            return bool(page["data"]) and page["data"][0]["status"] == "delivered"

        wait_until(delivered, 30, "the delivery was not delivered")
        (delivery,) = t.developer.get(f"/webhooks/{webhook['id']}/deliveries").json()["data"]
    assert delivery["attempts"] == 3
    assert delivery["responseCode"] == 200
    assert len(hits.requests) == 3
    assert len(set(hits.ids())) == 1
    for headers, body in hits.requests:
        stripe.WebhookSignature.verify_header(
            body.decode(), headers["x-webhook-signature"], webhook["secret"], tolerance=300
        )
        assert json.loads(body)["type"] == "app.installed"


async def test_the_attempt_log_shows_a_failure_then_the_first_4_kib_of_an_answer(
    tmp_path: Path,
) -> None:
    """A real receiver answers the first attempt 500 with a short body and the second 200 with
    10 KiB: the console's delivery shows both attempts, each with its body (the second cut at
    4 KiB), its code and the headers it arrived with, and the payload as received."""
    answer = (b"0123456789abcdef" * 640)[: 10 * 1024]
    env = {"LEDGERPORT_SECRET_KEY": SECRET_KEY, **FAST_RETRIES}
    admin_headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with trio.fail_after(120), served(tmp_path, ADMIN_TOKEN, env) as server:
        async with (
            receiving() as hooks,
            httpx.AsyncClient(
                base_url=server.base, timeout=HTTP_TIMEOUT, trust_env=False, headers=admin_headers
            ) as admin,
        ):
            hooks.script = [Answer(500, body=b'{"error":"busy"}'), Answer(200, body=answer)]
            user = (
                await admin.post(
                    "/admin/users", json={"email": "log@example.com", "password": "pw-123456789"}
                )
            ).json()
            app = (
                await admin.post(
                    "/admin/apps",
                    json={
                        "name": "Logged",
                        "type": "CONFIDENTIAL",
                        "redirectUris": ["https://hooks.example.com/cb"],
                        "scopes": ["customers:read"],
                        "developerUserId": user["id"],
                        "reviewed": True,
                    },
                )
            ).json()
            token = (
                await admin.post("/admin/developer-tokens", json={"userId": user["id"]})
            ).json()["token"]
            async with httpx.AsyncClient(
                base_url=f"{server.base}/developer/apps/{app['id']}",
                timeout=HTTP_TIMEOUT,
                trust_env=False,
                headers={"Authorization": f"Bearer {token}"},
            ) as console:
                webhook = (
                    await console.post(
                        "/webhooks", json={"url": hooks.url, "events": ["app.installed"]}
                    )
                ).json()
                business = (await admin.post("/admin/businesses", json={"name": "Logged"})).json()
                await admin.put(
                    f"/admin/businesses/{business['id']}/members/{user['id']}",
                    json={"role": "owner"},
                )
                installed = await admin.post(
                    "/admin/installations",
                    json={
                        "appId": app["id"],
                        "businessId": business["id"],
                        "userId": user["id"],
                        "scopes": ["customers:read"],
                    },
                )
                assert installed.status_code == 201
                deliveries = f"/webhooks/{webhook['id']}/deliveries"
                while True:
                    page = (await console.get(deliveries)).json()
                    if page["data"] and page["data"][0]["status"] == "delivered":
                        break
                    await trio.sleep(0.1)
                delivery = (await console.get(f"{deliveries}/{page['data'][0]['id']}")).json()
    first, second = hooks.received
    log = delivery["attemptLog"]
    assert (delivery["status"], delivery["attempts"], delivery["test"]) == ("delivered", 2, False)
    assert delivery["payload"].encode() == first.body == second.body
    assert [a["attempt"] for a in log] == [1, 2]
    assert [a["responseCode"] for a in log] == [500, 200]
    assert log[0]["responseBody"] == '{"error":"busy"}'
    assert log[1]["responseBody"] == answer[:4096].decode()
    assert [a["responseBodyTruncated"] for a in log] == [False, True]
    assert [a["error"] for a in log] == ["HTTP 500", None]
    for attempt, request in zip(log, (first, second), strict=True):
        assert {k.lower(): v for k, v in attempt["requestHeaders"].items()} == request.headers
        stripe.WebhookSignature.verify_header(
            delivery["payload"],
            attempt["requestHeaders"]["X-Webhook-Signature"],
            webhook["secret"],
            tolerance=300,
        )


LOAD_WEBHOOKS = 20
LOAD_BUSINESSES = 100
"""20 webhooks of one app, each subscribed to app.installed, and 100 installations: 2,000
deliveries."""
GRACEFUL_BUSINESSES = 40
"""Installations of the graceful stop's load: 800 deliveries."""
HELD_AT_STOP = 64
"""More than the attempts one app has in flight at once (32): the requests a graceful stop finds
under way."""


TAKEN_OVER_WITHIN = 15.0
"""Seconds after a restart (or, with two nodes, after the kill) by which the work a killed
process held has been sent: well under a claim's 30 s lease, which was the wait before nodes
took over a dead node's claims (SQLite at start, PostgreSQL when the dead node's session ends),
and with room for a loaded machine."""


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigkill_during_a_load_loses_no_delivery(tmp_path: Path, backend: str) -> None:
    # The receiver holds every request until the whole load is committed, then answers each
    # after 20 ms: the process is killed while the load is being delivered.
    hits = Hits(behave=lambda _n: 0.02)
    hits.gate.clear()
    with receiver(hits) as url, store_env(backend, tmp_path) as stored:
        # Attempts held at the gate must not time out meanwhile (that would be a retry an hour
        # on).
        env = {**stored, "LEDGERPORT_WEBHOOK_TIMEOUT": str(GATE_TIMEOUT)}
        server = start_server(tmp_path, ADMIN_TOKEN, env)
        try:
            wait_healthy(server)
            with tenant(server) as t:
                for _ in range(LOAD_WEBHOOKS):
                    add_webhook(t, url)
                install_in_new_businesses(t, LOAD_BUSINESSES)
            hits.gate.set()
            wait_until(lambda: len(hits.requests) >= 300, 60, "deliveries did not start")
            os.kill(server.process.pid, signal.SIGKILL)
            server.process.wait(timeout=10)
            # What the dead process sent may still be in the receiver's sockets: let its
            # threads take it in before counting.
            time.sleep(1.0)
            before_restart = len(hits.requests)
        finally:
            stop(server.process)
        total = LOAD_WEBHOOKS * LOAD_BUSINESSES
        with served(tmp_path, ADMIN_TOKEN, env):
            restarted = time.monotonic()
            wait_until(lambda: len(set(hits.ids())) >= total, 120, "deliveries were lost")
            took = time.monotonic() - restarted
    counts = Counter(hits.ids())
    duplicates = sum(n - 1 for n in counts.values())
    assert len(counts) == total
    assert before_restart < total, "the kill came after the load was delivered"
    # Only what was in flight or unrecorded at the kill can arrive twice.
    assert duplicates <= before_restart
    # The dead process's claims were taken over at start, not when their lease ran out.
    assert took < TAKEN_OVER_WITHIN, f"all delivered {took:.1f} s after the restart"
    print(  # noqa: T201
        f"{backend}: delivered {total}, killed after {before_restart}, duplicates {duplicates},"
        f" all delivered {took:.1f} s after the restart"
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graceful_stop_under_load_finishes_its_attempts_and_sends_nothing_twice(
    tmp_path: Path, backend: str
) -> None:
    """SIGINT while attempts wait for slow answers: the process takes no new work, lets the
    attempts in flight end and records them within the grace, gives back the rest and exits
    0; after a restart everything arrives, each delivery once.

    The engine has at most 32 attempts of one app in flight. The receiver holds every request
    until the process has taken the signal, then answers the attempts that were in flight after
    0.5 s, and the rest (after the restart) at once: however slow the machine is at creating the
    load, the signal comes while at most 32 of the 800 deliveries are under way."""
    hits = Hits(behave=lambda n: 0.5 if n < HELD_AT_STOP else 0.0)
    hits.gate.clear()
    total = LOAD_WEBHOOKS * GRACEFUL_BUSINESSES
    with receiver(hits) as url, store_env(backend, tmp_path) as stored:
        # Attempts held at the gate must not time out meanwhile (that would be a retry later).
        env = {**stored, "LEDGERPORT_WEBHOOK_TIMEOUT": str(GATE_TIMEOUT)}
        server = start_server(tmp_path, ADMIN_TOKEN, env)
        try:
            wait_healthy(server)
            with tenant(server) as t:
                for _ in range(LOAD_WEBHOOKS):
                    add_webhook(t, url)
                install_in_new_businesses(t, GRACEFUL_BUSINESSES)
            wait_until(lambda: len(hits.requests) >= 20, 60, "deliveries did not start")
            server.process.send_signal(signal.SIGINT)
            wait_until(lambda: "shutting down" in server.output(), 30, "the signal was not taken")
            hits.gate.set()
            code = server.process.wait(timeout=30)
            at_stop = len(hits.requests)
        finally:
            stop(server.process)
        log = server.output()
        with served(tmp_path, ADMIN_TOKEN, env):
            wait_until(lambda: len(set(hits.ids())) >= total, 120, "deliveries were lost")
            time.sleep(1.0)  # anything sent twice would be in by now
    counts = Counter(hits.ids())
    assert code == 0, log
    assert "in-flight work finished" in log
    assert at_stop < total, "the stop came after the load was delivered"
    assert len(counts) == total
    assert max(counts.values()) == 1, "a delivery was sent twice"


def _delivered_count(server: Server) -> float:
    text = httpx.get(f"{server.base}/metrics", timeout=HTTP_TIMEOUT, trust_env=False).text
    total = 0.0
    for line in text.splitlines():
        if (
            line.startswith("ledgerport_webhook_deliveries_total{")
            and 'outcome="delivered"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.mark.postgres
def test_two_processes_on_one_postgresql_database_never_send_a_delivery_twice(
    tmp_path: Path,
) -> None:
    hits = Hits(behave=lambda _n: 0.002)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    total = LOAD_WEBHOOKS * LOAD_BUSINESSES
    with postgres_database() as url, receiver(hits) as target:
        env = {"LEDGERPORT_SECRET_KEY": SECRET_KEY, "LEDGERPORT_DATABASE_URL": url}
        with (
            served(tmp_path / "a", ADMIN_TOKEN, env) as first,
            served(tmp_path / "b", ADMIN_TOKEN, env) as second,
            tenant(first) as t,
        ):
            for _ in range(LOAD_WEBHOOKS):
                add_webhook(t, target)
            with httpx.Client(
                base_url=second.base,
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
                timeout=HTTP_TIMEOUT,
                trust_env=False,
            ) as other_admin:
                install_in_new_businesses(t, LOAD_BUSINESSES // 2)
                install_in_new_businesses(
                    Tenant(other_admin, t.developer, t.app_id, t.user_id), LOAD_BUSINESSES // 2
                )
            wait_until(lambda: len(hits.requests) >= total, 120, "the load was not delivered")
            time.sleep(1.0)
            shares = (_delivered_count(first), _delivered_count(second))
            logs = first.output() + second.output()
    counts = Counter(hits.ids())
    assert len(counts) == total
    assert max(counts.values()) == 1, "a delivery was sent twice"
    assert sum(shares) == total
    assert min(shares) > 0, f"one process did all the work: {shares}"
    assert "Traceback" not in logs, logs


@pytest.mark.postgres
def test_a_killed_nodes_deliveries_are_taken_over_by_the_other_within_seconds(
    tmp_path: Path,
) -> None:
    """Two processes on one database holding deliveries whose answers are held back; the one
    killed and not restarted holds at least half. The other gives its claims back as soon as
    the dead process's session ends and sends them: nothing lost, long before the claims' lease.

    The one to be killed starts alone and claims the first half (alone, it fans out every
    event and claims their deliveries); then the other starts and the second half is written
    through it (fanned out by whichever process comes first: on a loaded machine, often the
    one already running)."""
    hits = Hits(behave=lambda _n: 0.01)
    hits.gate.clear()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    half = LOAD_WEBHOOKS * 10
    total = 2 * half
    with postgres_database() as url, receiver(hits) as target:
        env = {
            "LEDGERPORT_SECRET_KEY": SECRET_KEY,
            "LEDGERPORT_DATABASE_URL": url,
            "LEDGERPORT_WEBHOOK_TIMEOUT": str(GATE_TIMEOUT),
        }
        holders = _claim_holders(url)
        seen: list[dict[str, int]] = []

        def claimed(count: int) -> Callable[[], bool]:
            return lambda: sum(seen.append(holders()) or seen[-1].values()) == count

        victim = start_server(tmp_path / "a", ADMIN_TOKEN, env)
        try:
            wait_healthy(victim)
            with tenant(victim) as t:
                for _ in range(LOAD_WEBHOOKS):
                    add_webhook(t, target)
                install_in_new_businesses(t, 10)
                wait_until(
                    claimed(half), 60, "the first half was not claimed", lambda: f"{seen[-1:]}"
                )
                with served(tmp_path / "b", ADMIN_TOKEN, env) as survivor:
                    with _admin(survivor) as survivor_admin:
                        install_in_new_businesses(replace(t, admin=survivor_admin), 10)
                    wait_until(claimed(total), 60, "not all were claimed", lambda: f"{seen[-1:]}")
                    held = holders()
                    os.kill(victim.process.pid, signal.SIGKILL)
                    killed = time.monotonic()
                    victim.process.wait(timeout=10)
                    hits.gate.set()
                    wait_until(lambda: len(set(hits.ids())) >= total, 120, "deliveries were lost")
                    took = time.monotonic() - killed
                    logs = survivor.output()
        finally:
            stop(victim.process)
    counts = Counter(hits.ids())
    assert len(counts) == total
    assert took < TAKEN_OVER_WITHIN, f"all delivered {took:.1f} s after the kill"
    assert "took over" in logs
    assert "Traceback" not in logs, logs
    print(f"held at the kill: {held}; all delivered {took:.1f} s after it")  # noqa: T201


def _admin(server: Server) -> httpx.Client:
    return httpx.Client(
        base_url=server.base,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=HTTP_TIMEOUT,
        trust_env=False,
    )


def _claim_holders(url: str) -> Callable[[], dict[str, int]]:
    """Reads how many deliveries each node holds."""

    async def read() -> dict[str, int]:
        conn = await asyncpg.connect(url, timeout=10)
        try:
            rows = await conn.fetch(
                "SELECT lease, COUNT(*) AS n FROM webhook_deliveries"
                " WHERE lease IS NOT NULL AND status IN ('queued', 'retrying') GROUP BY lease"
            )
        finally:
            await conn.close()
        return {row["lease"]: row["n"] for row in rows}

    return lambda: asyncio.run(read())
