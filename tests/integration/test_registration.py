"""Open dynamic client registration (RFC 7591) at POST /oauth/register.

Spec: Resources > Client record, Endpoints > OAuth and discovery (/oauth/register), Errors > OAuth
endpoint errors (Other OAuth endpoints), Authentication > Token exchange and Calling the API;
contract.md: open dynamic registration creates an unreviewed app (sandbox businesses only).
"""

from __future__ import annotations

import html
import json
import re
import secrets
from typing import Any
from urllib.parse import urlencode

import pytest

from ledgerport import catalog
from ledgerport.apps import find_app_by_client_id
from ledgerport.platform import Platform

from .oauth_helpers import (
    REDIRECT_URI,
    World,
    assert_oauth_error,
    authorize,
    basic,
    device_authorize,
    device_decide,
    exchange,
    login,
    pkce_pair,
    poll,
    token_request,
)

REGISTER = "/oauth/register"
NOT_REVIEWED = "app has not completed review"
PKCE_REQUIRED = "PKCE is required for public clients"
JSON_MAX_BYTES = 64 * 1024
OTHER_IP = {"client": ("203.0.113.7", 40000)}
DEFAULT_GRANTS = ["authorization_code", "refresh_token"]
TOKEN_EXCHANGE = catalog.GRANT_TOKEN_EXCHANGE
DEVICE_CODE = catalog.GRANT_DEVICE_CODE
ALL_GRANTS = [*DEFAULT_GRANTS, DEVICE_CODE, TOKEN_EXCHANGE]

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
"""For refusals decided before anything is stored, and for the in-memory rate limit: the
backend cannot change the answer, so these run on SQLite only to keep the module quick. Whatever
writes (registrations, NUL and surrogate strings, the flows) runs on both backends."""


def https_uri(length: int) -> str:
    """An acceptable https redirect URI of exactly ``length`` characters."""
    head = "https://app.example.com/"
    return head + "a" * (length - len(head))


def metadata(**fields: Any) -> dict[str, Any]:
    return {"redirect_uris": [REDIRECT_URI], **fields}


async def register(client: Any, body: dict[str, Any], **kwargs: Any) -> Any:
    return await client.post(REGISTER, json=body, **kwargs)


