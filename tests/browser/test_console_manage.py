"""The console's management pages in headless Chromium, at a phone's width (390) and a laptop's
(1280), with a screenshot of each step: a developer adds a webhook endpoint, sees its signing
secret once and copies it with the copy button (the clipboard holds the secret that signs the
test delivery the page then sends, and a reload shows it no more); switches it off and deletes
it after the confirmation page. A developer edits a function into a syntax error and sees the
line and column beside the source, fixes it, runs its test run and sees it succeed. Every state
of every new page passes the design's checks (fit, labels, contrast, one title, no console
error) and axe-core's; the server's log never holds the secret. Without scripts the copy button
stays hidden, the secret is in its read-only field to copy by hand, and the forms work."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from ledgerport.engine import verify_header

from ..e2e.served import Server, served
from .conftest import ADMIN_TOKEN, SERVER_ENV, SIZES, Opened, Shots, axe_violations, open_page
from .operator import Operator
from .partner_app import PartnerApp
from .test_browser_flows import made_app, sign_in
from .test_pages_accessible import check_page

WAIT_S = 30.0
BROKEN = (
    "export async function handler(event, context) {\n"
    "  const total = event.data.total\n"
    "  return { total: total * };\n"
    "}\n"
)
FIXED = (
    "export async function handler(event, context) {\n"
    '  context.log("checked", event.type);\n'
    "  return { total: event.data.total, test: event.data.test };\n"
    "}\n"
)
_LOAD_FAILED = "Failed to load resource: the server responded with a status of 400"
"""What Chromium logs for a form answered again with its refusal (400)."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The suite's server, with a sandbox worker: a test run must run."""
    with served(tmp_path, ADMIN_TOKEN, {**SERVER_ENV, "LEDGERPORT_FUNCTION_WORKERS": "1"}) as up:
        yield up


@pytest.fixture
def sized(browser: Browser, server: Server, axe_source: str) -> Iterator[dict[str, Opened]]:
    """A page at each width with axe-core in it, each in a context of its own (signed in
    separately), allowed to use the clipboard."""
    opened = {size: open_page(browser, server, size, axe=axe_source) for size in SIZES}
    for one in opened.values():
        one.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base)
    try:
        yield opened
    finally:
        for one in opened.values():
            one.close()


class Checked:
    """Each state of a page checked as it is reached: the design's checks and axe-core's."""

    def __init__(self) -> None:
        self.problems: dict[str, dict[str, Any]] = {}
        self.violations: dict[str, list[dict[str, Any]]] = {}

    def page(self, opened: Opened, name: str) -> None:
        opened.page.wait_for_load_state("load")
        opened.errors[:] = [e for e in opened.errors if not e.startswith(_LOAD_FAILED)]
        check_page(opened, name, self.problems)
        found = axe_violations(opened.page)
        if found:
            self.violations[name] = found

    def assert_clean(self) -> None:
        assert self.problems == {}
        assert self.violations == {}


def _poll(page: Page, row: Any, text: str) -> None:
    """Reload ``page`` until ``row`` shows ``text`` (the engine works in the background)."""
    deadline = time.monotonic() + WAIT_S
    while text not in (row.text_content() or ""):
        assert time.monotonic() < deadline, row.text_content()
        page.wait_for_timeout(250)
        page.reload()


