"""Where a webhook may point: the address rules that keep deliveries off the service's own network.

In production a webhook's URL is https and its host must resolve only to public addresses:
private, loopback, link-local, multicast, reserved and unspecified addresses are refused, also
when an IPv6 address carries one for a translator or tunnel to reach, at registration and again
when an attempt connects (the engine checks the address it actually connects to, so a name that
resolves elsewhere later gains nothing). With ``LEDGERPORT_ENV=development`` a webhook may also
be ``http://`` on a loopback host, and no address is refused. A service reached only on a
loopback address (``loopback``: its API and application hosts are loopback addresses, so every
client of it is on this machine) may deliver to this machine too: ``http://`` on a loopback host,
and loopback addresses, while private and other non-public addresses stay refused.
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


_NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")
"""RFC 6052's well-known NAT64 prefix: a translator sends to the IPv4 address in the last 32
bits (DNS64 writes an IPv4-only host's address this way on an IPv6-only network)."""
_LOCAL_NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b:1::/48")
"""RFC 8215's local-use translation prefix: not globally reachable, a translator behind it may
reach the operator's own IPv4 network, and where it carries the IPv4 address depends on a
prefix length (/48 to /96) only the operator knows, so it is refused whole."""


def _destinations(address: IPAddress) -> tuple[IPAddress, ...]:
    """The addresses a connection to ``address`` ends up at.

    An IPv6 address that carries an IPv4 address for a translator or tunnel to reach stands for
    that IPv4 address: IPv4-mapped (::ffff:a.b.c.d), 6to4 (2002::/16, bits 16 to 47), Teredo
    (2001:0::/32: its server, and its client as the inverted last 32 bits) and NAT64's
    well-known prefix. Judging the IPv6 address alone would let ``2002:7f00:1::`` reach
    127.0.0.1. IPv4-compatible ``::a.b.c.d`` (deprecated) needs nothing here: it lies in
    ``::/8``, which the standard library counts as reserved.
    """
    if isinstance(address, ipaddress.IPv4Address):
        return (address,)
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    if address in _NAT64_PREFIX:
        return (ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF),)
    return (address,)


def _public(address: IPAddress) -> bool:
    return not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


def address_allowed(address: IPAddress, *, loopback: bool = False) -> bool:
    """Whether a production webhook may connect to ``address``: a public unicast address, and
    every IPv4 address it embeds for a translator or tunnel (6to4, Teredo, NAT64, IPv4-mapped)
    public too; with ``loopback``, a loopback address as well."""
    if isinstance(address, ipaddress.IPv6Address) and address in _LOCAL_NAT64_PREFIX:
        return False
    if loopback and _loopback(address):
        return True
    return all(_public(destination) for destination in _destinations(address))


def _loopback(address: IPAddress) -> bool:
    """This machine: a loopback address, or IPv4's written as an IPv6 address (a tunnel's or a
    translator's, 6to4 or NAT64, leads elsewhere)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


async def resolve(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, as the system resolver answers them."""
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def webhook_url_problem(url: object, *, development: bool, loopback: bool = False) -> str | None:
    """What is wrong with a webhook URL as written (no name is resolved), or None."""
    problem = web_url_problem(url)
    if problem is not None:
        return problem
    assert isinstance(url, str)
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "http" and not development and not (loopback and is_loopback_host(host)):
        return (
            "must use https (http only on a loopback address, with LEDGERPORT_ENV=development"
            " or on a service reached on a loopback address)"
        )
    if development:
        return None
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        if is_loopback_host(host) and not loopback:
            return "must not point at this machine"
        return None
    if not address_allowed(literal, loopback=loopback):
        return "must not point at a private, loopback, link-local, multicast or reserved address"
    return None


def _host_to_resolve(
    url: object, *, development: bool, loopback: bool = False
) -> tuple[str, int] | None:
    """The host name (and port) that saving a webhook at ``url`` resolves, if any."""
    problem = webhook_url_problem(url, development=development, loopback=loopback)
    if development or problem is not None:
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
    url: object, *, development: bool, loopback: bool = False, resolver: Resolver = resolve
) -> Resolver:
    """Resolve the host a webhook at ``url`` will be checked against now, before a
    transaction begins, and answer a resolver that replays the outcome (addresses, failure or
    timeout) to :func:`webhook_target_problem` inside it. A slow name then holds no transaction
    (on SQLite one transaction holds the whole store). Other names go to ``resolver``."""
    target = _host_to_resolve(url, development=development, loopback=loopback)
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
    url: object, *, development: bool, loopback: bool = False, resolver: Resolver = resolve
) -> str | None:
    """:func:`webhook_url_problem`, and in production the addresses its host resolves to."""
    problem = webhook_url_problem(url, development=development, loopback=loopback)
    if problem is not None:
        return problem
    target = _host_to_resolve(url, development=development, loopback=loopback)
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
        if not address_allowed(ipaddress.ip_address(address.split("%", 1)[0]), loopback=loopback):
            return (
                "resolves to a private, loopback, link-local, multicast or reserved address"
                f" ({address})"
            )
    return None
