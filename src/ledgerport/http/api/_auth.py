"""Bearer authentication of the data API: the API's limits and the access token."""

from __future__ import annotations

from quart import g

from ledgerport import auth, catalog

from .._context import app_state, bearer_token, client_ip, from_a_run, platform, presented_token
from .._dpop import call_proof, check_binding
from .._openapi import Header

RATE_LIMIT_HEADERS = (
    Header("RateLimit-Limit", "Calls per minute of this app in this business"),
    Header("RateLimit-Remaining", "Calls left in the sliding minute, this one counted"),
    Header("RateLimit-Reset", "Seconds until the budget is whole again"),
)
"""What an authenticated call's answer says of the app and business's budget."""


def _refuse(limit: catalog.RateLimit, wait: int) -> auth.RateLimited:
    platform().metrics.rate_limited.labels(limit.name).inc()
    return auth.RateLimited(wait, limit)


def _app_budgets(app_id: str, business_id: str) -> tuple[auth.Budget, auth.Budget]:
    return (
        auth.Budget(catalog.RATE_LIMIT_APP_PER_BUSINESS, (app_id, business_id)),
        auth.Budget(catalog.RATE_LIMIT_APP, (app_id,)),
    )


async def authenticate_bearer() -> auth.AccessGrant:
    """The live grant behind the request's bearer token, counted against the API's limits.

    Every request counts against its IP's budget; a live token's call, only when the IP had
    room, also against the app's budget in the business and the app's budget across businesses
    together (refused by one, it uses up neither), and every answer from there on says what is
    left of the first (the RateLimit-* headers).

    A token this process has seen (``auth.TokenOwners``) is read with the counts, in one
    statement with a shared limiter on PostgreSQL, the app's budgets counted only when the
    token is live. Another is looked up first, in one statement outside any transaction, then
    the IP's and the app's budgets are counted together. The limits are taken outside any
    transaction: a shared limiter on PostgreSQL uses a connection of its own, which a call
    holding its transaction open would wait for while holding one, and a refused or failed
    call must still count.

    A token bound to a DPoP key (RFC 9449) is accepted only as ``Authorization: DPoP`` with a
    fresh proof of that key (``_dpop``): the proof is checked before anything is read, and
    recorded as used once the token is found live and bound to its key.

    A hosted function's call (``from_a_run``) has no address: it counts against its app's
    budgets only (:func:`_authenticate_run`), so no tenant's runs use up a budget another
    tenant, or a network client, is counted in.
    """
    p = platform()
    if from_a_run():
        return await _authenticate_run(bearer_token() or "")
    per_ip = auth.Budget(catalog.RATE_LIMIT_API_PER_IP, (client_ip(),))
    presented = presented_token()
    if presented is None:
        await _count_unknown(per_ip)
        raise auth.InvalidAccessToken("A bearer access token is required")
    scheme, token = presented
    proof = None
    if scheme == "dpop":
        try:
            proof = call_proof(token)
        except auth.DpopRefused:
            await _count_unknown(per_ip)
            raise
    owners = app_state(auth.TokenOwners, auth.TokenOwners)
    key = p.keyring.hash_token(token)
    owner = owners.get(key)
    if owner is not None:
        now = p.now()
        lookup = auth.live_access_token_lookup(
            p.keyring, token=token, now=now, app_id=owner[0], business_id=owner[1]
        )
        by_ip, by_app, row = await p.limiter.take_then_if_found(
            per_ip, _app_budgets(*owner), p.store.autocommit, lookup
        )
        if not by_ip.allowed:
            raise _refuse(by_ip.refused_by or catalog.RATE_LIMIT_API_PER_IP, by_ip.retry_after)
        grant = None if row is None else auth.live_grant(row, now)
        if by_app is None or grant is None:
            owners.forget(key)
            raise auth.InvalidAccessToken("The access token is expired, revoked or malformed")
        await check_binding(grant, proof)
        return _counted(grant, by_app)
    grant = await auth.resolve_access_token(p.store.autocommit, p.keyring, now=p.now(), token=token)
    if grant is None:
        await _count_unknown(per_ip)
        raise auth.InvalidAccessToken("The access token is expired, revoked or malformed")
    owners.keep(key, (grant.app_id, grant.business_id))
    by_ip, by_app = await p.limiter.take_then(
        per_ip, *_app_budgets(grant.app_id, grant.business_id)
    )
    if by_app is None:
        raise _refuse(by_ip.refused_by or catalog.RATE_LIMIT_API_PER_IP, by_ip.retry_after)
    await check_binding(grant, proof)
    return _counted(grant, by_app)


async def _authenticate_run(token: str) -> auth.AccessGrant:
    """The grant of a run's token, its call counted against the app's budget in the business
    and across businesses together; a token that is not live counts against nothing (the
    runner made it, and it ends with its run)."""
    p = platform()
    grant = None
    if token:
        grant = await auth.resolve_access_token(
            p.store.autocommit, p.keyring, now=p.now(), token=token
        )
    if grant is None:
        raise auth.InvalidAccessToken("The access token is expired, revoked or malformed")
    return _counted(grant, await p.limiter.take(*_app_budgets(grant.app_id, grant.business_id)))


async def _count_unknown(per_ip: auth.Budget) -> None:
    """Count a call with no live token against its IP's budget: 429 when it has no room."""
    verdict = await platform().limiter.take(per_ip)
    if verdict.refused_by is not None:
        raise _refuse(verdict.refused_by, verdict.retry_after)


def _counted(grant: auth.AccessGrant, by_app: auth.Verdict) -> auth.AccessGrant:
    """``grant``, its call's RateLimit-* headers set; 429 when an app budget had no room."""
    in_business = by_app.standings[0]
    g.rate_limit_headers = {
        "RateLimit-Limit": str(in_business.limit),
        "RateLimit-Remaining": str(in_business.remaining),
        "RateLimit-Reset": str(in_business.reset_in),
    }
    if by_app.refused_by is not None:
        raise _refuse(by_app.refused_by, by_app.retry_after)
    return grant
