"""The PostgreSQL backend: asyncpg, driven from trio through trio_asyncio.

asyncpg is asyncio-only. The process enters one trio_asyncio loop at its top (``ledgerport.serve``,
``ledgerport migrate``, the test fixtures); :func:`open_postgres` takes that loop and passes it
explicitly to every call, so no other module calls asyncio and a connection held for LISTEN can
wake trio tasks through the same loop.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import asyncpg
import trio
import trio_asyncio

from ._interface import (
    BadValue,
    CommitQueues,
    Conflict,
    DatabaseMissing,
    Flush,
    Listener,
    Listeners,
    Migration,
    MigrationError,
    Row,
    StorageError,
    StorageUnavailable,
    StoreStatistics,
)
from ._migrations import load_migrations

_T = TypeVar("_T")
log = logging.getLogger("ledgerport.storage.postgres")
# Serializes concurrent migrators (two processes starting at once) on one database.
_MIGRATION_LOCK_KEY = int.from_bytes(hashlib.sha256(b"ledgerport.migrate").digest()[:7], "big")
_CLEANUP_TIMEOUT = 5.0
STATEMENT_TIMEOUT = 30.0
"""Seconds a call to the database (a statement, a commit, a connection from the pool) may take
before it is cancelled."""
RELISTEN_FIRST = 0.5
"""Seconds before a second try to listen again after the listening connection was lost."""
RELISTEN_MAX = 10.0
"""Seconds between tries at most while PostgreSQL cannot be reached."""
_KEEPALIVES = {
    "tcp_keepalives_idle": "2",
    "tcp_keepalives_interval": "1",
    "tcp_keepalives_count": "3",
}
"""The server probes an idle connection after 2 s and drops it after 3 unanswered probes a
second apart: a host that vanished loses its marks (``PostgresStore.hold``) within about 5 s."""


async def _awaited(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    return await fn(*args)


def _terminate(conn: Any) -> None:
    """Close ``conn``'s socket at once; nothing to do if it is closed or back in the pool."""
    with contextlib.suppress(asyncpg.InterfaceError):
        conn.terminate()


def _channel(name: str) -> str:
    """The PostgreSQL channel of a store channel: prefixed, since the database may be shared."""
    return f"ledgerport_{name}"


def _literal(text: str) -> str:
    """``text`` as an SQL string literal (standard_conforming_strings, PostgreSQL's default)."""
    return "'" + text.replace("'", "''") + "'"


def _convert(exc: BaseException) -> StorageError:
    if isinstance(exc, asyncpg.IntegrityConstraintViolationError):
        return Conflict(str(exc))
    if isinstance(exc, asyncpg.DataError):
        return BadValue(str(exc))
    return StorageUnavailable(f"postgresql: {type(exc).__name__}: {exc}")


_DATABASE_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    # What a connection whose server went away can raise before asyncpg has noticed it is
    # closed (its protocol still busy with the statement the server ended it in).
    asyncpg.InternalClientError,
    OSError,
)
_READS = frozenset({"fetch", "fetchrow", "fetchval"})
"""The methods a ``reads`` unit may run outside its transaction (a SELECT that locks rows
begins it instead)."""


