"""Refused forms in headless Chromium, at a phone's width (390) and a laptop's (1280): the
endpoint, function, install and rating forms open at their summary of problems, each problem
beside its field under the field's label, the field described by it (and, but a group of
checkboxes, marked invalid), the summary's line linking to the field; and on a phone, the
header's menu lists the pages below a console section as the side navigation does. axe-core
finds no serious or critical violation on any of them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from ..e2e.served import Server
from .conftest import Shots, axe_violations, open_page
from .operator import Operator
from .partner_app import PartnerApp
from .test_browser_flows import LISTING, made_app
from .test_shell_layout import _sign_in_at


def _refused_at(page: Page, input_id: str, words: str) -> None:
    """The page opens at its summary, whose line links to ``input_id``, beside which the
    problem is said in ``words``."""
    summary = page.locator("#problems")
    expect(summary).to_be_in_viewport()
    expect(summary).to_contain_text(words)
    expect(page.locator(f"#{input_id}-problem")).to_have_text(words)
    field = page.locator(f"#{input_id}")
    expect(field).to_have_attribute("aria-describedby", re.compile(rf"\b{input_id}-problem\b"))
    summary.get_by_role("link", name=words).click()
    expect(field).to_be_in_viewport()


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_refused_console_forms_say_each_problem_beside_its_field(
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
    found: dict[str, list[dict[str, Any]]] = {}
    base = f"/console/apps/{app.id}"
    try:
        _sign_in_at(page, shots, owner, f"{base}/webhooks/new")
        page.get_by_label("Endpoint URL").fill("ftp://hooks.example/in")
        page.get_by_role("button", name="Add the endpoint").click()
        url = page.get_by_label("Endpoint URL")
        expect(url).to_have_attribute("aria-invalid", "true")
        expect(url).to_have_accessible_description(
            "https://… (http only on a loopback address of a development instance). Deliveries"
            " are POSTed here and signed with the endpoint's secret. Endpoint URL must be an"
            " absolute https URI"
        )
        shots.take(page, f"endpoint-refused-{size}")
        found["endpoint"] = axe_violations(page)
        _refused_at(page, "url", "Endpoint URL must be an absolute https URI")

        page.goto(f"{base}/functions/new")
        page.get_by_label("Name", exact=True).fill("-bad")
        page.get_by_role("button", name="Save the function").click()
        name = page.get_by_label("Name", exact=True)
        expect(name).to_have_attribute("aria-invalid", "true")
        words = "Name must be a letter or digit, then up to 63 letters, digits, _ or -"
        expect(name).to_have_accessible_description(re.compile(f"{re.escape(words)}$"))
        shots.take(page, f"function-refused-{size}")
        found["function"] = axe_violations(page)
        _refused_at(page, "name", words)
    finally:
        opened.close()
    assert not any(found.values()), found
    # The refused forms answer 400, which the browser reports; nothing else went wrong.
    assert not [e for e in opened.errors if "status of 400" not in e], opened.errors


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_refused_install_and_rating_say_each_problem_beside_its_field(
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
    operator.list_live(app, LISTING)
    operator.install(app, business, owner, ["invoices:read"])
    opened = open_page(browser, server, size, axe=axe_source)
    page = opened.page
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        _sign_in_at(page, shots, owner, "/marketplace/books-sync/install")
        for box in page.locator('#scopes input[type="checkbox"]').all():
            box.uncheck()
        page.get_by_role("button", name="Install").click()
        words = "Tick at least one kind of access to install the app"
        expect(page.locator("#scopes-problem")).to_contain_text(words)
        shots.take(page, f"install-refused-{size}")
        found["install"] = axe_violations(page)
        scopes = page.locator("#problems").get_by_role("link")
        expect(scopes).to_have_attribute("href", "#scopes")
        expect(page.locator("#problems")).to_be_in_viewport()

        page.goto("/marketplace/books-sync")
        # A browser's form sends 1 to 5 stars: a crafted 0 is how a refusal comes back.
        page.locator("#stars option").first.evaluate("option => { option.value = '0'; }")
        page.get_by_role("button", name="Rate").click()
        stars = page.get_by_label("Stars")
        expect(stars).to_have_attribute("aria-invalid", "true")
        expect(stars).to_have_accessible_description("Stars must be a whole number from 1 to 5")
        shots.take(page, f"rating-refused-{size}")
        found["rating"] = axe_violations(page)
        _refused_at(page, "stars", "Stars must be a whole number from 1 to 5")
    finally:
        opened.close()
    assert not any(found.values()), found
    assert not opened.errors, opened.errors


def test_the_phone_menu_lists_the_pages_below_a_console_section(
    browser: Browser,
    server: Server,
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
    axe_source: str,
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner)
    console = operator.console(app)
    hook = console.ok("POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": []})
    console.ok(
        "PUT", "/functions/tells", {"source": "export const handler = () => 1;\n", "events": []}
    )
    opened = open_page(browser, server, "phone", axe=axe_source)
    page = opened.page
    found: dict[str, list[dict[str, Any]]] = {}
    base = f"/console/apps/{app.id}"
    pages = {
        f"{base}/webhooks/{hook['id']}": ("Webhooks", f"{partner.origin}/hook".split("//")[1]),
        f"{base}/webhooks/{hook['id']}/edit": ("Webhooks", "Edit endpoint"),
        f"{base}/functions/tells": ("Functions", "tells"),
        f"{base}/functions/tells/versions/1": ("Functions", "Version 1"),
    }
    try:
        _sign_in_at(page, shots, owner, base)
        for path, (section, below) in pages.items():
            page.goto(path)
            page.get_by_text("Menu", exact=True).click()
            menu = page.get_by_role("navigation", name="Menu")
            expect(menu.get_by_role("link", name=section, exact=True)).to_have_attribute(
                "aria-current", "true"
            )
            here = menu.locator('.sub-nav a[aria-current="page"]')
            expect(here).to_be_visible()
            expect(menu.locator(".sub-nav a").filter(has_text=below).first).to_be_visible()
            shots.take(page, f"menu-{path.rsplit('/', 1)[1]}")
            found[path] = axe_violations(page)
    finally:
        opened.close()
    assert not any(found.values()), found
    assert not opened.errors, opened.errors
