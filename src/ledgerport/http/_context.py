"""Request-scoped helpers: the platform, the client address, one unit of work."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar, cast

from quart import current_app, request

from ledgerport.platform import Platform
from ledgerport.storage import Transaction

PLATFORM_KEY = "ledgerport.platform"
APP_STATE_PREFIX = "ledgerport.state."
"""Keys of what the application builds for its platform on first use (``app_state``)."""
FROM_A_RUN = "ledgerport.from_a_run"
"""The ASGI scope's key that marks a hosted function's ``context.api`` call
(``in_process_api`` sets it; hypercorn's scopes of network requests never hold it)."""
CALLER_GRANT = "ledgerport.caller_grant"
"""The ASGI scope's key holding the grant of a data API call made for a request that already
authenticated its token and counted it against the limits: an MCP tool call (``http/mcp``)
reaches the data API with it, and the call is not authenticated or counted a second time.
Only in-process calls set it; hypercorn's scopes of network requests never hold it."""
PRESENTED_AS = "ledgerport.presented_as"
"""The ASGI scope's key of a data API call made in the place of the request a client sent (an
MCP tool call answered in front of the application, ``http/mcp/_front``): that request's
method, path and blueprint, which its DPoP proof names and whose resource its challenge is of.
Only in-process calls set it."""

_T = TypeVar("_T")


def presented_token() -> tuple[str, str] | None:
    """The scheme (``bearer`` or ``dpop``, RFC 9449) and token of this request's
    ``Authorization`` header (the scheme in any case, spaces around the token dropped), or
    None: no such header, another scheme, or no token."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token, scheme = token.strip(), scheme.lower()
    return (scheme, token) if scheme in ("bearer", "dpop") and token else None


def bearer_token() -> str | None:
    """The token of this request's ``Authorization: Bearer <token>`` (the scheme in any case,
    spaces around the token dropped), or None: no such header, another scheme, or no token."""
    presented = presented_token()
    return presented[1] if presented is not None and presented[0] == "bearer" else None


def platform() -> Platform:
    return cast(Platform, current_app.extensions[PLATFORM_KEY])


def app_state(kind: type[_T], build: Callable[[], _T]) -> _T:
    """The application's one ``kind`` object (limits, lockouts), built on first use."""
    key = f"{APP_STATE_PREFIX}{kind.__qualname__}"
    existing = current_app.extensions.get(key)
    if existing is None:
        existing = current_app.extensions[key] = build()
    return cast(_T, existing)


@asynccontextmanager
async def unit_of_work(*, reads: bool = False) -> AsyncIterator[Transaction]:
    """The request's one transaction: commits when the block ends normally. ``reads``: the
    request expects to read only (``Store.transaction``)."""
    async with platform().store.transaction(reads=reads) as tx:
        yield tx


def presented_request() -> tuple[str, str, str | None]:
    """The method, path and blueprint of the request as its client sent it (``PRESENTED_AS``):
    the request's own, unless it is a call made in another's place."""
    presented = request.scope.get(PRESENTED_AS)
    if presented is not None:
        return cast(tuple[str, str, str | None], presented)
    return request.method, request.path, request.blueprint


def from_a_run() -> bool:
    """Whether the request is a hosted function's ``context.api`` call, made inside the
    process: it has no client address of its own, so no per-IP budget counts it."""
    return request.scope.get(FROM_A_RUN) is True


def client_ip() -> str:
    """The connecting address; X-Forwarded-For is believed only from a trusted proxy."""
    remote = request.remote_addr or ""
    proxies = platform().config.trusted_proxies
    if not proxies:
        return remote
    return _nearest_untrusted(remote, request.headers.get("X-Forwarded-For", ""), proxies)


@functools.lru_cache(maxsize=4096)
def _nearest_untrusted(remote: str, header: str, proxies: tuple[Any, ...]) -> str:
    """The client of a request from ``remote`` with ``X-Forwarded-For: header`` (kept for the
    next request from the same address and proxy chain: parsing addresses is not free)."""
    forwarded = [part.strip() for part in header.split(",")]
    chain = [hop for hop in forwarded if hop] + [remote]
    # Walk from the nearest hop back while the hop is a trusted proxy.
    for hop in reversed(chain):
        try:
            address = ipaddress.ip_address(hop)
        except ValueError:
            return hop
        if not any(address in network for network in proxies):
            return hop
    return chain[0]
