"""SlidingWindow and Lockout against a frozen clock: exact boundaries and Retry-After values."""

from __future__ import annotations

import pytest

from ledgerport import catalog
from ledgerport.auth import (
    Budget,
    Lockout,
    LockoutRule,
    MemoryRateLimiter,
    ScaledRateLimiter,
    SlidingWindow,
)
from ledgerport.catalog import RateLimit
from ledgerport.clock import FrozenClock


def test_window_allows_exactly_limit_hits() -> None:
    clock = FrozenClock()
    window = SlidingWindow(clock, 3, 60)
    assert [window.take("k") for _ in range(3)] == [None, None, None]
    assert window.take("k") == 60
    assert window.remaining("k") == 0
    # A refused take is not counted.
    assert window.take("k") == 60


def test_window_slides_hit_by_hit() -> None:
    clock = FrozenClock()
    window = SlidingWindow(clock, 2, 60)
    assert window.take("k") is None
    clock.advance(10)
    assert window.take("k") is None
    clock.advance(49.5)  # 59.5 s after the first hit
    assert window.retry_after("k") == 1
    clock.advance(0.5)  # exactly 60 s after the first hit: it has left the window
    assert window.retry_after("k") is None
    assert window.take("k") is None
    assert window.retry_after("k") == 10  # now waits for the second hit (at t=10) to age out
    clock.advance(9)
    assert window.retry_after("k") == 1
    clock.advance(1)
    assert window.take("k") is None


@pytest.mark.parametrize(("elapsed", "expected"), [(0, 60), (1, 59), (30.2, 30), (59.9, 1)])
def test_retry_after_is_ceiled_seconds(elapsed: float, expected: int) -> None:
    clock = FrozenClock()
    window = SlidingWindow(clock, 1, 60)
    window.hit("k")
    clock.advance(elapsed)
    assert window.retry_after("k") == expected


def test_keys_are_independent_and_remaining_reset() -> None:
    clock = FrozenClock()
    window = SlidingWindow(clock, 2, 60)
    window.hit(("1.2.3.4", "a"))
    window.hit(("1.2.3.4", "a"))
    assert window.retry_after(("1.2.3.4", "a")) == 60
    assert window.retry_after(("1.2.3.4", "b")) is None
    assert window.retry_after(("5.6.7.8", "a")) is None
    assert window.remaining(("1.2.3.4", "b")) == 2
    assert window.reset_in(("1.2.3.4", "b")) == 0
    clock.advance(15)
    assert window.reset_in(("1.2.3.4", "a")) == 45


def test_lockout_locks_on_the_tenth_failure_for_sixty_seconds() -> None:
    assert catalog.LOCKOUT_FAILURES == 10
    assert catalog.LOCKOUT_WINDOW == 60
    assert catalog.LOCKOUT_DURATION == 60
    clock = FrozenClock()
    lockout = Lockout(clock)
    key = ("1.2.3.4", "client")
    for _ in range(9):
        assert lockout.failed(key) is False
        assert lockout.locked_for(key) is None
    assert lockout.failed(key) is True
    assert lockout.locked_for(key) == 60
    assert lockout.locked_for(("1.2.3.4", "other")) is None
    assert lockout.locked_for(("9.9.9.9", "client")) is None
    clock.advance(59.5)
    assert lockout.locked_for(key) == 1
    clock.advance(0.5)
    assert lockout.locked_for(key) is None


def test_lockout_failures_outside_the_window_do_not_count() -> None:
    clock = FrozenClock()
    lockout = Lockout(clock)
    for _ in range(9):
        lockout.failed("k")
    clock.advance(60)  # the nine failures age out
    for _ in range(9):
        assert lockout.failed("k") is False
    assert lockout.locked_for("k") is None
    assert lockout.failed("k") is True


def test_lockout_spread_failures_within_window() -> None:
    clock = FrozenClock()
    lockout = Lockout(clock)
    for _ in range(10):
        locked = lockout.failed("k")
        clock.advance(59 / 9)
    assert locked is True


def test_lockout_custom_parameters() -> None:
    clock = FrozenClock()
    lockout = Lockout(clock, failures=2, window=10, duration=30)
    assert lockout.failed("k") is False
    assert lockout.failed("k") is True
    clock.advance(29)
    assert lockout.locked_for("k") == 1
    clock.advance(1)
    assert lockout.locked_for("k") is None


async def test_a_scaled_limiter_multiplies_allowances_not_lockouts() -> None:
    clock = FrozenClock()
    limiter = ScaledRateLimiter(MemoryRateLimiter(clock), 3)
    budget = Budget(RateLimit("tiny", 2, 60, "ip"), ("198.51.100.1",))
    rule = LockoutRule("test", failures=2)

    verdicts = [await limiter.take(budget) for _ in range(7)]
    locked = [await limiter.failed(rule, ("k",)) for _ in range(2)]

    assert [v.allowed for v in verdicts] == [True] * 6 + [False]
    assert locked == [False, True]
