"""The OAuth endpoints' limits read as one scheme (contract.md, Details fixed for consistency).

Requests that authenticate no client count against 30 per minute per IP and endpoint; requests
whose client authenticates count against the (IP, client) pair (600 with a secret, 300 without),
the IP's ceiling of 1,200, and at the token endpoint the confidential client's 600 across IPs.
Ten failed authentications of an (IP, client) pair within 60 s lock it for 60 s; device
authorization keeps its own count and lock. Registration is limited per IP, and wrong user codes
on the device verification page per IP and per user.
"""

from __future__ import annotations

from ledgerport import catalog
from ledgerport.auth import Lockout, RateLimited, SlidingWindow
from ledgerport.clock import Clock
from ledgerport.ops import Metrics

from ._context import app_state, platform

_UNAUTHENTICATED = {
    "token": catalog.RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP,
    "revoke": catalog.RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP,
    "introspect": catalog.RATE_LIMIT_INTROSPECT_UNAUTHENTICATED_PER_IP,
    "device": catalog.RATE_LIMIT_DEVICE_UNAUTHENTICATED_PER_IP,
}


def _window(clock: Clock, limit: catalog.RateLimit) -> SlidingWindow:
    return SlidingWindow(clock, limit.limit, limit.window_seconds)


class OAuthGuard:
    def __init__(self, clock: Clock, metrics: Metrics) -> None:
        self._metrics = metrics
        self._unauthenticated = {
            endpoint: _window(clock, limit) for endpoint, limit in _UNAUTHENTICATED.items()
        }
        self._with_secret = _window(clock, catalog.RATE_LIMIT_OAUTH_CLIENT_WITH_SECRET)
        self._without_secret = _window(clock, catalog.RATE_LIMIT_OAUTH_CLIENT_WITHOUT_SECRET)
        self._ip_ceiling = _window(clock, catalog.RATE_LIMIT_OAUTH_IP_CEILING)
        self._confidential = _window(clock, catalog.RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT)
        self.lockout = Lockout(clock)
        self.device_lockout = Lockout(clock)
        self._registration = _window(clock, catalog.RATE_LIMIT_REGISTER_PER_IP)
        self._user_code_ip = _window(clock, catalog.RATE_LIMIT_USER_CODE_PER_IP)
        self._user_code_user = _window(clock, catalog.RATE_LIMIT_USER_CODE_PER_USER)

    def _refuse(self, name: str, wait: int) -> None:
        self._metrics.rate_limited.labels(name).inc()
        raise RateLimited(wait)

    def check_lock(self, endpoint: str, ip: str, client_id: str | None) -> None:
        if not client_id:
            return
        lockout = self.device_lockout if endpoint == "device" else self.lockout
        wait = lockout.locked_for((ip, client_id))
        if wait is not None:
            self._refuse("oauth-lockout", wait)

    def failed_authentication(self, endpoint: str, ip: str, client_id: str | None) -> None:
        """Count a failure; raises 429 when the IP is past its unauthenticated budget."""
        self._metrics.oauth_client_auth_failures.labels(endpoint).inc()
        lockout = self.device_lockout if endpoint == "device" else self.lockout
        if lockout.failed((ip, client_id or "")):
            self._metrics.oauth_lockouts.labels(endpoint).inc()
        self.unauthenticated(endpoint, ip)

    def unauthenticated(self, endpoint: str, ip: str) -> None:
        window = self._unauthenticated.get(endpoint)
        if window is None:
            return
        wait = window.take(ip)
        if wait is not None:
            self._refuse(f"{endpoint}-unauthenticated-per-ip", wait)

    def authenticated(
        self, endpoint: str, ip: str, client_id: str, *, with_secret: bool, confidential: bool
    ) -> None:
        pair = self._with_secret if with_secret else self._without_secret
        checks: list[tuple[str, SlidingWindow, object]] = [
            ("oauth-ip-client", pair, (ip, client_id)),
            ("oauth-ip-ceiling", self._ip_ceiling, ip),
        ]
        if endpoint == "token" and confidential:
            checks.append(("token-confidential-client", self._confidential, client_id))
        for name, window, key in checks:
            wait = window.retry_after(key)
            if wait is not None:
                self._refuse(name, wait)
        for _, window, key in checks:
            window.hit(key)

    def registration(self, ip: str) -> None:
        wait = self._registration.take(ip)
        if wait is not None:
            self._refuse("register-per-ip", wait)

    def user_code_wait(self, ip: str, user_id: str) -> int | None:
        """Seconds before this IP or user may try another user code, or None."""
        waits = [self._user_code_ip.retry_after(ip), self._user_code_user.retry_after(user_id)]
        known = [w for w in waits if w is not None]
        if known:
            self._metrics.rate_limited.labels("user-code").inc()
        return max(known) if known else None

    def wrong_user_code(self, ip: str, user_id: str) -> None:
        self._user_code_ip.hit(ip)
        self._user_code_user.hit(user_id)


def oauth_guard() -> OAuthGuard:
    """The application's one OAuthGuard."""
    return app_state(OAuthGuard, lambda: OAuthGuard(platform().clock, platform().metrics))
