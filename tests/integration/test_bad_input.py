"""Regression tests of bad input that used to reach a handler as a library error (a 500)."""

from __future__ import annotations

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
