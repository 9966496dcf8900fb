"""Shared fixtures: a migrated store on each backend, a platform and an HTTP test client.

The ``store`` fixture is parametrized over SQLite and PostgreSQL. PostgreSQL tests use the server
named by LEDGERPORT_TEST_POSTGRES (default postgresql://postgres@127.0.0.1:5432/postgres); each test
gets a database of its own, created and dropped here. Where no server answers they skip with the
reason, unless LEDGERPORT_REQUIRE_POSTGRES=1 (set by .ci/run), where they fail instead.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import trio
import trio_asyncio

from ledgerport.auth import Keyring
from ledgerport.clock import FrozenClock
from ledgerport.http import create_app
from ledgerport.platform import Platform
from ledgerport.storage import Store, open_postgres, open_sqlite

from .platforms import build_platform

POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REQUIRE_POSTGRES = os.environ.get("LEDGERPORT_REQUIRE_POSTGRES") == "1"
ADMIN_TOKEN = "lp_admin_test-token-0123456789abcdef"
SECRET_KEY = "test-secret-key-0123456789abcdef0123456789"


async def _admin_execute(sql: str) -> None:
    """Run ``sql`` on the server's admin database, through the test's asyncio loop."""
    conn = await trio_asyncio.aio_as_trio(asyncpg.connect)(POSTGRES_ADMIN_URL, timeout=5)
    try:
        await trio_asyncio.aio_as_trio(conn.execute)(sql)
    finally:
        await trio_asyncio.aio_as_trio(conn.close)()


def _database_url(name: str) -> str:
    parts = urlsplit(POSTGRES_ADMIN_URL)
    return urlunsplit(parts._replace(path=f"/{name}"))


async def _create_database() -> str:
    name = f"ledgerport_test_{secrets.token_hex(6)}"
    try:
        await _admin_execute(f'CREATE DATABASE "{name}"')
    except (OSError, asyncpg.PostgresError) as exc:
        if REQUIRE_POSTGRES:
            pytest.fail(f"PostgreSQL at {POSTGRES_ADMIN_URL} is required but failed: {exc}")
        pytest.skip(f"PostgreSQL at {POSTGRES_ADMIN_URL} is not reachable: {exc}")
    return name


async def _drop_database(name: str) -> None:
    with trio.CancelScope(shield=True):
        await _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
async def asyncio_loop() -> AsyncIterator[trio_asyncio.TrioEventLoop]:
    """The test's one asyncio loop, as ``ledgerport serve`` enters one at its top: asyncpg runs
    on it. pytest-trio shares one context between fixtures and the test, so all see it."""
    async with trio_asyncio.open_loop() as loop:
        yield loop


@pytest.fixture
async def postgres_url(asyncio_loop: object) -> AsyncIterator[str]:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    name = await _create_database()
    try:
        yield _database_url(name)
    finally:
        await _drop_database(name)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def empty_store(
    request: pytest.FixtureRequest, tmp_path: object, asyncio_loop: object
) -> AsyncIterator[Store]:
    """An unmigrated store on each backend."""
    if request.param == "sqlite":
        async with open_sqlite(str(tmp_path) + "/test.db") as store:  # type: ignore[operator]
            yield store
    else:
        name = await _create_database()
        try:
            async with open_postgres(_database_url(name), max_size=5) as store:
                yield store
        finally:
            await _drop_database(name)


@pytest.fixture
async def store(empty_store: Store) -> Store:
    """A migrated store on each backend."""
    await empty_store.migrate()
    return empty_store


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def keyring() -> Keyring:
    return Keyring(SECRET_KEY)


@pytest.fixture
async def platform(store: Store, clock: FrozenClock) -> Platform:
    return await build_platform(
        store,
        clock,
        {
            "LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN,
            "LEDGERPORT_SECRET_KEY": SECRET_KEY,
            "LEDGERPORT_ENV": "development",
            "LEDGERPORT_BASE_URL": "http://api.ledgerport.test",
            "LEDGERPORT_AUTH_URL": "http://app.ledgerport.test",
            # Users are created and signed in by the hundred: cheap Argon2 parameters (the
            # standard profile costs about 0.4 s a hash). Served processes keep the standard.
            "LEDGERPORT_PASSWORD_HASHING": "fast",
        },
    )


@pytest.fixture
def app(platform: Platform):  # type: ignore[no-untyped-def]
    return create_app(platform)


@pytest.fixture
def client(app):  # type: ignore[no-untyped-def]
    return app.test_client()


@pytest.fixture
def admin_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {ADMIN_TOKEN}"}
