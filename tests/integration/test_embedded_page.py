"""The embedded-app page on the application host and its bridge script."""

from __future__ import annotations

import re
from typing import Any

import pytest

from .oauth_helpers import World, add_member, install, login, make_world

APP_URL = "https://books-sync.example/embedded/home"


async def _world_with_app_url(
    client: Any, admin_headers: dict[str, str], app_url: str | None = APP_URL
) -> World:
    world = await make_world(client, admin_headers)
    body: dict[str, Any] = {
        "name": "Embedded Sync",
        "type": "CONFIDENTIAL",
        "redirectUris": ["https://books-sync.example/cb"],
        "scopes": ["invoices:read"],
        "developerUserId": world.user_id,
        "reviewed": True,
    }
    if app_url is not None:
        body["appUrl"] = app_url
    app = await (await client.post("/admin/apps", json=body, headers=admin_headers)).get_json()
    world.app_id, world.client_id, world.client_secret = (
        app["id"],
        app["clientId"],
        app["clientSecret"],
    )
    return world


async def test_signed_out_visitor_is_sent_to_login(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await _world_with_app_url(client, admin_headers)

    response = await client.get(f"/apps/{world.app_id}?business_id={world.business_id}")

    assert response.status_code == 303
    assert response.headers["Location"].startswith("/login?next=")


async def test_member_sees_the_app_framed_with_a_csp_allowing_only_its_origin(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await _world_with_app_url(client, admin_headers)
    await install(client, admin_headers, world)
    await login(client, world)

    response = await client.get(f"/apps/{world.app_id}?business_id={world.business_id}")

    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    assert f'src="{APP_URL}"' in page
    assert 'data-origin="https://books-sync.example"' in page
    csp = response.headers["Content-Security-Policy"]
    assert "frame-src https://books-sync.example;" in csp
    assert "frame-ancestors 'none'" in csp
    assert "script-src 'self'" in csp
    assert response.headers["Cache-Control"] == "no-store"
    # The bridge listens before the frame exists: a frame that asks at once is answered.
    assert page.index('src="/bridge/static/bridge.js"') < page.index('<iframe id="app-frame"')


async def test_bridge_script_is_served(client: Any) -> None:
    response = await client.get("/bridge/static/bridge.js")

    assert response.status_code == 200
    script = await response.get_data(as_text=True)
    assert "/bridge/session-token?" in script
    assert "event.origin !== origin" in script


async def test_app_without_installation_shows_a_problem(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await _world_with_app_url(client, admin_headers)
    await login(client, world)

    response = await client.get(f"/apps/{world.app_id}?business_id={world.business_id}")

    assert response.status_code == 409
    assert "This app is not installed in this business" in await response.get_data(as_text=True)


async def test_inactive_member_is_refused(client: Any, admin_headers: dict[str, str]) -> None:
    world = await _world_with_app_url(client, admin_headers)
    await install(client, admin_headers, world)
    viewer_id, email, password = await add_member(client, admin_headers, world, "viewer")
    await client.put(
        f"/admin/businesses/{world.business_id}/members/{viewer_id}",
        json={"role": "viewer", "active": False},
        headers=admin_headers,
    )
    await login(client, World(world.business_id, viewer_id, email, password, "", "", None))

    response = await client.get(f"/apps/{world.app_id}?business_id={world.business_id}")

    assert response.status_code == 409
    assert "not an active member" in await response.get_data(as_text=True)


async def test_app_without_app_url_has_no_page(client: Any, admin_headers: dict[str, str]) -> None:
    world = await _world_with_app_url(client, admin_headers, app_url=None)
    await install(client, admin_headers, world)
    await login(client, world)

    response = await client.get(f"/apps/{world.app_id}?business_id={world.business_id}")

    assert response.status_code == 404
    assert re.search(r"no page to show", await response.get_data(as_text=True))


@pytest.mark.parametrize(
    "app_url",
    [
        "javascript:alert(1)",
        "http://books-sync.example/home",
        "/relative/path",
        "https://books sync.example/",
        "data:text/html,hello",
    ],
)
async def test_app_url_must_be_https_or_loopback_http(
    client: Any, admin_headers: dict[str, str], app_url: str
) -> None:
    world = await make_world(client, admin_headers)

    response = await client.post(
        "/admin/apps",
        json={
            "name": "Bad URL",
            "type": "PUBLIC",
            "redirectUris": ["https://a.example/cb"],
            "scopes": ["invoices:read"],
            "developerUserId": world.user_id,
            "appUrl": app_url,
        },
        headers=admin_headers,
    )

    assert response.status_code == 400
    body = await response.get_json()
    assert any(message.startswith("appUrl ") for message in body["message"])


async def test_loopback_http_app_url_is_accepted(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await _world_with_app_url(client, admin_headers, app_url="http://127.0.0.1:5173/app")

    assert world.client_id