async def registered(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    response = await register(client, body)
    answer: dict[str, Any] = await response.get_json()
    assert response.status_code == 201, answer
    return answer


async def app_count(platform: Platform) -> int:
    async with platform.store.transaction() as tx:
        return int(await tx.fetchval("SELECT COUNT(*) FROM apps"))


# --- the world a registered client connects to ---------------------------------------------------


async def member_of(
    client: Any, admin_headers: dict[str, str], *, sandbox: bool, role: str = "owner"
) -> tuple[str, str, str, str]:
    """A new business and a member with ``role``: answers (business, user, email, password)."""
    business = await client.post(
        "/admin/businesses",
        json={"name": "Sandbox Co" if sandbox else "Real Co", "sandbox": sandbox},
        headers=admin_headers,
    )
    assert business.status_code == 201, await business.get_data(as_text=True)
    business_id = (await business.get_json())["id"]
    email, password = f"{secrets.token_hex(4)}@example.com", "correct horse battery"
    user = await client.post(
        "/admin/users", json={"email": email, "password": password}, headers=admin_headers
    )
    assert user.status_code == 201, await user.get_data(as_text=True)
    user_id = (await user.get_json())["id"]
    member = await client.put(
        f"/admin/businesses/{business_id}/members/{user_id}",
        json={"role": role},
        headers=admin_headers,
    )
    assert member.status_code == 200, await member.get_data(as_text=True)
    return business_id, user_id, email, password


async def registered_world(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    *,
    sandbox: bool = True,
    **fields: Any,
) -> World:
    """A client registered at /oauth/register and a member of a fresh business."""
    answer = await registered(client, metadata(scope="invoices:read", **fields))
    async with platform.store.transaction() as tx:
        app = await find_app_by_client_id(tx, answer["client_id"])
    assert app is not None
    business_id, user_id, email, password = await member_of(client, admin_headers, sandbox=sandbox)
    return World(
        business_id,
        user_id,
        email,
        password,
        app.id,
        answer["client_id"],
        answer.get("client_secret"),
    )


async def code_grant(client: Any, world: World) -> dict[str, Any]:
    """Sign in, approve with PKCE S256 and redeem the code; answers the token response."""
    verifier, challenge = pkce_pair()
    await login(client, world)
    callback = await authorize(client, world, challenge=challenge)
    response = await token_request(
        client,
        world,
        {
            "grant_type": "authorization_code",
            "code": callback["code"][0],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
        },
    )
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == 200, body
    return body


async def managed_install(client: Any, admin_headers: dict[str, str], world: World) -> None:
    response = await client.post(
        "/admin/installations",
        json={
            "appId": world.app_id,
            "businessId": world.business_id,
            "userId": world.user_id,
            "scopes": ["invoices:read"],
        },
        headers=admin_headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)


async def session_token_of(client: Any, admin_headers: dict[str, str], world: World) -> str:
    response = await client.post(
        "/admin/session-tokens",
        json={"appId": world.app_id, "businessId": world.business_id, "userId": world.user_id},
        headers=admin_headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    token: str = (await response.get_json())["sessionToken"]
    return token


async def exchange_grant(client: Any, admin_headers: dict[str, str], world: World) -> Any:
    await managed_install(client, admin_headers, world)
    subject = await session_token_of(client, admin_headers, world)
    return await exchange(client, world, subject)


async def device_grant(client: Any, world: World) -> Any:
    started = await device_authorize(client, world)
    authorization = await started.get_json()
    assert started.status_code == 200, authorization
    await login(client, world)
    decided = await device_decide(client, world, authorization["user_code"])
    assert decided.status_code == 200, await decided.get_data(as_text=True)
    return await poll(client, world, authorization["device_code"])


def consent_url(world: World, **extra: str) -> str:
    query = {
        "response_type": "code",
        "client_id": world.client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": "invoices:read",
        "state": "st4te",
        **extra,
    }
    return "/oauth/authorize?" + urlencode(query)


async def problem_message(response: Any) -> str:
    """The page's alert text; the response must be a page, never a redirect."""
    page = await response.get_data(as_text=True)
    assert not 300 <= response.status_code < 400, response.headers.get("Location")
    assert 'name="decision"' not in page
    # A message the specification fixes is the detail below the plain words; another is the
    # alert itself.
    match = re.search(r'class="problem-code">(.*?)</code>', page, re.S) or re.search(
        r'role="alert">(.*?)</p>', page, re.S
    )
    assert match is not None, page
    return html.unescape(match[1]).strip()


# --- success -------------------------------------------------------------------------------------


async def test_confidential_registration_answers_201_with_a_secret(client, clock) -> None:
    response = await register(client, metadata(client_name="Pocket Books"))

    assert response.status_code == 201
    body = await response.get_json()
    assert isinstance(body["client_id"], str)
    assert body["client_id"]
    assert body["client_id_issued_at"] == int(clock.now())
    assert isinstance(body["client_secret"], str)
    assert len(body["client_secret"]) >= 32
    assert body["client_secret_expires_at"] == 0


DEFAULTS = {
    "redirect_uris": [REDIRECT_URI],
    "client_name": "Unnamed app",
    "token_endpoint_auth_method": "client_secret_basic",
    "grant_types": DEFAULT_GRANTS,
    "response_types": ["code"],
    "scope": "profile:read",
}


async def test_omitted_metadata_is_answered_with_its_default(client) -> None:
    body = await registered(client, metadata())

    assert {field: body.get(field) for field in DEFAULTS} == DEFAULTS


GIVEN = {
    "redirect_uris": [REDIRECT_URI, "http://127.0.0.1:8765/cb"],
    "client_name": "Pocket Books",
    "token_endpoint_auth_method": "client_secret_post",
    "grant_types": ALL_GRANTS,
    "response_types": ["code"],
    "scope": "customers:read invoices:read",
    "logo_uri": "https://app.example.com/logo.png",
    "client_uri": "https://app.example.com/",
    "tos_uri": "https://app.example.com/terms",
    "policy_uri": "https://app.example.com/privacy",
    "contacts": ["dev@example.com"],
}


async def test_given_metadata_is_echoed(client) -> None:
    body = await registered(client, GIVEN)

    assert {field: body.get(field) for field in GIVEN} == GIVEN


async def test_unknown_metadata_is_ignored(client) -> None:
    body = await registered(client, metadata(software_id="pocket-books", x_flavour={"a": 1}))

    assert "software_id" not in body
    assert "x_flavour" not in body


async def test_auth_method_none_registers_a_public_client_without_secret(client) -> None:
    body = await registered(client, metadata(token_endpoint_auth_method="none"))

    assert body["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in body
    assert "client_secret_expires_at" not in body


@pytest.mark.parametrize(
    ("method", "app_type"),
    [
        (None, "CONFIDENTIAL"),
        ("client_secret_basic", "CONFIDENTIAL"),
        ("client_secret_post", "CONFIDENTIAL"),
        ("none", "PUBLIC"),
    ],
)
async def test_registered_client_is_an_unreviewed_app_of_the_right_type(
    client, platform: Platform, method: str | None, app_type: str
) -> None:
    fields = {} if method is None else {"token_endpoint_auth_method": method}
    body = await registered(client, metadata(**fields))

    async with platform.store.transaction() as tx:
        app = await find_app_by_client_id(tx, body["client_id"])
    assert app is not None
    assert (app.type, app.reviewed, app.developer_user_id) == (app_type, False, None)


async def test_registration_answer_is_not_cached(client) -> None:
    response = await register(client, metadata())

    assert response.status_code == 201
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Pragma"] == "no-cache"


async def test_each_registration_is_a_new_client(client) -> None:
    first = await registered(client, metadata())
    second = await registered(client, metadata())

    assert first["client_id"] != second["client_id"]
    assert first["client_secret"] != second["client_secret"]


@pytest.mark.parametrize(("secret", "status"), [("right", 200), ("wrong", 401)])
async def test_issued_secret_authenticates_the_client(client, secret: str, status: int) -> None:
    body = await registered(client, metadata())
    presented = body["client_secret"] if secret == "right" else body["client_secret"] + "x"

    response = await client.post(
        "/oauth/introspect",
        form={"token": "lp_at_unknown"},
        headers=basic(body["client_id"], presented),
    )

    assert response.status_code == status


async def test_discovery_names_the_registration_endpoint(client) -> None:
    response = await client.get("/.well-known/oauth-authorization-server")

    meta = await response.get_json()
    assert meta["registration_endpoint"] == f"{meta['issuer']}/oauth/register"


# --- invalid_redirect_uri ------------------------------------------------------------------------


@SQLITE_ONLY
@pytest.mark.parametrize(
    "body",
    [
        pytest.param({}, id="missing"),
        pytest.param({"redirect_uris": None}, id="null"),
        pytest.param({"redirect_uris": REDIRECT_URI}, id="string-not-list"),
        pytest.param({"redirect_uris": {"0": REDIRECT_URI}}, id="object-not-list"),
        pytest.param({"redirect_uris": []}, id="empty-list"),
        pytest.param(
            {"redirect_uris": [f"https://app.example.com/cb{i}" for i in range(6)]}, id="six-uris"
        ),
        pytest.param({"redirect_uris": [https_uri(catalog.URI_MAX_LENGTH + 1)]}, id="513-chars"),
        pytest.param({"redirect_uris": ["http://app.example.com/cb"]}, id="http-not-loopback"),
        pytest.param({"redirect_uris": ["http://10.0.0.1/cb"]}, id="http-private-address"),
        pytest.param({"redirect_uris": ["https://*.example.com/cb"]}, id="wildcard-host"),
        pytest.param({"redirect_uris": ["https://app.example.com/*"]}, id="wildcard-path"),
        pytest.param({"redirect_uris": ["https://app.example.com/cb?x=1"]}, id="query"),
        pytest.param({"redirect_uris": ["https://app.example.com/cb?"]}, id="empty-query"),
        pytest.param({"redirect_uris": ["https://app.example.com/cb#top"]}, id="fragment"),
        pytest.param({"redirect_uris": ["https://app.example.com/cb#"]}, id="empty-fragment"),
        pytest.param({"redirect_uris": [42]}, id="not-a-string"),
        pytest.param({"redirect_uris": [None]}, id="null-item"),
        pytest.param({"redirect_uris": [""]}, id="empty-string"),
        pytest.param({"redirect_uris": ["/callback"]}, id="relative"),
        pytest.param({"redirect_uris": ["ftp://app.example.com/cb"]}, id="other-scheme"),
        pytest.param({"redirect_uris": [REDIRECT_URI, "http://evil.example.com/"]}, id="one-bad"),
    ],
)
async def test_unacceptable_redirect_uris_are_invalid_redirect_uri(
    client, body: dict[str, Any]
) -> None:
    response = await register(client, body)

    await assert_oauth_error(response, 400, "invalid_redirect_uri")


@pytest.mark.parametrize(
    "uris",
    [
        pytest.param([REDIRECT_URI], id="one"),
        pytest.param([f"https://app.example.com/cb{i}" for i in range(5)], id="five"),
        pytest.param([https_uri(catalog.URI_MAX_LENGTH)], id="512-chars"),
        pytest.param(["http://127.0.0.1:8765/callback"], id="http-127.0.0.1"),
        pytest.param(["http://localhost/callback"], id="http-localhost"),
        pytest.param(["http://[::1]:8765/callback"], id="http-ipv6-loopback"),
    ],
)
async def test_acceptable_redirect_uris_are_registered(client, uris: list[str]) -> None:
    body = await registered(client, {"redirect_uris": uris})

    assert body["redirect_uris"] == uris


# --- invalid_client_metadata ---------------------------------------------------------------------


@SQLITE_ONLY
@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"token_endpoint_auth_method": "private_key_jwt"}, id="unknown-auth-method"),
        pytest.param({"token_endpoint_auth_method": 1}, id="auth-method-not-string"),
        pytest.param({"scope": ["invoices:read"]}, id="scope-list"),
        pytest.param({"scope": 7}, id="scope-number"),
        pytest.param({"scope": "invoices:read ledger:everything"}, id="unknown-scope"),
        pytest.param({"scope": "INVOICES:READ"}, id="scope-wrong-case"),
        pytest.param({"scope": ""}, id="empty-scope"),
        pytest.param({"scope": "   "}, id="blank-scope"),
        pytest.param({"client_name": ""}, id="empty-client-name"),
        pytest.param({"client_name": "   "}, id="blank-client-name"),
        pytest.param({"client_name": 42}, id="client-name-number"),
        pytest.param({"client_name": ["Pocket"]}, id="client-name-list"),
        pytest.param({"grant_types": ["implicit"]}, id="unknown-grant"),
        pytest.param({"grant_types": ["password"]}, id="password-grant"),
        pytest.param({"grant_types": "authorization_code"}, id="grant-types-not-list"),
        pytest.param({"response_types": ["token"]}, id="response-type-token"),
        pytest.param({"response_types": ["code", "id_token"]}, id="response-type-extra"),
        pytest.param({"response_types": "code"}, id="response-types-not-list"),
        pytest.param(
            {"token_endpoint_auth_method": "none", "grant_types": [TOKEN_EXCHANGE]},
            id="public-token-exchange",
        ),
        pytest.param({"logo_uri": "not a url"}, id="logo-uri-not-url"),
        pytest.param({"logo_uri": "javascript:alert(1)"}, id="logo-uri-javascript"),
        pytest.param({"logo_uri": 5}, id="logo-uri-number"),
        pytest.param({"client_uri": "/relative"}, id="client-uri-relative"),
    ],
)
async def test_malformed_metadata_is_invalid_client_metadata(
    client, fields: dict[str, Any]
) -> None:
    response = await register(client, metadata(**fields))

    await assert_oauth_error(response, 400, "invalid_client_metadata")


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"client_name": "Pocket\x00Books"}, id="client_name"),
        pytest.param({"contacts": ["dev\x00@example.com"]}, id="contacts"),
        pytest.param({"logo_uri": "https://app.example.com/\x00.png"}, id="logo_uri"),
    ],
)
async def test_nul_character_in_metadata_is_invalid_request(client, fields: dict[str, Any]) -> None:
    """A NUL is refused in every request's text alike, before the metadata is read."""
    response = await register(client, metadata(**fields))

    body = await assert_oauth_error(response, 400, "invalid_request")
    assert body["error_description"].endswith("must not contain NUL characters")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"redirect_uris": ["http://app.example.com/cb"]}, id="invalid_redirect_uri"),
        pytest.param(metadata(scope="nope"), id="invalid_client_metadata"),
    ],
)
async def test_refused_registration_creates_no_app(
    client, platform: Platform, body: dict[str, Any]
) -> None:
    before = await app_count(platform)

    response = await register(client, body)

    assert response.status_code == 400
    assert await app_count(platform) == before


