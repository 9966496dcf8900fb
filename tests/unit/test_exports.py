"""Each package's public face is pinned, and the layers import only downwards.

Like trio's own export tests: a package's ``__init__`` only re-exports from its private modules,
so its public names are a deliberate list. Adding or removing one changes this file too. The
layering rules are the ones ``docs/architecture.md`` draws; tests and benchmarks use public names
only (no private module is imported or patched).
"""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "ledgerport"

PUBLIC_NAMES: dict[str, set[str]] = {
    "ledgerport.access": {
        "NoBusinessToInstallIn",
        "AccessError",
        "BusinessNotOffered",
        "NoBusinessToConnect",
        "approve",
        "consent_businesses",
        "end_installation",
        "revoke_access",
        "uninstall",
    },
    "ledgerport.apps": {
        "ExtensionNotGranted",
        "check_extension_granted",
        "get_extension",
        "ExtensionNotFound",
        "ExtensionPathInvalid",
        "ExtensionScopeRequired",
        "Extension",
        "delete_extension",
        "extension_url",
        "list_extensions",
        "put_extension",
        "ClaimedRun",
        "RunEnded",
        "RunPlan",
        "claim_runs",
        "next_run_due_at",
        "purge_runs",
        "record_runs",
        "run_plan",
        "run_queue_depth",
        "FUNCTION_RUNS_CHANNEL",
        "CompiledModule",
        "FunctionNotFound",
        "FunctionRun",
        "FunctionSourceNoHandler",
        "HostedFunction",
        "RUN_STATUSES",
        "RunStatus",
        "compile_module",
        "delete_function",
        "function_source",
        "get_function",
        "list_functions",
        "put_function",
        "recent_runs",
        "APP_DATA_FIELD_TYPES",
        "APP_DATA_KEY_MAX_LENGTH",
        "APP_DATA_KEY_PATTERN",
        "APP_DATA_NAME_MAX_LENGTH",
        "APP_DATA_NUMBER_DECIMALS",
        "APP_DATA_NUMBER_DIGITS",
        "APP_DATA_TEXT_MAX_LENGTH",
        "APP_STATUSES",
        "APP_TYPES",
        "App",
        "AppCannotAccessType",
        "AppDataField",
        "AppDataFieldExists",
        "AppDataFieldNotFound",
        "AppDataFieldType",
        "AppDataForConnectedAppsOnly",
        "AppDataValue",
        "AppDataValueNotFound",
        "AppDataWrite",
        "AppHasNoAccess",
        "AppNotActive",
        "AppNotFound",
        "AppNotReviewed",
        "AppsError",
        "AttemptOutcome",
        "ClaimedDelivery",
        "DELIVERIES_CHANNEL",
        "DELIVERY_STATUSES",
        "Delivery",
        "DeliveryStatus",
        "ENTITLEMENTS_CHANNEL",
        "FanOut",
        "IdempotencyKeyReused",
        "InstallNotPermitted",
        "Installation",
        "InstallationNotFound",
        "InvalidAppDataValue",
        "InvalidChoices",
        "NotAMember",
        "Pending",
        "RedeliveryRefused",
        "Resolver",
        "ResourceIdsMissing",
        "ScopesNotRegistered",
        "SendPlan",
        "StoredAnswer",
        "TEST_BUSINESS_ID",
        "TooManyResourceIds",
        "UnknownAppDataField",
        "UnsupportedApiVersion",
        "Webhook",
        "WebhookNotFound",
        "active_installation",
        "address_allowed",
        "app_data_fields",
        "change_app_data_field",
        "claim_due",
        "claim_idempotency_key",
        "create_app",
        "create_test_delivery",
        "create_webhook",
        "declare_app_data_field",
        "delete_app_data_field",
        "delete_app_data_value",
        "delete_webhook",
        "dispatch_backlog",
        "end_installation_state",
        "delivery_id_for",
        "find_app_by_client_id",
        "get_app",
        "get_installation",
        "get_webhook",
        "install",
        "is_loopback_host",
        "list_webhooks",
        "next_due_at",
        "ordered_scopes",
        "pending_events",
        "plan_fan_out",
        "pin_version",
        "purge_deliveries",
        "purge_idempotency_keys",
        "queue_depth",
        "read_app_data",
        "recent_deliveries",
        "record_installation_event",
        "record_outcomes",
        "redeliver",
        "redirect_uri_problems",
        "release_claims",
        "renew_claims",
        "request_business_redaction",
        "resolve",
        "resolve_api_version",
        "rotate_webhook_secret",
        "send_plan",
        "send_plans",
        "write_fan_out",
        "set_app_reviewed",
        "set_app_status",
        "signing_secrets",
        "store_idempotent_answer",
        "update_webhook",
        "web_url_problem",
        "webhook_target_problem",
        "webhook_url_problem",
        "write_app_data",
    },
    "ledgerport.auth": {
        "mint_run_token",
        "AccessDenied",
        "AccessGrant",
        "AuthError",
        "AuthorizationPending",
        "AuthorizeParams",
        "AuthorizeProblem",
        "Budget",
        "ClientCredentials",
        "ConnectedAppsOnly",
        "DecryptionError",
        "DeviceAuthorization",
        "DeviceRequest",
        "EndpointNotExposed",
        "ExpiredToken",
        "InsufficientScope",
        "InvalidAccessToken",
        "InvalidAdminToken",
        "InvalidClient",
        "InvalidClientMetadata",
        "InvalidGrant",
        "InvalidRedirectUri",
        "InvalidRequest",
        "InvalidScope",
        "InvalidTarget",
        "Keyring",
        "LIMIT_BUCKETS",
        "Lockout",
        "LockoutRule",
        "MalformedAuthorizeRequest",
        "MemoryRateLimiter",
        "NoActiveInstallation",
        "NotSignedIn",
        "OAuthError",
        "Outcome",
        "PASSWORD_PROFILES",
        "PasswordProfile",
        "Passwords",
        "PermissionDenied",
        "PkceRequired",
        "RateLimited",
        "RateLimiter",
        "RedirectUriMismatch",
        "RedisRateLimiter",
        "RequestExpired",
        "SESSION_TOKEN_TYP",
        "SIGNING_ALGORITHM",
        "ScaledRateLimiter",
        "ScopesNotPermitted",
        "SessionToken",
        "SigningKey",
        "SlidingWindow",
        "SlowDown",
        "Standing",
        "StoreRateLimiter",
        "TargetRefused",
        "TokenPair",
        "UnknownClient",
        "UnsupportedGrantType",
        "Verdict",
        "admin_token_matches",
        "approve_device_request",
        "authenticate_client",
        "cancel_device_codes",
        "check_authorize_request",
        "check_call",
        "check_client_metadata",
        "check_embedded_access",
        "check_resource",
        "connect_redis_limiter",
        "deny_device_request",
        "developer_token_user",
        "end_installation_grants",
        "end_login_session",
        "exchange_session_token",
        "find_pending_device_request",
        "hold_request",
        "introspect",
        "issue_code",
        "issue_developer_token",
        "issue_session_token",
        "jwks",
        "login_session_user",
        "new_root_key",
        "new_token",
        "normalize_user_code",
        "parse_credentials",
        "poll_device_code",
        "published_keys",
        "purge_expired_device_codes",
        "purge_expired_grants",
        "purge_expired_login_sessions",
        "purge_expired_requests",
        "purge_expired_signing_keys",
        "purge_spent_session_tokens",
        "redeem_code",
        "register_client",
        "resolve_access_token",
        "revoke_family",
        "revoke_token",
        "rotate_refresh_token",
        "rotate_signing_keys",
        "start_device_authorization",
        "start_family",
        "start_login_session",
        "take_request",
    },
    "ledgerport.books": {
        "AccountCodeTaken",
        "BooksError",
        "Business",
        "BusinessNotFound",
        "Document",
        "EVENTS_CHANNEL",
        "EmailTaken",
        "Event",
        "EventNotFound",
        "FeedPage",
        "FeedView",
        "InvoiceCeilingReached",
        "Membership",
        "PartyKind",
        "RecordInWrongState",
        "RecordNotFound",
        "UnknownCursor",
        "UnknownEventType",
        "UnknownEventTypes",
        "User",
        "UserNotFound",
        "accept_quote",
        "amount",
        "archive_account",
        "bulk_import_invoices",
        "businesses_of_user",
        "convert_quote",
        "create_account",
        "create_business",
        "create_invoice",
        "create_party",
        "create_purchase",
        "create_purchase_return",
        "create_quote",
        "create_user",
        "decline_quote",
        "delete_account",
        "delete_invoice",
        "delete_party",
        "delete_payment",
        "delete_purchase",
        "delete_purchase_return",
        "delete_quote",
        "events_after",
        "feed_event",
        "feed_page",
        "feed_view",
        "find_user_by_email",
        "get_business",
        "get_membership",
        "get_record",
        "get_user",
        "list_records",
        "mark_overdue_invoices",
        "normalize_email",
        "pay_purchase",
        "post_journal_entry",
        "purge_expired_events",
        "receive_payment",
        "record_event",
        "record_exists",
        "redact_party",
        "refund_payment",
        "refund_purchase_return",
        "reverse_journal_entry",
        "role_permissions",
        "send_invoice",
        "send_quote",
        "set_membership",
        "set_role_permissions",
        "update_account",
        "update_invoice",
        "update_party",
        "update_payment",
        "update_purchase",
        "update_purchase_return",
        "update_quote",
        "void_invoice",
    },
    "ledgerport.catalog": {
        "PERMISSION_DESCRIPTIONS",
        "SCOPE_DESCRIPTIONS",
        "EXTENSION_LABEL_MAX_LENGTH",
        "EXTENSION_PATH_MAX_LENGTH",
        "EXTENSION_TARGETS",
        "ExtensionPlace",
        "ExtensionTarget",
        "CONSOLE_RUNS_SHOWN",
        "FUNCTIONS_PER_APP_MAX",
        "FUNCTION_NAME_PATTERN",
        "FUNCTION_SOURCE_MAX_BYTES",
        "ACCESS_TOKEN_PREFIX",
        "ACCESS_TOKEN_TTL",
        "ACCOUNT_TYPES",
        "ADMIN_TOKEN_PREFIX",
        "API_ERROR_CODES",
        "API_VERSIONS",
        "API_VERSION_SUPPORT_MONTHS",
        "APP_DATA_RESOURCE_IDS_MAX",
        "APP_DATA_RESOURCE_SCOPES",
        "APP_DATA_RESOURCE_TYPES",
        "APP_DATA_VALUES_MAX",
        "AREAS",
        "AUTHORIZATION_CODE_TTL",
        "AUTHORIZATION_REQUEST_PREFIX",
        "AUTHORIZATION_REQUEST_TTL",
        "ApiVersion",
        "Audience",
        "BULK_IMPORT_MAX",
        "CHOICE_OPTIONS_MAX",
        "CHOICE_OPTIONS_MIN",
        "CHOICE_OPTION_MAX_LENGTH",
        "CLEANUP_INTERVAL",
        "CLIENT_NAME_MAX_LENGTH",
        "CLIENT_SECRET_PREFIX",
        "CODE_CHALLENGE_METHODS",
        "CODE_PREFIX",
        "CONSENT_INVALID_CLIENT",
        "CONSENT_INVALID_TARGET",
        "CONSENT_MESSAGES",
        "CONSENT_NOT_REVIEWED",
        "CONSENT_PKCE_REQUIRED",
        "CONSENT_REDIRECT_MISMATCH",
        "CONSENT_REQUEST_EXPIRED",
        "CONSENT_SCOPES_NOT_PERMITTED",
        "CONSOLE_DELIVERIES_SHOWN",
        "CONSOLE_ERROR_CODES",
        "CONTACT_MAX_LENGTH",
        "CURRENT_API_VERSION",
        "DEFAULT_CURRENCY",
        "DEFAULT_TEST_EVENT",
        "DELIVERY_RETENTION",
        "DEVELOPER_TOKEN_PREFIX",
        "DEVICE_CODE_PREFIX",
        "DEVICE_CODE_TTL",
        "DEVICE_POLL_INTERVAL",
        "DEVICE_SLOW_DOWN_STEP",
        "ERROR_CODES",
        "EVENTS",
        "EVENTS_PAGE_DEFAULT",
        "EVENTS_PAGE_MAX",
        "EVENT_NAMES",
        "EVENT_RETENTION",
        "EXPIRED_ROW_GRACE",
        "ErrorCode",
        "EventType",
        "FREE_PLAN_YEARLY_INVOICES",
        "FREE_PLAN_YEARLY_TURNOVER",
        "GRANT_AUTHORIZATION_CODE",
        "GRANT_CODE_USED",
        "GRANT_DEVICE_CODE",
        "GRANT_EXPIRED",
        "GRANT_PKCE_FAILED",
        "GRANT_REDIRECT_MISMATCH",
        "GRANT_REFRESH_REUSE",
        "GRANT_REFRESH_TOKEN",
        "GRANT_REVOKED",
        "GRANT_TOKEN_EXCHANGE",
        "GRANT_TYPES",
        "IDEMPOTENCY_WINDOW",
        "INTERNAL_AREAS",
        "INVALID_GRANT_DESCRIPTIONS",
        "JWKS_MAX_AGE",
        "LOCKOUT_DURATION",
        "LOCKOUT_FAILURES",
        "LOCKOUT_WINDOW",
        "LOGIN_SESSION_PREFIX",
        "LOGIN_SESSION_TTL",
        "NUMBER_DIGITS",
        "OAUTH_ERRORS",
        "OAUTH_JSON_MAX_BYTES",
        "OAuthErrorCode",
        "PERMISSIONS",
        "PERMISSION_ACCOUNTS_WRITE",
        "PERMISSION_APPS_INSTALL",
        "PERMISSION_JOURNAL_POST",
        "PERMISSION_PAYMENTS_DELETE",
        "RATE_LIMITS",
        "RATE_LIMIT_API_PER_IP",
        "RATE_LIMIT_APP",
        "RATE_LIMIT_APP_PER_BUSINESS",
        "RATE_LIMIT_DEVICE_UNAUTHENTICATED_PER_IP",
        "RATE_LIMIT_INTROSPECT_UNAUTHENTICATED_PER_IP",
        "RATE_LIMIT_OAUTH_CLIENT_WITHOUT_SECRET",
        "RATE_LIMIT_OAUTH_CLIENT_WITH_SECRET",
        "RATE_LIMIT_OAUTH_IP_CEILING",
        "RATE_LIMIT_REGISTER_PER_IP",
        "RATE_LIMIT_REVOKE_UNAUTHENTICATED_PER_IP",
        "RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT",
        "RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP",
        "RATE_LIMIT_USER_CODE_PER_IP",
        "RATE_LIMIT_USER_CODE_PER_USER",
        "RECORD_KINDS",
        "REDIRECT_URIS_MAX",
        "REDIRECT_URIS_MIN",
        "REFRESH_TOKEN_PREFIX",
        "REFRESH_TOKEN_TTL",
        "REGISTRATION_CONTACTS_MAX",
        "REQUEST_BODY_MAX_BYTES",
        "RESPONSE_TYPES",
        "ROLES",
        "ROLE_DEFAULTS",
        "RateLimit",
        "RateLimitKey",
        "RecordKind",
        "SCOPES",
        "SENSITIVE_PERMISSIONS",
        "SERVICE_ERROR_CODES",
        "SESSION_TOKEN_SKEW",
        "SESSION_TOKEN_TTL",
        "SIGNING_KEY_PERIOD",
        "SIGNING_KEY_PREPUBLISH",
        "SIGNING_KEY_RETIRED_GRACE",
        "SUBJECT_TOKEN_TYPES",
        "TEST_DELIVERY_DEFAULT_EVENT",
        "TOKEN_ENDPOINT_AUTH_METHODS",
        "TOKEN_PREFIXES",
        "TOKEN_TYPE_ACCESS",
        "TOKEN_TYPE_HINTS",
        "TOKEN_TYPE_ID_TOKEN",
        "TOKEN_TYPE_JWT",
        "URI_MAX_LENGTH",
        "USER_CODE_ALPHABET",
        "USER_CODE_LENGTH",
        "WEBHOOKS_PER_APP_MAX",
        "WEBHOOK_MAX_ATTEMPTS",
        "WEBHOOK_RETRY_DELAYS",
        "WEBHOOK_SECRET_OVERLAP",
        "WEBHOOK_SECRET_PREFIX",
        "WEBHOOK_SIGNATURE_TOLERANCE",
        "WEBHOOK_TIMEOUT",
        "event_type",
        "is_scope",
        "resolve_version",
    },
    "ledgerport.engine": {
        "FunctionRunner",
        "DeliveryEngine",
        "Scheduler",
        "next_attempt_at",
        "signature",
        "signature_header",
        "verify_header",
    },
    "ledgerport.http": {
        "in_process_api",
        "ANSWERS",
        "AccessLog",
        "Answer",
        "ConnectionGuard",
        "RequestTracker",
        "answer_for",
        "create_app",
        "use_platform",
    },
    "ledgerport.ops": {
        "HTTP_METHODS",
        "Metrics",
        "OTHER",
        "RedactingFilter",
        "closed_label",
        "configure_logging",
        "escape_controls",
        "loggable",
        "redact",
    },
    "ledgerport.storage": {
        "BadValue",
        "Conflict",
        "Migration",
        "MigrationError",
        "NoAsyncioLoop",
        "PostgresStore",
        "Row",
        "SqliteStore",
        "StorageError",
        "StorageUnavailable",
        "Store",
        "Transaction",
        "load_migrations",
        "open_postgres",
        "open_sqlite",
        "open_store",
        "placeholders",
    },
    "ledgerport.runtime": {
        "MAX_FRAME",
        "FrameError",
        "FrameReader",
        "decode_frame",
        "encode_frame",
        "RunLimits",
        "RunOutcome",
        "RunRequest",
        "SandboxPool",
        "WorkerStartFailed",
        "no_api",
    },
}

