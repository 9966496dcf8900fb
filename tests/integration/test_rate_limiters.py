"""The limiter contract, held by every place the counts can be kept: in memory, in the database
(SQLite and PostgreSQL) and in Redis.

The clock is a FrozenClock moved by the tests, never slept on. It starts on a whole second, where
the shared counters' one-second buckets begin, so most figures are the exact sliding window's on
every backend; ``test_shared_counters_stay_within_their_bound`` checks the bound off those
boundaries, and the tests after ``test_a_wait_never_exceeds_the_window`` that no wait, anywhere
in a bucket, exceeds the window. A second limiter over the same counts (another process) is
``Backend.twin``: the same object in memory, another connection pool or client for PostgreSQL
and Redis.
"""

from __future__ import annotations

import random
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass

import pytest
import trio

from ledgerport import auth, catalog
from ledgerport.auth import Budget, Locked, LockoutRule, RateLimiter, Standing, Verdict
from ledgerport.clock import FrozenClock
from ledgerport.storage import Reader, Store, open_postgres

from ..stores import REDIS_URL, fresh_database, open_test_store

TIMEOUT = 30
TWO_PER_MINUTE = catalog.RateLimit("test-two-per-minute", 2, 60, "ip")
THREE_PER_MINUTE = catalog.RateLimit("test-three-per-minute", 3, 60, "ip")
TWO_PER_FIVE_MINUTES = catalog.RateLimit("test-two-per-five-minutes", 2, 300, "user")
ONE_PER_MINUTE = catalog.RateLimit("test-one-per-minute", 1, 60, "ip")
LOCKOUT = LockoutRule("test-lockout")
SHARED = (
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
)


@dataclass
class Backend:
    limiter: RateLimiter
    twin: Callable[[], Awaitable[RateLimiter]]
    """Another limiter over the same counts, as a second process would have."""
    reader: Reader
    """A store's reader outside any transaction: the limiter's own store where it has one."""


async def _migrated(store: Store) -> Store:
    await store.migrate()
    return store


def settling(store: Store, clock: FrozenClock, keyring: auth.Keyring) -> auth.SettlingRateLimiter:
    """A limiter counting in the process whatever it can, however small the budget: every
    budget is counted there, a hit at a time (its slice), then in the database (its next
    take settles it first), so the contract holds through both paths."""
    exact = auth.StoreRateLimiter(store, clock, keyring)
    return auth.SettlingRateLimiter(exact, clock, local_from=1)


@pytest.fixture(
    params=[
        "memory",
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
        "settled-sqlite",
        pytest.param("settled-postgresql", marks=pytest.mark.postgres),
    ]
)
async def backend(
    request: pytest.FixtureRequest, asyncio_loop: object, clock: FrozenClock
) -> AsyncIterator[Backend]:
    # A root key of the test's own: shared counters are stored under keys hashed with it, so
    # tests sharing a database or Redis never count each other's hits.
    keyring = auth.Keyring(secrets.token_urlsafe(32))
    async with AsyncExitStack() as stack:
        if request.param == "memory":
            memory = auth.MemoryRateLimiter(clock)

            async def same() -> RateLimiter:
                return memory

            elsewhere = await stack.enter_async_context(open_test_store("sqlite"))
            yield Backend(memory, same, elsewhere.autocommit)
        elif request.param == "sqlite":
            sqlite = await stack.enter_async_context(open_test_store("sqlite"))

            async def over_sqlite() -> RateLimiter:
                return auth.StoreRateLimiter(sqlite, clock, keyring)

            yield Backend(await over_sqlite(), over_sqlite, sqlite.autocommit)
        elif request.param.startswith("settled-"):
            # Its twin is the same limiter: two processes' views are held to their bound in
            # test_settled_limits.py.
            kind = request.param.removeprefix("settled-")
            if kind == "sqlite":
                store = await stack.enter_async_context(open_test_store("sqlite"))
            else:
                url = await stack.enter_async_context(fresh_database())
                store = await _migrated(
                    await stack.enter_async_context(open_postgres(url, max_size=5))
                )
            limiter = settling(store, clock, keyring)

            async def itself() -> RateLimiter:
                return limiter

            yield Backend(limiter, itself, store.autocommit)
        elif request.param == "postgresql":
            url = await stack.enter_async_context(fresh_database())

            stores: list[Store] = []

            async def over_postgres() -> RateLimiter:
                store = await stack.enter_async_context(open_postgres(url, max_size=5))
                stores.append(store)
                return auth.StoreRateLimiter(await _migrated(store), clock, keyring)

            yield Backend(await over_postgres(), over_postgres, stores[0].autocommit)
        else:

            async def over_redis() -> RateLimiter:
                return await auth.connect_redis_limiter(REDIS_URL, clock, keyring)

            elsewhere = await stack.enter_async_context(open_test_store("sqlite"))
            yield Backend(await over_redis(), over_redis, elsewhere.autocommit)


