"""Sliding-window rate limits and the failed-authentication lockout, in memory.

Both reset on restart, which is safe: a restart only forgets recent counts. Time comes from the
injected clock, so tests set it instead of sleeping.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable

from ledgerport import catalog
from ledgerport.clock import Clock

_SWEEP_EVERY = 10_000


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

    def retry_after(self, key: Hashable) -> int | None:
        """Seconds until ``key`` may hit again, or None when it may hit now."""
        now = self._clock.now()
        hits = self._recent(key, now)
        if len(hits) < self.limit:
            return None
        return max(1, math.ceil(hits[0] + self.window - now))

    def hit(self, key: Hashable) -> None:
        now = self._clock.now()
        self._recent(key, now).append(now)
        self._since_sweep += 1
        if self._since_sweep >= _SWEEP_EVERY:
            self._sweep(now)

    def take(self, key: Hashable) -> int | None:
        """Count a hit if allowed; answers None when counted, else the seconds to wait."""
        wait = self.retry_after(key)
        if wait is None:
            self.hit(key)
        return wait

    def remaining(self, key: Hashable) -> int:
        return max(0, self.limit - len(self._recent(key, self._clock.now())))

    def reset_in(self, key: Hashable) -> int:
        now = self._clock.now()
        hits = self._recent(key, now)
        return 0 if not hits else max(1, math.ceil(hits[0] + self.window - now))

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
        return max(1, math.ceil(until - now))

    def failed(self, key: Hashable) -> bool:
        """Record a failure; answers True when this failure locks the key."""
        self._failures.hit(key)
        if self._failures.remaining(key) == 0:
            self._locked_until[key] = self._clock.now() + self._duration
            return True
        return False
