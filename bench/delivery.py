"""Webhook delivery throughput and latency against a bare httpx client, in one run.

Usage::

    .venv/bin/python bench/delivery.py [--backend sqlite|postgres|both] [--n N] [--webhooks W]

A receiver on loopback (trio and h11, answering 200 at once) takes every POST. Measured, per
backend, in the same process and against the same receiver:

- ``bare``: ``W`` httpx clients with one connection each post ``N`` signed delivery bodies,
  ``W`` requests in flight (one client per connection, the engine's shape); its requests per
  second is the throughput baseline, and the round trip of one request at a time (the same
  client, nothing else in flight) the latency baseline;
- ``engine``: an app with ``W`` webhooks, each subscribed to customer.created and each at most
  one attempt in flight (``W`` in flight in all, as above); ``N / W`` events are committed
  first, then the delivery engine starts and the time until the receiver has all ``N``
  deliveries gives deliveries per second: fan-out, claims, send-time checks, signing, the
  attempts and the outcome writes, everything an event costs after its commit;
- ``latency``: customer.updated events, which one more webhook of the app subscribes to,
  committed one at a time at half the engine's measured rate while it runs; for each, the time
  from its commit to its delivery's first attempt arriving at the receiver.

The targets (issue: webhook engine): engine throughput at least 0.7x bare, latency p50 within
3x the bare round trip's p50, p99 under 50 ms. PostgreSQL runs in a scratch database, created
for the run and dropped afterwards (server named by LEDGERPORT_BENCH_POSTGRES, default
postgresql://postgres@127.0.0.1:5432/postgres); SQLite in a temporary file.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import trio
import trio_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.receiver import Receiver, receiving

from ledgerport import apps, books
from ledgerport.clock import SystemClock
from ledgerport.config import load
from ledgerport.engine import DeliveryEngine, signature_header
from ledgerport.platform import Platform, bootstrap
from ledgerport.storage import Store, Transaction, open_asyncio_loop, open_postgres, open_sqlite

POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DEFAULT_N = 4000
MAX_N = 20000
DEFAULT_WEBHOOKS = 8
LATENCY_EVENTS = 400
LATENCY_EVENT = "customer.updated"
"""The latency phase's events reach one webhook of their own."""
RUN_TIMEOUT = 300


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def bare(receiver: Receiver, n: int, clients: int) -> tuple[float, list[float]]:
    """Requests per second of ``clients`` one-connection clients posting ``n`` signed bodies,
    and each request's round trip in seconds."""
    secret = "whsec_" + secrets.token_urlsafe(32)
    body = json.dumps({"id": "dlv_bench", "type": "customer.created", "data": {}}).encode()
    remaining = list(range(n))
    trips: list[float] = []

    async def post_some(client: httpx.AsyncClient) -> None:
        while remaining:
            remaining.pop()
            headers = {
                "Content-Type": "application/json",
                "X-Webhook-Signature": signature_header([secret], int(time.time()), body),
            }
            started = time.perf_counter()
            response = await client.post(receiver.url, content=body, headers=headers)
            trips.append(time.perf_counter() - started)
            assert response.status_code == 200

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            client = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=1), trust_env=False, timeout=10
            )
            nursery.start_soon(_closing, client, post_some)
    return n / (time.perf_counter() - started), trips


async def _closing(client: httpx.AsyncClient, work: object) -> None:
    async with client:
        await work(client)  # type: ignore[operator]


async def installed_app(tx: Transaction, platform: Platform) -> tuple[str, apps.App]:
    """A business and its owner, who develops an app holding customers:read installed there;
    answers the business's id and the app."""
    now = platform.now()
    user = await books.create_user(tx, now=now, email="bench@example.com", password_hash="unused")
    business = await books.create_business(tx, now=now, name="Bench")
    await books.set_membership(
        tx, now=now, business_id=business.id, user_id=user.id, role="owner", active=True
    )
    app, _ = await apps.create_app(
        tx,
        platform.keyring,
        now=now,
        name="Bench",
        type="CONFIDENTIAL",
        redirect_uris=["https://bench.example.com/cb"],
        scopes=["customers:read"],
        developer_user_id=user.id,
        reviewed=True,
    )
    await apps.install(
        tx,
        now=now,
        app_id=app.id,
        business_id=business.id,
        user_id=user.id,
        scopes=["customers:read"],
    )
    return business.id, app


async def bench_platform(store: Store) -> Platform:
    """A development platform on ``store`` with fresh keys and the real clock."""
    config = load(
        {
            "LEDGERPORT_DATABASE_URL": "sqlite:///unused.db",
            "LEDGERPORT_SECRET_KEY": secrets.token_urlsafe(32),
            "LEDGERPORT_ADMIN_TOKEN": "lp_admin_" + secrets.token_urlsafe(16),
            "LEDGERPORT_ENV": "development",
            "LEDGERPORT_PASSWORD_HASHING": "fast",
        }
    )
    return (await bootstrap(store, config, clock=SystemClock())).platform


async def provision(platform: Platform, url: str, webhooks: int) -> str:
    """A business with an app holding customers:read installed, and ``webhooks`` webhooks of
    the app on ``url``; answers the business's id."""
    now = platform.now()
    async with platform.store.transaction() as tx:
        business_id, app = await installed_app(tx, platform)
        for _ in range(webhooks):
            await apps.create_webhook(
                tx,
                platform.keyring,
                now=now,
                app_id=app.id,
                url=url,
                events=["customer.created"],
                development=True,
            )
        await apps.create_webhook(
            tx,
            platform.keyring,
            now=now,
            app_id=app.id,
            url=url,
            events=[LATENCY_EVENT],
            development=True,
        )
    return business_id


