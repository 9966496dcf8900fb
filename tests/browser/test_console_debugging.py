"""Debugging in the console, in headless Chromium at a phone's width (390) and a laptop's (1280),
with a screenshot of each page: a receiver that answers 500 and then 200, both attempts with
their answers on the delivery's page; the deliveries filtered and a failed one recovered from
the webhook's page; a function that throws, its run's page showing the stack at the source
line, and the line in the version's source; a replay; a rollback. Every page these flows reach
fits the screen, labels its controls, reads at AA contrast, and axe-core finds no serious or
critical violation on it.

The served instance runs one sandbox worker, so functions really run."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect

from ..e2e.served import Server, served
from .conftest import ADMIN_TOKEN, SERVER_ENV, SIZES, Opened, Shots, axe_violations, open_page
from .operator import Console, MadeApp, Operator, Person
from .partner_app import PartnerApp
from .test_browser_flows import SCOPES, made_app, sign_in
from .test_pages_accessible import check_page

WAIT_S = 30.0
THROWS = (
    "export async function handler(event, context) {\n"
    "  context.log('checking', event.data.name);\n"
    "  const room = event.data.name.length > 3 ? null : 'ok';\n"
    "  if (!room) throw new RangeError('no room for ' + event.data.name);\n"
    "  return { room };\n"
    "}\n"
)
FIXED = "export const handler = (event) => ({ room: event.data.name });\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """The suite's served instance, with one sandbox worker for the functions' runs."""
    with served(tmp_path, ADMIN_TOKEN, {**SERVER_ENV, "LEDGERPORT_FUNCTION_WORKERS": "1"}) as up:
        yield up


@pytest.fixture
def sized(browser: Browser, server: Server, axe_source: str) -> Iterator[dict[str, Opened]]:
    """A page at each width, each in a context of its own (signed in separately), with
    axe-core in every page."""
    opened = {size: open_page(browser, server, size, axe=axe_source) for size in SIZES}
    try:
        yield opened
    finally:
        for one in opened.values():
            one.close()


def _until(what: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    """``what()`` again until ``done`` holds of its answer, within WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = what()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


def _customer(server: Server, operator: Operator, app: MadeApp, business: str, who: Person) -> None:
    access = operator.access_token(app, business, who)
    created = httpx.post(
        f"{server.base}/customers",
        json={"name": "Globex"},
        headers={"Authorization": f"Bearer {access}"},
        trust_env=False,
    )
    assert created.status_code == 201, created.text


def _looked_over(opened: Opened, shots: Shots, name: str, problems: dict[str, Any]) -> None:
    """Check the page as every page is checked, run axe-core on it, and keep its picture."""
    path = opened.page.url
    check_page(opened, path, problems)
    found = axe_violations(opened.page)
    if found:
        problems.setdefault(path, {})["axe"] = found
    shots.take(opened.page, name)


def _no_console_errors(opened: dict[str, Opened]) -> None:
    assert {size: one.errors for size, one in opened.items() if one.errors} == {}