# Names a package re-exports from a module below it, on purpose.
RE_EXPORTS = {
    "ledgerport.auth": {"DecryptionError", "Keyring", "new_root_key", "new_token"},
}

# Layers from the bottom up: a module may import its own layer's modules and lower ones only.
LAYERS: list[set[str]] = [
    {"catalog", "errors", "clock", "ids", "keys", "ops", "runtime"},
    {"config"},
    {"storage"},
    {"books"},
    {"apps"},
    {"auth"},
    {"access"},
    {"platform"},
    {"engine", "http"},
    {"serve"},
    {"cli", "__main__"},
]
# Siblings of one layer that must not import each other.
APART = [("engine", "http")]


def _public(module: types.ModuleType) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }


@pytest.mark.parametrize("package", sorted(PUBLIC_NAMES))
def test_public_names_are_pinned(package: str) -> None:
    assert _public(importlib.import_module(package)) == PUBLIC_NAMES[package]


@pytest.mark.parametrize("package", sorted(PUBLIC_NAMES))
def test_public_names_come_from_the_package_itself(package: str) -> None:
    module = importlib.import_module(package)
    foreign = {
        name
        for name in _public(module)
        if (home := getattr(getattr(module, name), "__module__", None)) is not None
        and not home.startswith(package)
        and home not in ("builtins", "typing")
    }
    assert foreign == RE_EXPORTS.get(package, set())


