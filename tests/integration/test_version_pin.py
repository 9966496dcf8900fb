"""Pinning an app's API version from the developer console: only the app's developer, only a
supported version; calls without a Service-Version header then get the pin."""

from __future__ import annotations

from typing import Any

from ledgerport import catalog

from .data_api import owner_api
from .oauth_helpers import add_member


async def _developer_token(client: Any, admin_headers: dict[str, str], user_id: str) -> str:
    response = await client.post(
        "/admin/developer-tokens", json={"userId": user_id}, headers=admin_headers
    )
    token: str = (await response.get_json())["token"]
    return token


async def test_the_developer_pins_and_unpins(client: Any, admin_headers: dict[str, str]) -> None:
    api = await owner_api(client, admin_headers)
    token = await _developer_token(client, admin_headers, api.world.user_id)
    path = f"/developer/apps/{api.world.app_id}/version"
    headers = {"Authorization": f"Bearer {token}"}

    pinned = await client.put(path, json={"version": "2026-03-01"}, headers=headers)
    call_when_pinned = await api.call("GET", "/customers")
    unpinned = await client.delete(path, headers=headers)
    call_when_unpinned = await api.call("GET", "/customers")

    assert pinned.status_code == 200, await pinned.get_json()
    assert (await pinned.get_json())["pinnedVersion"] == "2026-03-01"
    assert call_when_pinned.headers["Service-Version"] == "2026-03-01"
    assert (await unpinned.get_json())["pinnedVersion"] is None
    assert call_when_unpinned.headers["Service-Version"] == catalog.CURRENT_API_VERSION


async def test_only_the_apps_developer_may_pin(client: Any, admin_headers: dict[str, str]) -> None:
    api = await owner_api(client, admin_headers)
    stranger_id, _, _ = await add_member(client, admin_headers, api.world, "owner")
    token = await _developer_token(client, admin_headers, stranger_id)

    response = await client.put(
        f"/developer/apps/{api.world.app_id}/version",
        json={"version": "2026-03-01"},
        headers={"Authorization": f"Bearer {token}"},
    )

    assert response.status_code == 404
    assert (await response.get_json())["code"] == "APP_NOT_FOUND"


async def test_unknown_version_and_no_credentials_are_refused(
    app: Any, client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    token = await _developer_token(client, admin_headers, api.world.user_id)
    path = f"/developer/apps/{api.world.app_id}/version"

    unknown = await client.put(
        path, json={"version": "2019-01-01"}, headers={"Authorization": f"Bearer {token}"}
    )
    # A browser that never signed in (the test client signed the developer in).
    anonymous = await app.test_client().put(path, json={"version": "2026-03-01"})
    wrong_token = await client.put(
        path, json={"version": "2026-03-01"}, headers={"Authorization": "Bearer lp_dev_nope"}
    )

    assert unknown.status_code == 400
    assert (await unknown.get_json())["code"] == "UNSUPPORTED_API_VERSION"
    assert anonymous.status_code == 401
    assert wrong_token.status_code == 401
