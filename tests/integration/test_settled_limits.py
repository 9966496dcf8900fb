"""The large budgets counted in the process and settled in batches (``SettlingRateLimiter``, on
both stores): one process counts exactly; several stay within the stated bound; nothing is
counted for a locked key; the hits reach the rows within a settlement, and at the stop; a failed
settlement keeps them; the views are forgotten once their windows pass.

Each "process" is a limiter of its own over the one store: what tells processes apart here is
their views of the counts, not their connections (test_shared_limits.py serves two platforms).
The clock is a FrozenClock moved by the tests.
"""

from __future__ import annotations

import bisect
import math
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from ledgerport import auth, catalog
from ledgerport.auth import Budget, Locked, LockoutRule, Verdict
from ledgerport.clock import FrozenClock
from ledgerport.ops import Metrics
from ledgerport.storage import StorageUnavailable, Store, Transaction

TIMEOUT = 60
BIG = catalog.RateLimit("test-settled-600", 600, 60, "ip")
WIDE = catalog.RateLimit("test-settled-1200", 1200, 60, "ip")
SMALL = catalog.RateLimit("test-settled-30", 30, 60, "ip")
SLICE = BIG.limit // auth.SettlingRateLimiter.SLICE
MARGIN = BIG.limit // auth.SettlingRateLimiter.MARGIN


@pytest.fixture
def keyring() -> auth.Keyring:
    return auth.Keyring(secrets.token_urlsafe(32))


def process(store: Store, clock: FrozenClock, keyring: auth.Keyring) -> auth.SettlingRateLimiter:
    """One process's limiter over ``store``."""
    return auth.SettlingRateLimiter(auth.StoreRateLimiter(store, clock, keyring), clock)


async def in_row(store: Store, clock: FrozenClock, keyring: auth.Keyring, budget: Budget) -> int:
    """The hits of ``budget`` its row holds (read by adding none)."""
    exact = auth.StoreRateLimiter(store, clock, keyring)
    (hits,) = await exact.add_hits([(budget, {})])
    return sum(n for _, n in hits)


def ip(n: int = 1) -> tuple[str]:
    return (f"192.0.2.{n}",)


