"""Test stores on both backends, and whether PostgreSQL can be used at all.

PostgreSQL tests use the server named by LEDGERPORT_TEST_POSTGRES (default
postgresql://postgres@127.0.0.1:5432/postgres); each store gets a database of its own, created
and dropped here. Where no server answers, those tests skip with the reason (asked once per
process, before any trio run, so the reason reaches the summary), unless
LEDGERPORT_REQUIRE_POSTGRES=1 (set by .ci/run), where they fail instead.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import trio
import trio_asyncio

from ledgerport.config import parse_database_url
from ledgerport.storage import Store, open_postgres, open_sqlite

POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REQUIRE_POSTGRES = os.environ.get("LEDGERPORT_REQUIRE_POSTGRES") == "1"
BACKENDS = ("sqlite", "postgresql")
_CONNECT_TIMEOUT = 5


@functools.cache
def postgres_unusable() -> str | None:
    """Why the PostgreSQL server cannot be used (its password masked), or None when it can."""

    async def probe() -> None:
        conn = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=_CONNECT_TIMEOUT)
        await conn.close()

    try:
        asyncio.run(probe())
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        shown = parse_database_url(POSTGRES_ADMIN_URL).redacted()
        return f"PostgreSQL at {shown} is not reachable: {type(exc).__name__}: {exc}"
    return None


async def admin_execute(sql: str) -> None:
    """Run ``sql`` on the server's admin database, through the current asyncio loop."""
    conn = await trio_asyncio.aio_as_trio(asyncpg.connect)(
        POSTGRES_ADMIN_URL, timeout=_CONNECT_TIMEOUT
    )
    try:
        await trio_asyncio.aio_as_trio(conn.execute)(sql)
    finally:
        await trio_asyncio.aio_as_trio(conn.close)()


def database_url(name: str) -> str:
    parts = urlsplit(POSTGRES_ADMIN_URL)
    return urlunsplit(parts._replace(path=f"/{name}"))


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """The URL of a new, empty PostgreSQL database, dropped afterwards."""
    name = f"ledgerport_test_{secrets.token_hex(6)}"
    await admin_execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        with trio.CancelScope(shield=True):
            await admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def open_test_store(backend: str, *, migrate: bool = True) -> AsyncIterator[Store]:
    """A store of its own on ``backend`` (a temporary SQLite file, or a fresh PostgreSQL
    database); PostgreSQL needs the caller's asyncio loop."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="ledgerport-test-") as directory:
            async with open_sqlite(os.path.join(directory, "test.db")) as store:
                if migrate:
                    await store.migrate()
                yield store
    else:
        async with fresh_database() as url, open_postgres(url, max_size=5) as store:
            if migrate:
                await store.migrate()
            yield store
