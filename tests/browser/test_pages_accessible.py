"""Every page of the application host a person reads, at phone width (390 by 844) and at laptop
width (1280): nothing wider than the screen, every control labelled, every image described, text
that meets WCAG AA contrast (4.5:1) against what is behind it, one page title, the design's
stylesheet applied, and nothing on the console; and axe-core finds no serious or critical
violation on any of them (the problem pages included)."""

from __future__ import annotations

import struct
import zlib
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import Browser, Page

from ..e2e.served import Server
from .conftest import Opened, Shots, axe_violations, open_page
from .operator import Operator
from .partner_app import PartnerApp
from .test_browser_flows import LISTING, SCOPES, made_app, sign_in

MIN_CONTRAST = 4.5
_LOAD_FAILED = "Failed to load resource: the server responded with a status of"
"""What Chromium logs for a page answered with an error status: the problem pages' own."""

_UNLABELLED = """() => [...document.querySelectorAll(
    'input:not([type=hidden]), select, textarea, button, img, iframe')].filter((el) => {
  if (el.tagName === 'BUTTON') return !(el.textContent.trim() || el.getAttribute('aria-label'));
  if (el.tagName === 'IMG') return !el.hasAttribute('alt');
  if (el.tagName === 'IFRAME') return !el.getAttribute('title');
  return !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
    && !el.getAttribute('aria-labelledby');
}).map((el) => el.outerHTML.slice(0, 120))"""

_LOW_CONTRAST = """(minimum) => {
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
  const channel = (v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  const luminance = ([r, g, b]) => 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b);
  const background = (el) => {
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const c = rgb(getComputedStyle(node).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const el of document.body.querySelectorAll('*')) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length) continue;
    const fg = luminance(rgb(getComputedStyle(el).color).slice(0, 3));
    const bg = luminance(background(el));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    if (ratio < minimum) {
      low.push(`${el.tagName} ${ratio.toFixed(2)}: ${el.textContent.trim().slice(0, 40)}`);
    }
  }
  return low;
}"""


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A PNG of one colour."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    row = b"\x00" + bytes(rgb) * width
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


def _upload(server: Server, console_token: str, app_id: str, data: bytes) -> str:
    response = httpx.post(
        f"{server.base}/developer/apps/{app_id}/assets",
        content=data,
        headers={"Authorization": f"Bearer {console_token}", "Content-Type": "image/png"},
        trust_env=False,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _pages(
    server: Server, operator: Operator, partner: PartnerApp
) -> tuple[Any, list[tuple[str, int]]]:
    """A developer whose app is listed (icon, screenshot, a Markdown description), installed,
    with a webhook that has a delivery and a function with a queued run; the pages they read,
    in order, after signing in, with the status each answers (the console's forms and
    confirmation pages among them, their refused and secret-showing states checked in
    test_console_manage.py; and the debugging pages of that webhook, delivery, function,
    version and run)."""
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner, app_url=f"{partner.origin}/embedded")
    console = operator.console(app)
    icon = _upload(server, console.token, app.id, png(64, 64, (26, 79, 160)))
    shot = _upload(server, console.token, app.id, png(1280, 720, (220, 230, 245)))
    operator.list_live(
        app, {**LISTING, "iconAssetId": icon, "screenshotAssetIds": [shot], **DESCRIBED}
    )
    operator.install(app, business, owner, SCOPES)
    webhook = console.ok(
        "POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": ["customer.created"]}
    )
    delivery = console.ok("POST", f"/webhooks/{webhook['id']}/test")["deliveryId"]
    endpoint = f"/console/apps/{app.id}/webhooks/{webhook['id']}"
    console.ok(
        "PUT",
        "/functions/on-customer",
        {
            "source": "export const handler = () => 1",
            "events": ["customer.created"],
            "allowedHosts": ["api.stripe.com", "*.hubspot.com"],
        },
    )
    console.ok("PUT", "/secrets/STRIPE_KEY", {"value": "sk_test_value"})
    run = console.ok("POST", "/functions/on-customer/test")["runId"]
    function = f"/console/apps/{app.id}/functions/on-customer"
    consent = urlencode(
        {
            "response_type": "code",
            "client_id": app.client_id,
            "redirect_uri": f"{partner.origin}/callback",
            "scope": "invoices:read customers:read",
            "state": "s",
        }
    )
    unknown = consent.replace(app.client_id, "cid_nobody")
    return owner, [
        ("/", 200),
        ("/marketplace", 200),
        ("/marketplace?category=invoicing", 200),
        ("/marketplace/books-sync", 200),
        ("/marketplace/books-sync/install", 200),
        (f"/oauth/authorize?{consent}", 200),
        ("/device", 200),
        ("/console/cli-login?user_code=BCDF-GHJK", 200),
        ("/console", 200),
        (f"/console/apps/{app.id}", 200),
        (f"/console/apps/{app.id}/webhooks", 200),
        (f"/console/apps/{app.id}/webhooks/new", 200),
        (f"{endpoint}/edit", 200),
        (f"{endpoint}/rotate", 200),
        (f"{endpoint}/delete", 200),
        (f"{endpoint}/secret", 200),
        (f"/console/apps/{app.id}/functions", 200),
        (f"/console/apps/{app.id}/functions/new", 200),
        (f"/console/apps/{app.id}/functions/on-customer/edit", 200),
        (f"/console/apps/{app.id}/functions/on-customer/delete", 200),
        (f"/console/apps/{app.id}/secrets", 200),
        (f"/console/apps/{app.id}/listing", 200),
        (endpoint, 200),
        (f"{endpoint}?status=queued&type=customer.created&eventId=", 200),
        (f"{endpoint}/deliveries/{delivery}", 200),
        (function, 200),
        (f"{function}/versions/1", 200),
        (f"{function}/runs/{run}", 200),
        (f"{function}/runs/run_nothing", 404),
        (f"/apps/{app.id}?business_id={business}", 200),
        (f"/oauth/authorize?{unknown}", 400),
        ("/marketplace/nothing-here", 404),
        ("/no/such/page", 404),
    ]


