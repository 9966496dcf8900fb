"""The console's functions as a cockpit, in headless Chromium at a phone's width (390) and a
laptop's (1280), with a screenshot of each page: the list of functions, one row each with its
health (a row still at 390 px, no table wider than the screen), a function's page with its
actions and runs, a failed run's timeline with its error open, and a rollback that shows the
diff before it asks; and the same rollback, confirmed, without JavaScript. Every page these
flows reach fits the screen, labels its controls, reads at AA contrast, and axe-core finds no
serious or critical violation on it.

The served instance runs one sandbox worker, so functions really run."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from ..e2e.served import Server, served
from .conftest import ADMIN_TOKEN, SERVER_ENV, SIZES, Opened, Shots, axe_violations, open_page
from .operator import Operator
from .partner_app import PartnerApp
from .test_browser_flows import SCOPES, made_app, sign_in
from .test_console_debugging import FIXED, THROWS, _customer, _run_of
from .test_pages_accessible import check_page


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The suite's served instance, with one sandbox worker for the functions' runs."""
    with served(tmp_path, ADMIN_TOKEN, {**SERVER_ENV, "LEDGERPORT_FUNCTION_WORKERS": "1"}) as up:
        yield up


@pytest.fixture
def sized(browser: Browser, server: Server, axe_source: str) -> Iterator[dict[str, Opened]]:
    opened = {size: open_page(browser, server, size, axe=axe_source) for size in SIZES}
    try:
        yield opened
    finally:
        for one in opened.values():
            one.close()


def _looked_over(opened: Opened, shots: Shots, name: str, problems: dict[str, Any]) -> None:
    """Check the page as every page is checked, run axe-core on it, and keep its picture."""
    path = opened.page.url
    check_page(opened, path, problems)
    found = axe_violations(opened.page)
    if found:
        problems.setdefault(path, {})["axe"] = found
    shots.take(opened.page, name)


def _overflow(page: Page) -> int:
    """How far the widest table goes past its wrapper, in CSS pixels."""
    widths: list[int] = page.evaluate(
        "[...document.querySelectorAll('.table-wrap')].map((w) => w.scrollWidth - w.clientWidth)"
    )
    return max(widths, default=0)


def test_the_list_leads_to_a_function_a_failed_run_and_a_rollback_shown_as_a_diff(
    server: Server,
    sized: dict[str, Opened],
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
) -> None:
    business = operator.business("Acme Trading")
    developer = operator.person("Dev Eloper", business)
    app = made_app(operator, partner, developer)
    operator.install(app, business, developer, SCOPES)
    console = operator.console(app)
    console.ok("PUT", "/functions/rooms", {"source": THROWS, "events": ["customer.created"]})
    console.ok(
        "PUT",
        "/functions/nightly",
        {"source": FIXED, "events": [], "schedule": "0 3 * * *"},
    )
    _customer(server, operator, app, business, developer)
    run = _run_of(console, "rooms", lambda run: run["status"] == "failed")
    console.ok("PUT", "/functions/rooms", {"source": FIXED, "events": ["customer.created"]})
    listing = f"/console/apps/{app.id}/functions"
    problems: dict[str, Any] = {}

    for size, opened in sized.items():
        page = opened.page
        page.goto(listing)
        sign_in(page, shots, developer)
        table = page.get_by_role("table", name=re.compile(r"^Functions, oldest first"))
        rooms = table.locator('tr[id="fn-rooms"]')
        expect(rooms).to_contain_text("1 failed")
        expect(rooms).to_contain_text("RangeError: no room for Globex")
        expect(table.locator('tr[id="fn-nightly"]')).to_contain_text("Next tick in")
        display = rooms.evaluate("(row) => getComputedStyle(row).display")
        assert display == "table-row"  # a row at both widths
        assert _overflow(page) <= 1
        _looked_over(opened, shots, f"functions-{size}", problems)

        rooms.get_by_role("link", name="rooms", exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text("rooms")
        actions = page.get_by_role("list", name="Actions on rooms")
        expect(actions.get_by_role("button", name="Run a test of rooms")).to_be_visible()
        expect(actions.get_by_role("link", name="The app's secrets")).to_be_visible()
        runs = page.get_by_role("table", name=re.compile(r"most recent runs"))
        expect(runs.locator(f'tr[id="{run["id"]}"]')).to_contain_text("RangeError")
        shown = runs.locator(f'tr[id="{run["id"]}"]').evaluate("(r) => getComputedStyle(r).display")
        assert shown == "table-row"
        assert _overflow(page) <= 1
        _looked_over(opened, shots, f"function-{size}", problems)

        runs.get_by_role("link", name=run["id"]).click()
        timeline = page.locator(".fn-timeline")
        expect(timeline.locator("li", has_text="checking Globex")).to_have_count(1)
        expect(timeline.locator(".error-text")).to_have_text("RangeError: no room for Globex")
        expect(timeline.locator(".frame mark").first).to_be_visible()  # the error opens
        _looked_over(opened, shots, f"run-{size}", problems)

        page.go_back()
        page.get_by_role("link", name="Roll back to version 1: see the diff first").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Roll back rooms to version 1?")
        expect(page.locator("#diff-count")).to_contain_text("6 lines added and 1 line removed")
        added = page.locator(".fn-diff .fn-added", has_text="throw new RangeError")
        expect(added).to_have_count(1)
        _looked_over(opened, shots, f"rollback-{size}", problems)

    page = sized["phone"].page
    page.get_by_role("button", name="Activate version 1").click()
    expect(page.get_by_role("status")).to_have_text(
        "Version 1 is active: runs that start from now on run it"
    )
    assert console.ok("GET", "/functions/rooms")["version"] == 1
    assert not problems, problems
    assert {size: one.errors for size, one in sized.items() if one.errors} == {}


def test_without_scripts_a_rollback_is_confirmed_and_done(
    browser: Browser, server: Server, operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    developer = operator.person("Dev Eloper", business)
    app = made_app(operator, partner, developer)
    console = operator.console(app)
    for source in (THROWS, FIXED):
        console.ok("PUT", "/functions/rooms", {"source": source, "events": []})
    context = browser.new_context(
        base_url=server.base, viewport=SIZES["phone"], java_script_enabled=False
    )
    try:
        page = context.new_page()
        page.goto(f"/console/apps/{app.id}/functions")
        sign_in(page, shots, developer)
        page.get_by_role("link", name="rooms", exact=True).click()
        page.get_by_role("link", name="Roll back to version 1: see the diff first").click()
        expect(page.locator("#diff-count")).to_contain_text("added")
        shots.take(page, "rollback-without-scripts")
        page.get_by_role("button", name="Activate version 1").click()
        expect(page.get_by_role("status")).to_contain_text("Version 1 is active")
    finally:
        context.close()
    assert console.ok("GET", "/functions/rooms")["version"] == 1
