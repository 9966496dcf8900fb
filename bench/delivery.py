"""Webhook delivery throughput and latency against a bare httpx client, in one run.

Usage::

    .venv/bin/python bench/delivery.py [--backend sqlite|postgres|both] [--n N] [--webhooks W]
        [--in-flight F] [--signature stripe|standard|standard-asymmetric]
        [--records R [--per-record K] [--ordering none|record]]

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

The webhooks sign in ``--signature``'s scheme (``stripe``, the spec's, by default) and each
has ``--in-flight`` attempts in flight at most (1 by default: ``W * F`` in flight in all, and as
many bare clients).

With ``--records R`` the throughput phase's events are ``invoice.updated`` about ``R``
invoices, ``--per-record`` (10) each, committed as a bookkeeping import records them: every
invoice once, then every invoice again, ``K`` rounds (each event carries its round as
``data.revision``), 500 events a transaction; the latency phase is left out. With
``--ordering record`` that phase runs twice in the same run, on fresh events of a business of
its own: first to ``W`` webhooks that do not order, then to ``W`` that order by record, and the
ratio of their rates is printed; the receiver's arrivals tell whether each invoice's
deliveries to an ordered webhook arrived in the order of its events.

The targets (issue: webhook engine): engine throughput at least 0.7x bare, latency p50 within
3x the bare round trip's p50, p99 under 50 ms. Issue: webhook endpoints beyond the spec: an
ordered endpoint, with 1,000 records of 10 events each, at least 0.5x an unordered one.
PostgreSQL runs in a scratch database, created for the run and dropped afterwards (server named
by LEDGERPORT_BENCH_POSTGRES, default postgresql://postgres@127.0.0.1:5432/postgres); SQLite
in a temporary file.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import trio
import trio_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.receiver import Received, Receiver, receiving

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
RECORD_EVENT = "invoice.updated"
"""The events about records (``--records``): each about the invoice its ``data.id`` names."""
EVENTS_A_COMMIT = 500
RUN_TIMEOUT = 300


@dataclass(frozen=True)
class Shape:
    """What a run measures (the command's options): ``webhooks`` webhooks, each with at most
    ``in_flight`` attempts in flight and signing in ``signature``'s scheme; with ``records``,
    events about that many invoices, ``per_record`` each, to webhooks ordered as
    ``orderings`` lists, one phase each."""

    webhooks: int
    in_flight: int = 1
    signature: apps.Scheme = "stripe"
    records: int = 0
    per_record: int = 10
    orderings: tuple[apps.Ordering, ...] = ("none",)

    @property
    def in_flight_total(self) -> int:
        return self.webhooks * self.in_flight

    @property
    def record_deliveries(self) -> int:
        """The deliveries of one phase about records."""
        return self.records * self.per_record * self.webhooks


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


async def installed_app(
    tx: Transaction, platform: Platform, name: str = "Bench", scope: str = "customers:read"
) -> tuple[str, apps.App]:
    """A business and its owner, who develops an app holding ``scope`` installed there;
    answers the business's id and the app."""
    now = platform.now()
    user = await books.create_user(
        tx, now=now, email=f"{name.lower()}@example.com", password_hash="unused"
    )
    business = await books.create_business(tx, now=now, name=name)
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
        scopes=[scope],
        developer_user_id=user.id,
        reviewed=True,
    )
    await apps.install(
        tx, now=now, app_id=app.id, business_id=business.id, user_id=user.id, scopes=[scope]
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


async def provision(platform: Platform, url: str, shape: Shape) -> str:
    """A business with an app holding customers:read installed, and ``shape.webhooks`` webhooks
    of the app on ``url`` subscribed to customer.created, and one more to LATENCY_EVENT, each
    signing in ``shape.signature``'s scheme; answers the business's id."""
    now = platform.now()
    async with platform.store.transaction() as tx:
        business_id, app = await installed_app(tx, platform)
        for events in [["customer.created"]] * shape.webhooks + [[LATENCY_EVENT]]:
            await apps.create_webhook(
                tx,
                platform.keyring,
                now=now,
                app_id=app.id,
                url=url,
                events=events,
                signature=shape.signature,
                development=True,
            )
    return business_id


async def provision_records(
    platform: Platform, url: str, shape: Shape, ordering: apps.Ordering
) -> str:
    """A business of its own with an app holding invoices:read installed, and
    ``shape.webhooks`` webhooks of the app subscribed to RECORD_EVENT, ordered as ``ordering``
    says and signing in ``shape.signature``'s scheme, each on a path of its own below ``url``
    (the receiver tells them apart by it); answers the business's id."""
    now = platform.now()
    async with platform.store.transaction() as tx:
        business_id, app = await installed_app(
            tx, platform, name=f"Records-{ordering}", scope="invoices:read"
        )
        for index in range(shape.webhooks):
            await apps.create_webhook(
                tx,
                platform.keyring,
                now=now,
                app_id=app.id,
                url=f"{url}/{ordering}/{index}",
                events=[RECORD_EVENT],
                signature=shape.signature,
                ordering=ordering,
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


def invoice_update(record: int, revision: int) -> dict[str, object]:
    """The ``data`` of the ``revision``-th update of invoice number ``record``."""
    return {
        "id": f"inv_bench{record:06d}",
        "number": f"INV-{record:06d}",
        "status": "draft",
        "customerId": "cus_bench",
        "currency": "EUR",
        "total": "1210.00",
        "amountDue": "1210.00",
        "revision": revision,
    }


async def record_updates(platform: Platform, business_id: str, records: int, rounds: int) -> int:
    """Commit ``rounds`` updates of each of ``records`` invoices as an import records them:
    every invoice once, then every one again, EVENTS_A_COMMIT events a transaction; answers how
    many were committed."""
    updates = [(r, i) for r in range(rounds) for i in range(records)]
    for start in range(0, len(updates), EVENTS_A_COMMIT):
        async with platform.store.transaction() as tx:
            for revision, record in updates[start : start + EVENTS_A_COMMIT]:
                await books.record_event(
                    tx,
                    now=platform.now(),
                    type=RECORD_EVENT,
                    data=invoice_update(record, revision),
                    business_id=business_id,
                )
    return len(updates)


async def engine_throughput(
    platform: Platform, receiver: Receiver, business_id: str, n: int, shape: Shape
) -> float:
    events = n // shape.webhooks
    for start in range(0, events, EVENTS_A_COMMIT):
        await record(platform, business_id, min(EVENTS_A_COMMIT, events - start))
    return await deliveries_a_second(platform, receiver, events * shape.webhooks, shape)


async def deliveries_a_second(
    platform: Platform, receiver: Receiver, expected: int, shape: Shape
) -> float:
    """Start an engine on events already committed, and answer the deliveries a second until
    the receiver has ``expected`` more."""
    before = len(receiver.received)
    engine = DeliveryEngine(platform, in_flight=shape.in_flight)
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        await nursery.start(engine.run)
        await receiver.wait_for(before + expected, within=RUN_TIMEOUT)
        elapsed = time.perf_counter() - started
        # Every outcome written before the engine stops: nothing is sent again in the next phase.
        await engine.settle()
        nursery.cancel_scope.cancel()
    return expected / elapsed


def out_of_order(received: list[Received]) -> tuple[int, int]:
    """Of the invoices whose updates ``received`` holds, how many arrived out of the order of
    their events (a webhook's deliveries about an invoice, by ``data.revision``), and how many
    there are."""
    arrived: dict[tuple[str, str], list[int]] = {}
    for request in received:
        data = json.loads(request.body)["data"]
        # Each webhook has a path of its own (provision_records).
        arrived.setdefault((request.path, data["id"]), []).append(int(data["revision"]))
    broken = sum(
        1 for revisions in arrived.values() if any(a > b for a, b in itertools.pairwise(revisions))
    )
    return broken, len(arrived)


async def engine_latency(
    platform: Platform, receiver: Receiver, business_id: str, rate: float, shape: Shape
) -> list[float]:
    """Commit-to-arrival of each event's one delivery, events committed at ``rate`` a second."""
    engine = DeliveryEngine(platform, in_flight=shape.in_flight)
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


async def run_backend(backend: str, n: int, shape: Shape) -> None:
    if shape.records:
        await run_records(backend, shape)
        return
    clients = shape.in_flight_total
    async with store_for(backend) as store, receiving() as receiver:
        platform = await bench_platform(store)
        business_id = await provision(platform, receiver.url, shape)
        await bare(receiver, min(n, 500), clients)  # warm-up
        bare_rate, _ = await bare(receiver, n, clients)
        _, trips = await bare(receiver, LATENCY_EVENTS, 1)  # one request at a time
        engine_rate = await engine_throughput(platform, receiver, business_id, n, shape)
        lags = await engine_latency(platform, receiver, business_id, engine_rate / 2, shape)
    trip_p50 = statistics.median(trips)
    lag_p50, lag_p99 = statistics.median(lags), percentile(lags, 0.99)
    lines = [
        f"{backend}: {clients} in flight, {n} deliveries, signed {shape.signature}",
        f"  bare httpx     {bare_rate:8.0f} posts/s       one round trip alone, p50"
        f" {trip_p50 * 1000:.2f} ms",
        f"  engine         {engine_rate:8.0f} deliveries/s  ratio {engine_rate / bare_rate:.2f}x"
        " (target >= 0.7x)",
        f"  latency at {engine_rate / 2:.0f}/s: p50 {lag_p50 * 1000:.2f} ms"
        f" ({lag_p50 / trip_p50:.1f}x the round trip, target <= 3x),"
        f" p99 {lag_p99 * 1000:.2f} ms (target < 50 ms)",
    ]
    print("\n".join(lines), flush=True)  # noqa: T201 - the bench's report


async def run_records(backend: str, shape: Shape) -> None:
    """The phases about records (``--records``): one per ordering of ``shape.orderings``, each
    on fresh events of a business of its own, against the bare client in the same run."""
    clients = shape.in_flight_total
    expected = shape.record_deliveries
    rates: dict[str, float] = {}
    order: dict[str, tuple[int, int]] = {}
    async with store_for(backend) as store, receiving() as receiver:
        platform = await bench_platform(store)
        await bare(receiver, min(expected, 500), clients)  # warm-up
        bare_rate, _ = await bare(receiver, min(expected, MAX_N), clients)
        for ordering in shape.orderings:
            business_id = await provision_records(platform, receiver.url, shape, ordering)
            await record_updates(platform, business_id, shape.records, shape.per_record)
            before = len(receiver.received)
            rates[ordering] = await deliveries_a_second(platform, receiver, expected, shape)
            order[ordering] = out_of_order(receiver.received[before:])
    lines = [
        f"{backend}: {shape.webhooks} webhook(s) x {shape.in_flight} in flight,"
        f" signed {shape.signature}, {shape.records} invoices x {shape.per_record} updates:"
        f" {expected} deliveries a phase",
        f"  bare httpx     {bare_rate:8.0f} posts/s",
    ]
    for ordering, rate in rates.items():
        broken, records = order[ordering]
        line = (
            f"  {'ordered' if ordering == 'record' else 'unordered':<10} {rate:8.0f} deliveries/s"
            f"  ratio {rate / bare_rate:.2f}x bare"
        )
        if ordering == "record" and "none" in rates:
            line += f", {rate / rates['none']:.2f}x unordered (target >= 0.5x)"
        line += f"; {broken} of {records} invoices' deliveries arrived out of order"
        lines.append(line)
    print("\n".join(lines), flush=True)  # noqa: T201 - the bench's report


async def main(backends: list[str], n: int, shape: Shape) -> None:
    async with open_asyncio_loop():
        for backend in backends:
            with trio.fail_after(RUN_TIMEOUT * (2 + len(shape.orderings))):
                await run_backend(backend, n, shape)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--n", type=int, default=DEFAULT_N)
    parser.add_argument("--webhooks", type=int, default=DEFAULT_WEBHOOKS)
    parser.add_argument(
        "--in-flight", type=int, default=1, help="attempts in flight per webhook at most"
    )
    parser.add_argument("--signature", choices=apps.SCHEMES, default="stripe")
    parser.add_argument(
        "--records", type=int, default=0, help="events about this many invoices (0: none)"
    )
    parser.add_argument("--per-record", type=int, default=10, help="events about each invoice")
    parser.add_argument(
        "--ordering",
        choices=apps.ORDERINGS,
        default="none",
        help="record: the phase about records to unordered webhooks, then to ordered ones",
    )
    args = parser.parse_args()
    if not 100 <= args.n <= MAX_N:
        parser.error(f"--n must be 100..{MAX_N}")
    if not 1 <= args.webhooks <= 64:
        parser.error("--webhooks must be 1..64")
    if not 1 <= args.in_flight <= 64:
        parser.error("--in-flight must be 1..64")
    if not 0 <= args.records <= 100_000 or not 1 <= args.per_record <= 100:
        parser.error("--records must be 0..100000 and --per-record 1..100")
    if args.ordering == "record" and not args.records:
        parser.error("--ordering record orders events about records: give --records")
    if args.records * args.per_record * args.webhooks > 200_000:
        parser.error("at most 200,000 deliveries a phase")
    chosen = (
        ["sqlite", "postgresql"]
        if args.backend == "both"
        else ["postgresql" if args.backend == "postgres" else "sqlite"]
    )
    run_shape = Shape(
        webhooks=args.webhooks,
        in_flight=args.in_flight,
        signature=args.signature,
        records=args.records,
        per_record=args.per_record,
        orderings=("none", "record") if args.ordering == "record" else ("none",),
    )
    trio.run(main, chosen, args.n, run_shape)
