"""Regression tests of bad input that used to reach a handler as a library error (a 500)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .oauth_helpers import (
    REDIRECT_URI,
    assert_oauth_error,
    authorize,
    full_grant,
    login,
    make_world,
    token_request,
)


@pytest.mark.parametrize("cursor", ["c²", "c" + "9" * 5000, "c\u0661\u0662", "c-1", "c"])
async def test_invoice_cursor_of_odd_digits_is_a_validation_error(
    client: Any, admin_headers: dict[str, str], cursor: str
) -> None:
    world = await make_world(client, admin_headers)
    tokens = await full_grant(client, world)

    response = await client.get(
        "/invoices",
        query_string={"cursor": cursor},
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
    )

    body = await response.get_json()
    assert response.status_code == 400, body
    assert body["message"] == ["cursor is not a cursor this list returned"]


async def test_non_ascii_verifier_of_a_plain_challenge_fails_pkce(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    callback = await authorize(client, world, challenge="a" * 43, method="plain")

    response = await token_request(
        client,
        world,
        {
            "grant_type": "authorization_code",
            "code": callback["code"][0],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": "é" * 43,
        },
    )

    await assert_oauth_error(response, 400, "invalid_grant", "PKCE verification failed")


@pytest.mark.parametrize("field", ["client_uri", "logo_uri", "tos_uri", "policy_uri"])
@pytest.mark.parametrize(
    "uri",
    ["https://[::1", "https://example.com:99999/", "http://example.com/", "https://u:p@x.example/"],
    ids=["unclosed-bracket", "port-out-of-range", "not-https", "credentials"],
)
async def test_registration_uri_fields_answer_invalid_client_metadata(
    client: Any, field: str, uri: str
) -> None:
    response = await client.post(
        "/oauth/register",
        json={"redirect_uris": ["https://app.example/cb"], field: uri},
    )

    body = await assert_oauth_error(response, 400, "invalid_client_metadata")
    assert field in body["error_description"]


async def test_registration_contacts_have_a_length_limit(client: Any) -> None:
    response = await client.post(
        "/oauth/register",
        json={"redirect_uris": ["https://app.example/cb"], "contacts": ["a" * 400 + "@x.example"]},
    )

    await assert_oauth_error(response, 400, "invalid_client_metadata")


APP = {"name": "A", "type": "PUBLIC", "redirectUris": ["https://a.example/cb"]}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/admin/installations", {"appId": "\ud800", "businessId": "b", "userId": "u",
                                  "scopes": ["invoices:read"]}),
        ("/admin/session-tokens", {"appId": "a", "businessId": "\udfff", "userId": "u"}),
        ("/admin/apps", {**APP, "scopes": ["invoices:read"], "developerUserId": "\ud800"}),
        ("/admin/developer-tokens", {"userId": "\ud800x"}),
    ],
    ids=["installation-app-id", "session-token-business-id", "developer-user-id", "user-id"],
)  # fmt: skip
async def test_lone_surrogates_in_operator_ids_are_client_errors(
    client: Any, admin_headers: dict[str, str], path: str, body: dict[str, Any]
) -> None:
    response = await client.post(
        path,
        data=json.dumps(body).encode(),
        headers={**admin_headers, "Content-Type": "application/json"},
    )

    answer = await response.get_json()
    assert 400 <= response.status_code < 500, answer
    assert answer["statusCode"] == response.status_code
