"""RFC 7592 client configuration (contract.md: Agents as partner apps): registration answers a
registration access token and the client's configuration address, with which the client reads,
replaces and deletes its registration."""

from __future__ import annotations

from typing import Any

import pytest

from ledgerport import catalog
from ledgerport.platform import Platform

from .oauth_helpers import REDIRECT_URI, basic

BASE = "http://api.ledgerport.test"
OTHER_REDIRECT = "https://app.example.com/callback"


async def registered(client: Any, **fields: Any) -> dict[str, Any]:
    response = await client.post(
        "/oauth/register", json={"redirect_uris": [REDIRECT_URI], **fields}
    )
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == 201, body
    return body


def path_of(answer: dict[str, Any]) -> str:
    uri: str = answer["registration_client_uri"]
    assert uri.startswith(BASE)
    return uri.removeprefix(BASE)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def assert_refused(response: Any) -> None:
    body = await response.get_json()
    assert response.status_code == 401, body
    assert body["error"] == "invalid_token"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="ledgerport"'


async def test_registration_answers_the_token_and_the_address(
    client: Any, platform: Platform
) -> None:
    answer = await registered(client, client_name="Pocket Books")
    token = answer["registration_access_token"]
    assert token.startswith(catalog.REGISTRATION_TOKEN_PREFIX)
    assert answer["registration_client_uri"] == f"{BASE}/oauth/register/{answer['client_id']}"
    async with platform.store.transaction() as tx:
        row = await tx.fetchrow("SELECT * FROM apps WHERE client_id = $1", answer["client_id"])
    assert row is not None
    assert token not in " ".join(str(value) for value in dict(row).values())
    assert row["registration_token_hash"] == platform.keyring.hash_token(token)


async def test_a_read_answers_the_registration_without_secret_or_token(client: Any) -> None:
    answer = await registered(client, client_name="Pocket Books", contacts=["a@example.com"])
    response = await client.get(
        path_of(answer), headers=bearer(answer["registration_access_token"])
    )
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    body = await response.get_json()
    assert "client_secret" not in body
    assert "registration_access_token" not in body
    expected = {
        k: v for k, v in answer.items() if k not in ("client_secret", "registration_access_token")
    }
    assert body == expected


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer", "Bearer lp_reg_unknown", "Basic dXNlcjpwYXNz"],
    ids=["none", "empty", "unknown", "basic"],
)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_without_the_clients_token_nothing_is_configured(
    client: Any, method: str, authorization: str | None
) -> None:
    answer = await registered(client)
    headers = {} if authorization is None else {"Authorization": authorization}
    body = {"client_id": answer["client_id"], "redirect_uris": [OTHER_REDIRECT]}
    response = await client.open(
        path_of(answer), method=method, headers=headers, json=body if method == "PUT" else None
    )
    await assert_refused(response)
    still = await client.get(path_of(answer), headers=bearer(answer["registration_access_token"]))
    assert (await still.get_json())["redirect_uris"] == [REDIRECT_URI]


async def test_a_token_shown_at_another_clients_address_is_revoked(client: Any) -> None:
    mine, theirs = await registered(client), await registered(client)
    token = mine["registration_access_token"]
    await assert_refused(await client.get(path_of(theirs), headers=bearer(token)))
    await assert_refused(await client.get(path_of(mine), headers=bearer(token)))
    other = await client.get(path_of(theirs), headers=bearer(theirs["registration_access_token"]))
    assert other.status_code == 200


async def test_an_update_replaces_the_metadata_as_a_whole(client: Any) -> None:
    answer = await registered(
        client, client_name="Pocket Books", contacts=["a@example.com"], scope="invoices:read"
    )
    token = answer["registration_access_token"]
    response = await client.put(
        path_of(answer),
        headers=bearer(token),
        json={
            "client_id": answer["client_id"],
            "redirect_uris": [OTHER_REDIRECT],
            "client_name": "Pocket Books 2",
            "scope": "customers:read invoices:read",
        },
    )
    body = await response.get_json()
    assert response.status_code == 200, body
    assert body["redirect_uris"] == [OTHER_REDIRECT]
    assert body["client_name"] == "Pocket Books 2"
    assert body["scope"] == "customers:read invoices:read"
    assert "contacts" not in body  # left out: its default, none
    assert body["client_id_issued_at"] == answer["client_id_issued_at"]
    read = await (await client.get(path_of(answer), headers=bearer(token))).get_json()
    assert read == body


