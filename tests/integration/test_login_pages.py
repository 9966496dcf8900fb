"""The application host's sign-in pages: form, CSRF, cookie session, redirects, expiry."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest

from ledgerport import books
from ledgerport.clock import FrozenClock
from ledgerport.http import create_app
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..platforms import build_platform

EMAIL = "ada@example.com"
PASSWORD = "correct horse battery staple"
SESSION_COOKIE = "lp_session"


class _FormInputs(HTMLParser):
    """Collects the ``<input>`` elements of a page and the ``<form>`` elements around them."""

    def __init__(self) -> None:
        super().__init__()
        self.inputs: dict[str, dict[str, str | None]] = {}
        self.forms: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self.forms.append(attributes)
        elif tag == "input" and attributes.get("name"):
            self.inputs[str(attributes["name"])] = attributes


def _parse_page(html: str) -> _FormInputs:
    parser = _FormInputs()
    parser.feed(html)
    return parser


def _set_cookies(response: Any) -> dict[str, tuple[str, dict[str, str]]]:
    """Set-Cookie headers by cookie name: (value, attributes with lower-case names)."""
    cookies: dict[str, tuple[str, dict[str, str]]] = {}
    for header in response.headers.getlist("Set-Cookie"):
        first, *attributes = (part.strip() for part in header.split(";"))
        name, _, value = first.partition("=")
        flags = {}
        for attribute in attributes:
            key, _, flag_value = attribute.partition("=")
            flags[key.lower()] = flag_value
        cookies[name] = (value, flags)
    return cookies


def _jar_value(client: Any, name: str) -> str | None:
    for cookie in client.cookie_jar:
        if cookie.name == name:
            return str(cookie.value)
    return None


async def _login_form(client: Any, next_path: str | None = None) -> dict[str, str]:
    """GET the sign-in page (which sets the CSRF cookie) and answer its hidden fields."""
    query = {"next": next_path} if next_path is not None else None
    response = await client.get("/login", query_string=query)
    assert response.status_code == 200
    page = _parse_page(await response.get_data(as_text=True))
    return {
        "csrf_token": str(page.inputs["csrf_token"]["value"]),
        "next": str(page.inputs["next"]["value"]),
    }


@pytest.fixture
async def user(platform: Platform) -> dict[str, str]:
    password_hash = await platform.passwords.hash(PASSWORD)
    async with platform.store.transaction() as tx:
        created = await books.create_user(
            tx, now=platform.now(), email=EMAIL, password_hash=password_hash
        )
    return {"id": created.id, "email": created.email}


async def _session_count(platform: Platform) -> int:
    async with platform.store.transaction() as tx:
        count: int = await tx.fetchval("SELECT COUNT(*) FROM login_sessions")
    return int(count)


async def _sign_in(client: Any, next_path: str = "/") -> Any:
    hidden = await _login_form(client, next_path)
    return await client.post("/login", form={"email": EMAIL, "password": PASSWORD, **hidden})


# --- The form ------------------------------------------------------------------------------------


async def test_login_page_shows_the_sign_in_form(client: Any) -> None:
    response = await client.get("/login", query_string={"next": "/oauth/authorize?x=1"})

    assert response.status_code == 200
    assert response.mimetype == "text/html"
    page = _parse_page(await response.get_data(as_text=True))
    assert [form.get("method", "").lower() for form in page.forms] == ["post"]
    assert page.forms[0].get("action") == "/login"
    assert page.inputs["email"]["type"] == "email"
    assert page.inputs["password"]["type"] == "password"
    assert page.inputs["csrf_token"]["type"] == "hidden"
    assert page.inputs["csrf_token"]["value"]
    assert page.inputs["next"]["type"] == "hidden"
    assert page.inputs["next"]["value"] == "/oauth/authorize?x=1"
    assert "lp_csrf" in _set_cookies(response)


@pytest.mark.parametrize(
    ("method", "path", "form"),
    [
        ("GET", "/login", None),
        ("POST", "/login", {"email": EMAIL, "password": "whatever"}),
    ],
    ids=["get-form", "post-rejected"],
)
async def test_pages_forbid_framing(
    client: Any, method: str, path: str, form: dict[str, str] | None
) -> None:
    response = await client.open(path, method=method, form=form)

    assert response.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


# --- Signing in ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tamper",
    ["no-csrf-cookie", "no-csrf-token", "wrong-csrf-token", "token-of-another-cookie"],
)
async def test_login_without_valid_csrf_is_refused(
    app: Any, client: Any, platform: Platform, user: dict[str, str], tamper: str
) -> None:
    hidden = await _login_form(client, "/dashboard")
    form = {"email": EMAIL, "password": PASSWORD, **hidden}
    if tamper == "no-csrf-cookie":
        client = app.test_client()  # a browser that never loaded the form: no CSRF cookie
    elif tamper == "no-csrf-token":
        del form["csrf_token"]
    elif tamper == "wrong-csrf-token":
        form["csrf_token"] = "0" * len(form["csrf_token"])
    else:
        other_browser = app.test_client()
        form["csrf_token"] = (await _login_form(other_browser))["csrf_token"]

    response = await client.post("/login", form=form)

    assert response.status_code == 400
    assert SESSION_COOKIE not in _set_cookies(response)
    assert await _session_count(platform) == 0
    assert platform.metrics.sign_in_failures.labels("expired_form")._value.get() == 1


@pytest.mark.parametrize(
    ("email", "password"),
    [(EMAIL, "wrong password"), ("nobody@example.com", PASSWORD), (EMAIL, "")],
    ids=["wrong-password", "unknown-email", "empty-password"],
)
async def test_wrong_credentials_answer_401_without_session(
    client: Any, platform: Platform, user: dict[str, str], email: str, password: str
) -> None:
    hidden = await _login_form(client, "/dashboard")

    response = await client.post("/login", form={"email": email, "password": password, **hidden})

    assert response.status_code == 401
    assert SESSION_COOKIE not in _set_cookies(response)
    assert await _session_count(platform) == 0
    assert platform.metrics.sign_in_failures.labels("wrong_credentials")._value.get() == 1
    page = _parse_page(await response.get_data(as_text=True))
    assert page.inputs["next"]["value"] == "/dashboard"


async def test_right_credentials_start_a_session_and_return_to_next(
    client: Any, platform: Platform, user: dict[str, str]
) -> None:
    response = await _sign_in(client, "/dashboard?tab=apps")

    assert response.status_code == 303
    assert response.headers["Location"] == "/dashboard?tab=apps"
    value, flags = _set_cookies(response)[SESSION_COOKIE]
    assert value
    assert "httponly" in flags
    assert flags.get("samesite", "").lower() == "lax"
    assert "secure" not in flags  # development environment
    assert await _session_count(platform) == 1
    async with platform.store.transaction() as tx:
        stored = await tx.fetch("SELECT session_hash, user_id FROM login_sessions")
    assert stored[0]["user_id"] == user["id"]
    assert value not in stored[0]["session_hash"]


async def test_email_is_matched_case_insensitively(client: Any, user: dict[str, str]) -> None:
    hidden = await _login_form(client)

    response = await client.post(
        "/login", form={"email": EMAIL.upper(), "password": PASSWORD, **hidden}
    )

    assert response.status_code == 303


@pytest.mark.parametrize(
    "next_path",
    [
        "https://evil.example",
        "//evil.example",
        "/\\evil.example",
        "\\\\evil.example",
        "http:evil.example",
        "javascript:alert(1)",
        "/\tevil.example",
        "",
    ],
)
async def test_open_redirects_in_next_land_on_root(
    client: Any, user: dict[str, str], next_path: str
) -> None:
    hidden = await _login_form(client)

    response = await client.post(
        "/login", form={"email": EMAIL, "password": PASSWORD, **hidden, "next": next_path}
    )

    assert response.status_code == 303
    assert response.headers["Location"] == "/"


@pytest.mark.parametrize("next_path", ["https://evil.example", "//evil.example", "/\\evil.example"])
async def test_login_form_does_not_carry_a_foreign_next(client: Any, next_path: str) -> None:
    assert (await _login_form(client, next_path))["next"] == "/"


INJECTION = '"><script>alert(1)</script>'


async def test_reflected_next_and_email_are_escaped(client: Any, user: dict[str, str]) -> None:
    form_page = await client.get("/login", query_string={"next": f"/x{INJECTION}"})
    hidden = _parse_page(await form_page.get_data(as_text=True)).inputs
    refused = await client.post(
        "/login",
        form={
            "email": f"{INJECTION}@example.com",
            "password": "wrong password",
            "csrf_token": str(hidden["csrf_token"]["value"]),
            "next": f"/x{INJECTION}",
        },
    )

    assert refused.status_code == 401
    for page in (form_page, refused):
        assert "<script>" not in await page.get_data(as_text=True)
    assert hidden["next"]["value"] == f"/x{INJECTION}"


# --- The session ---------------------------------------------------------------------------------


async def test_home_without_session_redirects_to_login(client: Any) -> None:
    response = await client.get("/")

    assert response.status_code in (302, 303)
    assert response.headers["Location"].startswith("/login")


async def test_home_shows_the_signed_in_user(client: Any, user: dict[str, str]) -> None:
    assert (await _sign_in(client)).status_code == 303

    response = await client.get("/")

    assert response.status_code == 200
    assert EMAIL in await response.get_data(as_text=True)


async def test_forged_session_cookie_is_not_a_session(app: Any) -> None:
    client = app.test_client(use_cookies=False)

    response = await client.get("/", headers={"Cookie": f"{SESSION_COOKIE}=lp_ses_forged"})

    assert response.status_code in (302, 303)
    assert response.headers["Location"].startswith("/login")


async def test_logout_with_csrf_ends_the_session(
    app: Any, client: Any, platform: Platform, user: dict[str, str]
) -> None:
    assert (await _sign_in(client)).status_code == 303
    session = _jar_value(client, SESSION_COOKIE)
    assert session
    hidden = await _login_form(client)

    response = await client.post("/logout", form={"csrf_token": hidden["csrf_token"]})

    assert response.status_code == 303
    assert await _session_count(platform) == 0
    after = await client.get("/")
    assert after.status_code in (302, 303)
    assert after.headers["Location"].startswith("/login")
    # The old cookie, replayed by someone who kept it, no longer works either.
    replay = await app.test_client(use_cookies=False).get(
        "/", headers={"Cookie": f"{SESSION_COOKIE}={session}"}
    )
    assert replay.status_code in (302, 303)


async def test_logout_without_csrf_keeps_the_session(
    client: Any, platform: Platform, user: dict[str, str]
) -> None:
    assert (await _sign_in(client)).status_code == 303

    response = await client.post("/logout", form={})

    assert response.status_code == 400
    assert await _session_count(platform) == 1
    assert (await client.get("/")).status_code == 200


@pytest.mark.parametrize(
    ("elapsed", "signed_in"),
    [(11 * 3600, True), (13 * 3600, False)],
    ids=["11h-still-signed-in", "13h-expired"],
)
async def test_session_expires(
    client: Any, clock: FrozenClock, user: dict[str, str], elapsed: int, signed_in: bool
) -> None:
    assert (await _sign_in(client)).status_code == 303

    clock.advance(elapsed)
    response = await client.get("/")

    if signed_in:
        assert response.status_code == 200
    else:
        assert response.status_code in (302, 303)
        assert response.headers["Location"].startswith("/login")


# --- Production cookies --------------------------------------------------------------------------


@pytest.fixture
async def production_app(store: Store, clock: FrozenClock) -> Any:
    platform = await build_platform(
        store,
        clock,
        {
            "LEDGERPORT_ADMIN_TOKEN": "lp_admin_production-token-0123456789",
            "LEDGERPORT_SECRET_KEY": "production-secret-key-0123456789abcdef012345",
            "LEDGERPORT_ENV": "production",
            "LEDGERPORT_BASE_URL": "https://api.ledgerport.test",
            "LEDGERPORT_AUTH_URL": "https://app.ledgerport.test",
        },
    )
    return create_app(platform)


async def test_production_cookies_are_secure(production_app: Any) -> None:
    client = production_app.test_client(use_cookies=False)
    created = await client.post(
        "/admin/users",
        json={"email": EMAIL, "password": PASSWORD},
        headers={"Authorization": "Bearer lp_admin_production-token-0123456789"},
    )
    assert created.status_code == 201
    form_page = await client.get("/login", scheme="https")
    csrf_cookie, csrf_flags = _set_cookies(form_page)["lp_csrf"]
    assert "secure" in csrf_flags
    token = _parse_page(await form_page.get_data(as_text=True)).inputs["csrf_token"]["value"]

    response = await client.post(
        "/login",
        scheme="https",
        form={"email": EMAIL, "password": PASSWORD, "csrf_token": str(token), "next": "/"},
        headers={"Cookie": f"lp_csrf={csrf_cookie}"},
    )

    assert response.status_code == 303
    _, flags = _set_cookies(response)[SESSION_COOKIE]
    assert "secure" in flags
    assert "httponly" in flags
    assert flags.get("samesite", "").lower() == "lax"
