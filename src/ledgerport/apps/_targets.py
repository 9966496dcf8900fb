"""Where a webhook may point: the address rules that keep deliveries off the service's own network.

In production a webhook's URL is https and its host must resolve only to public addresses:
private, loopback, link-local, multicast, reserved and unspecified addresses are refused, at
registration and again when an attempt connects (the engine checks the address it actually
connects to, so a name that resolves elsewhere later gains nothing). With
``LEDGERPORT_ENV=development`` a webhook may also be ``http://`` on a loopback host, and no
address is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable
from typing import Protocol
from urllib.parse import urlsplit

import trio

from ._uris import is_loopback_host, web_url_problem

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
RESOLVE_TIMEOUT = 5.0
"""Seconds a webhook's host name has to resolve when the webhook is saved."""


class Resolver(Protocol):
    """Answers the addresses a host name resolves to (for a TCP connection to ``port``)."""

    def __call__(self, host: str, port: int, /) -> Awaitable[list[str]]: ...


def address_allowed(address: IPAddress) -> bool:
    """Whether a production webhook may connect to ``address``: a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


async def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, as the system resolver answers them."""
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def webhook_url_problem(url: object, *, development: bool) -> str | None:
    """What is wrong with a webhook URL as written (no name is resolved), or None."""
    problem = web_url_problem(url)
    if problem is not None:
        return problem
    assert isinstance(url, str)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "http" and not development:
        return "must use https (http only on a loopback address with LEDGERPORT_ENV=development)"
    if development:
        return None
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return "must not point at this machine" if is_loopback_host(host) else None
    if not address_allowed(literal):
        return "must not point at a private, loopback, link-local, multicast or reserved address"
    return None


def _host_to_resolve(url: object, *, development: bool) -> tuple[str, int] | None:
    """The host name (and port) that saving a webhook at ``url`` resolves, if any."""
    if development or webhook_url_problem(url, development=development) is not None:
        return None
    assert isinstance(url, str)
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        ipaddress.ip_address(host)
        return None  # a literal address is checked as written
    except ValueError:
        return host, parts.port or 443


async def resolve_ahead(
    url: object, *, development: bool, resolver: Resolver = resolve
) -> Resolver:
    """Resolve the host a webhook at ``url`` will be checked against now, before a
    transaction begins, and answer a resolver that replays the outcome (addresses, failure or
    timeout) to :func:`webhook_target_problem` inside it. A slow name then holds no transaction
    (on SQLite one transaction holds the whole store). Other names go to ``resolver``."""
    target = _host_to_resolve(url, development=development)
    if target is None:
        return resolver
    outcome: list[str] | BaseException
    try:
        with trio.fail_after(RESOLVE_TIMEOUT):
            outcome = await resolver(*target)
    except (OSError, trio.TooSlowError) as failed:
        outcome = failed

    async def replay(host: str, port: int, /) -> list[str]:
        if (host, port) != target:
            return await resolver(host, port)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    return replay


async def webhook_target_problem(
    url: object, *, development: bool, resolver: Resolver = resolve
) -> str | None:
    """:func:`webhook_url_problem`, and in production the addresses its host resolves to."""
    problem = webhook_url_problem(url, development=development)
    if problem is not None:
        return problem
    target = _host_to_resolve(url, development=development)
    if target is None:
        return None
    host, port = target
    try:
        with trio.fail_after(RESOLVE_TIMEOUT):
            addresses = await resolver(host, port)
    except OSError:
        return f"host {host} does not resolve"
    except trio.TooSlowError:
        return f"host {host} did not resolve within {RESOLVE_TIMEOUT:g} s"
    if not addresses:
        return f"host {host} does not resolve"
    for address in addresses:
        if not address_allowed(ipaddress.ip_address(address.split("%", 1)[0])):
            return (
                "resolves to a private, loopback, link-local, multicast or reserved address"
                f" ({address})"
            )
    return None
