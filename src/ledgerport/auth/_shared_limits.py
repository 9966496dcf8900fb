"""Rate limits and lockouts shared by the processes of one database, in the table ``rate_limits``.

Shared counters do not keep every hit's time: a budget's hits are counted in ``LIMIT_BUCKETS``
buckets per window (a second wide for a minute, five seconds for five minutes), with the time of
the count's newest hit. A bucket's hits were made at or before its end, and at or before that
newest hit, and count until a window after the earlier of the two. So no sliding window ever
holds more than the limit, a hit of an older bucket is forgotten at most one bucket later than an
exact window would forget it, and the newest bucket's hits a window after the newest of them:
every bucket that counts ends by then, so a refused caller never waits more than the window,
and Retry-After and RateLimit-Reset never exceed it (contract.md). A row keeps a count's buckets
dense in its ``hits`` column (``dense_hits``) and the end of its newest hit's window in
``expires_at``, when nothing of it counts any more. Lockouts keep the times of their last
failures in ``state``, so they count exactly.

Keys are stored as keyed hashes (IPs, client and user ids never reach the table) under the
root key, which every process of a deployment shares. Time comes from the injected clock: the
buckets are numbered by it, never by the database's clock.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from ledgerport import catalog
from ledgerport.clock import Clock
from ledgerport.keys import Keyring
from ledgerport.storage import Reader, Row, StorageError, Store, Transaction

from ._limits import (
    Budget,
    Locked,
    LockoutRule,
    Lookup,
    Standing,
    Verdict,
    take_in_turn,
    take_then_if_found_in_turn,
    take_unless_locked_in_turn,
    take_unless_locked_then_read_in_turn,
    wait_within,
)

log = logging.getLogger(__name__)

LIMIT_BUCKETS = 60
"""Buckets per window in shared counters; a bucket's width bounds how late a hit is forgotten."""
_SWEEP_INTERVAL = 60.0
"""Seconds between two deletions of the rows that no longer count, per process."""
KEYS_KEPT = 10_000
"""Stored keys a limiter keeps (:meth:`StoreRateLimiter._key`), the oldest dropped first."""


class BucketCount:
    """The hits of one budget and key per bucket, oldest first, as seen at ``now``.

    A hit at ``t`` falls in bucket ``ceil(t / width)``, which covers the times
    ``(index - 1) * width < t <= index * width``. ``newest`` is the time of the count's newest
    hit (None: not known, as in a count its row kept before it was kept): a bucket's hits were
    made at or before ``last(index)``, the earlier of its end and ``newest``, and the bucket
    counts while ``last(index) > now - window``. Buckets that no longer count are dropped on
    reading.
    """

    def __init__(
        self,
        limit: catalog.RateLimit,
        hits: Iterable[Sequence[int]],
        now: float,
        newest: float | None = None,
    ) -> None:
        self.limit = limit.limit
        self.window = float(limit.window_seconds)
        self.width = self.window / LIMIT_BUCKETS
        self.now = now
        self.newest = newest
        start = now - self.window
        self.hits = sorted((int(i), int(n)) for i, n in hits if self.last(int(i)) > start)

    def last(self, index: int) -> float:
        """When the last of bucket ``index``'s hits was made at the latest."""
        end = index * self.width
        return end if self.newest is None else min(end, self.newest)

    @property
    def total(self) -> int:
        return sum(n for _, n in self.hits)

    def wait(self) -> int | None:
        """Seconds until one more hit fits (until enough of the oldest buckets have left the
        window), or None when it fits now."""
        excess = self.total - self.limit + 1
        if excess <= 0:
            return None
        leaving = zip(self.hits, itertools.accumulate(n for _, n in self.hits), strict=True)
        index = next(i for (i, _), gone in leaving if gone >= excess)
        return wait_within(self.last(index) + self.window - self.now, self.window)

    def add(self) -> None:
        index = math.ceil(self.now / self.width)
        counts = dict(self.hits)
        counts[index] = counts.get(index, 0) + 1
        self.hits = sorted(counts.items())
        self.newest = self.now if self.newest is None else max(self.newest, self.now)

    def standing(self) -> Standing:
        return Standing(self.limit, max(0, self.limit - self.total), self.reset_in())

    def reset_in(self) -> int:
        """Seconds until the newest bucket stops counting (0 when nothing counts)."""
        if not self.hits:
            return 0
        return wait_within(self.expires_at() - self.now, self.window)

    def expires_at(self) -> float:
        """When nothing of this count counts any more: what its row keeps in ``expires_at``,
        from which :func:`newest_of` reads the newest hit's time back."""
        return self.last(self.hits[-1][0]) + self.window if self.hits else self.now


