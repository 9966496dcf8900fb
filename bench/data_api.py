"""Requests per second of the data API against the same server's /healthz, in one run.

Usage::

    .venv/bin/python bench/data_api.py [--backend sqlite|postgres|both] [--n N] [--concurrency C]
        [--introspection] [--against DIR [--cycles K]]

For each backend the script starts ``ledgerport serve`` as a process on a free loopback port
(SQLite in a scratch directory; PostgreSQL in a scratch database created for the run and
dropped afterwards, server named by LEDGERPORT_BENCH_POSTGRES, default
postgresql://postgres@127.0.0.1:5432/postgres), provisions through the operator API several
apps installed in several businesses, exchanges a session token of each (app, business) for an
access token, then sends, with C requests in flight over keep-alive connections:

- ``healthz``: ``GET /healthz`` (one database round trip, no authentication): the baseline;
- ``GET /invoices``: a page of 50 invoices;
- ``POST /invoices``: a new invoice of two lines (numbering, pricing, the plan ceiling's
  counter, the record and its event in one transaction);
- with ``--introspection``, also ``POST /oauth/introspect`` of a tenant's access token with its
  app's client credentials (the lockout, the OAuth budgets and the token's lookup).

With ``--against DIR`` (another checkout of the project, such as a ``git worktree`` of the
commit before a change), the script compares the two instead: a server of each, provisioned
alike, then ``--cycles`` rounds of short bursts (``healthz``, ``POST``, ``GET``, 200 requests
each) sent to one server and then the other, their order swapped every round. This machine's
speed moves by tens of percent within a minute; bursts this short and interleaved meet the
same moments, where whole runs one after the other do not. It prints the median rate of each
request and the median of its ratios to ``/healthz`` of the same round, for each checkout.

The data API's rate limits are the spec's (300 a minute per app and business, 600 a minute per
IP), far below what is measured here, so the load is spread the way a real deployment's is: over
many (app, business) tokens, round robin, and over many client addresses, which the server
believes from ``X-Forwarded-For`` because loopback is configured as a trusted proxy. Every
answer is checked: a refusal (429) would fail the run rather than flatter it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import itertools
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import forwarded_for
from tests.e2e.served import postgres_database

from ledgerport import catalog

POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
ADMIN_TOKEN = "lp_admin_bench-data-api-token-0123456789"
APPS = 2
BUSINESSES = 8
STARTUP_TIMEOUT = 30.0
HTTP_TIMEOUT = 30.0
LINES = [
    {"description": "Consulting", "quantity": "8", "unitPrice": "151.25"},
    {"description": "Travel", "quantity": "1", "unitPrice": "48.90"},
]
DEFAULT_N = 600
MAX_N = 2000
"""Per operation; the (app, business) budgets allow BUSINESSES * APPS * 300 calls a minute."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@contextmanager
def _server(backend: str, code: Path | None = None) -> Iterator[str]:
    """A served instance on ``backend`` (of the checkout at ``code``, this one by default);
    answers its base URL."""
    with tempfile.TemporaryDirectory(prefix="ledgerport-bench-") as directory:
        database = (
            postgres_database(POSTGRES_ADMIN_URL)
            if backend == "postgres"
            else _nothing(f"sqlite:///{directory}/b.db")
        )
        with database as url:
            port = _free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGERPORT_")}
            env |= {
                "LEDGERPORT_DATABASE_URL": url,
                "LEDGERPORT_BIND": f"127.0.0.1:{port}",
                "LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN,
                "LEDGERPORT_SECRET_KEY": secrets.token_urlsafe(32),
                "LEDGERPORT_TRUSTED_PROXIES": "127.0.0.1",
            }
            if code is not None:
                env["PYTHONPATH"] = str(code / "src")
            log = Path(directory) / "server.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    [sys.executable, "-m", "ledgerport", "serve"],
                    cwd=directory,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            try:
                base = f"http://127.0.0.1:{port}"
                _wait_healthy(base, process, log)
                yield base
            finally:
                process.terminate()
                process.wait(timeout=30)


@contextmanager
def _nothing(value: str) -> Iterator[str]:
    yield value


