"""RFC 9728 protected resource metadata for the data API (contract.md: Agents as partner apps):
the document, and the ``resource_metadata`` that every 401 of the data API names, so a client
that holds no token yet finds the authorization server and the resource to ask for."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ledgerport import catalog

from .oauth_helpers import basic, full_grant, make_world, token_request

BASE = "http://api.ledgerport.test"
METADATA_URL = f"{BASE}/.well-known/oauth-protected-resource"
_PARAM = re.compile(r'(\w+)="([^"]*)"')


def challenge_params(header: str) -> dict[str, str]:
    """A Bearer challenge's auth-params (RFC 6750 section 3), by name."""
    scheme, _, params = header.partition(" ")
    assert scheme == "Bearer", header
    return dict(_PARAM.findall(params))


async def test_the_document_names_the_resource_its_server_and_scopes(client: Any) -> None:
    response = await client.get("/.well-known/oauth-protected-resource")
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    assert response.mimetype == "application/json"
    doc = await response.get_json()
    assert doc == {
        "resource": BASE,
        "authorization_servers": [BASE],
        "scopes_supported": list(catalog.SCOPES),
        "bearer_methods_supported": ["header"],
        "dpop_signing_alg_values_supported": list(catalog.DPOP_SIGNING_ALGS),
    }
    discovery = await (await client.get("/.well-known/oauth-authorization-server")).get_json()
    assert doc["authorization_servers"] == [discovery["issuer"]]
    assert set(doc["scopes_supported"]) == set(discovery["scopes_supported"])


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer lp_at_not-a-token", "Basic dXNlcjpwYXNz", "Bearer"],
    ids=["none", "unknown token", "another scheme", "empty bearer"],
)
async def test_a_401_of_the_data_api_names_the_metadata(
    client: Any, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await client.get("/invoices", headers=headers)
    assert response.status_code == 401
    params = challenge_params(response.headers["WWW-Authenticate"])
    assert params == {"realm": "ledgerport", "resource_metadata": METADATA_URL}
    body = await response.get_json()
    assert body["code"] == "INVALID_TOKEN"


async def test_a_revoked_token_is_answered_with_the_metadata_too(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    assert (await client.get("/invoices", headers=bearer)).status_code == 200
    assert world.client_secret is not None
    revoked = await client.post(
        "/oauth/revoke",
        form={"token": tokens["access_token"]},
        headers=basic(world.client_id, world.client_secret),
    )
    assert revoked.status_code == 200
    response = await client.get("/invoices", headers=bearer)
    assert response.status_code == 401
    assert challenge_params(response.headers["WWW-Authenticate"])["resource_metadata"] == (
        METADATA_URL
    )


async def test_the_console_api_challenge_names_no_resource(client: Any) -> None:
    """A developer token is no token of the data API: the console API's 401 points nowhere."""
    response = await client.get(
        "/developer/apps/app_unknown/webhooks",
        headers={"Authorization": "Bearer lp_dev_not-a-token"},
    )
    assert response.status_code == 401
    assert "resource_metadata" not in response.headers.get("WWW-Authenticate", "")


async def test_the_resource_it_names_is_one_a_token_request_may_ask_for(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """The document's ``resource`` is accepted as RFC 8707's ``resource`` at the token
    endpoint, and the token it gives reads the data API."""
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)
    refreshed = await token_request(
        client,
        world,
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "resource": BASE},
    )
    assert refreshed.status_code == 200, await refreshed.get_json()
    access = (await refreshed.get_json())["access_token"]
    response = await client.get("/invoices", headers={"Authorization": f"Bearer {access}"})
    assert response.status_code == 200