@pytest.mark.parametrize("field", ["client_name", "client_uri", "logo_uri"])
async def test_lone_surrogate_in_stored_metadata_is_a_400_oauth_error(client, field: str) -> None:
    value = "Pocket @" if field == "client_name" else f"https://app.example.com/{field}/@"
    raw = json.dumps(metadata(**{field: value})).replace("@", "\\ud800")

    response = await client.post(REGISTER, data=raw, headers={"Content-Type": "application/json"})

    body = await response.get_json()
    assert response.status_code == 400, body
    assert body["error"] == "invalid_client_metadata"
    assert field in body["error_description"]


# --- invalid_request -----------------------------------------------------------------------------


def _oversized(size: int) -> bytes:
    raw = json.dumps({**metadata(), "x_padding": ""}).encode()
    return raw[:-2] + b"a" * (size - len(raw)) + raw[-2:]


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        pytest.param(b'{"redirect_uris": [', "application/json", id="malformed-json"),
        pytest.param(b"", "application/json", id="empty-body"),
        pytest.param(b"[1, 2]", "application/json", id="json-array"),
        pytest.param(b'"text"', "application/json", id="json-string"),
        pytest.param(b"null", "application/json", id="json-null"),
        pytest.param(b"\xff\xfe\xfa", "application/json", id="not-utf8"),
        pytest.param(b"[" * 10_000 + b"]" * 10_000, "application/json", id="deeply-nested"),
        pytest.param(
            b"redirect_uris=https%3A%2F%2Fapp.example.com%2Fcallback",
            "application/x-www-form-urlencoded",
            id="form-body",
        ),
        pytest.param(json.dumps(metadata()).encode(), "text/plain", id="json-as-text-plain"),
        pytest.param(json.dumps(metadata()).encode(), None, id="no-content-type"),
        pytest.param(_oversized(JSON_MAX_BYTES + 1), "application/json", id="64KiB-plus-one"),
        pytest.param(_oversized(2 * 1024 * 1024), "application/json", id="2MiB"),
    ],
)
async def test_unreadable_body_is_invalid_request(
    client, raw: bytes, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}

    response = await client.post(REGISTER, data=raw, headers=headers)

    await assert_oauth_error(response, 400, "invalid_request")


