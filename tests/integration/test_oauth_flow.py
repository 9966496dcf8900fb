"""The authorization code flow with PKCE, refresh rotation, revocation and introspection."""

from __future__ import annotations

from typing import Any

import trio

from ledgerport import apps, auth, catalog

from ..stores import CountingTransaction
from .oauth_helpers import REDIRECT_URI, basic, full_grant, make_world, token_request

ROTATION_STATEMENTS = {"postgresql": 2, "sqlite": 5}
"""Statements of a refresh: its lookup, then the claim, the old access token's revocation and
the new pair, which PostgreSQL writes in one statement (one round trip)."""


async def test_code_flow_then_invoices(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 3600
    assert tokens["scope"] == "invoices:read"
    response = await client.get(
        "/invoices", headers={"Authorization": f"Bearer {tokens['access_token']}"}
    )
    assert response.status_code == 200
    assert await response.get_json() == {"data": [], "next": None}
    assert response.headers["RateLimit-Limit"] == "300"


async def test_refresh_rotation_and_reuse(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    first = await full_grant(client, world)
    response = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    )
    assert response.status_code == 200
    second = await response.get_json()
    old_access = await client.get(
        "/invoices", headers={"Authorization": f"Bearer {first['access_token']}"}
    )
    assert old_access.status_code == 401
    replay = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    )
    assert replay.status_code == 400
    assert (await replay.get_json())["error_description"] == "refresh token reuse detected"
    burned = await client.get(
        "/invoices", headers={"Authorization": f"Bearer {second['access_token']}"}
    )
    assert burned.status_code == 401


async def test_a_rotation_is_a_lookup_and_one_write_on_postgresql(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    world = await make_world(client, admin_headers)
    first = await full_grant(client, world)
    async with platform.store.transaction() as tx:
        app = await apps.get_app(tx, world.app_id)
        counting = CountingTransaction(tx)
        outcome = await auth.rotate_refresh_token(
            counting,  # type: ignore[arg-type]
            platform.keyring,
            now=platform.now(),
            app=app,
            refresh_token=first["refresh_token"],
            resource=None,
        )
    pair = outcome.unwrap()
    assert counting.statements == ROTATION_STATEMENTS[platform.store.kind]
    calls = {
        token: await client.get("/invoices", headers={"Authorization": f"Bearer {token}"})
        for token in (first["access_token"], pair.access_token)
    }
    assert [call.status_code for call in calls.values()] == [401, 200]
    replay = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
    )
    assert (await replay.get_json())["error_description"] == "refresh token reuse detected"
    again = await token_request(
        client, world, {"grant_type": "refresh_token", "refresh_token": pair.refresh_token}
    )
    assert again.status_code == 400, "the family is revoked with the reuse"


async def test_concurrent_refresh_succeeds_once(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    statuses: list[int] = []

    async def refresh() -> None:
        response = await token_request(
            client, world, {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
        )
        statuses.append(response.status_code)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(refresh)
    assert statuses.count(200) == 1


async def test_revoke_and_introspect(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    assert world.client_secret is not None
    headers = basic(world.client_id, world.client_secret)
    active = await (
        await client.post(
            "/oauth/introspect", form={"token": tokens["access_token"]}, headers=headers
        )
    ).get_json()
    assert active["active"] is True
    assert active["client_id"] == world.client_id
    assert active["sub"] == world.user_id
    response = await client.post(
        "/oauth/revoke", form={"token": tokens["refresh_token"]}, headers=headers
    )
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    gone = await (
        await client.post(
            "/oauth/introspect", form={"token": tokens["access_token"]}, headers=headers
        )
    ).get_json()
    assert gone == {"active": False}


async def test_code_reuse_and_expiry(client, admin_headers, clock) -> None:
    from .oauth_helpers import authorize, login, pkce_pair

    world = await make_world(client, admin_headers)
    verifier, challenge = pkce_pair()
    await login(client, world)
    callback = await authorize(client, world, challenge=challenge)
    form = {
        "grant_type": "authorization_code",
        "code": callback["code"][0],
        "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier,
    }
    assert (await token_request(client, world, form)).status_code == 200
    again = await token_request(client, world, form)
    assert (await again.get_json())["error_description"] == "code already used"
    callback = await authorize(client, world, challenge=challenge)
    clock.advance(catalog.AUTHORIZATION_CODE_TTL)
    late = await token_request(client, world, {**form, "code": callback["code"][0]})
    assert (await late.get_json())["error_description"] == "expired"
