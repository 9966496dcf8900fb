"""A member made inactive gets no more tokens: every grant that issues tokens for a (user,
business) refuses with ``invalid_grant`` and no description (authorization gone).

Spec: Errors > OAuth endpoint errors (token endpoint causes: "authorization gone"); States and
transitions > Tokens and codes. Runs on both stores.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from ledgerport import catalog

from .oauth_helpers import (
    ABSENT,
    DEVICE_CODE,
    REDIRECT_URI,
    World,
    assert_oauth_error,
    authorize,
    device_authorize,
    device_decide,
    exchange,
    full_grant,
    install,
    login,
    make_world,
    pkce_pair,
    poll,
    session_token,
    token_request,
)


async def set_active(
    client: Any, admin_headers: dict[str, str], world: World, *, active: bool
) -> None:
    response = await client.put(
        f"/admin/businesses/{world.business_id}/members/{world.user_id}",
        json={"role": "owner", "active": active},
        headers=admin_headers,
    )
    assert response.status_code == 200
    assert (await response.get_json())["active"] is active


Redeem = Callable[[], Awaitable[Any]]


async def refresh_grant(client: Any, admin_headers: dict[str, str], world: World) -> Redeem:
    tokens = await full_grant(client, world)
    form = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    return lambda: token_request(client, world, form)


async def code_grant(client: Any, admin_headers: dict[str, str], world: World) -> Redeem:
    verifier, challenge = pkce_pair()
    await login(client, world)
    code = (await authorize(client, world, challenge=challenge))["code"][0]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "code_verifier": verifier,
    }
    return lambda: token_request(client, world, form)


async def device_grant(client: Any, admin_headers: dict[str, str], world: World) -> Redeem:
    started = await (await device_authorize(client, world)).get_json()
    await login(client, world)
    response = await device_decide(client, world, started["user_code"])
    assert response.status_code == 200, await response.get_data(as_text=True)
    return lambda: poll(client, world, started["device_code"])


async def exchange_grant(client: Any, admin_headers: dict[str, str], world: World) -> Redeem:
    await install(client, admin_headers, world)
    subject = await session_token(client, admin_headers, world)
    return lambda: exchange(client, world, subject)


GRANTS = [
    pytest.param(refresh_grant, id="refresh_token"),
    pytest.param(code_grant, id="authorization_code"),
    pytest.param(device_grant, id=DEVICE_CODE.rsplit(":", 1)[1]),
    pytest.param(exchange_grant, id="token-exchange"),
]


@pytest.mark.parametrize("grant", GRANTS)
async def test_active_member_is_issued_tokens(client, admin_headers, grant: Any) -> None:
    world = await make_world(client, admin_headers)
    redeem = await grant(client, admin_headers, world)
    response = await redeem()
    assert response.status_code == 200, await response.get_json()
    assert (await response.get_json())["access_token"]


@pytest.mark.parametrize("grant", GRANTS)
async def test_inactive_member_is_refused(client, admin_headers, platform, grant: Any) -> None:
    world = await make_world(client, admin_headers)
    redeem = await grant(client, admin_headers, world)
    async with platform.store.transaction() as tx:
        families = await tx.fetchval("SELECT COUNT(*) FROM token_families")
        access_tokens = await tx.fetchval("SELECT COUNT(*) FROM access_tokens")
    await set_active(client, admin_headers, world, active=False)
    await assert_oauth_error(await redeem(), 400, "invalid_grant", ABSENT)
    async with platform.store.transaction() as tx:
        assert await tx.fetchval("SELECT COUNT(*) FROM token_families") == families
        assert await tx.fetchval("SELECT COUNT(*) FROM access_tokens") == access_tokens


async def test_refresh_token_of_a_reactivated_member_works_again(client, admin_headers) -> None:
    """Refusing leaves the refresh token as it was: the member made active again refreshes."""
    world = await make_world(client, admin_headers)
    redeem = await refresh_grant(client, admin_headers, world)
    await set_active(client, admin_headers, world, active=False)
    await assert_oauth_error(await redeem(), 400, "invalid_grant", ABSENT)
    await set_active(client, admin_headers, world, active=True)
    response = await redeem()
    assert response.status_code == 200, await response.get_json()


async def test_inactive_member_refresh_is_refused_before_expiry_is_told(
    client, admin_headers, clock
) -> None:
    """Authorization gone comes first, as for an uninstall: no description says more."""
    world = await make_world(client, admin_headers)
    redeem = await refresh_grant(client, admin_headers, world)
    await set_active(client, admin_headers, world, active=False)
    clock.advance(catalog.REFRESH_TOKEN_TTL + 1)
    await assert_oauth_error(await redeem(), 400, "invalid_grant", ABSENT)


CALLS = [
    ("GET", "/customers"),  # a scope that is a role permission
    ("GET", "/events"),  # scopes that are none: the membership alone decides
    ("GET", "/app-data?resourceId=cus_000000000000000000000000"),
]


@pytest.mark.parametrize(("method", "path"), CALLS)
async def test_an_inactive_members_access_token_acts_no_more(
    client: Any, admin_headers: dict[str, str], method: str, path: str
) -> None:
    """Every data API call needs the consenting user to be an active member now, whatever
    the scope; made active again, the same token works."""
    world = await make_world(
        client, admin_headers, scopes=("customers:read", "events:read", "app-data:read")
    )
    tokens = await full_grant(client, world, scope="customers:read events:read app-data:read")
    headers = {"Authorization": f"Bearer {tokens['access_token']}"}
    before = await client.open(path, method=method, headers=headers)
    await set_active(client, admin_headers, world, active=False)
    during = await client.open(path, method=method, headers=headers)
    await set_active(client, admin_headers, world, active=True)
    after = await client.open(path, method=method, headers=headers)
    assert before.status_code in (200, 404)
    assert during.status_code == 403
    body = await during.get_json()
    assert not body["message"].startswith("Insufficient scope")
    assert after.status_code == before.status_code