async def record(
    platform: Platform, business_id: str, count: int, type: str = "customer.created"
) -> None:
    async with platform.store.transaction() as tx:
        for _ in range(count):
            await books.record_event(
                tx,
                now=platform.now(),
                type=type,
                data={"id": "cus_bench", "name": "Acme"},
                business_id=business_id,
            )


async def engine_throughput(
    platform: Platform, receiver: Receiver, business_id: str, n: int, webhooks: int
) -> float:
    events = n // webhooks
    for start in range(0, events, 500):
        await record(platform, business_id, min(500, events - start))
    before = len(receiver.received)
    engine = DeliveryEngine(platform, in_flight=1)
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        await nursery.start(engine.run)
        await receiver.wait_for(before + events * webhooks, within=RUN_TIMEOUT)
        elapsed = time.perf_counter() - started
        # Every outcome written before the engine stops: nothing is sent again in the next phase.
        await engine.settle()
        nursery.cancel_scope.cancel()
    return events * webhooks / elapsed


async def engine_latency(
    platform: Platform, receiver: Receiver, business_id: str, rate: float
) -> list[float]:
    """Commit-to-arrival of each event's one delivery, events committed at ``rate`` a second."""
    engine = DeliveryEngine(platform, in_flight=1)
    lags: list[float] = []
    interval = 1 / rate
    async with trio.open_nursery() as nursery:
        await nursery.start(engine.run)
        for _ in range(LATENCY_EVENTS):
            before = len(receiver.received)
            started = time.perf_counter()
            await record(platform, business_id, 1, LATENCY_EVENT)
            committed = time.perf_counter()
            await receiver.wait_for(before + 1, within=30)
            lags.append(receiver.arrivals[before] - committed)
            await trio.sleep(max(interval - (time.perf_counter() - started), 0))
        await engine.settle()
        nursery.cancel_scope.cancel()
    return lags


@asynccontextmanager
async def store_for(backend: str) -> AsyncIterator[Store]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="ledgerport-bench-") as directory:
            async with open_sqlite(os.path.join(directory, "bench.db")) as store:
                await store.migrate()
                yield store
        return
    name = f"ledgerport_bench_{secrets.token_hex(4)}"
    admin = await trio_asyncio.aio_as_trio(asyncpg.connect)(POSTGRES_ADMIN_URL)
    try:
        await trio_asyncio.aio_as_trio(admin.execute)(f'CREATE DATABASE "{name}"')
        url = urlunsplit(urlsplit(POSTGRES_ADMIN_URL)._replace(path=f"/{name}"))
        try:
            async with open_postgres(url) as store:
                await store.migrate()
                yield store
        finally:
            await trio_asyncio.aio_as_trio(admin.execute)(
                f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
            )
    finally:
        await trio_asyncio.aio_as_trio(admin.close)()


async def run_backend(backend: str, n: int, webhooks: int) -> None:
    async with store_for(backend) as store, receiving() as receiver:
        platform = await bench_platform(store)
        business_id = await provision(platform, receiver.url, webhooks)
        await bare(receiver, min(n, 500), webhooks)  # warm-up
        bare_rate, _ = await bare(receiver, n, webhooks)
        _, trips = await bare(receiver, LATENCY_EVENTS, 1)  # one request at a time
        engine_rate = await engine_throughput(platform, receiver, business_id, n, webhooks)
        lags = await engine_latency(platform, receiver, business_id, engine_rate / 2)
    trip_p50 = statistics.median(trips)
    lag_p50, lag_p99 = statistics.median(lags), percentile(lags, 0.99)
    lines = [
        f"{backend}: {webhooks} in flight, {n} deliveries",
        f"  bare httpx     {bare_rate:8.0f} posts/s       one round trip alone, p50"
        f" {trip_p50 * 1000:.2f} ms",
        f"  engine         {engine_rate:8.0f} deliveries/s  ratio {engine_rate / bare_rate:.2f}x"
        " (target >= 0.7x)",
        f"  latency at {engine_rate / 2:.0f}/s: p50 {lag_p50 * 1000:.2f} ms"
        f" ({lag_p50 / trip_p50:.1f}x the round trip, target <= 3x),"
        f" p99 {lag_p99 * 1000:.2f} ms (target < 50 ms)",
    ]
    print("\n".join(lines), flush=True)  # noqa: T201 - the bench's report


async def main(backends: list[str], n: int, webhooks: int) -> None:
    async with open_asyncio_loop():
        for backend in backends:
            with trio.fail_after(RUN_TIMEOUT * 2):
                await run_backend(backend, n, webhooks)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--n", type=int, default=DEFAULT_N)
    parser.add_argument("--webhooks", type=int, default=DEFAULT_WEBHOOKS)
    args = parser.parse_args()
    if not 100 <= args.n <= MAX_N:
        parser.error(f"--n must be 100..{MAX_N}")
    if not 1 <= args.webhooks <= 64:
        parser.error("--webhooks must be 1..64")
    chosen = (
        ["sqlite", "postgresql"]
        if args.backend == "both"
        else ["postgresql" if args.backend == "postgres" else "sqlite"]
    )
    trio.run(main, chosen, args.n, args.webhooks)
