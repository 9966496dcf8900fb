"""The page's frame at a phone's width (390) and a laptop's (1280): a compact header that names
who is signed in, with the content right below it; a table that stays a table; a refused form
that opens at its summary of problems, each linking to its field; the Install button only for
whoever may install. axe-core finds no serious or critical violation on any of these pages."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from ..e2e.served import Server
from .conftest import Opened, Shots, axe_violations, open_page
from .operator import Operator, Person
from .partner_app import PartnerApp
from .test_browser_flows import LISTING, made_app, sign_in

PHONE_HEADER_MAX = 120
"""Pixels the header may take at 390 before the content (it took 340 with the navigation)."""
DESKTOP_HEADER_MAX = 80


def _header_height(page: Page) -> float:
    box = page.locator("header.site-header").bounding_box()
    assert box is not None
    return float(box["height"])


def _content_top(page: Page) -> float:
    box = page.locator("#main").bounding_box()
    assert box is not None
    return float(box["y"])


_TABLE_CELLS = """() => [...document.querySelectorAll('table.data')].map((table) => ({
  display: getComputedStyle(table.querySelector('tbody td')).display,
  cut: table.closest('.table-wrap').scrollWidth > table.closest('.table-wrap').clientWidth + 1,
}))"""


def _check_axe(opened: Opened, path: str, found: dict[str, list[dict[str, Any]]]) -> None:
    seen = axe_violations(opened.page)
    if seen:
        found[path] = seen


def _sign_in_at(page: Page, shots: Shots, person: Person, path: str) -> None:
    page.goto(f"/login?next={path}")
    sign_in(page, shots, person)
    page.wait_for_url(f"**{path}")


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_the_header_is_compact_names_who_is_signed_in_and_tables_stay_tables(
    browser: Browser,
    server: Server,
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
    axe_source: str,
    size: str,
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner, app_url=f"{partner.origin}/embedded")
    operator.list_live(app, LISTING)
    opened = open_page(browser, server, size, axe=axe_source)
    page = opened.page
    found: dict[str, list[dict[str, Any]]] = {}
    listing = f"/console/apps/{app.id}/listing"
    try:
        page.goto("/marketplace")
        _check_axe(opened, "/marketplace signed out", found)
        _sign_in_at(page, shots, owner, listing)
        header = _header_height(page)
        content_top = _content_top(page)
        cells = page.evaluate(_TABLE_CELLS)
        shots.take(page, f"listing-{size}")
        _check_axe(opened, listing, found)
        if size == "phone":
            assert header < PHONE_HEADER_MAX, header
            assert content_top < PHONE_HEADER_MAX, content_top
            side = page.get_by_role("navigation", name="Console").bounding_box()
            assert side is not None
            assert side["y"] > content_top, "the console's navigation follows the content"
            page.get_by_text("Menu", exact=True).click()
            menu = page.get_by_role("navigation", name="Menu")
            expect(menu.get_by_role("link", name="Webhooks")).to_be_visible()
            expect(page.locator(".menu-account .account-name")).to_have_text("Ada Owner")
            expect(page.get_by_role("button", name="Sign out")).to_be_visible()
            shots.take(page, "menu-open-phone")
            _check_axe(opened, f"{listing} menu open", found)
        else:
            assert header < DESKTOP_HEADER_MAX, header
            expect(page.get_by_role("navigation", name="Console")).to_be_visible()
            expect(page.locator(".account .account-name")).to_have_text("Ada Owner")
            expect(page.get_by_role("button", name="Sign out")).to_be_visible()
        assert cells, "the listing's revisions are a table"
        assert all(cell["display"] == "table-cell" for cell in cells), cells
        assert not any(cell["cut"] for cell in cells), cells

        for path in ("/device", "/marketplace/books-sync", "/login?next=/console", "/console"):
            page.goto(path)
            expect(page.get_by_role("link", name="Sign in", exact=True)).to_have_count(0)
            assert _header_height(page) < (
                PHONE_HEADER_MAX if size == "phone" else DESKTOP_HEADER_MAX
            )
            shots.take(page, f"{path.strip('/').split('?')[0].replace('/', '-')}-{size}")
            _check_axe(opened, path, found)
        page.goto("/login?next=/console")
        expect(page.get_by_role("heading", name="Continue as Ada Owner")).to_be_visible()
        page.goto("/console/apps/new")
        _check_axe(opened, "/console/apps/new", found)
    finally:
        opened.close()
    assert not found, found
    assert not opened.errors, opened.errors


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_a_refused_listing_save_opens_at_its_problems_each_linking_to_its_field(
    browser: Browser,
    server: Server,
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
    axe_source: str,
    size: str,
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner)
    opened = open_page(browser, server, size, axe=axe_source)
    page = opened.page
    listing = f"/console/apps/{app.id}/listing"
    try:
        _sign_in_at(page, shots, owner, listing)
        page.get_by_label("Address").fill("Not A Slug")
        page.get_by_label("Tagline").fill("Invoices, synced")
        page.get_by_label("Description").fill("Keeps invoices in step.")
        page.get_by_role("button", name="Save as draft").click()
        summary = page.locator("#problems")
        expect(summary).to_be_in_viewport()
        expect(summary).to_contain_text("There is a problem: the listing was not saved")
        assert page.url.endswith("#problems")
        slug = page.get_by_label("Address")
        expect(slug).to_have_attribute("aria-invalid", "true")
        expect(slug).to_have_accessible_description(
            "The listing's address: /marketplace/address. Lower-case letters and digits, in"
            " words joined by -. Address must be 3 to 60 lower-case letters and digits, in"
            " words joined by -"
        )
        shots.take(page, f"refused-{size}")
        violations = axe_violations(page)
        summary.get_by_role("link", name="Address must be").click()
        expect(slug).to_be_in_viewport()
    finally:
        opened.close()
    assert not violations, violations


def test_the_install_button_shows_only_to_whoever_may_install(
    browser: Browser,
    server: Server,
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
    axe_source: str,
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    viewer = operator.person("Vi Viewer", business, role="viewer")
    app = made_app(operator, partner, owner)
    operator.list_live(app, LISTING)
    found: dict[str, list[dict[str, Any]]] = {}
    for size, person, role in (("phone", viewer, "viewer"), ("desktop", owner, "owner")):
        opened = open_page(browser, server, size, axe=axe_source)
        page = opened.page
        try:
            _sign_in_at(page, shots, person, "/marketplace/books-sync")
            install = page.get_by_role("link", name="Install Books Sync")
            if role == "viewer":
                expect(install).to_have_count(0)
                expect(page.get_by_text("Your role in Acme Trading (viewer)")).to_be_visible()
            else:
                expect(install).to_be_visible()
            shots.take(page, f"listing-{role}-{size}")
            _check_axe(opened, f"listing as the {role}", found)
        finally:
            opened.close()
    assert not found, found
