"""Storage: one interface, an embedded SQLite backend and a PostgreSQL backend."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ledgerport.config import DatabaseURL

from ._interface import BadValue as BadValue
from ._interface import Conflict as Conflict
from ._interface import MigrationError as MigrationError
from ._interface import Row as Row
from ._interface import StorageError as StorageError
from ._interface import StorageUnavailable as StorageUnavailable
from ._interface import Store as Store
from ._interface import Transaction as Transaction
from ._migrations import Migration as Migration
from ._migrations import load_migrations as load_migrations
from ._postgres import NoAsyncioLoop as NoAsyncioLoop
from ._postgres import PostgresStore as PostgresStore
from ._postgres import open_postgres as open_postgres
from ._sqlite import SqliteStore as SqliteStore
from ._sqlite import open_sqlite as open_sqlite


@asynccontextmanager
async def open_store(database: DatabaseURL, *, migrate: bool = True) -> AsyncIterator[Store]:
    """Open the configured database, bringing its schema up to date unless told not to.

    PostgreSQL runs inside the process's trio_asyncio loop, which the caller has entered.
    """
    if database.kind == "sqlite":
        async with open_sqlite(database.path) as sqlite_store:
            if migrate:
                await sqlite_store.migrate()
            yield sqlite_store
    else:
        async with open_postgres(database.url) as pg_store:
            if migrate:
                await pg_store.migrate()
            yield pg_store