def test_a_delivery_shows_both_attempts_and_a_failed_one_is_recovered(
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
    webhook = console.ok(
        "POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": ["customer.created"]}
    )
    deliveries = f"/webhooks/{webhook['id']}/deliveries"
    # The first delivery: a 500 with a body, then a 200 with a body.
    partner.hook_answers = [
        (500, b'{"error":"database <down> for a moment"}'),
        (200, b'{"received":true}'),
    ]
    _customer(server, operator, app, business, developer)
    (retried,) = _until(
        lambda: console.ok("GET", deliveries)["data"],
        lambda data: len(data) == 1 and data[0]["status"] == "delivered",
    )
    # The second: every attempt fails, so it ends failed.
    partner.hook_statuses = [503] * 6
    _customer(server, operator, app, business, developer)
    failed = _until(
        lambda: console.ok("GET", f"{deliveries}?status=failed")["data"],
        lambda data: len(data) == 1,
    )[0]
    hook_page = f"/console/apps/{app.id}/webhooks/{webhook['id']}"
    problems: dict[str, Any] = {}

    for size, opened in sized.items():
        page = opened.page
        page.goto(hook_page)
        sign_in(page, shots, developer)
        expect(page.get_by_role("heading", level=1)).to_contain_text("127.0.0.1")
        expect(page.locator(f'tr[id="{retried["id"]}"]')).to_contain_text("delivered")
        expect(page.locator(f'tr[id="{failed["id"]}"]')).to_contain_text("failed")
        _looked_over(opened, shots, f"webhook-{size}", problems)

        # The filters: a GET form, kept in the address and shown as applied.
        page.get_by_label("Status", exact=True).select_option("failed")
        page.get_by_role("button", name="Filter").click()
        expect(page).to_have_url(re.compile(r"\?status=failed&type=&eventId=$"))
        expect(page.locator("tbody tr")).to_have_count(1)
        expect(page.get_by_label("Status", exact=True)).to_have_value("failed")
        applied = page.get_by_role("list", name="Showing only")
        expect(applied).to_contain_text("Status: failed")
        _looked_over(opened, shots, f"webhook-filtered-{size}", problems)
        applied.get_by_role("link", name="Remove the filter Status: failed").click()
        expect(page.locator("tbody tr")).to_have_count(2)

        page.get_by_role("link", name=retried["id"]).click()
        expect(page.get_by_role("heading", level=1)).to_contain_text(retried["id"])
        first = page.locator("#attempt-1")
        second = page.locator("#attempt-2")
        # One line an attempt, opening onto its headers and body.
        expect(first.locator("summary")).to_contain_text("Attempt 1")
        expect(first.locator("summary")).to_contain_text("Answered HTTP 500")
        expect(first.locator("pre")).to_be_hidden()
        first.locator("summary").click()
        second.locator("summary").click()
        expect(first.locator("pre")).to_be_visible()
        expect(first.locator("pre")).to_have_text('{"error":"database <down> for a moment"}')
        expect(first).to_contain_text("X-Webhook-Signature")
        expect(second).to_contain_text("HTTP 200")
        expect(second.locator("pre")).to_have_text('{"received":true}')
        expect(page.locator("pre.code-block").first).to_contain_text('"type": "customer.created"')
        nav = page.get_by_role("navigation", name="Console")
        expect(nav.locator('[aria-current="page"]')).to_have_count(1)
        expect(nav.get_by_role("link", name="Webhooks")).to_have_attribute("aria-current", "true")
        _looked_over(opened, shots, f"delivery-{size}", problems)

    # Recover the failed one from the webhook's page, once.
    page = sized["desktop"].page
    page.goto(hook_page)
    page.get_by_role("button", name="Count failed deliveries to recover").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Recover failed deliveries?")
    expect(page.locator(".consequences")).to_contain_text("1 failed delivery will be queued again")
    shots.take(page, "recover-confirm")
    page.get_by_role("button", name="Queue 1 delivery again").click()
    expect(page.get_by_role("status")).to_contain_text("1 queued again, 0 skipped")
    shots.take(page, "recovered")
    _until(
        lambda: console.ok("GET", f"{deliveries}?status=delivered")["data"],
        lambda data: len(data) == 2,
    )
    page.reload()
    expect(page.locator(f'tr[id="{failed["id"]}"]')).to_contain_text("delivered")
    assert not problems, problems
    _no_console_errors(sized)


def _run_of(console: Console, function: str, done: Callable[[dict[str, Any]], bool]) -> Any:
    return _until(
        lambda: console.ok("GET", f"/functions/{function}/runs")["data"],
        lambda runs: bool(runs) and done(runs[0]),
    )[0]


