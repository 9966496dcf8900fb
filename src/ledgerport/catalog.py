"""The partner API's tables as data: scopes, permissions, roles, events, versions and limits.

What: every name and figure the spec (``partner-api.md``) and its fixed points (``contract.md``)
state as a table lives here once: the business areas and their scopes, role permissions and role
defaults, the 45 event types with their audience, gating scope and sample payload, the dated API
versions with their sunsets, lifetimes, size limits, the webhook retry schedule, the rate limit
scheme, the app data resource types and the OAuth vocabulary (grant types, token types, PKCE and
client authentication methods).

Why: the same facts are needed by the OAuth server, the data API, the delivery engine, the
discovery document, the OpenAPI document and the tests. Keeping them as one immutable module
means no literal is repeated (and drifts) elsewhere, and tests can be parametrized over the
tables. The module is pure data plus a few lookups: it performs no I/O and reads no clock at
import; functions that depend on time take the date as an argument (domain code injects the
clock).

Durations are integers in seconds, sizes are counts. Names the spec does not fix (most event
names, the rate limit names) are ledgerport's own and are documented in ``docs/catalog.md``.
"""

from __future__ import annotations

import calendar
import copy
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, TypeAlias

# --- Business areas and OAuth scopes -------------------------------------------------------------

AREAS: Final[tuple[str, ...]] = (
    "customers",
    "suppliers",
    "invoices",
    "payments",
    "purchases",
    "purchase-returns",
    "quotes",
    "accounts",
    "journal",
)
"""The business areas named by the interface; each has a ``:read`` and a ``:write`` scope."""

SCOPES: Final[tuple[str, ...]] = (
    "profile:read",
    "events:read",
    "app-data:read",
    "app-data:write",
    *(f"{area}:{access}" for area in AREAS for access in ("read", "write")),
)
"""Every OAuth scope, in the stable order the discovery document lists as scopes_supported."""

_SCOPE_SET: Final[frozenset[str]] = frozenset(SCOPES)


def is_scope(name: str) -> bool:
    """Tell whether ``name`` is one of the service's OAuth scopes (exact, case-sensitive)."""
    return name in _SCOPE_SET


# --- Role permissions --------------------------------------------------------------------------

PERMISSION_JOURNAL_POST: Final = "journal:post"
PERMISSION_ACCOUNTS_WRITE: Final = "accounts:write"
PERMISSION_PAYMENTS_DELETE: Final = "payments:delete"

PERMISSIONS: Final[tuple[str, ...]] = (
    *(f"{area}:{access}" for area in AREAS for access in ("read", "write")),
    PERMISSION_JOURNAL_POST,
    PERMISSION_PAYMENTS_DELETE,
)
"""Every role permission: read and write per area, plus journal posting and payment deletion.

A call needs both the token's scope and the user's permission; the two gates are separate.
"""

SENSITIVE_PERMISSIONS: Final[frozenset[str]] = frozenset(
    {PERMISSION_JOURNAL_POST, PERMISSION_ACCOUNTS_WRITE, PERMISSION_PAYMENTS_DELETE}
)
"""Permissions held by default only by the owner and admin roles."""

ROLES: Final[tuple[str, ...]] = ("owner", "admin", "accountant", "viewer")

ROLE_DEFAULTS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "owner": frozenset(PERMISSIONS),
        "admin": frozenset(PERMISSIONS),
        "accountant": frozenset(PERMISSIONS) - SENSITIVE_PERMISSIONS,
        "viewer": frozenset(p for p in PERMISSIONS if p.endswith(":read")),
    }
)
"""What each role holds until a business changes it (``PUT /admin/businesses/{id}/roles/{r}``)."""


# --- Events --------------------------------------------------------------------------------------

Audience: TypeAlias = Literal["business", "app", "privacy"]


