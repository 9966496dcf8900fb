"""Lifetimes, size limits, webhook timing, lockout and the rate limit scheme."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

# --- Lifetimes (seconds) -------------------------------------------------------------------------

_MINUTE: Final = 60
_HOUR: Final = 60 * _MINUTE
_DAY: Final = 24 * _HOUR

AUTHORIZATION_REQUEST_TTL: Final = 5 * _MINUTE
AUTHORIZATION_CODE_TTL: Final = 10 * _MINUTE
ACCESS_TOKEN_TTL: Final = 3600
REFRESH_TOKEN_TTL: Final = 30 * _DAY
DEVICE_CODE_TTL: Final = 10 * _MINUTE
SESSION_TOKEN_TTL: Final = 50
"""A session token is usable for about 50 seconds."""
SESSION_TOKEN_SKEW: Final = 30
"""Clock-skew tolerance on a session token's expiry and not-before."""
DEVICE_POLL_INTERVAL: Final = 5
"""Seconds a device client waits between polls; each slow_down adds DEVICE_SLOW_DOWN_STEP."""
DEVICE_SLOW_DOWN_STEP: Final = 5

# ledgerport's own lifetimes (the spec leaves them open); docs/catalog.md lists them.
LOGIN_SESSION_TTL: Final = 12 * _HOUR
"""A sign-in on the application host lasts twelve hours."""
NOTICE_TTL: Final = 60
"""A page's notice (what the last form did) is shown if the page is opened within a minute of
the form's answer, which redirects the browser there at once."""
SIGNING_KEY_PERIOD: Final = 7 * _DAY
"""A session-token signing key signs for a week."""
SIGNING_KEY_PREPUBLISH: Final = 2 * _HOUR
"""The next signing key is published this long before it signs, so JWKS caches learn it."""
SIGNING_KEY_RETIRED_GRACE: Final = 1 * _DAY
"""A retired signing key stays published (and accepted) a day, beyond any token it signed."""
EXPIRED_ROW_GRACE: Final = 1 * _DAY
"""Expired codes, tokens and spent session-token ids are kept a day before the cleanup purges
them, so a late replay still meets its precise error."""
JWKS_MAX_AGE: Final = 5 * _MINUTE
"""Seconds a verifier may cache the JWKS; a new key is published hours before it signs."""
PUSHED_REQUEST_TTL: Final = 60.0
"""Seconds a pushed authorization request (RFC 9126) may be used in, once."""

# --- Size limits (counts, characters) ------------------------------------------------------------

REDIRECT_URIS_MIN: Final = 1
REDIRECT_URIS_MAX: Final = 5
URI_MAX_LENGTH: Final = 512
"""Longest registered redirect URI and longest RFC 8707 resource parameter, in characters."""
BULK_IMPORT_MAX: Final = 200
APP_DATA_RESOURCE_IDS_MAX: Final = 50
APP_DATA_VALUES_MAX: Final = 25
CHOICE_OPTIONS_MIN: Final = 1
CHOICE_OPTIONS_MAX: Final = 50
CHOICE_OPTION_MAX_LENGTH: Final = 60
EVENTS_PAGE_DEFAULT: Final = 50
EVENTS_PAGE_MAX: Final = 100
REQUEST_BODY_MAX_BYTES: Final = 1024 * 1024
"""Largest request body the service reads."""
OAUTH_JSON_MAX_BYTES: Final = 64 * 1024
"""Largest JSON body of /oauth/register and of a token exchange sent as JSON."""
CLIENT_NAME_MAX_LENGTH: Final = 200
"""Longest app name, at the operator API and at registration."""
REGISTRATION_CONTACTS_MAX: Final = 10
CONTACT_MAX_LENGTH: Final = 320
"""The longest email address (RFC 5321: 64 + 1 + 255)."""

# --- Webhooks and events -------------------------------------------------------------------------

