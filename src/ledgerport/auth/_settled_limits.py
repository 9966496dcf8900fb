"""Rate limits counted in the process and settled in the database in batches.

:class:`StoreRateLimiter` counts every request in the database, in the statement that reads
what the request needs: exact across processes, but each count locks and writes its rows, which
costs PostgreSQL more than most requests' own work. :class:`SettlingRateLimiter` counts the
large budgets (``LOCAL_FROM`` a window and more: the API's, the per-client and per-IP ceilings of
the OAuth endpoints) in the process instead, and settles them:

- Each process keeps a view of every budget it counts: the budget's hits as its row held them
  when the process last settled it, and the process's own hits since.
- A take is counted in the process when every budget of it has room in the view for the take
  and a margin (a tenth of the limit, ``MARGIN``), and the process holds fewer than a slice
  (a twentieth, ``SLICE``) of unsettled hits of each. Nothing is read or written for it.
- Otherwise, near a limit (and for the small budgets, the lockouts, and the lock a take looks
  at), the take is made in the database as :class:`StoreRateLimiter` makes it, after the
  process's unsettled hits of its budgets are added to their rows.
- Every ``SETTLE_EVERY`` seconds the process adds its unsettled hits to their rows, in one
  transaction, and takes each row's count back into its view.

**What this leaves exact and what it does not.**

- One process alone counts exactly as :class:`StoreRateLimiter` does: its view is the whole
  count, and within the margin of a limit it counts in the database.
- A view is taken from the budget's row whenever the process settles the budget (every
  ``SETTLE_EVERY`` seconds while it holds hits of it) and before each take of it counted in
  the database. What it misses is what the other processes counted since.
- A take in the process goes past a limit only through a view that missed more than the
  margin: the process takes at most a slice on it before its next settlement shows it the
  count, and from then on, near the limit, counts in the database, which misses only what the
  others hold unsettled (under a slice each). So at any moment a window holds at most its
  limit and a slice (a twentieth) for each process: 10% more with two processes, and only
  while they race for the last of a budget. Three processes taking in random bursts went at
  most two slices past (``test_settled_limits.py`` holds them to three).
- A process that starts knows nothing of the counts yet: the same slice at most on a budget
  another process had all but used up.
- ``RateLimit-Remaining`` is this process's view: with several processes it is high by what
  the others counted that the view misses.
- Lockouts, and the small budgets that guard against guessing (30 a minute per IP without a
  client, registration's, the user codes', the device flow's, function uploads), are always
  counted in the database; so is the look at a lock before a take.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import trio

from ledgerport.clock import Clock
from ledgerport.storage import Reader, Row, StorageError, StorageUnavailable

from ._limits import Budget, Locked, LockoutRule, Lookup, Standing, Verdict, wait_within
from ._shared_limits import LIMIT_BUCKETS, StoreRateLimiter

log = logging.getLogger(__name__)

LOCAL_FROM = 300
"""The smallest limit (hits a window) counted in the process; smaller ones are always counted
in the database."""
SLICE = 20
"""A process holds at most ``limit // SLICE`` unsettled hits of a budget."""
MARGIN = 10
"""A take is counted in the process only while its view leaves ``limit // MARGIN`` more."""
SETTLE_EVERY = 0.1
"""Seconds between two settlements of a process's unsettled hits."""
SETTLE_CHUNK = 500
"""Budgets settled in one transaction: a statement's parameters stay well under PostgreSQL's
limit however many budgets a process holds unsettled (after an outage of the database)."""
SETTLE_TIMEOUT = 10.0
"""Seconds a settlement may take before it counts as failed (its hits kept to settle again)."""
_FAR = 4 * LIMIT_BUCKETS
"""Buckets (four windows) past which a view keeps no zeros between a hit and those it holds."""
_SWEEP_EVERY = 1.0
"""Seconds between two sweeps of the views whose hits no longer count."""


@dataclass(frozen=True, slots=True)
class SettlementStatistics:
    """What a process's settlements have done since it started (``ledgerport_rate_limit_*``)."""

    settlements: int
    """Transactions that added hits to the rows (or read views back)."""
    failures: int
    """Settlements that failed; their hits were kept for a later one."""
    hits: int
    """Hits counted in the process and added to the rows."""
    views: int
    """Budgets the process keeps a view of now."""


