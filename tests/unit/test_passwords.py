"""Password hashing keeps argon2-cffi's production profile (tests elsewhere use cheap ones)."""

from __future__ import annotations

import pytest

from ledgerport.auth import _passwords


@pytest.fixture(autouse=True)
def quick_password_hashing() -> None:
    """Overrides the suite's cheap hasher: these tests look at the production profile."""


def test_production_profile_is_rfc_9106_low_memory() -> None:
    hasher = _passwords._hasher
    assert (hasher.memory_cost, hasher.time_cost, hasher.parallelism) == (65536, 3, 4)


async def test_hash_verifies_and_wrong_password_does_not() -> None:
    stored = await _passwords.hash_password("correct horse battery")

    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert await _passwords.verify_password(stored, "correct horse battery")
    assert not await _passwords.verify_password(stored, "wrong horse battery")


async def test_unknown_user_never_verifies() -> None:
    assert not await _passwords.verify_password(None, "ledgerport-no-such-user")
