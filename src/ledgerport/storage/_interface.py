"""The storage interface: one unit of work per request, the same SQL on both backends.

SQL is written once with PostgreSQL-style numbered parameters (``$1``, ``$2``); the SQLite backend
rewrites them to SQLite's numbered form (``?1``). Rows come back as plain dicts.
"""

from __future__ import annotations

import sqlite3
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, Protocol, TypeAlias

from ledgerport.config import ConfigError

Row = dict[str, Any]


def placeholders(count: int, start: int = 1) -> str:
    """``count`` numbered parameters from ``$start``, comma-separated: the list of an
    ``IN (...)`` of values bound one by one."""
    return ", ".join(f"${index}" for index in range(start, start + count))


class StorageError(Exception):
    """Root of the storage errors."""


class Conflict(StorageError):
    """A uniqueness or foreign-key constraint refused the write."""


class BadValue(StorageError):
    """The database cannot store a value it was given (out of range, forbidden character)."""


class StorageUnavailable(StorageError):
    """The database cannot be reached or refused to work."""


class DatabaseUnreachable(StorageUnavailable, ConfigError):
    """The configured database cannot be opened at start (no server answers there, the role or
    its password is refused, the file cannot be opened or is served by another process): the
    configuration's to fix, so its message names LEDGERPORT_DATABASE_URL, and the command exits
    with the configuration's exit code (2) instead of being started again to fail the same way."""


class DatabaseMissing(StorageUnavailable):
    """The server answers, but the database named does not exist there."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class MigrationError(StorageError):
    """The schema could not be brought up to date."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def statements(self) -> list[str]:
        """The file split into single statements (SQLite executes one at a time); a ``$$``-quoted
        body stays whole."""
        result: list[str] = []
        pending = ""
        for line in self.sql.splitlines(keepends=True):
            if not pending and (not line.strip() or line.lstrip().startswith("--")):
                continue
            pending += line
            # A PostgreSQL function's body is quoted between $$ marks: its semicolons end nothing.
            if pending.count("$$") % 2 == 0 and sqlite3.complete_statement(pending):
                result.append(pending.strip())
                pending = ""
        if pending.strip():
            raise MigrationError(f"migration {self.version:04d}_{self.name}: unterminated SQL")
        return result


@dataclass
class StoreStatistics:
    """What a store counts of its own work since it opened, read by the metrics at each scrape."""

    TRANSACTION_BOUNDS: ClassVar[tuple[float, ...]] = (
        0.001,
        0.0025,
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        1.0,
        5.0,
    )
    """Upper bounds (seconds) of the transaction-time buckets: from a statement answered at
    once to one that waits on a lock or a slow disk; anything longer lands above the last."""

    transactions: int = 0
    """Units of work ended (committed or rolled back) that ran at least one statement."""
    transaction_seconds: float = 0.0
    """Their time, from their start to their end."""
    transaction_buckets: list[int] = field(
        default_factory=lambda: [0] * (len(StoreStatistics.TRANSACTION_BOUNDS) + 1)
    )
    """How many took at most each of :attr:`TRANSACTION_BOUNDS` and more than the one before
    (the last: more than every bound); not cumulative."""
    unavailable: int = 0
    """Statements the database did not answer or refused to run (StorageUnavailable)."""
    waits: int = 0
    """SQLite: transactions that waited for the one writer's turn."""
    wait_seconds: float = 0.0
    listens_lost: int = 0
    """PostgreSQL: times the connection that LISTENs for notifications was lost (and listened
    again on another); 0 on SQLite."""
    connections: int = 0
    """Connections open now (PostgreSQL: the pool's; SQLite: one)."""
    connections_in_use: int = 0
    connections_max: int = 0

    def count_transaction(self, seconds: float) -> None:
        """One more unit of work ended, after ``seconds``."""
        self.transactions += 1
        self.transaction_seconds += seconds
        self.transaction_buckets[bisect_left(self.TRANSACTION_BOUNDS, seconds)] += 1

    def snapshot(self, **now: int) -> StoreStatistics:
        """A copy that later counting leaves as it is, with the gauges of ``now`` set."""
        return replace(self, transaction_buckets=list(self.transaction_buckets), **now)