class _View:
    """What this process knows of one budget's count: ``counts``, the hits of bucket
    ``first`` and of each bucket after it (oldest first, as a row keeps them dense), as the
    budget's row held them when last settled, with this process's hits since; ``unsettled``
    the process's own hits not yet added to the row (by bucket), ``owed`` those and the ones
    being added now; ``newest`` the latest its hits can have been made (the last settlement's
    time, or this process's last hit), which ends the newest bucket as ``BucketCount`` ends
    it."""

    __slots__ = ("budget", "counts", "first", "newest", "owed", "total", "unsettled", "width")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.width = budget.limit.window_seconds / LIMIT_BUCKETS
        self.first = 0
        self.counts: deque[int] = deque()
        self.total = 0
        self.unsettled: dict[int, int] = {}
        self.owed = 0
        self.newest = 0.0

    def _last(self, index: int) -> float:
        return min(index * self.width, self.newest)

    def expire(self, now: float) -> None:
        """Drop the buckets that no longer count at ``now`` (``BucketCount``'s rule)."""
        start = now - self.budget.limit.window_seconds
        counts = self.counts
        while counts and self._last(self.first) <= start:
            self.total -= counts.popleft()
            self.first += 1

    def add(self, index: int, n: int) -> None:
        counts = self.counts
        if counts and index - (self.first + len(counts)) > _FAR:
            # Every bucket held ended windows before this hit's: none counts any more (and the
            # buckets between are not kept as zeros).
            self.total -= sum(counts)
            counts.clear()
        if not counts:
            self.first = index
            counts.append(n)
        elif index < self.first:
            if self.first - index > _FAR:
                return  # windows older than every bucket held: it counts no more
            counts.extendleft(itertools.repeat(0, self.first - index - 1))
            counts.appendleft(n)
            self.first = index
        else:
            at = index - self.first
            if at >= len(counts):
                counts.extend(itertools.repeat(0, at - len(counts) + 1))
            counts[at] += n
        self.total += n

    def count(self, now: float, n: int) -> None:
        """This process's ``n`` hits (fewer when negative) at ``now``, to settle."""
        index = math.ceil(now / self.width)
        self.add(index, n)
        self.unsettled[index] = self.unsettled.get(index, 0) + n
        self.owed += n
        self.newest = max(self.newest, now)

    def settled(self, first: int, counts: list[int], now: float) -> None:
        """The row's hits as settled at ``now`` (made by then): ``counts`` of bucket ``first``
        and each one after it, and the unsettled hits counted since on top."""
        self.first = first
        self.counts = deque(counts)
        self.total = sum(counts)
        self.newest = max(self.newest, now)
        for index, n in self.unsettled.items():
            self.add(index, n)

    def standing(self, now: float) -> Standing:
        limit = self.budget.limit
        reset = 0
        if self.counts:
            reset = wait_within(self.expires_at() - now, limit.window_seconds)
        return Standing(limit.limit, max(0, limit.limit - self.total), reset)

    def expires_at(self) -> float:
        if not self.counts:
            return 0.0
        newest_bucket = self.first + len(self.counts) - 1
        return self._last(newest_bucket) + self.budget.limit.window_seconds


