"""Cost of an Events API page in a business of 1,000 events against one of 1,000,000.

Usage::

    .venv/bin/python bench/events_paging.py [--backend sqlite|postgres|both] [--n N] [--events E]

For each backend the script provisions, through the operator API, an owner, a confidential app
(scopes ``events:read``, ``invoices:read``, ``customers:read``, ``payments:read``) and two
businesses where a managed install grants it all four, and takes an access token for each
installation from a session-token exchange. It then writes the two businesses' event logs
directly with one bulk SQL statement each: ``--small`` (1,000) events in the small business and
``--events`` (1,000,000) in the large one, the catalog's 45 event types in turn with their sample
payloads (the app events recorded for the app), all within the retention period. The app sees
20 of the 45 types: the invoice, customer and payment events and its own app events.

Each round then sends, one request in flight, through the HTTP application in process (quart's
test client over the real store, no network), ``GET /events?limit=100`` in both businesses for
three pages, and after each request times the same page through the feed's domain call alone
(``books.feed_page`` in a transaction of its own), which leaves out what every data API call
pays (token, limits, scopes) and shows the query's own cost:

- ``start``: after the business's first event (the second page of a full catch-up);
- ``deep``: after the event 300 from the end (a client nearly caught up);
- ``filtered``: ``types=invoice.paid`` (one event in 45) after the first event, 20 a page (the
  small business holds 22 of them after its first event, so both pages are full).

The six requests run interleaved, so load from other processes falls on all of them alike; the
figures to compare are the ratios of the large business to the small one, measured in the same
run. PostgreSQL runs in a scratch database created for the run and dropped afterwards (server
named by LEDGERPORT_BENCH_POSTGRES, default postgresql://postgres@127.0.0.1:5432/postgres); after
the bulk insert it is analyzed, as autovacuum soon does after a large insert, but not vacuumed, so
its index scans still visit the table. SQLite gets no ANALYZE, as in service.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import asyncpg
import trio
import trio_asyncio

from ledgerport import books, catalog
from ledgerport.clock import FrozenClock
from ledgerport.config import load
from ledgerport.http import create_app
from ledgerport.platform import Platform, bootstrap
from ledgerport.storage import Store, open_asyncio_loop, open_postgres, open_sqlite

POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DEFAULT_ROUNDS = 200
MIN_ROUNDS = 20
MAX_ROUNDS = 1000
"""Upper bound on --n: each round moves the platform's clock 3 s on (see ``_round``), and the
access tokens live an hour."""
DEFAULT_EVENTS = 1_000_000
MIN_EVENTS = 10_000
MAX_EVENTS = 2_000_000
"""Upper bound on --events: the PostgreSQL log alone takes about 1 GB on disk at that size."""
DEFAULT_SMALL = 1000
WARMUP_ROUNDS = 10
PAGE = catalog.EVENTS_PAGE_MAX
DEEP_FROM_END = 300
"""Far enough from the end that a full page of visible events follows (20 types in 45 visible)."""
FILTER = "invoice.paid"
FILTERED_PAGE = 20
SCOPES = ("events:read", "invoices:read", "customers:read", "payments:read")
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
SIZES = ("small", "large")
PAGES = ("start", "deep", "filtered")
WAYS = ("http", "query")
CLOCK_STEP = 0.5
"""Seconds the clock moves before each request: 300 calls a minute of the app in a business are
allowed, and each business gets three requests in every three seconds."""


def _write(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@dataclass
class Business:
    """One provisioned business, its app's access token there and its events' ids."""

    id: str
    headers: dict[str, str]
    size: int
    first_event: str = ""
    deep_event: str = ""


@dataclass
class Samples:
    """Seconds by (way, size, page): ``http`` is the whole request, ``query`` the feed's
    domain call alone (``books.feed_page`` in a transaction of its own)."""

    seconds: dict[tuple[str, str, str], list[float]] = field(
        default_factory=lambda: {
            (way, size, page): [] for way in WAYS for size in SIZES for page in PAGES
        }
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


async def _provision(
    client: Any, admin_token: str, sizes: dict[str, int]
) -> tuple[str, dict[str, Business]]:
    """The app and, by size, its businesses with an access token each; answers the app's id."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    user = await _expect(
        await client.post(
            "/admin/users",
            json={"email": "owner@bench.example", "password": secrets.token_urlsafe(16)},
            headers=admin,
        ),
        201,
    )
    app = await _expect(
        await client.post(
            "/admin/apps",
            json={
                "name": "Bench Feed",
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
    basic = {"Authorization": "Basic " + _basic(app["clientId"], app["clientSecret"])}
    businesses = {}
    for size, count in sizes.items():
        business = await _expect(
            await client.post("/admin/businesses", json={"name": size}, headers=admin), 201
        )
        await _expect(
            await client.put(
                f"/admin/businesses/{business['id']}/members/{user['id']}",
                json={"role": "owner"},
                headers=admin,
            ),
            200,
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
        issued = await _expect(
            await client.post(
                "/admin/session-tokens",
                json={"appId": app["id"], "businessId": business["id"], "userId": user["id"]},
                headers=admin,
            ),
            201,
        )
        tokens = await _expect(
            await client.post(
                "/oauth/token",
                form={
                    "grant_type": TOKEN_EXCHANGE,
                    "subject_token": issued["sessionToken"],
                    "subject_token_type": JWT_TYPE,
                },
                headers=basic,
            ),
            200,
        )
        headers = {"Authorization": f"Bearer {tokens['access_token']}"}
        businesses[size] = Business(business["id"], headers, count)
    return app["id"], businesses


def _basic(client_id: str, secret: str) -> str:
    return base64.b64encode(f"{client_id}:{secret}".encode()).decode()


_POSTGRES_FILL = """
INSERT INTO events (id, business_id, app_id, type, api_version, data, created_at)
SELECT 'evt_' || lpad(to_hex($1::bigint + g), 24, '0'), $2,
    CASE WHEN ($3::boolean[])[1 + (g - 1) % $4] THEN $5 END,
    ($6::text[])[1 + (g - 1) % $4], $7, ($8::text[])[1 + (g - 1) % $4], $9 + g * $10
FROM generate_series(1, $11::bigint) AS g
"""
_SQLITE_FILL = """
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < $11)
INSERT INTO events (id, business_id, app_id, type, api_version, data, created_at)
SELECT printf('evt_%024x', $1 + n), $2,
    CASE WHEN json_extract($3, '$[' || ((n - 1) % $4) || ']') THEN $5 END,
    json_extract($6, '$[' || ((n - 1) % $4) || ']'), $7,
    json_extract($8, '$[' || ((n - 1) % $4) || ']'), $9 + n * $10
FROM g
"""
"""One business's log in one statement: event ``n`` has id ``evt_`` and the hexadecimal of
offset + n, the catalog's type number (n - 1) mod 45 with its sample, and is recorded for the
app when it is an app event."""


def _event_id(offset: int, n: int) -> str:
    return f"evt_{offset + n:024x}"


async def _fill(
    store: Store, clock: FrozenClock, app_id: str, business: Business, offset: int
) -> None:
    """Write ``business.size`` events in the business, spread over the day before now."""
    own = [event.audience == "app" for event in catalog.EVENTS]
    names = [event.name for event in catalog.EVENTS]
    samples = [json.dumps(event.sample, separators=(",", ":")) for event in catalog.EVENTS]
    start, step = clock.now() - 86400, 86400 / (business.size + 1)
    shared = (offset, business.id)
    if store.kind == "postgresql":
        sql, arrays = _POSTGRES_FILL, (own, names, samples)
    else:
        sql, arrays = _SQLITE_FILL, tuple(json.dumps(values) for values in (own, names, samples))
    async with store.transaction() as tx:
        await tx.execute(
            sql,
            *shared,
            arrays[0],
            len(names),
            app_id,
            arrays[1],
            catalog.CURRENT_API_VERSION,
            arrays[2],
            start,
            step,
            business.size,
        )
    if store.kind == "postgresql":
        # The statistics autovacuum gathers soon after a large insert.
        async with store.transaction() as tx:
            await tx.execute("ANALYZE events")
    business.first_event = _event_id(offset, 1)
    business.deep_event = _event_id(offset, business.size - DEEP_FROM_END)


def _page_params(business: Business, page: str) -> tuple[str, list[str] | None, int]:
    """The page's ``after``, ``types`` and ``limit``."""
    after = business.deep_event if page == "deep" else business.first_event
    if page == "filtered":
        return after, [FILTER], FILTERED_PAGE
    return after, None, PAGE


def _url(business: Business, page: str) -> str:
    after, types, limit = _page_params(business, page)
    params = [("limit", str(limit)), ("after", after)]
    if types is not None:
        params.append(("types", ",".join(types)))
    return f"/events?{urlencode(params)}"


def _check(business: Business, page: str, body: Any) -> None:
    """The page holds what the log says it must, so a fast answer is a right one."""
    count, types = len(body["data"]), {event["type"] for event in body["data"]}
    full = FILTERED_PAGE if page == "filtered" else PAGE
    if count != full or body["next"] is None or (page == "filtered" and types != {FILTER}):
        raise SystemExit(f"{page} page of {business.size}: {count} events of {sorted(types)}")


async def _round(
    client: Any,
    store: Store,
    clock: FrozenClock,
    app_id: str,
    businesses: dict[str, Business],
    samples: Samples | None,
) -> None:
    """Each page in each business through HTTP, then the feed's domain call alone, the clock
    moved on before each request."""
    for page in PAGES:
        for size in SIZES:
            business = businesses[size]
            clock.advance(CLOCK_STEP)
            started = time.perf_counter()
            response = await client.get(_url(business, page), headers=business.headers)
            elapsed = time.perf_counter() - started
            body = await _expect(response, 200)
            if samples is None:
                _check(business, page, body)
            else:
                samples.seconds["http", size, page].append(elapsed)
            after, types, limit = _page_params(business, page)
            started = time.perf_counter()
            async with store.transaction() as tx:
                await books.feed_page(
                    tx,
                    now=clock.now(),
                    business_id=business.id,
                    app_id=app_id,
                    app_scopes=SCOPES,
                    installation_scopes=SCOPES,
                    after=after,
                    types=types,
                    limit=limit,
                )
            if samples is not None:
                samples.seconds["query", size, page].append(time.perf_counter() - started)


async def measure(backend: str, rounds: int, sizes: dict[str, int]) -> tuple[Samples, float]:
    """Provision and fill both businesses on ``backend``, then time ``rounds`` rounds; answers
    the samples and the seconds the bulk insert took."""
    clock = FrozenClock()
    admin_token = f"lp_admin_{secrets.token_urlsafe(24)}"
    async with STORES[backend]() as store:
        platform = await _platform(store, clock, admin_token)
        client = create_app(platform).test_client()
        app_id, businesses = await _provision(client, admin_token, sizes)
        started = time.perf_counter()
        offset = 0
        for size in SIZES:
            await _fill(store, clock, app_id, businesses[size], offset)
            offset += businesses[size].size
        filled = time.perf_counter() - started
        for _ in range(WARMUP_ROUNDS):
            await _round(client, store, clock, app_id, businesses, None)
        samples = Samples()
        for _ in range(rounds):
            await _round(client, store, clock, app_id, businesses, samples)
    return samples, filled


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


_TITLES = {
    "http": "GET /events through the HTTP application",
    "query": "the feed's domain call alone (books.feed_page in its own transaction)",
}


def report(
    backend: str, samples: Samples, rounds: int, sizes: dict[str, int], filled: float
) -> None:
    small, large = sizes["small"], sizes["large"]
    _write(
        f"{backend}: {rounds} rounds, one request in flight, pages of {PAGE}"
        f" ({FILTERED_PAGE} filtered); {small:,} and {large:,} events"
        f" (bulk insert {filled:.1f} s)"
    )
    for way in WAYS:
        _write()
        _write(f"{_TITLES[way]}:")
        _write()
        _write(
            f"| page     | {'mean ms at ' + format(small, ','):>21} | p95 ms "
            f"| {'mean ms at ' + format(large, ','):>21} | p95 ms | large / small |"
        )
        _write(f"|{'-' * 10}|{'-' * 22}:|{'-' * 7}:|{'-' * 22}:|{'-' * 7}:|{'-' * 14}:|")
        for page in PAGES:
            low, high = samples.seconds[way, "small", page], samples.seconds[way, "large", page]
            _write(
                f"| {page:<8} | {statistics.fmean(low) * 1000:>21.2f}"
                f" | {_p95(low) * 1000:>6.2f} | {statistics.fmean(high) * 1000:>21.2f}"
                f" | {_p95(high) * 1000:>6.2f}"
                f" | {statistics.fmean(high) / statistics.fmean(low):>12.2f}x |"
            )
    _write()


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        count = int(value)
        if not low <= count <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}")
        return count

    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--n", type=_bounded(MIN_ROUNDS, MAX_ROUNDS), default=DEFAULT_ROUNDS)
    parser.add_argument("--events", type=_bounded(MIN_EVENTS, MAX_EVENTS), default=DEFAULT_EVENTS)
    parser.add_argument(
        "--small", type=_bounded(DEEP_FROM_END + PAGE, MIN_EVENTS), default=DEFAULT_SMALL
    )
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    sizes = {"small": args.small, "large": args.events}

    async def run() -> None:
        # One asyncio loop for the process, as ledgerport serve has: asyncpg runs on it.
        async with open_asyncio_loop():
            for backend in backends:
                samples, filled = await measure(backend, args.n, sizes)
                report(backend, samples, args.n, sizes, filled)

    trio.run(run)


if __name__ == "__main__":
    main()
