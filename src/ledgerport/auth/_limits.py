"""Rate limits and the failed-authentication lockout: one interface, three places to count.

A request names the budgets it counts against (:class:`Budget`: a rate limit of the catalog and
who is counted) and asks a :class:`RateLimiter` to take one from each of them at once: either
every budget has room and each is charged, or none is charged and the answer says which budget
refused and for how long. Lockouts lock a key for a while after too many failures.

:class:`MemoryRateLimiter` counts in the process (exact sliding windows); it is the default on
SQLite, where one process serves. Several processes sharing one database share their counts
through the database (``StoreRateLimiter``) or Redis (``RedisRateLimiter``). Time always comes
from the injected clock, so tests set it instead of sleeping.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol, cast

from ledgerport import catalog
from ledgerport.clock import Clock
from ledgerport.storage import Reader, Row

_SWEEP_EVERY = 10_000


@dataclass(frozen=True, slots=True)
class Budget:
    """One caller's budget: the rate limit ``limit`` counted for ``key`` (an IP, an (IP, client)
    pair, an (app, business) pair, ...; the parts as given, compared as a whole)."""

    limit: catalog.RateLimit
    key: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Standing:
    """What a budget holds after a request: ``remaining`` requests, whole again in
    ``reset_in`` seconds (0 when nothing is counted)."""

    limit: int
    remaining: int
    reset_in: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer to a request counted against several budgets at once.

    ``refused_by`` is the first budget (in the order asked) that had no room, and
    ``retry_after`` the seconds until every budget has room again (0 when allowed);
    ``standings`` holds each budget's standing, in the order asked.
    """

    refused_by: catalog.RateLimit | None
    retry_after: int
    standings: tuple[Standing, ...]

    @property
    def allowed(self) -> bool:
        return self.refused_by is None


@dataclass(frozen=True, slots=True)
class Locked:
    """The answer of :meth:`RateLimiter.take_unless_locked` for a locked key: it stays locked
    ``wait`` seconds, and nothing was counted."""

    wait: int


class Lookup(NamedTuple):
    """A read of at most one row that a request makes once it is counted (the token an
    introspection describes): :meth:`RateLimiter.take_unless_locked_then_read` reads it with the
    take, in the take's statement when the counts are kept in the database it reads.

    ``writes`` (PostgreSQL only): data-modifying WITH queries made before the read, which the
    read's ``sql`` may select from (a refresh token's rotation). Each gates itself on the query
    ``ledgerport_allowed``, which has a row only when the take was allowed, so that nothing is
    written for a request refused or locked; made in the take's statement, they are its
    transaction."""

    sql: str
    args: tuple[Any, ...]
    writes: str = ""

    def alone(self) -> str:
        """The statement made after an allowed take of its own: ``ledgerport_allowed`` a row."""
        if not self.writes:
            return self.sql
        return f"WITH ledgerport_allowed AS (SELECT), {self.writes} {self.sql}"


@dataclass(frozen=True, slots=True)
class LockoutRule:
    """``failures`` failures of one key within ``window`` seconds lock it for ``duration``.

    ``name`` tells lockouts apart where they are kept (two rules never share a count)."""

    name: str
    failures: int = catalog.LOCKOUT_FAILURES
    window: float = catalog.LOCKOUT_WINDOW
    duration: float = catalog.LOCKOUT_DURATION


class RateLimiter(Protocol):
    """Where the counts of the rate limits and lockouts are kept."""

    async def take(self, *budgets: Budget) -> Verdict:
        """Count one request against every budget (distinct ones), or, when any of them has no
        room, against none: a request refused by one budget does not use up the others."""
        ...

    async def take_then(self, first: Budget, *then: Budget) -> tuple[Verdict, Verdict | None]:
        """Count one request against ``first``; only when it had room, against ``then`` as
        :meth:`take` does (all of them or none). Answers both verdicts, the second None when
        ``first`` refused. A limiter shared through a database does both in one round trip."""
        ...

    async def take_unless_locked(
        self, rule: LockoutRule, key: tuple[str, ...], *budgets: Budget
    ) -> Verdict | Locked:
        """:class:`Locked` when ``key`` is locked under ``rule`` (nothing counted), otherwise
        :meth:`take` of ``budgets``. A limiter shared through a database does both in one round
        trip."""
        ...

    async def take_then_if_found(
        self, first: Budget, then: tuple[Budget, ...], reader: Reader, lookup: Lookup
    ) -> tuple[Verdict, Verdict | None, Row | None]:
        """:meth:`take_then`, ``then`` counted only when ``lookup`` (read through ``reader``,
        ``Store.autocommit``) finds its row: both verdicts and the row, the second verdict
        and the row None when ``first`` refused, the second None when the lookup found none.
        A limiter kept in the database ``reader`` reads from does it all in one statement."""
        ...

    async def take_unless_locked_then_read(
        self,
        rule: LockoutRule,
        key: tuple[str, ...],
        budgets: tuple[Budget, ...],
        reader: Reader,
        lookup: Lookup,
    ) -> tuple[Verdict | Locked, Row | None]:
        """:meth:`take_unless_locked`, then, when the take was allowed, ``lookup``'s row (None
        when it finds none) read through ``reader`` (``Store.autocommit``); refused or locked,
        the row is None. A limiter kept in the database ``reader`` reads from makes the lookup
        in the take's statement: one round trip for both. The lookup's ``writes`` are made
        only when the take was allowed (in the take's statement there, else after it)."""
        ...

    async def retry_after(self, *budgets: Budget) -> int | None:
        """Seconds until every budget has room for one more request, or None when they have
        room now; counts nothing."""
        ...

    async def hit(self, *budgets: Budget) -> None:
        """Count one event against every budget, room or not (a failure already made)."""
        ...

    async def locked_for(self, rule: LockoutRule, key: tuple[str, ...]) -> int | None:
        """Seconds ``key`` stays locked under ``rule``, or None."""
        ...

    async def failed(self, rule: LockoutRule, key: tuple[str, ...]) -> bool:
        """Record a failure of ``key``; answers True when this failure locks it."""
        ...


