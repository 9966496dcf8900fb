"""Cost of the delivery claims' scan of the tenants with due work, against their number.

Usage::

    .venv/bin/python bench/due_scan.py [--backend sqlite|postgres|both]
        [--businesses 1,100,1000,10000] [--backlog B] [--rounds R]

A claim reads the tenants with due deliveries, each (app, business) with its earliest due time
and its app's developer (``queues.delivery_due_times``): one index step per tenant, whatever
its backlog. For each count of ``--businesses``, a fresh store holds one app installed in that
many businesses, each with one delivery waiting for a retry, and in one more business a backlog
of ``--backlog`` (10,000) due deliveries; the scan is timed ``--rounds`` times, each in a
transaction of its own as the engine's claim makes it, and its median reported with the time a
tenant. PostgreSQL runs in a scratch database (analyzed, as a serving database is), created for
the run and dropped afterwards (server named by LEDGERPORT_BENCH_POSTGRES, as bench/delivery.py);
SQLite in a temporary file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._load import say
from bench.delivery import store_for

from ledgerport import queues
from ledgerport.storage import Store, open_asyncio_loop


async def fill(store: Store, businesses: int, backlog: int) -> None:
    """One app and its webhook; one due delivery in each of ``businesses`` businesses and
    ``backlog`` in one more."""
    rows = [(f"dlv_{n}", f"bus_{n}", float(n)) for n in range(businesses)]
    rows += [(f"dlv_backlog_{n}", "bus_backlog", float(n)) for n in range(backlog)]
    async with store.transaction() as tx:
        await tx.execute(
            "INSERT INTO apps (id, client_id, name, type, redirect_uris, scopes, reviewed, status,"
            " created_at) VALUES ('app_1', 'c1', 'A', 'CONFIDENTIAL', '[]', '[]', true,"
            " 'ACTIVE', 0)"
        )
        await tx.execute(
            "INSERT INTO webhooks (id, app_id, url, events, enabled, secret, created_at,"
            " updated_at) VALUES ('wh_1', 'app_1', 'https://hooks.example/', '[]', true, 's',"
            " 0, 0)"
        )
        await tx.executemany(
            "INSERT INTO webhook_deliveries (id, webhook_id, app_id, business_id, type, body,"
            " status, attempts, created_at, updated_at, next_attempt_at)"
            " VALUES ($1, 'wh_1', 'app_1', $2, 'customer.created', '{}', 'retrying', 1, 0, 0, $3)",
            rows,
        )
    if store.kind == "postgresql":
        await store.autocommit.fetchval("ANALYZE")


async def scan(backend: str, businesses: int, backlog: int, rounds: int) -> tuple[int, float]:
    """The tenants found, and the scan's median time in ms."""
    async with store_for(backend) as store:
        await fill(store, businesses, backlog)
        times = []
        for _ in range(rounds):
            async with store.transaction(background=True) as tx:
                began = time.perf_counter()
                due = await queues.delivery_due_times(tx)
                times.append((time.perf_counter() - began) * 1000)
    return len(due), statistics.median(times)


async def main(args: argparse.Namespace) -> None:
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    counts = [int(count) for count in args.businesses.split(",")]
    async with open_asyncio_loop():
        for backend in backends:
            say(
                f"{backend}: the claims' scan of the tenants with due deliveries, one app, a"
                f" backlog of {args.backlog} in one business; median of {args.rounds}"
            )
            for count in counts:
                tenants, median = await scan(backend, count, args.backlog, args.rounds)
                say(
                    f"   {count:6} businesses   {tenants:6} tenants   {median:8.2f} ms"
                    f"   {1000 * median / tenants:6.1f} us a tenant"
                )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--businesses", default="1,100,1000,10000")
    parser.add_argument("--backlog", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    if args.backend == "postgres":
        args.backend = "postgresql"
    return args


if __name__ == "__main__":
    trio.run(main, parse())