def by_ip(limit: catalog.RateLimit, ip: str = "192.0.2.1") -> Budget:
    return Budget(limit, (ip,))


async def test_a_burst_takes_exactly_the_limit(backend: Backend) -> None:
    limiter = backend.limiter
    with trio.fail_after(TIMEOUT):
        verdicts = [await limiter.take(by_ip(THREE_PER_MINUTE)) for _ in range(3)]
        assert [v.allowed for v in verdicts] == [True, True, True]
        assert [v.standings[0].remaining for v in verdicts] == [2, 1, 0]
        assert {v.standings[0].limit for v in verdicts} == {3}
        assert {v.standings[0].reset_in for v in verdicts} == {60}
        refused = await limiter.take(by_ip(THREE_PER_MINUTE))
        assert refused.refused_by == THREE_PER_MINUTE
        assert refused.retry_after == 60
        assert refused.standings[0].remaining == 0
        # A refused take is not counted: the budget is whole again a window after the burst.
        assert (await limiter.take(by_ip(THREE_PER_MINUTE))).retry_after == 60
        assert await limiter.retry_after(by_ip(THREE_PER_MINUTE)) == 60


async def test_the_window_slides_hit_by_hit(backend: Backend, clock: FrozenClock) -> None:
    limiter = backend.limiter
    budget = by_ip(TWO_PER_MINUTE)
    with trio.fail_after(TIMEOUT):
        assert (await limiter.take(budget)).allowed
        clock.advance(10)
        second = await limiter.take(budget)
        assert second.allowed
        assert second.standings[0].reset_in == 60
        clock.advance(49.5)  # 59.5 s after the first hit
        assert await limiter.retry_after(budget) == 1
        clock.advance(0.5)  # 60 s after the first hit: it has left the window
        assert await limiter.retry_after(budget) is None
        third = await limiter.take(budget)
        assert (third.allowed, third.standings[0].remaining) == (True, 0)
        assert await limiter.retry_after(budget) == 10  # until the hit at t=10 leaves
        clock.advance(10)
        assert (await limiter.take(budget)).allowed


async def test_five_minute_windows(backend: Backend, clock: FrozenClock) -> None:
    limiter = backend.limiter
    budget = Budget(TWO_PER_FIVE_MINUTES, ("usr_1",))
    with trio.fail_after(TIMEOUT):
        assert (await limiter.take(budget)).allowed
        clock.advance(100)
        assert (await limiter.take(budget)).allowed
        assert (await limiter.take(budget)).retry_after == 200
        clock.advance(200)
        verdict = await limiter.take(budget)
        assert verdict.allowed
        assert verdict.standings[0].reset_in == 300


async def test_a_refusal_uses_up_no_budget(backend: Backend) -> None:
    """Several budgets are taken together or not at all; the first refusing one is named and
    the wait is until every one has room."""
    limiter = backend.limiter
    ip = by_ip(THREE_PER_MINUTE)
    with trio.fail_after(TIMEOUT):
        assert (await limiter.take(by_ip(ONE_PER_MINUTE))).allowed
        for _ in range(3):
            refused = await limiter.take(ip, by_ip(ONE_PER_MINUTE))
            assert refused.refused_by == ONE_PER_MINUTE
            assert refused.retry_after == 60
            assert refused.standings[0].remaining == 3
        assert [(await limiter.take(ip)).allowed for _ in range(4)] == [True] * 3 + [False]
        both = await limiter.take(ip, by_ip(ONE_PER_MINUTE))
        assert both.refused_by == THREE_PER_MINUTE
        assert [s.remaining for s in both.standings] == [0, 0]


async def test_take_then_counts_the_rest_only_when_the_first_has_room(backend: Backend) -> None:
    """The data API's IP budget, then the app's budgets: the first always counts while it has
    room; the rest only then, all of them or none."""
    limiter = backend.limiter
    ip, app = by_ip(TWO_PER_MINUTE), Budget(THREE_PER_MINUTE, ("app", "business"))
    other = Budget(ONE_PER_MINUTE, ("app",))
    with trio.fail_after(TIMEOUT):
        first, then = await limiter.take_then(ip, app, other)
        assert first.allowed
        assert then is not None
        assert then.allowed
        assert [s.remaining for s in (*first.standings, *then.standings)] == [1, 2, 0]
        first, then = await limiter.take_then(ip, app, other)
        assert first.allowed, "the first counts whatever the rest say"
        assert then is not None
        assert then.refused_by == ONE_PER_MINUTE
        assert then.standings[0].remaining == 2, "refused by one, the rest use up none"
        first, then = await limiter.take_then(ip, app)
        assert first.refused_by == TWO_PER_MINUTE
        assert first.retry_after == 60
        assert then is None
        assert await limiter.retry_after(app) is None
        assert (await limiter.take(app)).standings[0].remaining == 1, "app counted once only"