def newest_of(limit: catalog.RateLimit, expires_at: float) -> float:
    """The time of the newest hit of a count whose row says nothing of it counts after
    ``expires_at`` (:meth:`BucketCount.expires_at`): a window before. A count kept before the
    newest hit's time was gives its newest bucket's end, as it counted then."""
    return expires_at - float(limit.window_seconds)


Kept = tuple[str, float]
"""What a row keeps of a count (its ``hits``) or a lockout (its ``state``), with its
``expires_at``."""


def kept_count(limit: catalog.RateLimit, kept: Kept | None, now: float) -> BucketCount:
    """The count a row keeps (``hits`` and ``expires_at``; None: no row), as seen at ``now``."""
    if kept is None:
        return BucketCount(limit, [], now)
    hits, expires_at = kept
    return BucketCount(limit, hits_of(hits), now, newest_of(limit, float(expires_at)))


def dense_hits(hits: Sequence[tuple[int, int]]) -> str:
    """(bucket, hits) pairs, oldest first, as a row's ``hits`` keeps them: the first bucket,
    then its hits and those of every bucket after it up to the newest (0 for a bucket without
    any), as JSON; ``ledgerport_count_limits`` (migration 0025) writes the same text."""
    if not hits:
        return "[]"
    first = hits[0][0]
    dense = [0] * (hits[-1][0] - first + 2)
    dense[0] = first
    for index, n in hits:
        dense[index - first + 1] = n
    return orjson.dumps(dense).decode()


def hits_of(stored: str) -> list[tuple[int, int]]:
    """The (bucket, hits) pairs of a row's ``hits`` (``dense_hits``), oldest first; none for
    an empty text."""
    dense = orjson.loads(stored) if stored else []
    return [(dense[0] + i, n) for i, n in enumerate(dense[1:]) if n]


def _counting_from(first: int, width: float, start: float) -> int:
    """The first bucket from ``first`` on whose end is after ``start``: a count whose newest
    hit is after ``start`` holds in it and in every bucket after it hits that still count."""
    index = max(first, math.floor(start / width))
    while index * width <= start:
        index += 1
    while index > first and (index - 1) * width > start:
        index -= 1
    return index


Dense = tuple[int, list[int]]
"""A count's hits as a row keeps them: the first bucket with hits, and the hits of it and of
each bucket after it up to the newest with hits (none: an empty list)."""


def merged_count(
    limit: catalog.RateLimit, kept: Kept | None, added: Mapping[int, int], now: float
) -> tuple[Dense, str, float]:
    """A row's count (``kept``; None: no row) with ``added`` (hits a bucket, fewer where
    negative, none below zero), counted elsewhere at or before ``now``: its hits as seen at
    ``now``, dense, and what the row keeps of them (``dense_hits``, ``expires_at``). What
    ``kept_count``, the hits added and a ``BucketCount`` of the result make, on the row's
    dense hits as they are kept: a settlement merges a row for each budget a process counted,
    and a budget counted all through its window holds a bucket of hits for every second."""
    window = float(limit.window_seconds)
    width = window / LIMIT_BUCKETS
    start = now - window
    stored, expires_at = kept if kept is not None else ("", 0.0)
    # Bucket first + j holds counts[j]. The stored hits count while made after start, by the
    # count's newest hit as kept; with the added ones, the newest is now or later.
    first, counts = 0, []
    if stored and newest_of(limit, float(expires_at)) > start:
        dense = orjson.loads(stored)
        if len(dense) > 1:
            first = _counting_from(dense[0], width, start)
            counts = dense[1 + first - dense[0] :]
    for index, n in added.items():
        if not counts:
            first, counts = index, [0]
        elif index < first:
            counts[:0] = [0] * (first - index)
            first = index
        elif index >= first + len(counts):
            counts.extend([0] * (index - first - len(counts) + 1))
        counts[index - first] = max(0, counts[index - first] + n)
    # Added hits that no longer count (a clock a window behind) are dropped, then the empty
    # buckets at either end.
    if counts:
        drop = _counting_from(first, width, start) - first
        counts, first = counts[drop:], first + drop
    low = next((j for j, n in enumerate(counts) if n), len(counts))
    high = len(counts)
    while high > low and not counts[high - 1]:
        high -= 1
    if low == high:
        return (0, []), "[]", now
    counts, first = counts[low:high], first + low
    newest = max(newest_of(limit, float(expires_at)), now)
    ends = min((first + len(counts) - 1) * width, newest) + window
    return (first, counts), orjson.dumps([first, *counts]).decode(), ends