class Reader(Protocol):
    """What reads: a :class:`Transaction`, or :attr:`Store.autocommit` for a lookup that needs
    no transaction around it."""

    async def fetch(self, sql: str, *args: Any) -> list[Row]: ...

    async def fetch_values(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        """The rows as sequences of their values, in the order the statement selects them: for
        a read of many rows whose dicts would cost more than what is done with them."""
        ...

    async def fetchrow(self, sql: str, *args: Any) -> Row | None: ...

    async def fetchval(self, sql: str, *args: Any) -> Any: ...


class Transaction(Reader, Protocol):
    """One open transaction: everything done through it commits together or not at all."""

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]:
        """The backend, for the few statements the two write differently
        (:func:`first_per_key`)."""
        ...

    row_lock: str
    """Appended to a SELECT, locks the rows it reads until the transaction ends: `` FOR UPDATE``
    on PostgreSQL, nothing on SQLite, whose write transaction holds the whole database."""

    skip_locked: str
    """Appended to a SELECT, locks the rows it reads and leaves out those another transaction
    holds: `` FOR UPDATE SKIP LOCKED`` on PostgreSQL (several processes claim work side by
    side), nothing on SQLite."""
    json_object: str
    """The function building a JSON object from key and value arguments: ``json_build_object``
    on PostgreSQL, ``json_object`` on SQLite."""
    json_array_agg: str
    """The aggregate gathering values into a JSON array (NULL over no rows on PostgreSQL):
    ``json_agg`` on PostgreSQL, ``json_group_array`` on SQLite."""

    async def execute(self, sql: str, *args: Any) -> int:
        """Run a statement; answers the number of rows it changed."""
        ...

    async def notify(self, channel: str) -> None:
        """Wake the listeners of ``channel`` (``Store.listen``) once this transaction commits,
        in every process using the database; nothing happens if it rolls back."""
        ...

    def queue(self, name: str, flush: Flush) -> list[Any]:
        """The items queued under ``name`` in this transaction, to append to: just before the
        transaction commits, ``flush(tx, items)`` writes them in it (the first call's ``flush``
        is the one used). A failing flush rolls the whole transaction back."""
        ...

    async def serialize(self, key: str) -> None:
        """Until this transaction ends, hold ``key``: another transaction serializing on the
        same key waits here until this one commits or rolls back. PostgreSQL takes a
        transaction-level advisory lock on the key's hash (two keys may share one, which only
        makes them wait on each other); SQLite has nothing to do, its write transaction holds
        the whole database. Taking a key again in the same transaction is free."""
        ...

    async def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


Flush: TypeAlias = Callable[[Transaction, list[Any]], Awaitable[None]]


FIRST_PER_KEY_MAX = 200
"""Keys one :func:`first_per_key` statement takes at most (SQLite compounds up to 500)."""


def first_per_key(
    tx: Transaction,
    *,
    select: str,
    key: str,
    order: str,
    quotas: Sequence[tuple[str, int]],
    start: int,
) -> tuple[str, list[Any]]:
    """One statement answering, for each ``(value, n)`` of ``quotas``, the first ``n`` rows in
    ``order`` of ``select`` (a ``SELECT ... FROM ... WHERE ...`` whose numbered parameters all
    lie below ``$start``) whose ``key`` expression equals ``value``, and the parameters it adds.
    Each key is read through its own index range, so a key with a long backlog costs no more
    than one with a single row. On PostgreSQL the rows are locked, those another transaction
    holds left out (``FOR UPDATE SKIP LOCKED``), so processes claim side by side."""
    if not quotas or len(quotas) > FIRST_PER_KEY_MAX:
        raise ValueError(f"first_per_key takes 1 to {FIRST_PER_KEY_MAX} keys")
    if tx.kind == "postgresql":
        sql = (
            f"SELECT picked.* FROM unnest(${start}::text[], ${start + 1}::int[]) AS quota(k, n)"
            f" CROSS JOIN LATERAL ({select} AND {key} = quota.k ORDER BY {order}"
            " LIMIT quota.n FOR UPDATE SKIP LOCKED) AS picked"
        )
        return sql, [[value for value, _ in quotas], [n for _, n in quotas]]
    arms: list[str] = []
    args: list[Any] = []
    for index, (value, n) in enumerate(quotas):
        at = start + 2 * index
        arms.append(f"SELECT * FROM ({select} AND {key} = ${at} ORDER BY {order} LIMIT ${at + 1})")
        args += [value, n]
    return " UNION ALL ".join(arms), args


class CommitQueues:
    """A transaction's queued writes (``Transaction.queue``), flushed just before its commit."""

    def __init__(self) -> None:
        self._queues: dict[str, tuple[Flush, list[Any]]] = {}

    def queue(self, name: str, flush: Flush) -> list[Any]:
        if name not in self._queues:
            self._queues[name] = (flush, [])
        return self._queues[name][1]

    async def flush(self, tx: Transaction) -> None:
        # A flush may queue more (under another name): flush until nothing is left.
        while self._queues:
            name = next(iter(self._queues))
            flush, items = self._queues.pop(name)
            if items:
                await flush(tx, items)


