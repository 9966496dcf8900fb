"""Token endpoint errors, one case per cause row of the spec's OAuth tables.

Spec: Errors > OAuth endpoint errors (token endpoint causes, invalid_grant descriptions, other
OAuth endpoints); every response carries Cache-Control: no-store and Pragma: no-cache and error
bodies are ``{error, error_description?, message}``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest

from ledgerport import catalog

from .oauth_helpers import (
    ABSENT,
    REDIRECT_URI,
    World,
    assert_oauth_error,
    authorize,
    basic,
    full_grant,
    installation_id,
    login,
    make_world,
    pkce_pair,
    set_status,
    token_request,
)

API = "http://api.ledgerport.test"


async def code_for(
    client: Any, world: World, *, challenge: str | None = None, method: str = "S256"
) -> str:
    await login(client, world)
    callback = await authorize(client, world, challenge=challenge, method=method)
    return callback["code"][0]


def code_form(code: str, verifier: str | None = None, **extra: str) -> dict[str, str]:
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI}
    if verifier is not None:
        form["code_verifier"] = verifier
    return form | extra


# --- 400 invalid_request ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case",
    [
        "missing_grant_type",
        "empty_grant_type",
        "grant_type_twice",
        "json_body",
        "missing_code",
        "missing_redirect_uri",
        "missing_refresh_token",
        "missing_code_verifier_for_pkce_code",
    ],
)
async def test_invalid_request(client, admin_headers, case: str) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    headers = basic(world.client_id, world.client_secret)
    verifier, challenge = pkce_pair()
    code = await code_for(client, world, challenge=challenge)
    full = code_form(code, verifier)
    if case == "missing_grant_type":
        response = await client.post("/oauth/token", form={}, headers=headers)
    elif case == "empty_grant_type":
        response = await client.post("/oauth/token", form={"grant_type": ""}, headers=headers)
    elif case == "grant_type_twice":
        response = await client.post(
            "/oauth/token",
            data="grant_type=authorization_code&grant_type=refresh_token&code=" + code,
            headers={**headers, "Content-Type": "application/x-www-form-urlencoded"},
        )
    elif case == "json_body":
        response = await client.post("/oauth/token", json=full, headers=headers)
    elif case == "missing_code":
        response = await client.post(
            "/oauth/token", form={k: v for k, v in full.items() if k != "code"}, headers=headers
        )
    elif case == "missing_redirect_uri":
        response = await client.post(
            "/oauth/token",
            form={k: v for k, v in full.items() if k != "redirect_uri"},
            headers=headers,
        )
    elif case == "missing_refresh_token":
        response = await client.post(
            "/oauth/token", form={"grant_type": "refresh_token"}, headers=headers
        )
    else:
        response = await client.post("/oauth/token", form=code_form(code), headers=headers)
    await assert_oauth_error(response, 400, "invalid_request")
    # The code survives every malformed attempt: the right request still redeems it.
    ok = await client.post("/oauth/token", form=full, headers=headers)
    assert ok.status_code == 200, await ok.get_json()


# --- 401 invalid_client -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "basic_used"),
    [
        ("missing_client_id", False),
        ("unknown_client_basic", True),
        ("unknown_client_body", False),
        ("suspended_basic", True),
        ("deactivated_body", False),
        ("confidential_without_secret", False),
        ("wrong_secret_basic", True),
        ("wrong_secret_body", False),
        ("public_client_presents_secret", False),
        ("public_client_presents_secret_basic", True),
    ],
)
async def test_invalid_client(client, admin_headers, case: str, basic_used: bool) -> None:
    app_type = "PUBLIC" if case.startswith("public") else "CONFIDENTIAL"
    world = await make_world(client, admin_headers, app_type=app_type)
    secret = world.client_secret or ""
    form: dict[str, str] = {"grant_type": "refresh_token", "refresh_token": "lp_rt_unknown"}
    headers: dict[str, str] = {}
    if case == "missing_client_id":
        pass
    elif case == "unknown_client_basic":
        headers = basic("no-such-client", "whatever")
    elif case == "unknown_client_body":
        form |= {"client_id": "no-such-client", "client_secret": "whatever"}
    elif case == "suspended_basic":
        await set_status(client, admin_headers, world, "SUSPENDED")
        headers = basic(world.client_id, secret)
    elif case == "deactivated_body":
        await set_status(client, admin_headers, world, "DEACTIVATED")
        form |= {"client_id": world.client_id, "client_secret": secret}
    elif case == "confidential_without_secret":
        form |= {"client_id": world.client_id}
    elif case == "wrong_secret_basic":
        headers = basic(world.client_id, secret + "x")
    elif case == "wrong_secret_body":
        form |= {"client_id": world.client_id, "client_secret": secret + "x"}
    elif case == "public_client_presents_secret":
        form |= {"client_id": world.client_id, "client_secret": "made-up-secret"}
    else:
        headers = basic(world.client_id, "made-up-secret")
    response = await client.post("/oauth/token", form=form, headers=headers)
    await assert_oauth_error(response, 401, "invalid_client")
    challenge = response.headers.get("WWW-Authenticate")
    if basic_used:
        assert challenge is not None
        assert challenge.startswith("Basic realm=")
    else:
        assert challenge is None


async def test_public_client_with_client_id_alone_authenticates(client, admin_headers) -> None:
    """Control for the public-secret row: without a secret the same client gets past auth."""
    world = await make_world(client, admin_headers, app_type="PUBLIC")
    response = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": "lp_rt_unknown"}
    )
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)


# --- 400 unsupported_grant_type ------------------------------------------------------------------


@pytest.mark.parametrize("grant_type", ["password", "client_credentials", "implicit"])
async def test_unsupported_grant_type(client, admin_headers, grant_type: str) -> None:
    world = await make_world(client, admin_headers)
    response = await token_request(client, world, {"grant_type": grant_type})
    await assert_oauth_error(response, 400, "unsupported_grant_type")


# --- 400 invalid_target --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param(["/invoices"], id="relative"),
        pytest.param(["api.ledgerport.test/invoices"], id="no-scheme"),
        pytest.param(["https://evil.example.com/"], id="other-host"),
        pytest.param(["https://api.ledgerport.test/"], id="other-scheme"),
        pytest.param(["http://api.ledgerport.test:8443/"], id="other-port"),
        pytest.param([API + "/", API + "/invoices"], id="two-resources"),
        pytest.param([API + "/" + "a" * (catalog.URI_MAX_LENGTH - len(API))], id="513-chars"),
    ],
)
async def test_invalid_target(client, admin_headers, resources: list[str]) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    code = await code_for(client, world)
    body = "&".join(
        [f"{k}={quote(v, safe='')}" for k, v in code_form(code).items()]
        + [f"resource={quote(r, safe='')}" for r in resources]
    )
    response = await client.post(
        "/oauth/token",
        data=body,
        headers={
            **basic(world.client_id, world.client_secret),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    await assert_oauth_error(response, 400, "invalid_target")


@pytest.mark.parametrize(
    "resource",
    [
        pytest.param(API + "/invoices", id="path"),
        pytest.param(API + "/" + "a" * (catalog.URI_MAX_LENGTH - len(API) - 1), id="512-chars"),
    ],
)
async def test_valid_target_accepted(client, admin_headers, resource: str) -> None:
    world = await make_world(client, admin_headers)
    code = await code_for(client, world)
    assert len(resource) <= catalog.URI_MAX_LENGTH
    response = await token_request(client, world, code_form(code, resource=resource))
    assert response.status_code == 200, await response.get_json()


async def test_a_refresh_keeps_to_the_resource_of_its_grant(client, admin_headers) -> None:
    """A grant bound to a resource refreshes for that resource or for none; another one is
    invalid_target, and leaves the refresh token unused (it refreshes after)."""
    world = await make_world(client, admin_headers)
    bound = API + "/invoices"
    await login(client, world)
    code = (await authorize(client, world, extra={"resource": bound}))["code"][0]
    response = await token_request(client, world, code_form(code))
    assert response.status_code == 200, await response.get_json()
    refresh = (await response.get_json())["refresh_token"]
    form = {"grant_type": "refresh_token", "refresh_token": refresh}
    response = await token_request(client, world, form | {"resource": API + "/customers"})
    await assert_oauth_error(response, 400, "invalid_target")
    response = await token_request(client, world, form | {"resource": bound})
    assert response.status_code == 200, await response.get_json()
    refresh = (await response.get_json())["refresh_token"]
    response = await token_request(client, world, {**form, "refresh_token": refresh})
    assert response.status_code == 200, await response.get_json()


# --- 400 invalid_grant: descriptions --------------------------------------------------------------


async def test_unknown_code_has_no_description(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    response = await token_request(client, world, code_form("lp_code_doesnotexist"))
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)


async def test_code_of_another_client_has_no_description(client, admin_headers) -> None:
    owner = await make_world(client, admin_headers)
    thief = await make_world(client, admin_headers)
    verifier, challenge = pkce_pair()
    code = await code_for(client, owner, challenge=challenge)
    response = await token_request(client, thief, code_form(code, verifier))
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)
    # The attempt neither consumed nor burned the owner's code.
    ok = await token_request(client, owner, code_form(code, verifier))
    assert ok.status_code == 200


async def test_refresh_token_of_another_client_has_no_description(client, admin_headers) -> None:
    owner = await make_world(client, admin_headers)
    thief = await make_world(client, admin_headers)
    tokens = await full_grant(client, owner)
    form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    response = await token_request(client, thief, form)
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)
    ok = await token_request(client, owner, form)
    assert ok.status_code == 200


async def test_refresh_after_uninstall_has_no_description(client, admin_headers, platform) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    ins = await installation_id(platform, world)
    assert (
        await client.delete(f"/admin/installations/{ins}", headers=admin_headers)
    ).status_code == 204
    response = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    )
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)


async def test_refresh_after_business_revokes_access_has_no_description(
    client, admin_headers
) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    response = await client.delete(
        f"/admin/businesses/{world.business_id}/apps/{world.app_id}/access",
        headers=admin_headers,
    )
    assert response.status_code == 204
    response = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    )
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)


async def test_code_expiry_boundary(client, admin_headers, clock) -> None:
    """Just inside 10 minutes the code works (the flow test covers the expired side)."""
    world = await make_world(client, admin_headers)
    verifier, challenge = pkce_pair()
    code = await code_for(client, world, challenge=challenge)
    clock.advance(catalog.AUTHORIZATION_CODE_TTL - 1)
    response = await token_request(client, world, code_form(code, verifier))
    assert response.status_code == 200


@pytest.mark.parametrize("alive", [True, False], ids=["just-before-30d", "at-30d"])
async def test_refresh_token_expiry(client, admin_headers, clock, alive: bool) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    clock.advance(catalog.REFRESH_TOKEN_TTL - (1 if alive else 0))
    response = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    )
    if alive:
        assert response.status_code == 200
    else:
        await assert_oauth_error(response, 400, "invalid_grant", "expired")


@pytest.mark.parametrize(
    "sent",
    [REDIRECT_URI + "/", REDIRECT_URI.replace("https://", "http://"), REDIRECT_URI + "?x=1"],
    ids=["trailing-slash", "scheme", "query"],
)
async def test_redirect_uri_mismatch(client, admin_headers, sent: str) -> None:
    world = await make_world(client, admin_headers)
    verifier, challenge = pkce_pair()
    code = await code_for(client, world, challenge=challenge)
    response = await token_request(client, world, code_form(code, verifier, redirect_uri=sent))
    await assert_oauth_error(response, 400, "invalid_grant", "redirect_uri mismatch")


@pytest.mark.parametrize("case", ["s256_wrong", "plain_wrong", "downgrade"])
async def test_pkce_verification_failed(client, admin_headers, case: str) -> None:
    world = await make_world(client, admin_headers)
    verifier, challenge = pkce_pair()
    other, _ = pkce_pair()
    if case == "s256_wrong":
        code = await code_for(client, world, challenge=challenge)
        sent = other
    elif case == "plain_wrong":
        code = await code_for(client, world, challenge=verifier, method="plain")
        sent = other
    else:
        code = await code_for(client, world)  # no challenge at all
        sent = verifier
    response = await token_request(client, world, code_form(code, sent))
    await assert_oauth_error(response, 400, "invalid_grant", "PKCE verification failed")


async def test_plain_challenge_with_right_verifier(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    verifier, _ = pkce_pair()
    code = await code_for(client, world, challenge=verifier, method="plain")
    response = await token_request(client, world, code_form(code, verifier))
    assert response.status_code == 200


async def test_refresh_after_client_revocation_is_revoked(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    tokens = await full_grant(client, world)
    response = await client.post(
        "/oauth/revoke",
        form={"token": tokens["refresh_token"], "token_type_hint": "refresh_token"},
        headers=basic(world.client_id, world.client_secret),
    )
    assert response.status_code == 200
    assert response.headers["Pragma"] == "no-cache"
    response = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    )
    await assert_oauth_error(response, 400, "invalid_grant", "revoked")


async def test_family_burn_then_newest_refresh_is_revoked(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    first = await full_grant(client, world)
    rotate = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    second = await (await token_request(client, world, rotate)).get_json()
    replay = await token_request(client, world, rotate)
    await assert_oauth_error(replay, 400, "invalid_grant", "refresh token reuse detected")
    newest = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": second["refresh_token"]}
    )
    await assert_oauth_error(newest, 400, "invalid_grant", "revoked")


# --- success responses carry the same cache headers ----------------------------------------------


async def test_success_responses_are_not_cached(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    verifier, challenge = pkce_pair()
    code = await code_for(client, world, challenge=challenge)
    headers = basic(world.client_id, world.client_secret)
    responses = [await token_request(client, world, code_form(code, verifier))]
    tokens = await responses[0].get_json()
    assert set(tokens) >= {"access_token", "token_type", "expires_in", "refresh_token", "scope"}
    responses.append(
        await client.post(
            "/oauth/introspect", form={"token": tokens["access_token"]}, headers=headers
        )
    )
    responses.append(
        await client.post("/oauth/revoke", form={"token": tokens["access_token"]}, headers=headers)
    )
    responses.append(await client.get("/.well-known/oauth-authorization-server"))
    for response in responses:
        assert response.status_code == 200
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["Pragma"] == "no-cache"


# --- other OAuth endpoints ----------------------------------------------------------------------


async def test_revoke_rules(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    public = await make_world(client, admin_headers, app_type="PUBLIC")
    assert world.client_secret is not None
    # Unknown token and unknown hint: 200.
    response = await client.post(
        "/oauth/revoke",
        form={"token": "lp_at_nothing", "token_type_hint": "banana"},
        headers=basic(world.client_id, world.client_secret),
    )
    assert response.status_code == 200
    # A PUBLIC client may revoke with its client_id alone.
    response = await client.post(
        "/oauth/revoke", form={"token": "lp_at_nothing", "client_id": public.client_id}
    )
    assert response.status_code == 200
    # A confidential client's id without a secret is not enough.
    response = await client.post(
        "/oauth/revoke", form={"token": "lp_at_nothing", "client_id": world.client_id}
    )
    await assert_oauth_error(response, 401, "invalid_client")
    response = await client.post(
        "/oauth/revoke",
        form={"token": "lp_at_nothing"},
        headers=basic(world.client_id, world.client_secret + "x"),
    )
    await assert_oauth_error(response, 401, "invalid_client")
    assert response.headers["WWW-Authenticate"].startswith("Basic realm=")


async def test_introspect_needs_header_credentials(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    tokens = await full_grant(client, world)
    body_creds = await client.post(
        "/oauth/introspect",
        form={
            "token": tokens["access_token"],
            "client_id": world.client_id,
            "client_secret": world.client_secret,
        },
    )
    await assert_oauth_error(body_creds, 401, "invalid_client")
    wrong = await client.post(
        "/oauth/introspect",
        form={"token": tokens["access_token"]},
        headers=basic(world.client_id, "nope"),
    )
    await assert_oauth_error(wrong, 401, "invalid_client")
    # Another client's token is reported inactive with nothing else.
    other = await make_world(client, admin_headers)
    assert other.client_secret is not None
    foreign = await client.post(
        "/oauth/introspect",
        form={"token": tokens["access_token"]},
        headers=basic(other.client_id, other.client_secret),
    )
    assert await foreign.get_json() == {"active": False}