async def take_in_turn(
    limiter: RateLimiter, first: Budget, then: tuple[Budget, ...]
) -> tuple[Verdict, Verdict | None]:
    """:meth:`RateLimiter.take_then` as two takes, for a limiter without a cheaper way."""
    verdict = await limiter.take(first)
    if not verdict.allowed:
        return verdict, None
    return verdict, await limiter.take(*then)


async def take_then_if_found_in_turn(
    limiter: RateLimiter, first: Budget, then: tuple[Budget, ...], reader: Reader, lookup: Lookup
) -> tuple[Verdict, Verdict | None, Row | None]:
    """:meth:`RateLimiter.take_then_if_found` as a take, the read, and a take."""
    assert not lookup.writes, "a lookup that writes is made only after a take unless locked"
    verdict = await limiter.take(first)
    if not verdict.allowed:
        return verdict, None, None
    row = await reader.fetchrow(lookup.sql, *lookup.args)
    if row is None:
        return verdict, None, None
    return verdict, await limiter.take(*then), row


async def take_unless_locked_then_read_in_turn(
    limiter: RateLimiter,
    rule: LockoutRule,
    key: tuple[str, ...],
    budgets: tuple[Budget, ...],
    reader: Reader,
    lookup: Lookup,
) -> tuple[Verdict | Locked, Row | None]:
    """:meth:`RateLimiter.take_unless_locked_then_read` as the take, then the read."""
    verdict = await limiter.take_unless_locked(rule, key, *budgets)
    if isinstance(verdict, Locked) or not verdict.allowed:
        return verdict, None
    return verdict, await reader.fetchrow(lookup.alone(), *lookup.args)


async def take_unless_locked_in_turn(
    limiter: RateLimiter, rule: LockoutRule, key: tuple[str, ...], budgets: tuple[Budget, ...]
) -> Verdict | Locked:
    """:meth:`RateLimiter.take_unless_locked` as a look at the lock, then a take."""
    wait = await limiter.locked_for(rule, key)
    if wait is not None:
        return Locked(wait)
    return await limiter.take(*budgets)


class InTurn:
    """The combined takes of :class:`RateLimiter` made of its plain ones, one after the other:
    for a limiter with no cheaper way (in this process, in Redis). A subclass gives the rest of
    :class:`RateLimiter`."""

    def _limiter(self) -> RateLimiter:
        return cast(RateLimiter, self)

    async def take_then(self, first: Budget, *then: Budget) -> tuple[Verdict, Verdict | None]:
        return await take_in_turn(self._limiter(), first, then)

    async def take_unless_locked(
        self, rule: LockoutRule, key: tuple[str, ...], *budgets: Budget
    ) -> Verdict | Locked:
        return await take_unless_locked_in_turn(self._limiter(), rule, key, budgets)

    async def take_unless_locked_then_read(
        self,
        rule: LockoutRule,
        key: tuple[str, ...],
        budgets: tuple[Budget, ...],
        reader: Reader,
        lookup: Lookup,
    ) -> tuple[Verdict | Locked, Row | None]:
        return await take_unless_locked_then_read_in_turn(
            self._limiter(), rule, key, budgets, reader, lookup
        )

    async def take_then_if_found(
        self, first: Budget, then: tuple[Budget, ...], reader: Reader, lookup: Lookup
    ) -> tuple[Verdict, Verdict | None, Row | None]:
        return await take_then_if_found_in_turn(self._limiter(), first, then, reader, lookup)


