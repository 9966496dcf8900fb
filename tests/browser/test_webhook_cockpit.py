"""The webhook cockpit in headless Chromium, at a laptop's and a phone's width: the webhooks list
of an app with 20 endpoints is one row an endpoint and fits its bounds (under 3,000 px tall at
1280 px wide, under 100 KB), whatever the deliveries behind it; a delivery with 30 attempts
and its redeliveries is a timeline under 2,500 px at 1280; the endpoint's page carries every
action, and switching off and recovering confirm with numbers; each page checked as every page
is and by axe-core.

The seed is the console bench's (``bench/console_pages.py``) in small: its 20 endpoints, one
of them answering, the others a closed port (failures, errors), a few events rather than 100
each. The list's height and size depend on the endpoints alone, which the test shows by
measuring them again after as many events more: the same figures."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from ..e2e.served import Server, served
from .conftest import ADMIN_TOKEN, SERVER_ENV, SIZES, Opened, Shots, axe_violations, open_page
from .operator import Console, MadeApp, Operator, Person
from .partner_app import PartnerApp
from .test_browser_flows import SCOPES, made_app, sign_in
from .test_pages_accessible import check_page

WAIT_S = 60.0
ENDPOINTS = 20
EVENTS_A_ROUND = 3
TARGET_ATTEMPTS = 30
LIST_MAX_PX = 3000
LIST_MAX_BYTES = 100_000
DELIVERY_MAX_PX = 2500
ROW_MAX_PX_ON_A_PHONE = 130
"""An endpoint's row on a phone: three short lines at most, never a card of labelled lines."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with served(tmp_path, ADMIN_TOKEN, SERVER_ENV) as up:
        yield up


@pytest.fixture
def sized(browser: Browser, server: Server, axe_source: str) -> Iterator[dict[str, Opened]]:
    opened = {size: open_page(browser, server, size, axe=axe_source) for size in SIZES}
    try:
        yield opened
    finally:
        for one in opened.values():
            one.close()


def _until(what: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        answer = what()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


def _customers(server: Server, access: str, count: int) -> None:
    for number in range(count):
        created = httpx.post(
            f"{server.base}/customers",
            json={"name": f"Globex {number}"},
            headers={"Authorization": f"Bearer {access}"},
            trust_env=False,
        )
        assert created.status_code == 201, created.text


def _settled(console: Console, hooks: list[dict[str, Any]], each: int) -> None:
    """Until every endpoint has ``each`` deliveries and none waits for an attempt."""
    for hook in hooks:
        _until(
            lambda hook=hook: console.ok("GET", f"/webhooks/{hook['id']}/deliveries")["data"],
            lambda data: (
                len(data) == each and all(d["status"] in ("delivered", "failed") for d in data)
            ),
        )


def _height(page: Page) -> int:
    return int(page.evaluate("document.documentElement.scrollHeight"))


def _looked_over(opened: Opened, shots: Shots, name: str, problems: dict[str, Any]) -> None:
    path = opened.page.url
    check_page(opened, path, problems)
    found = axe_violations(opened.page)
    if found:
        problems.setdefault(path, {})["axe"] = found
    shots.take(opened.page, name)


def _seeded(
    server: Server, operator: Operator, partner: PartnerApp
) -> tuple[MadeApp, Person, Console, list[dict[str, Any]], str]:
    business = operator.business("Acme Trading")
    developer = operator.person("Dev Eloper", business)
    app = made_app(operator, partner, developer)
    operator.install(app, business, developer, SCOPES)
    console = operator.console(app)
    events = ["customer.created"]
    hooks = [console.ok("POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": events})]
    hooks += [
        console.ok("POST", "/webhooks", {"url": f"http://127.0.0.1:9/hook/{n}", "events": events})
        for n in range(1, ENDPOINTS)
    ]
    access = operator.access_token(app, business, developer)
    return app, developer, console, hooks, access


