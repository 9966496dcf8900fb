"""Who may install: apps:install (owner and admin by default) installs or widens; any other
member approves only scopes the business's ACTIVE installation already grants (contract.md).

The same rule on the consent page, the device verification page and the operator API.
"""

from __future__ import annotations

import html
import re
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import pytest

from .oauth_helpers import (
    REDIRECT_URI,
    World,
    add_member,
    authorize,
    device_authorize,
    device_decide,
    install,
    login,
    make_world,
    poll,
)

REFUSAL = "Only an owner or admin of the business can install this app or widen its access"
NO_INSTALL_ROLES = ("accountant", "viewer")


async def _member_world(
    client: Any, admin_headers: dict[str, str], world: World, role: str
) -> World:
    """A member with ``role`` in the world's business who is also an admin elsewhere, so the
    consent form shows (offering only where they may approve): posting the world's business
    anyway meets the rule on the server's side."""
    user_id, email, password = await add_member(client, admin_headers, world, role)
    elsewhere = await (
        await client.post("/admin/businesses", json={"name": "Elsewhere"}, headers=admin_headers)
    ).get_json()
    response = await client.put(
        f"/admin/businesses/{elsewhere['id']}/members/{user_id}",
        json={"role": "admin"},
        headers=admin_headers,
    )
    assert response.status_code == 200
    return replace(world, user_id=user_id, email=email, password=password)


async def _consent_decision(client: Any, world: World, scope: str) -> Any:
    """Approve the consent form for ``scope`` in the world's business; answers the response."""
    query = {
        "response_type": "code",
        "client_id": world.client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": scope,
        "state": "s1",
    }
    page = await (await client.get(f"/oauth/authorize?{urlencode(query)}")).get_data(as_text=True)
    request_id = re.search(r'name="request_id" value="([^"]+)"', page)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert request_id is not None, page
    assert csrf is not None
    return await client.post(
        "/oauth/authorize",
        form={
            "request_id": request_id[1],
            "csrf_token": csrf[1],
            "business_id": world.business_id,
            "decision": "approve",
        },
    )


async def _refused_on_the_page(response: Any) -> str:
    """The consent form again (400), the refusal in its summary and beside the business field
    (which says it is invalid and is described by it); answers the page."""
    text = await response.get_data(as_text=True)
    assert response.status_code == 400, text
    assert "Location" not in response.headers
    summary = re.search(r'id="problems".*?<li><a href="#business_id">(.*?)</a></li>', text, re.S)
    assert summary is not None, text
    assert html.unescape(summary[1]).strip() == REFUSAL
    beside = re.search(r'<span class="field-problem" id="business_id-problem">(.*?)</span>', text)
    assert beside is not None, text
    assert html.unescape(beside[1]).strip() == REFUSAL
    select = re.search(r'<select id="business_id"[^>]*>', text)
    assert select is not None
    assert 'aria-invalid="true"' in select[0]
    assert 'aria-describedby="business-hint business_id-problem"' in select[0]
    return text


async def _scopes_of(client: Any, admin_headers: dict[str, str], world: World) -> list[str]:
    """The ACTIVE installation's scopes, as an owner's no-op managed install answers them."""
    body = await install(client, admin_headers, world, ("invoices:read",))
    return list(body["scopes"])


@pytest.mark.parametrize("role", NO_INSTALL_ROLES)
async def test_member_without_apps_install_cannot_install_on_the_consent_page(
    client, admin_headers, role: str
) -> None:
    world = await make_world(client, admin_headers)
    member = await _member_world(client, admin_headers, world, role)
    await login(client, member)

    page = await _refused_on_the_page(await _consent_decision(client, member, "invoices:read"))

    # The request is held still: the business they may install in, chosen on the form that
    # came back, is approved.
    request_id = re.search(r'name="request_id" value="([^"]+)"', page)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    elsewhere = re.search(r'<option value="([^"]+)"[^>]*>Elsewhere', page)
    assert request_id is not None, page
    assert csrf is not None
    assert elsewhere is not None, page
    approved = await client.post(
        "/oauth/authorize",
        form={
            "request_id": request_id[1],
            "csrf_token": csrf[1],
            "business_id": elsewhere[1],
            "decision": "approve",
        },
    )
    assert approved.status_code == 303, await approved.get_data(as_text=True)
    assert "code=" in approved.headers["Location"]

    response = await client.post(
        "/admin/installations",
        json={
            "appId": world.app_id,
            "businessId": world.business_id,
            "userId": world.user_id,
            "scopes": ["customers:read"],
        },
        headers=admin_headers,
    )
    # Nothing was installed by the refused approval: the owner's install creates it now.
    assert (await response.get_json())["scopes"] == ["customers:read"]


