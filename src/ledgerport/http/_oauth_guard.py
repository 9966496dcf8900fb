"""The OAuth endpoints' limits read as one scheme (contract.md, Details fixed for consistency).

Requests that authenticate no client count against 30 per minute per IP and endpoint; requests
whose client authenticates count against the (IP, client) pair (600 with a secret, 300 without),
the IP's ceiling of 1,200, and at the token endpoint the confidential client's 600 across IPs.
Ten failed authentications of an (IP, client) pair within 60 s lock it for 60 s; device
authorization keeps its own count and lock. Registration is limited per IP, and wrong user codes
on the device verification page per IP and per user.

The counts live in the platform's limiter, so every process sharing it shares them.
"""

from __future__ import annotations

from typing import NoReturn

from ledgerport import catalog
from ledgerport.auth import Budget, Locked, LockoutRule, Lookup, RateLimited, RateLimiter
from ledgerport.ops import Metrics
from ledgerport.storage import Reader, Row

from ._context import app_state, platform

_UNAUTHENTICATED = {
    "token": catalog.RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP,
    "revoke": catalog.RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP,
    "introspect": catalog.RATE_LIMIT_INTROSPECT_UNAUTHENTICATED_PER_IP,
    "device": catalog.RATE_LIMIT_DEVICE_UNAUTHENTICATED_PER_IP,
}
_CLIENT_LOCKOUT = LockoutRule("oauth-lockout")
"""Failed client authentications at the token, revocation and introspection endpoints."""
_DEVICE_LOCKOUT = LockoutRule("device-lockout")
"""Failed client authentications at device authorization: its own count and lock."""


def _lockout(endpoint: str) -> LockoutRule:
    return _DEVICE_LOCKOUT if endpoint == "device" else _CLIENT_LOCKOUT


class OAuthGuard:
    def __init__(self, limiter: RateLimiter, metrics: Metrics) -> None:
        self._limiter = limiter
        self._metrics = metrics

    def _refuse(self, name: str, wait: int) -> NoReturn:
        self._metrics.rate_limited.labels(name).inc()
        raise RateLimited(wait, catalog.RATE_LIMITS.get(name))

    async def check_lock(self, endpoint: str, ip: str, client_id: str | None) -> None:
        if not client_id:
            return
        rule = _lockout(endpoint)
        wait = await self._limiter.locked_for(rule, (ip, client_id))
        if wait is not None:
            self._refuse(rule.name, wait)

    async def failed_authentication(self, endpoint: str, ip: str, client_id: str | None) -> None:
        """Count a failure; raises 429 when the (IP, client) pair is locked (the failure not
        counted) or the IP is past its unauthenticated budget."""
        await self.check_lock(endpoint, ip, client_id)
        self._metrics.oauth_client_auth_failures.labels(endpoint).inc()
        if await self._limiter.failed(_lockout(endpoint), (ip, client_id or "")):
            self._metrics.oauth_lockouts.labels(endpoint).inc()
        await self.unauthenticated(endpoint, ip)

    async def unauthenticated(self, endpoint: str, ip: str) -> None:
        limit = _UNAUTHENTICATED.get(endpoint)
        if limit is None:
            return
        verdict = await self._limiter.take(Budget(limit, (ip,)))
        if verdict.refused_by is not None:
            self._refuse(verdict.refused_by.name, verdict.retry_after)

    async def authenticated(
        self,
        endpoint: str,
        ip: str,
        client_id: str,
        *,
        with_secret: bool,
        confidential: bool,
        reading: tuple[Reader, Lookup] | None = None,
    ) -> Row | None:
        """Count an authenticated request, or refuse it with 429 when the (IP, client) pair is
        locked (nothing counted) or a budget has no room: one round trip on a shared limiter.

        ``reading`` (a reader and a lookup): the lookup's row is answered once the request is
        counted, read in the same round trip where the limiter can (None without it)."""
        pair = (
            catalog.RATE_LIMIT_OAUTH_CLIENT_WITH_SECRET
            if with_secret
            else catalog.RATE_LIMIT_OAUTH_CLIENT_WITHOUT_SECRET
        )
        budgets = [
            Budget(pair, (ip, client_id)),
            Budget(catalog.RATE_LIMIT_OAUTH_IP_CEILING, (ip,)),
        ]
        if endpoint == "token" and confidential:
            budgets.append(Budget(catalog.RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT, (client_id,)))
        rule = _lockout(endpoint)
        row = None
        if reading is None:
            verdict = await self._limiter.take_unless_locked(rule, (ip, client_id), *budgets)
        else:
            verdict, row = await self._limiter.take_unless_locked_then_read(
                rule, (ip, client_id), tuple(budgets), *reading
            )
        if isinstance(verdict, Locked):
            self._refuse(rule.name, verdict.wait)
        if verdict.refused_by is not None:
            self._refuse(verdict.refused_by.name, verdict.retry_after)
        return row

    async def registration(self, ip: str) -> None:
        verdict = await self._limiter.take(Budget(catalog.RATE_LIMIT_REGISTER_PER_IP, (ip,)))
        if verdict.refused_by is not None:
            self._refuse(verdict.refused_by.name, verdict.retry_after)

    async def document_fetch(self, ip: str) -> None:
        """A client ID metadata document about to be fetched for a request from ``ip``."""
        verdict = await self._limiter.take(Budget(catalog.RATE_LIMIT_DOCUMENT_FETCH_PER_IP, (ip,)))
        if verdict.refused_by is not None:
            self._refuse(verdict.refused_by.name, verdict.retry_after)

    async def configuration(self, ip: str) -> None:
        """A client's configuration request (RFC 7592): the OAuth endpoints' ceiling per IP,
        not registration's budget (reading or changing a client registers none)."""
        verdict = await self._limiter.take(Budget(catalog.RATE_LIMIT_OAUTH_IP_CEILING, (ip,)))
        if verdict.refused_by is not None:
            self._refuse(verdict.refused_by.name, verdict.retry_after)

    async def user_code_wait(self, ip: str, user_id: str) -> int | None:
        """Seconds before this IP or user may try another user code, or None."""
        wait = await self._limiter.retry_after(*_user_code_budgets(ip, user_id))
        if wait is not None:
            self._metrics.rate_limited.labels("user-code").inc()
        return wait

    async def wrong_user_code(self, ip: str, user_id: str) -> None:
        await self._limiter.hit(*_user_code_budgets(ip, user_id))


def _user_code_budgets(ip: str, user_id: str) -> tuple[Budget, Budget]:
    return (
        Budget(catalog.RATE_LIMIT_USER_CODE_PER_IP, (ip,)),
        Budget(catalog.RATE_LIMIT_USER_CODE_PER_USER, (user_id,)),
    )


def oauth_guard() -> OAuthGuard:
    """The application's one OAuthGuard, over the platform's limiter."""
    return app_state(OAuthGuard, lambda: OAuthGuard(platform().limiter, platform().metrics))
