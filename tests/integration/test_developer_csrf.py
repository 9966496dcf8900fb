"""The console's API (``/developer/*``) and a signed-in browser: a request authenticated by the
session cookie that changes something must come from the service's own origin or carry a page's
CSRF token. ``SameSite=Lax`` alone lets a sibling subdomain's page post with the cookie."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trio

from .data_api import owner_api
from .oauth_helpers import login

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

TIMEOUT = 60
APP_HOST = "http://app.ledgerport.test"
API_HOST = "http://api.ledgerport.test"
SIBLING = "http://tools.ledgerport.test"
"""A page of the same site on another origin: ``SameSite=Lax`` lets its posts carry the cookie."""
TOKEN = "token"
"""Stands for the CSRF token of a page the browser was shown."""
FIELD = {"resourceType": "invoice", "key": "seen", "type": "TEXT"}


async def _signed_in(client: Any, admin_headers: dict[str, str]) -> tuple[str, str]:
    """A developer signed in on the test client's browser: their app's id, and the CSRF token
    of a page the service showed them."""
    api = await owner_api(client, admin_headers)
    await login(client, api.world)
    page = await (await client.get("/console")).get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token is not None
    return api.world.app_id, token[1]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 403),
        ({"Origin": "https://attacker.example"}, 403),
        ({"Origin": SIBLING}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": APP_HOST + ":8443"}, 403),
        ({"Origin": APP_HOST + ":99999"}, 403),
        ({"Origin": "http://[::1"}, 403),
        ({"Origin": APP_HOST}, 201),
        ({"Origin": API_HOST}, 201),
        ({"Sec-Fetch-Site": "same-origin"}, 201),
        ({"Sec-Fetch-Site": "same-site", "Origin": APP_HOST}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "none"}, 403),
        ({"Origin": SIBLING, "X-CSRF-Token": TOKEN}, 201),
        ({"Sec-Fetch-Site": "same-site", "X-CSRF-Token": TOKEN}, 201),
        ({"Origin": SIBLING, "X-CSRF-Token": "forged"}, 403),
        ({"X-CSRF-Token": ""}, 403),
    ],
)
async def test_a_cookie_request_that_changes_something_must_come_from_the_service(
    client: Any, admin_headers: dict[str, str], headers: dict[str, str], status: int
) -> None:
    with trio.fail_after(TIMEOUT):
        app_id, token = await _signed_in(client, admin_headers)
        sent = {name: token if value == TOKEN else value for name, value in headers.items()}
        response = await client.post(
            f"/developer/apps/{app_id}/app-data-fields", json=FIELD, headers=sent
        )
        body = await response.get_json()
        fields = await client.get(
            f"/developer/apps/{app_id}/app-data-fields", headers={"Origin": SIBLING}
        )
        kept = (await fields.get_json())["data"]

    assert response.status_code == status, body
    if status == 403:
        assert body["code"] == "CROSS_SITE_REQUEST"
        assert "X-CSRF-Token" in body["message"]
        assert kept == []  # nothing was written
    else:
        assert [f["key"] for f in kept] == ["seen"]


async def test_every_route_that_changes_something_refuses_another_origins_cookie_request(
    client: Any, admin_headers: dict[str, str], app: Any
) -> None:
    unsafe = sorted(
        (method, rule.rule)
        for rule in app.url_map.iter_rules()
        if rule.endpoint.startswith("developer.")
        for method in rule.methods or ()
        if method not in {"GET", "HEAD", "OPTIONS"}
    )
    # Rotating a signing secret, a test delivery, a test run and a rollback among them.
    assert len(unsafe) >= 20
    with trio.fail_after(TIMEOUT):
        app_id, _ = await _signed_in(client, admin_headers)
        answers = []
        for method, rule in unsafe:
            path = re.sub(r"<[^>]+>", "x", rule).replace("/apps/x/", f"/apps/{app_id}/", 1)
            response = await client.open(path, method=method, json={}, headers={"Origin": SIBLING})
            answers.append((method, path, response.status_code, await response.get_json()))

    refused = [(m, p) for m, p, status, body in answers if status == 403]
    assert refused == [(m, p) for m, p, _, _ in answers], answers
    assert {body["code"] for _, _, _, body in answers} == {"CROSS_SITE_REQUEST"}


async def test_a_developer_token_is_unaffected_by_origin(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        issued = await client.post(
            "/admin/developer-tokens", json={"userId": api.world.user_id}, headers=admin_headers
        )
        token = (await issued.get_json())["token"]
        response = await client.post(
            f"/developer/apps/{api.world.app_id}/app-data-fields",
            json=FIELD,
            headers={"Authorization": f"Bearer {token}", "Origin": SIBLING},
        )

    assert response.status_code == 201


@pytest.mark.parametrize(
    ("configured", "origin", "status"),
    [
        ("https://API.Ledgerport.test:443/base", "https://api.ledgerport.test", 201),
        ("https://api.ledgerport.test:8443", "https://api.ledgerport.test:8443", 201),
        ("https://api.ledgerport.test:8443", "https://api.ledgerport.test", 403),
        ("https://api.ledgerport.test", "http://api.ledgerport.test", 403),
        ("http://[::1]:8080", "http://[::1]:8080", 201),
    ],
)
async def test_the_services_origin_is_compared_as_a_browser_writes_it(
    platform: Any, admin_headers: dict[str, str], configured: str, origin: str, status: int
) -> None:
    from dataclasses import replace

    from ledgerport.http import create_app

    config = replace(platform.config, base_url=configured, auth_url=configured)
    client = create_app(replace(platform, config=config)).test_client()
    with trio.fail_after(TIMEOUT):
        app_id, _ = await _signed_in(client, admin_headers)
        response = await client.post(
            f"/developer/apps/{app_id}/app-data-fields", json=FIELD, headers={"Origin": origin}
        )

    assert response.status_code == status


async def test_the_document_says_when_a_cookie_request_is_refused_as_cross_site(
    client: Any,
) -> None:
    with trio.fail_after(TIMEOUT):
        document = await (await client.get("/openapi.json")).get_json()

    session = document["components"]["securitySchemes"]["session"]
    assert "X-CSRF-Token" in session["description"]
    assert "CROSS_SITE_REQUEST" in session["description"]
    operation = document["paths"]["/developer/apps/{app_id}/app-data-fields"]["post"]
    assert "403" in operation["responses"]
