"""Browser tests: a served ledgerport, a partner app on its own loopback origin, and headless
Chromium (Debian's ``chromium`` package, driven by Playwright; nothing downloads a browser).

Without /usr/bin/chromium the tests skip with the reason, and fail when LEDGERPORT_REQUIRE_BROWSER
is 1 (``.ci/run`` installs the package and sets it). The accessibility check injects axe-core from
``tests/browser/node_modules`` (``package.json`` pins it; ``.ci/run`` runs ``npm ci`` there, and
nothing fetches it at test time): without it that check skips with the reason, or fails when
LEDGERPORT_REQUIRE_BROWSER is 1. Each test keeps a screenshot of every page it visits in
``artifacts/browser/<test>/`` (or under LEDGERPORT_BROWSER_ARTIFACTS).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    expect,
    sync_playwright,
)
from playwright.sync_api import Error as PlaywrightError

from ..e2e.served import Server, served
from .operator import Operator
from .partner_app import PartnerApp, partner_app

CHROMIUM = Path("/usr/bin/chromium")
AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
SIZES = {"phone": {"width": 390, "height": 844}, "desktop": {"width": 1280, "height": 900}}
"""The widths every page is checked at: a phone's, and a laptop's."""
REQUIRE_BROWSER = os.environ.get("LEDGERPORT_REQUIRE_BROWSER") == "1"
ARTIFACTS = Path(
    os.environ.get("LEDGERPORT_BROWSER_ARTIFACTS")
    or Path(__file__).resolve().parents[2] / "artifacts" / "browser"
)
ADMIN_TOKEN = "lp_admin_browser-tests-token-0123456789abcdef"
SECRET_KEY = "browser-tests-secret-key-0123456789abcdef0123"
SERVER_ENV = {
    "LEDGERPORT_SECRET_KEY": SECRET_KEY,
    "LEDGERPORT_PASSWORD_HASHING": "fast",
    "LEDGERPORT_FUNCTION_WORKERS": "0",
    # Every attempt at once: a failing endpoint makes a delivery final in a moment.
    "LEDGERPORT_WEBHOOK_RETRY_DELAYS": "0,0,0,0,0,0",
    "LEDGERPORT_WEBHOOK_TIMEOUT": "2",
}
PAGE_TIMEOUT_MS = 15_000
expect.set_options(timeout=PAGE_TIMEOUT_MS)  # the suite's other workers share two cores


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with served(tmp_path, ADMIN_TOKEN, SERVER_ENV) as running:
        yield running


@pytest.fixture
def operator(server: Server) -> Iterator[Operator]:
    with Operator.for_server(server.base, ADMIN_TOKEN) as made:
        yield made


@pytest.fixture
def partner(server: Server) -> Iterator[PartnerApp]:
    with partner_app(server.base) as app:
        yield app


@pytest.fixture
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        reason = f"{CHROMIUM} is missing: apt-get install -y chromium"
        if REQUIRE_BROWSER:
            pytest.fail(f"{reason} (LEDGERPORT_REQUIRE_BROWSER=1)", pytrace=False)
        pytest.skip(reason)
    # Playwright's sync API runs its own asyncio loop, which must be a plain one: the suite's
    # trio_asyncio installs a policy whose loops need a trio run.
    policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            try:
                yield launched
            finally:
                launched.close()
    finally:
        asyncio.set_event_loop_policy(policy)


@dataclass
class Shots:
    """Screenshots of the test's pages, numbered in the order taken."""

    folder: Path
    taken: int = 0

    def take(self, page: Page, name: str) -> Path:
        self.taken += 1
        path = self.folder / f"{self.taken:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


def _required(reason: str) -> None:
    if REQUIRE_BROWSER:
        pytest.fail(f"{reason} (LEDGERPORT_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def axe_source() -> str:
    """axe-core's script, as installed from the npm registry by ``npm ci`` in tests/browser."""
    if not AXE.exists():
        _required(f"{AXE} is missing: npm ci --prefix tests/browser")
    return AXE.read_text()


_AXE_RUN = """async () => {
  const result = await axe.run(document, {iframes: false, resultTypes: ['violations']});
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({id: v.id, impact: v.impact, help: v.help,
                  nodes: v.nodes.slice(0, 5).map((n) => n.target.join(' '))}));
}"""


def axe_violations(page: Page) -> list[dict[str, Any]]:
    """The serious and critical violations axe-core finds on the page (the page's context was
    opened with axe's script: :func:`open_page`)."""
    found: list[dict[str, Any]] = page.evaluate(_AXE_RUN)
    return found


@dataclass
class Opened:
    """A page at one size, and what its console said went wrong."""

    context: BrowserContext
    page: Page
    errors: list[str] = field(default_factory=list)

    def close(self) -> None:
        self.context.close()


def open_page(browser: Browser, server: Server, size: str, axe: str | None = None) -> Opened:
    """A fresh context (no cookies) at ``size`` (``SIZES``), collecting console errors and
    uncaught exceptions; with ``axe``, axe-core is in every page before its own scripts (as
    the browser's own, so the pages' Content-Security-Policy does not apply to it)."""
    context = browser.new_context(
        base_url=server.base, viewport=SIZES[size], is_mobile=size == "phone"
    )
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    if axe is not None:
        context.add_init_script(script=axe)
    opened = Opened(context, context.new_page())

    def console(message: ConsoleMessage) -> None:
        # Ours only: the partner app's pages (its callback, its frame) are not ledgerport's.
        if message.type == "error" and message.location.get("url", "").startswith(server.base):
            opened.errors.append(message.text)

    def crashed(error: PlaywrightError) -> None:
        opened.errors.append(str(error))

    opened.page.on("console", console)
    opened.page.on("pageerror", crashed)
    return opened


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Shots:
    folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return Shots(folder)


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    """A fresh browser context (no cookies) at desktop size, its base URL the server's."""
    context = browser.new_context(base_url=server.base, viewport=SIZES["desktop"])
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()
