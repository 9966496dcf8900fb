"""The injected clock: domain code reads "now" from here, never from time.time().

Tests set the time with :class:`FrozenClock`; the service uses :class:`SystemClock`.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Current time as unix seconds."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class FrozenClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def set(self, when: float) -> None:
        self._now = when

    def advance(self, seconds: float) -> None:
        self._now += seconds