def test_an_endpoint_is_added_its_secret_copied_once_tested_switched_off_and_deleted(
    server: Server,
    sized: dict[str, Opened],
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
) -> None:
    business = operator.business("Acme Trading")
    developer = operator.person("Dev Eloper", business)
    app = made_app(operator, partner, developer)
    operator.install(app, business, developer, ["invoices:read", "customers:read"])
    checked = Checked()
    secrets: list[str] = []

    for size, opened in sized.items():
        page = opened.page
        page.goto(f"/console/apps/{app.id}/webhooks")
        sign_in(page, shots, developer)
        page.get_by_role("link", name="Add an endpoint").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Add an endpoint")
        checked.page(opened, f"webhook-new-{size}")
        # The URL refused first: the form comes back as it was sent, with the reason.
        page.get_by_label("Endpoint URL").fill("http://hooks.example.com/in")
        page.get_by_label("customer.created").check()
        page.get_by_label("invoice.created").check()
        page.get_by_role("button", name="Add the endpoint").click()
        expect(page.get_by_role("alert")).to_contain_text("Endpoint URL must use https")
        expect(page.locator("#url-problem")).to_contain_text("Endpoint URL must use https")
        expect(page.get_by_label("Endpoint URL")).to_have_value("http://hooks.example.com/in")
        expect(page.get_by_label("customer.created")).to_be_checked()
        expect(page.get_by_label("invoice.paid")).not_to_be_checked()
        checked.page(opened, f"webhook-refused-{size}")
        shots.take(page, f"webhook-refused-{size}")
        page.get_by_label("Endpoint URL").fill(f"{partner.origin}/hook")
        page.get_by_label("invoice.created").uncheck()
        shots.take(page, f"webhook-form-{size}")
        page.get_by_role("button", name="Add the endpoint").click()

        # The secret, once: selectable in a read-only field, copied by the button.
        expect(page.get_by_role("heading", level=1)).to_have_text("Signing secret")
        expect(page.get_by_role("status").first).to_have_text(
            "Endpoint added: copy its signing secret now"
        )
        field = page.get_by_label("Signing secret")
        expect(field).to_have_attribute("readonly", "")
        secret = field.input_value()
        assert re.fullmatch(r"whsec_[A-Za-z0-9_-]{40,}", secret)
        assert secret not in page.url
        assert all(secret not in c["value"] for c in opened.context.cookies())
        checked.page(opened, f"webhook-secret-{size}")
        page.get_by_role("button", name="Copy").click()
        expect(page.locator("#copy-status")).to_have_text("Copied to the clipboard.")
        assert page.evaluate("navigator.clipboard.readText()") == secret
        shots.take(page, f"webhook-secret-{size}")
        secrets.append(secret)
        page.reload()
        expect(page.get_by_role("heading", name="Shown once only")).to_be_visible()
        assert secret not in page.content()
        checked.page(opened, f"webhook-secret-gone-{size}")
        shots.take(page, f"webhook-secret-gone-{size}")

        # A test delivery from the page, listed, and signed with the secret copied.
        page.get_by_role("link", name="Back to the webhooks").click()
        hook = f"{partner.origin}/hook"
        page.get_by_role("link", name=hook, exact=True).click()
        page.get_by_role("button", name="Send a test delivery").click()
        expect(page.get_by_role("status")).to_contain_text("Test delivery dlv_")
        delivery = re.findall(r"dlv_[0-9a-f]+", page.get_by_role("status").inner_text())[0]
        row = page.locator(f'tr[id="{delivery}"]')
        _poll(page, row, "delivered")
        expect(row).to_contain_text("Test")
        assert secret not in page.content()
        checked.page(opened, f"webhooks-tested-{size}")
        shots.take(page, f"webhooks-tested-{size}")

        # Switched off and deleted, each after a confirmation page that counts what fails.
        page.get_by_role("link", name="Switch off", exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Switch this endpoint off?")
        expect(page.locator(".consequences")).to_contain_text("No delivery waits for it now")
        checked.page(opened, f"webhook-switch-off-{size}")
        page.get_by_role("button", name="Switch the endpoint off").click()
        expect(page.get_by_role("status")).to_contain_text("switched off")
        expect(page.locator(".page-head .badges")).to_contain_text("Switched off")
        page.get_by_role("link", name="Delete", exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Delete this endpoint?")
        nav = page.get_by_role("navigation", name="Console")
        expect(nav.locator('[aria-current="page"]')).to_have_text("Delete endpoint")
        expect(nav.get_by_role("link", name="Webhooks")).to_have_attribute("aria-current", "true")
        checked.page(opened, f"webhook-delete-{size}")
        shots.take(page, f"webhook-delete-{size}")
        page.get_by_role("button", name="Delete the endpoint").click()
        expect(page.get_by_role("status")).to_have_text(f"Endpoint {hook} deleted")
        expect(page.get_by_role("link", name=hook, exact=True)).to_have_count(0)

    received = {body: header for header, body in partner.signed}
    assert len(received) == 2
    for secret, (body, header) in zip(secrets, received.items(), strict=True):
        assert verify_header(header, body, secret, now=time.time(), tolerance=300)
    log = server.output()
    for secret in secrets:
        assert secret not in log
    checked.assert_clean()


def test_without_scripts_the_secret_is_shown_to_copy_by_hand_and_the_forms_work(
    browser: Browser, server: Server, operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    developer = operator.person("Dev Eloper", business)
    app = made_app(operator, partner, developer)
    context = browser.new_context(
        base_url=server.base, viewport=SIZES["desktop"], java_script_enabled=False
    )
    try:
        page = context.new_page()
        page.goto(f"/console/apps/{app.id}/webhooks/new")
        sign_in(page, shots, developer)
        page.get_by_label("Endpoint URL").fill(f"{partner.origin}/hook")
        page.get_by_label("customer.created").check()
        page.get_by_role("button", name="Add the endpoint").click()
        field = page.get_by_label("Signing secret")
        expect(field).to_be_visible()
        expect(field).to_have_attribute("readonly", "")
        assert field.input_value().startswith("whsec_")
        expect(page.get_by_role("button", name="Copy")).to_be_hidden()
        field.select_text()  # selected by hand, to copy with the keyboard
        shots.take(page, "secret-without-scripts")
        page.get_by_role("link", name="Back to the webhooks").click()
        page.get_by_role("link", name=f"{partner.origin}/hook", exact=True).click()
        page.get_by_role("link", name="Rotate the secret").click()
        page.get_by_role("button", name="Rotate the secret").click()
        expect(page.get_by_label("Signing secret")).to_be_visible()
        expect(page.get_by_role("status").first).to_contain_text("Secret rotated")
    finally:
        context.close()


def test_a_function_with_a_syntax_error_shows_where_then_fixed_runs_its_test(
    sized: dict[str, Opened], operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    developer = operator.person("Dev Eloper", business)
    app = made_app(operator, partner, developer)
    console = operator.console(app)
    console.ok(
        "PUT",
        "/functions/totals",
        {"source": "export const handler = () => 1;", "events": ["invoice.created"]},
    )
    checked = Checked()

    for size, opened in sized.items():
        page = opened.page
        page.goto(f"/console/apps/{app.id}/functions")
        sign_in(page, shots, developer)
        page.get_by_role("link", name="totals", exact=True).click()
        page.get_by_role("link", name="Edit the source of totals").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Edit totals")
        checked.page(opened, f"function-edit-{size}")
        source = page.get_by_label("Source")
        expect(source).to_have_css("font-family", re.compile("mono", re.I))
        source.fill(BROKEN)
        page.get_by_role("button", name=re.compile(r"^Save version \d+$")).click()

        problem = page.get_by_role("alert")
        expect(problem).to_contain_text("Syntax error at line 3, column 27: Unexpected token '}'")
        expect(problem).not_to_contain_text("not an ES module")
        expect(page.locator(".source-excerpt")).to_contain_text("3   return { total: total * };")
        expect(page.get_by_label("Source")).to_have_value(BROKEN)
        expect(page.get_by_label("Source")).to_have_attribute("aria-invalid", "true")
        checked.page(opened, f"function-refused-{size}")
        shots.take(page, f"function-syntax-error-{size}")

        page.get_by_label("Source").fill(FIXED)
        page.get_by_role("button", name=re.compile(r"^Save version \d+$")).click()
        expect(page.get_by_role("status")).to_contain_text("Function totals saved: version")
        page.get_by_role("link", name="totals", exact=True).click()
        page.get_by_role("button", name="Run a test of totals").click()
        expect(page.get_by_role("status")).to_contain_text("Test run run_")
        run = re.findall(r"run_[0-9a-f]+", page.get_by_role("status").inner_text())[0]
        row = page.locator(f'tr[id="{run}"]')
        expect(row).to_contain_text("Test")
        _poll(page, row, "succeeded")
        row.get_by_role("link", name=run).click()
        expect(page.locator(".fn-timeline")).to_contain_text("succeeded")
        checked.page(opened, f"function-tested-{size}")
        shots.take(page, f"function-test-run-{size}")

    page = sized["desktop"].page
    page.goto(f"/console/apps/{app.id}/functions")
    page.get_by_role("link", name="New function").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("New function")
    checked.page(sized["desktop"], "function-new")
    page.get_by_role("link", name="Functions").click()
    page.get_by_role("link", name="totals", exact=True).click()
    page.get_by_role("link", name="Delete totals").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Delete the function totals?")
    checked.page(sized["desktop"], "function-delete")
    shots.take(page, "function-delete")
    page.get_by_role("button", name="Delete the function").click()
    expect(page.get_by_role("status")).to_have_text("Function totals deleted: it runs no more")
    checked.assert_clean()