def refusal(counts: Sequence[BucketCount], budgets: Sequence[Budget]) -> Verdict | None:
    """The verdict refusing a take when any count has no room, else None."""
    waits = [count.wait() for count in counts]
    refused = [(budget, wait) for budget, wait in zip(budgets, waits, strict=True) if wait]
    if not refused:
        return None
    return Verdict(
        refused[0][0].limit,
        max(wait for _, wait in refused),
        tuple(count.standing() for count in counts),
    )


class FailureLog:
    """A lockout's state for one key: the times of its last failures and the lock's end."""

    def __init__(self, rule: LockoutRule, failures: Iterable[float], until: float, now: float):
        self.rule = rule
        self.now = now
        self.failures = [t for t in failures if t > now - rule.window]
        self.until = until

    def locked_for(self) -> int | None:
        if self.until <= self.now:
            return None
        return wait_within(self.until - self.now, self.rule.duration)

    def fail(self) -> bool:
        """Record a failure at ``now``; answers True when it locks the key."""
        self.failures = [*self.failures, self.now][-self.rule.failures :]
        if len(self.failures) >= self.rule.failures:
            self.until = self.now + self.rule.duration
            return True
        return False

    def expires_at(self) -> float:
        return max(self.until, self.failures[-1] + self.rule.window if self.failures else 0.0)


def stored_key(keyring: Keyring, name: str, key: tuple[str, ...]) -> str:
    """The key a budget or lockout is kept under: a keyed hash of its name and key parts."""
    return keyring.hash_token(json.dumps([name, *key]))[:32]


def _count_arguments(
    budgets: Sequence[Budget], keys: Sequence[tuple[str, str]]
) -> tuple[list[str], list[str], list[int], list[float]]:
    """``ledgerport_count_limits``' budgets, keys, limits and windows."""
    return (
        [name for name, _ in keys],
        [key for _, key in keys],
        [b.limit.limit for b in budgets],
        [float(b.limit.window_seconds) for b in budgets],
    )


def _verdict(budgets: Sequence[Budget], answer: Sequence[float]) -> Verdict:
    """The verdict in ``ledgerport_count_limits``' answer for ``budgets``."""
    refused, wait = int(answer[0]), int(answer[1])
    standings = tuple(
        Standing(b.limit.limit, int(answer[2 + 2 * i]), int(answer[3 + 2 * i]))
        for i, b in enumerate(budgets)
    )
    if refused:
        return Verdict(budgets[refused - 1].limit, wait, standings)
    return Verdict(None, 0, standings)


def _beside(lookup: Lookup) -> str:
    """The join that puts ``lookup``'s row (at most one) beside a count's one row as
    ``lookup.*``, with ``ledgerport_found`` true when there is one (a row of NULLs is told from
    none)."""
    return (
        " LEFT JOIN LATERAL (SELECT true AS ledgerport_found, found.* FROM"
        f" ({lookup.sql}) AS found LIMIT 1) AS lookup ON true"
    )


@functools.lru_cache(maxsize=256)
def _after_parameters(sql: str, count: int) -> str:
    """``sql`` (this module's own, with no ``$`` but its parameters') with each ``$n`` made
    ``$(n + count)``: its parameters placed after ``count`` others. Kept: the texts are this
    module's, a few per kind of lookup, and the rewrite is made for every request counted."""
    return re.sub(r"\$(\d+)", lambda m: f"${int(m.group(1)) + count}", sql)