async def test_keys_and_limits_count_apart(backend: Backend) -> None:
    limiter = backend.limiter
    pair = Budget(TWO_PER_MINUTE, ("192.0.2.1", "client-a"))
    with trio.fail_after(TIMEOUT):
        await limiter.take(pair)
        await limiter.take(pair)
        assert await limiter.retry_after(pair) == 60
        assert await limiter.retry_after(Budget(TWO_PER_MINUTE, ("192.0.2.1", "client-b"))) is None
        assert await limiter.retry_after(Budget(TWO_PER_MINUTE, ("192.0.2.1client-a",))) is None
        assert await limiter.retry_after(Budget(THREE_PER_MINUTE, pair.key)) is None
        fresh = await limiter.take(Budget(TWO_PER_MINUTE, ("198.51.100.7", "client-a")))
        assert fresh.standings[0].remaining == 1


async def test_hits_count_whatever_the_room(backend: Backend, clock: FrozenClock) -> None:
    """``hit`` counts failures already made, past the limit too; ``retry_after`` counts nothing."""
    limiter = backend.limiter
    budget = by_ip(TWO_PER_MINUTE)
    with trio.fail_after(TIMEOUT):
        for _ in range(3):
            assert await limiter.retry_after(budget) is None
        await limiter.hit(budget)
        for _ in range(2):  # three hits, at t=0, 1 and 2, against a limit of two
            clock.advance(1)
            await limiter.hit(budget)
        assert await limiter.retry_after(budget) == 59  # two must leave: until the one at t=1
        assert (await limiter.take(budget)).standings[0].remaining == 0
        clock.advance(59)
        assert await limiter.retry_after(budget) is None


# --- A wait never exceeds the window (contract.md: a Retry-After never exceeds the window of the
# limit that answered) ------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [0.0, 0.001, 0.25, 0.5, 0.999])
@pytest.mark.parametrize(
    "limit", [THREE_PER_MINUTE, TWO_PER_FIVE_MINUTES], ids=["a minute", "five minutes"]
)
async def test_a_wait_never_exceeds_the_window(
    backend: Backend, clock: FrozenClock, limit: catalog.RateLimit, offset: float
) -> None:
    """A burst fills the budget at one instant anywhere in a shared counter's bucket (a second
    of a minute, five of five minutes; ``offset`` its share of it): the refusal, a look and the
    budget's reset say the window, not a second more, for the burst ages out at exactly the
    window; the budget has room then, and not a moment before."""
    limiter = backend.limiter
    window = limit.window_seconds
    budget = Budget(limit, ("192.0.2.1",))
    with trio.fail_after(TIMEOUT):
        clock.advance(offset * window / auth.LIMIT_BUCKETS)
        made = clock.now()
        for _ in range(limit.limit):
            verdict = await limiter.take(budget)
            assert verdict.allowed
            assert verdict.standings[0].reset_in == window
        refused = await limiter.take(budget)
        assert (refused.refused_by, refused.retry_after) == (limit, window)
        assert refused.standings[0].reset_in == window
        assert await limiter.retry_after(budget) == window
        clock.set(made + window - 0.001)
        assert (await limiter.take(budget)).retry_after == 1
        clock.set(made + window)
        assert (await limiter.take(budget)).allowed


@pytest.mark.parametrize("spread", [0.1, 0.5, 0.74])
async def test_a_caller_that_waits_the_retry_after_finds_room(
    backend: Backend, clock: FrozenClock, spread: float
) -> None:
    """Hits apart within one bucket: the refusal's wait is at most the window, and waiting it is
    enough (a hit counts until the window after the newest hit of its bucket at the latest)."""
    limiter = backend.limiter
    budget = by_ip(TWO_PER_MINUTE)
    with trio.fail_after(TIMEOUT):
        clock.advance(0.25)
        assert (await limiter.take(budget)).allowed
        clock.advance(spread)
        assert (await limiter.take(budget)).allowed
        refused = await limiter.take(budget)
        assert 1 <= refused.retry_after <= 60
        assert 1 <= refused.standings[0].reset_in <= 60
        clock.advance(refused.retry_after)
        assert (await limiter.take(budget)).allowed


async def test_a_clock_behind_the_hits_asks_no_more_than_the_window(
    backend: Backend, clock: FrozenClock
) -> None:
    """Another process whose clock is 10 s behind the one that counted the hits and the lock:
    its waits are still at most the window and the lock's duration."""
    limiter = backend.limiter
    budget = by_ip(ONE_PER_MINUTE)
    rule = LockoutRule("test-behind-lockout", failures=1, window=60, duration=60)
    key = ("192.0.2.1", "client")
    with trio.fail_after(TIMEOUT):
        clock.advance(0.5)
        assert (await limiter.take(budget)).allowed
        assert await limiter.failed(rule, key) is True
        behind = await backend.twin()
        clock.advance(-10)
        refused = await behind.take(budget)
        assert 1 <= refused.retry_after <= 60
        assert 1 <= refused.standings[0].reset_in <= 60
        wait = await behind.retry_after(budget)
        assert wait is not None
        assert 1 <= wait <= 60
        locked = await behind.locked_for(rule, key)
        assert locked is not None
        assert 1 <= locked <= 60


