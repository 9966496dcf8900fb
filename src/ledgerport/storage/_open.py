"""Opening the configured database, on either backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ledgerport.config import DatabaseURL

from ._interface import Store
from ._postgres import open_postgres
from ._sqlite import open_sqlite


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