def ceil_seconds(seconds: float) -> int:
    """A wait as whole seconds for Retry-After: rounded up, at least 1."""
    return max(1, math.ceil(seconds))


def wait_within(seconds: float, window: float) -> int:
    """A wait of ``seconds`` as whole seconds (:func:`ceil_seconds`), never more than the
    ``window`` that counts it (contract.md: a Retry-After never exceeds the window of the limit
    that answered). Counted from hits made at or before now, a wait never needs more; only a
    clock that went back since a hit (this process's, or another's ahead of it) could ask for
    more, and then the window is the most any hit can still count."""
    return min(ceil_seconds(seconds), ceil_seconds(window))


class SlidingWindow:
    """Exact sliding-window counter per key: at most ``limit`` hits in any ``window`` seconds."""

    def __init__(self, clock: Clock, limit: int, window: float) -> None:
        self._clock = clock
        self.limit = limit
        self.window = window
        self._hits: dict[Hashable, deque[float]] = {}
        self._since_sweep = 0

    def _recent(self, key: Hashable, now: float) -> deque[float]:
        hits = self._hits.setdefault(key, deque())
        while hits and hits[0] <= now - self.window:
            hits.popleft()
        return hits

    def retry_after(self, key: Hashable, now: float | None = None) -> int | None:
        """Seconds until ``key`` may hit again, or None when it may hit now (at ``now``, the
        clock's by default)."""
        now = self._clock.now() if now is None else now
        hits = self._recent(key, now)
        if len(hits) < self.limit:
            return None
        # The hit whose leaving brings the count below the limit (the oldest, unless events
        # counted regardless of room took it past the limit).
        return wait_within(hits[len(hits) - self.limit] + self.window - now, self.window)

    def hit(self, key: Hashable, now: float | None = None) -> None:
        now = self._clock.now() if now is None else now
        self._recent(key, now).append(now)
        self._since_sweep += 1
        if self._since_sweep >= _SWEEP_EVERY:
            self._sweep(now)

    def standing(self, key: Hashable, now: float) -> Standing:
        """The limit, what remains of it and the seconds until every hit has left, at ``now``."""
        return Standing(self.limit, self.remaining(key, now), self.reset_in(key, now))

    def take(self, key: Hashable) -> int | None:
        """Count a hit if allowed; answers None when counted, else the seconds to wait."""
        wait = self.retry_after(key)
        if wait is None:
            self.hit(key)
        return wait

    def remaining(self, key: Hashable, now: float | None = None) -> int:
        now = self._clock.now() if now is None else now
        return max(0, self.limit - len(self._recent(key, now)))

    def reset_in(self, key: Hashable, now: float | None = None) -> int:
        """Seconds until every hit of ``key`` has left the window (0 when none is counted)."""
        now = self._clock.now() if now is None else now
        hits = self._recent(key, now)
        return 0 if not hits else wait_within(hits[-1] + self.window - now, self.window)

    def _sweep(self, now: float) -> None:
        self._since_sweep = 0
        for key in [k for k, v in self._hits.items() if not v or v[-1] <= now - self.window]:
            del self._hits[key]


class Lockout:
    """``failures`` failed authentications of one key within ``window`` lock it for ``duration``."""

    def __init__(
        self,
        clock: Clock,
        *,
        failures: int = catalog.LOCKOUT_FAILURES,
        window: float = catalog.LOCKOUT_WINDOW,
        duration: float = catalog.LOCKOUT_DURATION,
    ) -> None:
        self._clock = clock
        self._failures = SlidingWindow(clock, failures, window)
        self._duration = duration
        self._locked_until: dict[Hashable, float] = {}

    def locked_for(self, key: Hashable) -> int | None:
        """Seconds the key stays locked, or None."""
        until = self._locked_until.get(key)
        if until is None:
            return None
        now = self._clock.now()
        if now >= until:
            del self._locked_until[key]
            return None
        return wait_within(until - now, self._duration)

    def failed(self, key: Hashable) -> bool:
        """Record a failure; answers True when this failure locks the key."""
        self._failures.hit(key)
        if self._failures.remaining(key) == 0:
            self._locked_until[key] = self._clock.now() + self._duration
            return True
        return False


