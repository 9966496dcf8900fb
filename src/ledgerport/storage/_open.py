"""Opening the configured database, on either backend."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from ledgerport.config import DatabaseURL

from ._interface import DatabaseMissing, DatabaseUnreachable, StorageUnavailable, Store
from ._postgres import open_postgres
from ._sqlite import open_sqlite


@asynccontextmanager
async def open_store(database: DatabaseURL, *, migrate: bool = True) -> AsyncIterator[Store]:
    """Open the configured database, bringing its schema up to date unless told not to.

    A database that cannot be opened, or migrated, raises :class:`DatabaseUnreachable` naming
    LEDGERPORT_DATABASE_URL (a missing PostgreSQL database, :class:`DatabaseMissing`); what
    fails once it is open raises as it does anywhere else.

    PostgreSQL runs inside the process's trio_asyncio loop, which the caller has entered.
    """
    async with AsyncExitStack() as stack:
        try:
            store: Store
            if database.kind == "sqlite":
                store = await stack.enter_async_context(open_sqlite(database.path))
            else:
                store = await stack.enter_async_context(open_postgres(database.url))
            if migrate:
                await store.migrate()
        except (DatabaseMissing, DatabaseUnreachable):
            raise
        except StorageUnavailable as exc:
            raise DatabaseUnreachable(
                f"LEDGERPORT_DATABASE_URL: cannot use {database.redacted()}: {exc}"
            ) from exc
        yield store
