"""RFC 8693 token exchange: a session token for an access and refresh token pair.

Spec: Endpoints > token endpoint grants (token-exchange row); Authentication > Token exchange and
Client authentication rules; States > Tokens and codes (session token row); Errors > OAuth
endpoint errors (token endpoint causes, invalid_grant without a description for every failure of
an exchange after client authentication); Limits (session token 50 s, 30 s skew; 600 token
requests per minute per confidential client, each exchange counting).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from typing import Any

import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ledgerport import auth, catalog
from ledgerport.http import oauth_clients
from ledgerport.platform import Platform

from .oauth_helpers import (
    ABSENT,
    JWT_TYPE,
    PASSWORD,
    REDIRECT_URI,
    TOKEN_EXCHANGE,
    World,
    assert_oauth_error,
    basic,
    exchange,
    install,
    new_user,
    session_token,
)

API = "http://api.ledgerport.test"
ACCESS_TYPE = "urn:ietf:params:oauth:token-type:access_token"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
APP_SCOPES = ("invoices:read", "invoices:write", "customers:read")
INSTALLED = ("invoices:read", "customers:read")
SKEW = 30  # the spec's clock-skew tolerance of a session token, in seconds
TTL = 50  # the spec's "about 50 seconds" of a session token

# Checks of the request's own parameters involve no storage of their own and behave the same on
# both backends: they run once, on SQLite (their setup still stores).
sqlite_only = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


# --- Helpers -------------------------------------------------------------------------------------


async def set_member(
    client: Any,
    admin_headers: dict[str, str],
    business_id: str,
    user_id: str,
    role: str,
    *,
    active: bool = True,
) -> None:
    response = await client.put(
        f"/admin/businesses/{business_id}/members/{user_id}",
        json={"role": role, "active": active},
        headers=admin_headers,
    )
    assert response.status_code == 200


async def new_app(
    client: Any, admin_headers: dict[str, str], developer_id: str, app_type: str = "CONFIDENTIAL"
) -> dict[str, Any]:
    response = await client.post(
        "/admin/apps",
        json={
            "name": "Books Sync",
            "type": app_type,
            "redirectUris": [REDIRECT_URI],
            "scopes": list(APP_SCOPES),
            "developerUserId": developer_id,
            "reviewed": True,
        },
        headers=admin_headers,
    )
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == 201, body
    return body


async def quick_world(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    *,
    app_type: str = "CONFIDENTIAL",
) -> World:
    """An owner, a business and a reviewed app installed with INSTALLED (make_world, faster)."""
    business = await client.post("/admin/businesses", json={"name": "Acme"}, headers=admin_headers)
    business_id = (await business.get_json())["id"]
    user_id, _ = await new_user(platform)
    await set_member(client, admin_headers, business_id, user_id, "owner")
    app = await new_app(client, admin_headers, user_id, app_type)
    world = World(
        business_id,
        user_id,
        "",
        PASSWORD,
        app["id"],
        app["clientId"],
        app.get("clientSecret"),
    )
    await install(client, admin_headers, world, INSTALLED)
    return world


async def member(
    client: Any, admin_headers: dict[str, str], platform: Platform, world: World, role: str
) -> str:
    user_id, _ = await new_user(platform)
    await set_member(client, admin_headers, world.business_id, user_id, role)
    return user_id


async def installation_id(platform: Platform, app_id: str, business_id: str) -> str:
    async with platform.store.transaction() as tx:
        value = await tx.fetchval(
            "SELECT id FROM installations WHERE app_id = $1 AND business_id = $2",
            app_id,
            business_id,
        )
    assert value is not None
    return str(value)


async def uninstall(client: Any, admin_headers: dict[str, str], platform: Platform, world: World):
    ins = await installation_id(platform, world.app_id, world.business_id)
    response = await client.delete(f"/admin/installations/{ins}", headers=admin_headers)
    assert response.status_code == 204


async def exchanged(client: Any, world: World, token: str, **extra: str) -> dict[str, Any]:
    response = await exchange(client, world, token, extra=extra or None)
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == 200, body
    return body


async def invoices(client: Any, access_token: str) -> Any:
    return await client.get("/invoices", headers={"Authorization": f"Bearer {access_token}"})


def b64(raw: bytes) -> str:
    return jwt.utils.base64url_encode(raw).decode()


def b64_json(value: dict[str, Any]) -> str:
    return b64(json.dumps(value, separators=(",", ":")).encode())


def unverified(token: str) -> dict[str, Any]:
    claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return claims


async def signer(platform: Platform) -> tuple[str, ec.EllipticCurvePrivateKey]:
    """The kid and private key the platform signs session tokens with now."""
    now = platform.now()
    async with platform.store.transaction() as tx:
        keys = await auth.published_keys(tx, now=now)
    live = [k for k in keys if k.activates_at <= now < k.retires_at]
    assert live, "no signing key yet: issue a session token first"
    key = max(live, key=lambda k: (k.activates_at, k.kid))
    return key.kid, key.private_key(platform.keyring)


def claims_for(world: World, now: float, **changes: Any) -> dict[str, Any]:
    """The claims the platform would sign for the world's owner; a change to None drops one."""
    issued = int(now)
    claims: dict[str, Any] = {
        "iss": API,
        "aud": world.client_id,
        "sub": world.user_id,
        "bid": world.business_id,
        "typ": "session",
        "jti": secrets.token_urlsafe(18),
        "iat": issued,
        "nbf": issued,
        "exp": issued + TTL,
    }
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


