"""What counting the rate limits costs a data API request, by where the counts are kept.

Usage::

    .venv/bin/python bench/rate_limits.py [--n N]

The script creates a scratch PostgreSQL database, provisions through the operator API a business,
its owner, a confidential app and a managed install, and gets an access token by token exchange.
Four applications then serve the same database in process (quart's test client, no network),
differing only in their limiter:

- ``memory`` (the baseline): counts in the process, as on SQLite;
- ``settled``: the PostgreSQL default, the large budgets counted in the process and settled in
  the database's ``rate_limits`` table (here a slice at a time: nothing runs the settlement
  every 0.1 s), the rest there at every call;
- ``postgres``: every call counted in the ``rate_limits`` table (``StoreRateLimiter`` alone, the
  default before);
- ``redis``: counts in Redis, as with ``LEDGERPORT_REDIS_URL``.

The settled and redis platforms come from ``bootstrap`` as ``ledgerport serve`` builds them; the
others are the settled platform with its limiter replaced. Each round sends
``GET /invoices`` with the bearer token once to each, interleaved, so load from other processes on
the machine falls on all four alike; the figures to compare are the ratios to the baseline
measured in the same run, and the milliseconds each limiter adds to a request. A data API request
makes two limiter calls: the IP's budget, then the app's two budgets together. Each round also
times those two calls alone on each limiter (under keys of their own), and on PostgreSQL a
transaction holding only ``SELECT 1``, what any transaction costs before its statements.

The platforms share a FrozenClock moved on by one second per round, so no budget refuses the
loop. PostgreSQL is the server named by LEDGERPORT_BENCH_POSTGRES (default
postgresql://postgres@127.0.0.1:5432/postgres), Redis the one named by LEDGERPORT_BENCH_REDIS
(default redis://127.0.0.1:6379/0); the database is dropped afterwards, and the Redis keys, hashed
under the run's own root key, expire within minutes.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import math
import os
import secrets
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import trio
import trio_asyncio

from ledgerport import auth, catalog
from ledgerport.clock import FrozenClock
from ledgerport.config import load
from ledgerport.http import create_app
from ledgerport.platform import Platform, bootstrap
from ledgerport.storage import StorageUnavailable, Store, open_asyncio_loop, open_postgres

POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("LEDGERPORT_BENCH_REDIS", "redis://127.0.0.1:6379/0")
DEFAULT_ROUNDS = 500
MIN_ROUNDS = 20
MAX_ROUNDS = 2000
"""Upper bound on --n: a round of four requests takes some 40 ms, so a run stays near a minute."""
WARMUP_ROUNDS = 20
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
MEMORY = "memory"
SETTLED = "settled"
POSTGRES = "postgres"
REDIS = "redis"
LIMITERS = (MEMORY, SETTLED, POSTGRES, REDIS)
REQUEST = "request"
IP_TAKE = "IP budget"
APP_TAKE = "app budgets"
CALLS = (REQUEST, IP_TAKE, APP_TAKE)
EMPTY_TRANSACTION = "empty transaction"
IP_BUDGET = auth.Budget(catalog.RATE_LIMIT_API_PER_IP, ("198.51.100.1",))
APP_BUDGETS = (
    auth.Budget(catalog.RATE_LIMIT_APP_PER_BUSINESS, ("app_bench", "bus_bench")),
    auth.Budget(catalog.RATE_LIMIT_APP, ("app_bench",)),
)


def _write(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _expect(response: Any, status: int) -> Any:
    if response.status_code != status:
        body = await response.get_data(as_text=True)
        raise SystemExit(f"{response.status_code} where {status} was expected: {body}")
    return await response.get_json()


async def _admin_execute(sql: str) -> None:
    conn = await trio_asyncio.aio_as_trio(asyncpg.connect)(POSTGRES_ADMIN_URL, timeout=5)
    try:
        await trio_asyncio.aio_as_trio(conn.execute)(sql)
    finally:
        await trio_asyncio.aio_as_trio(conn.close)()


@asynccontextmanager
async def _postgres_store() -> AsyncIterator[Store]:
    name = f"ledgerport_bench_{secrets.token_hex(6)}"
    try:
        await _admin_execute(f'CREATE DATABASE "{name}"')
    except (OSError, asyncpg.PostgresError) as exc:
        raise SystemExit(f"PostgreSQL at {POSTGRES_ADMIN_URL} is not usable: {exc}") from exc
    try:
        url = urlunsplit(urlsplit(POSTGRES_ADMIN_URL)._replace(path=f"/{name}"))
        async with open_postgres(url) as store:
            await store.migrate()
            yield store
    finally:
        with trio.CancelScope(shield=True):
            await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _platforms(store: Store, clock: FrozenClock, admin_token: str) -> dict[str, Platform]:
    """The four platforms over one store, differing only in their limiter."""
    env = {
        "LEDGERPORT_DATABASE_URL": "sqlite:///unused.db",
        "LEDGERPORT_ADMIN_TOKEN": admin_token,
        "LEDGERPORT_SECRET_KEY": secrets.token_urlsafe(32),
        "LEDGERPORT_ENV": "development",
        "LEDGERPORT_BASE_URL": "http://api.ledgerport.test",
        "LEDGERPORT_AUTH_URL": "http://app.ledgerport.test",
    }
    settled = (await bootstrap(store, load(env), clock=clock)).platform
    try:
        with_redis = load({**env, "LEDGERPORT_REDIS_URL": REDIS_URL})
        redis = await bootstrap(store, with_redis, clock=clock)
    except StorageUnavailable as exc:
        raise SystemExit(f"Redis at {REDIS_URL} is not usable: {exc}") from exc
    assert isinstance(settled.limiter, auth.SettlingRateLimiter)
    assert isinstance(redis.platform.limiter, auth.RedisRateLimiter)
    every_call = auth.StoreRateLimiter(store, clock, settled.keyring)
    return {
        MEMORY: dataclasses.replace(settled, limiter=auth.MemoryRateLimiter(clock)),
        SETTLED: settled,
        POSTGRES: dataclasses.replace(settled, limiter=every_call),
        REDIS: redis.platform,
    }


async def _access_token(client: Any, admin_token: str) -> str:
    """A business, its owner, a confidential app installed there, and an access token."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    business = await _expect(
        await client.post("/admin/businesses", json={"name": "Bench"}, headers=admin), 201
    )
    user = await _expect(
        await client.post(
            "/admin/users",
            json={"email": "owner@bench.example", "password": secrets.token_urlsafe(16)},
            headers=admin,
        ),
        201,
    )
    await _expect(
        await client.put(
            f"/admin/businesses/{business['id']}/members/{user['id']}",
            json={"role": "owner"},
            headers=admin,
        ),
        200,
    )
    app = await _expect(
        await client.post(
            "/admin/apps",
            json={
                "name": "Bench Sync",
                "type": "CONFIDENTIAL",
                "redirectUris": ["https://bench.example/callback"],
                "scopes": ["invoices:read"],
                "developerUserId": user["id"],
                "reviewed": True,
            },
            headers=admin,
        ),
        201,
    )
    ids = {"appId": app["id"], "businessId": business["id"], "userId": user["id"]}
    await _expect(
        await client.post(
            "/admin/installations", json={**ids, "scopes": ["invoices:read"]}, headers=admin
        ),
        201,
    )
    issued = await _expect(await client.post("/admin/session-tokens", json=ids, headers=admin), 201)
    credentials = base64.b64encode(f"{app['clientId']}:{app['clientSecret']}".encode()).decode()
    pair = await _expect(
        await client.post(
            "/oauth/token",
            form={
                "grant_type": TOKEN_EXCHANGE,
                "subject_token": issued["sessionToken"],
                "subject_token_type": JWT_TYPE,
            },
            headers={"Authorization": f"Basic {credentials}"},
        ),
        200,
    )
    token: str = pair["access_token"]
    return token


