"""Pushed authorization requests (RFC 9126; contract.md: Agents as partner apps): POST
/oauth/par checks and keeps a client's authorization request for 60 seconds, and
/oauth/authorize?client_id=..&request_uri=.. uses it once, by that client only."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from ledgerport.engine import Scheduler

from .oauth_helpers import (
    REDIRECT_URI,
    World,
    basic,
    decide_consent,
    login,
    make_world,
    pkce_pair,
    token_request,
)

PREFIX = "urn:ietf:params:oauth:request_uri:"


def request_params(world: World, **extra: str) -> dict[str, str]:
    return {
        "response_type": "code",
        "redirect_uri": REDIRECT_URI,
        "scope": "invoices:read",
        "state": "st-1",
        **extra,
    }


async def push(client: Any, world: World, params: dict[str, str], **kwargs: Any) -> Any:
    assert world.client_secret is not None
    headers = kwargs.pop("headers", basic(world.client_id, world.client_secret))
    return await client.post("/oauth/par", form=params, headers=headers, **kwargs)


async def pushed(client: Any, world: World, **extra: str) -> str:
    response = await push(client, world, request_params(world, **extra))
    body = await response.get_json()
    assert response.status_code == 201, body
    assert response.headers["Cache-Control"] == "no-store"
    assert body["expires_in"] == 60
    assert body["request_uri"].startswith(PREFIX)
    uri: str = body["request_uri"]
    return uri


def authorize_path(client_id: str, request_uri: str, **extra: str) -> str:
    query = {"client_id": client_id, "request_uri": request_uri, **extra}
    return f"/oauth/authorize?{urlencode(query)}"


async def consent(client: Any, world: World, path: str) -> dict[str, list[str]]:
    """Approve the consent page at ``path``; the callback's query."""
    _, callback = await decide_consent(client, world, path, REDIRECT_URI)
    return callback


async def test_a_pushed_request_completes_the_code_flow(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers)
    verifier, challenge = pkce_pair()
    uri = await pushed(client, world, code_challenge=challenge, code_challenge_method="S256")
    await login(client, world)
    callback = await consent(client, world, authorize_path(world.client_id, uri))
    assert callback["state"] == ["st-1"]
    tokens = await token_request(
        client,
        world,
        {
            "grant_type": "authorization_code",
            "code": callback["code"][0],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
        },
    )
    assert tokens.status_code == 200, await tokens.get_json()


async def test_the_query_beside_the_request_uri_is_ignored(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """Only the pushed parameters count: a state or scope added in the address bar is not."""
    world = await make_world(client, admin_headers)
    uri = await pushed(client, world)
    await login(client, world)
    path = authorize_path(world.client_id, uri, state="forged", scope="customers:read")
    callback = await consent(client, world, path)
    assert callback["state"] == ["st-1"]


async def expired_page(response: Any) -> None:
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert "authorization request not found or expired" in page


async def test_a_request_uri_is_used_once(client: Any, admin_headers: dict[str, str]) -> None:
    world = await make_world(client, admin_headers)
    uri = await pushed(client, world)
    await login(client, world)
    await consent(client, world, authorize_path(world.client_id, uri))
    await expired_page(await client.get(authorize_path(world.client_id, uri)))


async def test_a_visitor_sent_to_sign_in_comes_back_to_the_same_request(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers)
    uri = await pushed(client, world)
    first = await client.get(authorize_path(world.client_id, uri))
    assert first.status_code in (302, 303)
    assert "/login" in first.headers["Location"]
    await login(client, world)
    callback = await consent(client, world, authorize_path(world.client_id, uri))
    assert "code" in callback


async def test_a_request_uri_lasts_sixty_seconds(
    client: Any, admin_headers: dict[str, str], clock: Any
) -> None:
    world = await make_world(client, admin_headers)
    uri = await pushed(client, world)
    await login(client, world)
    clock.advance(60)
    await expired_page(await client.get(authorize_path(world.client_id, uri)))


async def test_another_clients_id_cannot_use_it(client: Any, admin_headers: dict[str, str]) -> None:
    world = await make_world(client, admin_headers)
    other = await make_world(client, admin_headers)
    uri = await pushed(client, world)
    await login(client, world)
    await expired_page(await client.get(authorize_path(other.client_id, uri)))
    await expired_page(await client.get(f"/oauth/authorize?{urlencode({'request_uri': uri})}"))
    callback = await consent(client, world, authorize_path(world.client_id, uri))
    assert "code" in callback


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"redirect_uri": "https://elsewhere.example/cb"}, "invalid_request"),
        ({"response_type": "token"}, "invalid_request"),
        ({"scope": ""}, "invalid_request"),
        ({"scope": "payments:write"}, "invalid_scope"),
        ({"resource": "https://elsewhere.example/"}, "invalid_target"),
        ({"code_challenge_method": "S256"}, "invalid_request"),
        ({"request_uri": PREFIX + "x"}, "invalid_request"),
        ({"request": "eyJ.e30."}, "invalid_request"),
        ({"client_id": "someone-else"}, "invalid_request"),
    ],
    ids=[
        "unregistered redirect",
        "response type",
        "no scope",
        "unregistered scope",
        "resource elsewhere",
        "method without challenge",
        "a request uri",
        "a request object",
        "another client id",
    ],
)
async def test_a_refused_push_is_an_oauth_error(
    client: Any, admin_headers: dict[str, str], change: dict[str, str], error: str
) -> None:
    world = await make_world(client, admin_headers)
    response = await push(client, world, {**request_params(world), **change})
    body = await response.get_json()
    assert response.status_code == 400, body
    assert body["error"] == error


