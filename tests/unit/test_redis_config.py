"""LEDGERPORT_REDIS_URL: unset by default, the URL forms it takes, and named errors that never
show its password."""

from __future__ import annotations

import pytest

from ledgerport.config import ConfigError, load


def test_unset_or_empty_means_no_redis() -> None:
    assert load({}).redis_url is None
    assert load({"LEDGERPORT_REDIS_URL": "  "}).redis_url is None


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "redis://cache.internal",
        "redis://:secret@cache.internal:6380/15",
        "redis://ledgerport:secret@[::1]:6379",
        "rediss://cache.example.com:6380/2",
    ],
)
def test_redis_urls_are_accepted(url: str) -> None:
    assert load({"LEDGERPORT_REDIS_URL": f" {url} "}).redis_url == url


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://:secret@cache.internal:6379", "unsupported URL"),
        ("unix:///run/redis.sock", "unsupported URL"),
        ("redis://:secret@cache.internal:port/0", "bad port"),
        ("redis://:secret@cache.internal:70000", "bad port"),
        ("redis://:secret@/0", "no host"),
        ("redis://:secret@cache.internal/ledgerport", "database number"),
    ],
)
def test_bad_urls_are_named_with_the_password_masked(url: str, problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load({"LEDGERPORT_REDIS_URL": url})
    message = str(caught.value)
    assert message.startswith("LEDGERPORT_REDIS_URL: ")
    assert problem in message
    assert "secret" not in message