class MemoryRateLimiter(InTurn):
    """Counts in this process: exact sliding windows, forgotten on restart (which only forgets
    recent counts). Each call runs without a checkpoint, so a multi-budget take is atomic."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._windows: dict[str, SlidingWindow] = {}
        self._lockouts: dict[str, Lockout] = {}

    def _window(self, limit: catalog.RateLimit) -> SlidingWindow:
        window = self._windows.get(limit.name)
        if window is None:
            window = self._windows[limit.name] = SlidingWindow(
                self._clock, limit.limit, limit.window_seconds
            )
        return window

    def _lockout(self, rule: LockoutRule) -> Lockout:
        lockout = self._lockouts.get(rule.name)
        if lockout is None:
            lockout = self._lockouts[rule.name] = Lockout(
                self._clock, failures=rule.failures, window=rule.window, duration=rule.duration
            )
        return lockout

    def _refusal(
        self, budgets: tuple[Budget, ...], now: float
    ) -> tuple[catalog.RateLimit | None, int]:
        """The first budget without room and the wait until all have room (None, 0 if none)."""
        refused_by: catalog.RateLimit | None = None
        retry_after = 0
        for budget in budgets:
            wait = self._window(budget.limit).retry_after(budget.key, now)
            if wait is not None:
                refused_by = refused_by or budget.limit
                retry_after = max(retry_after, wait)
        return refused_by, retry_after

    async def take(self, *budgets: Budget) -> Verdict:
        # One reading of the clock for the whole take: each budget decided, counted and
        # described at the same instant.
        now = self._clock.now()
        refused_by, retry_after = self._refusal(budgets, now)
        if refused_by is None:
            for budget in budgets:
                self._window(budget.limit).hit(budget.key, now)
        standings = tuple(self._window(b.limit).standing(b.key, now) for b in budgets)
        return Verdict(refused_by, retry_after, standings)

    async def retry_after(self, *budgets: Budget) -> int | None:
        refused_by, retry_after = self._refusal(budgets, self._clock.now())
        return None if refused_by is None else retry_after

    async def hit(self, *budgets: Budget) -> None:
        for budget in budgets:
            self._window(budget.limit).hit(budget.key)

    async def locked_for(self, rule: LockoutRule, key: tuple[str, ...]) -> int | None:
        return self._lockout(rule).locked_for(key)

    async def failed(self, rule: LockoutRule, key: tuple[str, ...]) -> bool:
        return self._lockout(rule).failed(key)


class ScaledRateLimiter:
    """Another limiter, with every rate limit's allowance multiplied by ``factor``: a development
    instance under contract or load tests from one machine (LEDGERPORT_RATE_LIMIT_FACTOR).
    Lockouts are unchanged."""

    def __init__(self, inner: RateLimiter, factor: int) -> None:
        self.inner = inner
        self._factor = factor
        self._limits: dict[catalog.RateLimit, catalog.RateLimit] = {}
        """Each rate limit scaled, made once (the catalog's limits are a few dozen)."""

    def _limit(self, limit: catalog.RateLimit) -> catalog.RateLimit:
        scaled = self._limits.get(limit)
        if scaled is None:
            scaled = self._limits[limit] = replace(limit, limit=limit.limit * self._factor)
        return scaled

    def _scaled(self, budgets: tuple[Budget, ...]) -> tuple[Budget, ...]:
        return tuple(Budget(self._limit(budget.limit), budget.key) for budget in budgets)

    async def take(self, *budgets: Budget) -> Verdict:
        return await self.inner.take(*self._scaled(budgets))

    async def take_then(self, first: Budget, *then: Budget) -> tuple[Verdict, Verdict | None]:
        scaled_first, *scaled_then = self._scaled((first, *then))
        return await self.inner.take_then(scaled_first, *scaled_then)

    async def take_unless_locked(
        self, rule: LockoutRule, key: tuple[str, ...], *budgets: Budget
    ) -> Verdict | Locked:
        return await self.inner.take_unless_locked(rule, key, *self._scaled(budgets))

    async def take_unless_locked_then_read(
        self,
        rule: LockoutRule,
        key: tuple[str, ...],
        budgets: tuple[Budget, ...],
        reader: Reader,
        lookup: Lookup,
    ) -> tuple[Verdict | Locked, Row | None]:
        return await self.inner.take_unless_locked_then_read(
            rule, key, self._scaled(budgets), reader, lookup
        )

    async def take_then_if_found(
        self, first: Budget, then: tuple[Budget, ...], reader: Reader, lookup: Lookup
    ) -> tuple[Verdict, Verdict | None, Row | None]:
        scaled_first, *scaled_then = self._scaled((first, *then))
        return await self.inner.take_then_if_found(scaled_first, tuple(scaled_then), reader, lookup)

    async def retry_after(self, *budgets: Budget) -> int | None:
        return await self.inner.retry_after(*self._scaled(budgets))

    async def hit(self, *budgets: Budget) -> None:
        await self.inner.hit(*self._scaled(budgets))

    async def locked_for(self, rule: LockoutRule, key: tuple[str, ...]) -> int | None:
        return await self.inner.locked_for(rule, key)

    async def failed(self, rule: LockoutRule, key: tuple[str, ...]) -> bool:
        return await self.inner.failed(rule, key)
