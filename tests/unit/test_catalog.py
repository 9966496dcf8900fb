"""The catalog against the spec's tables, copied here from partner-api.md and contract.md."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest

from ledgerport import catalog

AREAS = (
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

# partner-api.md, Events: "Events named", with the audiences the spec gives. The spec gives the
# scope of the first four and none for app events; the rest follow the area rule (docs/catalog.md).
SPEC_EVENTS = [
    ("invoice.created", "business", "invoices:read"),
    ("invoice.paid", "business", "invoices:read"),
    ("payment.received", "business", "payments:read"),
    ("customer.created", "business", "customers:read"),
    ("app.uninstalled", "app", None),
    ("app.installed", "app", None),
    ("app.scopes_updated", "app", None),
    ("business.redact", "app", None),
    ("app_data.updated", "app", None),
    ("customer.redact", "privacy", "customers:read"),
    ("supplier.redact", "privacy", "suppliers:read"),
    ("purchase.updated", "business", "purchases:read"),
    ("quote.deleted", "business", "quotes:read"),
    ("purchase_return.refunded", "business", "purchase-returns:read"),
]

# contract.md, Details fixed for consistency: "Scopes".
CONTRACT_SCOPES = {
    "profile:read",
    "events:read",
    "app-data:read",
    "app-data:write",
    *(f"{area}:read" for area in AREAS),
    *(f"{area}:write" for area in AREAS),
}

SENSITIVE = ("journal:post", "accounts:write", "payments:delete", "apps:install")

# partner-api.md, Limits: webhook retry delays, attempt -> seconds after the previous failure.
SPEC_RETRY_DELAYS = {1: 0, 2: 60, 3: 5 * 60, 4: 30 * 60, 5: 2 * 3600, 6: 6 * 3600}

# partner-api.md Rate limits, read as contract.md "The Limits table read as one scheme".
SPEC_RATE_LIMITS = {
    catalog.RATE_LIMIT_API_PER_IP: (600, 60, "ip"),
    catalog.RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP: (30, 60, "ip"),
    catalog.RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP: (30, 60, "ip"),
    catalog.RATE_LIMIT_INTROSPECT_UNAUTHENTICATED_PER_IP: (30, 60, "ip"),
    catalog.RATE_LIMIT_OAUTH_CLIENT_WITH_SECRET: (600, 60, "ip+client"),
    catalog.RATE_LIMIT_OAUTH_CLIENT_WITHOUT_SECRET: (300, 60, "ip+client"),
    catalog.RATE_LIMIT_OAUTH_IP_CEILING: (1200, 60, "ip"),
    catalog.RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT: (600, 60, "client"),
    catalog.RATE_LIMIT_APP_PER_BUSINESS: (300, 60, "app+business"),
    catalog.RATE_LIMIT_APP: (10_000, 60, "app"),
}

# Limits the spec leaves open ("not shown"), ledgerport's own figures (docs/catalog.md).
OWN_RATE_LIMITS = {
    catalog.RATE_LIMIT_DEVICE_UNAUTHENTICATED_PER_IP: (30, 60, "ip"),
    catalog.RATE_LIMIT_REGISTER_PER_IP: (10, 60, "ip"),
    catalog.RATE_LIMIT_DOCUMENT_FETCH_PER_IP: (30, 60, "ip"),
    catalog.RATE_LIMIT_USER_CODE_PER_IP: (10, 300, "ip"),
    catalog.RATE_LIMIT_USER_CODE_PER_USER: (10, 300, "user"),
    catalog.RATE_LIMIT_FUNCTION_UPLOADS: (30, 60, "app"),
}

CATALOG_DOC = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"


def test_catalog_holds_45_distinct_events() -> None:
    assert len(catalog.EVENTS) == 45
    assert len(set(catalog.EVENT_NAMES)) == 45
    assert catalog.EVENT_NAMES == tuple(event.name for event in catalog.EVENTS)


@pytest.mark.parametrize(("name", "audience", "scope"), SPEC_EVENTS)
def test_spec_named_event_has_spec_audience_and_scope(
    name: str, audience: str, scope: str | None
) -> None:
    event = catalog.event_type(name)
    assert event is not None
    assert (event.name, event.audience, event.scope) == (name, audience, scope)


def test_event_type_of_unknown_name_is_none() -> None:
    assert catalog.event_type("invoice.exploded") is None
    assert catalog.event_type("INVOICE.CREATED") is None


@pytest.mark.parametrize("event", catalog.EVENTS, ids=lambda event: event.name)
def test_gating_scope_follows_audience(event: catalog.EventType) -> None:
    if event.audience == "app":
        assert event.scope is None
        assert event.area is None
    else:
        assert event.audience in {"business", "privacy"}
        assert event.area in AREAS
        assert event.scope == f"{event.area}:read"
        assert catalog.is_scope(event.scope)


@pytest.mark.parametrize("event", catalog.EVENTS, ids=lambda event: event.name)
def test_sample_is_a_json_object_without_the_test_flag(event: catalog.EventType) -> None:
    data = event.sample_data()
    assert data
    assert "test" not in data
    # A round trip equals the original only when every value is a JSON-native type.
    assert json.loads(json.dumps(data)) == data
    assert json.loads(json.dumps(event.sample)) == data


def test_sample_data_is_a_private_copy() -> None:
    event = catalog.event_type("journal_entry.posted")
    assert event is not None
    copied = event.sample_data()
    copied["test"] = True
    lines = copied["lines"]
    assert isinstance(lines, list)
    lines.clear()
    assert "test" not in event.sample
    assert event.sample["lines"]
    assert event.sample_data() != copied


def test_default_test_event_is_invoice_created() -> None:
    assert catalog.DEFAULT_TEST_EVENT == "invoice.created"
    assert catalog.event_type(catalog.DEFAULT_TEST_EVENT) is not None


def test_scopes_are_the_contract_scopes_without_duplicates() -> None:
    assert len(catalog.SCOPES) == len(set(catalog.SCOPES))
    assert set(catalog.SCOPES) == CONTRACT_SCOPES
    assert catalog.AREAS == AREAS


def test_is_scope() -> None:
    assert catalog.is_scope("invoices:read")
    assert catalog.is_scope("app-data:write")
    assert not catalog.is_scope("journal:post")
    assert not catalog.is_scope("profile:write")
    assert not catalog.is_scope("Invoices:read")


def test_permissions_are_area_reads_and_writes_plus_posting_deleting_and_installing() -> None:
    expected = {f"{area}:{access}" for area in AREAS for access in ("read", "write")}
    expected |= {"journal:post", "payments:delete", "apps:install"}
    assert len(catalog.PERMISSIONS) == len(set(catalog.PERMISSIONS))
    assert set(catalog.PERMISSIONS) == expected
    assert catalog.SENSITIVE_PERMISSIONS == frozenset(SENSITIVE)
    assert catalog.ROLES == ("owner", "admin", "accountant", "viewer")
    assert set(catalog.ROLE_DEFAULTS) == set(catalog.ROLES)


@pytest.mark.parametrize("permission", SENSITIVE)
@pytest.mark.parametrize("role", ["owner", "admin", "accountant", "viewer"])
def test_sensitive_permissions_by_default_only_for_owner_and_admin(
    role: str, permission: str
) -> None:
    assert (permission in catalog.ROLE_DEFAULTS[role]) == (role in {"owner", "admin"})


@pytest.mark.parametrize("role", ["owner", "admin"])
def test_owner_and_admin_hold_every_permission(role: str) -> None:
    assert catalog.ROLE_DEFAULTS[role] == frozenset(catalog.PERMISSIONS)


def test_accountant_holds_all_but_the_sensitive_permissions() -> None:
    assert catalog.ROLE_DEFAULTS["accountant"] == frozenset(catalog.PERMISSIONS) - set(SENSITIVE)


def test_viewer_only_reads() -> None:
    assert catalog.ROLE_DEFAULTS["viewer"] == frozenset(f"{area}:read" for area in AREAS)


@pytest.mark.parametrize(
    ("name", "released", "sunset"),
    [
        ("2025-09-15", datetime.date(2025, 9, 15), datetime.date(2026, 9, 15)),
        ("2026-03-01", datetime.date(2026, 3, 1), datetime.date(2027, 3, 1)),
        ("2026-09-22", datetime.date(2026, 9, 22), datetime.date(2027, 9, 22)),
    ],
)
def test_version_is_supported_12_months_from_release(
    name: str, released: datetime.date, sunset: datetime.date
) -> None:
    assert catalog.ApiVersion(name, released, sunset) in catalog.API_VERSIONS
    last_day = sunset - datetime.timedelta(days=1)
    assert catalog.resolve_version(name, released) == catalog.ApiVersion(name, released, sunset)
    assert catalog.resolve_version(name, last_day) is not None


def test_current_version_resolves() -> None:
    assert catalog.CURRENT_API_VERSION == "2026-09-22"
    version = catalog.resolve_version(catalog.CURRENT_API_VERSION, datetime.date(2026, 12, 1))
    assert version is not None
    assert version.name == "2026-09-22"
    assert catalog.API_VERSIONS[-1] == version


@pytest.mark.parametrize("name", ["2026-01-01", "2026-9-22", "latest", ""])
def test_unknown_version_does_not_resolve(name: str) -> None:
    assert catalog.resolve_version(name, datetime.date(2026, 10, 1)) is None


def test_version_at_sunset_does_not_resolve() -> None:
    assert catalog.resolve_version("2025-09-15", datetime.date(2026, 9, 15)) is None


def test_version_past_sunset_does_not_resolve() -> None:
    assert catalog.resolve_version("2025-09-15", datetime.date(2026, 9, 16)) is None
    assert catalog.resolve_version("2026-03-01", datetime.date(2028, 1, 1)) is None


def test_retry_delays_match_the_spec_schedule() -> None:
    assert catalog.WEBHOOK_MAX_ATTEMPTS == len(SPEC_RETRY_DELAYS)
    assert len(catalog.WEBHOOK_RETRY_DELAYS) == catalog.WEBHOOK_MAX_ATTEMPTS
    for attempt, delay in SPEC_RETRY_DELAYS.items():
        assert catalog.WEBHOOK_RETRY_DELAYS[attempt - 1] == delay


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("AUTHORIZATION_REQUEST_TTL", 5 * 60),
        ("AUTHORIZATION_CODE_TTL", 10 * 60),
        ("ACCESS_TOKEN_TTL", 3600),
        ("REFRESH_TOKEN_TTL", 30 * 86400),
        ("DEVICE_CODE_TTL", 10 * 60),
        ("SESSION_TOKEN_TTL", 50),
        ("SESSION_TOKEN_SKEW", 30),
        ("REDIRECT_URIS_MIN", 1),
        ("REDIRECT_URIS_MAX", 5),
        ("URI_MAX_LENGTH", 512),
        ("BULK_IMPORT_MAX", 200),
        ("APP_DATA_RESOURCE_IDS_MAX", 50),
        ("APP_DATA_VALUES_MAX", 25),
        ("CHOICE_OPTIONS_MIN", 1),
        ("CHOICE_OPTIONS_MAX", 50),
        ("CHOICE_OPTION_MAX_LENGTH", 60),
        ("WEBHOOK_TIMEOUT", 10),
        ("DELIVERY_RETENTION", 30 * 86400),
        ("CLEANUP_INTERVAL", 3600),
        ("CONSOLE_DELIVERIES_SHOWN", 100),
        ("WEBHOOK_SECRET_OVERLAP", 24 * 3600),
        ("WEBHOOK_SIGNATURE_TOLERANCE", 300),
        ("EVENT_RETENTION", 30 * 86400),
        ("EVENTS_PAGE_DEFAULT", 50),
        ("EVENTS_PAGE_MAX", 100),
        ("IDEMPOTENCY_WINDOW", 24 * 3600),
        ("LOCKOUT_FAILURES", 10),
        ("LOCKOUT_WINDOW", 60),
        ("LOCKOUT_DURATION", 60),
        ("WEBHOOK_SECRET_PREFIX", "whsec_"),
    ],
)
def test_constant_matches_spec(name: str, value: object) -> None:
    assert getattr(catalog, name) == value


@pytest.mark.parametrize(
    ("rate_limit", "figures"),
    [
        pytest.param(rate_limit, figures, id=rate_limit.name)
        for rate_limit, figures in {**SPEC_RATE_LIMITS, **OWN_RATE_LIMITS}.items()
    ],
)
def test_rate_limit_matches_spec(
    rate_limit: catalog.RateLimit, figures: tuple[int, int, str]
) -> None:
    assert (rate_limit.limit, rate_limit.window_seconds, rate_limit.key) == figures
    assert catalog.RATE_LIMITS[rate_limit.name] is rate_limit


def test_rate_limits_hold_exactly_the_spec_rows_and_the_documented_own_ones() -> None:
    expected = set(SPEC_RATE_LIMITS) | set(OWN_RATE_LIMITS)
    assert set(catalog.RATE_LIMITS.values()) == expected
    assert len(catalog.RATE_LIMITS) == len(expected)


def test_app_data_resource_types_map_to_their_area_read_scope() -> None:
    assert dict(catalog.APP_DATA_RESOURCE_SCOPES) == {
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
    assert catalog.APP_DATA_RESOURCE_TYPES == tuple(catalog.APP_DATA_RESOURCE_SCOPES)


def test_oauth_vocabulary() -> None:
    assert catalog.GRANT_TYPES == (
        "authorization_code",
        "refresh_token",
        "urn:ietf:params:oauth:grant-type:device_code",
        "urn:ietf:params:oauth:grant-type:token-exchange",
    )
    assert catalog.TOKEN_TYPE_ACCESS == "urn:ietf:params:oauth:token-type:access_token"
    assert set(catalog.SUBJECT_TOKEN_TYPES) == {
        "urn:ietf:params:oauth:token-type:jwt",
        "urn:ietf:params:oauth:token-type:id_token",
    }
    assert catalog.CODE_CHALLENGE_METHODS == ("S256", "plain")
    assert catalog.TOKEN_ENDPOINT_AUTH_METHODS == (
        "client_secret_basic",
        "client_secret_post",
        "none",
    )
    assert catalog.RESPONSE_TYPES == ("code",)
    assert catalog.TOKEN_TYPE_HINTS == ("access_token", "refresh_token")


def test_catalog_doc_lists_every_event_with_audience_and_scope() -> None:
    rows = re.findall(
        r"^\| `([a-z_.]+)` \| (\w+) \| (?:`([a-z:-]+)`|none) \|", CATALOG_DOC.read_text(), re.M
    )
    documented = {(name, audience, scope or None) for name, audience, scope in rows}
    assert documented == {(e.name, e.audience, e.scope) for e in catalog.EVENTS}


def test_catalog_doc_lists_every_rate_limit() -> None:
    rows = re.findall(r"^\| `([a-z-]+)` \| ([\d,]+) \|", CATALOG_DOC.read_text(), re.M)
    documented = {name: int(limit.replace(",", "")) for name, limit in rows}
    assert documented == {name: rl.limit for name, rl in catalog.RATE_LIMITS.items()}


def test_events_doc_is_the_catalog_rendered() -> None:
    from ledgerport.catalog import events_doc

    page = Path(__file__).resolve().parents[2] / "docs" / "events.md"
    assert page.read_text(encoding="utf-8") == events_doc.render(), (
        "regenerate: python -m ledgerport.catalog.events_doc > docs/events.md"
    )


def test_account_types_in_the_request_model_are_the_catalogs() -> None:
    import typing

    from ledgerport.http.api.ledger import AccountIn

    assert typing.get_args(AccountIn.model_fields["type"].annotation) == catalog.ACCOUNT_TYPES


def test_the_catalog_doc_lists_every_extension_target_with_its_scope() -> None:
    rows = re.findall(
        r"^\| `([a-z_.]+)` \| (record page|list actions|dashboard card) \|"
        r" (?:`([a-z:-]+)`|none) \|",
        CATALOG_DOC.read_text(),
        re.M,
    )
    places = {"record page": "details", "list actions": "list.action", "dashboard card": "card"}
    documented = {name: (places[place], scope or None) for name, place, scope in rows}
    assert documented == {
        target.name: (target.place, target.scope) for target in catalog.EXTENSION_TARGETS.values()
    }
    assert len(documented) == 15


def test_every_scope_and_permission_has_plain_words() -> None:
    assert set(catalog.SCOPE_DESCRIPTIONS) == set(catalog.SCOPES)
    assert set(catalog.PERMISSION_DESCRIPTIONS) == set(catalog.PERMISSIONS)
    for words in (*catalog.SCOPE_DESCRIPTIONS.values(), *catalog.PERMISSION_DESCRIPTIONS.values()):
        assert words[0].isupper()
        assert ":" not in words  # words, not scope names
