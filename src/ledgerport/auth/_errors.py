"""What authentication and authorization refuse, named for what happened.

Three families under :class:`AuthError`: who is calling (admin token, access token, sign-in,
scope, role permission, rate limits), the OAuth endpoints' errors (one class per RFC 6749
``error`` value, its optional description the ``error_description``), and the consent page's
problems (each carries the spec's message). None carries an HTTP status: ``http/_errors.py``
maps each class to its answer.
"""

from __future__ import annotations

from ledgerport import catalog
from ledgerport.errors import DomainError


class AuthError(DomainError):
    """Root of the auth package's errors."""


# --- Who is calling ------------------------------------------------------------------------------


class InvalidAdminToken(AuthError):
    def __init__(self) -> None:
        super().__init__("A valid admin token is required")


class InvalidMetricsToken(AuthError):
    """A scrape of /metrics without LEDGERPORT_METRICS_TOKEN as its bearer token."""

    def __init__(self) -> None:
        super().__init__(
            "The metrics token (LEDGERPORT_METRICS_TOKEN) is required as a bearer token"
        )


class InvalidAccessToken(AuthError):
    """No bearer token, or one that is expired, revoked, malformed or of a stopped app."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class DpopRefused(InvalidAccessToken):
    """A data API call refused for its DPoP proof or its token's binding: answered 401 with a
    ``DPoP`` challenge naming ``error`` (``invalid_dpop_proof``, ``use_dpop_nonce`` with
    ``nonce`` to use, or ``invalid_token`` for a token presented in the wrong scheme)."""

    def __init__(self, message: str, *, error: str, nonce: str | None = None) -> None:
        self.error = error
        self.nonce = nonce
        super().__init__(message)


class NotSignedIn(AuthError):
    """The browser has no session on the application host."""

    def __init__(self, message: str = "Sign in to continue") -> None:
        super().__init__(message)


class CliLoginNotFound(AuthError):
    """No ``ledgerport login`` waits for that user code (wrong, expired or already decided)."""

    def __init__(self) -> None:
        super().__init__("That code is not valid or has expired: run ledgerport login again")


class CrossSiteRequest(AuthError):
    """A browser's unsafe request to the console's API, authenticated by its session cookie,
    came from no page of the service: another origin, and without the page's CSRF token. Or a
    request to the MCP server sent by a page of another origin (a DNS rebinding's)."""

    def __init__(
        self,
        message: str = "Cross-site request refused: a signed-in browser's request that changes"
        " something must come from the service's own pages (same origin) or carry their CSRF"
        " token (X-CSRF-Token)",
    ) -> None:
        super().__init__(message)


class InsufficientScope(AuthError):
    def __init__(self, scope: str) -> None:
        super().__init__("Insufficient scope: this endpoint requires {0}", params=[scope])


class PermissionDenied(AuthError):
    """The user's role in the business lacks the permission (whatever the token's scopes)."""

    def __init__(self, permission: str) -> None:
        super().__init__("Your role in this business does not allow {0}", params=[permission])


class RateLimited(AuthError):
    """A rate limit or a lockout refuses the request for ``retry_after`` seconds; ``limit`` is
    the budget that refused it (None for a lockout)."""

    def __init__(self, retry_after: int, limit: catalog.RateLimit | None = None) -> None:
        self.retry_after = retry_after
        self.limit = limit
        super().__init__("Too many requests: retry after {0} seconds", params=[retry_after])


class ConnectedAppsOnly(AuthError):
    """The event log was asked for with the application host's session cookie: it answers
    connected apps only, which present an OAuth access token."""

    def __init__(self) -> None:
        super().__init__(
            "The event log is available to connected apps only: it needs an OAuth access token,"
            " not a session cookie"
        )


class EndpointNotExposed(AuthError):
    """The route belongs to the bookkeeping product itself, outside the partner surface."""

    def __init__(self) -> None:
        super().__init__("This endpoint is not exposed to OAuth clients")


class NoActiveInstallation(AuthError):
    def __init__(self, app_id: str, business_id: str) -> None:
        super().__init__(
            "App {0} has no ACTIVE installation in business {1}", params=[app_id, business_id]
        )


# --- OAuth endpoints -----------------------------------------------------------------------------


class OAuthError(AuthError):
    """An OAuth endpoint error; the subclass is the ``error`` value (``http/_errors.py``)."""

    def __init__(self, description: str | None = None) -> None:
        self.description = description
        super().__init__(description or "")


class InvalidRequest(OAuthError):
    pass


class InvalidClient(OAuthError):
    """Client authentication failed; ``basic`` tells whether HTTP Basic was used."""

    def __init__(self, description: str, *, basic: bool) -> None:
        self.basic = basic
        super().__init__(description)


class InvalidGrant(OAuthError):
    """The code, refresh token, device code or session token cannot be redeemed."""


class UnsupportedGrantType(OAuthError):
    pass


class InvalidScope(OAuthError):
    pass


class InvalidTarget(OAuthError):
    """The resource parameter is not one absolute URI on the API's origin (RFC 8707)."""


class AuthorizationPending(OAuthError):
    pass


class SlowDown(OAuthError):
    pass


class AccessDenied(OAuthError):
    pass


class ExpiredToken(OAuthError):
    pass


class InvalidRedirectUri(OAuthError):
    pass


class InvalidClientMetadata(OAuthError):
    pass


class InvalidDpopProof(OAuthError):
    """RFC 9449: the request's DPoP proof is missing where one is required, or refused (its
    form, signature, request, freshness, token or key); the description says which."""


class UseDpopNonce(OAuthError):
    """RFC 9449 section 8: the proof must carry the server's nonce, ``nonce`` (sent back in the
    ``DPoP-Nonce`` header)."""

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        super().__init__("the DPoP proof must carry the nonce in the DPoP-Nonce header")


class InvalidRegistrationToken(OAuthError):
    """RFC 7592: no registration access token, or one that configures no client at that
    address (401 ``invalid_token``)."""


# --- Consent page --------------------------------------------------------------------------------


class AuthorizeProblem(AuthError):
    """The authorization stops on the consent page, which shows ``message``; never redirected."""


class UnknownClient(AuthorizeProblem):
    def __init__(self) -> None:
        super().__init__(catalog.CONSENT_INVALID_CLIENT)


class RedirectUriMismatch(AuthorizeProblem):
    def __init__(self) -> None:
        super().__init__(catalog.CONSENT_REDIRECT_MISMATCH)


class ScopesNotPermitted(AuthorizeProblem):
    def __init__(self) -> None:
        super().__init__(catalog.CONSENT_SCOPES_NOT_PERMITTED)


class PkceRequired(AuthorizeProblem):
    def __init__(self) -> None:
        super().__init__(catalog.CONSENT_PKCE_REQUIRED)


class TargetRefused(AuthorizeProblem):
    """invalid_target; the long form adds the reason (resource repeated or too long)."""

    def __init__(self, reason: str | None = None) -> None:
        short = catalog.CONSENT_INVALID_TARGET
        super().__init__(f"{short}: {reason}" if reason else short)


class RequestExpired(AuthorizeProblem):
    """The held request is gone: older than five minutes, decided, or someone else's."""

    def __init__(self) -> None:
        super().__init__(catalog.CONSENT_REQUEST_EXPIRED)


class MalformedAuthorizeRequest(AuthorizeProblem):
    """A parameter is missing, repeated or malformed; ``message`` names the OAuth error."""
