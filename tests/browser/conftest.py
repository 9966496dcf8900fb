"""Browser tests: a served ledgerport, a partner app on its own loopback origin, and headless
Chromium (Debian's ``chromium`` package, driven by Playwright; nothing downloads a browser).

Without /usr/bin/chromium the tests skip with the reason, and fail when LEDGERPORT_REQUIRE_BROWSER
is 1 (``.ci/run`` installs the package and sets it). The accessibility check injects axe-core from
``tests/browser/node_modules``, at the version and with the integrity ``package-lock.json`` pins:
when it is not there at that version, the first test that needs it runs ``npm ci`` in
tests/browser, once for all the session's workers (:func:`install_axe`), so the README's test
command is the whole suite. Without npm, or when ``npm ci`` fails, the tests that need axe-core
skip with the reason, or fail when LEDGERPORT_REQUIRE_BROWSER is 1. Each test keeps a screenshot
of every page it visits in ``artifacts/browser/<test>/`` (or under LEDGERPORT_BROWSER_ARTIFACTS).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
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
HERE = Path(__file__).resolve().parent
AXE_PACKAGE = HERE / "node_modules" / "axe-core"
AXE = AXE_PACKAGE / "axe.min.js"
NPM_CI_TIMEOUT = 300
"""Seconds ``npm ci`` may take to fetch and install axe-core (one package of about 3 MB)."""
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
    _require_chromium()
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


def _require_chromium() -> None:
    if not CHROMIUM.exists():
        _required(f"{CHROMIUM} is missing: apt-get install -y chromium")


def _axe_installed() -> bool:
    """Whether tests/browser/node_modules has axe-core at the version package-lock.json pins."""
    locked = json.loads((HERE / "package-lock.json").read_text())
    try:
        installed = json.loads((AXE_PACKAGE / "package.json").read_text())
    except (OSError, ValueError):
        return False
    version = locked["packages"]["node_modules/axe-core"]["version"]
    return bool(installed.get("version") == version and AXE.exists())


def install_axe() -> str | None:
    """Install axe-core with ``npm ci`` in tests/browser unless it is there at the locked
    version; None once it is, else why it is not. The test run's workers (pytest-xdist) take
    turns through a lock file of this checkout, so one installs while the others wait for it
    and then find it installed (``npm ci`` empties node_modules first: no two may run it)."""
    if _axe_installed():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return (
            "npm is missing (apt-get install -y npm): the accessibility check installs"
            " axe-core with npm ci from tests/browser/package-lock.json"
        )
    checkout = hashlib.sha256(str(HERE).encode()).hexdigest()[:16]
    lock = Path(tempfile.gettempdir()) / f"ledgerport-axe-{checkout}.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        if _axe_installed():
            return None
        command = [npm, "ci", "--prefix", str(HERE), "--no-audit", "--no-fund", "--loglevel=error"]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=NPM_CI_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            return f"npm ci --prefix tests/browser did not finish in {NPM_CI_TIMEOUT} s"
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()[-600:]
            return f"npm ci --prefix tests/browser failed (exit {done.returncode}): {said}"
    if not _axe_installed():
        return f"npm ci --prefix tests/browser left no {AXE}"
    return None


@pytest.fixture(scope="session")
def axe_installation() -> str | None:
    """:func:`install_axe`, once a session (a worker's, under pytest-xdist)."""
    return install_axe()


@pytest.fixture
def axe_source(request: pytest.FixtureRequest) -> str:
    """axe-core's script, installed from the npm registry by ``npm ci`` in tests/browser."""
    _require_chromium()  # without a browser to check pages with, nothing is installed
    not_installed: str | None = request.getfixturevalue("axe_installation")
    if not_installed is not None:
        _required(not_installed)
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