async def test_one_process_counts_a_burst_exactly(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    """Alone, a process allows exactly the limit, its RateLimit figures exact at every take,
    and the last takes counted in the database."""
    limiter = process(store, clock, keyring)
    budget = Budget(BIG, ip())
    with trio.fail_after(TIMEOUT):
        for i in range(BIG.limit):
            verdict = await limiter.take(budget)
            assert verdict.allowed, i
            assert verdict.standings[0].remaining == BIG.limit - i - 1, i
            assert verdict.standings[0].reset_in == 60
        refused = await limiter.take(budget)
        assert refused.refused_by == BIG
        assert refused.retry_after == 60
        assert await in_row(store, clock, keyring, budget) == BIG.limit
        clock.advance(60)
        assert (await limiter.take(budget)).standings[0].remaining == BIG.limit - 1


async def test_a_take_counted_in_the_process_writes_nothing_until_it_settles(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    limiter = process(store, clock, keyring)
    budget = Budget(BIG, ip())
    with trio.fail_after(TIMEOUT):
        for _ in range(3):
            assert (await limiter.take(budget)).allowed
        assert await in_row(store, clock, keyring, budget) == 0
        await limiter.settle()
        assert await in_row(store, clock, keyring, budget) == 3
        await limiter.settle()
        assert await in_row(store, clock, keyring, budget) == 3, "settled once"
        assert limiter.statistics() == auth.SettlementStatistics(
            settlements=1, failures=0, hits=3, views=1
        )


async def test_a_process_holds_at_most_a_slice_unsettled(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    """A slice (a twentieth of the limit) of unsettled hits, and the next take of the budget
    settles them and is counted in the database."""
    limiter = process(store, clock, keyring)
    budget = Budget(BIG, ip())
    with trio.fail_after(TIMEOUT):
        for _ in range(SLICE):
            assert (await limiter.take(budget)).allowed
        assert await in_row(store, clock, keyring, budget) == 0
        assert (await limiter.take(budget)).allowed
        assert await in_row(store, clock, keyring, budget) == SLICE + 1
        await limiter.hit(budget)  # a hit counted whatever the room, in the process again
        assert await in_row(store, clock, keyring, budget) == SLICE + 1


async def test_small_budgets_and_lockouts_are_counted_in_the_database(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    """The budgets under ``LOCAL_FROM`` (the 30 a minute per IP, the guessing guards) and the
    lockouts: in the rows at once, for every process."""
    first, second = process(store, clock, keyring), process(store, clock, keyring)
    small = Budget(SMALL, ip())
    rule = LockoutRule("test-settled-lockout", failures=2, window=60, duration=30)
    with trio.fail_after(TIMEOUT):
        for i in range(SMALL.limit):
            assert (await (first if i % 2 else second).take(small)).allowed
        assert await in_row(store, clock, keyring, small) == SMALL.limit
        assert not (await first.take(small)).allowed
        assert not (await second.take(small)).allowed
        assert await first.failed(rule, ip()) is False
        assert await second.failed(rule, ip()) is True
        assert await first.locked_for(rule, ip()) == 30


async def test_a_process_sees_the_others_hits_once_it_settles(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    first, second = process(store, clock, keyring), process(store, clock, keyring)
    budget = Budget(BIG, ip())
    with trio.fail_after(TIMEOUT):
        for _ in range(10):
            await first.take(budget)
        await first.settle()
        assert (await second.take(budget)).standings[0].remaining == BIG.limit - 1, "not yet seen"
        await second.settle()
        assert (await second.take(budget)).standings[0].remaining == BIG.limit - 12


async def test_near_the_limit_a_stale_view_goes_past_it_by_at_most_a_slice(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    """A process that has seen nothing of a budget another one has all but used up (it has
    just started): it takes a slice at most before its settlement shows it the count, and
    from then on every take of the budget is counted in the database and refused."""
    first, second = process(store, clock, keyring), process(store, clock, keyring)
    budget = Budget(BIG, ip())
    left = 10
    with trio.fail_after(TIMEOUT):
        for _ in range(BIG.limit - left):
            assert (await first.take(budget)).allowed
        await first.settle()
        allowed = 0
        for _ in range(100):
            allowed += (await second.take(budget)).allowed
        assert allowed == SLICE, "its slice, then refused"
        assert allowed - left <= SLICE
        assert await in_row(store, clock, keyring, budget) == BIG.limit - left + SLICE
        assert not (await first.take(budget)).allowed
        clock.advance(60)
        assert (await second.take(budget)).allowed


@pytest.mark.parametrize("seed", range(3))
async def test_several_processes_stay_within_a_slice_each_of_the_limit(
    store: Store, clock: FrozenClock, keyring: auth.Keyring, seed: int
) -> None:
    """Three processes take from two budgets in random turns, settling at random, the clock
    moving by random steps (a run spans several windows). At no moment does any window of
    60 s hold more than the limit and a slice a process, of allowed takes; and each budget's
    takes, once all is settled, are what its row holds."""
    rng = random.Random(seed)
    processes = [process(store, clock, keyring) for _ in range(3)]
    budgets = [Budget(BIG, ip(1)), Budget(WIDE, ip(2))]
    allowed: dict[Budget, list[float]] = {b: [] for b in budgets}
    most = dict.fromkeys(budgets, 0)
    start = clock.now()
    steps = 700 if store.kind == "sqlite" else 400
    with trio.fail_after(TIMEOUT * 3):
        for _ in range(steps):
            limiter = rng.choice(processes)
            roll = rng.random()
            if roll < 0.05:
                await limiter.settle()
            elif roll < 0.15:
                clock.advance(rng.choice([0.05, 0.5, 3.0, 11.0]))
            else:
                chosen = budgets if rng.random() < 0.5 else [rng.choice(budgets)]
                # Most takes in bursts, as an attacker's are.
                for _ in range(rng.choice([1, 1, 5, 40])):
                    verdict = await limiter.take(*chosen)
                    if verdict.allowed:
                        for budget in chosen:
                            allowed[budget].append(clock.now())
            now = clock.now()
            for budget, times in allowed.items():
                bound = budget.limit.limit + len(processes) * (
                    budget.limit.limit // auth.SettlingRateLimiter.SLICE
                )
                in_window = len(times) - bisect.bisect_right(times, now - 60)
                assert in_window <= bound, (budget.limit.name, in_window, now - start)
                most[budget] = max(most[budget], in_window)
        for limiter in processes:
            await limiter.settle()
        clock.advance(0)
        for budget, times in allowed.items():
            # The row's buckets forget a hit at most one bucket (a second) late.
            counted = await in_row(store, clock, keyring, budget)
            exact = sum(1 for t in times if t > clock.now() - 60)
            within = sum(1 for t in times if t > clock.now() - 61)
            assert exact <= counted <= within
        assert max(len(times) for times in allowed.values()) > BIG.limit, "went past a window"
        assert max(most.values()) > BIG.limit, "went past a limit: the bound was put to the test"


async def test_a_locked_key_counts_nothing_in_the_process(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    limiter = process(store, clock, keyring)
    rule = LockoutRule("test-settled-lock", failures=1, window=60, duration=30)
    key = ("192.0.2.1", "client")
    budgets = (Budget(BIG, key), Budget(WIDE, ip()))
    lookup = auth.Lookup("SELECT CAST($1 AS TEXT) AS word", ("present",))
    with trio.fail_after(TIMEOUT):
        taken = await limiter.take_unless_locked(rule, key, *budgets)
        assert isinstance(taken, Verdict)
        assert [s.remaining for s in taken.standings] == [599, 1199]
        assert await limiter.failed(rule, key) is True
        assert await limiter.take_unless_locked(rule, key, *budgets) == Locked(30)
        assert await limiter.take_unless_locked_then_read(
            rule, key, budgets, store.autocommit, lookup
        ) == (Locked(30), None)
        clock.advance(30)
        verdict, row = await limiter.take_unless_locked_then_read(
            rule, key, budgets, store.autocommit, lookup
        )
        assert row == {"word": "present"}
        assert isinstance(verdict, Verdict)
        assert [s.remaining for s in verdict.standings] == [598, 1198], "the locked counted none"
        await limiter.settle()
        assert await in_row(store, clock, keyring, budgets[0]) == 2


async def test_take_then_if_found_counts_the_rest_only_for_a_row(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    limiter = process(store, clock, keyring)
    by_ip, by_app = Budget(BIG, ip()), Budget(WIDE, ("app",))
    found = auth.Lookup("SELECT 1 AS one WHERE CAST($1 AS TEXT) = 'yes'", ("yes",))
    missing = auth.Lookup(found.sql, ("no",))
    with trio.fail_after(TIMEOUT):
        first, rest, row = await limiter.take_then_if_found(
            by_ip, (by_app,), store.autocommit, missing
        )
        assert (first.standings[0].remaining, rest, row) == (599, None, None)
        first, rest, row = await limiter.take_then_if_found(
            by_ip, (by_app,), store.autocommit, found
        )
        assert first.standings[0].remaining == 598
        assert rest is not None
        assert rest.standings[0].remaining == 1199
        assert row == {"one": 1}


async def test_run_settles_every_interval_and_once_more_at_the_stop(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    limiter = process(store, clock, keyring)
    budget = Budget(BIG, ip())
    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            await nursery.start(limiter.run)
            for _ in range(5):
                await limiter.take(budget)
            for _ in range(200):  # settled within a settlement or two; a loaded machine's room
                if await in_row(store, clock, keyring, budget) == 5:
                    break
                await trio.sleep(auth.SettlingRateLimiter.SETTLE_EVERY)
            assert await in_row(store, clock, keyring, budget) == 5
            for _ in range(3):
                await limiter.take(budget)
            nursery.cancel_scope.cancel()
        assert await in_row(store, clock, keyring, budget) == 8


async def test_a_failed_settlement_keeps_its_hits(
    store: Store, clock: FrozenClock, keyring: auth.Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = auth.StoreRateLimiter(store, clock, keyring)
    limiter = auth.SettlingRateLimiter(exact, clock)
    budget = Budget(BIG, ip())
    merge_hits = exact.merge_hits
    failures = [StorageUnavailable("the database went away")]

    async def failing(counted: object) -> object:
        if failures:
            raise failures.pop()
        return await merge_hits(counted)  # type: ignore[arg-type]

    with trio.fail_after(TIMEOUT):
        for _ in range(4):
            await limiter.take(budget)
        monkeypatch.setattr(exact, "merge_hits", failing)
        with pytest.raises(StorageUnavailable):
            await limiter.settle()
        assert (await limiter.take(budget)).standings[0].remaining == BIG.limit - 5
        await limiter.settle()
        assert await in_row(store, clock, keyring, budget) == 5
        assert limiter.statistics() == auth.SettlementStatistics(
            settlements=1, failures=1, hits=5, views=1
        )


class _SweepFails:
    """``store``, where deleting the counts that no longer count fails (the sweep that follows
    a settlement's commit)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.failed = 0

    @asynccontextmanager
    async def transaction(self, **options: Any) -> AsyncIterator[Any]:
        async with self._store.transaction(**options) as tx:
            yield _FailingSweep(tx, self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _FailingSweep:
    def __init__(self, tx: Transaction, store: _SweepFails) -> None:
        self._tx = tx
        self._store = store

    async def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("DELETE FROM rate_limits"):
            self._store.failed += 1
            raise StorageUnavailable("the database went away")
        return await self._tx.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)


async def test_a_settlement_whose_sweep_fails_counts_its_hits_once(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    """The sweep follows the settlement's commit: its failure is not the settlement's, whose
    hits, kept to settle again, would count twice."""
    failing = _SweepFails(store)
    limiter = auth.SettlingRateLimiter(
        auth.StoreRateLimiter(cast(Store, failing), clock, keyring), clock
    )
    budget = Budget(BIG, ip())
    with trio.fail_after(TIMEOUT):
        for _ in range(4):
            await limiter.take(budget)
        await limiter.settle()
        await limiter.settle()
        in_the_row = await in_row(store, clock, keyring, budget)
    assert failing.failed == 1
    assert in_the_row == 4
    assert limiter.statistics().failures == 0


async def test_views_are_forgotten_once_their_windows_pass(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    """The memory a process keeps follows the budgets counted within their windows, however
    many addresses came and went."""
    limiter = process(store, clock, keyring)
    with trio.fail_after(TIMEOUT):
        for n in range(200):
            await limiter.take(Budget(BIG, (f"198.51.100.{n}",)))
        assert limiter.statistics().views == 200
        clock.advance(30)
        await limiter.take(Budget(BIG, ip()))
        limiter.sweep()
        assert limiter.statistics().views == 201, "unsettled, and still counting"
        await limiter.settle()
        clock.advance(31)
        limiter.sweep()
        assert limiter.statistics().views == 1
        clock.advance(30)
        limiter.sweep()
        assert limiter.statistics().views == 0


async def test_many_budgets_settle_a_chunk_a_transaction(
    store: Store, clock: FrozenClock, keyring: auth.Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many budgets a process holds unsettled (say after an outage of the database),
    each transaction adds a chunk of them; a chunk that fails keeps its hits and those of the
    chunks after it, the chunks before it stay added."""
    exact = auth.StoreRateLimiter(store, clock, keyring)
    limiter = auth.SettlingRateLimiter(exact, clock)
    chunk = auth.SettlingRateLimiter.SETTLE_CHUNK
    budgets = [Budget(BIG, (f"203.0.113.{n}", str(n))) for n in range(2 * chunk + 10)]
    merge_hits = exact.merge_hits
    sizes: list[int] = []

    async def second_fails(counted: list[tuple[Budget, object]]) -> object:
        sizes.append(len(counted))
        if len(sizes) == 2:
            raise StorageUnavailable("the database went away")
        return await merge_hits(counted)  # type: ignore[arg-type]

    monkeypatch.setattr(exact, "merge_hits", second_fails)
    with trio.fail_after(TIMEOUT):
        for budget in budgets:
            assert (await limiter.take(budget)).allowed
        with pytest.raises(StorageUnavailable):
            await limiter.settle()
        assert sizes == [chunk, chunk]
        await limiter.settle()
        assert sizes == [chunk, chunk, chunk, 10]
        counts = [await in_row(store, clock, keyring, budget) for budget in budgets]
        assert counts == [1] * len(budgets)


async def test_budgets_past_the_keys_kept_still_settle_in_their_own_rows(
    store: Store, clock: FrozenClock, keyring: auth.Keyring, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A limiter keeps the stored keys it made, a bounded number: a budget whose key was
    dropped makes it again, the same, and its hits reach its own row; every settlement's rows
    are written together (one statement on PostgreSQL), each with its own count."""
    monkeypatch.setattr(auth.StoreRateLimiter, "KEYS_KEPT", 3)
    limiter = process(store, clock, keyring)
    budgets = [Budget(BIG, ip(n)) for n in range(1, 6)]
    with trio.fail_after(TIMEOUT):
        for round_ in range(1, 3):
            for n, budget in enumerate(budgets, start=1):
                for _ in range(n):
                    assert (await limiter.take(budget)).allowed
            await limiter.settle()
            counts = [await in_row(store, clock, keyring, budget) for budget in budgets]
            assert counts == [round_ * n for n in range(1, 6)]


async def test_the_metrics_tell_the_settlements(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    """``ledgerport_rate_limit_*``: zeros for a process whose limits are not counted so, this
    limiter's counts once watched."""
    metrics = Metrics()

    def samples() -> dict[str, float]:
        text = metrics.render().decode()
        families = text_string_to_metric_families(text)
        return {s.name: s.value for f in families for s in f.samples if "rate_limit" in s.name}

    assert samples() == {
        "ledgerport_rate_limit_settlements_total": 0,
        "ledgerport_rate_limit_settlement_failures_total": 0,
        "ledgerport_rate_limit_hits_settled_total": 0,
        "ledgerport_rate_limit_views": 0,
    }
    limiter = process(store, clock, keyring)
    metrics.watch_limiter(limiter.statistics)
    with trio.fail_after(TIMEOUT):
        for n in range(3):
            await limiter.take(Budget(BIG, ip(n)))
        await limiter.settle()
    assert samples() == {
        "ledgerport_rate_limit_settlements_total": 1,
        "ledgerport_rate_limit_settlement_failures_total": 0,
        "ledgerport_rate_limit_hits_settled_total": 3,
        "ledgerport_rate_limit_views": 3,
    }


async def test_hits_added_at_once_leave_the_rows_hits_one_at_a_time_leave(
    store: Store, clock: FrozenClock, keyring: auth.Keyring
) -> None:
    """A settlement's merge (``add_hits``: the row's count, the hits added by bucket, the
    buckets that stopped counting dropped) against the same hits counted one at a time by the
    exact limiter, on a budget of the same size under another name: a seeded run with the
    clock moved on and off the buckets' boundaries, past a window, and back (a process whose
    clock is behind), with hits taken back in a settlement of their own, answers the same hits
    and leaves the same rows (dense hits and the time they stop counting)."""
    rng = random.Random(2027)
    one_by_one = Budget(catalog.RateLimit("test-settled-one-by-one", 600, 60, "ip"), ip())
    at_once = Budget(catalog.RateLimit("test-settled-at-once", 600, 60, "ip"), ip())
    width = 60 / auth.LIMIT_BUCKETS
    exact = auth.StoreRateLimiter(store, clock, keyring)
    steps = [0.0, 0.25, 0.5, 1.0, 1.0, 2.75, 7.5, 30.0, 59.0, 61.0, -1.5, -0.25]

    async def row(name: str) -> tuple[str, float]:
        found = await store.autocommit.fetchrow(
            "SELECT hits, expires_at FROM rate_limits WHERE budget = $1", name
        )
        assert found is not None
        return found["hits"], found["expires_at"]

    with trio.fail_after(TIMEOUT * 2):
        for step in range(150):
            clock.advance(rng.choice(steps))
            n = rng.randint(1, 4)
            for _ in range(n):
                await exact.hit(one_by_one)
            bucket = math.ceil(clock.now() / width)
            if step % 3 == 0:
                # A hit counted, settled, then taken back (a locked key's), settled apart.
                await exact.add_hits([(at_once, {bucket: n + 1})])
                (merged,) = await exact.add_hits([(at_once, {bucket: -1})])
            else:
                (merged,) = await exact.add_hits([(at_once, {bucket: n})])
            (counted,) = await exact.add_hits([(one_by_one, {})])
            assert merged == counted, step
            assert await row(at_once.limit.name) == await row(one_by_one.limit.name), step