@pytest.mark.parametrize("role", NO_INSTALL_ROLES)
async def test_member_without_apps_install_approves_within_the_installation(
    client, admin_headers, role: str
) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world, ("invoices:read", "customers:read"))
    member = await _member_world(client, admin_headers, world, role)
    await login(client, member)

    callback = await authorize(client, member, scope="invoices:read")

    assert callback["code"][0]
    assert await _scopes_of(client, admin_headers, world) == ["customers:read", "invoices:read"]


@pytest.mark.parametrize("role", NO_INSTALL_ROLES)
async def test_member_without_apps_install_cannot_widen(client, admin_headers, role: str) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world, ("invoices:read",))
    member = await _member_world(client, admin_headers, world, role)
    await login(client, member)

    await _refused_on_the_page(
        await _consent_decision(client, member, "invoices:read invoices:write")
    )
    assert await _scopes_of(client, admin_headers, world) == ["invoices:read"]


@pytest.mark.parametrize("role", ["owner", "admin"])
async def test_owner_and_admin_install_and_widen(client, admin_headers, role: str) -> None:
    world = await make_world(client, admin_headers)
    member = await _member_world(client, admin_headers, world, role)
    await login(client, member)

    await authorize(client, member, scope="invoices:read")
    await authorize(client, member, scope="invoices:write")

    assert await _scopes_of(client, admin_headers, world) == ["invoices:read", "invoices:write"]


async def test_a_business_can_grant_apps_install_to_a_role(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    response = await client.put(
        f"/admin/businesses/{world.business_id}/roles/viewer",
        json={"permissions": ["invoices:read", "apps:install"]},
        headers=admin_headers,
    )
    assert response.status_code == 200
    viewer = await _member_world(client, admin_headers, world, "viewer")
    await login(client, viewer)

    callback = await authorize(client, viewer, scope="invoices:read")

    assert callback["code"][0]


async def test_device_flow_follows_the_same_rule(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    viewer = await _member_world(client, admin_headers, world, "viewer")
    started = await (await device_authorize(client, world)).get_json()
    await login(client, viewer)

    await _refused_on_the_page(await device_decide(client, viewer, started["user_code"]))

    pending = await poll(client, world, started["device_code"])
    assert (await pending.get_json())["error"] == "authorization_pending"


async def test_device_flow_approves_within_the_installation(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world)
    viewer = await _member_world(client, admin_headers, world, "viewer")
    started = await (await device_authorize(client, world)).get_json()
    await login(client, viewer)

    response = await device_decide(client, viewer, started["user_code"])

    assert response.status_code == 200, await response.get_data(as_text=True)
    tokens = await poll(client, world, started["device_code"])
    assert tokens.status_code == 200


async def test_operator_install_for_a_viewer_is_refused(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    viewer = await _member_world(client, admin_headers, world, "viewer")

    response = await client.post(
        "/admin/installations",
        json={
            "appId": world.app_id,
            "businessId": world.business_id,
            "userId": viewer.user_id,
            "scopes": ["invoices:read"],
        },
        headers=admin_headers,
    )

    body = await response.get_json()
    assert response.status_code == 403, body
    assert body["code"] == "INSTALL_NOT_PERMITTED"
    await install(client, admin_headers, world)
    within = await install(client, admin_headers, world, user_id=viewer.user_id)
    assert within["scopes"] == ["invoices:read"]
