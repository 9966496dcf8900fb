"""Bearer authentication of the data API: the API's limits and the access token."""

from __future__ import annotations

from quart import g, request

from ledgerport import auth, catalog

from .._context import client_ip, platform
from .._openapi import Header

RATE_LIMIT_HEADERS = (
    Header("RateLimit-Limit", "Calls per minute of this app in this business"),
    Header("RateLimit-Remaining", "Calls left in the sliding minute, this one counted"),
    Header("RateLimit-Reset", "Seconds until the budget is whole again"),
)
"""What an authenticated call's answer says of the app and business's budget."""


def _refuse(limit: catalog.RateLimit, wait: int) -> auth.RateLimited:
    platform().metrics.rate_limited.labels(limit.name).inc()
    return auth.RateLimited(wait)


async def authenticate_bearer() -> auth.AccessGrant:
    """The live grant behind the request's bearer token, counted against the API's limits.

    Every request counts against its IP's budget; a live token's call, only when the IP had
    room, also against the app's budget in the business and the app's budget across businesses
    together (refused by one, it uses up neither), and every answer from there on says what is
    left of the first (the RateLimit-* headers).

    The token (with the user's standing in the business) is looked up first, in one statement
    outside any transaction, so that the IP's and the app's budgets are counted together: one
    more statement with a shared limiter on PostgreSQL, instead of two. The limits are taken
    outside any transaction: a shared limiter on PostgreSQL uses a connection of its own, which
    a call holding its transaction open would wait for while holding one, and a refused or
    failed call must still count.
    """
    p = platform()
    per_ip = auth.Budget(catalog.RATE_LIMIT_API_PER_IP, (client_ip(),))
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    grant = None
    if scheme.lower() == "bearer" and token.strip():
        grant = await auth.resolve_access_token(
            p.store.autocommit, p.keyring, now=p.now(), token=token.strip()
        )
    if grant is None:
        verdict = await p.limiter.take(per_ip)
        if verdict.refused_by is not None:
            raise _refuse(verdict.refused_by, verdict.retry_after)
        if scheme.lower() != "bearer" or not token.strip():
            raise auth.InvalidAccessToken("A bearer access token is required")
        raise auth.InvalidAccessToken("The access token is expired, revoked or malformed")
    by_ip, by_app = await p.limiter.take_then(
        per_ip,
        auth.Budget(catalog.RATE_LIMIT_APP_PER_BUSINESS, (grant.app_id, grant.business_id)),
        auth.Budget(catalog.RATE_LIMIT_APP, (grant.app_id,)),
    )
    if by_app is None:
        raise _refuse(by_ip.refused_by or catalog.RATE_LIMIT_API_PER_IP, by_ip.retry_after)
    in_business = by_app.standings[0]
    g.rate_limit_headers = {
        "RateLimit-Limit": str(in_business.limit),
        "RateLimit-Remaining": str(in_business.remaining),
        "RateLimit-Reset": str(in_business.reset_in),
    }
    if by_app.refused_by is not None:
        raise _refuse(by_app.refused_by, by_app.retry_after)
    return grant