WEBHOOK_TIMEOUT: Final = 10
"""Seconds a receiver has to answer an attempt (redirects are not followed)."""
WEBHOOK_MAX_ATTEMPTS: Final = 6
WEBHOOK_RETRY_DELAYS: Final[tuple[int, ...]] = (
    0,
    1 * _MINUTE,
    5 * _MINUTE,
    30 * _MINUTE,
    2 * _HOUR,
    6 * _HOUR,
)
"""Seconds before attempts 1 to 6, each counted from the previous failure (attempt 1 at once)."""
WEBHOOK_SECRET_OVERLAP: Final = 24 * _HOUR
"""How long the previous secret keeps signing, as the second v1 value, after a rotation."""
WEBHOOK_SIGNATURE_TOLERANCE: Final = 300
"""Recommended largest distance between a signature's timestamp and a receiver's clock."""
DELIVERY_RETENTION: Final = 30 * _DAY
CLEANUP_INTERVAL: Final = 1 * _HOUR
"""The hourly cleanup: expired rows and, past their retention, deliveries and events."""
CONSOLE_DELIVERIES_SHOWN: Final = 100
WEBHOOK_DISABLE_AFTER: Final = 5 * _DAY
"""contract.md: an endpoint with no delivered attempt for this long while at least
WEBHOOK_DISABLE_FAILURES of its deliveries failed for good in that time is switched off
(LEDGERPORT_WEBHOOK_DISABLE_AFTER changes it)."""
WEBHOOK_DISABLE_FAILURES: Final = 3
RETRY_AFTER_MAX: Final = 6 * _HOUR
"""contract.md: the furthest a receiver's Retry-After moves a delivery's next attempt."""
RETRY_JITTER: Final = 0.1
"""contract.md: a retry delay is lengthened by a random part of at most this fraction of it."""
WEBHOOK_RATE_LIMIT_MAX: Final = 1000
"""contract.md: an endpoint's rateLimit, attempts started a second, is 1 to this."""
WEBHOOK_HEADERS_MAX: Final = 10
WEBHOOK_HEADER_NAME_MAX: Final = 64
WEBHOOK_HEADER_VALUE_MAX: Final = 512
HEALTH_WINDOW: Final = 24 * _HOUR
"""The window of an endpoint's health counts (delivered and failed in the last 24 hours)."""
WEBHOOKS_PER_APP_MAX: Final = 20
"""ledgerport's own: webhooks one app may have at once."""
FUNCTIONS_PER_APP_MAX: Final = 20
"""ledgerport's own: hosted functions one app may have at once."""
FUNCTION_SOURCE_MAX_BYTES: Final = 256 * 1024
"""ledgerport's own: the largest hosted-function source, in bytes of UTF-8."""
FUNCTION_SOURCE_MAX_DEPTH: Final = 256
"""ledgerport's own: the deepest a hosted-function source may nest brackets ((, [, {, ${).
Real modules stay within a few dozen; V8 itself fails on about 1,700 to 3,300 levels (measured:
nested functions 1,685, object literals 1,781, arrays 3,282), so a module past this bound could
hardly run, and refusing it at upload keeps its tree small."""
FUNCTION_COMPILE_SECONDS: Final = 5
"""ledgerport's own: seconds an upload's module has to be parsed and turned into a script, in a
worker process that is killed past them (the heaviest legal 256 KiB module measured takes
under a second)."""
FUNCTION_NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
"""A hosted function's name: a letter or digit, then up to 63 letters, digits, _ or -."""
FUNCTION_NAMES_RESERVED: Final = ("new",)
"""Names no function may take: the console's page for a new function is
``/console/apps/{appId}/functions/new``, where a function of that name would have its own."""
SECRET_NAME_PATTERN: Final = r"^[A-Z][A-Z0-9_]{0,63}$"
"""contract.md: an app secret's name."""
SECRET_VALUE_MAX_BYTES: Final = 4096
"""contract.md: an app secret's value, in bytes of UTF-8."""
SECRETS_PER_APP_MAX: Final = 50
"""contract.md: secrets one app may have."""
FUNCTION_ALLOWED_HOSTS_MAX: Final = 20
"""contract.md: host names a function's ``allowedHosts`` may list."""
FUNCTION_FETCHES_PER_RUN_MAX: Final = 50
"""contract.md: ``context.fetch`` calls one run may make."""
FUNCTION_FETCH_ANSWER_MAX_BYTES: Final = 1024 * 1024
"""contract.md: bytes of a fetch's answer read at most."""
CONSOLE_RUNS_SHOWN: Final = 100
"""A function's most recent runs the console lists."""
EVENT_RETENTION: Final = 30 * _DAY

# --- Requests, lockout ---------------------------------------------------------------------------

IDEMPOTENCY_WINDOW: Final = 24 * _HOUR
LOCKOUT_FAILURES: Final = 10
"""Failed client authentications of one (IP, client) pair within LOCKOUT_WINDOW that lock it."""
LOCKOUT_WINDOW: Final = 60
LOCKOUT_DURATION: Final = 60

# --- Rate limits ---------------------------------------------------------------------------------

RateLimitKey: TypeAlias = Literal["ip", "ip+client", "client", "app+business", "app", "user"]


@dataclass(frozen=True, slots=True)
class RateLimit:
    """One budget: at most ``limit`` requests per sliding ``window_seconds`` per ``key``.

    ``key`` names what the budget is counted per: the connecting IP, an (IP, client) pair, a
    client across all IPs, an (app, business) pair, or an app across all businesses.
    """

    name: str
    limit: int
    window_seconds: int
    key: RateLimitKey


