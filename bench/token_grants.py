"""Throughput and latency of the token grants, with refresh rotation as the baseline.

Usage::

    .venv/bin/python bench/token_grants.py [--backend sqlite|postgres|both] [--n N]

For each backend the script provisions, through the operator API, a business, its owner, a
confidential app and a managed install, then drives the HTTP application in process (quart's
test client over the real store, no network) one request at a time:

- ``refresh``: ``POST /oauth/token`` with ``grant_type=refresh_token``, each call presenting the
  refresh token the previous one returned (the baseline);
- ``session token``: ``POST /admin/session-tokens``;
- ``token exchange``: ``POST /oauth/token`` with a fresh session token, issued beforehand
  outside the timing;
- ``jwks``: ``GET /.well-known/jwks.json``.

Each round also times, in process and without the HTTP layer, the ES256 signature check of the
round's session token against the published key, to set the exchange's cryptography beside it.

The four operations run interleaved, one of each per round, so load from other processes on the
machine falls on all of them alike; the figures to compare are the ratios to the baseline
measured in the same run. PostgreSQL runs in a scratch database created for the run and
dropped afterwards (server named by LEDGERPORT_BENCH_POSTGRES, default
postgresql://postgres@127.0.0.1:5432/postgres).
"""

from __future__ import annotations

import argparse
import base64
import math
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import jwt
import trio
import trio_asyncio
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from ledgerport.clock import FrozenClock
from ledgerport.config import load
from ledgerport.http import create_app
from ledgerport.platform import Platform, bootstrap
from ledgerport.storage import Store, open_asyncio_loop, open_postgres, open_sqlite

POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DEFAULT_OPERATIONS = 300
MIN_OPERATIONS = 20
MAX_OPERATIONS = 1000
"""Upper bound on --n: a round of four requests takes some 40 ms, so both backends stay near a
minute and a half."""
WARMUP_ROUNDS = 10
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
SCOPES = ("invoices:read", "customers:read")
REFRESH = "refresh"
SESSION_TOKEN = "session token"
EXCHANGE = "token exchange"
JWKS = "jwks"
OPERATIONS = (REFRESH, SESSION_TOKEN, EXCHANGE, JWKS)


def _write(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@dataclass
class Fixture:
    """The provisioned tenant and the credentials each request presents."""

    client: Any
    clock: FrozenClock
    admin_headers: dict[str, str]
    basic_headers: dict[str, str]
    app_id: str
    business_id: str
    user_id: str
    refresh_token: str = ""


@dataclass
class Samples:
    seconds: dict[str, list[float]] = field(default_factory=lambda: {op: [] for op in OPERATIONS})
    verification: list[float] = field(default_factory=list)
    """The ES256 check of each round's session token alone, in process, as the exchange does it."""


def _verify_session_token(token: str, keys: dict[str, Any]) -> None:
    """Check the signature as the exchange does: the kid's JWK made a key, claims left aside."""
    kid = jwt.get_unverified_header(token)["kid"]
    public_key = ECAlgorithm.from_jwk(next(k for k in keys["keys"] if k["kid"] == kid))
    assert isinstance(public_key, ec.EllipticCurvePublicKey)
    jwt.decode(
        token,
        public_key,
        algorithms=["ES256"],
        options={
            "verify_exp": False,
            "verify_nbf": False,
            "verify_iat": False,
            "verify_aud": False,
            "verify_iss": False,
        },
    )


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
async def _sqlite_store() -> AsyncIterator[Store]:
    with tempfile.TemporaryDirectory(prefix="ledgerport-bench-") as directory:
        async with open_sqlite(os.path.join(directory, "bench.db")) as store:
            yield store


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
            yield store
    finally:
        with trio.CancelScope(shield=True):
            await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


STORES: dict[str, Callable[[], AbstractAsyncContextManager[Store]]] = {
    "sqlite": _sqlite_store,
    "postgres": _postgres_store,
}


async def _platform(store: Store, clock: FrozenClock, admin_token: str) -> Platform:
    config = load(
        {
            "LEDGERPORT_DATABASE_URL": "sqlite:///unused.db",
            "LEDGERPORT_ADMIN_TOKEN": admin_token,
            "LEDGERPORT_SECRET_KEY": secrets.token_urlsafe(32),
            "LEDGERPORT_ENV": "development",
            "LEDGERPORT_BASE_URL": "http://api.ledgerport.test",
            "LEDGERPORT_AUTH_URL": "http://app.ledgerport.test",
        }
    )
    await store.migrate()
    return (await bootstrap(store, config, clock=clock)).platform


async def _provision(client: Any, clock: FrozenClock, admin_token: str) -> Fixture:
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
                "scopes": list(SCOPES),
                "developerUserId": user["id"],
                "reviewed": True,
            },
            headers=admin,
        ),
        201,
    )
    await _expect(
        await client.post(
            "/admin/installations",
            json={
                "appId": app["id"],
                "businessId": business["id"],
                "userId": user["id"],
                "scopes": list(SCOPES),
            },
            headers=admin,
        ),
        201,
    )
    credentials = base64.b64encode(f"{app['clientId']}:{app['clientSecret']}".encode()).decode()
    return Fixture(
        client=client,
        clock=clock,
        admin_headers=admin,
        basic_headers={"Authorization": f"Basic {credentials}"},
        app_id=app["id"],
        business_id=business["id"],
        user_id=user["id"],
    )