class StoreRateLimiter:
    """Counts in the database's ``rate_limits`` table, shared by every process using it.

    A take locks the rows of all its budgets in one statement (an upsert, in a fixed order so two
    takes never wait on each other in a cycle), decides, and writes the new counts in the same
    transaction: concurrent requests from several processes see each other's hits.
    """

    KEYS_KEPT = KEYS_KEPT

    def __init__(self, store: Store, clock: Clock, keyring: Keyring) -> None:
        self._store = store
        self._clock = clock
        self._keyring = keyring
        self._next_sweep = 0.0
        self._stored_keys: dict[tuple[str, tuple[str, ...]], str] = {}

    def _key(self, name: str, key: tuple[str, ...]) -> str:
        """``stored_key`` of a budget or lockout, kept: a request's budgets are those of the
        requests before it from the same address and client, and a settlement names each
        budget the requests counted again (a JSON text and a keyed hash each time)."""
        kept = self._stored_keys.get((name, key))
        if kept is None:
            if len(self._stored_keys) >= self.KEYS_KEPT:
                del self._stored_keys[next(iter(self._stored_keys))]
            kept = self._stored_keys[name, key] = stored_key(self._keyring, name, key)
        return kept

    async def _lock_rows(
        self, tx: Transaction, keys: Sequence[tuple[str, str]], column: str
    ) -> dict[Any, Kept]:
        """The stored ``column`` (``hits`` for a count, ``state`` for a lockout) of ``keys``
        (budget, key), with its ``expires_at``, rows created and locked for this transaction.
        The dummy update is what takes the lock of a row that already exists."""
        ordered = sorted(set(keys))
        values = ", ".join(f"(${2 * i + 1}, ${2 * i + 2}, '', 0)" for i in range(len(ordered)))
        rows = await tx.fetch(
            f"INSERT INTO rate_limits (budget, key, state, expires_at) VALUES {values}"
            " ON CONFLICT (budget, key) DO UPDATE SET budget = excluded.budget"
            f" RETURNING budget, key, {column}, expires_at",
            *[part for pair in ordered for part in pair],
        )
        return {(row["budget"], row["key"]): (row[column], row["expires_at"]) for row in rows}

    async def _read_hits(self, reader: Reader, keys: Sequence[tuple[str, str]]) -> dict[Any, Kept]:
        where = " OR ".join(
            f"(budget = ${2 * i + 1} AND key = ${2 * i + 2})" for i in range(len(keys))
        )
        rows = await reader.fetch(
            f"SELECT budget, key, hits, expires_at FROM rate_limits WHERE {where}",
            *[part for pair in keys for part in pair],
        )
        return {(row["budget"], row["key"]): (row["hits"], row["expires_at"]) for row in rows}

    async def _write(
        self, tx: Transaction, column: str, rows: Sequence[tuple[str, str, str, float]]
    ) -> None:
        if tx.kind == "postgresql":
            # One statement for all the rows (a settlement writes tens of them), not one each.
            if rows:
                budgets, keys, values, expiries = (list(part) for part in zip(*rows, strict=True))
                await tx.execute(
                    f"UPDATE rate_limits AS r SET {column} = w.value, expires_at = w.expires_at"
                    " FROM unnest($1::text[], $2::text[], $3::text[], $4::float8[])"
                    " AS w(budget, key, value, expires_at)"
                    " WHERE r.budget = w.budget AND r.key = w.key",
                    budgets,
                    keys,
                    values,
                    expiries,
                )
            return
        await tx.executemany(
            f"UPDATE rate_limits SET {column} = $3, expires_at = $4 WHERE budget = $1 AND key = $2",
            rows,
        )

    def _keys(self, budgets: Sequence[Budget]) -> list[tuple[str, str]]:
        return [(b.limit.name, self._key(b.limit.name, b.key)) for b in budgets]

    @staticmethod
    def _counts(
        budgets: Sequence[Budget],
        keys: Sequence[tuple[str, str]],
        stored: dict[Any, Kept],
        now: float,
    ) -> list[BucketCount]:
        return [kept_count(b.limit, stored.get(k), now) for b, k in zip(budgets, keys, strict=True)]

    async def _count(self, budgets: Sequence[Budget], *, always: bool) -> Verdict:
        now = self._clock.now()
        keys = self._keys(budgets)
        if self._store.kind == "postgresql":
            verdict = await self._count_in_postgres(budgets, keys, now, always=always)
            await self._sweep(now)
            return verdict
        async with self._store.transaction() as tx:
            counts = self._counts(budgets, keys, await self._lock_rows(tx, keys, "hits"), now)
            refused = None if always else refusal(counts, budgets)
            if refused is None:
                for count in counts:
                    count.add()
                await self._write(
                    tx,
                    "hits",
                    [
                        (name, key, dense_hits(count.hits), count.expires_at())
                        for (name, key), count in zip(keys, counts, strict=True)
                    ],
                )
        await self._sweep(now)
        if refused is not None:
            return refused
        return Verdict(None, 0, tuple(count.standing() for count in counts))

    async def _count_in_postgres(
        self,
        budgets: Sequence[Budget],
        keys: Sequence[tuple[str, str]],
        now: float,
        *,
        always: bool,
    ) -> Verdict:
        """The same counting in one statement (``ledgerport_count_limits``, migrations 0017,
        0023, 0024 and 0025): one round trip instead of a transaction's four."""
        answer = await self._store.autocommit.fetchval(
            "SELECT ledgerport_count_limits($1, $2, $3, $4, $5, $6, $7)",
            "hit" if always else "take",
            now,
            LIMIT_BUCKETS,
            *_count_arguments(budgets, keys),
        )
        return _verdict(budgets, answer)

    async def take_then(self, first: Budget, *then: Budget) -> tuple[Verdict, Verdict | None]:
        if self._store.kind != "postgresql":
            return await take_in_turn(self, first, then)
        now = self._clock.now()
        first_keys, then_keys = self._keys([first]), self._keys(then)
        # The second count runs only when the first allowed (a CASE is evaluated lazily, and a
        # subquery calling a volatile function is evaluated once, never folded into the CASE).
        row = await self._store.autocommit.fetchrow(
            "SELECT counted.first, CASE WHEN counted.first[1] = 0 THEN"
            " ledgerport_count_limits('take', $1, $2, $7, $8, $9, $10) END AS then"
            " FROM (SELECT ledgerport_count_limits('take', $1, $2, $3, $4, $5, $6) AS first)"
            " AS counted",
            now,
            LIMIT_BUCKETS,
            *_count_arguments([first], first_keys),
            *_count_arguments(then, then_keys),
        )
        assert row is not None
        await self._sweep(now)
        verdict = _verdict([first], row["first"])
        return verdict, None if row["then"] is None else _verdict(then, row["then"])

    async def take_then_if_found(
        self, first: Budget, then: tuple[Budget, ...], reader: Reader, lookup: Lookup
    ) -> tuple[Verdict, Verdict | None, Row | None]:
        if self._store.kind != "postgresql" or reader is not self._store.autocommit:
            return await take_then_if_found_in_turn(self, first, then, reader, lookup)
        assert not lookup.writes, "a lookup that writes is made only after a take unless locked"
        now = self._clock.now()
        # As take_then, the second count also waiting for the lookup's row (the lookup keeps
        # its parameters, the counts' come after them; see _take_unless_locked_in_postgres).
        counts = _after_parameters(
            "SELECT counted.first AS ledgerport_first, CASE WHEN counted.first[1] = 0"
            " AND lookup.ledgerport_found THEN"
            " ledgerport_count_limits('take', $1, $2, $7, $8, $9, $10) END AS ledgerport_then,"
            " lookup.*"
            " FROM (SELECT ledgerport_count_limits('take', $1, $2, $3, $4, $5, $6) AS first)"
            " AS counted",
            len(lookup.args),
        )
        row = await self._store.autocommit.fetchrow(
            counts + _beside(lookup),
            *lookup.args,
            now,
            LIMIT_BUCKETS,
            *_count_arguments([first], self._keys([first])),
            *_count_arguments(then, self._keys(then)),
        )
        assert row is not None
        await self._sweep(now)
        verdict = _verdict([first], row.pop("ledgerport_first"))
        counted, found = row.pop("ledgerport_then"), row.pop("ledgerport_found")
        if not verdict.allowed or not found:
            return verdict, None, None
        return verdict, _verdict(then, counted), row

    async def take(self, *budgets: Budget) -> Verdict:
        return await self._count(budgets, always=False)

    async def take_unless_locked(
        self, rule: LockoutRule, key: tuple[str, ...], *budgets: Budget
    ) -> Verdict | Locked:
        if self._store.kind != "postgresql":
            return await take_unless_locked_in_turn(self, rule, key, budgets)
        verdict, _ = await self._take_unless_locked_in_postgres(rule, key, budgets, None)
        return verdict

    async def take_unless_locked_then_read(
        self,
        rule: LockoutRule,
        key: tuple[str, ...],
        budgets: tuple[Budget, ...],
        reader: Reader,
        lookup: Lookup,
    ) -> tuple[Verdict | Locked, Row | None]:
        if self._store.kind != "postgresql" or reader is not self._store.autocommit:
            return await take_unless_locked_then_read_in_turn(
                self, rule, key, budgets, reader, lookup
            )
        return await self._take_unless_locked_in_postgres(rule, key, budgets, lookup)

    async def unless_locked_read(
        self, rule: LockoutRule, key: tuple[str, ...], reader: Reader, lookup: Lookup
    ) -> tuple[Locked | None, Row | None]:
        """:class:`Locked` when ``key`` is locked under ``rule``, else None and ``lookup``'s
        row, its writes made only when it is not locked: the read of a request counted
        elsewhere (in the process, :class:`~ledgerport.auth.SettlingRateLimiter`). One
        statement on PostgreSQL, as :meth:`take_unless_locked_then_read` makes it."""
        if self._store.kind != "postgresql" or reader is not self._store.autocommit:
            wait = await self.locked_for(rule, key)
            if wait is not None:
                return Locked(wait), None
            return None, await reader.fetchrow(lookup.alone(), *lookup.args)
        verdict, row = await self._take_unless_locked_in_postgres(
            rule, key, (), lookup, counting=False
        )
        return (verdict if isinstance(verdict, Locked) else None), row

    async def _take_unless_locked_in_postgres(
        self,
        rule: LockoutRule,
        key: tuple[str, ...],
        budgets: tuple[Budget, ...],
        lookup: Lookup | None,
        *,
        counting: bool = True,
    ) -> tuple[Verdict | Locked, Row | None]:
        """One statement: the lock, the budgets when it is not locked, and ``lookup``'s row
        (read whatever the verdict, and answered only when the take was allowed; its writes
        made only then). Not ``counting``, the take is allowed whenever the key is not locked
        (the request is counted elsewhere)."""
        now = self._clock.now()
        # The lock's end is read from its state (``failed`` writes it as JSON, ``until`` in
        # seconds of the injected clock) by the same comparison as FailureLog.locked_for; the
        # budgets are counted only when it is not locked (the CASE, as in take_then).
        count = (
            "ledgerport_count_limits('take', $3, $4, $5, $6, $7, $8)"
            if counting
            else "ARRAY[0, 0]::float8[]"
        )
        sql = (
            "SELECT lock.state AS ledgerport_lock_state, CASE WHEN"
            " COALESCE((NULLIF(lock.state, '')::jsonb ->> 'until')::float8, 0) <= $3"
            f" THEN {count} END AS ledgerport_counted{{lookup_columns}}"
            " FROM (SELECT (SELECT state FROM rate_limits WHERE budget = $1 AND key = $2)"
            " AS state OFFSET 0) AS lock"
        )
        args: tuple[Any, ...] = (rule.name, self._key(rule.name, key), now)
        if counting:
            args = (*args, LIMIT_BUCKETS, *_count_arguments(budgets, self._keys(budgets)))
        if lookup is None:
            sql = sql.format(lookup_columns="")
        elif lookup.writes:
            # The count first (a query calling a volatile function is made once, whoever reads
            # it), then the writes, each gated on ledgerport_allowed, then the read beside the
            # count's row; one statement, so the count and the writes are one transaction.
            sql = (
                "WITH ledgerport_count AS ("
                + _after_parameters(sql.format(lookup_columns=""), len(lookup.args))
                + "), ledgerport_allowed AS (SELECT FROM ledgerport_count"
                " WHERE ledgerport_counted[1] = 0), "
                + lookup.writes
                + " SELECT ledgerport_count.*, lookup.* FROM ledgerport_count"
                + _beside(lookup)
            )
            args = (*lookup.args, *args)
        else:
            # The lookup keeps its own parameters ($1...); the count's come after them. Its
            # row is joined beside the one row of the count (LIMIT 1: the count is made once),
            # marked so that a row of NULLs is told from no row.
            sql = _after_parameters(
                sql.format(lookup_columns=", lookup.*"), len(lookup.args)
            ) + _beside(lookup)
            args = (*lookup.args, *args)
        row = await self._store.autocommit.fetchrow(sql, *args)
        assert row is not None
        await self._sweep(now)
        state, counted = row.pop("ledgerport_lock_state"), row.pop("ledgerport_counted")
        if counted is None:
            wait = self._log(rule, state, now).locked_for()
            assert wait is not None, "the lock's state reads as locked in SQL and in Python"
            return Locked(wait), None
        verdict = _verdict(budgets, counted)
        if lookup is None or not verdict.allowed or not row.pop("ledgerport_found"):
            return verdict, None
        return verdict, row

    async def retry_after(self, *budgets: Budget) -> int | None:
        now = self._clock.now()
        keys = self._keys(budgets)
        rows = await self._read_hits(self._store.autocommit, keys)
        verdict = refusal(self._counts(budgets, keys, rows, now), budgets)
        return None if verdict is None else verdict.retry_after

    async def hit(self, *budgets: Budget) -> None:
        await self._count(budgets, always=True)

    async def add_hits(
        self, counted: Sequence[tuple[Budget, Mapping[int, int]]]
    ) -> list[list[tuple[int, int]]]:
        """:meth:`merge_hits`, each budget's hits answered as (bucket, hits) pairs, oldest
        first, the empty buckets left out."""
        return [
            [(first + j, n) for j, n in enumerate(counts) if n]
            for first, counts in await self.merge_hits(counted)
        ]

    async def merge_hits(self, counted: Sequence[tuple[Budget, Mapping[int, int]]]) -> list[Dense]:
        """Add hits counted elsewhere (in a process, :class:`~ledgerport.auth.
        SettlingRateLimiter`): for each budget, the hits to add in each bucket (fewer where
        negative, none below zero). Answers each budget's hits as its row holds them now,
        dense, in the order given; the buckets no longer counting are dropped. One
        transaction, its rows locked in (budget, key) order as ``_lock_rows`` always locks
        them; with nothing to add, one read."""
        now = self._clock.now()
        keys = self._keys([budget for budget, _ in counted])
        if not any(added for _, added in counted):
            read = await self._read_hits(self._store.autocommit, keys)
            return [
                merged_count(budget.limit, read.get(key), {}, now)[0]
                for (budget, _), key in zip(counted, keys, strict=True)
            ]
        merged = []
        async with self._store.transaction() as tx:
            stored = await self._lock_rows(tx, keys, "hits")
            rows = []
            for (budget, added), (name, key) in zip(counted, keys, strict=True):
                hits, dense, expires_at = merged_count(budget.limit, stored[name, key], added, now)
                if added:
                    rows.append((name, key, dense, expires_at))
                merged.append(hits)
            await self._write(tx, "hits", rows)
        await self._sweep(now)
        return merged

    def _log(self, rule: LockoutRule, state: str | None, now: float) -> FailureLog:
        stored = json.loads(state) if state else {}
        return FailureLog(rule, stored.get("failures", []), stored.get("until", 0.0), now)

    async def locked_for(self, rule: LockoutRule, key: tuple[str, ...]) -> int | None:
        now = self._clock.now()
        state = await self._store.autocommit.fetchval(
            "SELECT state FROM rate_limits WHERE budget = $1 AND key = $2",
            rule.name,
            self._key(rule.name, key),
        )
        return self._log(rule, state, now).locked_for()

    async def failed(self, rule: LockoutRule, key: tuple[str, ...]) -> bool:
        now = self._clock.now()
        stored = (rule.name, self._key(rule.name, key))
        async with self._store.transaction() as tx:
            state, _ = (await self._lock_rows(tx, [stored], "state"))[stored]
            log = self._log(rule, state, now)
            locked = log.fail()
            state = json.dumps({"failures": log.failures, "until": log.until})
            await self._write(tx, "state", [(*stored, state, log.expires_at())])
        await self._sweep(now)
        return locked

    async def _sweep(self, now: float) -> None:
        """Delete, at most once a minute, the rows whose counts no longer count.

        On PostgreSQL rows another transaction holds are skipped (they are in use, and waiting
        for them could deadlock with a take locking them in another order). It follows the
        caller's commit: its failure is only told, never the caller's (hits settled again
        because of it would count twice); the rows go at the next sweep.
        """
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_INTERVAL
        skip_locked = " FOR UPDATE SKIP LOCKED" if self._store.kind == "postgresql" else ""
        try:
            async with self._store.transaction() as tx:
                await tx.execute(
                    "DELETE FROM rate_limits WHERE (budget, key) IN"
                    f" (SELECT budget, key FROM rate_limits WHERE expires_at < $1{skip_locked})",
                    now,
                )
        except StorageError as exc:
            log.warning("rate limits: deleting the counts that no longer count: %s", exc)
