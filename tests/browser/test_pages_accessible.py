"""Every page of the application host a person reads, at phone width (390 by 844) and at desktop
width: nothing wider than the screen, every control labelled, every image described, and text
that meets WCAG AA contrast (4.5:1) against what is behind it."""

from __future__ import annotations

import struct
import zlib
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import Browser, Page

from ..e2e.served import Server
from .conftest import PAGE_TIMEOUT_MS, Shots
from .operator import Operator
from .partner_app import PartnerApp
from .test_browser_flows import LISTING, SCOPES, made_app, sign_in

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1200, "height": 900}
MIN_CONTRAST = 4.5

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


def _pages(server: Server, operator: Operator, partner: PartnerApp) -> tuple[Any, list[str]]:
    """A developer whose app is listed (icon and screenshot), installed, with a webhook that
    has a delivery; the pages they read, in order, after signing in."""
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner, app_url=f"{partner.origin}/embedded")
    console = operator.console(app)
    icon = _upload(server, console.token, app.id, png(64, 64, (26, 79, 160)))
    shot = _upload(server, console.token, app.id, png(1280, 720, (220, 230, 245)))
    operator.list_live(app, {**LISTING, "iconAssetId": icon, "screenshotAssetIds": [shot]})
    operator.install(app, business, owner, SCOPES)
    webhook = console.ok(
        "POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": ["customer.created"]}
    )
    console.ok("POST", f"/webhooks/{webhook['id']}/test")
    consent = urlencode(
        {
            "response_type": "code",
            "client_id": app.client_id,
            "redirect_uri": f"{partner.origin}/callback",
            "scope": "invoices:read customers:read",
            "state": "s",
        }
    )
    return owner, [
        "/marketplace",
        "/marketplace/books-sync",
        "/marketplace/books-sync/install",
        f"/oauth/authorize?{consent}",
        "/device",
        "/console",
        f"/console/apps/{app.id}",
        f"/console/apps/{app.id}/webhooks",
        f"/console/apps/{app.id}/functions",
        f"/console/apps/{app.id}/listing",
        f"/apps/{app.id}?business_id={business}",
    ]


@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_pages_fit_the_screen_label_their_controls_and_have_readable_contrast(
    browser: Browser,
    server: Server,
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
    size: str,
) -> None:
    viewport = PHONE if size == "phone" else DESKTOP
    context = browser.new_context(
        base_url=server.base, viewport=viewport, is_mobile=size == "phone"
    )
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page: Page = context.new_page()
    owner, paths = _pages(server, operator, partner)
    problems: dict[str, dict[str, Any]] = {}
    try:
        page.goto("/login")
        _check(page, "/login", problems)
        sign_in(page, shots, owner)
        for path in paths:
            response = page.goto(path)
            assert response is not None, path
            assert response.status == 200, path
            page.wait_for_load_state("load")
            _check(page, path, problems)
            shots.take(page, path.strip("/").split("?")[0].replace("/", "-") or "home")
    finally:
        context.close()
    assert not problems, problems


def _check(page: Page, path: str, problems: dict[str, dict[str, Any]]) -> None:
    found: dict[str, Any] = {}
    overflow = page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    if overflow > 0:
        found["wider than the screen by"] = overflow
    unlabelled = page.evaluate(_UNLABELLED)
    if unlabelled:
        found["unlabelled"] = unlabelled
    low = page.evaluate(_LOW_CONTRAST, MIN_CONTRAST)
    if low:
        found["low contrast"] = low
    if page.locator("h1").count() != 1:
        found["h1 count"] = page.locator("h1").count()
    if found:
        problems[path] = found