async def test_a_push_needs_the_clients_authentication(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers)
    response = await push(
        client, world, request_params(world), headers=basic(world.client_id, "lp_cs_wrong")
    )
    assert response.status_code == 401
    assert (await response.get_json())["error"] == "invalid_client"


async def test_a_public_client_pushes_with_its_id_and_pkce(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers, app_type="PUBLIC")
    _, challenge = pkce_pair()
    params = {**request_params(world), "client_id": world.client_id}
    refused = await client.post("/oauth/par", form=params)
    assert refused.status_code == 400
    assert "PKCE" in (await refused.get_json())["error_description"]
    response = await client.post(
        "/oauth/par",
        form={**params, "code_challenge": challenge, "code_challenge_method": "S256"},
    )
    assert response.status_code == 201, await response.get_json()


async def test_a_client_registered_to_push_may_start_no_other_way(client: Any) -> None:
    registered = await client.post(
        "/oauth/register",
        json={"redirect_uris": [REDIRECT_URI], "require_pushed_authorization_requests": True},
    )
    body = await registered.get_json()
    assert registered.status_code == 201, body
    assert body["require_pushed_authorization_requests"] is True
    query = {
        "response_type": "code",
        "client_id": body["client_id"],
        "redirect_uri": REDIRECT_URI,
        "scope": "profile:read",
    }
    response = await client.get(f"/oauth/authorize?{urlencode(query)}")
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert "must push its authorization request" in page
    pushed_answer = await client.post(
        "/oauth/par",
        form={k: v for k, v in query.items() if k != "client_id"},
        headers=basic(body["client_id"], body["client_secret"]),
    )
    assert pushed_answer.status_code == 201, await pushed_answer.get_json()


async def test_discovery_names_the_endpoint(client: Any) -> None:
    doc = await (await client.get("/.well-known/oauth-authorization-server")).get_json()
    assert doc["pushed_authorization_request_endpoint"] == "http://api.ledgerport.test/oauth/par"
    assert doc["require_pushed_authorization_requests"] is False


async def test_the_cleanup_purges_a_pushed_request_once_it_expires(
    client: Any, admin_headers: dict[str, str], platform: Any, clock: Any
) -> None:
    world = await make_world(client, admin_headers)
    await pushed(client, world)
    scheduler = Scheduler(platform)
    clock.advance(59)
    assert (await scheduler.cleanup_once())["pushed_request"] == 0
    clock.advance(1)
    assert (await scheduler.cleanup_once())["pushed_request"] == 1
