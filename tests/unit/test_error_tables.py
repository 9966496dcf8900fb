"""The error tables: the catalog against the spec's rows, and the HTTP mapping against both.

Every domain exception has a row of its own in ``http/_errors.ANSWERS``; envelope codes come from
the catalog with the catalog's status, OAuth errors likewise.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import access, apps, auth, books, catalog, queues, storage
from ledgerport.errors import DomainError, InvalidInput
from ledgerport.http import ANSWERS, Answer, answer_for
from ledgerport.ops import redact

CATALOG_DOC = Path(__file__).resolve().parents[2] / "docs" / "catalog.md"

# partner-api.md, Errors: API error codes (standard envelope).
SPEC_API_CODES = {
    "APP_RATE_LIMITED": 429,
    "UNSUPPORTED_API_VERSION": 400,
    "UNKNOWN_APP_DATA_FIELD": 400,
    "INVALID_APP_DATA_VALUE": 400,
    "PROVIDE_RESOURCEID_RESOURCEIDS": 400,
    "RESOURCEIDS_ACCEPTS_MOST_50_IDS": 400,
    "APP_CANNOT_ACCESS_TYPE_RECORD": 403,
    "APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY": 403,
    "RECORD_NOT_FOUND": 404,
    "APP_DATA_VALUE_NOT_FOUND": 404,
    "UNKNOWN_CURSOR": 400,
    "UNKNOWN_EVENT_TYPE_TYPES": 400,
    "EVENT_LOG_AVAILABLE_CONNECTED_APPS_ONLY": 403,
    "EVENT_NOT_FOUND": 404,
}

# partner-api.md, Errors: Developer console codes.
SPEC_CONSOLE_CODES = {
    "LISTING_EXISTS": 409,
    "SLUG_TAKEN": 400,
    "ASSET_IN_USE": 400,
    "EXTENSION_SCOPE_REQUIRED": 400,
    "EXTENSION_PATH_INVALID": 400,
    "INVALID_CHOICES": 400,
    "FUNCTION_SOURCE_NO_HANDLER": 400,
}

# partner-api.md, Errors: OAuth endpoint errors and the token endpoint's causes.
SPEC_OAUTH_ERRORS = {
    "invalid_request": 400,
    "invalid_client": 401,
    "invalid_grant": 400,
    "unsupported_grant_type": 400,
    "invalid_scope": 400,
    "invalid_target": 400,
    "authorization_pending": 400,
    "slow_down": 400,
    "access_denied": 400,
    "expired_token": 400,
    "invalid_redirect_uri": 400,
    "invalid_client_metadata": 400,
    "temporarily_unavailable": 429,
    "server_error": 500,
}
# Beyond the specification: RFC 7592's refusal of a registration access token at a client's
# configuration address (contract.md: Agents as partner apps).
BEYOND_SPEC_OAUTH_ERRORS = {
    "invalid_token": 401,
    # RFC 9449 (contract.md: Agents as partner apps, DPoP)
    "invalid_dpop_proof": 400,
    "use_dpop_nonce": 400,
}

# partner-api.md, Errors: invalid_grant's error_description values (besides "absent").
SPEC_GRANT_DESCRIPTIONS = (
    "code already used",
    "expired",
    "redirect_uri mismatch",
    "PKCE verification failed",
    "revoked",
    "refresh token reuse detected",
)

# partner-api.md, Errors: Consent page messages, in the spec's order.
SPEC_CONSENT_MESSAGES = (
    "Invalid client_id",
    "redirect_uri does not match any registered URI",
    "Requested scopes not permitted for this client",
    "PKCE is required for public clients",
    "invalid_target",
    "app has not completed review",
    "invalid_request: authorization request not found or expired",
)

# Each OAuth error class and the RFC error value it is answered with.
OAUTH_CLASSES = {
    auth.InvalidRequest: "invalid_request",
    auth.InvalidClient: "invalid_client",
    auth.InvalidGrant: "invalid_grant",
    auth.UnsupportedGrantType: "unsupported_grant_type",
    auth.InvalidScope: "invalid_scope",
    auth.InvalidTarget: "invalid_target",
    auth.AuthorizationPending: "authorization_pending",
    auth.SlowDown: "slow_down",
    auth.AccessDenied: "access_denied",
    auth.ExpiredToken: "expired_token",
    auth.InvalidRedirectUri: "invalid_redirect_uri",
    auth.InvalidClientMetadata: "invalid_client_metadata",
    auth.InvalidRegistrationToken: "invalid_token",
    auth.InvalidDpopProof: "invalid_dpop_proof",
    auth.UseDpopNonce: "use_dpop_nonce",
}


def _subclasses(root: type) -> list[type]:
    found = []
    for cls in root.__subclasses__():
        found += [cls, *_subclasses(cls)]
    return found


# Roots with a row that answers for subclasses the HTTP layer never sees alone.
GROUPED_ROOTS = (auth.OAuthError, auth.AuthorizeProblem)
DOMAIN_ROOTS = (
    books.BooksError,
    apps.AppsError,
    queues.QueuesError,
    auth.AuthError,
    access.AccessError,
)


@pytest.mark.parametrize(("code", "status"), SPEC_API_CODES.items())
def test_api_error_code_matches_spec(code: str, status: int) -> None:
    assert catalog.API_ERROR_CODES[code].status == status


@pytest.mark.parametrize(("code", "status"), SPEC_CONSOLE_CODES.items())
def test_console_error_code_matches_spec(code: str, status: int) -> None:
    assert catalog.CONSOLE_ERROR_CODES[code].status == status


def test_spec_code_tables_hold_exactly_the_spec_rows() -> None:
    assert set(catalog.API_ERROR_CODES) == set(SPEC_API_CODES)
    assert set(catalog.CONSOLE_ERROR_CODES) == set(SPEC_CONSOLE_CODES)


def test_error_code_names_are_unique_across_the_tables() -> None:
    tables = (catalog.API_ERROR_CODES, catalog.CONSOLE_ERROR_CODES, catalog.SERVICE_ERROR_CODES)
    assert len(catalog.ERROR_CODES) == sum(len(table) for table in tables)


@pytest.mark.parametrize("code", sorted(catalog.ERROR_CODES))
def test_error_code_is_upper_snake_with_an_error_status(code: str) -> None:
    entry = catalog.ERROR_CODES[code]
    assert re.fullmatch(r"[A-Z][A-Z0-9_]+", code)
    assert 400 <= entry.status <= 599
    assert entry.cause


@pytest.mark.parametrize(("error", "status"), SPEC_OAUTH_ERRORS.items())
def test_oauth_error_matches_spec(error: str, status: int) -> None:
    assert catalog.OAUTH_ERRORS[error].status == status


def test_oauth_errors_hold_exactly_the_spec_codes_and_the_contracts() -> None:
    assert set(catalog.OAUTH_ERRORS) == set(SPEC_OAUTH_ERRORS) | set(BEYOND_SPEC_OAUTH_ERRORS)
    for error, status in BEYOND_SPEC_OAUTH_ERRORS.items():
        assert catalog.OAUTH_ERRORS[error].status == status


def test_invalid_grant_descriptions_are_the_spec_ones() -> None:
    assert catalog.INVALID_GRANT_DESCRIPTIONS == SPEC_GRANT_DESCRIPTIONS


def test_consent_messages_are_the_spec_ones() -> None:
    assert catalog.CONSENT_MESSAGES == SPEC_CONSENT_MESSAGES


@pytest.mark.parametrize(("kind", "prefix"), catalog.TOKEN_PREFIXES.items())
def test_every_token_prefix_is_redacted_from_logs(kind: str, prefix: str) -> None:
    secret = prefix + "Zq8vLx3TnRw5Yp2Ks7HdJ4Gm"
    assert secret not in redact(f"{kind}: {secret} leaked")


def test_token_prefixes_are_distinct_and_none_prefixes_another() -> None:
    prefixes = list(catalog.TOKEN_PREFIXES.values())
    assert len(set(prefixes)) == len(prefixes)
    assert not [a for a in prefixes for b in prefixes if a != b and b.startswith(a)]


@pytest.mark.parametrize(
    "cls",
    [
        cls
        for root in DOMAIN_ROOTS
        for cls in _subclasses(root)
        if not any(issubclass(cls, grouped) and cls is not grouped for grouped in GROUPED_ROOTS)
    ],
    ids=lambda cls: cls.__qualname__,
)
def test_every_domain_error_has_its_own_row(cls: type) -> None:
    assert cls in ANSWERS


@pytest.mark.parametrize("root", DOMAIN_ROOTS)
def test_domain_roots_are_domain_errors_without_a_status(root: type) -> None:
    assert issubclass(root, DomainError)
    assert not [cls for cls in (root, *_subclasses(root)) if "status" in vars(cls)]


@pytest.mark.parametrize(("cls", "error"), OAUTH_CLASSES.items(), ids=lambda v: str(v))
def test_oauth_class_answers_its_error_at_the_catalog_status(
    cls: type[auth.OAuthError], error: str
) -> None:
    instance = cls("why", basic=False) if cls is auth.InvalidClient else cls("why")  # type: ignore[call-arg]
    answer = answer_for(instance)
    assert (answer.oauth, answer.status) == (error, catalog.OAUTH_ERRORS[error].status)


def test_every_oauth_error_class_is_listed_here() -> None:
    assert set(_subclasses(auth.OAuthError)) == set(OAUTH_CLASSES)


@pytest.mark.parametrize(
    ("cls", "answer"),
    [(cls, rule) for cls, rule in ANSWERS.items() if isinstance(rule, Answer) and rule.code],
    ids=lambda value: getattr(value, "__qualname__", ""),
)
def test_coded_rows_answer_the_catalog_status(cls: type, answer: Answer) -> None:
    assert answer.code is not None
    assert answer.status == catalog.ERROR_CODES[answer.code].status


@pytest.mark.parametrize(
    ("error", "status", "code", "oauth"),
    [
        (InvalidInput(["a is wrong"]), 400, None, "invalid_request"),
        (books.BusinessNotFound("bus_1"), 404, "BUSINESS_NOT_FOUND", "invalid_request"),
        (apps.AppHasNoAccess("app_1", "bus_1"), 404, "INSTALLATION_NOT_FOUND", "invalid_request"),
        (access.BusinessNotOffered(), 403, None, "invalid_request"),
        (auth.RateLimited(7), 429, "APP_RATE_LIMITED", "temporarily_unavailable"),
        (auth.UnknownClient(), 400, None, "invalid_request"),
        (storage.Conflict("unique"), 409, "CONFLICT", "invalid_request"),
        (storage.BadValue("out of range"), 400, None, "invalid_request"),
        (storage.StorageUnavailable("down"), 503, "SERVICE_UNAVAILABLE", "server_error"),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogate"), 400, None, "invalid_request"),
        (RequestEntityTooLarge(), 413, None, "invalid_request"),
        (KeyError("bug"), 500, "INTERNAL_ERROR", "server_error"),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, BaseException) else str(value),
)
def test_answer_for_representative_exceptions(
    error: BaseException, status: int, code: str | None, oauth: str
) -> None:
    answer = answer_for(error)
    assert (answer.status, answer.code, answer.oauth) == (status, code, oauth)


def test_a_refused_dpop_call_is_challenged_with_dpop_and_the_nonce_to_use() -> None:
    error = auth.DpopRefused("Use the nonce", error="use_dpop_nonce", nonce="n-1")
    headers = answer_for(error).header_values(error)
    assert answer_for(error).status == 401
    assert headers["DPoP-Nonce"] == "n-1"
    assert headers["WWW-Authenticate"].startswith('DPoP error="use_dpop_nonce"')
    assert 'algs="ES256 RS256 EdDSA"' in headers["WWW-Authenticate"]


def test_rate_limited_carries_retry_after() -> None:
    error = auth.RateLimited(7)
    assert answer_for(error).header_values(error) == {"Retry-After": "7"}


@pytest.mark.parametrize(("basic", "challenged"), [(True, True), (False, False)])
def test_invalid_client_challenges_basic_only_when_basic_was_used(
    basic: bool, challenged: bool
) -> None:
    error = auth.InvalidClient("wrong secret", basic=basic)
    headers = answer_for(error).header_values(error)
    assert ("WWW-Authenticate" in headers) is challenged


@pytest.mark.parametrize("code", sorted(catalog.ERROR_CODES))
def test_catalog_doc_lists_every_error_code(code: str) -> None:
    assert f"`{code}`" in CATALOG_DOC.read_text(encoding="utf-8")
