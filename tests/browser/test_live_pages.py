"""The console's webhook and function pages follow the app's live streams, in headless Chromium
at a phone's width and a laptop's, on both stores: a delivery attempt or a run that ends while
the page is open comes to the top of its table without a reload, as the page itself would list
it; the pages' Content-Security-Policy lets the script and its stream in, and nothing else; every
page fits the screen, labels its controls, reads at AA contrast, and axe-core finds no serious or
critical violation on it. Without JavaScript the same pages are whole: what a reload lists."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from ..e2e.served import Server, served, store_env
from .conftest import ADMIN_TOKEN, SERVER_ENV, SIZES, Opened, Shots, open_page
from .operator import Operator
from .partner_app import PartnerApp
from .test_browser_flows import SCOPES, made_app, sign_in
from .test_console_debugging import FIXED, _looked_over, _no_console_errors


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """The suite's served instance on each store, with one sandbox worker for the runs."""
    with (
        store_env(request.param, tmp_path) as env,
        served(
            tmp_path, ADMIN_TOKEN, {**SERVER_ENV, **env, "LEDGERPORT_FUNCTION_WORKERS": "1"}
        ) as up,
    ):
        yield up


@pytest.fixture
def sized(browser: Browser, server: Server, axe_source: str) -> Iterator[dict[str, Opened]]:
    opened = {size: open_page(browser, server, size, axe=axe_source) for size in SIZES}
    try:
        yield opened
    finally:
        for one in opened.values():
            one.close()


def test_attempts_and_runs_come_to_the_top_of_their_pages_as_they_end(
    server: Server,
    browser: Browser,
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
    webhook = console.ok(
        "POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": ["customer.created"]}
    )
    console.ok("PUT", "/functions/rooms", {"source": FIXED, "events": ["customer.created"]})
    hook_page = f"/console/apps/{app.id}/webhooks/{webhook['id']}"
    function_page = f"/console/apps/{app.id}/functions/rooms"
    problems: dict[str, Any] = {}

    for size, opened in sized.items():
        page = opened.page
        page.goto(hook_page)
        sign_in(page, shots, developer)
        expect(page.locator("#deliveries-live")).to_be_visible()  # the stream is open
        queued = console.ok("POST", f"/webhooks/{webhook['id']}/test")
        row = page.locator("tbody tr").first
        expect(row).to_have_attribute("id", queued["deliveryId"])
        expect(row).to_contain_text("delivered")
        expect(row.get_by_role("link", name=queued["deliveryId"])).to_have_attribute(
            "href", f"{hook_page}/deliveries/{queued['deliveryId']}"
        )
        _looked_over(opened, shots, f"webhook-live-{size}", problems)
        # What the script added is what the page lists.
        added = _cells(row.inner_text())
        response = page.reload()
        assert response is not None
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'; connect-src 'self';" in policy
        listed = page.locator("tbody tr").first
        expect(listed).to_have_attribute("id", queued["deliveryId"])
        assert _cells(listed.inner_text()) == added
        # A delivery that fails for good: its live row says what went wrong in the server's
        # words, as the page does reloaded.
        partner.hook_statuses = [500] * 6
        failing = console.ok("POST", f"/webhooks/{webhook['id']}/test")
        row = page.locator("tbody tr").first
        expect(row).to_have_attribute("id", failing["deliveryId"])
        expect(row).to_contain_text("failed")
        expect(row.locator("td.wh-error")).to_have_text("Answered HTTP 500")
        added = _cells(row.inner_text())
        page.reload()
        listed = page.locator("tbody tr").first
        expect(listed).to_have_attribute("id", failing["deliveryId"])
        assert _cells(listed.inner_text()) == added

        page.goto(function_page)
        expect(page.locator("#runs-live")).to_be_visible()
        run = console.ok("POST", "/functions/rooms/test")
        row = page.locator("tbody tr").first
        expect(row).to_have_attribute("id", run["runId"])
        expect(row).to_contain_text("succeeded")
        expect(row.locator(".badge-test")).to_have_text("Test")
        _looked_over(opened, shots, f"function-live-{size}", problems)

    # Without JavaScript: no note, no stream; the page lists what ended.
    plain = browser.new_context(
        base_url=server.base, viewport=SIZES["desktop"], java_script_enabled=False
    )
    try:
        page = plain.new_page()
        page.goto(hook_page)
        sign_in(page, shots, developer)
        expect(page.locator("tbody tr")).to_have_count(2 * len(SIZES))
        expect(page.locator("#deliveries-live")).to_be_hidden()
        shots.take(page, "webhook-without-script")
    finally:
        plain.close()
    assert not problems, problems
    _no_console_errors(sized)


def _cells(text: str) -> list[str]:
    return [part.strip() for part in text.split("\n") if part.strip()]