async def _timed(samples: Samples | None, op: str, request: Callable[[], Awaitable[Any]]) -> Any:
    started = time.perf_counter()
    response = await request()
    elapsed = time.perf_counter() - started
    if samples is not None:
        samples.seconds[op].append(elapsed)
    return response


async def _round(fx: Fixture, samples: Samples | None) -> None:
    """One of each operation, the clock a second further before each.

    The confidential client may make 600 token requests a minute across IPs, and each (IP,
    client) pair 600: a loop this fast would be refused within a second. Moving the platform's
    clock on by 1 s per request keeps those sliding windows far from full (two token requests
    per four simulated seconds) while every token stays well inside its lifetime.
    """
    client = fx.client

    fx.clock.advance(1)
    response = await _timed(
        samples,
        REFRESH,
        lambda: client.post(
            "/oauth/token",
            form={"grant_type": "refresh_token", "refresh_token": fx.refresh_token},
            headers=fx.basic_headers,
        ),
    )
    fx.refresh_token = (await _expect(response, 200))["refresh_token"]

    fx.clock.advance(1)
    response = await _timed(
        samples,
        SESSION_TOKEN,
        lambda: client.post(
            "/admin/session-tokens",
            json={"appId": fx.app_id, "businessId": fx.business_id, "userId": fx.user_id},
            headers=fx.admin_headers,
        ),
    )
    # The token issued (and timed) above is the exchange's fresh subject token; its issuance
    # is not part of the exchange's time.
    subject_token = (await _expect(response, 201))["sessionToken"]

    fx.clock.advance(1)
    response = await _timed(
        samples,
        EXCHANGE,
        lambda: client.post(
            "/oauth/token",
            form={
                "grant_type": TOKEN_EXCHANGE,
                "subject_token": subject_token,
                "subject_token_type": JWT_TYPE,
            },
            headers=fx.basic_headers,
        ),
    )
    await _expect(response, 200)

    fx.clock.advance(1)
    response = await _timed(samples, JWKS, lambda: client.get("/.well-known/jwks.json"))
    keys = await _expect(response, 200)

    started = time.perf_counter()
    _verify_session_token(subject_token, keys)
    if samples is not None:
        samples.verification.append(time.perf_counter() - started)


async def _first_refresh_token(fx: Fixture) -> str:
    issued = await _expect(
        await fx.client.post(
            "/admin/session-tokens",
            json={"appId": fx.app_id, "businessId": fx.business_id, "userId": fx.user_id},
            headers=fx.admin_headers,
        ),
        201,
    )
    pair = await _expect(
        await fx.client.post(
            "/oauth/token",
            form={
                "grant_type": TOKEN_EXCHANGE,
                "subject_token": issued["sessionToken"],
                "subject_token_type": JWT_TYPE,
            },
            headers=fx.basic_headers,
        ),
        200,
    )
    token: str = pair["refresh_token"]
    return token


async def measure(backend: str, operations: int) -> Samples:
    """Provision a tenant on ``backend`` and time ``operations`` rounds of the four requests."""
    clock = FrozenClock()
    admin_token = f"lp_admin_{secrets.token_urlsafe(24)}"
    async with STORES[backend]() as store:
        platform = await _platform(store, clock, admin_token)
        client = create_app(platform).test_client()
        fx = await _provision(client, clock, admin_token)
        fx.refresh_token = await _first_refresh_token(fx)
        for _ in range(WARMUP_ROUNDS):
            await _round(fx, None)
        samples = Samples()
        for _ in range(operations):
            await _round(fx, samples)
    return samples


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def report(backend: str, samples: Samples, operations: int) -> None:
    rates = {op: len(s) / sum(s) for op, s in samples.seconds.items()}
    _write(f"{backend}: {operations} operations each, one request in flight")
    _write()
    _write("| operation       |   ops/s | mean ms |  p95 ms | vs refresh |")
    _write(f"|{'-' * 17}|{'-' * 8}:|{'-' * 8}:|{'-' * 8}:|{'-' * 11}:|")
    for op in OPERATIONS:
        seconds = samples.seconds[op]
        _write(
            f"| {op:<15} | {rates[op]:>7.0f} | {statistics.fmean(seconds) * 1000:>7.2f}"
            f" | {_p95(seconds) * 1000:>7.2f} | {rates[op] / rates[REFRESH]:>9.2f}x |"
        )
    _write()
    verification = statistics.fmean(samples.verification)
    exchange = statistics.fmean(samples.seconds[EXCHANGE])
    _write(
        f"ES256 verification of the session token alone: {verification * 1000:.2f} ms mean,"
        f" {verification / exchange:.0%} of an exchange"
    )
    _write()


def _operations(value: str) -> int:
    count = int(value)
    if not MIN_OPERATIONS <= count <= MAX_OPERATIONS:
        raise argparse.ArgumentTypeError(f"must be between {MIN_OPERATIONS} and {MAX_OPERATIONS}")
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--n", type=_operations, default=DEFAULT_OPERATIONS)
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]

    async def run() -> None:
        # One asyncio loop for the process, as ledgerport serve has: asyncpg runs on it.
        async with open_asyncio_loop():
            for backend in backends:
                report(backend, await measure(backend, args.n), args.n)

    trio.run(run)


if __name__ == "__main__":
    main()