async def test_lockout_locks_on_the_tenth_failure(backend: Backend, clock: FrozenClock) -> None:
    limiter = backend.limiter
    rule = LockoutRule("test-client-lockout")
    assert (rule.failures, rule.window, rule.duration) == (10, 60, 60)
    key = ("192.0.2.1", "client")
    with trio.fail_after(TIMEOUT):
        for _ in range(9):
            assert await limiter.failed(rule, key) is False
            assert await limiter.locked_for(rule, key) is None
        assert await limiter.failed(rule, key) is True
        assert await limiter.locked_for(rule, key) == 60
        assert await limiter.locked_for(rule, ("192.0.2.1", "other")) is None
        assert await limiter.locked_for(rule, ("198.51.100.7", "client")) is None
        assert await limiter.locked_for(LOCKOUT, key) is None  # another rule, its own count
        clock.advance(59.5)
        assert await limiter.locked_for(rule, key) == 1
        clock.advance(0.5)
        assert await limiter.locked_for(rule, key) is None


async def test_lockout_counts_failures_within_its_window_only(
    backend: Backend, clock: FrozenClock
) -> None:
    limiter = backend.limiter
    key = ("192.0.2.1", "client")
    with trio.fail_after(TIMEOUT):
        for _ in range(9):
            await limiter.failed(LOCKOUT, key)
        clock.advance(60)  # the nine failures age out
        for _ in range(9):
            assert await limiter.failed(LOCKOUT, key) is False
        assert await limiter.locked_for(LOCKOUT, key) is None
        assert await limiter.failed(LOCKOUT, key) is True
        # Ten failures spread over 59 s, off whole seconds: lockouts count exactly.
        spread = ("192.0.2.1", "spread")
        clock.advance(0.3)
        locked = [await limiter.failed(LOCKOUT, spread)]
        for _ in range(9):
            clock.advance(59 / 9)
            locked.append(await limiter.failed(LOCKOUT, spread))
        assert locked == [False] * 9 + [True]


async def test_lockout_rule_parameters(backend: Backend, clock: FrozenClock) -> None:
    limiter = backend.limiter
    rule = LockoutRule("test-short-lockout", failures=2, window=10, duration=30)
    with trio.fail_after(TIMEOUT):
        assert await limiter.failed(rule, ("k",)) is False
        clock.advance(9.9)
        assert await limiter.failed(rule, ("k",)) is True
        clock.advance(29)
        assert await limiter.locked_for(rule, ("k",)) == 1
        clock.advance(1)
        assert await limiter.locked_for(rule, ("k",)) is None


async def test_take_unless_locked_counts_nothing_for_a_locked_key(
    backend: Backend, clock: FrozenClock
) -> None:
    """The token endpoints' one call after authenticating: the pair's lock, then the budgets.
    Locked, nothing is counted; unlocked (the lock's end reached exactly), it is a take."""
    limiter = backend.limiter
    rule = LockoutRule("test-take-lockout", failures=2, window=10, duration=30)
    key = ("192.0.2.1", "client")
    pair, ceiling = Budget(TWO_PER_MINUTE, key), by_ip(THREE_PER_MINUTE)
    with trio.fail_after(TIMEOUT):
        taken = await limiter.take_unless_locked(rule, key, pair, ceiling)
        assert isinstance(taken, Verdict)
        assert taken.allowed
        assert [s.remaining for s in taken.standings] == [1, 2]
        await limiter.failed(rule, key)
        assert await limiter.failed(rule, key) is True
        clock.advance(12.5)
        locked = await limiter.take_unless_locked(rule, key, pair, ceiling)
        assert locked == Locked(18)
        assert await limiter.take_unless_locked(rule, key, pair, ceiling) == Locked(18)
        other = await limiter.take_unless_locked(rule, ("192.0.2.1", "other"), ceiling)
        assert isinstance(other, Verdict)
        assert other.standings[0].remaining == 1, "the locked takes counted nothing"
        clock.advance(17.5)  # the lock ends now
        after = await limiter.take_unless_locked(rule, key, pair, ceiling)
        assert isinstance(after, Verdict)
        assert after.allowed
        assert [s.remaining for s in after.standings] == [0, 0]
        assert await limiter.take_unless_locked(rule, key, pair) == Verdict(
            TWO_PER_MINUTE, 30, (Standing(2, 0, 60),)
        )


WORDS = auth.Lookup(
    "SELECT CAST($1 AS TEXT) AS word, CAST(NULL AS TEXT) AS note"
    " WHERE CAST($1 AS TEXT) <> 'absent'",
    ("present",),
)
"""A lookup finding a row, one of its columns NULL."""


