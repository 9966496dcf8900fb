"""Shared fixtures: a migrated store on each backend, a platform and an HTTP test client.

The ``store`` fixture is parametrized over SQLite and PostgreSQL (see ``stores.py`` for where the
PostgreSQL databases come from, and how the tests skip, or fail in CI, without a server).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio_asyncio

from ledgerport.auth import Keyring
from ledgerport.clock import FrozenClock
from ledgerport.http import create_app
from ledgerport.platform import Platform
from ledgerport.storage import Store

from .platforms import build_platform
from .stores import REQUIRE_POSTGRES, fresh_database, open_test_store, postgres_unusable

ADMIN_TOKEN = "lp_admin_test-token-0123456789abcdef"
SECRET_KEY = "test-secret-key-0123456789abcdef0123456789"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """PostgreSQL tests skip with the reason when no server answers (fail when it is
    required). Decided here, outside the test's trio run, so the reason is reported."""
    needs_postgres = item.get_closest_marker("postgres") is not None or "postgres_url" in getattr(
        item, "fixturenames", ()
    )
    if not needs_postgres:
        return
    reason = postgres_unusable()
    if reason is None:
        return
    if REQUIRE_POSTGRES:
        pytest.fail(f"{reason} (LEDGERPORT_REQUIRE_POSTGRES=1)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
async def asyncio_loop() -> AsyncIterator[trio_asyncio.TrioEventLoop]:
    """The test's one asyncio loop, as ``ledgerport serve`` enters one at its top: asyncpg runs
    on it. pytest-trio shares one context between fixtures and the test, so all see it."""
    async with trio_asyncio.open_loop() as loop:
        yield loop


@pytest.fixture
async def postgres_url(asyncio_loop: object) -> AsyncIterator[str]:
    """The URL of a fresh, empty PostgreSQL database, dropped after the test."""
    async with fresh_database() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def empty_store(request: pytest.FixtureRequest, asyncio_loop: object) -> AsyncIterator[Store]:
    """An unmigrated store on each backend."""
    async with open_test_store(request.param, migrate=False) as store:
        yield store


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