RATE_LIMIT_API_PER_IP: Final = RateLimit("api-per-ip", 600, _MINUTE, "ip")
"""Every data API request, per connecting IP."""
RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP: Final = RateLimit(
    "token-unauthenticated-per-ip", 30, _MINUTE, "ip"
)
"""POST /oauth/token requests that authenticate no client (none named, unknown or failed)."""
RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP: Final = RateLimit(
    "revoke-unauthenticated-per-ip", 30, _MINUTE, "ip"
)
"""POST /oauth/revoke requests that authenticate no client."""
RATE_LIMIT_INTROSPECT_UNAUTHENTICATED_PER_IP: Final = RateLimit(
    "introspect-unauthenticated-per-ip", 30, _MINUTE, "ip"
)
"""POST /oauth/introspect requests that authenticate no client."""
RATE_LIMIT_OAUTH_CLIENT_WITH_SECRET: Final = RateLimit(
    "oauth-client-with-secret", 600, _MINUTE, "ip+client"
)
"""Token, revocation and introspection requests of a client authenticated with a secret."""
RATE_LIMIT_OAUTH_CLIENT_WITHOUT_SECRET: Final = RateLimit(
    "oauth-client-without-secret", 300, _MINUTE, "ip+client"
)
"""Token, revocation and introspection requests of a client authenticated without a secret."""
RATE_LIMIT_OAUTH_IP_CEILING: Final = RateLimit("oauth-ip-ceiling", 1200, _MINUTE, "ip")
"""All authenticated token, revocation and introspection requests of one IP together."""
RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT: Final = RateLimit(
    "token-confidential-client", 600, _MINUTE, "client"
)
"""POST /oauth/token by one confidential client across all IPs (each exchange and refresh)."""
RATE_LIMIT_APP_PER_BUSINESS: Final = RateLimit("app-per-business", 300, _MINUTE, "app+business")
"""OAuth-authenticated API calls of one app in one business; the RateLimit-* headers show it."""
RATE_LIMIT_APP: Final = RateLimit("app", 10_000, _MINUTE, "app")
"""OAuth-authenticated API calls of one app across all businesses."""

# The spec leaves the limits of device authorization and registration open ("not shown"); these
# are ledgerport's own, documented in docs/catalog.md.
RATE_LIMIT_DEVICE_UNAUTHENTICATED_PER_IP: Final = RateLimit(
    "device-unauthenticated-per-ip", 30, _MINUTE, "ip"
)
"""POST /oauth/device/authorize requests that authenticate no client."""
RATE_LIMIT_REGISTER_PER_IP: Final = RateLimit("register-per-ip", 10, _MINUTE, "ip")
"""POST /oauth/register, per connecting IP (open registration creates a client each time)."""
RATE_LIMIT_DOCUMENT_FETCH_PER_IP: Final = RateLimit("document-fetch-per-ip", 30, _MINUTE, "ip")
"""Fetches of client ID metadata documents (a document not kept, at /oauth/authorize or
/oauth/par), per connecting IP: each makes the server fetch a URL the request names."""
RATE_LIMIT_USER_CODE_PER_IP: Final = RateLimit("user-code-per-ip", 10, 5 * _MINUTE, "ip")
"""Wrong user codes entered on the device verification page, per IP (guessing defence)."""
RATE_LIMIT_USER_CODE_PER_USER: Final = RateLimit("user-code-per-user", 10, 5 * _MINUTE, "user")
"""Wrong user codes entered on the device verification page, per signed-in user."""

# ledgerport's own, documented in docs/catalog.md and docs/functions.md.
RATE_LIMIT_FUNCTION_UPLOADS: Final = RateLimit("function-uploads", 30, _MINUTE, "app")
"""PUT /developer/apps/{appId}/functions/{name}, per app: each upload compiles a module."""

RATE_LIMITS: Final[Mapping[str, RateLimit]] = MappingProxyType(
    {
        rate_limit.name: rate_limit
        for rate_limit in (
            RATE_LIMIT_API_PER_IP,
            RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP,
            RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP,
            RATE_LIMIT_INTROSPECT_UNAUTHENTICATED_PER_IP,
            RATE_LIMIT_OAUTH_CLIENT_WITH_SECRET,
            RATE_LIMIT_OAUTH_CLIENT_WITHOUT_SECRET,
            RATE_LIMIT_OAUTH_IP_CEILING,
            RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT,
            RATE_LIMIT_APP_PER_BUSINESS,
            RATE_LIMIT_APP,
            RATE_LIMIT_DEVICE_UNAUTHENTICATED_PER_IP,
            RATE_LIMIT_REGISTER_PER_IP,
            RATE_LIMIT_DOCUMENT_FETCH_PER_IP,
            RATE_LIMIT_USER_CODE_PER_IP,
            RATE_LIMIT_USER_CODE_PER_USER,
            RATE_LIMIT_FUNCTION_UPLOADS,
        )
    }
)
"""Every rate limit by name, read as contract.md's "The Limits table read as one scheme"."""
