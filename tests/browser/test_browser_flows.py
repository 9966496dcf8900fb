"""The application host's pages in headless Chromium, as a person uses them: sign in and approve
the consent page; an embedded page and an extension whose frames get verified, renewed session
tokens from the bridge; a one-click install from the marketplace; redelivering a failed delivery
from the console page; and every page at phone width with labelled controls."""

from __future__ import annotations

import base64
import re
import time
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from playwright.sync_api import Page, expect

from ..e2e.served import Server
from .conftest import Shots
from .operator import MadeApp, Operator, Person
from .partner_app import PartnerApp

SCOPES = ["invoices:read", "customers:read", "customers:write"]
LISTING = {
    "slug": "books-sync",
    "name": "Books Sync",
    "tagline": "Your invoices, everywhere",
    "description": "Keeps your invoices in step with the tools you use.",
    "category": "invoicing",
}
RENEW_MS = 40_000
"""How often the bridge sends a fresh session token (static/bridge.js)."""
WAIT_S = 20.0


def sign_in(page: Page, shots: Shots, person: Person) -> None:
    """Fill the sign-in form the browser was sent to, and submit it."""
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Email").fill(person.email)
    page.get_by_label("Password").fill(person.password)
    shots.take(page, "sign-in")
    page.get_by_role("button", name="Sign in").click()


def made_app(operator: Operator, partner: PartnerApp, developer: Person, **extra: Any) -> MadeApp:
    app = operator.app(developer, scopes=SCOPES, redirect_uri=f"{partner.origin}/callback", **extra)
    partner.client_id, partner.client_secret = app.client_id, app.client_secret
    return app


def test_sign_in_and_approve_the_consent_page_to_land_on_the_redirect_with_code_and_state(
    page: Page, server: Server, operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner)
    query = urlencode(
        {
            "response_type": "code",
            "client_id": app.client_id,
            "redirect_uri": f"{partner.origin}/callback",
            "scope": "invoices:read customers:read",
            "state": "state-4711",
        }
    )

    page.goto(f"/oauth/authorize?{query}")
    sign_in(page, shots, owner)
    expect(
        page.get_by_role("heading", name="Books Sync wants access to your books")
    ).to_be_visible()
    expect(page.get_by_text("Signed in as")).to_contain_text(owner.email)
    expect(page.get_by_role("button", name="Not you? Switch account")).to_be_visible()
    expect(page.locator("ul.scopes li")).to_have_count(2)
    expect(page.get_by_label("Business")).to_have_value(business)
    shots.take(page, "consent")
    # By keyboard: from the business picker, Tab reaches Approve and Enter presses it.
    page.get_by_label("Business").focus()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Approve")).to_be_focused()
    with page.expect_navigation(url=re.compile(re.escape(f"{partner.origin}/callback"))):
        page.keyboard.press("Enter")
    shots.take(page, "redirected")

    landed = urlsplit(page.url)
    answer = parse_qs(landed.query)
    assert f"{landed.scheme}://{landed.netloc}{landed.path}" == f"{partner.origin}/callback"
    assert answer["state"] == ["state-4711"]
    assert answer["iss"] == [server.base]
    basic = base64.b64encode(f"{app.client_id}:{app.client_secret}".encode()).decode()
    redeemed = httpx.post(
        f"{server.base}/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": answer["code"][0],
            "redirect_uri": f"{partner.origin}/callback",
        },
        headers={"Authorization": f"Basic {basic}"},
        trust_env=False,
    )
    assert redeemed.status_code == 200, redeemed.text
    assert redeemed.json()["scope"] == "customers:read invoices:read"


def _tokens(frame_page: Page) -> Any:
    return frame_page.frame_locator("#app-frame").locator("#tokens li")


def test_an_embedded_page_and_an_extension_get_verified_session_tokens_and_renewals(
    page: Page, server: Server, operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner, app_url=f"{partner.origin}/embedded")
    operator.install(app, business, owner, SCOPES)
    operator.console(app).ok("PUT", "/extensions/customer.details", {"path": "/extension"})
    access = operator.access_token(app, business, owner)
    customer = httpx.post(
        f"{server.base}/customers",
        json={"name": "Globex"},
        headers={"Authorization": f"Bearer {access}"},
        trust_env=False,
    ).json()["id"]
    page.clock.install()

    page.goto(f"/apps/{app.id}?business_id={business}")
    sign_in(page, shots, owner)
    embedded = _tokens(page)
    expect(embedded).to_have_count(1)
    expect(embedded.first).to_have_attribute("data-verified", "true")
    expect(embedded.first).to_contain_text(f"for {owner.id} in {business}")
    shots.take(page, "embedded-page")

    page.goto(
        f"/apps/{app.id}/extensions/customer.details?"
        + urlencode({"business_id": business, "record_id": customer})
    )
    tokens = _tokens(page)
    expect(tokens).to_have_count(1)
    first = tokens.first
    expect(first).to_have_attribute("data-verified", "true")
    expect(first).to_have_attribute("data-target", "customer.details")
    expect(first).to_have_attribute("data-record", customer)
    expect(first).to_have_attribute("data-business", business)
    frame_src = page.locator("#app-frame").get_attribute("src") or ""
    assert f"ledgerport_record={customer}" in frame_src
    assert "allow-top-navigation" not in (page.locator("#app-frame").get_attribute("sandbox") or "")
    shots.take(page, "extension")

    # The bridge renews before the 50-second token expires: each 40 s, a fresh token.
    page.clock.run_for(RENEW_MS + 1_000)
    expect(tokens).to_have_count(2)
    page.clock.run_for(RENEW_MS)
    expect(tokens).to_have_count(3)
    jtis = [tokens.nth(n).get_attribute("data-jti") for n in range(3)]
    verified = [tokens.nth(n).get_attribute("data-verified") for n in range(3)]
    shots.take(page, "extension-renewed")
    assert verified == ["true", "true", "true"]
    assert len(set(jtis)) == 3
    assert all(jtis)