DESCRIBED = {
    "description": "Keeps your **invoices** in step.\n\n- Sends them\n- Reminds late payers\n\n"
    "[Documentation](https://books-sync.example/docs)"
}


def _visit(opened: Opened, path: str, status: int) -> None:
    opened.errors.clear()
    response = opened.page.goto(path)
    assert response is not None, path
    assert response.status == status, path
    opened.page.wait_for_load_state("load")
    if status != 200:
        opened.errors[:] = [e for e in opened.errors if not e.startswith(_LOAD_FAILED)]


def _name(path: str) -> str:
    return path.strip("/").split("?")[0].replace("/", "-") or "home"


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_pages_fit_the_screen_label_their_controls_and_have_readable_contrast(
    browser: Browser,
    server: Server,
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
    size: str,
) -> None:
    opened = open_page(browser, server, size)
    page: Page = opened.page
    owner, paths = _pages(server, operator, partner)
    problems: dict[str, dict[str, Any]] = {}
    try:
        page.goto("/login")
        check_page(opened, "/login", problems)
        sign_in(page, shots, owner)
        for path, status in paths:
            _visit(opened, path, status)
            check_page(opened, path, problems)
            shots.take(page, _name(path))
    finally:
        opened.close()
    assert not problems, problems


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_axe_finds_no_serious_or_critical_violation_on_any_page(
    browser: Browser,
    server: Server,
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
    axe_source: str,
    size: str,
) -> None:
    opened = open_page(browser, server, size, axe=axe_source)
    owner, paths = _pages(server, operator, partner)
    found: dict[str, list[dict[str, Any]]] = {}
    try:
        opened.page.goto("/login")
        found["/login"] = axe_violations(opened.page)
        sign_in(opened.page, shots, owner)
        for path, status in paths:
            _visit(opened, path, status)
            found[path] = axe_violations(opened.page)
    finally:
        opened.close()
    assert not {path: seen for path, seen in found.items() if seen}, found


def check_page(opened: Opened, path: str, problems: dict[str, dict[str, Any]]) -> None:
    """Record in ``problems`` what the page at ``path`` breaks of the design's rules: wider
    than the screen, a table wider than its box, a control without a label, text below AA
    contrast, not one page title, the stylesheet not applied, an error on the console."""
    page = opened.page
    found: dict[str, Any] = {}
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    if overflow > 0:
        found["wider than the screen by"] = overflow
    cut = page.evaluate(_CUT_TABLES)
    if cut:
        found["tables wider than their box"] = cut
    unlabelled = page.evaluate(_UNLABELLED)
    if unlabelled:
        found["unlabelled"] = unlabelled
    low = page.evaluate(_LOW_CONTRAST, MIN_CONTRAST)
    if low:
        found["low contrast"] = low
    if page.locator("h1").count() != 1:
        found["h1 count"] = page.locator("h1").count()
    styled = page.evaluate("() => getComputedStyle(document.body).fontFamily")
    if "system-ui" not in styled:
        found["the stylesheet is not applied"] = styled
    if opened.errors:
        found["console errors"] = list(opened.errors)
    if found:
        problems[path] = found


_CUT_TABLES = """() => [...document.querySelectorAll('.table-wrap')]
  .filter((wrap) => wrap.scrollWidth > wrap.clientWidth + 1)
  .map((wrap) => `${wrap.scrollWidth} > ${wrap.clientWidth}`)"""