def words(word: str) -> auth.Lookup:
    return auth.Lookup(WORDS.sql, (word,))


NULLS = auth.Lookup("SELECT CAST(NULL AS TEXT) AS note WHERE CAST($1 AS TEXT) = 'x'", ("x",))
"""A lookup finding a row of NULLs only: a row, not nothing."""


async def test_take_unless_locked_then_read_answers_the_row_only_when_counted(
    backend: Backend, clock: FrozenClock
) -> None:
    """Introspection's one call: the pair's lock and budgets, then the token's lookup. The row
    comes back when the take is allowed (None when the lookup finds none); locked or refused,
    no row, and the count is the same as take_unless_locked's."""
    limiter, reader = backend.limiter, backend.reader
    rule = LockoutRule("test-read-lockout", failures=1, window=10, duration=30)
    key = ("192.0.2.1", "client")
    pair = Budget(TWO_PER_MINUTE, key)
    with trio.fail_after(TIMEOUT):
        found = await limiter.take_unless_locked_then_read(rule, key, (pair,), reader, WORDS)
        assert found == (
            Verdict(None, 0, (Standing(2, 1, 60),)),
            {"word": "present", "note": None},
        )
        nothing = await limiter.take_unless_locked_then_read(
            rule,
            ("192.0.2.2", "client"),
            (Budget(TWO_PER_MINUTE, ("192.0.2.2", "client")),),
            reader,
            words("absent"),
        )
        assert nothing == (Verdict(None, 0, (Standing(2, 1, 60),)), None)
        nulls = await limiter.take_unless_locked_then_read(
            rule,
            ("192.0.2.3", "client"),
            (Budget(TWO_PER_MINUTE, ("192.0.2.3", "client")),),
            reader,
            NULLS,
        )
        assert nulls[1] == {"note": None}
        assert (await limiter.take_unless_locked_then_read(rule, key, (pair,), reader, WORDS))[1]
        refused = await limiter.take_unless_locked_then_read(rule, key, (pair,), reader, WORDS)
        assert refused == (Verdict(TWO_PER_MINUTE, 60, (Standing(2, 0, 60),)), None)
        assert await limiter.failed(rule, key) is True
        clock.advance(5)
        assert await limiter.take_unless_locked_then_read(rule, key, (pair,), reader, WORDS) == (
            Locked(25),
            None,
        )
        clock.advance(25)  # the lock ends now; the two hits counted stay a minute
        assert await limiter.take_unless_locked_then_read(rule, key, (pair,), reader, WORDS) == (
            Verdict(TWO_PER_MINUTE, 30, (Standing(2, 0, 30),)),
            None,
        )
        scaled = auth.ScaledRateLimiter(limiter, 2)
        fresh = ("192.0.2.4", "client")
        assert await scaled.take_unless_locked_then_read(
            rule, fresh, (Budget(ONE_PER_MINUTE, fresh),), reader, WORDS
        ) == (Verdict(None, 0, (Standing(2, 1, 60),)), {"word": "present", "note": None})


async def test_take_then_if_found_counts_the_rest_only_for_a_row(backend: Backend) -> None:
    """A data API call with a token seen before: the IP's budget, then the token's lookup, and
    the app's budgets only when the IP had room and the lookup found the live token."""
    limiter, reader = backend.limiter, backend.reader
    first, app = by_ip(THREE_PER_MINUTE), Budget(TWO_PER_MINUTE, ("app",))
    with trio.fail_after(TIMEOUT):
        found = await limiter.take_then_if_found(first, (app,), reader, WORDS)
        assert found == (
            Verdict(None, 0, (Standing(3, 2, 60),)),
            Verdict(None, 0, (Standing(2, 1, 60),)),
            {"word": "present", "note": None},
        )
        missing = await limiter.take_then_if_found(first, (app,), reader, words("absent"))
        assert missing == (Verdict(None, 0, (Standing(3, 1, 60),)), None, None)
        assert (await limiter.take(app)).standings == (Standing(2, 0, 60),), (
            "the app's budget was not counted for the lookup that found nothing"
        )
        _, refused, row = await limiter.take_then_if_found(first, (app,), reader, WORDS)
        assert refused == Verdict(TWO_PER_MINUTE, 60, (Standing(2, 0, 60),))
        assert row == {"word": "present", "note": None}
        assert await limiter.take_then_if_found(first, (app,), reader, WORDS) == (
            Verdict(THREE_PER_MINUTE, 60, (Standing(3, 0, 60),)),
            None,
            None,
        )
        scaled = auth.ScaledRateLimiter(limiter, 2)
        other = by_ip(ONE_PER_MINUTE, "192.0.2.9")
        _, then, _ = await scaled.take_then_if_found(
            other, (Budget(ONE_PER_MINUTE, ("other app",)),), reader, NULLS
        )
        assert then == Verdict(None, 0, (Standing(2, 1, 60),))


