"""Bearer authentication of the data API: limits, token, then scope, then role permission."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import ParamSpec, TypeVar

from quart import g, request

from ledgerport import auth, catalog
from ledgerport.clock import Clock

from .._context import app_state, client_ip, platform, unit_of_work
from .._openapi import Header

RATE_LIMIT_HEADERS = (
    Header("RateLimit-Limit", "Calls per minute of this app in this business"),
    Header("RateLimit-Remaining", "Calls left in the current minute"),
    Header("RateLimit-Reset", "Seconds until the budget is whole again"),
)
"""What an authenticated call's answer says of the app and business's budget."""

P = ParamSpec("P")
R = TypeVar("R")


class ApiGuard:
    """The data API's limits: 600/min per IP, 300/min per app and business, 10,000/min per app."""

    def __init__(self, clock: Clock) -> None:
        def window(limit: catalog.RateLimit) -> auth.SlidingWindow:
            return auth.SlidingWindow(clock, limit.limit, limit.window_seconds)

        self.per_ip = window(catalog.RATE_LIMIT_API_PER_IP)
        self.per_app_business = window(catalog.RATE_LIMIT_APP_PER_BUSINESS)
        self.per_app = window(catalog.RATE_LIMIT_APP)


def _guard() -> ApiGuard:
    return app_state(ApiGuard, lambda: ApiGuard(platform().clock))


def _rate_limited(name: str, wait: int) -> auth.RateLimited:
    platform().metrics.rate_limited.labels(name).inc()
    return auth.RateLimited(wait)


def current_grant() -> auth.AccessGrant:
    grant: auth.AccessGrant = g.grant
    return grant


async def authenticate_bearer() -> auth.AccessGrant:
    """The live grant behind the request's bearer token, counted against the API's limits."""
    guard = _guard()
    wait = guard.per_ip.take(client_ip())
    if wait is not None:
        raise _rate_limited(catalog.RATE_LIMIT_API_PER_IP.name, wait)
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise auth.InvalidAccessToken("A bearer access token is required")
    p = platform()
    async with unit_of_work() as tx:
        grant = await auth.resolve_access_token(tx, p.keyring, now=p.now(), token=token.strip())
    if grant is None:
        raise auth.InvalidAccessToken("The access token is expired, revoked or malformed")
    pair = (grant.app_id, grant.business_id)
    for limit, window, key in (
        (catalog.RATE_LIMIT_APP_PER_BUSINESS, guard.per_app_business, pair),
        (catalog.RATE_LIMIT_APP, guard.per_app, grant.app_id),
    ):
        wait = window.retry_after(key)
        if wait is not None:
            raise _rate_limited(limit.name, wait)
    guard.per_app_business.hit(pair)
    guard.per_app.hit(grant.app_id)
    g.grant = grant
    g.rate_limit_headers = {
        "RateLimit-Limit": str(guard.per_app_business.limit),
        "RateLimit-Remaining": str(guard.per_app_business.remaining(pair)),
        "RateLimit-Reset": str(guard.per_app_business.reset_in(pair)),
    }
    return grant


def requires(
    scope: str, permission: str | None = None
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Deny by default: a live token holding ``scope`` of a user whose role holds ``permission``
    (``auth.check_call``; ``permission`` defaults to the scope's name)."""

    def decorate(handler: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @wraps(handler)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            grant = await authenticate_bearer()
            async with unit_of_work() as tx:
                await auth.check_call(tx, grant, scope=scope, permission=permission)
            return await handler(*args, **kwargs)

        return wrapper

    return decorate
