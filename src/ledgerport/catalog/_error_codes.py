"""Machine-readable ``code`` values of the standard error envelope, with their statuses.

Three tables: the spec's API error codes, the spec's developer console codes, and ledgerport's own
codes for what the spec leaves open (the operator API, authentication, service failures). The
HTTP layer maps each exception to one of these codes and answers with the code's status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One envelope ``code``: the HTTP status it is answered with, and its cause."""

    code: str
    status: int
    cause: str


def _table(codes: Iterable[ErrorCode]) -> Mapping[str, ErrorCode]:
    return MappingProxyType({code.code: code for code in codes})


API_ERROR_CODES: Final[Mapping[str, ErrorCode]] = _table(
    (
        ErrorCode("APP_RATE_LIMITED", 429, "app exceeded a rate limit; honor Retry-After"),
        ErrorCode(
            "UNSUPPORTED_API_VERSION",
            400,
            "resolved version (header, pinned or current) does not exist or is past sunset",
        ),
        ErrorCode("UNKNOWN_APP_DATA_FIELD", 400, "key not declared by the app for that type"),
        ErrorCode(
            "INVALID_APP_DATA_VALUE",
            400,
            "value breaks type, length, range or choice rules; the answer adds details",
        ),
        ErrorCode("PROVIDE_RESOURCEID_RESOURCEIDS", 400, "GET /app-data without resourceId(s)"),
        ErrorCode("RESOURCEIDS_ACCEPTS_MOST_50_IDS", 400, "more than 50 ids"),
        ErrorCode(
            "APP_CANNOT_ACCESS_TYPE_RECORD",
            403,
            "installation lacks the read scope for that resource type",
        ),
        ErrorCode(
            "APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY",
            403,
            "/app-data called with a session cookie",
        ),
        ErrorCode("RECORD_NOT_FOUND", 404, "record to write app data on not in the business"),
        ErrorCode(
            "APP_DATA_VALUE_NOT_FOUND", 404, "DELETE /app-data/:id for an id the app lacks here"
        ),
        ErrorCode(
            "UNKNOWN_CURSOR",
            400,
            "events after is not an event id in the business or aged out of 30 days",
        ),
        ErrorCode("UNKNOWN_EVENT_TYPE_TYPES", 400, "types names an event not in the catalog"),
        ErrorCode(
            "EVENT_LOG_AVAILABLE_CONNECTED_APPS_ONLY", 403, "/events called with a session cookie"
        ),
        ErrorCode("EVENT_NOT_FOUND", 404, "event missing or not visible to the app"),
    )
)
"""The spec's API error codes (standard envelope)."""

CONSOLE_ERROR_CODES: Final[Mapping[str, ErrorCode]] = _table(
    (
        ErrorCode("LISTING_EXISTS", 409, "two first saves of one listing raced"),
        ErrorCode("SLUG_TAKEN", 400, "listing slug already used"),
        ErrorCode(
            "ASSET_IN_USE", 400, "asset still referenced by the live listing or an open revision"
        ),
        ErrorCode(
            "EXTENSION_SCOPE_REQUIRED", 400, "extension on a record needs its type's read scope"
        ),
        ErrorCode(
            "EXTENSION_PATH_INVALID", 400, "path malformed or not a page on the App URL's origin"
        ),
        ErrorCode(
            "INVALID_CHOICES",
            400,
            "CHOICE options not 1 to 50 distinct non-empty strings of at most 60 characters",
        ),
        ErrorCode(
            "FUNCTION_SOURCE_NO_HANDLER", 400, "function source is not an ES module with a handler"
        ),
    )
)
"""The spec's developer console codes (``/developer/*``)."""