def statements_of(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements ``store.autocommit.fetchrow`` makes from now on, as they are made."""
    statements: list[str] = []
    fetchrow = store.autocommit.fetchrow

    async def counted(sql: str, *args: object) -> object:
        statements.append(sql)
        return await fetchrow(sql, *args)

    monkeypatch.setattr(store.autocommit, "fetchrow", counted)
    return statements


@pytest.mark.postgres
async def test_a_limiter_in_postgresql_reads_in_the_statement_that_counts(
    asyncio_loop: object, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the counts in the database read from, the take (or the takes) and the lookup are
    one round trip; from another database, two."""
    async with open_test_store("postgresql") as store, open_test_store("sqlite") as other:
        limiter = auth.StoreRateLimiter(store, clock, auth.Keyring(secrets.token_urlsafe(32)))
        statements = statements_of(store, monkeypatch)
        key = ("192.0.2.1", "client")
        budgets = (Budget(TWO_PER_MINUTE, key),)
        with trio.fail_after(TIMEOUT):
            _, row = await limiter.take_unless_locked_then_read(
                LOCKOUT, key, budgets, store.autocommit, WORDS
            )
            assert row == {"word": "present", "note": None}
            assert len(statements) == 1
            _, row = await limiter.take_unless_locked_then_read(
                LOCKOUT, key, budgets, other.autocommit, WORDS
            )
            assert row == {"word": "present", "note": None}
            assert len(statements) == 2, "the count alone on the limiter's store"
            by_ip, by_app, row = await limiter.take_then_if_found(
                Budget(THREE_PER_MINUTE, key),
                (Budget(TWO_PER_MINUTE, ("app",)),),
                store.autocommit,
                WORDS,
            )
            assert (by_ip.allowed, by_app, row) == (
                True,
                Verdict(None, 0, (Standing(2, 1, 60),)),
                {"word": "present", "note": None},
            )
            assert len(statements) == 3


@pytest.mark.postgres
async def test_the_database_counts_as_the_counters_in_python_do(
    asyncio_loop: object, clock: FrozenClock
) -> None:
    """``ledgerport_count_limits`` (PostgreSQL, migration 0025) against the same counting in
    Python (``BucketCount``, what the limiter does over SQLite): a seeded run of takes, hits and
    looks at several budgets at once, with the clock moved on and off the buckets' boundaries,
    answers the same verdicts, standings and waits on both, and leaves the same rows: each
    count's dense hits (empty buckets between kept as zeros) and the time it stops counting."""
    rng = random.Random(2026)
    limits = [
        catalog.RateLimit("test-equal-three", 3, 60, "ip"),
        catalog.RateLimit("test-equal-five", 5, 60, "ip"),
        catalog.RateLimit("test-equal-two-long", 2, 300, "user"),
        catalog.RateLimit("test-equal-forty", 40, 60, "ip"),
    ]
    budgets = [Budget(limit, (key,)) for limit in limits for key in ("a", "b")]
    # A step back is another process whose clock is behind: its hit lands in an older bucket.
    steps = [0.0, 0.0, 0.25, 0.5, 1.0, 1.0, 2.75, 7.5, 30.0, 59.0, 61.0, -1.5]
    keyring = auth.Keyring(secrets.token_urlsafe(32))
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(fresh_database())
        postgres = await _migrated(await stack.enter_async_context(open_postgres(url, max_size=2)))
        sqlite = await stack.enter_async_context(open_test_store("sqlite"))
        in_sql = auth.StoreRateLimiter(postgres, clock, keyring)
        in_python = auth.StoreRateLimiter(sqlite, clock, keyring)
        with trio.fail_after(TIMEOUT * 4):
            for step in range(600):
                clock.advance(rng.choice(steps))
                chosen = tuple(rng.sample(budgets, rng.randint(1, 3)))
                action = rng.choice(["take", "take", "take", "hit", "retry_after"])
                if action == "take":
                    answers = [await limiter.take(*chosen) for limiter in (in_sql, in_python)]
                elif action == "hit":
                    answers = [await limiter.hit(*chosen) for limiter in (in_sql, in_python)]
                else:
                    answers = [
                        await limiter.retry_after(*chosen) for limiter in (in_sql, in_python)
                    ]
                assert answers[0] == answers[1], (step, action, chosen)
            rows = [
                await store.autocommit.fetch(
                    "SELECT budget, key, state, hits, expires_at FROM rate_limits"
                    " ORDER BY budget, key"
                )
                for store in (postgres, sqlite)
            ]
        assert rows[0] == rows[1]
        assert rows[0], "counts still kept (the sweep deletes only those that stopped counting)"
        assert any(",0," in row["hits"] for row in rows[0]), "a count with an empty bucket"


@pytest.mark.postgres
async def test_a_count_writes_each_row_it_finds_once(asyncio_loop: object) -> None:
    """``ledgerport_count_limits`` (migrations 0024 and 0025) locks a row that exists by
    reading it, so a call writes one row version per budget (its new hits), where an upsert's
    dummy update made two; a missing row is inserted, then written with its hits."""
    call = (
        "SELECT ledgerport_count_limits('take', $1, 60, $2::text[], $3::text[],"
        " $4::int[], $5::float8[])"
    )
    names = ["test-once-a", "test-once-b"]
    args = (names, ["k", "k"], [100, 100], [60.0, 60.0])
    changes = (
        "SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables WHERE relname = 'rate_limits'"
    )
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(fresh_database())
        store = await _migrated(await stack.enter_async_context(open_postgres(url, max_size=2)))
        seen = []
        for now in (1000.0, 1000.5, 1003.0):
            async with store.transaction() as tx:
                # Counted since the transaction began (what the session has yet to report is
                # included, so the difference is taken).
                before = await tx.fetchrow(changes)
                await tx.fetchval(call, now, *args)
                after = await tx.fetchrow(changes)
                assert before is not None
                assert after is not None
                seen.append(tuple(after[c] - before[c] for c in ("n_tup_ins", "n_tup_upd")))
        assert seen == [(2, 2), (0, 2), (0, 2)]
        rows = await store.autocommit.fetch(
            "SELECT state, hits FROM rate_limits WHERE budget = ANY($1::text[]) ORDER BY budget",
            names,
        )
        assert [tuple(row.values()) for row in rows] == [("", "[1000,1,1,0,1]")] * 2


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
async def test_a_count_keeps_its_hits_dense_from_its_first_bucket_with_hits(
    backend: Backend, clock: FrozenClock
) -> None:
    """A row's ``hits`` (migration 0025), written by the function on PostgreSQL and in Python
    on SQLite: the first bucket with hits, then every bucket's hits up to the newest, empty
    ones as zeros. Buckets that left the window are dropped, and so are the empty ones that
    would then lead; a hit from a clock behind the others' goes in its older bucket, before the
    first when it is older than that."""
    budget = Budget(catalog.RateLimit("test-dense", 40, 60, "ip"), ("192.0.2.1",))
    gap = ",0" * 57
    steps = [
        (1000.0, "[1000,1]"),
        (1001.5, "[1000,1,0,1]"),
        (1003.0, "[1000,1,0,1,1]"),
        # Bucket 1000 has left the window and 1001, empty, would lead.
        (1060.5, f"[1002,1,1{gap},1]"),
        (1001.7, f"[1002,2,1{gap},1]"),
        (1000.2, f"[1001,1,2,1{gap},1]"),
        (998.9, f"[999,1,0,1,2,1{gap},1]"),
    ]
    seen = []
    with trio.fail_after(TIMEOUT):
        for now, _ in steps:
            clock.set(now)
            assert (await backend.limiter.take(budget)).allowed
            seen.append(
                await backend.reader.fetchval(
                    "SELECT hits FROM rate_limits WHERE budget = 'test-dense'"
                )
            )
    assert seen == [hits for _, hits in steps]


def noting(key: str) -> auth.Lookup:
    """A lookup that writes: a settings row named ``key``, made only for an allowed take."""
    return auth.Lookup(
        "SELECT key FROM noted",
        (key,),
        writes="noted AS (INSERT INTO settings (key, value)"
        " SELECT $1, 'noted' FROM ledgerport_allowed RETURNING key)",
    )


@pytest.mark.postgres
@pytest.mark.parametrize(
    "kept",
    ["postgresql", "settled", "memory", pytest.param("redis", marks=pytest.mark.redis)],
)
async def test_a_lookup_writes_only_for_a_request_counted(
    kept: str, asyncio_loop: object, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh token's rotation rides with its count: the lookup's writes are made only when
    the take was allowed, never for a request refused or locked. With the counts in the
    PostgreSQL database written to, the count and the writes are one statement; elsewhere the
    writes follow the allowed take."""
    keyring = auth.Keyring(secrets.token_urlsafe(32))
    rule = LockoutRule("test-write-lockout", failures=1, window=10, duration=30)
    key = ("192.0.2.1", "client")
    budgets = (Budget(TWO_PER_MINUTE, key),)
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(fresh_database())
        store = await _migrated(await stack.enter_async_context(open_postgres(url, max_size=3)))
        limiter: RateLimiter
        if kept == "postgresql":
            limiter = auth.StoreRateLimiter(store, clock, keyring)
        elif kept == "settled":
            limiter = settling(store, clock, keyring)
        elif kept == "memory":
            limiter = auth.MemoryRateLimiter(clock)
        else:
            limiter = await auth.connect_redis_limiter(REDIS_URL, clock, keyring)
        statements = statements_of(store, monkeypatch)

        async def take(name: str) -> tuple[object, object]:
            return await limiter.take_unless_locked_then_read(
                rule, key, budgets, store.autocommit, noting(name)
            )

        async def noted() -> list[str]:
            rows = await store.autocommit.fetch(
                "SELECT key FROM settings WHERE value = 'noted' ORDER BY key"
            )
            return [row["key"] for row in rows]

        with trio.fail_after(TIMEOUT):
            assert await take("a") == (Verdict(None, 0, (Standing(2, 1, 60),)), {"key": "a"})
            assert len(statements) == 1
            assert await take("b") == (Verdict(None, 0, (Standing(2, 0, 60),)), {"key": "b"})
            assert await take("c") == (Verdict(TWO_PER_MINUTE, 60, (Standing(2, 0, 60),)), None)
            assert await noted() == ["a", "b"], "nothing written for the refused request"
            assert await limiter.failed(rule, key) is True
            assert await take("d") == (Locked(30), None)
            assert await noted() == ["a", "b"], "nothing written for the locked request"
            clock.advance(60)  # the lock is over and the budget whole again
            assert await take("e") == (Verdict(None, 0, (Standing(2, 1, 60),)), {"key": "e"})
            assert await noted() == ["a", "b", "e"]
            # Settled: "a" in the process (one statement, the lock and the lookup), "b" in
            # the database (its settlement a transaction of its own), and so on.
            made = 5 if kept in ("postgresql", "settled") else 3
            assert len(statements) == made, "one statement a take in the database counted in"


async def test_a_scaled_limiter_scales_the_budgets_not_the_lock(
    backend: Backend, clock: FrozenClock
) -> None:
    limiter = auth.ScaledRateLimiter(backend.limiter, 2)
    rule = LockoutRule("test-scaled-lockout", failures=1, window=10, duration=30)
    key = ("192.0.2.1", "client")
    with trio.fail_after(TIMEOUT):
        taken = await limiter.take_unless_locked(rule, key, Budget(ONE_PER_MINUTE, key))
        assert isinstance(taken, Verdict)
        assert taken.standings[0] == Standing(2, 1, 60)
        assert await limiter.failed(rule, key) is True
        assert await limiter.take_unless_locked(rule, key, Budget(ONE_PER_MINUTE, key)) == (
            Locked(30)
        )


@pytest.mark.parametrize("backend", SHARED, indirect=True)
async def test_shared_counters_stay_within_their_bound(
    backend: Backend, clock: FrozenClock
) -> None:
    """Off the buckets' boundaries the shared counters never allow more than the limit in any
    window: a bucket's hits count until a window after the newest of them, so a hit made
    earlier in the same bucket counts at most a bucket (a second of a minute) longer than an
    exact window would count it, and the newest exactly as long."""
    limiter = backend.limiter
    budget = by_ip(TWO_PER_MINUTE)
    with trio.fail_after(TIMEOUT):
        clock.advance(0.25)
        first = clock.now()
        assert (await limiter.take(budget)).allowed
        clock.advance(0.5)  # the same bucket
        newest = clock.now()
        assert (await limiter.take(budget)).allowed
        clock.set(first + 60 - 0.01)  # 0.01 s before an exact window would forget the first
        assert await limiter.retry_after(budget) == 1
        clock.set(first + 60)
        assert await limiter.retry_after(budget) == 1, "counted with the newest of its bucket"
        clock.set(newest + 60 - 0.01)
        assert await limiter.retry_after(budget) == 1
        clock.set(newest + 60)
        verdict = await limiter.take(budget)
        assert verdict.allowed
        assert verdict.standings[0].reset_in == 60


async def test_concurrent_takes_from_two_processes_stay_all_or_nothing(
    backend: Backend,
) -> None:
    """Takes of two budgets racing from two limiters over the same counts: the budget that
    refuses most of them is not charged by the others."""
    wide = catalog.RateLimit("test-race-wide", 12, 60, "ip")
    allowed: list[bool] = []

    async def take(limiter: RateLimiter) -> None:
        verdict = await limiter.take(by_ip(wide), Budget(TWO_PER_FIVE_MINUTES, ("x",)))
        allowed.append(verdict.allowed)

    with trio.fail_after(TIMEOUT):
        twin = await backend.twin()
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(take, backend.limiter if i % 2 else twin)
        assert allowed.count(True) == 2
        assert (await twin.take(by_ip(wide))).standings[0].remaining == 9


async def test_concurrent_takes_share_one_budget(backend: Backend) -> None:
    limit = catalog.RateLimit("test-race", 12, 60, "ip")
    allowed: list[bool] = []

    async def take(limiter: RateLimiter) -> None:
        allowed.append((await limiter.take(by_ip(limit))).allowed)

    with trio.fail_after(TIMEOUT):
        twin = await backend.twin()
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(take, backend.limiter if i % 2 else twin)
        assert allowed.count(True) == 12
        assert await twin.retry_after(by_ip(limit)) == 60
