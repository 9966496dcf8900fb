"""Browser tests: a served ledgerport, a partner app on its own loopback origin, and headless
Chromium (Debian's ``chromium`` package, driven by Playwright; nothing downloads a browser).

Without /usr/bin/chromium the tests skip with the reason, and fail when LEDGERPORT_REQUIRE_BROWSER
is 1 (``.ci/run`` installs the package and sets it). Each test keeps a screenshot of every page it
visits in ``artifacts/browser/<test>/`` (or under LEDGERPORT_BROWSER_ARTIFACTS).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from ..e2e.served import Server, served
from .operator import Operator
from .partner_app import PartnerApp, partner_app

CHROMIUM = Path("/usr/bin/chromium")
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


@pytest.fixture
def shots(request: pytest.FixtureRequest) -> Shots:
    folder = ARTIFACTS / re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return Shots(folder)


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    """A fresh browser context (no cookies) at desktop size, its base URL the server's."""
    context = browser.new_context(base_url=server.base, viewport={"width": 1200, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        yield context.new_page()
    finally:
        context.close()
