"""Session tokens of embedded apps: issuance, the app bridge, the JWKS and signing-key rotation.

Spec: Resources > Session token; States > Tokens and codes; Authentication > Token exchange;
Limits > Other limits and constants (about 50 seconds, 30 seconds of skew); contract.md: the
``POST /admin/session-tokens`` row.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import jwt
import pytest

from ledgerport import auth
from ledgerport.auth import Keyring
from ledgerport.catalog import (
    EXPIRED_ROW_GRACE,
    SIGNING_KEY_PERIOD,
    SIGNING_KEY_PREPUBLISH,
    SIGNING_KEY_RETIRED_GRACE,
)
from ledgerport.engine import Scheduler
from ledgerport.platform import Platform

from .oauth_helpers import (
    PASSWORD,
    REDIRECT_URI,
    World,
    exchange,
    install,
    installation_id,
    login,
    new_user,
    session_token,
)

API = "http://api.ledgerport.test"
JWKS_PATH = "/.well-known/jwks.json"
UNKNOWN_IDS = {
    "app": "app_000000000000000000000000",
    "business": "bus_000000000000000000000000",
    "user": "usr_000000000000000000000000",
}
"""Well-formed ids that name nothing (a malformed one is a validation failure)."""
OTHER_ROOT_KEY = "another-root-key-0123456789abcdef0123456789"
T0 = 1_800_000_000.0
SKEW = 30  # the spec's clock-skew tolerance of a session token, in seconds
TTL = 50  # the spec's "about 50 seconds" of a session token

# Checks made before or without any storage access behave the same on both backends: they run
# once, on SQLite (their setup may still store).
before_storage = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


# --- Helpers -------------------------------------------------------------------------------------


async def set_member(
    client: Any, admin_headers: dict[str, str], business_id: str, user_id: str, role: str
) -> None:
    response = await client.put(
        f"/admin/businesses/{business_id}/members/{user_id}",
        json={"role": role},
        headers=admin_headers,
    )
    assert response.status_code == 200


async def quick_world(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    *,
    installed: bool = True,
    app_type: str = "CONFIDENTIAL",
) -> World:
    """An owner, a business and a reviewed app (installed unless told): make_world, faster."""
    business = await client.post("/admin/businesses", json={"name": "Acme"}, headers=admin_headers)
    business_id = (await business.get_json())["id"]
    user_id, email = await new_user(platform)
    await set_member(client, admin_headers, business_id, user_id, "owner")
    response = await client.post(
        "/admin/apps",
        json={
            "name": "Books Sync",
            "type": app_type,
            "redirectUris": [REDIRECT_URI],
            "scopes": ["invoices:read", "invoices:write", "customers:read"],
            "developerUserId": user_id,
            "reviewed": True,
        },
        headers=admin_headers,
    )
    app = await response.get_json()
    assert response.status_code == 201, app
    world = World(
        business_id,
        user_id,
        email,
        PASSWORD,
        app["id"],
        app["clientId"],
        app.get("clientSecret"),
    )
    if installed:
        await install(client, admin_headers, world)
    return world


async def issue(
    client: Any,
    admin_headers: dict[str, str],
    world: World,
    *,
    app_id: str | None = None,
    business_id: str | None = None,
    user_id: str | None = None,
) -> Any:
    return await client.post(
        "/admin/session-tokens",
        json={
            "appId": app_id or world.app_id,
            "businessId": business_id or world.business_id,
            "userId": user_id or world.user_id,
        },
        headers=admin_headers,
    )


async def served_jwks(client: Any) -> dict[str, Any]:
    response = await client.get(JWKS_PATH)
    assert response.status_code == 200
    body: dict[str, Any] = await response.get_json()
    return body


def verify(token: str, jwks: dict[str, Any], audience: str) -> dict[str, Any]:
    """What an app backend does: verify the signature under the JWKS key the kid names.

    The platform's clock is frozen, so times are checked by the tests against it, not here.
    """
    kid = jwt.get_unverified_header(token)["kid"]
    key = jwt.PyJWKSet.from_dict(jwks)[kid]
    claims: dict[str, Any] = jwt.decode(
        token,
        key.key,
        algorithms=["ES256"],
        audience=audience,
        issuer=API,
        options={"verify_exp": False, "verify_nbf": False, "verify_iat": False},
    )
    return claims


def kids(jwks: dict[str, Any]) -> list[str]:
    return [key["kid"] for key in jwks["keys"]]


async def assert_envelope(response: Any, status: int, code: str | None) -> dict[str, Any]:
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == status, body
    assert body["statusCode"] == status
    if code is None:
        assert "code" not in body, body
    else:
        assert body.get("code") == code, body
    return body


async def rotate(store: Any, keyring: Keyring, now: float) -> auth.SigningKey:
    async with store.transaction() as tx:
        return await auth.rotate_signing_keys(tx, keyring, now=now)


async def published(store: Any, now: float) -> list[auth.SigningKey]:
    async with store.transaction() as tx:
        return await auth.published_keys(tx, now=now)


# --- Issuance through the operator API ----------------------------------------------------------


async def test_issue_answers_201_with_the_token_and_its_expiry(
    client, admin_headers, platform, clock
):
    world = await quick_world(client, admin_headers, platform)
    response = await issue(client, admin_headers, world)
    body = await response.get_json()
    assert response.status_code == 201, body
    assert set(body) == {"sessionToken", "expiresAt"}
    assert isinstance(body["sessionToken"], str)
    assert body["expiresAt"] == int(clock.now()) + TTL


async def test_claims_name_the_business_user_and_app(client, admin_headers, platform, clock):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    claims = verify(token, await served_jwks(client), world.client_id)
    now = int(clock.now())
    assert claims["bid"] == world.business_id
    assert claims["sub"] == world.user_id
    assert claims["iss"] == API
    assert claims["aud"] == world.client_id
    assert claims["typ"] == "session"
    assert claims["iat"] == now
    assert claims["nbf"] == now
    assert claims["exp"] - claims["iat"] == TTL


async def test_token_is_es256_with_a_published_kid(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "ES256"
    assert header["kid"] in kids(await served_jwks(client))


async def test_signature_verifies_against_the_served_jwks(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    jwks = await served_jwks(client)
    verify(token, jwks, world.client_id)
    # The same check refuses an altered payload: the verification is real.
    head, payload, signature = token.split(".")
    forged_payload = jwt.utils.base64url_encode(
        jwt.utils.base64url_decode(payload).replace(
            world.user_id.encode(), b"u" * len(world.user_id)
        )
    ).decode()
    with pytest.raises(jwt.InvalidSignatureError):
        verify(f"{head}.{forged_payload}.{signature}", jwks, world.client_id)


async def test_each_token_has_its_own_jti(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    jtis = []
    for _ in range(3):
        token = await session_token(client, admin_headers, world)
        jtis.append(jwt.decode(token, options={"verify_signature": False})["jti"])
    assert all(isinstance(jti, str) and jti for jti in jtis)
    assert len(set(jtis)) == 3


@before_storage
async def test_discovery_lists_the_jwks_uri(client):
    response = await client.get("/.well-known/oauth-authorization-server")
    body = await response.get_json()
    assert body["jwks_uri"] == API + JWKS_PATH


async def test_jwks_publishes_public_ec_keys_only(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    await session_token(client, admin_headers, world)
    jwks = await served_jwks(client)
    assert len(jwks["keys"]) >= 1
    for key in jwks["keys"]:
        assert key["kty"] == "EC"
        assert key["crv"] == "P-256"
        assert key["alg"] == "ES256"
        assert key["use"] == "sig"
        assert "d" not in key, "private key material published"


@before_storage
async def test_jwks_may_be_cached(client):
    response = await client.get(JWKS_PATH)
    cache_control = response.headers["Cache-Control"]
    assert "public" in cache_control
    assert "max-age=" in cache_control
    assert "no-store" not in cache_control


@pytest.mark.parametrize(
    ("cause", "code"),
    [
        ("no_installation", "NO_ACTIVE_INSTALLATION"),
        ("uninstalled", "NO_ACTIVE_INSTALLATION"),
        ("not_a_member", "NOT_AN_ACTIVE_MEMBER"),
        ("membership_inactive", "NOT_AN_ACTIVE_MEMBER"),
        ("app_suspended", "APP_NOT_ACTIVE"),
        ("app_deactivated", "APP_NOT_ACTIVE"),
    ],
)
async def test_issue_conflicts(client, admin_headers, platform, cause: str, code: str):
    world = await quick_world(client, admin_headers, platform, installed=False)
    user_id = world.user_id
    if cause != "no_installation":
        await install(client, admin_headers, world)
    if cause == "uninstalled":
        ins = await installation_id(platform, world)
        response = await client.delete(f"/admin/installations/{ins}", headers=admin_headers)
        assert response.status_code == 204
    elif cause == "not_a_member":
        user_id, _ = await new_user(platform)
    elif cause == "membership_inactive":
        response = await client.put(
            f"/admin/businesses/{world.business_id}/members/{world.user_id}",
            json={"role": "owner", "active": False},
            headers=admin_headers,
        )
        assert response.status_code == 200
    elif cause.startswith("app_"):
        status = "SUSPENDED" if cause == "app_suspended" else "DEACTIVATED"
        response = await client.post(
            f"/admin/apps/{world.app_id}/status", json={"status": status}, headers=admin_headers
        )
        assert response.status_code == 200
    response = await issue(client, admin_headers, world, user_id=user_id)
    await assert_envelope(response, 409, code)


@pytest.mark.parametrize("unknown", ["app", "business", "user"])
async def test_issue_for_an_unknown_record_is_404(client, admin_headers, platform, unknown: str):
    world = await quick_world(client, admin_headers, platform)
    response = await issue(
        client,
        admin_headers,
        world,
        app_id=UNKNOWN_IDS["app"] if unknown == "app" else None,
        business_id=UNKNOWN_IDS["business"] if unknown == "business" else None,
        user_id=UNKNOWN_IDS["user"] if unknown == "user" else None,
    )
    await assert_envelope(response, 404, f"{unknown.upper()}_NOT_FOUND")


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer lp_admin_wrong"}, {"Authorization": "Basic abc"}],
    ids=["none", "wrong-token", "other-scheme"],
)
@before_storage
async def test_issue_without_the_admin_token_is_401(client, headers):
    response = await client.post(
        "/admin/session-tokens",
        json={"appId": "app", "businessId": "biz", "userId": "usr"},
        headers=headers,
    )
    await assert_envelope(response, 401, "INVALID_ADMIN_TOKEN")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"appId": "a", "businessId": "b"},
        {"appId": 1, "businessId": "b", "userId": "u"},
        {"appId": "a", "businessId": None, "userId": "u"},
        ["a", "b", "u"],
    ],
    ids=["empty", "no-user", "number", "null", "array"],
)
@before_storage
async def test_issue_with_a_bad_body_is_400(client, admin_headers, body):
    response = await client.post("/admin/session-tokens", json=body, headers=admin_headers)
    payload = await response.get_json()
    assert response.status_code == 400, payload
    assert payload["statusCode"] == 400


# --- The app bridge (application host, browser session cookie) ----------------------------------


def bridge_path(world: World, **override: str) -> str:
    params = {"app_id": world.app_id, "business_id": world.business_id, **override}
    query = "&".join(f"{k}={v}" for k, v in params.items() if v)
    return f"/bridge/session-token?{query}"


@before_storage
async def test_bridge_without_a_session_cookie_is_401(client):
    response = await client.get("/bridge/session-token?app_id=app&business_id=biz")
    await assert_envelope(response, 401, "NOT_SIGNED_IN")


@pytest.mark.parametrize(
    ("override", "missing"),
    [
        ({"app_id": ""}, ["app_id"]),
        ({"business_id": ""}, ["business_id"]),
        ({"app_id": "", "business_id": ""}, ["app_id", "business_id"]),
    ],
    ids=["app_id", "business_id", "both"],
)
@before_storage
async def test_bridge_with_missing_parameters_is_400(
    client, admin_headers, platform, override, missing
):
    world = await quick_world(client, admin_headers, platform)
    await login(client, world)
    response = await client.get(bridge_path(world, **override))
    body = await assert_envelope(response, 400, None)
    assert isinstance(body["message"], list)
    assert len(body["message"]) == len(missing)
    for name, message in zip(missing, body["message"], strict=True):
        assert name in message


async def test_bridge_issues_for_a_signed_in_member(client, admin_headers, platform, clock):
    world = await quick_world(client, admin_headers, platform)
    await login(client, world)
    response = await client.get(bridge_path(world))
    body = await response.get_json()
    assert response.status_code == 200, body
    assert body["expiresAt"] == int(clock.now()) + TTL
    claims = verify(body["sessionToken"], await served_jwks(client), world.client_id)
    assert claims["sub"] == world.user_id
    assert claims["bid"] == world.business_id


async def test_bridge_answer_is_not_cached(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    await login(client, world)
    response = await client.get(bridge_path(world))
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"


async def test_bridge_token_of_a_viewer_names_the_viewer(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    viewer_id, email = await new_user(platform)
    await set_member(client, admin_headers, world.business_id, viewer_id, "viewer")
    await login(client, replace(world, user_id=viewer_id, email=email))
    response = await client.get(bridge_path(world))
    body = await response.get_json()
    assert response.status_code == 200, body
    claims = jwt.decode(body["sessionToken"], options={"verify_signature": False})
    assert claims["sub"] == viewer_id


async def test_bridge_for_a_user_who_is_not_a_member_is_409(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    stranger_id, email = await new_user(platform)
    await login(client, replace(world, user_id=stranger_id, email=email))
    response = await client.get(bridge_path(world))
    await assert_envelope(response, 409, "NOT_AN_ACTIVE_MEMBER")


async def test_bridge_without_an_installation_is_409(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform, installed=False)
    await login(client, world)
    response = await client.get(bridge_path(world))
    await assert_envelope(response, 409, "NO_ACTIVE_INSTALLATION")


# --- Signing-key rotation (domain functions) ----------------------------------------------------


async def test_first_rotation_creates_the_signer(store, keyring):
    signer = await rotate(store, keyring, T0)
    assert signer.activates_at == T0
    assert signer.retires_at == T0 + SIGNING_KEY_PERIOD
    assert signer.expires_at == T0 + SIGNING_KEY_PERIOD + SIGNING_KEY_RETIRED_GRACE
    assert [k.kid for k in await published(store, T0)] == [signer.kid]


async def test_rotation_is_idempotent_while_the_signer_is_young(store, keyring):
    first = await rotate(store, keyring, T0)
    again = await rotate(store, keyring, T0 + SIGNING_KEY_PERIOD - SIGNING_KEY_PREPUBLISH - 1)
    assert again.kid == first.kid
    keys = await published(store, T0 + SIGNING_KEY_PERIOD - SIGNING_KEY_PREPUBLISH - 1)
    assert [k.kid for k in keys] == [first.kid]


async def test_successor_is_published_before_it_signs(store, keyring):
    first = await rotate(store, keyring, T0)
    when = T0 + SIGNING_KEY_PERIOD - SIGNING_KEY_PREPUBLISH
    signer = await rotate(store, keyring, when)
    keys = await published(store, when)
    successors = [k for k in keys if k.kid != first.kid]
    assert signer.kid == first.kid
    assert len(successors) == 1
    assert successors[0].activates_at == first.retires_at
    assert successors[0].activates_at - when == SIGNING_KEY_PREPUBLISH


async def test_successor_signs_once_the_previous_key_retires(store, keyring):
    first = await rotate(store, keyring, T0)
    await rotate(store, keyring, T0 + SIGNING_KEY_PERIOD - SIGNING_KEY_PREPUBLISH)
    before = await rotate(store, keyring, first.retires_at - 1)
    after = await rotate(store, keyring, first.retires_at)
    assert before.kid == first.kid
    assert after.kid != first.kid
    assert after.activates_at == first.retires_at
    # The retired key stays published for its grace.
    assert first.kid in [k.kid for k in await published(store, first.retires_at)]


async def test_successor_is_served_in_the_jwks_before_it_signs(
    client, admin_headers, platform, clock
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    current = jwt.get_unverified_header(token)["kid"]
    clock.advance(SIGNING_KEY_PERIOD - SIGNING_KEY_PREPUBLISH)
    await Scheduler(platform).cleanup_once()
    served = kids(await served_jwks(client))
    assert current in served
    assert len(served) == 2
    still = jwt.get_unverified_header(await session_token(client, admin_headers, world))["kid"]
    assert still == current
    clock.advance(SIGNING_KEY_PREPUBLISH)
    token = await session_token(client, admin_headers, world)
    successor = jwt.get_unverified_header(token)["kid"]
    assert successor != current
    assert successor in served


async def test_token_of_the_previous_key_still_exchanges_after_rotation(
    client, admin_headers, platform, clock
):
    world = await quick_world(client, admin_headers, platform)
    first = await rotate(platform.store, platform.keyring, clock.now())
    clock.set(first.retires_at - 10)
    old = await session_token(client, admin_headers, world)
    clock.advance(20)
    new = await session_token(client, admin_headers, world)
    old_kid = jwt.get_unverified_header(old)["kid"]
    assert old_kid == first.kid
    assert jwt.get_unverified_header(new)["kid"] != old_kid
    response = await exchange(client, world, old)
    assert response.status_code == 200, await response.get_json()


@pytest.mark.parametrize("served", [True, False], ids=["within-grace", "after-grace"])
async def test_retired_key_leaves_the_jwks_after_its_grace(
    client, admin_headers, platform, clock, served: bool
):
    first = await rotate(platform.store, platform.keyring, clock.now())
    clock.set(first.retires_at)
    await rotate(platform.store, platform.keyring, clock.now())
    clock.set(first.retires_at + SIGNING_KEY_RETIRED_GRACE - (1 if served else 0))
    assert (first.kid in kids(await served_jwks(client))) is served


async def test_token_of_a_key_past_its_grace_is_refused(client, admin_headers, platform, clock):
    world = await quick_world(client, admin_headers, platform)
    first = await rotate(platform.store, platform.keyring, clock.now())
    clock.set(first.retires_at - 10)
    old = await session_token(client, admin_headers, world)
    clock.set(first.expires_at)
    body = await (await exchange(client, world, old)).get_json()
    assert body["error"] == "invalid_grant"


async def test_cleanup_creates_a_signer_on_an_empty_store(platform, clock):
    await Scheduler(platform).cleanup_once()
    keys = await published(platform.store, clock.now())
    assert len(keys) == 1
    assert keys[0].activates_at <= clock.now() < keys[0].retires_at


async def test_cleanup_publishes_the_successor_in_time(platform, clock):
    scheduler = Scheduler(platform)
    await scheduler.cleanup_once()
    (first,) = await published(platform.store, clock.now())
    clock.set(first.retires_at - SIGNING_KEY_PREPUBLISH)
    await scheduler.cleanup_once()
    keys = await published(platform.store, clock.now())
    assert [k.kid for k in keys] == [first.kid, keys[1].kid]
    assert keys[1].activates_at == first.retires_at


async def test_cleanup_purges_a_key_past_its_grace(platform, clock):
    scheduler = Scheduler(platform)
    await scheduler.cleanup_once()
    (first,) = await published(platform.store, clock.now())
    clock.set(first.expires_at - 1)
    kept = await scheduler.cleanup_once()
    assert kept["signing_key"] == 0
    clock.set(first.expires_at)
    removed = await scheduler.cleanup_once()
    assert removed["signing_key"] == 1
    async with platform.store.transaction() as tx:
        count = await tx.fetchval("SELECT COUNT(*) FROM signing_keys WHERE kid = $1", first.kid)
    assert count == 0


async def test_cleanup_purges_a_spent_jti_once_its_token_is_dead(
    client, admin_headers, platform, clock
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    assert (await exchange(client, world, token)).status_code == 200
    scheduler = Scheduler(platform)
    kept = await scheduler.cleanup_once()
    assert kept["spent_session_token"] == 0
    # Kept a day (the purge grace of codes and tokens) past the token's last usable second.
    clock.advance(TTL + SKEW + EXPIRED_ROW_GRACE - 1)
    kept = await scheduler.cleanup_once()
    assert kept["spent_session_token"] == 0
    clock.advance(1)
    removed = await scheduler.cleanup_once()
    assert removed["spent_session_token"] == 1


async def test_replay_is_refused_inside_the_skew_after_cleanup(
    client, admin_headers, platform, clock
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    assert (await exchange(client, world, token)).status_code == 200
    clock.advance(TTL + SKEW - 1)
    await Scheduler(platform).cleanup_once()
    replay = await exchange(client, world, token)
    assert replay.status_code == 400
    assert (await replay.get_json())["error"] == "invalid_grant"


async def test_replay_is_refused_at_the_edge_of_the_skew_after_cleanup(
    client, admin_headers, platform, clock
):
    world = await quick_world(client, admin_headers, platform)
    token = await session_token(client, admin_headers, world)
    assert (await exchange(client, world, token)).status_code == 200
    clock.advance(TTL + SKEW)
    await Scheduler(platform).cleanup_once()
    replay = await exchange(client, world, token)
    assert replay.status_code == 400


async def foreign_key(platform: Platform, *, kid: str) -> str:
    """A signing key sealed under another root key, renamed ``kid``.

    Fresh kids are random, so the name fixes how this key sorts among them: FIRST_KID before
    every fresh kid, LAST_KID after every one.
    """
    key = await rotate(platform.store, Keyring(OTHER_ROOT_KEY), platform.now())
    async with platform.store.transaction() as tx:
        await tx.execute("UPDATE signing_keys SET kid = $1 WHERE kid = $2", kid, key.kid)
    return kid


FIRST_KID = "!foreign"
LAST_KID = "~foreign"


@pytest.mark.parametrize("foreign_kid", [FIRST_KID, LAST_KID], ids=["sorts-first", "sorts-last"])
async def test_key_sealed_under_another_root_key_is_replaced(
    client, admin_headers, platform, foreign_kid: str
):
    world = await quick_world(client, admin_headers, platform)
    await foreign_key(platform, kid=foreign_kid)
    response = await issue(client, admin_headers, world)
    body = await response.get_json()
    assert response.status_code == 201, body
    assert jwt.get_unverified_header(body["sessionToken"])["kid"] != foreign_kid
    verify(body["sessionToken"], await served_jwks(client), world.client_id)


async def test_replacement_key_keeps_signing(client, admin_headers, platform, clock):
    world = await quick_world(client, admin_headers, platform)
    await foreign_key(platform, kid=FIRST_KID)
    first = await session_token(client, admin_headers, world)
    clock.advance(60)
    second = await session_token(client, admin_headers, world)
    assert jwt.get_unverified_header(first)["kid"] == jwt.get_unverified_header(second)["kid"]


@pytest.mark.parametrize("foreign_kid", [FIRST_KID, LAST_KID], ids=["sorts-first", "sorts-last"])
async def test_issuing_after_a_replacement_publishes_no_further_keys(
    client, admin_headers, platform, clock, foreign_kid: str
):
    world = await quick_world(client, admin_headers, platform)
    await foreign_key(platform, kid=foreign_kid)
    await session_token(client, admin_headers, world)
    before = kids(await served_jwks(client))
    for _ in range(2):
        clock.advance(60)
        await session_token(client, admin_headers, world)
    assert kids(await served_jwks(client)) == before


async def test_token_signed_after_replacement_exchanges(client, admin_headers, platform):
    world = await quick_world(client, admin_headers, platform)
    await foreign_key(platform, kid=FIRST_KID)
    token = await session_token(client, admin_headers, world)
    response = await exchange(client, world, token)
    assert response.status_code == 200, await response.get_json()