Listener: TypeAlias = Callable[[], None]


class Listeners:
    """The in-process listeners of each channel."""

    def __init__(self) -> None:
        self._by_channel: dict[str, list[Listener]] = {}

    @contextmanager
    def listening(self, channel: str, listener: Listener) -> Iterator[None]:
        self._by_channel.setdefault(channel, []).append(listener)
        try:
            yield
        finally:
            self._by_channel[channel].remove(listener)

    def wake(self, channels: Iterable[str]) -> None:
        for channel in channels:
            for listener in list(self._by_channel.get(channel, ())):
                listener()


class Store(Protocol):
    """A database. ``transaction()`` commits on normal exit and rolls back on any exception."""

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]: ...

    def transaction(
        self, *, background: bool = False, reads: bool = False, durable: bool = True
    ) -> AbstractAsyncContextManager[Transaction]:
        """A transaction; ``background`` marks one of the engine's loops rather than one a
        request waits for. Where the database has one writer (SQLite), a request's transaction
        goes before background ones waiting with it (see ``_sqlite.WriterTurns``).

        ``reads`` marks a unit expected to read only (a GET), which may then cost less: on
        PostgreSQL its reads run each on its own until its first write, which begins the
        transaction (READ COMMITTED gives each statement of a transaction a snapshot of its
        own anyway: only the BEGIN and COMMIT round trips go); on SQLite it begins deferred,
        without the write lock, and one that wrote nothing ends on the event loop.

        ``durable=False`` marks a unit whose writes need outlive the service's process, not
        the machine: a record kept for minutes, whose loss in a power cut or a crash of the
        database's host costs nothing lasting (a DPoP proof's use). Its commit does not wait
        for the disk: on PostgreSQL it commits with ``synchronous_commit`` off (a crash of
        PostgreSQL loses at most its last such commits, never a part of one, and nothing
        else); on SQLite its commit is in the WAL when the block ends, and neither it nor the
        reads after it wait for a sync of the WAL, which the next durable commit makes."""
        ...

    def statistics(self) -> StoreStatistics:
        """Counts of this store's work since it opened, and its connections now."""
        ...

    async def durable(self) -> None:
        """Wait until every commit made so far would survive a power cut. A transaction's block
        is left only then, so what a request answers rests on durable commits; a transaction
        may read others' commits before, though, so what acts outside the database on what it
        read before its block is left (a fan-out's first attempts) waits for this first. On
        PostgreSQL a commit is durable when it ends; on SQLite when its WAL is synced."""
        ...

    @property
    def autocommit(self) -> Reader:
        """Statements each run alone, as their own transaction: one round trip on PostgreSQL
        (no BEGIN or COMMIT), one turn on SQLite. For a single statement that needs nothing
        else to commit with it: a lookup, or one that does its whole work itself (the
        PostgreSQL rate-limit function)."""
        ...

    def listen(self, channel: str, listener: Listener) -> AbstractAsyncContextManager[None]:
        """Call ``listener`` (synchronously, from a trio task) after each commit that notified
        ``channel``, for as long as the context lasts; a commit of this process calls it before
        its transaction's block is left. Wake-ups may merge, come twice or, when the connection
        that listens is lost, go missing: listeners also look for work on a timer."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other processes may serve this database at the same time (PostgreSQL), or
        this one owns it (SQLite: one serving process per file)."""
        ...

    @property
    def holding(self) -> frozenset[str]:
        """The keys this process holds (:meth:`hold`)."""
        ...

    async def hold(self, key: str) -> bool:
        """Mark this process alive under ``key`` until :meth:`let_go` or the process's end;
        answers whether the mark was made now (the first time, or again after it was lost).

        On PostgreSQL the mark is a session advisory lock on ``hashtextextended(key, 0)``
        (the key space of :meth:`Transaction.serialize`) on a connection of its own, with TCP
        keepalives: the server drops it the moment the process dies (within seconds when its
        host does), and another process's ``pg_try_advisory_xact_lock`` on the key then
        succeeds. Called again, it takes the marks again if that connection was lost (raises
        StorageUnavailable if it cannot yet). On SQLite it only names the key: the process
        owns the database."""
        ...

    async def let_go(self, key: str) -> None:
        """End the mark of ``key`` (its process stays)."""
        ...

    async def ping(self) -> None:
        """Raise StorageUnavailable unless the database answers a trivial query."""
        ...

    async def schema_version(self) -> int: ...

    async def migrate(self, migrations: Sequence[Migration] | None = None) -> list[int]:
        """Apply the migrations this database lacks (by default the package's own, in order);
        answers the versions applied."""
        ...