def test_a_thrown_error_shows_its_stack_at_the_source_line_then_replay_and_roll_back(
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
    _customer(server, operator, app, business, developer)
    run = _run_of(console, "rooms", lambda run: run["status"] == "failed")
    function_page = f"/console/apps/{app.id}/functions/rooms"
    problems: dict[str, Any] = {}

    for size, opened in sized.items():
        page = opened.page
        page.goto(function_page)
        sign_in(page, shots, developer)
        expect(page.get_by_role("heading", level=1)).to_have_text("rooms")
        _looked_over(opened, shots, f"function-{size}", problems)
        page.get_by_role("link", name=run["id"]).click()
        expect(page.get_by_role("heading", level=1)).to_contain_text(run["id"])
        expect(page.locator(".error-text")).to_have_text("RangeError: no room for Globex")
        frame = page.locator(".frame").first
        expect(frame.locator("mark")).to_have_text(
            "  if (!room) throw new RangeError('no room for ' + event.data.name);"
        )
        expect(frame.locator(".caret")).to_contain_text("^")
        logged = page.locator(".fn-timeline li", has_text="checking Globex")
        expect(logged.locator("time")).to_have_text(re.compile(r"^\+\d+ ms$"))
        _looked_over(opened, shots, f"run-{size}", problems)
        link = frame.get_by_role("link", name=re.compile(r"^Line 4, column \d+ of version 1$"))
        link.click()
        expect(page).to_have_url(re.compile(r"/versions/1#L4$"))
        expect(page.locator("#L4")).to_contain_text("throw new RangeError")
        assert page.evaluate("document.querySelector(':target').id") == "L4"
        _looked_over(opened, shots, f"version-{size}", problems)

    # Replay: a new run on the same event, its page with the notice naming the first.
    page = sized["desktop"].page
    page.goto(f"{function_page}/runs/{run['id']}")
    page.get_by_role("button", name="Replay").click()
    expect(page.get_by_role("status")).to_have_text(
        f"Replay of run {run['id']} queued: it runs on the version active when it starts"
    )
    replay_id = page.url.rsplit("/", 1)[1]
    assert replay_id != run["id"]
    expect(page.locator("#replay-of").get_by_role("link", name=run["id"])).to_be_visible()
    shots.take(page, "replay-queued")
    replayed = _run_of(console, "rooms", lambda latest: latest["status"] == "failed")
    assert replayed["id"] == replay_id
    page.reload()
    expect(page.locator(".badge-failed").first).to_be_visible()
    expect(page.locator(".frame mark").first).to_contain_text("throw new RangeError")

    # Roll back: version 2 fixes it; activating version 1 again shows the diff, then asks.
    console.ok("PUT", "/functions/rooms", {"source": FIXED, "events": ["customer.created"]})
    for size, opened in sized.items():
        page = opened.page
        page.goto(function_page)
        versions = page.get_by_role("table", name="Versions kept, newest first")
        expect(versions.locator("tbody tr")).to_have_count(2)
        expect(page.locator('tr[id="version-2"]')).to_contain_text("Active")
        _looked_over(opened, shots, f"function-versions-{size}", problems)
    page = sized["phone"].page
    page.get_by_role("link", name="Roll back to version 1: see the diff first").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Roll back rooms to version 1?")
    expect(page.locator("#diff-count")).to_contain_text("added")
    expect(page.locator(".fn-diff .fn-removed").first).to_be_visible()
    _looked_over(sized["phone"], shots, "rollback-confirm-phone", problems)
    page.get_by_role("button", name="Activate version 1").click()
    expect(page.get_by_role("status")).to_have_text(
        "Version 1 is active: runs that start from now on run it"
    )
    expect(page.locator('tr[id="version-1"]')).to_contain_text("Active")
    expect(page.get_by_role("link", name="Activate version 2: see the diff first")).to_be_visible()
    expect(page.get_by_text("Newest is version 2: rolled back")).to_be_visible()
    shots.take(page, "rolled-back-phone")
    assert console.ok("GET", "/functions/rooms")["version"] == 1
    assert not problems, problems
    _no_console_errors(sized)
