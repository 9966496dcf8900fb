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

    Every request counts against its IP's budget first, before the token is looked up. A live
    token's call then counts against the app's budget in the business and the app's budget
    across businesses together (refused by one, it uses up neither), and every answer from
    there on says what is left of the first (the RateLimit-* headers).

    The token (with the user's standing in the business) is looked up in one statement outside
    any transaction, and the limits are taken outside any: a shared limiter on PostgreSQL uses
    a connection of its own, which a call holding its transaction open would wait for while
    holding one, and a refused or failed call must still count.
    """
    p = platform()
    verdict = await p.limiter.take(auth.Budget(catalog.RATE_LIMIT_API_PER_IP, (client_ip(),)))
    if verdict.refused_by is not None:
        raise _refuse(verdict.refused_by, verdict.retry_after)
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise auth.InvalidAccessToken("A bearer access token is required")
    grant = await auth.resolve_access_token(
        p.store.autocommit, p.keyring, now=p.now(), token=token.strip()
    )
    if grant is None:
        raise auth.InvalidAccessToken("The access token is expired, revoked or malformed")
    verdict = await p.limiter.take(
        auth.Budget(catalog.RATE_LIMIT_APP_PER_BUSINESS, (grant.app_id, grant.business_id)),
        auth.Budget(catalog.RATE_LIMIT_APP, (grant.app_id,)),
    )
    in_business = verdict.standings[0]
    g.rate_limit_headers = {
        "RateLimit-Limit": str(in_business.limit),
        "RateLimit-Remaining": str(in_business.remaining),
        "RateLimit-Reset": str(in_business.reset_in),
    }
    if verdict.refused_by is not None:
        raise _refuse(verdict.refused_by, verdict.retry_after)
    return grant