@dataclass(frozen=True, slots=True)
class EventType:
    """One entry of the event catalog.

    ``audience`` decides delivery: business and privacy events reach an app only when the app and
    the business's ACTIVE installation hold ``scope``; app events (``scope`` None) go to the app's
    subscribed webhooks whatever the installation state. ``area`` is the business area the event
    belongs to (None for app events). ``sample`` is the ``data`` payload of a test delivery; treat
    it as read-only and use :meth:`sample_data` for a copy to extend.
    """

    name: str
    audience: Audience
    scope: str | None
    area: str | None
    sample: Mapping[str, object] = field(compare=False)

    def sample_data(self) -> dict[str, object]:
        """Return a fresh, deep copy of the sample payload that the caller may modify."""
        return copy.deepcopy(dict(self.sample))


def _business(name: str, area: str, sample: Mapping[str, object]) -> EventType:
    return EventType(name, "business", f"{area}:read", area, sample)


def _privacy(name: str, area: str, sample: Mapping[str, object]) -> EventType:
    return EventType(name, "privacy", f"{area}:read", area, sample)


def _app(name: str, sample: Mapping[str, object]) -> EventType:
    return EventType(name, "app", None, None, sample)


def _record(base: Mapping[str, object], **changes: object) -> dict[str, object]:
    return {**base, **changes}


_CUSTOMER: Final[Mapping[str, object]] = {
    "id": "cus_7Hq2mX9d",
    "name": "Acme Trading Ltd",
    "email": "accounts@acme.example",
    "createdAt": "2026-09-22T09:14:03Z",
}
_SUPPLIER: Final[Mapping[str, object]] = {
    "id": "sup_3Tb8kR1w",
    "name": "Northwind Paper Co",
    "email": "billing@northwind.example",
    "createdAt": "2026-09-10T15:02:41Z",
}
_INVOICE: Final[Mapping[str, object]] = {
    "id": "inv_4Kp8sT2a",
    "number": "INV-0042",
    "status": "draft",
    "customerId": "cus_7Hq2mX9d",
    "currency": "EUR",
    "total": "1210.00",
    "amountDue": "1210.00",
    "issueDate": "2026-09-22",
    "dueDate": "2026-10-22",
    "lines": [{"description": "Consulting, September", "quantity": "8", "unitPrice": "151.25"}],
}
_PAYMENT: Final[Mapping[str, object]] = {
    "id": "pay_9Wc5nL6e",
    "invoiceId": "inv_4Kp8sT2a",
    "amount": "1210.00",
    "currency": "EUR",
    "status": "received",
    "receivedOn": "2026-10-02",
}
_PURCHASE: Final[Mapping[str, object]] = {
    "id": "pur_2Fm6vQ8j",
    "number": "PUR-0107",
    "status": "open",
    "supplierId": "sup_3Tb8kR1w",
    "currency": "EUR",
    "total": "348.50",
    "amountDue": "348.50",
    "billDate": "2026-09-18",
    "dueDate": "2026-10-18",
}
_PURCHASE_RETURN: Final[Mapping[str, object]] = {
    "id": "prt_5Ld1yH4c",
    "purchaseId": "pur_2Fm6vQ8j",
    "supplierId": "sup_3Tb8kR1w",
    "status": "open",
    "currency": "EUR",
    "total": "49.90",
    "returnDate": "2026-09-25",
}
_QUOTE: Final[Mapping[str, object]] = {
    "id": "quo_8Np3gZ7s",
    "number": "QUO-0019",
    "status": "draft",
    "customerId": "cus_7Hq2mX9d",
    "currency": "EUR",
    "total": "2400.00",
    "issueDate": "2026-09-20",
    "validUntil": "2026-10-20",
}
_ACCOUNT: Final[Mapping[str, object]] = {
    "id": "acc_6Rj4tB3u",
    "code": "4000",
    "name": "Sales revenue",
    "type": "income",
    "archived": False,
}
_JOURNAL_ENTRY: Final[Mapping[str, object]] = {
    "id": "jnl_1Xe9pK5m",
    "number": "JE-0311",
    "status": "posted",
    "date": "2026-09-30",
    "memo": "Accrued September rent",
    "lines": [
        {"accountId": "acc_2Yf7qC8n", "debit": "950.00", "credit": "0.00"},
        {"accountId": "acc_0Zg3rD6o", "debit": "0.00", "credit": "950.00"},
    ],
}
_INSTALLATION_ID: Final = "ins_4Hs2wE9b"