class SettlingRateLimiter:
    """Counts the large budgets in the process and settles them in the database in batches;
    everything else as ``exact`` (see the module for what stays exact). ``run`` settles every
    ``SETTLE_EVERY`` seconds; without it a budget settles once a slice of it is unsettled.

    ``local_from``, ``slice_share`` and ``margin_share``: the module's ``LOCAL_FROM``,
    ``SLICE`` and ``MARGIN``, given otherwise only by tests (a slice is at least one hit)."""

    LOCAL_FROM = LOCAL_FROM
    SLICE = SLICE
    MARGIN = MARGIN
    SETTLE_EVERY = SETTLE_EVERY
    SETTLE_CHUNK = SETTLE_CHUNK

    def __init__(
        self,
        exact: StoreRateLimiter,
        clock: Clock,
        *,
        local_from: int = LOCAL_FROM,
        slice_share: int = SLICE,
        margin_share: int = MARGIN,
    ) -> None:
        self._exact = exact
        self._clock = clock
        self._local_from = local_from
        self._slice_share = slice_share
        self._margin_share = margin_share
        self._views: dict[tuple[str, tuple[str, ...]], _View] = {}
        self._unsettled: set[_View] = set()
        """The views holding hits not yet added to their rows."""
        self._settling = trio.Lock()
        self._settlements = 0
        self._failures = 0
        self._hits_settled = 0

    def _view(self, budget: Budget) -> _View:
        name = (budget.limit.name, budget.key)
        view = self._views.get(name)
        if view is None or view.budget.limit != budget.limit:
            view = self._views[name] = _View(budget)
        return view

    def _is_local(self, budget: Budget) -> bool:
        return budget.limit.limit >= self._local_from

    def _slice(self, budget: Budget) -> int:
        return max(1, budget.limit.limit // self._slice_share)

    def _room(self, budgets: Iterable[Budget], now: float) -> list[_View] | None:
        """The views of ``budgets`` when a take of them can be counted in the process at
        ``now``, else None."""
        views = []
        for budget in budgets:
            limit = budget.limit.limit
            if limit < self._local_from:
                return None
            view = self._view(budget)
            view.expire(now)
            if view.owed >= self._slice(budget):
                return None
            if view.total + 1 + limit // self._margin_share > limit:
                return None
            views.append(view)
        return views

    def _count(self, views: Sequence[_View], now: float, n: int = 1) -> None:
        for view in views:
            view.count(now, n)
            self._unsettled.add(view)

    def _verdict(self, views: Sequence[_View], now: float) -> Verdict:
        return Verdict(None, 0, tuple(view.standing(now) for view in views))

    def _counted_exactly(self, budgets: Sequence[Budget], verdict: Verdict | None) -> None:
        """``budgets`` counted in the database by an allowed ``verdict``: in their views."""
        if verdict is None or not verdict.allowed:
            return
        now = self._clock.now()
        for budget in budgets:
            if self._is_local(budget):
                view = self._view(budget)
                view.add(math.ceil(now / view.width), 1)
                view.newest = max(view.newest, now)

    async def _settle_for(self, budgets: Iterable[Budget]) -> None:
        """Before ``budgets`` are counted in the database: this process's hits of the large
        ones settled (after any settlement adding some now, so that the database's count holds
        every hit this process counted), and their views taken from their rows, so that a view
        near a limit is never older than this process's last request on it."""
        views = [self._view(b) for b in budgets if self._is_local(b)]
        if views:
            await self.settle(views, refresh=True)

    async def settle(self, views: Iterable[_View] | None = None, *, refresh: bool = False) -> None:
        """Add the unsettled hits (of ``views``, else all) to their rows, and take each row's
        count back into its view (``refresh``: also of the views with none), ``SETTLE_CHUNK``
        budgets a transaction. On a failure the hits not added stay unsettled, to be added
        again."""
        async with self._settling:
            chosen = list(self._unsettled) if views is None else list(views)
            due = [view for view in chosen if view.unsettled or refresh]
            for start in range(0, len(due), SETTLE_CHUNK):
                await self._settle_chunk(due[start : start + SETTLE_CHUNK])

    async def _settle_chunk(self, views: Sequence[_View]) -> None:
        batch = [(view, view.unsettled) for view in views]
        for view, _ in batch:
            view.unsettled = {}
            self._unsettled.discard(view)
        try:
            # Shielded: a request cancelled while its budgets settle leaves the rows and the
            # views agreeing (hits added once), not hits added and also kept.
            with trio.CancelScope(shield=True), trio.fail_after(SETTLE_TIMEOUT):
                merged = await self._exact.merge_hits(
                    [(view.budget, added) for view, added in batch]
                )
        except trio.TooSlowError as exc:
            self._failures += 1
            self._keep(batch)
            raise StorageUnavailable(
                f"settling the rate limits' counts took over {SETTLE_TIMEOUT:g} s"
            ) from exc
        except BaseException:
            self._failures += 1
            self._keep(batch)
            raise
        self._settlements += 1
        now = self._clock.now()
        for (view, added), (first, counts) in zip(batch, merged, strict=True):
            settled = sum(added.values())
            self._hits_settled += settled
            view.owed -= settled
            view.settled(first, counts, now)

    def _keep(self, batch: Sequence[tuple[_View, dict[int, int]]]) -> None:
        """A settlement's hits that did not reach their rows, kept to settle again."""
        for view, added in batch:
            if not added:
                continue
            for index, n in added.items():
                view.unsettled[index] = view.unsettled.get(index, 0) + n
            self._unsettled.add(view)

    def sweep(self) -> None:
        """Forget the views with nothing unsettled whose hits no longer count (``run`` does
        every ``_SWEEP_EVERY`` seconds): the memory kept follows the budgets counted within
        their windows."""
        now = self._clock.now()
        for name, view in list(self._views.items()):
            if not view.owed and view.expires_at() <= now:
                del self._views[name]

    def statistics(self) -> SettlementStatistics:
        return SettlementStatistics(
            self._settlements, self._failures, self._hits_settled, len(self._views)
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Settle every ``SETTLE_EVERY`` seconds until cancelled, then once more."""
        task_status.started()
        swept = trio.current_time()
        try:
            while True:
                await trio.sleep(SETTLE_EVERY)
                await self._settle_or_tell("settling the rate limits' counts failed")
                if trio.current_time() - swept >= _SWEEP_EVERY:
                    swept = trio.current_time()
                    self.sweep()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(SETTLE_TIMEOUT):
                await self._settle_or_tell("settling the counts at the stop failed")

    async def _settle_or_tell(self, failed: str) -> None:
        """Settle, or tell why not (``failed``, then the error): the hits stay unsettled, and
        a budget with a slice unsettled counts in the database, which answers as the store does
        while it is down. The store's trouble is told in a line; anything else with its
        traceback."""
        try:
            await self.settle()
        except Exception as exc:
            log.warning("%s: %s", failed, exc, exc_info=not isinstance(exc, StorageError))

    async def take(self, *budgets: Budget) -> Verdict:
        now = self._clock.now()
        views = self._room(budgets, now)
        if views is not None:
            self._count(views, now)
            return self._verdict(views, now)
        await self._settle_for(budgets)
        verdict = await self._exact.take(*budgets)
        self._counted_exactly(budgets, verdict)
        return verdict

    async def take_then(self, first: Budget, *then: Budget) -> tuple[Verdict, Verdict | None]:
        now = self._clock.now()
        views = self._room((first, *then), now)
        if views is not None:
            self._count(views, now)
            return self._verdict(views[:1], now), self._verdict(views[1:], now)
        await self._settle_for((first, *then))
        verdict, rest = await self._exact.take_then(first, *then)
        self._counted_exactly((first,), verdict)
        self._counted_exactly(then, rest)
        return verdict, rest

    async def take_unless_locked(
        self, rule: LockoutRule, key: tuple[str, ...], *budgets: Budget
    ) -> Verdict | Locked:
        now = self._clock.now()
        views = self._room(budgets, now)
        if views is not None:
            # Counted before the look at the lock (no other take sees the room it uses), and
            # taken back when the key is locked.
            self._count(views, now)
            wait = await self._exact.locked_for(rule, key)
            if wait is not None:
                self._count(views, now, -1)
                return Locked(wait)
            return self._verdict(views, now)
        await self._settle_for(budgets)
        verdict = await self._exact.take_unless_locked(rule, key, *budgets)
        self._counted_exactly(budgets, None if isinstance(verdict, Locked) else verdict)
        return verdict

    async def take_unless_locked_then_read(
        self,
        rule: LockoutRule,
        key: tuple[str, ...],
        budgets: tuple[Budget, ...],
        reader: Reader,
        lookup: Lookup,
    ) -> tuple[Verdict | Locked, Row | None]:
        now = self._clock.now()
        views = self._room(budgets, now)
        if views is not None:
            self._count(views, now)
            locked, row = await self._exact.unless_locked_read(rule, key, reader, lookup)
            if locked is not None:
                self._count(views, now, -1)
                return locked, None
            return self._verdict(views, now), row
        await self._settle_for(budgets)
        verdict, row = await self._exact.take_unless_locked_then_read(
            rule, key, budgets, reader, lookup
        )
        self._counted_exactly(budgets, None if isinstance(verdict, Locked) else verdict)
        return verdict, row

    async def take_then_if_found(
        self, first: Budget, then: tuple[Budget, ...], reader: Reader, lookup: Lookup
    ) -> tuple[Verdict, Verdict | None, Row | None]:
        now = self._clock.now()
        views = self._room((first, *then), now)
        if views is None:
            await self._settle_for((first, *then))
            answer = await self._exact.take_then_if_found(first, then, reader, lookup)
            self._counted_exactly((first,), answer[0])
            self._counted_exactly(then, answer[1])
            return answer
        self._count(views[:1], now)
        verdict = self._verdict(views[:1], now)
        row = await reader.fetchrow(lookup.sql, *lookup.args)
        if row is None:
            return verdict, None, None
        # The room of ``then`` looked at again: other takes ran during the read.
        now = self._clock.now()
        room = self._room(then, now)
        if room is not None:
            self._count(room, now)
            return verdict, self._verdict(room, now), row
        await self._settle_for(then)
        counted = await self._exact.take(*then)
        self._counted_exactly(then, counted)
        return verdict, counted, row

    async def retry_after(self, *budgets: Budget) -> int | None:
        await self._settle_for(budgets)
        return await self._exact.retry_after(*budgets)

    async def hit(self, *budgets: Budget) -> None:
        now = self._clock.now()
        if all(self._is_local(b) for b in budgets):
            views = [self._view(b) for b in budgets]
            if all(v.owed < self._slice(v.budget) for v in views):
                self._count(views, now)
                return
        await self._settle_for(budgets)
        await self._exact.hit(*budgets)
        self._counted_exactly(budgets, Verdict(None, 0, ()))

    async def locked_for(self, rule: LockoutRule, key: tuple[str, ...]) -> int | None:
        return await self._exact.locked_for(rule, key)

    async def failed(self, rule: LockoutRule, key: tuple[str, ...]) -> bool:
        return await self._exact.failed(rule, key)