async def test_an_update_may_repeat_the_current_secret(client: Any) -> None:
    answer = await registered(client)
    response = await client.put(
        path_of(answer),
        headers=bearer(answer["registration_access_token"]),
        json={
            "client_id": answer["client_id"],
            "client_secret": answer["client_secret"],
            "redirect_uris": [REDIRECT_URI],
            "client_name": "Renamed",
        },
    )
    assert response.status_code == 200, await response.get_json()


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"client_id": "someone-else"}, "invalid_client_metadata"),
        ({"client_id": None}, "invalid_client_metadata"),
        ({"registration_access_token": "x"}, "invalid_client_metadata"),
        ({"registration_client_uri": "x"}, "invalid_client_metadata"),
        ({"client_id_issued_at": 1}, "invalid_client_metadata"),
        ({"client_secret": "lp_cs_wrong"}, "invalid_client_metadata"),
        ({"token_endpoint_auth_method": "none"}, "invalid_client_metadata"),
        ({"scope": "nonsense:read"}, "invalid_client_metadata"),
        ({"redirect_uris": ["http://example.com/cb"]}, "invalid_redirect_uri"),
    ],
    ids=[
        "another client id",
        "no client id",
        "the token",
        "the address",
        "issued at",
        "a wrong secret",
        "confidential to public",
        "an unknown scope",
        "an http redirect",
    ],
)
async def test_a_refused_update_changes_nothing(
    client: Any, change: dict[str, Any], error: str
) -> None:
    answer = await registered(client, client_name="Pocket Books")
    token = answer["registration_access_token"]
    body = {"client_id": answer["client_id"], "redirect_uris": [REDIRECT_URI], **change}
    body = {k: v for k, v in body.items() if v is not None}
    response = await client.put(path_of(answer), headers=bearer(token), json=body)
    refused = await response.get_json()
    assert response.status_code == 400, refused
    assert refused["error"] == error
    read = await (await client.get(path_of(answer), headers=bearer(token))).get_json()
    assert read["client_name"] == "Pocket Books"


async def test_a_public_client_stays_public(client: Any) -> None:
    answer = await registered(client, token_endpoint_auth_method="none")
    response = await client.put(
        path_of(answer),
        headers=bearer(answer["registration_access_token"]),
        json={"client_id": answer["client_id"], "redirect_uris": [REDIRECT_URI]},
    )
    body = await response.get_json()
    assert response.status_code == 400, body
    assert body["error"] == "invalid_client_metadata"


async def test_a_deleted_client_is_gone(client: Any, platform: Platform) -> None:
    answer = await registered(client)
    token = answer["registration_access_token"]
    credentials = basic(answer["client_id"], answer["client_secret"])
    alive = await client.post("/oauth/revoke", form={"token": "lp_at_x"}, headers=credentials)
    assert alive.status_code == 200
    response = await client.delete(path_of(answer), headers=bearer(token))
    assert response.status_code == 204
    assert await response.get_data() == b""
    assert response.headers["Cache-Control"] == "no-store"
    await assert_refused(await client.get(path_of(answer), headers=bearer(token)))
    await assert_refused(await client.delete(path_of(answer), headers=bearer(token)))
    gone = await client.post("/oauth/revoke", form={"token": "lp_at_x"}, headers=credentials)
    assert gone.status_code == 401
    assert (await gone.get_json())["error"] == "invalid_client"
    async with platform.store.transaction() as tx:
        status = await tx.fetchval(
            "SELECT status FROM apps WHERE client_id = $1", answer["client_id"]
        )
    assert status == "DEACTIVATED"


async def test_an_app_made_by_an_operator_has_no_configuration(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """Only a client registered at /oauth/register has a registration to configure."""
    response = await client.get("/oauth/register/anything", headers=bearer("lp_reg_" + "a" * 43))
    await assert_refused(response)
