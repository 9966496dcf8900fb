"""Several processes serving one database share the limits and the lockouts: through the
database on PostgreSQL, through Redis when LEDGERPORT_REDIS_URL is set. Each "process" here is a
Platform and application of its own over its own connection pool (and Redis client).

Spec: Limits > Rate limits ("Failed client authentications lock out that IP and client pair");
contract.md: Lockout.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import pytest
import trio

from ledgerport import auth, catalog
from ledgerport.clock import FrozenClock
from ledgerport.config import ConfigError
from ledgerport.http import create_app
from ledgerport.keys import Keyring
from ledgerport.platform import Platform
from ledgerport.storage import StorageUnavailable, Store, open_postgres

from ..platforms import build_platform
from ..stores import REDIS_URL
from .oauth_helpers import basic, full_grant, make_world

TIMEOUT = 90
ADMIN_TOKEN = "lp_admin_shared-limits-0123456789abcdef"
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def environment(**more: str) -> dict[str, str]:
    """A deployment's configuration; a root key of its own keeps its Redis counts apart."""
    return {
        "LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN,
        "LEDGERPORT_SECRET_KEY": secrets.token_urlsafe(32),
        "LEDGERPORT_ENV": "development",
        "LEDGERPORT_BASE_URL": "http://api.ledgerport.test",
        "LEDGERPORT_AUTH_URL": "http://app.ledgerport.test",
        "LEDGERPORT_PASSWORD_HASHING": "fast",
        **more,
    }


async def test_the_platform_counts_where_the_store_says(store: Store, clock: FrozenClock) -> None:
    with trio.fail_after(TIMEOUT):
        platform = await build_platform(store, clock, environment())
    expected = auth.MemoryRateLimiter if store.kind == "sqlite" else auth.SettlingRateLimiter
    assert isinstance(platform.limiter, expected)
    settling = platform.settling_limiter()
    assert (settling is platform.limiter) == (store.kind == "postgresql")
    if settling is not None:
        await settling.take(auth.Budget(catalog.RATE_LIMIT_API_PER_IP, ("203.0.113.7",)))
        assert b"ledgerport_rate_limit_views 1.0" in platform.metrics.render(), "watched"


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
async def test_only_the_shared_counts_are_kept_out_of_the_write_ahead_log(
    store: Store, clock: FrozenClock, keyring: Keyring
) -> None:
    """Migration 0022: ``rate_limits``, and no other table, is unlogged (its counts commit
    without a WAL flush, and a crash of PostgreSQL forgets them), and it counts as before."""
    rows = await store.autocommit.fetch(
        "SELECT relname, relpersistence::text AS relpersistence FROM pg_class"
        " WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace"
    )
    persistence = {row["relname"]: row["relpersistence"] for row in rows}

    assert persistence.pop("rate_limits") == "u"
    assert persistence
    assert set(persistence.values()) == {"p"}
    limiter = auth.StoreRateLimiter(store, clock, keyring)
    budget = auth.Budget(catalog.RATE_LIMIT_REGISTER_PER_IP, ("203.0.113.9",))
    for _ in range(catalog.RATE_LIMIT_REGISTER_PER_IP.limit):
        assert (await limiter.take(budget)).refused_by is None
    assert (await limiter.take(budget)).refused_by == catalog.RATE_LIMIT_REGISTER_PER_IP


async def test_redis_when_configured(store: Store, clock: FrozenClock, redis_url: str) -> None:
    with trio.fail_after(TIMEOUT):
        platform = await build_platform(store, clock, environment(LEDGERPORT_REDIS_URL=redis_url))
    assert isinstance(platform.limiter, auth.RedisRateLimiter)


async def test_a_start_without_its_redis_fails(store: Store, clock: FrozenClock) -> None:
    """Limits that cannot be counted stop the start (exit 1, like an unreachable database)
    instead of serving unlimited; an option redis-py cannot use is a configuration error."""
    env = environment()
    with trio.fail_after(TIMEOUT), pytest.raises(StorageUnavailable, match="redis"):
        await build_platform(store, clock, {**env, "LEDGERPORT_REDIS_URL": "redis://127.0.0.1:1/0"})
    unusable = "redis://127.0.0.1:6379/0?socket_timeout=soon"
    with trio.fail_after(TIMEOUT), pytest.raises(ConfigError, match="LEDGERPORT_REDIS_URL"):
        await build_platform(store, clock, {**env, "LEDGERPORT_REDIS_URL": unusable})