async def test_body_of_exactly_64_kib_is_read(client) -> None:
    raw = _oversized(JSON_MAX_BYTES)
    assert len(raw) == JSON_MAX_BYTES

    response = await client.post(REGISTER, data=raw, headers={"Content-Type": "application/json"})

    assert response.status_code == 201, await response.get_data(as_text=True)


# --- rate limit ----------------------------------------------------------------------------------

REGISTER_LIMIT = catalog.RATE_LIMIT_REGISTER_PER_IP.limit


async def use_up_the_limit(client: Any) -> None:
    for attempt in range(REGISTER_LIMIT):
        response = await register(client, metadata())
        assert response.status_code == 201, attempt


@SQLITE_ONLY
async def test_eleventh_registration_within_a_minute_is_429(client) -> None:
    assert REGISTER_LIMIT == 10
    await use_up_the_limit(client)

    response = await register(client, metadata())

    body = await assert_oauth_error(response, 429, "temporarily_unavailable")
    seconds = int(response.headers["Retry-After"])
    assert 1 <= seconds <= 60
    assert str(seconds) in body["error_description"]


@SQLITE_ONLY
async def test_refused_registration_creates_no_app_when_limited(client, platform: Platform) -> None:
    await use_up_the_limit(client)
    before = await app_count(platform)

    response = await register(client, metadata())

    assert response.status_code == 429
    assert await app_count(platform) == before