def test_the_list_and_a_30_attempt_delivery_fit_their_bounds_at_both_widths(
    server: Server,
    sized: dict[str, Opened],
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
) -> None:
    app, developer, console, hooks, access = _seeded(server, operator, partner)
    _customers(server, access, EVENTS_A_ROUND)
    _settled(console, hooks, EVENTS_A_ROUND)
    # One delivery of the answering endpoint redelivered to 30 attempts: a 500, then a 200
    # (a retry each time), as the bench's flaky endpoint answers.
    answering = hooks[0]["id"]
    target = console.ok("GET", f"/webhooks/{answering}/deliveries")["data"][0]["id"]
    one = f"/webhooks/{answering}/deliveries/{target}"
    partner.hook_statuses = [500, 200] * TARGET_ATTEMPTS
    while len(console.ok("GET", one)["attemptLog"]) < TARGET_ATTEMPTS:
        console.ok("POST", f"{one}/redeliver")
        _until(lambda: console.ok("GET", one), lambda d: d["status"] in ("delivered", "failed"))
    listing = f"/console/apps/{app.id}/webhooks"
    delivery = f"{listing}/{answering}/deliveries/{target}"
    problems: dict[str, Any] = {}
    figures: dict[str, dict[str, int]] = {}
    for size, opened in sized.items():
        page = opened.page
        page.goto(listing)
        sign_in(page, shots, developer)
        response = page.goto(listing)
        assert response is not None
        body = response.body()
        expect(page.locator("tbody tr")).to_have_count(ENDPOINTS)
        figures[size] = {"list px": _height(page), "list bytes": len(body)}
        rows = page.evaluate(
            "[...document.querySelectorAll('tbody tr')]"
            ".map((r) => r.getBoundingClientRect().height)"
        )
        figures[size]["tallest row px"] = round(max(rows))
        _looked_over(opened, shots, f"webhooks-{size}", problems)
        page.goto(delivery)
        expect(page.locator("li.attempt")).to_have_count(len(console.ok("GET", one)["attemptLog"]))
        expect(page.locator("li.wh-rerun").first).to_contain_text("Redelivered")
        figures[size]["delivery px"] = _height(page)
        _looked_over(opened, shots, f"delivery-{size}", problems)
        # An attempt opens onto its headers and body.
        first = page.locator("#attempt-1")
        first.locator("summary").click()
        expect(first).to_contain_text("X-Webhook-Signature")
    desktop = figures["desktop"]
    assert desktop["list px"] < LIST_MAX_PX, figures
    assert desktop["list bytes"] < LIST_MAX_BYTES, figures
    assert desktop["delivery px"] < DELIVERY_MAX_PX, figures
    assert figures["phone"]["tallest row px"] <= ROW_MAX_PX_ON_A_PHONE, figures
    assert not problems, problems

    # As many events again: the list is the same height and, but for its counts' digits and
    # times, the same size.
    _customers(server, access, EVENTS_A_ROUND)
    _settled(console, hooks, 2 * EVENTS_A_ROUND + 0)
    page = sized["desktop"].page
    response = page.goto(listing)
    assert response is not None
    assert _height(page) == desktop["list px"]
    assert abs(len(response.body()) - desktop["list bytes"]) < 200


def test_the_endpoint_page_switches_off_and_recovers_after_saying_how_many(
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
    hook = console.ok(
        "POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": ["customer.created"]}
    )
    partner.hook_statuses = [500] * 12  # two deliveries, every attempt failed
    _customers(server, operator.access_token(app, business, developer), 2)
    _settled(console, [hook], 2)
    problems: dict[str, Any] = {}
    endpoint = f"/console/apps/{app.id}/webhooks/{hook['id']}"
    for size, opened in sized.items():
        page = opened.page
        page.goto(endpoint)
        sign_in(page, shots, developer)
        assert page.url.startswith(server.base), (page.url, server.output()[-3000:])
        actions = page.get_by_role("list", name="Manage this endpoint")
        for name in ("Edit", "Switch off", "Rotate the secret", "Delete"):
            expect(actions.get_by_role("link", name=name, exact=True)).to_be_visible()
        expect(actions.get_by_role("button", name="Send a test delivery")).to_be_visible()
        expect(page.locator("tbody tr").first).to_contain_text("Answered HTTP 500")
        _looked_over(opened, shots, f"endpoint-{size}", problems)

        page.get_by_role("button", name="Count failed deliveries to recover").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Recover failed deliveries?")
        expect(page.locator(".consequences")).to_contain_text(
            "2 failed deliveries will be queued again"
        )
        _looked_over(opened, shots, f"recover-confirm-{size}", problems)
        page.get_by_role("link", name="Cancel").click()
        expect(page).to_have_url(re.compile(re.escape(endpoint) + "$"))

        actions.get_by_role("link", name="Switch off", exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Switch this endpoint off?")
        expect(page.locator(".consequences")).to_contain_text("No delivery waits for it now")
        _looked_over(opened, shots, f"switch-off-confirm-{size}", problems)
        page.get_by_role("link", name="Cancel").click()
    assert not problems, problems
    assert console.ok("GET", f"/webhooks/{hook['id']}")["enabled"] is True
    assert all(
        d["status"] == "failed"
        for d in console.ok("GET", f"/webhooks/{hook['id']}/deliveries")["data"]
    )
