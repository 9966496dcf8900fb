"""The embedded SQLite backend: one connection, WAL, what may wait on a worker thread.

sqlite3 blocks, and a hop to a worker thread (``trio.to_thread.run_sync``, a capacity limiter of
one) costs 100 to 200 us, ten times a short indexed statement. So what may wait runs on the
worker thread: a ``ROLLBACK``, a ``COMMIT`` when the database has no WAL (SQLite syncs it to
disk itself), every statement of a background transaction (the engine's batches and the
scheduler's purges, which may touch many rows) from its ``BEGIN IMMEDIATE`` on, the migrations,
and a request's ``BEGIN IMMEDIATE`` when another program holds the write lock (asked first on
the event loop without waiting: the serving process is the one that writes its file, so the lock
is free but for such a program). What cannot wait runs on the event loop itself, where it costs
the statement alone: the later statements of a request's transaction, which already holds the
write lock, a ``COMMIT`` in WAL mode (it waits for no disk: :class:`WalSync` syncs the WAL after
the turn, one sync for many commits, and the transaction's block is left only then), the single
reads outside a transaction (``autocommit``, ``ping``), and a ``reads`` unit (a GET) from its
deferred ``BEGIN`` to its first write, if any: WAL lets a reader through whatever a writer does.
The writer turns (a trio lock that lets requests go first) keep one user of the connection at a
time.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Literal, TypeVar

import trio

from ._interface import (
    BadValue,
    CommitQueues,
    Conflict,
    DatabaseUnreachable,
    Flush,
    Listener,
    Listeners,
    Migration,
    MigrationError,
    Row,
    StorageUnavailable,
    StoreStatistics,
)
from ._migrations import load_migrations

# A quoted string or identifier (kept as is) or a $N placeholder (rewritten to SQLite's ?N).
_PARAM_OR_QUOTED = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$(\d+)")
_T = TypeVar("_T")
log = logging.getLogger("ledgerport.storage.sqlite")
BUSY_TIMEOUT_MS = 10_000
"""How long a statement on the worker thread waits for a lock another program holds."""
CHECKPOINT_INTERVAL = 1.0
"""Seconds at least between two checkpoints, each made after a sync (``WalSync``)."""
SYNCER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wal_syncer.py")
"""The script of the process that syncs a WAL (``WalSync``)."""
TRANSLATED_KEPT = 1024
"""Statements whose SQLite form is kept (``_translate``)."""
SYNCER_EXIT_TIMEOUT = 5.0
"""Seconds the syncer has to end once its pipe is closed, before it is killed."""
LOOP_SHARE = 0.001
"""Seconds, at most, between two turns the store's statements give the event loop's other tasks
(see ``SqliteStore._checkpoint``)."""


@functools.lru_cache(maxsize=TRANSLATED_KEPT)
def _translate(sql: str) -> str:
    """PostgreSQL-style ``$N`` placeholders to SQLite's ``?N``, outside quoted text only (kept:
    the statements are the code's, a few hundred texts, and the rewrite cost as much as a short
    statement)."""
    return _PARAM_OR_QUOTED.sub(lambda m: f"?{m[1]}" if m[1] else m[0], sql)


def _convert(exc: sqlite3.Error) -> Exception:
    if isinstance(exc, sqlite3.IntegrityError):
        return Conflict(str(exc))
    return StorageUnavailable(f"sqlite: {exc}")


def _bad_value(exc: OverflowError | UnicodeEncodeError) -> BadValue:
    # An integer beyond 64 bits, or text with a lone surrogate (a JSON "\ud800"): values no
    # column can hold.
    return BadValue(f"sqlite: {type(exc).__name__}: {exc}")


def _reads_only(sql: str) -> bool:
    """Whether ``sql`` is a plain SELECT (a statement that writes nothing)."""
    return sql.lstrip()[:6].upper() == "SELECT"


def _fetch(conn: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[Row]:
    return [dict(r) for r in conn.execute(_translate(sql), args).fetchall()]


def _fetch_values(conn: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[Sequence[Any]]:
    cursor = conn.cursor()
    cursor.row_factory = None  # tuples, made by sqlite3 itself
    return cursor.execute(_translate(sql), args).fetchall()


def _fetchrow(conn: sqlite3.Connection, sql: str, args: Sequence[Any]) -> Row | None:
    row = conn.execute(_translate(sql), args).fetchone()
    return None if row is None else dict(row)


class _SqliteTransaction:
    kind: Literal["sqlite"] = "sqlite"
    row_lock = ""
    skip_locked = ""
    json_object = "json_object"
    json_array_agg = "json_group_array"

    def __init__(self, store: SqliteStore, *, background: bool, reads: bool) -> None:
        self._store = store
        self._queues = CommitQueues()
        self._notified: set[str] = set()
        self._background = background
        self._reads = reads
        self.begun = False
        """Whether BEGIN ran: it runs with the transaction's first statement."""
        self.locked = False
        """Whether the transaction holds the write lock (``BEGIN IMMEDIATE``, or a deferred
        one's first write)."""
        self.changes_before = 0
        """The connection's total changes when the transaction began."""
        self.issued_writes = False
        """Whether a statement other than a SELECT ran (it may change the schema, which
        ``wrote`` does not count)."""

    async def _call(self, sql: str, fn: Callable[..., _T], *args: Any) -> _T:
        conn = self._store._conn
        if not _reads_only(sql):
            self.issued_writes = True
        if self.begun:
            if self._background or (not self.locked and not _reads_only(sql)):
                # May wait: the background's batches, and a deferred unit's first write (the
                # write lock, which another process may hold).
                self.locked = self.locked or not _reads_only(sql)
                return await self._store._call(fn, *args)
            return await self._store._inline(fn, *args)

        if self._reads and _reads_only(sql):

            def begin_deferred_then() -> _T:
                conn.execute("BEGIN")  # no lock until the first read, which waits for no writer
                self.begun = True
                self.changes_before = conn.total_changes
                return fn(*args)

            return await self._store._inline(begin_deferred_then)

        def begin() -> None:
            conn.execute("BEGIN IMMEDIATE")
            self.begun = self.locked = True
            self.changes_before = conn.total_changes

        def begin_then() -> _T:
            begin()
            return fn(*args)

        if self._background or not await self._store._begun_at_once(begin):
            return await self._store._call(begin_then)
        return await self._store._inline(fn, *args)

    def wrote(self) -> bool:
        return self._store._conn.total_changes != self.changes_before

    async def notify(self, channel: str) -> None:
        self._notified.add(channel)

    def queue(self, name: str, flush: Flush) -> list[Any]:
        return self._queues.queue(name, flush)

    async def execute(self, sql: str, *args: Any) -> int:
        cursor = await self._call(sql, self._store._conn.execute, _translate(sql), args)
        return int(cursor.rowcount)

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        await self._call(sql, self._store._conn.executemany, _translate(sql), rows)

    async def serialize(self, key: str) -> None:
        pass  # the write transaction already holds the whole database

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        return await self._call(sql, _fetch, self._store._conn, sql, args)

    async def fetch_values(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return await self._call(sql, _fetch_values, self._store._conn, sql, args)

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        return await self._call(sql, _fetchrow, self._store._conn, sql, args)

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return None if row is None else next(iter(row.values()))


BACKGROUND_AGING = 0.05
"""Seconds a background transaction waits behind requests' transactions at most before it
goes first."""

REQUESTS_PER_BACKGROUND = 3
"""Requests' transactions that go before a waiting background one at most: while both wait,
requests get three turns in four and the engine's loops the fourth, so a steady stream of
short requests delays a delivery by a few milliseconds, not by BACKGROUND_AGING."""


class WriterTurns:
    """Whose turn it is to use the one connection: a lock that hands itself to a request's
    transaction (foreground) before a transaction of the engine's loops (background), unless
    background ones have waited BACKGROUND_AGING seconds or REQUESTS_PER_BACKGROUND requests'
    turns; first come, first served within each.

    SQLite has one writer and the store one connection, so every transaction waits for the one
    before it. The engine's loops write in batches (a fan-out, a claim, outcomes), and under a
    tenant's flood they queue several at once: first come, first served, a request behind them
    would wait for all. Requests go first, and a background transaction still gets its turn
    within BACKGROUND_AGING or REQUESTS_PER_BACKGROUND turns of a steady stream of requests."""

    def __init__(self) -> None:
        self._busy = False
        self._passed = 0
        """Requests' turns handed over while background transactions waited."""
        self._foreground = trio.lowlevel.ParkingLot()
        self._background = trio.lowlevel.ParkingLot()
        self._background_since = 0.0
        """When the background transactions waiting now began to wait (roughly: when the
        first of them did, or the last one before them got its turn)."""

    @property
    def busy(self) -> bool:
        """Whether a turn is taken now (a transaction holds the connection)."""
        return self._busy

    async def acquire(self, *, background: bool) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        if not self._busy:
            self._busy = True
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        if background:
            if not self._background:
                self._background_since = trio.current_time()
                self._passed = 0
            await self._background.park()
        else:
            await self._foreground.park()
        # Unparked: the turn was handed over (``_busy`` stayed set).

    def release(self) -> None:
        waited = trio.current_time() - self._background_since
        if self._background and (
            not self._foreground
            or waited >= BACKGROUND_AGING
            or self._passed >= REQUESTS_PER_BACKGROUND
        ):
            self._background.unpark()
            self._background_since = trio.current_time()
            self._passed = 0
        elif self._foreground:
            if self._background:
                self._passed += 1
            self._foreground.unpark()
        else:
            self._busy = False

    @asynccontextmanager
    async def turn(self, *, background: bool = False) -> AsyncIterator[None]:
        await self.acquire(background=background)
        try:
            yield
        finally:
            self.release()


class _Autocommit:
    """Reads each in their own turn on the one connection, outside any transaction: on the event
    loop, no BEGIN or COMMIT (a WAL read waits for no writer)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        rows = await self._store._read(_fetch, sql, args)
        await self._store.durable()  # what it read is on disk
        return rows

    async def fetch_values(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        values = await self._store._read(_fetch_values, sql, args)
        await self._store.durable()  # what it read is on disk
        return values

    async def fetchrow(self, sql: str, *args: Any) -> Row | None:
        row = await self._store._read(_fetchrow, sql, args)
        await self._store.durable()  # what it read is on disk
        return row

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return None if row is None else next(iter(row.values()))


class _SyncerLost(Exception):
    """The WAL's syncer ended, or answered what it never answers."""


class WalSync:
    """Makes commits durable together: the WAL file synced to disk once for every commit made
    before the sync began (a group commit).

    The connection commits with ``synchronous = NORMAL`` on the event loop: a COMMIT writes its
    frames to the WAL (the operating system holds them, so a killed process loses nothing)
    without waiting for the disk, and the turn passes on at once. No one sees a commit before
    it is on disk, though: a transaction's block and a read outside one are left only once
    every commit made before they end is synced (:meth:`synced`), so whatever a request
    answers, or the engine sends, rests on commits that survive a power cut, as with
    ``synchronous = FULL``. While one sync runs, the commits made meanwhile wait for the next,
    which covers them all: under load one sync serves many commits, instead of each holding
    the one connection through its own.

    The syncs are made by a process of their own (``wal_syncer``, started by :meth:`start`,
    started again after it dies), asked over a pipe: the event loop waits for its answer as
    for a socket's, and the sync needs nothing of this process's interpreter. That process also
    checkpoints: SQLite's automatic checkpoints would run in a COMMIT, on the event loop, so
    they are off, and a sync is followed, at most once every CHECKPOINT_INTERVAL, by a PASSIVE
    checkpoint on a connection of its own (waiting for no reader or writer).
    """

    def __init__(
        self,
        wal_path: str,
        *,
        checkpoint_interval: float = CHECKPOINT_INTERVAL,
        syncer: str = SYNCER,
    ) -> None:
        """``syncer``: the script the process runs (``wal_syncer``'s, or one that speaks its
        protocol)."""
        self._path = wal_path
        self._checkpoint_interval = checkpoint_interval
        self._syncer = syncer
        self._committed = 0
        """Commits made so far (numbered from 1)."""
        self._synced = 0
        """The last commit the last completed sync covers."""
        self._lock = trio.Lock()
        self._process: trio.Process | None = None
        self._answers = bytearray()
        """What the process wrote that is not a whole line yet."""
        self.syncs = 0
        """Syncs made so far."""

    def committed(self) -> None:
        """Count a commit just made."""
        self._committed += 1

    async def start(self) -> None:
        """Start the process that syncs (done by the first sync otherwise)."""
        async with self._lock:
            await self._started()

    async def synced(self) -> None:
        """Wait until every commit made so far is on disk (shielded: a block left early by a
        cancellation would otherwise leave without it). A sync that fails raises
        StorageUnavailable: the commits' fate is then unknown to their callers, as with a
        connection lost during a COMMIT, and the next sync covers them again."""
        commit = self._committed
        if self._synced >= commit:
            return
        with trio.CancelScope(shield=True):
            while self._synced < commit:
                async with self._lock:
                    if self._synced >= commit:
                        return
                    covered = self._committed
                    await self._sync()
                    self.syncs += 1
                    self._synced = max(self._synced, covered)

    async def _started(self) -> trio.Process:
        if self._process is None:
            try:
                self._process = await trio.lowlevel.open_process(
                    [
                        sys.executable,
                        "-I",  # none of the environment's Python settings, no user site
                        "-S",  # nor the site's packages: it needs the standard library only
                        self._syncer,
                        self._path,
                        repr(self._checkpoint_interval),
                    ],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
            except OSError as exc:
                raise StorageUnavailable(f"sqlite: cannot start the WAL's syncer: {exc}") from exc
            self._answers.clear()
        return self._process

    async def _sync(self) -> None:
        """One sync by the process, for every commit made before it was asked."""
        process = await self._started()
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            await process.stdin.send_all(b"s")
            while (answer := await self._next_answer(process.stdout)) != "synced":
                kind, _, reason = answer.partition(" ")
                if kind == "failed":
                    raise StorageUnavailable(f"sqlite: cannot sync {self._path}: {reason}")
                if kind != "checkpoint-failed":
                    raise _SyncerLost(f"answered {answer!r}")
                log.warning("sqlite: checkpoint of %s: %s", self._path, reason)
        except StorageUnavailable:
            raise
        except (trio.BrokenResourceError, trio.ClosedResourceError, _SyncerLost) as exc:
            await self._ended()
            what = str(exc) if isinstance(exc, _SyncerLost) else "ended"  # its pipe broke
            raise StorageUnavailable(
                f"sqlite: the WAL's syncer of {self._path} {what} (the next sync starts another)"
            ) from exc
        except BaseException:
            # Its next answer could be taken for another request's: it is not asked again.
            await self._ended()
            raise

    async def _next_answer(self, answers: trio.abc.ReceiveStream) -> str:
        while b"\n" not in self._answers:
            data = await answers.receive_some(4096)
            if not data:
                raise _SyncerLost("ended")
            self._answers += data
        line, _, rest = bytes(self._answers).partition(b"\n")
        self._answers[:] = rest
        return line.decode("utf-8", "replace")

    async def _ended(self) -> None:
        """Let the process go (it ends at the end of its input) and reap it."""
        process, self._process = self._process, None
        if process is None:
            return
        with trio.CancelScope(shield=True):
            if process.stdin is not None:
                await process.stdin.aclose()
            with trio.move_on_after(SYNCER_EXIT_TIMEOUT):
                await process.wait()
                return
            log.warning("sqlite: the WAL's syncer of %s did not end; killed", self._path)
            process.kill()
            await process.wait()

    async def aclose(self) -> None:
        """End the process (the commits before are synced, or their callers failed)."""
        async with self._lock:
            await self._ended()


class SqliteStore:
    """A SQLite database file; open it with :func:`open_sqlite`."""

    kind: Literal["sqlite"] = "sqlite"
    shared = False

    def __init__(self, conn: sqlite3.Connection, wal: WalSync | None = None) -> None:
        self._conn = conn
        self._wal = wal
        """The group commit's sync of the WAL; None when each COMMIT syncs (no WAL)."""
        self._limiter = trio.CapacityLimiter(1)
        self._turns = WriterTurns()
        self._listeners = Listeners()
        self._held: set[str] = set()
        self.autocommit = _Autocommit(self)
        self._statistics = StoreStatistics(connections=1, connections_max=1)
        self._yield_at = 0.0
        """When the next statement on the loop lets other tasks run first (``_checkpoint``)."""

    @property
    def holding(self) -> frozenset[str]:
        return frozenset(self._held)

    async def hold(self, key: str) -> bool:
        if key in self._held:
            return False
        self._held.add(key)
        return True

    async def let_go(self, key: str) -> None:
        self._held.discard(key)

    @asynccontextmanager
    async def listen(self, channel: str, listener: Listener) -> AsyncIterator[None]:
        with self._listeners.listening(channel, listener):
            yield

    def statistics(self) -> StoreStatistics:
        return self._statistics.snapshot(connections_in_use=int(self._turns.busy))

    async def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the worker thread: for what may wait (a lock, the disk)."""
        try:
            return await trio.to_thread.run_sync(fn, *args, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise self._converted(exc) from exc
        except (OverflowError, UnicodeEncodeError) as exc:
            raise _bad_value(exc) from exc

    async def _begun_at_once(self, begin: Callable[[], None]) -> bool:
        """``begin()`` (a ``BEGIN IMMEDIATE``) here, on the event loop, when the write lock is
        free; answers False, having begun nothing, when it is not. The serving process is the
        one that writes its file (``serving``), so the lock is free but for another program
        writing to it: that case (SQLITE_BUSY, asked without waiting) is the caller's to wait
        for on the worker thread. A request's transaction so takes no hop to the thread in WAL
        mode (its COMMIT runs here too, WalSync syncs it), one without a WAL (its COMMIT)."""
        await self._checkpoint()
        conn = self._conn
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            try:
                begin()
            finally:
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:  # or an extended BUSY
                return False
            raise self._converted(exc) from exc
        except sqlite3.Error as exc:
            raise self._converted(exc) from exc
        return True

    async def _inline(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` here, on the event loop, for a statement that waits for nothing; after
        a checkpoint, so a loop of statements can be cancelled and lets other tasks run."""
        await self._checkpoint()
        return self._now(fn, *args)

    async def _checkpoint(self) -> None:
        """A cancellation point; and a turn for the loop's other tasks once LOOP_SHARE has
        passed since the store's statements last gave one.

        A statement here takes tens of microseconds, and a turn of the loop for each cost
        more than most statements: 170 thousand of a refresh's 4.6 million instructions in
        the served process (docs/performance.md). A cancelled task still stops at its next
        statement, and a long loop of statements still lets every other task run about every
        millisecond."""
        now = time.perf_counter()
        if now < self._yield_at:
            await trio.lowlevel.checkpoint_if_cancelled()
            return
        await trio.lowlevel.checkpoint()
        self._yield_at = time.perf_counter() + LOOP_SHARE

    def _now(self, fn: Callable[..., _T], *args: Any) -> _T:
        try:
            return fn(*args)
        except sqlite3.Error as exc:
            raise self._converted(exc) from exc
        except (OverflowError, UnicodeEncodeError) as exc:
            raise _bad_value(exc) from exc

    async def _read(self, fn: Callable[..., _T], sql: str, args: Sequence[Any]) -> _T:
        """``fn(conn, sql, args)``, a read outside any transaction, on the event loop: at once
        after the checkpoint when no turn is taken (nothing runs between the look and the
        statement, and with no turn taken no one waits for one), else in its own turn. A turn
        taken and given back costs more than a short indexed read."""
        await self._checkpoint()
        if not self._turns.busy:
            return self._now(fn, self._conn, sql, args)
        async with self._turns.turn():
            return await self._inline(fn, self._conn, sql, args)

    def _converted(self, exc: sqlite3.Error) -> Exception:
        converted = _convert(exc)
        if isinstance(converted, StorageUnavailable):
            self._statistics.unavailable += 1
        return converted

    @asynccontextmanager
    async def transaction(
        self, *, background: bool = False, reads: bool = False, durable: bool = True
    ) -> AsyncIterator[_SqliteTransaction]:
        asked = trio.current_time()
        waited = self._turns.busy
        async with self._turns.turn(background=background):
            started = trio.current_time()
            if waited:
                self._statistics.waits += 1
                self._statistics.wait_seconds += started - asked
            tx = _SqliteTransaction(self, background=background, reads=reads)
            try:
                yield tx
                await tx._queues.flush(tx)
            except BaseException:
                if tx.begun:
                    with trio.CancelScope(shield=True):
                        await self._call(self._rollback_if_open)
                raise
            else:
                try:
                    if tx.begun and self._wal is not None:
                        await self._inline(self._conn.execute, "COMMIT")
                        if durable and (tx.issued_writes or tx.wrote()):
                            # Synced to disk after the turn (WalSync.synced, below); a
                            # commit not durable is left for the next sync to cover.
                            self._wal.committed()
                    elif tx.begun and tx.wrote():
                        await self._call(self._conn.execute, "COMMIT")  # synced to disk
                    elif tx.begun:
                        await self._inline(self._conn.execute, "COMMIT")  # nothing to write
                except BaseException:
                    with trio.CancelScope(shield=True):
                        await self._call(self._rollback_if_open)
                    raise
            finally:
                if tx.begun:
                    self._statistics.count_transaction(trio.current_time() - started)
        if durable:
            await self.durable()
        self._listeners.wake(tx._notified)

    async def durable(self) -> None:
        """Wait until every commit made so far is on disk (``WalSync``); never in a turn, which
        would keep every other transaction waiting for the disk."""
        if self._wal is not None:
            await self._wal.synced()

    def _rollback_if_open(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    async def ping(self) -> None:
        await self._read(_fetchrow, "SELECT 1", ())

    async def schema_version(self) -> int:
        async with self._turns.turn():
            return int(await self._call(_current_version, self._conn))

    async def migrate(self, migrations: Sequence[Migration] | None = None) -> list[int]:
        """Apply the migrations this database lacks; answers the versions applied."""
        chosen = load_migrations("sqlite") if migrations is None else migrations
        async with self._turns.turn():
            applied = await self._call(_migrate, self._conn, chosen)
            if self._wal is not None and applied:
                self._wal.committed()
        await self.durable()
        return applied


def _current_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if exists is None:
        return 0
    return int(
        conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
    )


def _migrate(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[int]:
    # SQLite's procedure for rebuilding a table: foreign keys off (it cannot change inside a
    # transaction), the rebuild, then a foreign_key_check before the commit.
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        return _migrate_unchecked(conn, migrations)
    finally:
        conn.execute("PRAGMA foreign_keys = ON")


def _migrate_unchecked(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[int]:
    applied: list[int] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        current = _current_version(conn)
        for migration in migrations:
            if migration.version <= current:
                continue
            for statement in migration.statements():
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at)"
                " VALUES (?, ?, datetime('now'))",
                (migration.version, migration.name),
            )
            applied.append(migration.version)
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise MigrationError(f"sqlite migration left {len(broken)} dangling references")
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK")
        raise MigrationError(f"sqlite migration failed: {exc}") from exc
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied


def _connect(path: str, checkpoint_interval: float) -> tuple[sqlite3.Connection, WalSync | None]:
    """The connection, and its WAL's sync when it is in WAL mode (a file, not ``:memory:``)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise StorageUnavailable(f"sqlite: directory {directory} does not exist")
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
    )
    conn.row_factory = sqlite3.Row
    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
    # A committed transaction survives a power cut, not only a crash of the process: in WAL
    # mode through WalSync (NORMAL here, the WAL synced after the commit's turn, many commits
    # in one sync), otherwise by SQLite at each commit (FULL).
    wal = str(mode).lower() == "wal"
    conn.execute(f"PRAGMA synchronous = {'NORMAL' if wal else 'FULL'}")
    if wal:
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # WalSync checkpoints
    conn.execute("PRAGMA foreign_keys = ON")
    if not wal:
        return conn, None
    return conn, WalSync(os.path.abspath(path) + "-wal", checkpoint_interval=checkpoint_interval)


@asynccontextmanager
async def open_sqlite(
    path: str, *, checkpoint_interval: float = CHECKPOINT_INTERVAL
) -> AsyncIterator[SqliteStore]:
    """Open (creating if needed) the SQLite file at ``path``; its WAL is checkpointed after a
    sync at most every ``checkpoint_interval`` seconds."""
    try:
        conn, wal = await trio.to_thread.run_sync(_connect, path, checkpoint_interval)
    except sqlite3.Error as exc:
        raise StorageUnavailable(f"sqlite: cannot open {path}: {exc}") from exc
    try:
        if wal is not None:
            await wal.start()
        yield SqliteStore(conn, wal)
    finally:
        with trio.CancelScope(shield=True):
            if wal is not None:
                await wal.aclose()
            await trio.to_thread.run_sync(conn.close)


@contextmanager
def serving(path: str) -> Iterator[None]:
    """This process serves the SQLite file at ``path`` for the context: an exclusive ``flock``
    on the file (SQLite's own locks are POSIX record locks, which it does not touch). One
    process serves a SQLite file (a starting node takes over every claim but its own); a second
    one is refused with :class:`DatabaseUnreachable` (a configuration error: exit code 2, so a
    service manager does not start it again and again) instead of sending deliveries twice."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise DatabaseUnreachable(
            f"LEDGERPORT_DATABASE_URL: cannot open {path}: {exc.strerror or exc}"
        ) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DatabaseUnreachable(
                f"LEDGERPORT_DATABASE_URL: another process serves {path} (a SQLite file has one"
                " serving process; stop it first, or serve several processes from PostgreSQL)"
            ) from None
        yield
    finally:
        os.close(fd)