def test_one_click_install_from_the_marketplace(
    page: Page, server: Server, operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    studio = operator.business("Sync Studio")
    developer = operator.person("Dev Eloper", studio)
    app = made_app(operator, partner, developer, app_url=f"{partner.origin}/embedded?connect=1")
    operator.list_live(app, LISTING)
    shop = operator.business("Corner Shop")
    buyer = operator.person("Bea Buyer", shop)

    page.goto("/marketplace")
    page.get_by_label("Search by name").fill("sync")
    page.get_by_role("button", name="Search").click()
    shots.take(page, "catalogue")
    page.get_by_role("link", name="Books Sync").click()
    expect(page.get_by_role("heading", name="Books Sync", exact=True)).to_be_visible()
    shots.take(page, "listing")
    page.get_by_role("link", name="Install Books Sync").click()
    sign_in(page, shots, buyer)
    expect(page.get_by_role("heading", name="Install Books Sync")).to_be_visible()
    expect(page.get_by_text("Signed in as")).to_contain_text(buyer.email)
    page.get_by_label("Business").select_option(shop)
    for scope in SCOPES:
        expect(page.locator(f'input[name="scope"][value="{scope}"]')).to_be_checked()
    page.locator('input[name="scope"][value="customers:write"]').uncheck()
    shots.take(page, "install-form")
    page.get_by_role("button", name="Install").click()

    page.wait_for_url(re.compile(re.escape(f"/apps/{app.id}?business_id={shop}")))
    # The host's frame around the app: the app, the business, where the install went.
    expect(page.get_by_role("status")).to_have_text("Books Sync is installed in Corner Shop")
    expect(page.get_by_role("heading", level=1)).to_have_text("B Books Sync")
    expect(page.locator(".host-bar")).to_contain_text("in Corner Shop")
    connected = page.frame_locator("#app-frame").locator("#connected")
    expect(connected).to_have_text("Connected with customers:read invoices:read")
    shots.take(page, "installed-app")


def test_redeliver_a_failed_delivery_from_the_console_page(
    page: Page, server: Server, operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    developer = operator.person("Dev Eloper", business)
    app = made_app(operator, partner, developer)
    operator.install(app, business, developer, SCOPES)
    console = operator.console(app)
    webhook = console.ok(
        "POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": ["customer.created"]}
    )
    partner.hook_statuses = [500] * 6  # every attempt fails: the delivery ends failed
    access = operator.access_token(app, business, developer)
    created = httpx.post(
        f"{server.base}/customers",
        json={"name": "Globex"},
        headers={"Authorization": f"Bearer {access}"},
        trust_env=False,
    )
    assert created.status_code == 201
    deliveries = f"/webhooks/{webhook['id']}/deliveries"
    deadline = time.monotonic() + WAIT_S
    while console.ok("GET", deliveries)["data"][0]["status"] != "failed":
        assert time.monotonic() < deadline, console.ok("GET", deliveries)
        time.sleep(0.1)
    delivery = console.ok("GET", deliveries)["data"][0]["id"]

    page.goto(f"/console/apps/{app.id}/webhooks")
    sign_in(page, shots, developer)
    row = page.locator(f'tr[id="{webhook["id"]}"]')
    expect(row).to_contain_text("failed")
    expect(row).to_contain_text("Answered HTTP 500")
    shots.take(page, "console-failed-delivery")
    row.get_by_role("link", name=re.compile("^Newest delivery of")).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(delivery)
    page.get_by_role("button", name="Redeliver").click()
    expect(page.get_by_role("status")).to_have_text(f"Delivery {delivery} queued again")
    shots.take(page, "console-redelivered")

    deadline = time.monotonic() + WAIT_S
    while console.ok("GET", deliveries)["data"][0]["status"] != "delivered":
        assert time.monotonic() < deadline, console.ok("GET", deliveries)
        time.sleep(0.1)
    page.reload()
    expect(page.locator(".page-head .badges")).to_contain_text("delivered")
    shots.take(page, "console-delivered")
    assert len(partner.hooks) == 7
    assert {hook["id"] for hook in partner.hooks} == {partner.hooks[0]["id"]}
