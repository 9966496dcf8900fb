"""Test stores on both backends, and whether PostgreSQL can be used at all.

PostgreSQL tests use the server named by LEDGERPORT_TEST_POSTGRES (default
postgresql://postgres@127.0.0.1:5432/postgres); each store gets a database of its own: an
unmigrated one is created and dropped, a migrated one is emptied for the next test and dropped
when the session ends. Where no server answers, those tests skip with the reason (asked once per
process, before any trio run, so the reason reaches the summary), unless
LEDGERPORT_REQUIRE_POSTGRES=1 (set by .ci/run), where they fail instead.

Redis tests use LEDGERPORT_TEST_REDIS (default redis://127.0.0.1:6379/0) and skip with the
reason where it does not answer; nothing requires Redis. They share its database: each test
counts under a root key of its own, which the limiter's stored keys are hashed with.
"""

from __future__ import annotations

import asyncio
import functools
import os
import secrets
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import redis
import trio
import trio_asyncio

from ledgerport.config import mask_url_password, parse_database_url
from ledgerport.storage import Store, Transaction, WalSync, open_postgres, open_sqlite

POSTGRES_ADMIN_URL = os.environ.get(
    "LEDGERPORT_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REQUIRE_POSTGRES = os.environ.get("LEDGERPORT_REQUIRE_POSTGRES") == "1"
REDIS_URL = os.environ.get("LEDGERPORT_TEST_REDIS", "redis://127.0.0.1:6379/0")
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


@functools.cache
def redis_unusable() -> str | None:
    """Why the Redis server cannot be used (its password masked), or None when it can."""
    client = redis.Redis.from_url(
        REDIS_URL, socket_connect_timeout=_CONNECT_TIMEOUT, socket_timeout=_CONNECT_TIMEOUT
    )
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        shown = mask_url_password(REDIS_URL)
        return f"Redis at {shown} is not reachable: {type(exc).__name__}: {exc}"
    finally:
        client.close()
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


async def _create_database() -> str:
    """A new database; its commits do not wait for the disk (a test needs no durability
    against power loss, and the suite's thousands of commits would wait on fsync)."""
    name = f"ledgerport_test_{secrets.token_hex(6)}"
    await admin_execute(f'CREATE DATABASE "{name}"')
    await admin_execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    return name


@asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """The URL of a new, empty PostgreSQL database, dropped afterwards."""
    name = await _create_database()
    try:
        yield database_url(name)
    finally:
        with trio.CancelScope(shield=True):
            await admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_IDLE_MIGRATED: list[tuple[str, frozenset[str]]] = []
"""Migrated databases this process made and no test uses now, with the tables migration made."""


async def _on_database(name: str, sql: Sequence[str]) -> list[str]:
    """Run ``sql`` on database ``name``; answers the first column of the last statement's rows."""
    conn = await trio_asyncio.aio_as_trio(asyncpg.connect)(
        database_url(name), timeout=_CONNECT_TIMEOUT
    )
    try:
        rows: list[str] = []
        for statement in sql:
            rows = [r[0] for r in await trio_asyncio.aio_as_trio(conn.fetch)(statement)]
        return rows
    finally:
        await trio_asyncio.aio_as_trio(conn.close)()


_TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
_SEQUENCES = "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"


async def _emptied(name: str, tables: frozenset[str]) -> None:
    """Database ``name`` as migration left it: no connection of an earlier test, no table a
    test added, no row, every sequence from 1. One connection does it all.

    DELETE, not TRUNCATE: a test leaves a few rows, and TRUNCATE gives each of some fifty
    tables new files (0.45 s a test, against a few hundredths). The foreign keys' triggers are
    off for the session (it is the server's superuser), so the order does not matter."""
    conn = await trio_asyncio.aio_as_trio(asyncpg.connect)(
        database_url(name), timeout=_CONNECT_TIMEOUT
    )
    run = trio_asyncio.aio_as_trio(conn.execute)
    fetch = trio_asyncio.aio_as_trio(conn.fetch)
    try:
        await run(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            f" WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        present = {row[0] for row in await fetch(_TABLES)}
        added = sorted(present - tables)
        if added:
            await run(";\n".join(f'DROP TABLE IF EXISTS "{t}" CASCADE' for t in added))
        sequences = [row[0] for row in await fetch(_SEQUENCES)]
        statements = [
            "SET session_replication_role = replica",
            *(f'DELETE FROM "{t}"' for t in sorted(tables - {"schema_migrations"})),
            *(f'ALTER SEQUENCE "{s}" RESTART' for s in sequences),
        ]
        await run(";\n".join(statements))
    finally:
        await trio_asyncio.aio_as_trio(conn.close)()


@asynccontextmanager
async def migrated_database() -> AsyncIterator[str]:
    """The URL of a migrated PostgreSQL database without rows. Creating and migrating a
    database costs about a second, so each process keeps the ones it made and empties one for
    the next test (see :func:`drop_idle_databases`)."""
    if _IDLE_MIGRATED:
        name, tables = _IDLE_MIGRATED.pop()
        await _emptied(name, tables)
    else:
        name = await _create_database()
        async with open_postgres(database_url(name), max_size=1) as store:
            await store.migrate()
        tables = frozenset(await _on_database(name, [_TABLES]))
    try:
        yield database_url(name)
    finally:
        _IDLE_MIGRATED.append((name, tables))


def drop_idle_databases() -> None:
    """Drop the databases :func:`migrated_database` kept (at the end of the test session)."""
    names = [name for name, _ in _IDLE_MIGRATED]
    _IDLE_MIGRATED.clear()
    if not names:
        return

    async def drop() -> None:
        conn = await asyncpg.connect(POSTGRES_ADMIN_URL, timeout=_CONNECT_TIMEOUT)
        try:
            for name in names:
                await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())


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
    elif migrate:
        async with migrated_database() as url, open_postgres(url, max_size=5) as store:
            yield store
    else:
        async with fresh_database() as url, open_postgres(url, max_size=5) as store:
            yield store


async def end_listening_backends(other: Store) -> int:
    """End, through ``other``, every other backend of its database whose last statement was a
    LISTEN (as a restart of PostgreSQL or a cut connection ends them); answers how many."""
    async with other.transaction() as tx:
        ended = await tx.fetchval(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND query LIKE 'LISTEN %') AS ended"
        )
    return int(ended)


class CountingTransaction:
    """A transaction that counts the statements sent through it."""

    def __init__(self, tx: Transaction) -> None:
        self._tx = tx
        self.statements = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._tx, name)
        if name in {"execute", "executemany", "fetch", "fetchrow", "fetchval", "serialize"}:

            async def counted(*args: Any) -> Any:
                self.statements += 1
                return await attribute(*args)

            return counted
        return attribute


class RecordedSyncs:
    """The SQLite store's WAL syncs (``WalSync._sync``, each a request to its syncer process):
    the WAL files synced, in order, each taking ``seconds`` more (a slow disk)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, seconds: float = 0.0) -> None:
        self.files: list[str] = []
        self.began = trio.Event()
        self.ended = 0
        real = WalSync._sync

        async def sync(wal: WalSync) -> None:
            self.files.append(wal._path)
            self.began.set()
            await trio.sleep(seconds)
            await real(wal)
            self.ended += 1

        monkeypatch.setattr(WalSync, "_sync", sync)