async def crafted(platform: Platform, world: World, **changes: Any) -> str:
    """A token signed with the platform's real signing key over chosen claims."""
    kid, key = await signer(platform)
    return jwt.encode(
        claims_for(world, platform.now(), **changes), key, algorithm="ES256", headers={"kid": kid}
    )


# --- Success -------------------------------------------------------------------------------------


async def test_exchange_answers_the_token_response(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    body = await exchanged(client, world, token)
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 3600
    assert isinstance(body["access_token"], str)
    assert body["access_token"]
    assert isinstance(body["refresh_token"], str)
    assert body["refresh_token"]
    assert sorted(body["scope"].split(" ")) == sorted(INSTALLED)
    assert body["issued_token_type"] == ACCESS_TYPE


async def test_exchange_response_is_not_cached(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    response = await exchange(client, world, token)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Pragma"] == "no-cache"


async def test_exchanged_token_belongs_to_the_viewing_user(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    assert world.client_secret is not None
    token = await session_token(client, admin_headers, world)
    body = await exchanged(client, world, token)
    response = await client.post(
        "/oauth/introspect",
        form={"token": body["access_token"]},
        headers=basic(world.client_id, world.client_secret),
    )
    answer = await response.get_json()
    assert answer["active"] is True
    assert answer["sub"] == world.user_id
    assert answer["client_id"] == world.client_id


@sqlite_only
async def test_id_token_subject_type_is_handled_identically(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    body = await exchanged(client, world, token, subject_token_type=ID_TOKEN_TYPE)
    assert body["issued_token_type"] == ACCESS_TYPE
    assert sorted(body["scope"].split(" ")) == sorted(INSTALLED)


@sqlite_only
async def test_id_token_subject_type_is_single_use_too(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    await exchanged(client, world, token, subject_token_type=ID_TOKEN_TYPE)
    response = await exchange(client, world, token, extra={"subject_token_type": JWT_TYPE})
    await assert_oauth_error(response, 400, "invalid_grant", description=ABSENT)


@sqlite_only
async def test_json_body_is_accepted_for_token_exchange(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    response = await exchange(client, world, token, as_json=True)
    body = await response.get_json()
    assert response.status_code == 200, body
    assert body["issued_token_type"] == ACCESS_TYPE


@sqlite_only
async def test_json_body_with_body_credentials_is_accepted(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    response = await client.post(
        "/oauth/token",
        json={
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": token,
            "subject_token_type": JWT_TYPE,
            "client_id": world.client_id,
            "client_secret": world.client_secret,
        },
    )
    assert response.status_code == 200, await response.get_json()


@sqlite_only
@pytest.mark.parametrize(
    "body",
    [
        {"grant_type": "refresh_token", "refresh_token": "lp_rt_unknown"},
        {"grant_type": "authorization_code", "code": "c", "redirect_uri": REDIRECT_URI},
        {"subject_token": "x", "subject_token_type": JWT_TYPE},
    ],
    ids=["refresh_token", "authorization_code", "no-grant-type"],
)
async def test_json_body_for_another_grant_is_invalid_request(
    client, admin_headers, platform, body
):
    world = await quick_world(client, admin_headers, platform)
    assert world.client_secret is not None
    response = await client.post(
        "/oauth/token", json=body, headers=basic(world.client_id, world.client_secret)
    )
    await assert_oauth_error(response, 400, "invalid_request")


@sqlite_only
@pytest.mark.parametrize(
    "value", [5, True, ["a"], {"a": "b"}], ids=["int", "bool", "list", "object"]
)
async def test_json_body_with_a_non_string_parameter_is_invalid_request(
    client, admin_headers, platform, value
):
    world = await quick_world(client, admin_headers, platform)
    assert world.client_secret is not None
    token = await session_token(client, admin_headers, world)
    response = await client.post(
        "/oauth/token",
        json={
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": token,
            "subject_token_type": JWT_TYPE,
            "requested_token_type": value,
        },
        headers=basic(world.client_id, world.client_secret),
    )
    await assert_oauth_error(response, 400, "invalid_request")


@sqlite_only
async def test_requested_token_type_access_token_is_accepted(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    body = await exchanged(client, world, token, requested_token_type=ACCESS_TYPE)
    assert body["issued_token_type"] == ACCESS_TYPE


@sqlite_only
@pytest.mark.parametrize(
    "requested",
    [
        "urn:ietf:params:oauth:token-type:refresh_token",
        JWT_TYPE,
        ID_TOKEN_TYPE,
        "access_token",
        "",
    ],
    ids=["refresh_token", "jwt", "id_token", "short-name", "empty"],
)
async def test_other_requested_token_type_is_invalid_request(
    client, admin_headers, platform, requested
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    response = await exchange(client, world, token, extra={"requested_token_type": requested})
    await assert_oauth_error(response, 400, "invalid_request")


@sqlite_only
@pytest.mark.parametrize(
    ("drop", "override"),
    [
        ("subject_token", {}),
        (None, {"subject_token": ""}),
        ("subject_token_type", {}),
        (None, {"subject_token_type": ""}),
        (None, {"subject_token_type": "urn:ietf:params:oauth:token-type:saml2"}),
        (None, {"subject_token_type": ACCESS_TYPE}),
        (None, {"subject_token_type": "jwt"}),
    ],
    ids=[
        "no-subject-token",
        "empty-subject-token",
        "no-subject-token-type",
        "empty-subject-token-type",
        "saml2",
        "access_token",
        "short-jwt",
    ],
)
async def test_subject_token_problems_are_invalid_request(
    client, admin_headers, platform, drop, override
):
    world = await quick_world(client, admin_headers, platform)
    assert world.client_secret is not None
    token = await session_token(client, admin_headers, world)
    form = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": token,
        "subject_token_type": JWT_TYPE,
        **override,
    }
    form.pop(drop or "", None)
    response = await client.post(
        "/oauth/token", form=form, headers=basic(world.client_id, world.client_secret)
    )
    await assert_oauth_error(response, 400, "invalid_request")


# --- Client authentication -----------------------------------------------------------------------


async def test_public_client_is_refused(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform, app_type="PUBLIC")
    token = await session_token(client, admin_headers, world)
    response = await client.post(
        "/oauth/token",
        form={
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": token,
            "subject_token_type": JWT_TYPE,
            "client_id": world.client_id,
        },
    )
    await assert_oauth_error(response, 401, "invalid_client")


@pytest.mark.parametrize("use_basic", [True, False], ids=["basic", "body"])
async def test_wrong_secret_is_refused(client, admin_headers, platform, use_basic: bool):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    form = {"grant_type": TOKEN_EXCHANGE, "subject_token": token, "subject_token_type": JWT_TYPE}
    if use_basic:
        response = await client.post(
            "/oauth/token", form=form, headers=basic(world.client_id, "wrong-secret")
        )
    else:
        response = await client.post(
            "/oauth/token",
            form={**form, "client_id": world.client_id, "client_secret": "wrong-secret"},
        )
    await assert_oauth_error(response, 401, "invalid_client")
    challenge = response.headers.get("WWW-Authenticate")
    if use_basic:
        assert challenge is not None
        assert challenge.startswith("Basic realm=")
    else:
        assert challenge is None


async def test_suspended_app_is_invalid_client(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    response = await client.post(
        f"/admin/apps/{world.app_id}/status", json={"status": "SUSPENDED"}, headers=admin_headers
    )
    assert response.status_code == 200
    response = await exchange(client, world, token)
    await assert_oauth_error(response, 401, "invalid_client")


# --- invalid_grant: every cause, never described -------------------------------------------------


def alg_none(token: str, kid: str) -> str:
    head = b64_json({"alg": "none", "typ": "JWT", "kid": kid})
    return f"{head}.{token.split('.')[1]}."


def tampered(token: str, **changes: Any) -> str:
    head, payload, signature = token.split(".")
    claims = json.loads(jwt.utils.base64url_decode(payload))
    return f"{head}.{b64_json({**claims, **changes})}.{signature}"


def hs256_with_public_key(claims: dict[str, Any], kid: str, key: ec.EllipticCurvePrivateKey):
    """Algorithm confusion: an HMAC keyed with the published public key."""
    secret = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = f"{b64_json({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{b64_json(claims)}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


async def bad_token(
    case: str, client: Any, admin_headers: dict[str, str], platform: Platform, world: World
) -> str:
    """A session token the platform must refuse for exactly the cause ``case`` names."""
    genuine = await session_token(client, admin_headers, world)
    kid, key = await signer(platform)
    now = platform.now()
    if case == "garbage":
        return "not-a-session-token"
    if case == "unsigned-alg-none":
        return alg_none(genuine, kid)
    if case == "foreign-key-with-real-kid":
        foreign = ec.generate_private_key(ec.SECP256R1())
        return jwt.encode(claims_for(world, now), foreign, algorithm="ES256", headers={"kid": kid})
    if case == "unknown-kid":
        return jwt.encode(claims_for(world, now), key, algorithm="ES256", headers={"kid": "nope"})
    if case == "hs256-keyed-with-public-key":
        return hs256_with_public_key(claims_for(world, now), kid, key)
    if case == "tampered-payload":
        other = await member(client, admin_headers, platform, world, "owner")
        return tampered(genuine, sub=other)
    if case == "iss-mismatch":
        return await crafted(platform, world, iss="http://evil.example")
    if case == "aud-of-another-app":
        other = await new_app(client, admin_headers, world.user_id)
        other_world = World(
            world.business_id, world.user_id, "", PASSWORD, other["id"], other["clientId"], None
        )
        await install(client, admin_headers, other_world, INSTALLED)
        return await session_token(client, admin_headers, other_world)
    if case == "typ-wrong":
        return await crafted(platform, world, typ="JWT")
    if case == "bid-without-installation":
        response = await client.post(
            "/admin/businesses", json={"name": "Other"}, headers=admin_headers
        )
        business_id = (await response.get_json())["id"]
        await set_member(client, admin_headers, business_id, world.user_id, "owner")
        return await crafted(platform, world, bid=business_id)
    if case == "no-jti":
        return await crafted(platform, world, jti=None)
    if case == "expired-beyond-skew":
        platform.clock.advance(TTL + SKEW + 1)
        return genuine
    if case == "not-yet-valid-beyond-skew":
        return await crafted(platform, world, nbf=int(now) + SKEW + 1, exp=int(now) + SKEW + 51)
    if case == "jti-already-redeemed":
        await exchanged(client, world, genuine)
        return genuine
    if case == "installation-uninstalled":
        await uninstall(client, admin_headers, platform, world)
        return genuine
    if case == "user-deactivated":
        await set_member(
            client, admin_headers, world.business_id, world.user_id, "owner", active=False
        )
        return genuine
    raise AssertionError(case)


INVALID_GRANT_CASES = [
    "garbage",
    "unsigned-alg-none",
    "foreign-key-with-real-kid",
    "unknown-kid",
    "hs256-keyed-with-public-key",
    "tampered-payload",
    "iss-mismatch",
    "aud-of-another-app",
    "typ-wrong",
    "bid-without-installation",
    "no-jti",
    "expired-beyond-skew",
    "not-yet-valid-beyond-skew",
    "jti-already-redeemed",
    "installation-uninstalled",
    "user-deactivated",
]


@pytest.mark.parametrize("case", INVALID_GRANT_CASES)
async def test_invalid_grant_without_description(client, admin_headers, platform, case: str):
    world = await quick_world(client, admin_headers, platform)
    token = await bad_token(case, client, admin_headers, platform, world)
    response = await exchange(client, world, token)
    await assert_oauth_error(response, 400, "invalid_grant", description=ABSENT)


async def test_token_is_accepted_within_the_skew_after_expiry(
    client, admin_headers, platform, clock
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    clock.advance(TTL + SKEW - 1)
    await exchanged(client, world, token)


async def test_token_is_accepted_within_the_skew_before_not_before(
    client, admin_headers, platform, clock
):
    world = await quick_world(client, admin_headers, platform)
    await session_token(client, admin_headers, world)
    now = int(clock.now())
    token = await crafted(platform, world, nbf=now + SKEW - 1, exp=now + SKEW + 49)
    await exchanged(client, world, token)


async def test_crafted_token_with_the_platform_claims_is_accepted(client, admin_headers, platform):
    """Control for the crafted rows of the table: the crafting alone changes nothing."""
    world = await quick_world(client, admin_headers, platform)
    await session_token(client, admin_headers, world)
    await exchanged(client, world, await crafted(platform, world))


# --- Single use ----------------------------------------------------------------------------------


async def _fail_first(
    cause: str, client: Any, admin_headers: dict[str, str], platform: Platform, world: World
) -> tuple[dict[str, str], Callable[[], Any]]:
    """Break the exchange for ``cause``; answers the extra parameters and the repair."""
    if cause == "scope-outside-installation":

        async def nothing() -> None:
            return None

        return {"scope": "invoices:write"}, nothing
    if cause == "installation-uninstalled":
        await uninstall(client, admin_headers, platform, world)
        return {}, lambda: install(client, admin_headers, world, INSTALLED)
    await set_member(client, admin_headers, world.business_id, world.user_id, "owner", active=False)
    return {}, lambda: set_member(client, admin_headers, world.business_id, world.user_id, "owner")


@pytest.mark.parametrize(
    ("cause", "error"),
    [
        ("scope-outside-installation", "invalid_scope"),
        ("installation-uninstalled", "invalid_grant"),
        ("user-deactivated", "invalid_grant"),
    ],
)
async def test_jti_is_spent_by_a_failed_exchange(
    client, admin_headers, platform, cause: str, error: str
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    extra, repair = await _fail_first(cause, client, admin_headers, platform, world)
    first = await exchange(client, world, token, extra=extra or None)
    await assert_oauth_error(first, 400, error)
    await repair()
    retry = await exchange(client, world, token)
    await assert_oauth_error(retry, 400, "invalid_grant", description=ABSENT)
    # The repair worked: a fresh session token exchanges.
    await exchanged(client, world, await session_token(client, admin_headers, world))


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        ({"subject_token_type": "urn:ietf:params:oauth:token-type:saml2"}, "invalid_request"),
        ({"requested_token_type": JWT_TYPE}, "invalid_request"),
        ({"resource": "https://elsewhere.example/api"}, "invalid_target"),
        ({"scope": " "}, "invalid_scope"),
    ],
    ids=["subject-token-type", "requested-token-type", "resource", "empty-scope"],
)
async def test_jti_is_spent_by_a_malformed_exchange_request(
    client, admin_headers, platform, extra: dict[str, str], error: str
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    first = await exchange(client, world, token, extra=extra)
    await assert_oauth_error(first, 400, error)

    retry = await exchange(client, world, token)

    await assert_oauth_error(retry, 400, "invalid_grant", description=ABSENT)


async def exchange_into(responses: list[Any], client: Any, world: World, token: str) -> None:
    responses.append(await exchange(client, world, token))


async def test_concurrent_exchanges_of_one_token_succeed_once(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    for _ in range(3):
        token = await session_token(client, admin_headers, world)
        responses: list[Any] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(exchange_into, responses, client, world, token)
            nursery.start_soon(exchange_into, responses, client, world, token)
        assert sorted(r.status_code for r in responses) == [200, 400]
        loser = next(r for r in responses if r.status_code == 400)
        await assert_oauth_error(loser, 400, "invalid_grant", description=ABSENT)


async def test_each_viewing_user_gets_a_distinct_pair(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    assert world.client_secret is not None
    viewer = await member(client, admin_headers, platform, world, "viewer")
    owner_pair = await exchanged(client, world, await session_token(client, admin_headers, world))
    viewer_pair = await exchanged(
        client, world, await session_token(client, admin_headers, world, user_id=viewer)
    )
    assert owner_pair["access_token"] != viewer_pair["access_token"]
    assert owner_pair["refresh_token"] != viewer_pair["refresh_token"]
    response = await client.post(
        "/oauth/introspect",
        form={"token": viewer_pair["access_token"]},
        headers=basic(world.client_id, world.client_secret),
    )
    assert (await response.get_json())["sub"] == viewer


# --- Using the issued token ----------------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "viewer"])
async def test_exchanged_token_lists_invoices(client, admin_headers, platform, role: str):
    world = await quick_world(client, admin_headers, platform)
    user_id = (
        world.user_id
        if role == "owner"
        else await member(client, admin_headers, platform, world, role)
    )
    pair = await exchanged(
        client, world, await session_token(client, admin_headers, world, user_id=user_id)
    )
    response = await invoices(client, pair["access_token"])
    body = await response.get_json()
    assert response.status_code == 200, body
    assert body["data"] == []


async def test_role_permission_still_applies(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    viewer = await member(client, admin_headers, platform, world, "viewer")
    pair = await exchanged(
        client, world, await session_token(client, admin_headers, world, user_id=viewer)
    )
    assert "invoices:read" in pair["scope"].split(" ")
    held = sorted(catalog.ROLE_DEFAULTS["viewer"] - {"invoices:read"})
    response = await client.put(
        f"/admin/businesses/{world.business_id}/roles/viewer",
        json={"permissions": held},
        headers=admin_headers,
    )
    assert response.status_code == 200
    response = await invoices(client, pair["access_token"])
    body = await response.get_json()
    assert response.status_code == 403, body
    assert not body["message"].startswith("Insufficient scope")


async def test_role_change_leaves_the_owner_untouched(client, admin_headers, platform):
    """Control for the row above: only the viewer role lost invoices:read."""
    world = await quick_world(client, admin_headers, platform)
    pair = await exchanged(client, world, await session_token(client, admin_headers, world))
    held = sorted(catalog.ROLE_DEFAULTS["viewer"] - {"invoices:read"})
    response = await client.put(
        f"/admin/businesses/{world.business_id}/roles/viewer",
        json={"permissions": held},
        headers=admin_headers,
    )
    assert response.status_code == 200
    assert (await invoices(client, pair["access_token"])).status_code == 200


# --- Refresh and revocation ----------------------------------------------------------------------


def refresh_form(refresh_token: str) -> dict[str, str]:
    return {"grant_type": "refresh_token", "refresh_token": refresh_token}


async def refresh(client: Any, world: World, refresh_token: str) -> Any:
    assert world.client_secret is not None
    return await client.post(
        "/oauth/token",
        form=refresh_form(refresh_token),
        headers=basic(world.client_id, world.client_secret),
    )


async def test_refresh_token_from_an_exchange_rotates(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    first = await exchanged(client, world, await session_token(client, admin_headers, world))
    response = await refresh(client, world, first["refresh_token"])
    second = await response.get_json()
    assert response.status_code == 200, second
    assert second["access_token"] != first["access_token"]
    assert second["refresh_token"] != first["refresh_token"]
    assert sorted(second["scope"].split(" ")) == sorted(INSTALLED)
    assert (await invoices(client, second["access_token"])).status_code == 200


async def test_refresh_revokes_the_exchanged_access_token(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    first = await exchanged(client, world, await session_token(client, admin_headers, world))
    assert (await refresh(client, world, first["refresh_token"])).status_code == 200
    assert (await invoices(client, first["access_token"])).status_code == 401


async def test_reused_refresh_token_from_an_exchange_is_detected(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    first = await exchanged(client, world, await session_token(client, admin_headers, world))
    assert (await refresh(client, world, first["refresh_token"])).status_code == 200
    replay = await refresh(client, world, first["refresh_token"])
    body = await assert_oauth_error(replay, 400, "invalid_grant")
    assert body.get("error_description") == "refresh token reuse detected"


async def test_uninstall_revokes_the_exchanged_access_token(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    pair = await exchanged(client, world, await session_token(client, admin_headers, world))
    assert (await invoices(client, pair["access_token"])).status_code == 200
    await uninstall(client, admin_headers, platform, world)
    assert (await invoices(client, pair["access_token"])).status_code == 401


async def test_uninstall_revokes_the_exchanged_refresh_token(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    pair = await exchanged(client, world, await session_token(client, admin_headers, world))
    await uninstall(client, admin_headers, platform, world)
    response = await refresh(client, world, pair["refresh_token"])
    await assert_oauth_error(response, 400, "invalid_grant", description=ABSENT)


# --- Narrowing with scope ------------------------------------------------------------------------


async def test_scope_narrows_the_exchanged_token(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    body = await exchanged(client, world, token, scope="invoices:read")
    assert body["scope"] == "invoices:read"
    assert (await invoices(client, body["access_token"])).status_code == 200


async def test_narrowed_token_lacks_the_scopes_left_out(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    body = await exchanged(client, world, token, scope="customers:read")
    assert body["scope"] == "customers:read"
    response = await invoices(client, body["access_token"])
    answer = await response.get_json()
    assert response.status_code == 403, answer
    assert answer["message"].startswith("Insufficient scope")


@pytest.mark.parametrize(
    "scope",
    ["invoices:write", "payments:read", "invoices:read payments:read", "no-such-scope"],
    ids=["registered-not-installed", "not-registered", "one-outside", "unknown"],
)
async def test_scope_outside_the_installation_is_invalid_scope(
    client, admin_headers, platform, scope: str
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    response = await exchange(client, world, token, extra={"scope": scope})
    await assert_oauth_error(response, 400, "invalid_scope")


# --- Limits --------------------------------------------------------------------------------------


@sqlite_only
async def test_exchange_counts_against_the_confidential_client_limit(
    app, client, admin_headers, platform
):
    """600 token requests per minute per confidential client across IPs; exchanges count."""
    world = await quick_world(client, admin_headers, platform)
    first = await session_token(client, admin_headers, world)
    second = await session_token(client, admin_headers, world)
    limit = catalog.RATE_LIMIT_TOKEN_CONFIDENTIAL_CLIENT.limit
    async with app.app_context():
        guard = oauth_clients.oauth_guard()
    # limit - 1 token requests of this client from as many other addresses.
    for n in range(limit - 1):
        await guard.authenticated(
            "token",
            f"198.18.{n // 250}.{n % 250}",
            world.client_id,
            with_secret=True,
            confidential=True,
        )
    await exchanged(client, world, first)
    response = await exchange(client, world, second)
    body = await assert_oauth_error(response, 429, "temporarily_unavailable")
    assert int(response.headers["Retry-After"]) >= 1
    assert body["error_description"]
