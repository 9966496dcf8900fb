"""A webhook's keep-alive connections, against a real receiver on loopback: attempts reuse an
open connection, never share one at once, and never send on one the receiver has closed or
whose answer was not read to its end (such an attempt would fail for nothing). Over HTTPS the
receiver's certificate is verified against the URL's host (a test CA from ``trustme`` stands for
the public ones), and a receiver that fails the check is sent nothing."""

from __future__ import annotations

import ssl
from typing import Any

import pytest
import trio
import trustme

from ledgerport.engine import DeliveryEngine
from ledgerport.platform import Platform

from ..receiver import Answer, receiving
from .webhook_world import Hooked, deliver, engine_for, hooked

TIMEOUT = 30
IN_FLIGHT = 8
"""The engine's attempts of one webhook at once (its default)."""


async def _statuses(hook: Hooked) -> list[tuple[str, int]]:
    return [
        (delivery["status"], delivery["attempts"])
        for delivery in await hook.console.deliveries(hook.webhook["id"])
    ]


async def _one_by_one(hook: Hooked, engine: DeliveryEngine, count: int) -> None:
    for index in range(count):
        await hook.api.customer(f"Customer {index}")
        await deliver(engine)


async def test_attempts_one_after_another_reuse_one_connection(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            await _one_by_one(hook, engine, 5)
            assert len(hook.receiver.received) == 5
            assert hook.receiver.connections == 1
            assert await _statuses(hook) == [("delivered", 1)] * 5


async def test_attempts_at_once_each_have_a_connection_and_keep_them(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """Twice as many deliveries as may be in flight, answered slowly: as many connections as
    attempts at once, no more, and the second half goes over the first half's connections."""
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(delay=0.2)
            for index in range(2 * IN_FLIGHT):
                await hook.api.customer(f"Customer {index}")
            await deliver(engine)
            assert len(hook.receiver.received) == 2 * IN_FLIGHT
            assert hook.receiver.connections == IN_FLIGHT
            # The next burst finds every connection idle and open.
            for index in range(IN_FLIGHT):
                await hook.api.customer(f"Later customer {index}")
            await deliver(engine)
            assert len(hook.receiver.received) == 3 * IN_FLIGHT
            assert hook.receiver.connections == IN_FLIGHT
            assert await _statuses(hook) == [("delivered", 1)] * (3 * IN_FLIGHT)


async def test_a_connection_the_receiver_closed_is_not_used_again(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """A receiver that says it closes (``Connection: close``) and one that hangs up without
    saying so (its keep-alive timeout between two requests): the next attempt opens a new
    connection and is delivered the first time."""
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.script = [Answer(close=True), Answer(hang_up=True)]
            await _one_by_one(hook, engine, 3)
            assert len(hook.receiver.received) == 3
            assert hook.receiver.connections == 3
            assert await _statuses(hook) == [("delivered", 1)] * 3


async def test_a_connection_whose_answer_was_cut_off_is_not_used_again(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """An answer without end is read as far as it is kept, and its connection closed: the
    next attempt goes over a new one."""
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.script = [Answer(body=b"head:", endless=True)]
            await _one_by_one(hook, engine, 2)
            await hook.receiver.wait_cut_off()
            assert len(hook.receiver.received) == 2
            assert hook.receiver.connections == 2
            assert sorted(await _statuses(hook)) == [("delivered", 1)] * 2


async def test_a_webhook_moved_to_another_receiver_connects_there(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    """The connection kept for the old address is not used for the new one."""
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
            receiving() as moved_to,
        ):
            await _one_by_one(hook, engine, 1)
            await hook.console.ok("PATCH", f"/webhooks/{hook.webhook['id']}", {"url": moved_to.url})
            await _one_by_one(hook, engine, 2)
            assert len(hook.receiver.received) == 1
            assert len(moved_to.received) == 2
            assert moved_to.connections == 1
            assert await _statuses(hook) == [("delivered", 1)] * 3


def _tls(name: str = "127.0.0.1") -> tuple[trustme.CA, ssl.SSLContext]:
    """A CA, and a receiver's server context with its certificate for ``name``."""
    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(server)
    return ca, server


def _trusting(ca: trustme.CA) -> ssl.SSLContext:
    """What the engine verifies with: the CA bundle's context, trusting ``ca`` as well."""
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def test_https_attempts_verify_the_receiver_and_reuse_the_connection(
    platform: Platform, client: Any, admin_headers: dict[str, str]
) -> None:
    ca, server = _tls()
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"], tls=server) as hook,
            engine_for(platform, tls=_trusting(ca)) as engine,
        ):
            assert hook.webhook["url"].startswith("https://")
            await _one_by_one(hook, engine, 3)
            assert len(hook.receiver.received) == 3
            assert hook.receiver.connections == 1
            assert await _statuses(hook) == [("delivered", 1)] * 3


@pytest.mark.parametrize(
    ("refused", "said"),
    [
        ("a certificate of a CA the engine does not trust", "unable to get local issuer"),
        ("a certificate for another name", "not valid for '127.0.0.1'"),
    ],
)
async def test_a_receiver_whose_certificate_fails_is_sent_nothing(
    platform: Platform, client: Any, admin_headers: dict[str, str], refused: str, said: str
) -> None:
    """Nothing is sent, and the attempt log says why in the words of the TLS check (what an
    app's developer needs to mend the receiver)."""
    if refused.endswith("another name"):
        ca, server = _tls("hooks.example.com")
        trusted = _trusting(ca)
    else:
        _, server = _tls()
        trusted = _trusting(trustme.CA())
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"], tls=server) as hook,
            engine_for(platform, tls=trusted) as engine,
        ):
            await _one_by_one(hook, engine, 1)
            (delivery,) = await hook.console.deliveries(hook.webhook["id"])
            assert hook.receiver.received == []
            assert hook.receiver.handshakes_failed == 1
    assert (delivery["status"], delivery["attempts"]) == ("retrying", 1)
    assert delivery["lastError"].startswith("connection error"), delivery["lastError"]
    assert "CERTIFICATE_VERIFY_FAILED" in delivery["lastError"], delivery["lastError"]
    assert said in delivery["lastError"], delivery["lastError"]