SERVICE_ERROR_CODES: Final[Mapping[str, ErrorCode]] = _table(
    (
        ErrorCode("BUSINESS_NOT_FOUND", 404, "no business with that id"),
        ErrorCode("USER_NOT_FOUND", 404, "no user with that id"),
        ErrorCode("EMAIL_TAKEN", 409, "a user with that email exists"),
        ErrorCode("APP_NOT_FOUND", 404, "no app with that id"),
        ErrorCode("INSTALLATION_NOT_FOUND", 404, "no ACTIVE installation with that id or pair"),
        ErrorCode("APP_NOT_ACTIVE", 409, "the app is suspended or deactivated"),
        ErrorCode("NOT_AN_ACTIVE_MEMBER", 409, "the user is not an active member there"),
        ErrorCode("APP_NOT_REVIEWED", 400, "an unreviewed app and a non-sandbox business"),
        ErrorCode("SCOPES_NOT_REGISTERED", 400, "scopes the app did not register"),
        ErrorCode(
            "INSTALL_NOT_PERMITTED",
            403,
            "installing or widening needs apps:install (owner and admin by default)",
        ),
        ErrorCode("NO_ACTIVE_INSTALLATION", 409, "the app has no ACTIVE installation there"),
        ErrorCode("INVALID_ADMIN_TOKEN", 401, "missing or wrong operator token"),
        ErrorCode("INVALID_TOKEN", 401, "access token missing, expired, revoked or malformed"),
        ErrorCode("INVALID_METRICS_TOKEN", 401, "a /metrics scrape without the metrics token"),
        ErrorCode("NOT_SIGNED_IN", 401, "the browser has no session on the application host"),
        ErrorCode(
            "CROSS_SITE_REQUEST",
            403,
            "a session cookie's unsafe /developer/* request from another origin, no CSRF token",
        ),
        ErrorCode("CLI_LOGIN_NOT_FOUND", 404, "no ledgerport login waits for that user code"),
        ErrorCode("INSUFFICIENT_SCOPE", 403, "the token lacks the endpoint's scope"),
        ErrorCode("PERMISSION_DENIED", 403, "the user's role lacks the endpoint's permission"),
        ErrorCode("INVALID_STATE", 409, "the record's status does not allow the change"),
        ErrorCode(
            "ENDPOINT_NOT_EXPOSED", 403, "the route is the product's own, outside the partner API"
        ),
        ErrorCode(
            "PLAN_INVOICE_LIMIT_REACHED",
            403,
            "the business's plan reached its yearly invoice ceiling; only new invoices blocked",
        ),
        ErrorCode("ACCOUNT_CODE_TAKEN", 409, "the chart of accounts has an account with that code"),
        ErrorCode("IDEMPOTENCY_KEY_REUSED", 400, "the Idempotency-Key came with another request"),
        ErrorCode("APP_DATA_FIELD_EXISTS", 409, "the app declared that key for that type"),
        ErrorCode("APP_DATA_FIELD_NOT_FOUND", 404, "no app data field with that id of the app"),
        ErrorCode("WEBHOOK_NOT_FOUND", 404, "the app has no webhook with that id"),
        ErrorCode("DELIVERY_NOT_FOUND", 404, "the webhook has no delivery with that id"),
        ErrorCode("FUNCTION_NOT_FOUND", 404, "the app has no hosted function of that name"),
        ErrorCode("RUN_NOT_FOUND", 404, "the function has no run with that id"),
        ErrorCode("SECRET_NOT_FOUND", 404, "the app has no secret of that name"),
        ErrorCode(
            "FUNCTION_VERSION_NOT_FOUND", 404, "the function keeps no version by that number"
        ),
        ErrorCode("EXTENSION_NOT_FOUND", 404, "the app has no extension at that target"),
        ErrorCode("LISTING_NOT_FOUND", 404, "the app has no marketplace listing"),
        ErrorCode("ASSET_NOT_FOUND", 404, "the app has no asset with that id"),
        ErrorCode("REVISION_NOT_FOUND", 404, "no listing revision with that id"),
        ErrorCode(
            "REDELIVERY_REFUSED",
            400,
            "the delivery waits for an attempt, is gone (30 days) or is no longer entitled",
        ),
        ErrorCode("CONFLICT", 409, "a concurrent change won; retry the request"),
        ErrorCode("SERVICE_UNAVAILABLE", 503, "the database cannot be reached; retry"),
        ErrorCode("NOT_READY", 503, "a part of the process does not run now (/readyz names it)"),
        ErrorCode("INTERNAL_ERROR", 500, "failure on the service side"),
    )
)
"""ledgerport's own codes, documented in docs/catalog.md."""

ERROR_CODES: Final[Mapping[str, ErrorCode]] = MappingProxyType(
    {**API_ERROR_CODES, **CONSOLE_ERROR_CODES, **SERVICE_ERROR_CODES}
)
"""Every envelope code by name."""
