"""Storage: one interface, an embedded SQLite backend and a PostgreSQL backend."""

from ._interface import FIRST_PER_KEY_MAX as FIRST_PER_KEY_MAX
from ._interface import BadValue as BadValue
from ._interface import Conflict as Conflict
from ._interface import Migration as Migration
from ._interface import MigrationError as MigrationError
from ._interface import Reader as Reader
from ._interface import Row as Row
from ._interface import StorageError as StorageError
from ._interface import StorageUnavailable as StorageUnavailable
from ._interface import Store as Store
from ._interface import Transaction as Transaction
from ._interface import first_per_key as first_per_key
from ._interface import placeholders as placeholders
from ._loop import READY_PER_TURN as READY_PER_TURN
from ._loop import open_asyncio_loop as open_asyncio_loop
from ._migrations import load_migrations as load_migrations
from ._open import open_store as open_store
from ._postgres import NoAsyncioLoop as NoAsyncioLoop
from ._postgres import PostgresStore as PostgresStore
from ._postgres import open_postgres as open_postgres
from ._sqlite import BACKGROUND_AGING as BACKGROUND_AGING
from ._sqlite import REQUESTS_PER_BACKGROUND as REQUESTS_PER_BACKGROUND
from ._sqlite import SqliteStore as SqliteStore
from ._sqlite import WriterTurns as WriterTurns
from ._sqlite import open_sqlite as open_sqlite
from ._sqlite import serving as serving