EVENTS: Final[tuple[EventType, ...]] = (
    # App lifecycle and app-level notices: no gating scope.
    _app(
        "app.installed",
        {
            "installationId": _INSTALLATION_ID,
            "state": "ACTIVE",
            "scopes": ["invoices:read", "customers:read"],
        },
    ),
    _app(
        "app.uninstalled",
        {"installationId": _INSTALLATION_ID, "uninstalledAt": "2026-10-05T08:30:00Z"},
    ),
    _app(
        "app.scopes_updated",
        {
            "installationId": _INSTALLATION_ID,
            "scopes": ["invoices:read", "customers:read", "payments:read"],
            "previousScopes": ["invoices:read", "customers:read"],
        },
    ),
    _app(
        "business.redact",
        {"installationId": _INSTALLATION_ID, "requestedAt": "2026-10-07T08:30:00Z"},
    ),
    _app(
        "app_data.updated",
        {
            "id": "apd_3Vk8fN2x",
            "resourceType": "invoice",
            "resourceId": "inv_4Kp8sT2a",
            "key": "syncStatus",
            "value": "exported",
        },
    ),
    # Privacy notices: the app must erase what it holds about the person.
    _privacy(
        "customer.redact",
        "customers",
        {
            "customerId": "cus_7Hq2mX9d",
            "email": "accounts@acme.example",
            "requestedAt": "2026-10-01T12:00:00Z",
        },
    ),
    _privacy(
        "supplier.redact",
        "suppliers",
        {
            "supplierId": "sup_3Tb8kR1w",
            "email": "billing@northwind.example",
            "requestedAt": "2026-10-01T12:00:00Z",
        },
    ),
    # Business events, by area.
    _business("customer.created", "customers", _record(_CUSTOMER)),
    _business("customer.updated", "customers", _record(_CUSTOMER, email="ap@acme.example")),
    _business("customer.deleted", "customers", {"id": "cus_7Hq2mX9d"}),
    _business("supplier.created", "suppliers", _record(_SUPPLIER)),
    _business("supplier.updated", "suppliers", _record(_SUPPLIER, name="Northwind Paper GmbH")),
    _business("supplier.deleted", "suppliers", {"id": "sup_3Tb8kR1w"}),
    _business("invoice.created", "invoices", _record(_INVOICE)),
    _business("invoice.updated", "invoices", _record(_INVOICE, dueDate="2026-10-31")),
    _business(
        "invoice.sent", "invoices", _record(_INVOICE, status="sent", sentAt="2026-09-22T10:05:00Z")
    ),
    _business(
        "invoice.paid",
        "invoices",
        _record(_INVOICE, status="paid", amountDue="0.00", paidAt="2026-10-02T14:21:09Z"),
    ),
    _business("invoice.overdue", "invoices", _record(_INVOICE, status="overdue")),
    _business(
        "invoice.voided",
        "invoices",
        _record(_INVOICE, status="void", amountDue="0.00", voidedAt="2026-09-23T09:00:00Z"),
    ),
    _business("invoice.deleted", "invoices", {"id": "inv_4Kp8sT2a", "number": "INV-0042"}),
    _business("payment.received", "payments", _record(_PAYMENT)),
    _business("payment.updated", "payments", _record(_PAYMENT, receivedOn="2026-10-01")),
    _business(
        "payment.refunded",
        "payments",
        _record(_PAYMENT, status="refunded", refundedAmount="1210.00", refundedOn="2026-10-09"),
    ),
    _business("payment.deleted", "payments", {"id": "pay_9Wc5nL6e"}),
    _business("purchase.created", "purchases", _record(_PURCHASE)),
    _business("purchase.updated", "purchases", _record(_PURCHASE, dueDate="2026-10-25")),
    _business(
        "purchase.paid",
        "purchases",
        _record(_PURCHASE, status="paid", amountDue="0.00", paidAt="2026-10-12T11:40:00Z"),
    ),
    _business("purchase.deleted", "purchases", {"id": "pur_2Fm6vQ8j", "number": "PUR-0107"}),
    _business("purchase_return.created", "purchase-returns", _record(_PURCHASE_RETURN)),
    _business(
        "purchase_return.updated", "purchase-returns", _record(_PURCHASE_RETURN, total="59.90")
    ),
    _business(
        "purchase_return.refunded",
        "purchase-returns",
        _record(_PURCHASE_RETURN, status="refunded", refundedOn="2026-10-03"),
    ),
    _business("purchase_return.deleted", "purchase-returns", {"id": "prt_5Ld1yH4c"}),
    _business("quote.created", "quotes", _record(_QUOTE)),
    _business("quote.updated", "quotes", _record(_QUOTE, total="2200.00")),
    _business(
        "quote.sent", "quotes", _record(_QUOTE, status="sent", sentAt="2026-09-20T16:45:00Z")
    ),
    _business(
        "quote.accepted",
        "quotes",
        _record(_QUOTE, status="accepted", acceptedAt="2026-09-24T08:12:30Z"),
    ),
    _business(
        "quote.declined",
        "quotes",
        _record(_QUOTE, status="declined", declinedAt="2026-09-24T08:12:30Z"),
    ),
    _business(
        "quote.converted",
        "quotes",
        _record(_QUOTE, status="converted", invoiceId="inv_4Kp8sT2a"),
    ),
    _business("quote.deleted", "quotes", {"id": "quo_8Np3gZ7s", "number": "QUO-0019"}),
    _business("account.created", "accounts", _record(_ACCOUNT)),
    _business("account.updated", "accounts", _record(_ACCOUNT, name="Revenue from services")),
    _business("account.archived", "accounts", _record(_ACCOUNT, archived=True)),
    _business("account.deleted", "accounts", {"id": "acc_6Rj4tB3u", "code": "4000"}),
    _business("journal_entry.posted", "journal", _record(_JOURNAL_ENTRY)),
    _business(
        "journal_entry.reversed",
        "journal",
        _record(_JOURNAL_ENTRY, status="reversed", reversalEntryId="jnl_7Cw2hM4q"),
    ),
)
"""The event catalog: 45 event types in a stable order (app, privacy, then business by area)."""

