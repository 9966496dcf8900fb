"""Password hashing: the standard profile is RFC 9106's low-memory one; fast is for tests only."""

from __future__ import annotations

import pytest

from ledgerport.auth import Passwords
from ledgerport.config import ConfigError, load


def test_standard_profile_is_rfc_9106_low_memory() -> None:
    assert Passwords("standard").parameters == (65536, 3, 4)


def test_standard_is_the_configured_default() -> None:
    assert load({}).password_hashing == "standard"


def test_fast_hashing_needs_development() -> None:
    with pytest.raises(ConfigError, match="LEDGERPORT_PASSWORD_HASHING"):
        load({"LEDGERPORT_PASSWORD_HASHING": "fast"})
    assert (
        load(
            {"LEDGERPORT_PASSWORD_HASHING": "fast", "LEDGERPORT_ENV": "development"}
        ).password_hashing
        == "fast"
    )


def test_unknown_profile_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="LEDGERPORT_PASSWORD_HASHING"):
        load({"LEDGERPORT_PASSWORD_HASHING": "md5"})


async def test_hash_verifies_and_wrong_password_does_not() -> None:
    passwords = Passwords("standard")
    stored = await passwords.hash("correct horse battery")

    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert await passwords.verify(stored, "correct horse battery")
    assert not await passwords.verify(stored, "wrong horse battery")


async def test_profiles_verify_each_others_hashes() -> None:
    fast, standard = Passwords("fast"), Passwords("standard")

    assert await standard.verify(await fast.hash("pw one two"), "pw one two")
    assert await fast.verify(await standard.hash("pw one two"), "pw one two")


@pytest.mark.parametrize("profile", ["standard", "fast"])
async def test_unknown_user_never_verifies(profile: str) -> None:
    passwords = Passwords(profile)  # type: ignore[arg-type]

    assert not await passwords.verify(None, "ledgerport-no-such-user")
    assert not await passwords.verify(None, "anything else")
