"""The quickstart's promise for browsers: a service started as the README starts it (production
mode, so its cookies are ``Secure``) and reached over plain ``http://`` on a loopback address
keeps a browser signed in, since Chromium treats loopback as a secure context. Reached at a
name that is not loopback, it would not (see docs/quickstart.md, step 1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from ..e2e.quickstart import printed_admin_token, started
from ..e2e.served import Server
from .conftest import PAGE_TIMEOUT_MS, Shots

EMAIL, PASSWORD = "ada@example.com", "correct-horse-battery"


@pytest.fixture
def production(tmp_path: Path) -> Iterator[Server]:
    """``ledgerport serve`` with no variable but its address: production mode, and the admin
    token it generates and prints."""
    with started(tmp_path, {}) as server:
        token = printed_admin_token(server)
        with httpx.Client(base_url=server.base, timeout=10, trust_env=False) as admin:
            answer = admin.post(
                "/admin/users",
                json={"email": EMAIL, "password": PASSWORD},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert answer.status_code == 201, answer.text
        yield server


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_browser_stays_signed_in_over_http_on_loopback_in_production_mode(
    browser: Browser, production: Server, shots: Shots, host: str
) -> None:
    base = production.base.replace("127.0.0.1", host)
    context = browser.new_context(base_url=base)
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto("/login?next=/")
        page.get_by_label("Email").fill(EMAIL)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_text(f"Signed in as {EMAIL}")).to_be_visible()
        shots.take(page, "signed-in")
        cookies = {cookie["name"]: cookie for cookie in context.cookies()}
        landed = page.url
    finally:
        context.close()

    assert landed == f"{base}/"
    assert cookies["lp_session"]["secure"] is True
    assert cookies["lp_session"]["httpOnly"] is True
    assert cookies["lp_csrf"]["secure"] is True
