"""The OAuth lockout, the per-IP limit of unauthenticated OAuth requests, the data API's per-app
limit and the OAuth metrics.

Spec: Limits > Rate limits; contract.md: Details fixed for consistency (lockout, the Limits
table read as one scheme). Limits live in memory, so these run on SQLite only (the module
overrides ``store``) to keep the 300-call test quick.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from ledgerport import catalog
from ledgerport.storage import Store, open_sqlite

from .oauth_helpers import World, basic, full_grant, make_world

OTHER_IP = {"client": ("203.0.113.9", 40000)}


@pytest.fixture
async def store(tmp_path: Any) -> AsyncIterator[Store]:
    async with open_sqlite(str(tmp_path) + "/limits.db") as store:
        await store.migrate()
        yield store


def refresh_form(token: str = "lp_rt_unknown") -> dict[str, str]:
    return {"grant_type": "refresh_token", "refresh_token": token}


async def assert_429(response: Any, retry_after: int | None = None) -> None:
    body = await response.get_json()
    assert response.status_code == 429, body
    assert body["error"] == "temporarily_unavailable"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Pragma"] == "no-cache"
    seconds = int(response.headers["Retry-After"])
    assert 1 <= seconds <= 60
    if retry_after is not None:
        assert seconds == retry_after
    assert str(seconds) in body["error_description"]


async def lock(client: Any, world: World, **kwargs: Any) -> None:
    """Ten wrong secrets from one IP for one client: each still 401."""
    for attempt in range(catalog.LOCKOUT_FAILURES):
        response = await client.post(
            "/oauth/token",
            form=refresh_form(),
            headers=basic(world.client_id, "wrong-secret"),
            **kwargs,
        )
        assert response.status_code == 401, attempt
        assert (await response.get_json())["error"] == "invalid_client"


async def test_lockout_after_ten_failures(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    bystander = await make_world(client, admin_headers)
    assert world.client_secret is not None
    assert bystander.client_secret is not None
    tokens = await full_grant(client, world)
    right = basic(world.client_id, world.client_secret)
    await lock(client, world)
    # The 11th, wrong or right, is refused at every client-authenticated endpoint.
    await assert_429(
        await client.post("/oauth/token", form=refresh_form(), headers=basic(world.client_id, "x")),
        60,
    )
    await assert_429(
        await client.post("/oauth/token", form=refresh_form(tokens["refresh_token"]), headers=right)
    )
    await assert_429(
        await client.post("/oauth/revoke", form={"token": tokens["access_token"]}, headers=right)
    )
    await assert_429(
        await client.post(
            "/oauth/introspect", form={"token": tokens["access_token"]}, headers=right
        )
    )
    # Body credentials name the same pair.
    await assert_429(
        await client.post(
            "/oauth/token",
            form={
                **refresh_form(tokens["refresh_token"]),
                "client_id": world.client_id,
                "client_secret": world.client_secret,
            },
        )
    )
    # Another client from the same IP, and the same client from another IP, are unaffected.
    response = await client.post(
        "/oauth/introspect",
        form={"token": "lp_at_nothing"},
        headers=basic(bystander.client_id, bystander.client_secret),
    )
    assert response.status_code == 200
    response = await client.post(
        "/oauth/introspect",
        form={"token": tokens["access_token"]},
        headers=right,
        scope_base=OTHER_IP,
    )
    assert (await response.get_json())["active"] is True
    clock.advance(30)
    await assert_429(
        await client.post(
            "/oauth/token", form=refresh_form(tokens["refresh_token"]), headers=right
        ),
        30,
    )
    clock.advance(30)
    response = await client.post(
        "/oauth/token", form=refresh_form(tokens["refresh_token"]), headers=right
    )
    assert response.status_code == 200, await response.get_json()


async def test_nine_failures_do_not_lock(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    for _ in range(catalog.LOCKOUT_FAILURES - 1):
        response = await client.post(
            "/oauth/introspect", form={"token": "t"}, headers=basic(world.client_id, "bad")
        )
        assert response.status_code == 401
    response = await client.post(
        "/oauth/introspect",
        form={"token": "t"},
        headers=basic(world.client_id, world.client_secret),
    )
    assert response.status_code == 200


async def test_failures_at_revoke_and_introspect_count_too(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    bad = basic(world.client_id, "bad")
    for i in range(catalog.LOCKOUT_FAILURES):
        path = "/oauth/revoke" if i % 2 else "/oauth/introspect"
        assert (await client.post(path, form={"token": "t"}, headers=bad)).status_code == 401
    await assert_429(
        await client.post(
            "/oauth/token",
            form=refresh_form(),
            headers=basic(world.client_id, world.client_secret),
        )
    )


@pytest.mark.parametrize("endpoint", ["token", "revoke", "introspect"])
async def test_per_ip_limit_of_unauthenticated_requests(
    client, admin_headers, clock, endpoint: str
) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    path = f"/oauth/{endpoint}"
    limit = 30
    form = refresh_form() if endpoint == "token" else {"token": "t"}
    for i in range(limit):
        # A different unknown client each time, so no single pair locks out.
        response = await client.post(path, form=form, headers=basic(f"unknown-{i}", "s"))
        assert response.status_code == 401, i
    await assert_429(await client.post(path, form=form, headers=basic("unknown-last", "s")), 60)
    # Another IP still has its budget; an authenticating client is outside this budget.
    response = await client.post(
        path, form=form, headers=basic("unknown-x", "s"), scope_base=OTHER_IP
    )
    assert response.status_code == 401
    response = await client.post(
        path, form=form, headers=basic(world.client_id, world.client_secret)
    )
    assert response.status_code != 429
    clock.advance(60)
    response = await client.post(path, form=form, headers=basic("unknown-after", "s"))
    assert response.status_code == 401


async def test_data_api_per_app_and_business_limit(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    limit = catalog.RATE_LIMIT_APP_PER_BUSINESS.limit
    assert limit == 300
    for i in range(limit):
        response = await client.get("/invoices", headers=bearer)
        assert response.status_code == 200, i
        assert response.headers["RateLimit-Limit"] == "300"
        assert response.headers["RateLimit-Remaining"] == str(limit - i - 1)
        assert int(response.headers["RateLimit-Reset"]) >= 1
    response = await client.get("/invoices", headers=bearer)
    body = await response.get_json()
    assert response.status_code == 429, body
    assert body["statusCode"] == 429
    assert body["error"] == "Too Many Requests"
    assert body["code"] == "APP_RATE_LIMITED"
    assert isinstance(body["message"], str)
    assert response.headers["Retry-After"] == "60"
    clock.advance(60)
    response = await client.get("/invoices", headers=bearer)
    assert response.status_code == 200


async def test_oauth_metrics(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await full_grant(client, world)
    await lock(client, world)
    await client.post(
        "/oauth/token",
        form={"grant_type": "password"},
        headers=basic(world.client_id, world.client_secret or ""),
    )
    text = await (await client.get("/metrics")).get_data(as_text=True)

    def value(name: str, **labels: str) -> float:
        for line in text.splitlines():
            match = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
            if match and all(f'{k}="{v}"' in match[1] for k, v in labels.items()):
                return float(match[2])
        raise AssertionError(f"{name} {labels} not in /metrics")

    assert (
        value("ledgerport_oauth_grants_total", grant_type="authorization_code", outcome="ok") == 1
    )
    assert value("ledgerport_oauth_grants_total", outcome="invalid_client") == 10
    assert value("ledgerport_oauth_client_auth_failures_total", endpoint="token") == 10
    assert value("ledgerport_oauth_lockouts_total", endpoint="token") == 1