@SQLITE_ONLY
@pytest.mark.parametrize(("elapsed", "status"), [(59, 429), (60, 201)])
async def test_limit_lifts_after_sixty_seconds(client, clock, elapsed: int, status: int) -> None:
    await use_up_the_limit(client)

    clock.advance(elapsed)
    response = await register(client, metadata())

    assert response.status_code == status


@SQLITE_ONLY
async def test_limit_is_per_ip(client) -> None:
    await use_up_the_limit(client)

    response = await register(client, metadata(), scope_base=OTHER_IP)

    assert response.status_code == 201


# --- registered clients in every flow, sandbox only ----------------------------------------------


async def test_registered_confidential_client_completes_code_flow_in_sandbox(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(client, admin_headers, platform)
    assert world.client_secret is not None

    tokens = await code_grant(client, world)

    assert tokens["token_type"] == "Bearer"
    assert tokens["scope"] == "invoices:read"
    assert tokens["access_token"]
    assert tokens["refresh_token"]


async def test_registered_client_is_refused_for_a_non_sandbox_business(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(client, admin_headers, platform, sandbox=False)
    await login(client, world)

    response = await client.get(consent_url(world))

    assert await problem_message(response) == NOT_REVIEWED


async def test_registered_client_cannot_be_forced_onto_a_non_sandbox_business(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(client, admin_headers, platform)
    real = await client.post(
        "/admin/businesses", json={"name": "Real Co", "sandbox": False}, headers=admin_headers
    )
    real_id = (await real.get_json())["id"]
    member = await client.put(
        f"/admin/businesses/{real_id}/members/{world.user_id}",
        json={"role": "owner"},
        headers=admin_headers,
    )
    assert member.status_code == 200
    await login(client, world)
    page = await (await client.get(consent_url(world))).get_data(as_text=True)
    request_id = re.search(r'name="request_id" value="([^"]+)"', page)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert request_id is not None
    assert csrf is not None

    response = await client.post(
        "/oauth/authorize",
        form={
            "request_id": request_id[1],
            "csrf_token": csrf[1],
            "business_id": real_id,
            "decision": "approve",
        },
    )

    assert await problem_message(response) == NOT_REVIEWED


async def test_registered_client_cannot_be_installed_in_a_non_sandbox_business(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(client, admin_headers, platform, sandbox=False)

    response = await client.post(
        "/admin/installations",
        json={
            "appId": world.app_id,
            "businessId": world.business_id,
            "userId": world.user_id,
            "scopes": ["invoices:read"],
        },
        headers=admin_headers,
    )

    assert response.status_code == 400


async def test_registered_public_client_needs_pkce(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(
        client, admin_headers, platform, token_endpoint_auth_method="none"
    )
    await login(client, world)

    response = await client.get(consent_url(world))

    assert await problem_message(response) == PKCE_REQUIRED


async def test_registered_public_client_completes_code_flow_and_refresh(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(
        client, admin_headers, platform, token_endpoint_auth_method="none"
    )
    assert world.client_secret is None
    first = await code_grant(client, world)

    response = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    )

    second = await response.get_json()
    assert response.status_code == 200, second
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]


async def test_registered_client_exchanges_a_session_token(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(client, admin_headers, platform, grant_types=ALL_GRANTS)

    response = await exchange_grant(client, admin_headers, world)

    body = await response.get_json()
    assert response.status_code == 200, body
    assert body["issued_token_type"] == catalog.TOKEN_TYPE_ACCESS
    assert body["scope"] == "invoices:read"


async def test_registered_client_completes_the_device_flow(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(client, admin_headers, platform, grant_types=ALL_GRANTS)

    response = await device_grant(client, world)

    body = await response.get_json()
    assert response.status_code == 200, body
    assert body["scope"] == "invoices:read"
    assert body["access_token"]


@pytest.mark.parametrize("flow", ["code", "public-code", "token-exchange", "device"])
async def test_registered_client_tokens_call_invoices(
    client, admin_headers, platform: Platform, flow: str
) -> None:
    fields: dict[str, Any] = {"grant_types": ALL_GRANTS}
    if flow == "public-code":
        fields = {"token_endpoint_auth_method": "none"}
    world = await registered_world(client, admin_headers, platform, **fields)
    if flow in ("code", "public-code"):
        tokens = await code_grant(client, world)
    else:
        granted = (
            await exchange_grant(client, admin_headers, world)
            if flow == "token-exchange"
            else await device_grant(client, world)
        )
        tokens = await granted.get_json()
        assert granted.status_code == 200, tokens

    response = await client.get(
        "/invoices", headers={"Authorization": f"Bearer {tokens['access_token']}"}
    )

    assert response.status_code == 200
    assert await response.get_json() == {"data": [], "next": None}


# --- review ---------------------------------------------------------------------------------------


async def review(client: Any, admin_headers: dict[str, str], app_id: str, reviewed: bool) -> Any:
    return await client.put(
        f"/admin/apps/{app_id}/review", json={"reviewed": reviewed}, headers=admin_headers
    )


async def test_reviewed_registered_client_connects_to_any_business(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(client, admin_headers, platform, sandbox=False)
    response = await review(client, admin_headers, world.app_id, True)
    assert response.status_code == 200, await response.get_data(as_text=True)
    assert (await response.get_json())["reviewed"] is True

    tokens = await code_grant(client, world)

    listed = await client.get(
        "/invoices", headers={"Authorization": f"Bearer {tokens['access_token']}"}
    )
    assert listed.status_code == 200


async def test_withdrawn_review_limits_new_consents_to_sandboxes(
    client, admin_headers, platform: Platform
) -> None:
    world = await registered_world(client, admin_headers, platform, sandbox=False)
    await review(client, admin_headers, world.app_id, True)
    response = await review(client, admin_headers, world.app_id, False)
    assert response.status_code == 200
    await login(client, world)

    page = await client.get(consent_url(world))

    assert await problem_message(page) == NOT_REVIEWED


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("path_app", "body", "headers_ok", "status"),
    [
        ("app_missing", {"reviewed": True}, True, 404),
        (None, {"reviewed": "yes"}, True, 400),
        (None, {}, True, 400),
        (None, {"reviewed": True}, False, 401),
    ],
    ids=["unknown-app", "not-a-boolean", "missing", "no-admin-token"],
)
async def test_review_endpoint_refusals(
    client, admin_headers, platform: Platform, path_app, body, headers_ok, status
) -> None:
    world = await registered_world(client, admin_headers, platform)

    response = await client.put(
        f"/admin/apps/{path_app or world.app_id}/review",
        json=body,
        headers=admin_headers if headers_ok else {},
    )

    assert response.status_code == status
    assert (await response.get_json())["statusCode"] == status