EVENT_NAMES: Final[tuple[str, ...]] = tuple(event.name for event in EVENTS)

_EVENTS_BY_NAME: Final[Mapping[str, EventType]] = MappingProxyType(
    {event.name: event for event in EVENTS}
)

DEFAULT_TEST_EVENT: Final = "invoice.created"
"""Type of a test delivery for a webhook subscribed to no event."""


def event_type(name: str) -> EventType | None:
    """Look an event type up by its name; None when the catalog has no such event."""
    return _EVENTS_BY_NAME.get(name)


# --- API versions --------------------------------------------------------------------------------

API_VERSION_SUPPORT_MONTHS: Final = 12


@dataclass(frozen=True, slots=True)
class ApiVersion:
    """A dated API version, served from ``released`` until (excluding) ``sunset``."""

    name: str
    released: datetime.date
    sunset: datetime.date


def _add_months(day: datetime.date, months: int) -> datetime.date:
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    return datetime.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _api_version(name: str) -> ApiVersion:
    released = datetime.date.fromisoformat(name)
    return ApiVersion(name, released, _add_months(released, API_VERSION_SUPPORT_MONTHS))


API_VERSIONS: Final[tuple[ApiVersion, ...]] = (
    _api_version("2025-09-15"),
    _api_version("2026-03-01"),
    _api_version("2026-09-22"),
)
"""Every API version ever released, oldest first."""

CURRENT_API_VERSION: Final = "2026-09-22"

_API_VERSIONS_BY_NAME: Final[Mapping[str, ApiVersion]] = MappingProxyType(
    {version.name: version for version in API_VERSIONS}
)


