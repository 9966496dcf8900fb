"""Password hashing with Argon2id (memory-hard); hashing runs on a worker thread."""

from __future__ import annotations

import trio
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()  # argon2-cffi's RFC 9106 low-memory profile: 64 MiB, t=3, p=4
# Hashes are CPU and memory heavy: at most two at once, so login bursts cannot exhaust memory.
_limiter = trio.CapacityLimiter(2)
# A fixed hash to verify against when the user does not exist, so timing does not tell.
_DUMMY_HASH = _hasher.hash("ledgerport-no-such-user")


async def hash_password(password: str) -> str:
    return await trio.to_thread.run_sync(_hasher.hash, password, limiter=_limiter)


def _verify(stored: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored or _DUMMY_HASH, password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False


async def verify_password(stored: str | None, password: str) -> bool:
    """True when ``password`` matches ``stored``; a missing user costs the same time."""
    return await trio.to_thread.run_sync(_verify, stored, password, limiter=_limiter)