async def two_processes(
    stack: AsyncExitStack, url: str, clock: FrozenClock, env: dict[str, str]
) -> tuple[Any, Any, list[Any]]:
    """Two applications over one PostgreSQL database, each with its own pool and Platform;
    and their limiters, in the same order."""
    platforms: list[Platform] = []
    for _ in range(2):
        store = await stack.enter_async_context(open_postgres(url, max_size=3))
        await store.migrate()
        platforms.append(await build_platform(store, clock, env))
    first, second = (create_app(p).test_client() for p in platforms)
    return first, second, [p.limiter for p in platforms]


async def share_the_limits(
    first: Any, second: Any, clock: FrozenClock, settle: Callable[[], Awaitable[None]] | None = None
) -> None:
    """One app's calls in one business through both processes draw on one budget of 300, and a
    lockout made through one process refuses the client at the other.

    ``settle``: the processes count in themselves and settle (``SettlingRateLimiter``),
    here after every call, as when calls come more than a settlement apart. Then each
    process's RateLimit-Remaining misses at most the other's last call, and the budget still
    allows exactly 300: near its end every call is counted in the database."""
    world = await make_world(first, ADMIN_HEADERS)
    assert world.client_secret is not None
    tokens = await full_grant(first, world)
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    limit = catalog.RATE_LIMIT_APP_PER_BUSINESS.limit
    for i in range(limit):
        response = await (first if i % 2 else second).get("/invoices", headers=bearer)
        assert response.status_code == 200, i
        remaining = int(response.headers["RateLimit-Remaining"])
        if settle is None:
            assert remaining == limit - i - 1
        else:
            assert limit - i - 1 <= remaining <= limit - i, i
            await settle()
    for process in (first, second):
        response = await process.get("/invoices", headers=bearer)
        assert response.status_code == 429
        assert (await response.get_json())["code"] == "APP_RATE_LIMITED"
        assert response.headers["Retry-After"] == "60"

    wrong = basic(world.client_id, "wrong-secret")
    form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    for attempt in range(catalog.LOCKOUT_FAILURES):
        response = await first.post("/oauth/token", form=form, headers=wrong)
        assert response.status_code == 401, attempt  # the tenth still answers 401
    right = basic(world.client_id, world.client_secret)
    clock.advance(15)
    response = await second.post("/oauth/token", form=form, headers=right)
    assert response.status_code == 429, await response.get_json()
    assert response.headers["Retry-After"] == "45"
    clock.advance(45)
    response = await second.post("/oauth/token", form=form, headers=right)
    assert response.status_code == 200, await response.get_json()


@pytest.mark.parametrize(
    "counted", ["where the store says", pytest.param("in Redis", marks=pytest.mark.redis)]
)
async def test_a_429_never_asks_more_than_its_window(
    store: Store, clock: FrozenClock, counted: str
) -> None:
    """contract.md: a Retry-After never exceeds the window of the limit that answered, however
    far into a second the calls came (a per-minute limit on PostgreSQL once answered 61): the
    data API's 429, the OAuth endpoints' 429 past a per-IP limit, and a locked pair's, in the
    process (SQLite), in the database (PostgreSQL) and in Redis; and the calls are let through
    again when the Retry-After ends."""
    more = {"LEDGERPORT_REDIS_URL": REDIS_URL} if counted == "in Redis" else {}
    with trio.fail_after(TIMEOUT):
        platform = await build_platform(store, clock, environment(**more))
        client = create_app(platform).test_client()
        world = await make_world(client, ADMIN_HEADERS)
        assert world.client_secret is not None
        bearer = {"Authorization": f"Bearer {(await full_grant(client, world))['access_token']}"}
        clock.advance(0.25)
        budget = auth.Budget(catalog.RATE_LIMIT_APP_PER_BUSINESS, (world.app_id, world.business_id))
        while (await platform.limiter.take(budget)).allowed:
            pass
        refused = await client.get("/invoices", headers=bearer)
        assert refused.status_code == 429, await refused.get_json()
        assert refused.headers["Retry-After"] == "60"
        assert refused.headers["RateLimit-Reset"] == "60"
        clock.advance(60)
        assert (await client.get("/invoices", headers=bearer)).status_code == 200

        clock.advance(0.5)
        unauthenticated = catalog.RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP.limit
        for _ in range(unauthenticated):
            response = await client.post("/oauth/revoke", form={"token": "x"})
            assert response.status_code == 401
        refused = await client.post("/oauth/revoke", form={"token": "x"})
        assert refused.status_code == 429, await refused.get_json()
        assert refused.headers["Retry-After"] == "60"
        clock.advance(60)
        assert (await client.post("/oauth/revoke", form={"token": "x"})).status_code == 401

        clock.advance(0.75)
        wrong = basic(world.client_id, "wrong-secret")
        for _ in range(catalog.LOCKOUT_FAILURES):
            await client.post("/oauth/introspect", form={"token": "x"}, headers=wrong)
        right = basic(world.client_id, world.client_secret)
        locked = await client.post("/oauth/introspect", form={"token": "x"}, headers=right)
        assert locked.status_code == 429, await locked.get_json()
        assert locked.headers["Retry-After"] == "60"
        clock.advance(60)
        response = await client.post("/oauth/introspect", form={"token": "x"}, headers=right)
        assert response.status_code == 200