def resolve_version(name: str, today: datetime.date) -> ApiVersion | None:
    """Return the version called ``name`` if it is still supported on ``today``.

    None when no such version exists or it is past its sunset (``today >= sunset``); the caller
    answers 400 UNSUPPORTED_API_VERSION. Pure: the caller passes the date from its clock.
    """
    version = _API_VERSIONS_BY_NAME.get(name)
    if version is None or today >= version.sunset:
        return None
    return version


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
USER_CODE_ALPHABET: Final = "BCDFGHJKLMNPQRSTVWXZ"
"""Consonants only (RFC 8628 section 6.1): no vowels to spell words, no 0/O or 1/I to confuse."""
USER_CODE_LENGTH: Final = 8

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
WEBHOOK_SECRET_PREFIX: Final = "whsec_"
WEBHOOK_SECRET_OVERLAP: Final = 24 * _HOUR
"""How long the previous secret keeps signing, as the second v1 value, after a rotation."""
WEBHOOK_SIGNATURE_TOLERANCE: Final = 300
"""Recommended largest distance between a signature's timestamp and a receiver's clock."""
DELIVERY_RETENTION: Final = 30 * _DAY
DELIVERY_CLEANUP_INTERVAL: Final = 1 * _HOUR
CONSOLE_DELIVERIES_SHOWN: Final = 100
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
RATE_LIMIT_USER_CODE_PER_IP: Final = RateLimit("user-code-per-ip", 10, 5 * _MINUTE, "ip")
"""Wrong user codes entered on the device verification page, per IP (guessing defence)."""
RATE_LIMIT_USER_CODE_PER_USER: Final = RateLimit("user-code-per-user", 10, 5 * _MINUTE, "user")
"""Wrong user codes entered on the device verification page, per signed-in user."""

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
            RATE_LIMIT_USER_CODE_PER_IP,
            RATE_LIMIT_USER_CODE_PER_USER,
        )
    }
)
"""Every rate limit by name, read as contract.md's "The Limits table read as one scheme"."""

# --- App data ------------------------------------------------------------------------------------

APP_DATA_RESOURCE_SCOPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "invoice": "invoices:read",
        "customer": "customers:read",
        "supplier": "suppliers:read",
        "payment": "payments:read",
        "purchase": "purchases:read",
        "purchase_return": "purchase-returns:read",
        "quote": "quotes:read",
        "account": "accounts:read",
        "journal_entry": "journal:read",
    }
)
"""Each app data resource type and the read scope an installation needs to use app data on it."""

APP_DATA_RESOURCE_TYPES: Final[tuple[str, ...]] = tuple(APP_DATA_RESOURCE_SCOPES)

# --- OAuth vocabulary ----------------------------------------------------------------------------

GRANT_AUTHORIZATION_CODE: Final = "authorization_code"
GRANT_REFRESH_TOKEN: Final = "refresh_token"
GRANT_DEVICE_CODE: Final = "urn:ietf:params:oauth:grant-type:device_code"
GRANT_TOKEN_EXCHANGE: Final = "urn:ietf:params:oauth:grant-type:token-exchange"
GRANT_TYPES: Final[tuple[str, ...]] = (
    GRANT_AUTHORIZATION_CODE,
    GRANT_REFRESH_TOKEN,
    GRANT_DEVICE_CODE,
    GRANT_TOKEN_EXCHANGE,
)
"""Every grant the token endpoint accepts; anything else is unsupported_grant_type."""

RESPONSE_TYPES: Final[tuple[str, ...]] = ("code",)

TOKEN_TYPE_ACCESS: Final = "urn:ietf:params:oauth:token-type:access_token"
TOKEN_TYPE_JWT: Final = "urn:ietf:params:oauth:token-type:jwt"
TOKEN_TYPE_ID_TOKEN: Final = "urn:ietf:params:oauth:token-type:id_token"
SUBJECT_TOKEN_TYPES: Final[tuple[str, ...]] = (TOKEN_TYPE_JWT, TOKEN_TYPE_ID_TOKEN)
"""Accepted subject_token_type values of a token exchange; both are handled identically."""

TOKEN_TYPE_HINTS: Final[tuple[str, ...]] = ("access_token", "refresh_token")
"""token_type_hint values that revocation and introspection honour; others are ignored."""

CODE_CHALLENGE_METHODS: Final[tuple[str, ...]] = ("S256", "plain")
TOKEN_ENDPOINT_AUTH_METHODS: Final[tuple[str, ...]] = (
    "client_secret_basic",
    "client_secret_post",
    "none",
)
