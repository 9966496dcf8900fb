"""One-click install from the marketplace: sign in, pick a business and the scopes shown, a
managed install, then the app's page, whose session token the app exchanges for its first
tokens. An unreviewed app installs only into its developer's sandbox businesses. And the images
a live listing shows."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

import pytest
import trio

from ledgerport import catalog

from .form_problems import beside, summary
from .oauth_helpers import World, add_member, exchange, login, make_world
from .test_listings import body
from .test_marketplace import go_live
from .webhook_world import Console

TIMEOUT = 30
APP_URL = "https://books-sync.example/embedded"
SCOPES = ["invoices:read", "customers:read"]
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
JPEG = b"\xff\xd8\xff" + b"\x01" * 64


async def _listed_app(
    client: Any,
    admin_headers: dict[str, str],
    *,
    slug: str = "books-sync",
    reviewed: bool = True,
    sandbox: bool = False,
    app_url: str | None = APP_URL,
    assets: bool = False,
) -> tuple[World, Console]:
    """A developer with a business of their own and an app listed live at ``slug``; the world
    answered names the developer, their business and the listed app."""
    developer = await make_world(client, admin_headers, sandbox=sandbox)
    fields: dict[str, Any] = {
        "name": "Books Sync",
        "type": "CONFIDENTIAL",
        "redirectUris": ["https://books-sync.example/cb"],
        "scopes": SCOPES,
        "developerUserId": developer.user_id,
        "reviewed": reviewed,
    }
    if app_url is not None:
        fields["appUrl"] = app_url
    response = await client.post("/admin/apps", json=fields, headers=admin_headers)
    assert response.status_code == 201
    app = await response.get_json()
    world = replace(
        developer, app_id=app["id"], client_id=app["clientId"], client_secret=app["clientSecret"]
    )
    response = await client.post(
        "/admin/developer-tokens", json={"userId": developer.user_id}, headers=admin_headers
    )
    console = Console(client, (await response.get_json())["token"], world.app_id)
    content = body(slug)
    if assets:
        icon = await _upload(client, console, PNG, "image/png")
        shot = await _upload(client, console, JPEG, "image/jpeg")
        content |= {"iconAssetId": icon, "screenshotAssetIds": [shot]}
    await go_live(client, admin_headers, console, content)
    return world, console


async def _upload(client: Any, console: Console, data: bytes, content_type: str) -> str:
    response = await client.post(
        f"/developer/apps/{console.app_id}/assets",
        data=data,
        headers={"Authorization": f"Bearer {console.token}", "Content-Type": content_type},
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return str((await response.get_json())["id"])


async def _page(client: Any, path: str, status: int = 200) -> str:
    response = await client.get(path)
    text = await response.get_data(as_text=True)
    assert response.status_code == status, text
    return text


def _options(page: str) -> list[str]:
    return re.findall(r'<option value="([^"]+)"', page)


async def _install(client: Any, slug: str, business_id: str, scopes: list[str]) -> tuple[int, str]:
    """Submit the install form; answers the status and where it sends the browser."""
    page = await _page(client, f"/marketplace/{slug}/install")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert csrf, page
    form = [("csrf_token", csrf[1]), ("business_id", business_id)]
    form += [("scope", scope) for scope in scopes]
    response = await client.post(
        f"/marketplace/{slug}/install",
        data="&".join(f"{k}={v}" for k, v in form),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    return response.status_code, response.headers.get("Location", "")


def _notice(page: str) -> str | None:
    """The notice a page shows (what the last form did, or why not), if any."""
    found = re.search(r'<p class="notice notice-\w+" role="(?:status|alert)">(.*?)</p>', page, re.S)
    if found is not None:
        return html.unescape(found[1])
    return "\n".join(summary(page)) or None


async def test_the_listing_offers_install_and_a_signed_out_visitor_is_sent_to_sign_in(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        await _listed_app(client, admin_headers)
        listing = await _page(client, "/marketplace/books-sync")
        response = await client.get("/marketplace/books-sync/install")
    assert 'href="/marketplace/books-sync/install"' in listing
    assert response.status_code == 303
    assert response.headers["Location"].startswith(
        "/login?next=%2Fmarketplace%2Fbooks-sync%2Finstall"
    )


async def test_one_click_install_opens_the_app_whose_first_tokens_come_from_exchange(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        developer, _ = await _listed_app(client, admin_headers)
        buyer = await make_world(client, admin_headers)
        await login(client, buyer)
        page = await _page(client, "/marketplace/books-sync/install")
        missing = await _page(client, "/marketplace/nothing-here/install", 404)
        status, location = await _install(
            client, "books-sync", buyer.business_id, ["invoices:read"]
        )
        framed = await _page(client, location)
        token = await (
            await client.get(
                f"/bridge/session-token?app_id={developer.app_id}&business_id={buyer.business_id}"
            )
        ).get_json()
        first = await exchange(client, developer, token["sessionToken"])
        tokens = await first.get_json()
    assert f"Signed in as <strong>{buyer.email}</strong>" in page
    assert "Nothing is listed here" in missing
    assert "Install Books Sync" in page
    assert f"Books Sync is made by {developer.email}" in page
    assert _options(page) == [buyer.business_id]
    for scope in SCOPES:
        assert catalog.SCOPE_DESCRIPTIONS[scope] in page
        assert f'name="scope" value="{scope}" checked' in page
    assert status == 303
    assert location == f"/apps/{developer.app_id}?business_id={buyer.business_id}"
    assert f'src="{APP_URL}"' in framed
    assert first.status_code == 200, tokens
    assert tokens["scope"] == "invoices:read"  # the scopes picked, not every scope shown
    assert tokens["refresh_token"]


async def test_installing_again_widens_the_installation_and_says_so_in_the_picker(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        developer, _ = await _listed_app(client, admin_headers, app_url=None)
        buyer = await make_world(client, admin_headers)
        await login(client, buyer)
        await _install(client, "books-sync", buyer.business_id, ["invoices:read"])
        page = await _page(client, "/marketplace/books-sync/install")
        status, location = await _install(
            client, "books-sync", buyer.business_id, ["customers:read"]
        )
        shown = await _page(client, location)
        async with platform.store.transaction() as tx:
            rows = await tx.fetch(
                "SELECT scopes, state FROM installations WHERE app_id = $1 AND business_id = $2",
                developer.app_id,
                buyer.business_id,
            )
            events = await tx.fetch(
                "SELECT type FROM events WHERE business_id = $1 AND type LIKE 'app.%' ORDER BY seq",
                buyer.business_id,
            )
    assert "Acme (installed)" in page
    assert status == 303
    # An app without a page of its own: back to the listing, saying where it went.
    assert location == "/marketplace/books-sync"
    assert _notice(shown) == "Books Sync is installed in Acme"
    assert len(rows) == 1
    assert rows[0]["state"] == "ACTIVE"
    assert sorted(json.loads(rows[0]["scopes"])) == sorted(SCOPES)
    assert [row["type"] for row in events] == ["app.installed", "app.scopes_updated"]


@pytest.mark.parametrize(
    ("case", "field", "notice"),
    [
        ("no scope", "scopes", "Tick at least one kind of access to install the app"),
        ("unregistered scope", "scopes", "The app asked for access it has not registered"),
        ("another business", "business_id", "That business cannot be chosen here"),
        ("unknown business", "business_id", "That business cannot be chosen here"),
    ],
)
async def test_a_refused_install_goes_back_to_the_form_saying_why(
    client: Any, admin_headers: dict[str, str], platform: Any, case: str, field: str, notice: str
) -> None:
    with trio.fail_after(TIMEOUT):
        developer, _ = await _listed_app(client, admin_headers)
        buyer = await make_world(client, admin_headers)
        business_id = {
            "another business": developer.business_id,  # the buyer is no member there
            "unknown business": f"bus_{'0' * 24}",
        }.get(case, buyer.business_id)
        scopes = {"no scope": [], "unregistered scope": ["payments:write"]}.get(
            case, ["invoices:read"]
        )
        await login(client, buyer)
        status, location = await _install(client, "books-sync", business_id, scopes)
        page = await _page(client, location)
        async with platform.store.transaction() as tx:
            installed = await tx.fetchval(
                "SELECT COUNT(*) FROM installations WHERE app_id = $1 AND business_id <> $2",
                developer.app_id,
                developer.business_id,
            )
    assert status == 303
    path, _, query = location.partition("?")
    assert path == "/marketplace/books-sync/install"
    assert parse_qs(query) == {
        "business_id": [business_id],
        "chosen": ["1"],
        **({"scope": scopes} if scopes else {}),
    }
    assert (_notice(page) or "").startswith(notice)
    assert (beside(page, field) or "").startswith(notice)  # beside the field at fault
    assert summary(page) == [beside(page, field)]
    assert int(installed) == 0


async def test_a_refused_install_keeps_what_was_chosen(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        await _listed_app(client, admin_headers)
        buyer = await make_world(client, admin_headers)
        await login(client, buyer)
        _, location = await _install(client, "books-sync", buyer.business_id, [])
        emptied = await _page(client, location)
        _, location = await _install(client, "books-sync", "bus_unknown", ["customers:read"])
        one_left = await _page(client, location)
    for scope in SCOPES:
        assert f'name="scope" value="{scope}">' in emptied  # every box as it was: unticked
    assert 'name="scope" value="customers:read" checked' in one_left
    assert 'name="scope" value="invoices:read">' in one_left
    assert f'<option value="{buyer.business_id}" selected>' in one_left


async def test_the_form_expired_installs_nothing(
    client: Any, admin_headers: dict[str, str], platform: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        developer, _ = await _listed_app(client, admin_headers)
        buyer = await make_world(client, admin_headers)
        await login(client, buyer)
        response = await client.post(
            "/marketplace/books-sync/install",
            form={
                "csrf_token": "forged",
                "business_id": buyer.business_id,
                "scope": "invoices:read",
            },
        )
        async with platform.store.transaction() as tx:
            installed = await tx.fetchval(
                "SELECT COUNT(*) FROM installations WHERE app_id = $1 AND business_id = $2",
                developer.app_id,
                buyer.business_id,
            )
    assert response.status_code == 303
    page = await _page(client, response.headers["Location"])
    assert _notice(page) == "The form expired: try again"
    assert 'name="scope" value="invoices:read" checked' in page
    assert 'name="scope" value="customers:read">' in page
    assert int(installed) == 0


async def test_a_member_who_may_not_install_apps_is_told_to_ask_an_owner(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        await _listed_app(client, admin_headers)
        viewer = await make_world(client, admin_headers, role="viewer")
        await login(client, viewer)
        page = await _page(client, "/marketplace/books-sync/install", 403)
    assert "ask an owner or an admin" in page


async def test_an_unreviewed_app_installs_only_into_its_developers_sandboxes(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        developer, _ = await _listed_app(client, admin_headers, reviewed=False, sandbox=True)
        # A sandbox of someone else's: not the developer's, so not offered.
        outsider = await make_world(client, admin_headers, sandbox=True)
        await login(client, outsider)
        refused = await _page(client, "/marketplace/books-sync/install", 400)
        # A colleague of the developer in the developer's sandbox, who also has a sandbox of
        # their own: only the developer's is offered, and the other one is refused.
        user_id, email, password = await add_member(client, admin_headers, developer, "admin")
        colleague = replace(developer, user_id=user_id, email=email, password=password)
        own = await client.post(
            "/admin/businesses",
            json={"name": "Own sandbox", "sandbox": True},
            headers=admin_headers,
        )
        own_id = (await own.get_json())["id"]
        await client.put(
            f"/admin/businesses/{own_id}/members/{user_id}",
            json={"role": "owner"},
            headers=admin_headers,
        )
        client.cookie_jar.clear()
        await login(client, colleague)
        page = await _page(client, "/marketplace/books-sync/install")
        status, location = await _install(client, "books-sync", own_id, ["invoices:read"])
        shown = await _page(client, location)
        done, opened = await _install(
            client, "books-sync", developer.business_id, ["invoices:read"]
        )
    assert catalog.CONSENT_NOT_REVIEWED in refused
    assert _options(page) == [developer.business_id]
    assert status == 303
    assert (_notice(shown) or "").startswith("That business cannot be chosen here")
    assert done == 303
    assert opened == f"/apps/{developer.app_id}?business_id={developer.business_id}"


async def test_a_listing_shows_its_live_images_and_only_those_are_served(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        _, console = await _listed_app(client, admin_headers, assets=True)
        live = await console.ok("GET", "/listing")
        icon = live["live"]["iconAssetId"]
        (shot,) = live["live"]["screenshotAssetIds"]
        unlisted = await _upload(client, console, PNG, "image/png")
        listing = await _page(client, "/marketplace/books-sync")
        catalogue = await _page(client, "/marketplace")
        icon_response = await client.get(f"/marketplace/assets/{icon}")
        icon_bytes = await icon_response.get_data(as_text=False)
        shot_response = await client.get(f"/marketplace/assets/{shot}")
        hidden = await client.get(f"/marketplace/assets/{unlisted}")
        unknown = await client.get("/marketplace/assets/ast_nothing")
    assert f'src="/marketplace/assets/{icon}"' in listing
    assert f'src="/marketplace/assets/{shot}"' in listing
    assert 'alt="Screenshot 1 of Books Sync"' in listing
    assert f'src="/marketplace/assets/{icon}"' in catalogue
    assert icon_response.status_code == 200
    assert icon_response.headers["Content-Type"] == "image/png"
    assert icon_response.headers["X-Content-Type-Options"] == "nosniff"
    assert "max-age=86400" in icon_response.headers["Cache-Control"]
    assert icon_bytes == PNG
    assert shot_response.headers["Content-Type"] == "image/jpeg"
    assert hidden.status_code == 404  # uploaded, but no live revision shows it
    assert unknown.status_code == 404