class _PostgresTransaction:
    kind: Literal["postgresql"] = "postgresql"
    row_lock = " FOR UPDATE"
    skip_locked = " FOR UPDATE SKIP LOCKED"
    json_object = "json_build_object"
    json_array_agg = "json_agg"

    def __init__(self, store: PostgresStore, *, reads: bool = False, durable: bool = True) -> None:
        self._store = store
        self._reads = reads
        """Reads before the first write run each on its own, outside the transaction."""
        self._begin = "BEGIN" if durable else "BEGIN; SET LOCAL synchronous_commit TO OFF"
        """The statement that begins the unit (``Store.transaction``'s ``durable``)."""
        self._conn: Any = None
        """The pool's connection, taken with the first statement (None until then)."""
        self._serialized: set[str] = set()
        self._notified: set[str] = set()
        self._notices: list[str] = []
        """The channels to notify with the COMMIT, in the same round trip."""
        self._queues = CommitQueues()

    async def _begin_then(self, method: str, args: tuple[Any, ...]) -> Any:
        """Asyncio side: take a connection, BEGIN, and run the first statement, all in one
        crossing from trio. The connection is the unit's as soon as it is taken, so whatever
        interrupts what follows, the unit's end rolls back and gives it back."""
        self._conn = await self._store._pool.acquire()
        await self._conn.execute(self._begin)
        return await getattr(self._conn, method)(*args)

    async def _run(self, method: str, *args: Any) -> Any:
        if self._conn is None:
            if self._reads and method in _READS and " FOR UPDATE" not in args[0]:
                return await self._store._call(getattr(self._store._pool, method), *args)
            return await self._store._call(self._begin_then, method, args)
        return await self._store._call(getattr(self._conn, method), *args)

    async def notify(self, channel: str) -> None:
        # PostgreSQL delivers it to every listening connection when the transaction commits:
        # it is sent with the COMMIT, in the same round trip.
        if channel not in self._notified:
            self._notified.add(channel)
            self._notices.append(_channel(channel))

    def queue(self, name: str, flush: Flush) -> list[Any]:
        return self._queues.queue(name, flush)

    async def execute(self, sql: str, *args: Any) -> int:
        status: str = await self._run("execute", sql, *args)
        tail = status.rsplit(" ", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._run("executemany", sql, rows)

    async def serialize(self, key: str) -> None:
        if key not in self._serialized:
            await self.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key)
            self._serialized.add(key)

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        records = await self._run("fetch", sql, *args)
        return [dict(r) for r in records]

    async def fetch_values(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return list(await self._run("fetch", sql, *args))  # asyncpg's records are sequences

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        record = await self._run("fetchrow", sql, *args)
        return None if record is None else dict(record)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._run("fetchval", sql, *args)


class _Autocommit:
    """Statements each on a pooled connection of their own, outside any transaction: asyncpg's
    pool acquires, runs and releases on the asyncio side, one crossing from trio."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        records = await self._store._call(self._store._pool.fetch, sql, *args)
        return [dict(r) for r in records]

    async def fetch_values(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return list(await self._store._call(self._store._pool.fetch, sql, *args))

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        record = await self._store._call(self._store._pool.fetchrow, sql, *args)
        return None if record is None else dict(record)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        return await self._store._call(self._store._pool.fetchval, sql, *args)


class PostgresStore:
    """A PostgreSQL database; open it with :func:`open_postgres`."""

    kind: Literal["postgresql"] = "postgresql"

    shared = True

    def __init__(
        self,
        pool: Any,
        loop: Any,
        *,
        max_size: int,
        url: str = "",
        statement_timeout: float = STATEMENT_TIMEOUT,
    ) -> None:
        self._pool = pool
        self._statement_timeout = statement_timeout
        self._loop = loop
        self._url = url
        self._context = contextvars.Context()
        """What the asyncio side's tasks start from: the loop, nothing of a request's."""
        self._context.run(trio_asyncio.current_loop.set, loop)
        self._background = trio.Semaphore(max(1, (max_size - 1) // 2))
        """The connections background transactions may hold at once: about half the pool,
        after the one that listens, so requests always find connections however busy the
        engine's loops are."""
        self._listen_lock = trio.Lock()
        self._listen_conn: Any = None
        """The connection LISTENing for this process's listeners (from the pool), if any."""
        self._listen_alive = False
        """Whether that connection is still open (asyncpg's termination callback clears it)."""
        self._listen_lost = trio.Event()
        """Set when the listening connection was lost: :meth:`_keep_listening` listens again."""
        self._subscriptions: dict[str, list[Callable[..., None]]] = {}
        """The asyncpg callbacks of this process's listeners, by PostgreSQL channel."""
        self._here = Listeners()
        """This process's listeners by PostgreSQL channel: woken by its own commits at once,
        before PostgreSQL's notification of them arrives."""
        self._hold_lock = trio.Lock()
        self._hold_conn: Any = None
        """The connection of this process's marks (:meth:`hold`), outside the pool."""
        self._held: set[str] = set()
        self.autocommit = _Autocommit(self)
        self._max_size = max_size
        self._statistics = StoreStatistics()

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``await fn(*args)`` on the asyncio side, as a task in a context of its own, within
        ``STATEMENT_TIMEOUT`` (or the store's own limit).

        The limit is kept on the trio side, not by asyncpg's ``command_timeout``: asyncpg starts
        an asyncio timer for each query and cancels it when the query ends, and trio_asyncio
        kept each cancelled timer until its deadline, tens of thousands at once under load,
        each one a turn of the loop to schedule. Cancelling the task on the trio side cancels
        the query the way asyncpg's own timeout does (a cancel request to the server).

        Not the caller's context (what ``aio_as_trio`` would copy): a timer asyncpg starts in
        the task (a new connection's connect timeout) keeps the task's context, and with the
        caller's context it kept the request that made the call (quart's request and app
        contexts, the ASGI objects, hypercorn's stream) alive as long as the timer."""
        coro = _awaited(fn, args)
        try:
            task = self._loop.create_task(coro, context=self._context.copy())
        except BaseException:
            coro.close()
            raise
        try:
            with trio.fail_after(self._statement_timeout):
                return await trio_asyncio.run_aio_future(task)
        except trio.TooSlowError as exc:
            self._statistics.unavailable += 1
            raise StorageUnavailable(
                f"postgresql: no answer within {self._statement_timeout:g} s"
            ) from exc
        except _DATABASE_ERRORS as exc:
            converted = _convert(exc)
            if isinstance(converted, StorageUnavailable):
                self._statistics.unavailable += 1
            raise converted from exc
        except UnicodeEncodeError as exc:
            # Text with a lone surrogate (a JSON "\ud800") cannot be sent as UTF-8.
            raise BadValue(f"postgresql: {exc}") from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        conn = await self._call(self._pool.acquire)
        try:
            yield conn
        finally:
            with trio.move_on_after(_CLEANUP_TIMEOUT) as scope:
                scope.shield = True
                try:
                    await self._call(self._pool.release, conn)
                except StorageError:
                    conn.terminate()
            if scope.cancelled_caught:
                conn.terminate()

    async def _end(self, conn: Any, commit: bool, notices: Sequence[str] = ()) -> None:
        """Commit (with the unit's notifications, one simple query) or roll back, then give the
        connection back (asyncio side, one crossing). A connection whose rollback failed is
        closed: nothing else could end its transaction."""
        try:
            if commit:
                await conn.execute(
                    "".join(f"SELECT pg_notify({_literal(name)}, '');" for name in notices)
                    + "COMMIT"
                )
            else:
                await conn.execute("ROLLBACK")
        except BaseException:
            if not commit:
                conn.terminate()
            raise
        finally:
            await self._pool.release(conn)

    @asynccontextmanager
    async def transaction(
        self, *, background: bool = False, reads: bool = False, durable: bool = True
    ) -> AsyncIterator[_PostgresTransaction]:
        if not background:
            async with self._transaction(reads, durable) as unit:
                yield unit
            return
        async with self._background, self._transaction(reads, durable) as unit:
            yield unit

    def statistics(self) -> StoreStatistics:
        size, idle = self._pool.get_size(), self._pool.get_idle_size()
        return self._statistics.snapshot(
            connections=size,
            connections_in_use=size - idle,
            connections_max=self._max_size,
        )

    @asynccontextmanager
    async def _transaction(
        self, reads: bool, durable: bool = True
    ) -> AsyncIterator[_PostgresTransaction]:
        """A unit whose connection and BEGIN come with its first statement (one crossing, not
        two), or with its first write (``reads``), so a unit that runs nothing costs nothing."""
        unit = _PostgresTransaction(self, reads=reads, durable=durable)
        started = trio.current_time()
        try:
            yield unit
            await unit._queues.flush(unit)
        except BaseException:
            if unit._conn is not None:
                with trio.move_on_after(_CLEANUP_TIMEOUT) as scope:
                    scope.shield = True
                    with contextlib.suppress(StorageError):
                        await self._call(self._end, unit._conn, False)
                if scope.cancelled_caught:
                    # The rollback hangs: closing the socket ends it (and the transaction).
                    unit._conn.terminate()
            raise
        else:
            if unit._conn is None and unit._notices:
                await unit.execute("SELECT 1")  # notifications alone still need a commit
            if unit._conn is not None:
                await self._call(self._end, unit._conn, True, unit._notices)
                self._here.wake(unit._notices)
        finally:
            if unit._conn is not None:
                self._statistics.count_transaction(trio.current_time() - started)

    @asynccontextmanager
    async def listen(self, channel: str, listener: Listener) -> AsyncIterator[None]:
        """LISTEN for the context, on the store's one listening connection (taken from the
        pool by the first listener, given back by the last): asyncpg calls back on the
        process's loop, inside trio, so the listener runs there.

        A connection runs one statement at a time: every LISTEN and UNLISTEN on it goes under
        one lock. An UNLISTEN that fails or hangs closes the connection. A listening connection
        lost (that, a restart of PostgreSQL, a network cut) is replaced by a task of the
        store's own (:meth:`_keep_listening`), which LISTENs again for every listener left and
        then wakes them all: what was notified while nobody listened is looked for again.

        A commit of this process wakes the listener at once, as it returns (and again when
        PostgreSQL's notification arrives): what this process changed, it sees in its next
        request."""

        def on_notification(*_: object) -> None:
            listener()

        await self._start_listening(_channel(channel), on_notification)
        try:
            with self._here.listening(_channel(channel), listener):
                yield
        finally:
            await self._stop_listening(_channel(channel), on_notification)

    async def _start_listening(self, channel: str, callback: Callable[..., None]) -> None:
        async with self._listen_lock:
            if not self._subscriptions:
                await self._open_listening()
            elif not self._listen_alive:
                # Lost, and not replaced yet: the replacement LISTENs for this one too.
                self._subscriptions.setdefault(channel, []).append(callback)
                return
            try:
                await self._call(self._listen_conn.add_listener, channel, callback)
            except BaseException as exc:
                if not self._subscriptions:
                    await self._close_listening()
                    raise
                if not isinstance(exc, StorageError):
                    raise
                # The shared connection was lost before its loss was noticed: listening
                # again on the next one LISTENs for this listener too.
                _terminate(self._listen_conn)
                self._listening_lost()
            self._subscriptions.setdefault(channel, []).append(callback)

    async def _stop_listening(self, channel: str, callback: Callable[..., None]) -> None:
        with trio.CancelScope(shield=True):
            async with self._listen_lock:
                callbacks = self._subscriptions[channel]
                callbacks.remove(callback)
                if not callbacks:
                    del self._subscriptions[channel]
                conn = self._listen_conn
                if conn is not None and self._listen_alive:
                    removed = False
                    with trio.move_on_after(_CLEANUP_TIMEOUT):
                        with contextlib.suppress(StorageError):
                            await self._call(conn.remove_listener, channel, callback)
                            removed = True
                    if not removed:
                        # Failed or hung: closing the connection ends every LISTEN on it
                        # (the others' are made again on the next one).
                        _terminate(conn)
                if not self._subscriptions:
                    await self._close_listening()

    async def _open_listening(self) -> None:
        """A listening connection from the pool, watched for its loss (the lock held)."""
        self._watch_listening(await self._call(self._pool.acquire))

    def _watch_listening(self, conn: Any) -> None:
        """``conn`` the listening connection, watched for its loss (the lock held)."""

        def lost(_: object) -> None:
            if self._listen_conn is conn:
                self._listening_lost()

        conn.add_termination_listener(lost)
        self._listen_conn, self._listen_alive = conn, True

    def _listening_lost(self) -> None:
        """The listening connection is gone (counted once): :meth:`_keep_listening` replaces it."""
        if self._listen_alive:
            self._listen_alive = False
            self._statistics.listens_lost += 1
            self._listen_lost.set()

    async def _close_listening(self) -> None:
        """Give the listening connection back (the lock held); a lost one is given back already."""
        conn, alive = self._listen_conn, self._listen_alive
        self._listen_conn, self._listen_alive = None, False
        if conn is not None and alive:
            await self._let_go(conn)

    def _keep_listening_meanwhile(self) -> trio.CancelScope:
        """:meth:`_keep_listening` in a task of its own until the scope answered is cancelled.

        A system task, not one of a nursery: a store is a resource that may be opened in one
        task and closed in another (an exit stack, a fixture), which a nursery opened and
        closed with it would not allow."""
        scope = trio.CancelScope()

        async def keeper() -> None:
            with scope:
                try:
                    await self._keep_listening()
                except Exception:  # a system task's exception would end the whole process
                    log.exception("postgresql: listening again stopped")

        trio.lowlevel.spawn_system_task(keeper, name="postgresql listening keeper")
        return scope

    async def _keep_listening(self) -> None:
        """Listen again whenever the listening connection is lost, until cancelled: at once,
        then after RELISTEN_FIRST seconds doubling up to RELISTEN_MAX while PostgreSQL cannot
        be reached. :func:`open_postgres` runs it for the store's lifetime."""
        while True:
            await self._listen_lost.wait()
            self._listen_lost = trio.Event()
            delay = RELISTEN_FIRST
            while not await self._listen_again():
                await trio.sleep(delay)
                delay = min(delay * 2, RELISTEN_MAX)

    async def _listen_again(self) -> bool:
        """A new listening connection for every listener left; False when PostgreSQL could not
        be reached (to be tried again). The connection is asked of the pool outside the lock,
        which a listener leaving meanwhile (a stopping engine) must not wait for that long."""
        async with self._listen_lock:
            if self._listen_alive:
                return True  # replaced already
            await self._close_listening()
            if not self._subscriptions:
                return True  # nobody listens any more
        try:
            conn = await self._call(self._pool.acquire)
        except StorageError as exc:
            log.warning("postgresql: cannot listen again for notifications: %s", exc)
            return False
        async with self._listen_lock:
            if self._listen_alive or not self._subscriptions:
                # A listener came, found nobody listening and opened one; or all have left.
                await self._let_go(conn)
                return True
            self._watch_listening(conn)
            try:
                for channel, callbacks in self._subscriptions.items():
                    for callback in callbacks:
                        await self._call(conn.add_listener, channel, callback)
            except StorageError as exc:
                log.warning("postgresql: cannot listen again for notifications: %s", exc)
                self._listen_conn, self._listen_alive = None, False
                _terminate(conn)
                return False
            channels = list(self._subscriptions)
        log.warning("postgresql: the listening connection was lost; listening again")
        self._here.wake(channels)
        return True

    async def _let_go(self, conn: Any) -> None:
        """Give the listening connection back to the pool (closed if that fails or hangs)."""
        with trio.move_on_after(_CLEANUP_TIMEOUT) as scope:
            try:
                await self._call(self._pool.release, conn)
            except StorageError:
                _terminate(conn)
        if scope.cancelled_caught:
            _terminate(conn)

    @property
    def holding(self) -> frozenset[str]:
        return frozenset(self._held)

    async def hold(self, key: str) -> bool:
        async with self._hold_lock:
            conn = self._hold_conn
            if conn is not None and not conn.is_closed() and key in self._held:
                return False
            if conn is None or conn.is_closed():
                if conn is not None:
                    _terminate(conn)
                self._hold_conn = None
                conn = await self._call(self._connect_alone)
                self._hold_conn = conn
                keys = self._held | {key}
            else:
                keys = {key}
            for each in sorted(keys):
                taken = await self._call(
                    conn.fetchval,
                    "SELECT pg_try_advisory_lock(hashtextextended($1, 0))",
                    each,
                )
                if not taken:
                    # Another process is taking over what the lost mark held: try again later.
                    self._held.discard(each)
                    raise StorageUnavailable(f"postgresql: the mark {each!r} is held elsewhere")
                self._held.add(each)
            return True

    async def let_go(self, key: str) -> None:
        with trio.CancelScope(shield=True):
            async with self._hold_lock:
                if key not in self._held:
                    return
                self._held.discard(key)
                conn = self._hold_conn
                if conn is None or conn.is_closed():
                    return
                if not self._held:
                    # Closing the connection ends its marks.
                    self._hold_conn = None
                    with trio.move_on_after(_CLEANUP_TIMEOUT) as scope:
                        with contextlib.suppress(StorageError):
                            await self._call(conn.close)
                    if scope.cancelled_caught:
                        _terminate(conn)
                    return
                with trio.move_on_after(_CLEANUP_TIMEOUT):
                    with contextlib.suppress(StorageError):
                        await self._call(
                            conn.fetchval,
                            "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                            key,
                        )
                        return
                _terminate(conn)  # failed or hung: the marks go with the connection

    async def _connect_alone(self) -> Any:
        """A connection of its own (asyncio side) whose server notices a dead host quickly."""
        return await asyncpg.connect(self._url, server_settings=_KEEPALIVES)

    def _close_marks(self) -> None:
        if self._hold_conn is not None:
            _terminate(self._hold_conn)
            self._hold_conn = None

    async def durable(self) -> None:
        pass  # a COMMIT has waited for the server to flush its WAL (synchronous_commit = on)

    async def ping(self) -> None:
        async with self._connection() as conn:
            await self._call(conn.fetchval, "SELECT 1")

    async def schema_version(self) -> int:
        async with self._connection() as conn:
            exists = await self._call(conn.fetchval, "SELECT to_regclass('schema_migrations')")
            if exists is None:
                return 0
            version = await self._call(
                conn.fetchval, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"
            )
            return int(version)

    async def migrate(self, migrations: Sequence[Migration] | None = None) -> list[int]:
        """Apply the migrations this database lacks; answers the versions applied."""
        chosen = load_migrations("postgres") if migrations is None else migrations
        applied: list[int] = []
        try:
            async with self.transaction() as tx:
                await tx.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK_KEY)
                await tx.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                    " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                )
                current = int(
                    await tx.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
                )
                for migration in chosen:
                    if migration.version <= current:
                        continue
                    for statement in migration.statements():
                        await tx.execute(statement)
                    await tx.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
                        migration.version,
                        migration.name,
                    )
                    applied.append(migration.version)
        except StorageUnavailable as exc:
            raise MigrationError(f"postgresql migration failed: {exc}") from exc
        return applied


async def _reset(conn: Any) -> None:
    """How a connection given back to the pool is reset: by ending a transaction left open, if
    any. Nothing here changes session state (advisory locks are transaction-level, a LISTEN is
    undone by the context that made it), so asyncpg's default reset, four statements and a
    round trip on every release, would undo nothing."""
    if conn.is_in_transaction():
        await conn.execute("ROLLBACK")


class NoAsyncioLoop(RuntimeError):
    """PostgreSQL was opened outside the process's trio_asyncio loop."""


@asynccontextmanager
async def open_postgres(
    url: str, *, max_size: int = 10, statement_timeout: float = STATEMENT_TIMEOUT
) -> AsyncIterator[PostgresStore]:
    """Connect a pool to the database at ``url`` for the lifetime of the context; every call
    to the database that takes longer than ``statement_timeout`` seconds is cancelled and
    raises :class:`StorageUnavailable`.

    Must run inside ``trio_asyncio.open_loop()``, entered once at the top of the process.
    """
    loop = trio_asyncio.current_loop.get()
    if loop is None:
        raise NoAsyncioLoop("PostgreSQL needs the process's trio_asyncio loop; enter it first")
    try:
        pool = await trio_asyncio.aio_as_trio(asyncpg.create_pool, loop=loop)(
            url,
            min_size=1,
            max_size=max_size,
            command_timeout=None,  # kept on the trio side: PostgresStore._call
            reset=_reset,
            # No timer per release to close a connection idle for five minutes: trio_asyncio
            # keeps each cancelled one (every acquire cancels one) for those five minutes.
            max_inactive_connection_lifetime=0,
        )
    except asyncpg.InvalidCatalogNameError as exc:
        name = urlsplit(url).path.lstrip("/") or "postgres"
        raise DatabaseMissing(name, f"postgresql: cannot connect: {exc}") from exc
    except (*_DATABASE_ERRORS, ValueError) as exc:
        raise StorageUnavailable(f"postgresql: cannot connect: {exc}") from exc
    store = PostgresStore(
        pool, loop, max_size=max_size, url=url, statement_timeout=statement_timeout
    )
    keeper = store._keep_listening_meanwhile()
    try:
        yield store
    finally:
        keeper.cancel()
        store._close_marks()
        with trio.move_on_after(_CLEANUP_TIMEOUT) as scope:
            scope.shield = True
            await trio_asyncio.aio_as_trio(pool.close, loop=loop)()
        if scope.cancelled_caught:
            pool.terminate()