def _layer(part: str) -> int:
    for index, layer in enumerate(LAYERS):
        if part in layer:
            return index
    raise AssertionError(f"ledgerport.{part} has no layer: add it to LAYERS")


def _ledgerport_imports(path: Path) -> set[str]:
    """First-level ledgerport packages or modules a file imports (relative imports stay home)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "ledgerport":
                names = [f"ledgerport.{alias.name}" for alias in node.names]
        found |= {
            name.split(".")[1]
            for name in names
            if name.startswith("ledgerport.") and not name.startswith("ledgerport.__")
        }
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path) -> None:
    relative = path.relative_to(PACKAGE)
    home = relative.parts[0].removesuffix(".py")
    if home == "__init__":
        return
    upward = {part for part in _ledgerport_imports(path) if _layer(part) > _layer(home)}
    assert not upward, f"{relative} imports a layer above it: {sorted(upward)}"
    for one, other in APART:
        if home == one:
            assert other not in _ledgerport_imports(path)
        if home == other:
            assert one not in _ledgerport_imports(path)


def test_every_package_has_a_layer() -> None:
    homes = {path.relative_to(PACKAGE).parts[0].removesuffix(".py") for path in SOURCES}
    for home in homes - {"__init__"}:
        _layer(home)


PRIVATE_REFERENCE = re.compile(r"ledgerport(?:\.[a-z_]+)*\._[a-z]\w*")


@pytest.mark.parametrize(
    "path",
    sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_tests_and_benchmarks_use_public_names_only(path: Path) -> None:
    """No private module is imported from or patched by name (``ledgerport.x._y``)."""
    text = path.read_text(encoding="utf-8")
    if path.name == "test_exports.py":
        text = text.split("PRIVATE_REFERENCE =", 1)[0]
    assert not PRIVATE_REFERENCE.findall(text)
    tree = ast.parse(text)
    private_from = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("ledgerport")
        and any(alias.name.startswith("_") for alias in node.names)
    ]
    assert not private_from
