"""Password hashing with Argon2id (memory-hard); hashing runs on worker threads.

The profile is configuration (``LEDGERPORT_PASSWORD_HASHING``): ``standard`` is argon2-cffi's
RFC 9106 low-memory profile (64 MiB, t=3, p=4), about 0.4 s a hash; ``fast`` (development only)
costs a millisecond, for test suites that create many users. A hash carries its parameters, so
either profile verifies hashes made under the other.
"""

from __future__ import annotations

from typing import Literal

import trio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

PasswordProfile = Literal["standard", "fast"]
PASSWORD_PROFILES: tuple[PasswordProfile, ...] = ("standard", "fast")

# Hashes are CPU and memory heavy: at most two at once, so login bursts cannot exhaust memory.
_CONCURRENT_HASHES = 2


def _hasher(profile: PasswordProfile) -> PasswordHasher:
    if profile == "fast":
        return PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
    return PasswordHasher()


class Passwords:
    """Hashes and verifies passwords under one profile; a missing user costs the same time."""

    def __init__(self, profile: PasswordProfile = "standard") -> None:
        self.profile = profile
        self._hasher = _hasher(profile)
        self._limiter = trio.CapacityLimiter(_CONCURRENT_HASHES)
        self._dummy_hash: str | None = None

    @property
    def parameters(self) -> tuple[int, int, int]:
        """(memory in KiB, iterations, parallelism) of new hashes."""
        hasher = self._hasher
        return hasher.memory_cost, hasher.time_cost, hasher.parallelism

    async def hash(self, password: str) -> str:
        return await trio.to_thread.run_sync(self._hasher.hash, password, limiter=self._limiter)

    def _verify(self, stored: str | None, password: str) -> bool:
        if stored is None and self._dummy_hash is None:
            # Made once, on the first unknown user: verifying against it costs what a real
            # verification costs, so timing does not tell whether the user exists.
            self._dummy_hash = self._hasher.hash("ledgerport-no-such-user")
        try:
            return self._hasher.verify(stored or self._dummy_hash or "", password) and (
                stored is not None
            )
        except (VerificationError, InvalidHashError):
            return False

    async def verify(self, stored: str | None, password: str) -> bool:
        """True when ``password`` matches ``stored``; None (no such user) is never a match."""
        return await trio.to_thread.run_sync(self._verify, stored, password, limiter=self._limiter)
