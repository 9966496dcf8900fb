"""An app's extension on the application host: framed for a signed-in member with its record's
context, a CSP that allows only the app's origin, sandbox flags, and the bridge that renews its
session tokens; the problems are pages."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from .oauth_helpers import World, install, login, make_world
from .webhook_world import Console

APP_URL = "https://books-sync.example/app/"


RECORD_ID = "inv_0123456789abcdef01234567"
"""A well-formed invoice id: the page passes it on without looking it up."""


async def _world(client: Any, admin_headers: dict[str, str]) -> tuple[World, Console]:
    """A business, its owner who develops an app with an App URL and invoices:read, and the
    console as the owner."""
    world = await make_world(client, admin_headers)
    app = await (
        await client.post(
            "/admin/apps",
            json={
                "name": "Books Sync",
                "type": "CONFIDENTIAL",
                "redirectUris": ["https://books-sync.example/cb"],
                "scopes": ["invoices:read", "customers:read"],
                "developerUserId": world.user_id,
                "reviewed": True,
                "appUrl": APP_URL,
            },
            headers=admin_headers,
        )
    ).get_json()
    world.app_id, world.client_id, world.client_secret = (
        app["id"],
        app["clientId"],
        app["clientSecret"],
    )
    token = await (
        await client.post(
            "/admin/developer-tokens", json={"userId": world.user_id}, headers=admin_headers
        )
    ).get_json()
    return world, Console(client, token["token"], world.app_id)


def _frame_src(page: str) -> str:
    match = re.search(r'<iframe id="app-frame"[^>]* src="([^"]+)"', page)
    assert match, page
    return html.unescape(match.group(1))


async def test_a_member_sees_the_extension_framed_with_the_records_context(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world, console = await _world(client, admin_headers)
    await console.ok(
        "PUT", "/extensions/invoice.details", {"path": "/ext/invoice?v=2", "label": "Sync"}
    )
    await install(client, admin_headers, world, ("invoices:read",))
    await login(client, world)

    response = await client.get(
        f"/apps/{world.app_id}/extensions/invoice.details"
        f"?business_id={world.business_id}&record_id={RECORD_ID}"
    )

    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    assert page.index('src="/bridge/static/bridge.js"') < page.index('<iframe id="app-frame"')
    src = urlsplit(_frame_src(page))
    assert (src.scheme, src.netloc, src.path) == ("https", "books-sync.example", "/ext/invoice")
    assert parse_qs(src.query) == {
        "v": ["2"],
        "ledgerport_target": ["invoice.details"],
        "ledgerport_business": [world.business_id],
        "ledgerport_record": [RECORD_ID],
    }
    assert 'sandbox="allow-scripts allow-forms allow-same-origin allow-popups"' in page
    assert 'data-origin="https://books-sync.example"' in page
    assert 'data-target="invoice.details"' in page
    assert "<h1>Sync</h1>" in page
    # The record in words, never its bare id (this one is not in the business).
    assert "· An invoice that is not in this business</span>" in page
    assert f"· {RECORD_ID}" not in page
    csp = response.headers["Content-Security-Policy"]
    assert "frame-src https://books-sync.example;" in csp
    assert "frame-ancestors 'none'" in csp
    assert response.headers["Cache-Control"] == "no-store"


async def test_the_dashboard_card_needs_no_record(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world, console = await _world(client, admin_headers)
    await console.ok("PUT", "/extensions/dashboard.card", {"path": "/card"})
    await install(client, admin_headers, world, ("customers:read",))
    await login(client, world)

    response = await client.get(
        f"/apps/{world.app_id}/extensions/dashboard.card?business_id={world.business_id}"
    )

    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    query = parse_qs(urlsplit(_frame_src(page)).query)
    assert "ledgerport_record" not in query
    assert query["ledgerport_target"] == ["dashboard.card"]


@pytest.mark.parametrize(
    ("case", "status", "message"),
    [
        ("no such extension", 404, "The app has no extension at invoice.details"),
        (
            "scope not granted in the business",
            403,
            "The app was not granted invoices:read in this business, which its invoice.details"
            " extension needs",
        ),
        ("no record", 400, "record_id is required: invoice.details shows an invoice"),
        ("malformed record", 400, "record_id must be the id of a record"),
        ("not installed", 409, "This app is not installed in this business"),
    ],
)
async def test_what_keeps_an_extension_from_showing_is_a_problem_page(
    client: Any, admin_headers: dict[str, str], case: str, status: int, message: str
) -> None:
    world, console = await _world(client, admin_headers)
    if case != "no such extension":
        await console.ok("PUT", "/extensions/invoice.details", {"path": "/ext"})
    if case != "not installed":
        granted = (
            ("customers:read",)
            if case == "scope not granted in the business"
            else ("invoices:read",)
        )
        await install(client, admin_headers, world, granted)
    await login(client, world)
    record = {"no record": "", "malformed record": "&record_id=inv_1"}.get(
        case, f"&record_id=inv_{'0' * 24}"
    )

    response = await client.get(
        f"/apps/{world.app_id}/extensions/invoice.details?business_id={world.business_id}{record}"
    )

    page = await response.get_data(as_text=True)
    assert response.status_code == status, page
    assert "text/html" in response.headers["Content-Type"]
    assert "app-frame" not in page
    assert html.escape(message, quote=False) in page or message in html.unescape(page)


async def test_a_signed_out_visitor_is_sent_to_sign_in(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world, console = await _world(client, admin_headers)
    await console.ok("PUT", "/extensions/dashboard.card", {"path": "/card"})

    response = await client.get(
        f"/apps/{world.app_id}/extensions/dashboard.card?business_id={world.business_id}"
    )

    assert response.status_code == 303
    assert response.headers["Location"].startswith("/login?next=")


async def test_the_bridge_renews_tokens_and_passes_the_context(client: Any) -> None:
    response = await client.get("/bridge/static/bridge.js")

    script = await response.get_data(as_text=True)
    assert "var RENEW_MS = 40000;" in script
    assert "setInterval" in script
    assert "answer.context = context;" in script
    assert "event.origin !== origin" in script
