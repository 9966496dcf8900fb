"""What a process keeps of the access tokens it has seen: their app and business, the most
recently used ``TOKEN_OWNERS_KEPT`` of them (``auth.TokenOwners``)."""

from __future__ import annotations

from ledgerport import auth


def test_the_most_recently_used_are_kept_up_to_the_bound() -> None:
    owners = auth.TokenOwners(size=3)
    for key in "abc":
        owners.keep(key, (f"app-{key}", "business"))
    assert owners.get("a") == ("app-a", "business")  # now the most recently used
    owners.keep("d", ("app-d", "business"))
    assert len(owners) == 3
    assert owners.get("b") is None, "the least recently used went"
    assert [owners.get(key) is not None for key in "acd"] == [True, True, True]


def test_a_token_found_dead_is_forgotten() -> None:
    owners = auth.TokenOwners()
    owners.keep("a", ("app", "business"))
    owners.forget("a")
    owners.forget("never kept")
    assert owners.get("a") is None
    assert len(owners) == 0


def test_the_default_bound() -> None:
    owners = auth.TokenOwners()
    for index in range(auth.TOKEN_OWNERS_KEPT + 10):
        owners.keep(str(index), ("app", "business"))
    assert len(owners) == auth.TOKEN_OWNERS_KEPT
    assert owners.get("0") is None