Samples = dict[tuple[str, str], list[float]]
"""Seconds by (limiter, call), and (POSTGRES, EMPTY_TRANSACTION)."""


async def _timed(samples: Samples | None, key: tuple[str, str], call: Awaitable[Any]) -> Any:
    started = time.perf_counter()
    result = await call
    if samples is not None:
        samples.setdefault(key, []).append(time.perf_counter() - started)
    return result


async def _empty_transaction(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.fetchval("SELECT 1")


async def measure(rounds: int) -> Samples:
    """Seconds of each ``GET /invoices`` and limiter call, by limiter, over ``rounds``
    interleaved rounds."""
    clock = FrozenClock()
    admin_token = f"lp_admin_{secrets.token_urlsafe(24)}"
    samples: Samples = {}
    async with _postgres_store() as store:
        platforms = await _platforms(store, clock, admin_token)
        clients = {name: create_app(p).test_client() for name, p in platforms.items()}
        bearer = {"Authorization": f"Bearer {await _access_token(clients[MEMORY], admin_token)}"}
        for round_number in range(WARMUP_ROUNDS + rounds):
            kept = samples if round_number >= WARMUP_ROUNDS else None
            clock.advance(1)
            for name in LIMITERS:
                request = clients[name].get("/invoices", headers=bearer)
                await _expect(await _timed(kept, (name, REQUEST), request), 200)
                limiter = platforms[name].limiter
                await _timed(kept, (name, IP_TAKE), limiter.take(IP_BUDGET))
                await _timed(kept, (name, APP_TAKE), limiter.take(*APP_BUDGETS))
            await _timed(kept, (POSTGRES, EMPTY_TRANSACTION), _empty_transaction(store))
    return samples


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def report(samples: Samples, rounds: int) -> None:
    means = {key: statistics.fmean(seconds) for key, seconds in samples.items()}
    baseline = means[MEMORY, REQUEST]
    _write(f"GET /invoices, {rounds} requests per limiter, one request in flight, PostgreSQL store")
    _write()
    _write("| limiter  |   req/s | mean ms |  p95 ms | vs memory | added ms |")
    _write(f"|{'-' * 10}|{'-' * 8}:|{'-' * 8}:|{'-' * 8}:|{'-' * 10}:|{'-' * 9}:|")
    for name in LIMITERS:
        mean = means[name, REQUEST]
        _write(
            f"| {name:<8} | {1 / mean:>7.0f} | {mean * 1000:>7.2f}"
            f" | {_p95(samples[name, REQUEST]) * 1000:>7.2f} | {baseline / mean:>8.2f}x"
            f" | {(mean - baseline) * 1000:>8.2f} |"
        )
    _write()
    _write("The limiter calls alone, mean ms:")
    _write()
    _write("| limiter  | IP budget | app budgets |")
    _write(f"|{'-' * 10}|{'-' * 10}:|{'-' * 12}:|")
    for name in LIMITERS:
        _write(
            f"| {name:<8} | {means[name, IP_TAKE] * 1000:>9.2f}"
            f" | {means[name, APP_TAKE] * 1000:>11.2f} |"
        )
    _write()
    _write(
        "A PostgreSQL transaction holding only SELECT 1:"
        f" {means[POSTGRES, EMPTY_TRANSACTION] * 1000:.2f} ms mean"
    )
    _write()


def _rounds(value: str) -> int:
    count = int(value)
    if not MIN_ROUNDS <= count <= MAX_ROUNDS:
        raise argparse.ArgumentTypeError(f"must be between {MIN_ROUNDS} and {MAX_ROUNDS}")
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=_rounds, default=DEFAULT_ROUNDS)
    args = parser.parse_args()

    async def run() -> None:
        # One asyncio loop for the process, as ledgerport serve has: asyncpg and Redis run on it.
        async with open_asyncio_loop():
            report(await measure(args.n), args.n)

    trio.run(run)


if __name__ == "__main__":
    main()