async def test_two_processes_over_postgres_share_limits_and_lockouts(
    postgres_url: str, clock: FrozenClock
) -> None:
    async with AsyncExitStack() as stack:
        with trio.fail_after(TIMEOUT):
            first, second, limiters = await two_processes(stack, postgres_url, clock, environment())
            assert all(isinstance(limiter, auth.SettlingRateLimiter) for limiter in limiters)

            async def settle() -> None:
                for limiter in limiters:
                    await limiter.settle()

            await share_the_limits(first, second, clock, settle)


async def test_two_processes_with_redis_share_limits_and_lockouts(
    postgres_url: str, redis_url: str, clock: FrozenClock
) -> None:
    async with AsyncExitStack() as stack:
        with trio.fail_after(TIMEOUT):
            first, second, limiters = await two_processes(
                stack, postgres_url, clock, environment(LEDGERPORT_REDIS_URL=redis_url)
            )
            assert isinstance(limiters[0], auth.RedisRateLimiter)
            await share_the_limits(first, second, clock)


async def test_a_refresh_refused_by_its_limits_rotates_nothing(
    postgres_url: str, clock: FrozenClock
) -> None:
    """On PostgreSQL a good refresh token is rotated in the statement that counts the request
    (or, counted in the process, that looks at the lock): a refresh refused by a budget (429)
    leaves the token as it was, and it rotates once the budget has room again, once only."""
    async with AsyncExitStack() as stack:
        with trio.fail_after(TIMEOUT):
            first, second, limiters = await two_processes(stack, postgres_url, clock, environment())
            world = await make_world(first, ADMIN_HEADERS)
            assert world.client_secret is not None
            tokens = await full_grant(first, world)
            right = basic(world.client_id, world.client_secret)
            form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
            # The client's budget across IPs used up by other token requests.
            budget = auth.Budget(catalog.RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT, (world.client_id,))
            taken = 0
            # Through the process that counted them: near a limit a process counts in the
            # database (the other one's view of the budget is settled only once it counts).
            while (await limiters[0].take(budget)).allowed:
                taken += 1
            assert taken == catalog.RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT.limit - 1
            refused = await first.post("/oauth/token", form=form, headers=right)
            assert refused.status_code == 429, await refused.get_json()
            clock.advance(60)
            rotated = await first.post("/oauth/token", form=form, headers=right)
            assert rotated.status_code == 200, await rotated.get_json()
            pair = await rotated.get_json()
            assert pair["refresh_token"] != tokens["refresh_token"]
            again = await second.post("/oauth/token", form=form, headers=right)
            assert again.status_code == 400
            assert (await again.get_json())["error"] == "invalid_grant"
            bearer = {"Authorization": f"Bearer {pair['access_token']}"}
            reused = await second.get("/invoices", headers=bearer)
            assert reused.status_code == 401, "a replayed token burns its family"