def _wait_healthy(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited:\n{log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{base}/healthz", timeout=2, trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"server not healthy in {STARTUP_TIMEOUT}s")


def _ok(response: httpx.Response) -> Any:
    if response.status_code >= 300:
        raise SystemExit(f"{response.request.url}: {response.status_code} {response.text}")
    return response.json()


@dataclass(frozen=True)
class Tenant:
    token: str
    customer_id: str
    basic: str
    """The app's client credentials, as an Authorization header's value."""


@dataclass(frozen=True)
class Form:
    """A request body sent as a form (any other body is sent as JSON)."""

    fields: dict[str, str]


def _provision(base: str, apps: int = APPS) -> list[Tenant]:
    """``apps`` apps, each installed in BUSINESSES businesses; an access token per pair."""
    scopes = ["customers:read", "customers:write", "invoices:read", "invoices:write"]
    tenants = []
    with (
        httpx.Client(
            base_url=base,
            timeout=HTTP_TIMEOUT,
            trust_env=False,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ) as admin,
        httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False) as client,
    ):
        user = _ok(
            admin.post(
                "/admin/users", json={"email": "bench@example.com", "password": "pw-12345678"}
            )
        )
        businesses = [
            _ok(admin.post("/admin/businesses", json={"name": f"Bench {n}"}))["id"]
            for n in range(BUSINESSES)
        ]
        for business_id in businesses:
            admin.put(
                f"/admin/businesses/{business_id}/members/{user['id']}", json={"role": "owner"}
            )
        for n in range(apps):
            app = _ok(
                admin.post(
                    "/admin/apps",
                    json={
                        "name": f"Bench app {n}",
                        "type": "CONFIDENTIAL",
                        "redirectUris": ["https://bench.example/cb"],
                        "scopes": scopes,
                        "developerUserId": user["id"],
                        "reviewed": True,
                    },
                )
            )
            basic = base64.b64encode(f"{app['clientId']}:{app['clientSecret']}".encode()).decode()
            for business_id in businesses:
                ids = {"appId": app["id"], "businessId": business_id, "userId": user["id"]}
                _ok(admin.post("/admin/installations", json={**ids, "scopes": scopes}))
                session = _ok(admin.post("/admin/session-tokens", json=ids))
                token = _ok(
                    client.post(
                        "/oauth/token",
                        data={
                            "grant_type": catalog.GRANT_TOKEN_EXCHANGE,
                            "subject_token": session["sessionToken"],
                            "subject_token_type": catalog.TOKEN_TYPE_JWT,
                        },
                        headers={"Authorization": f"Basic {basic}"},
                    )
                )["access_token"]
                headers = {"Authorization": f"Bearer {token}"}
                customer = _ok(client.post("/customers", json={"name": "Acme"}, headers=headers))
                tenants.append(Tenant(token, customer["id"], f"Basic {basic}"))
    return tenants


async def _measure(base: str, n: int, concurrency: int, make: Any) -> tuple[float, list[float]]:
    """Send ``n`` requests made by ``make(i)`` with ``concurrency`` in flight; answers the rate
    and the latencies (seconds)."""
    latencies: list[float] = []
    counter = itertools.count()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=base, timeout=HTTP_TIMEOUT, trust_env=False, limits=limits
    ) as client:

        async def worker() -> None:
            while (i := next(counter)) < n:
                method, path, body, headers = make(i)
                started = time.perf_counter()
                if isinstance(body, Form):
                    response = await client.request(method, path, data=body.fields, headers=headers)
                else:
                    response = await client.request(method, path, json=body, headers=headers)
                latencies.append(time.perf_counter() - started)
                if response.status_code >= 300:
                    raise SystemExit(f"{method} {path}: {response.status_code} {response.text}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return n / elapsed, latencies


def _requests(tenants: list[Tenant], introspection: bool = False) -> dict[str, Any]:
    """What each measured request is made of, by its name: ``make(i)`` answers the ``i``-th
    request's method, path, body and headers."""

    def pick(i: int) -> dict[str, str]:
        tenant = tenants[i % len(tenants)]
        return {"Authorization": f"Bearer {tenant.token}", **forwarded_for(i)}

    def healthz(i: int) -> Any:
        return "GET", "/healthz", None, forwarded_for(i)

    def post(i: int) -> Any:
        tenant = tenants[i % len(tenants)]
        return "POST", "/invoices", {"customerId": tenant.customer_id, "lines": LINES}, pick(i)

    def get(i: int) -> Any:
        return "GET", "/invoices", None, pick(i)

    def introspect(i: int) -> Any:
        tenant = tenants[i % len(tenants)]
        headers = {"Authorization": tenant.basic, **forwarded_for(i)}
        return "POST", "/oauth/introspect", Form({"token": tenant.token}), headers

    # POST first: the GET pages then hold 50 invoices.
    requests = {"healthz": healthz, "POST /invoices": post, "GET /invoices": get}
    if introspection:
        requests["POST /oauth/introspect"] = introspect
    return requests


def run(backend: str, n: int, concurrency: int, introspection: bool) -> None:
    with _server(backend) as base:
        results = {}
        for name, make in _requests(_provision(base), introspection).items():
            asyncio.run(_measure(base, concurrency * 4, concurrency, make))  # warm-up
            results[name] = asyncio.run(_measure(base, n, concurrency, make))
    baseline = results["healthz"][0]
    print(f"\n{backend}: {n} requests each, {concurrency} in flight")  # noqa: T201
    print("\n| request          |  req/s | p50 ms | p95 ms | vs healthz |")  # noqa: T201
    print("|------------------|-------:|-------:|-------:|-----------:|")  # noqa: T201
    for name, (rate, latencies) in results.items():
        ordered = sorted(latencies)
        p50 = statistics.median(ordered) * 1000
        p95 = ordered[int(len(ordered) * 0.95) - 1] * 1000
        print(  # noqa: T201
            f"| {name:<16} | {rate:6.0f} | {p50:6.2f} | {p95:6.2f} | {rate / baseline:9.2f}x |"
        )


BURST = 200
"""Requests of each kind a round of a comparison."""
COMPARED_APPS = 4
"""Apps of each server of a comparison: their (app, business) budgets allow the longer load."""


def compare(
    backend: str, against: Path, cycles: int, concurrency: int, introspection: bool
) -> None:
    """This checkout and the one at ``against`` in interleaved bursts (module docstring)."""
    here = Path(__file__).resolve().parent.parent
    with _server(backend, here) as base, _server(backend, against) as other:
        sides = {
            "this checkout": (
                base,
                _requests(_provision(base, COMPARED_APPS), introspection),
            ),
            str(against): (other, _requests(_provision(other, COMPARED_APPS), introspection)),
        }
        names = list(_requests([], introspection))
        rates: dict[tuple[str, str], list[float]] = {(s, n): [] for s in sides for n in names}
        for url, requests in sides.values():
            for make in requests.values():
                asyncio.run(_measure(url, concurrency * 4, concurrency, make))  # warm-up
        for cycle in range(cycles):
            order = list(sides) if cycle % 2 == 0 else list(reversed(sides))
            for name in names:
                for side in order:
                    url, requests = sides[side]
                    rate, _ = asyncio.run(_measure(url, BURST, concurrency, requests[name]))
                    rates[(side, name)].append(rate)
    print(  # noqa: T201
        f"\n{backend}: {cycles} rounds of {BURST} requests each, {concurrency} in flight"
        " (medians; ratio: the median of each round's ratio to its /healthz)\n"
    )
    print("| checkout | request | req/s | vs healthz |")  # noqa: T201
    print("|---|---|---:|---:|")  # noqa: T201
    for side in sides:
        baseline = rates[(side, "healthz")]
        for name in names:
            each = rates[(side, name)]
            ratio = statistics.median(r / b for r, b in zip(each, baseline, strict=True))
            print(  # noqa: T201
                f"| {side} | {name} | {statistics.median(each):.0f} | {ratio:.2f}x |"
            )


def _count(value: str) -> int:
    count = int(value)
    if not 50 <= count <= MAX_N:
        raise argparse.ArgumentTypeError(f"must be between 50 and {MAX_N}")
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--n", type=_count, default=DEFAULT_N)
    parser.add_argument("--concurrency", type=int, choices=range(1, 33), default=8)
    parser.add_argument(
        "--against", type=Path, help="another checkout's root: compare the two (see above)"
    )
    parser.add_argument(
        "--cycles", type=int, choices=range(2, 41), default=8, help="rounds of a comparison"
    )
    parser.add_argument(
        "--introspection", action="store_true", help="measure POST /oauth/introspect as well"
    )
    args = parser.parse_args()
    if args.against is not None and not (args.against / "src" / "ledgerport").is_dir():
        parser.error(f"--against: no checkout of the project at {args.against}")
    for backend in ["sqlite", "postgres"] if args.backend == "both" else [args.backend]:
        if args.against is not None:
            compare(
                backend, args.against.resolve(), args.cycles, args.concurrency, args.introspection
            )
        else:
            run(backend, args.n, args.concurrency, args.introspection)


if __name__ == "__main__":
    main()
