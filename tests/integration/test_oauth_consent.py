"""The consent page: every message of the spec's table is shown and never redirected.

Spec: Authentication > Authorization code flow (step 5), Errors > Consent page messages;
contract.md: Application host pages, approving creates or widens the installation.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from ledgerport import catalog

from .oauth_helpers import REDIRECT_URI, World, authorize, login, make_world, pkce_pair

API = "http://api.ledgerport.test"
INVALID_CLIENT = "Invalid client_id"
REDIRECT_MISMATCH = "redirect_uri does not match any registered URI"
SCOPES_NOT_PERMITTED = "Requested scopes not permitted for this client"
PKCE_REQUIRED = "PKCE is required for public clients"
NOT_REVIEWED = "app has not completed review"
EXPIRED = "invalid_request: authorization request not found or expired"


def query(world: World, **overrides: Any) -> str:
    params: dict[str, Any] = {
        "response_type": "code",
        "client_id": world.client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": "invoices:read",
        "state": "st4te",
    }
    for key, value in overrides.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return "/oauth/authorize?" + urlencode(params, doseq=True)


async def problem_message(response: Any) -> str:
    """The page's alert text; the response must be a page, never a redirect."""
    page = await response.get_data(as_text=True)
    assert not 300 <= response.status_code < 400, response.headers.get("Location")
    assert "Location" not in response.headers
    assert 'name="decision"' not in page
    # A message the specification fixes is the detail below the plain words; another is the
    # alert itself.
    match = re.search(r'class="problem-code">(.*?)</code>', page, re.S) or re.search(
        r'role="alert">(.*?)</p>', page, re.S
    )
    assert match is not None, page
    return html.unescape(match[1]).strip()


async def consent_form(client: Any, url: str) -> tuple[str, str, str]:
    response = await client.get(url)
    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    request_id = re.search(r'name="request_id" value="([^"]+)"', page)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert request_id is not None
    assert csrf is not None
    return page, request_id[1], csrf[1]


async def set_status(client: Any, admin_headers: dict[str, str], world: World, status: str) -> None:
    response = await client.post(
        f"/admin/apps/{world.app_id}/status", json={"status": status}, headers=admin_headers
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unknown_client", INVALID_CLIENT),
        ("missing_client", INVALID_CLIENT),
        ("suspended", INVALID_CLIENT),
        ("deactivated", INVALID_CLIENT),
        ("redirect_trailing_slash", REDIRECT_MISMATCH),
        ("redirect_other_port", REDIRECT_MISMATCH),
        ("redirect_other_path", REDIRECT_MISMATCH),
        ("redirect_other_scheme", REDIRECT_MISMATCH),
        ("scope_not_registered", SCOPES_NOT_PERMITTED),
        ("scope_partly_registered", SCOPES_NOT_PERMITTED),
        ("public_without_pkce", PKCE_REQUIRED),
        ("resource_relative", "invalid_target"),
        ("resource_other_origin", "invalid_target"),
    ],
)
async def test_consent_problem_messages(client, admin_headers, case: str, expected: str) -> None:
    world = await make_world(
        client, admin_headers, app_type="PUBLIC" if case.startswith("public") else "CONFIDENTIAL"
    )
    await login(client, world)
    overrides: dict[str, Any] = {
        "unknown_client": {"client_id": "no-such-client"},
        "missing_client": {"client_id": None},
        "redirect_trailing_slash": {"redirect_uri": REDIRECT_URI + "/"},
        "redirect_other_port": {"redirect_uri": "https://app.example.com:8443/callback"},
        "redirect_other_path": {"redirect_uri": "https://app.example.com/callback2"},
        "redirect_other_scheme": {"redirect_uri": "http://app.example.com/callback"},
        "scope_not_registered": {"scope": "journal:write"},
        "scope_partly_registered": {"scope": "invoices:read journal:write"},
        "resource_relative": {"resource": "/invoices"},
        "resource_other_origin": {"resource": "https://evil.example.com/"},
    }.get(case, {})
    if case in ("suspended", "deactivated"):
        await set_status(client, admin_headers, world, case.upper())
    response = await client.get(query(world, **overrides))
    assert await problem_message(response) == expected


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param([API + "/", API + "/invoices"], id="sent-twice"),
        pytest.param([API + "/" + "a" * (catalog.URI_MAX_LENGTH - len(API))], id="513-chars"),
    ],
)
async def test_invalid_target_long_form(client, admin_headers, resources: list[str]) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    message = await problem_message(await client.get(query(world, resource=resources)))
    assert message.startswith("invalid_target")
    assert len(message) > len("invalid_target")


async def test_valid_resource_reaches_consent(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    resource = API + "/" + "a" * (catalog.URI_MAX_LENGTH - len(API) - 1)
    await consent_form(client, query(world, resource=resource))


async def test_unreviewed_app_against_non_sandbox_business(client, admin_headers) -> None:
    world = await make_world(client, admin_headers, reviewed=False, sandbox=False)
    await login(client, world)
    assert await problem_message(await client.get(query(world))) == NOT_REVIEWED


async def test_unreviewed_app_lists_only_sandbox_businesses(client, admin_headers) -> None:
    world = await make_world(client, admin_headers, reviewed=False, sandbox=True)
    real = await (
        await client.post("/admin/businesses", json={"name": "RealCo"}, headers=admin_headers)
    ).get_json()
    await client.put(
        f"/admin/businesses/{real['id']}/members/{world.user_id}",
        json={"role": "owner"},
        headers=admin_headers,
    )
    await login(client, world)
    page, request_id, csrf = await consent_form(client, query(world))
    options = re.findall(r'<option value="([^"]+)"', page)
    assert options == [world.business_id]
    # Forcing the non-sandbox business in the POST is refused on the page, no redirect.
    response = await client.post(
        "/oauth/authorize",
        form={
            "request_id": request_id,
            "csrf_token": csrf,
            "business_id": real["id"],
            "decision": "approve",
        },
    )
    assert await problem_message(response) == NOT_REVIEWED


async def test_request_expires_after_five_minutes(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    _, request_id, csrf = await consent_form(client, query(world))
    clock.advance(catalog.AUTHORIZATION_REQUEST_TTL)
    response = await client.post(
        "/oauth/authorize",
        form={
            "request_id": request_id,
            "csrf_token": csrf,
            "business_id": world.business_id,
            "decision": "approve",
        },
    )
    assert await problem_message(response) == EXPIRED


async def test_request_just_inside_five_minutes_and_single_use(
    client, admin_headers, clock
) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    _, request_id, csrf = await consent_form(client, query(world))
    clock.advance(catalog.AUTHORIZATION_REQUEST_TTL - 1)
    form = {
        "request_id": request_id,
        "csrf_token": csrf,
        "business_id": world.business_id,
        "decision": "approve",
    }
    response = await client.post("/oauth/authorize", form=form)
    assert response.status_code == 303
    again = await client.post("/oauth/authorize", form=form)
    assert await problem_message(again) == EXPIRED


async def test_anonymous_visitor_is_sent_to_login(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    url = query(world)
    response = await client.get(url)
    assert response.status_code in (302, 303)
    location = urlsplit(response.headers["Location"])
    assert location.path == "/login"
    assert not location.netloc or location.netloc == "app.ledgerport.test"
    assert parse_qs(location.query)["next"] == [url]


async def test_anonymous_visitor_with_bad_request_sees_problem(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    response = await client.get(query(world, redirect_uri="https://evil.example.com/cb"))
    assert await problem_message(response) == REDIRECT_MISMATCH


async def test_deny_redirects_with_access_denied_and_state(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    callback = await authorize(client, world, decision="deny", state="s-123")
    assert callback["error"] == ["access_denied"]
    assert callback["state"] == ["s-123"]
    assert "code" not in callback


async def test_approve_redirects_with_code_and_state(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    _, challenge = pkce_pair()
    callback = await authorize(client, world, challenge=challenge, state="s-456")
    assert callback["state"] == ["s-456"]
    assert len(callback["code"]) == 1
    assert callback["code"][0]
    assert "error" not in callback


async def test_select_lists_only_active_businesses(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    second = await (
        await client.post("/admin/businesses", json={"name": "Second"}, headers=admin_headers)
    ).get_json()
    inactive = await (
        await client.post("/admin/businesses", json={"name": "Gone"}, headers=admin_headers)
    ).get_json()
    stranger = await (
        await client.post("/admin/businesses", json={"name": "Other"}, headers=admin_headers)
    ).get_json()
    for business, active in ((second, True), (inactive, False)):
        response = await client.put(
            f"/admin/businesses/{business['id']}/members/{world.user_id}",
            json={"role": "admin", "active": active},
            headers=admin_headers,
        )
        assert response.status_code == 200
    await login(client, world)
    page, request_id, csrf = await consent_form(client, query(world))
    options = set(re.findall(r'<option value="([^"]+)"', page))
    assert options == {world.business_id, second["id"]}
    assert "Books Sync" in page
    assert "invoices:read" in page
    # Posting a business the user is not active in is refused.
    response = await client.post(
        "/oauth/authorize",
        form={
            "request_id": request_id,
            "csrf_token": csrf,
            "business_id": inactive["id"],
            "decision": "approve",
        },
    )
    assert "Location" not in response.headers
    assert response.status_code >= 400
    assert stranger["id"] not in page


async def _events(platform: Any, world: World) -> list[tuple[str, dict[str, Any]]]:
    async with platform.store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT type, data FROM events WHERE app_id = $1 AND business_id = $2 ORDER BY seq",
            world.app_id,
            world.business_id,
        )
    return [(row["type"], json.loads(row["data"])) for row in rows]


async def test_approve_installs_then_widens(client, admin_headers, platform) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    await authorize(client, world, scope="invoices:read")
    events = await _events(platform, world)
    assert [t for t, _ in events] == ["app.installed"]
    assert events[0][1]["scopes"] == ["invoices:read"]
    # Same scopes again: nothing new.
    await authorize(client, world, scope="invoices:read")
    assert len(await _events(platform, world)) == 1
    await authorize(client, world, scope="customers:read")
    events = await _events(platform, world)
    assert [t for t, _ in events] == ["app.installed", "app.scopes_updated"]
    assert set(events[1][1]["scopes"]) == {"invoices:read", "customers:read"}
    async with platform.store.transaction() as tx:
        row = await tx.fetchrow(
            "SELECT state, scopes FROM installations WHERE app_id = $1", world.app_id
        )
    assert row["state"] == "ACTIVE"
    assert set(json.loads(row["scopes"])) == {"invoices:read", "customers:read"}


async def test_consent_page_forbids_framing(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    for url in (query(world), query(world, client_id="nope")):
        response = await client.get(url)
        assert response.headers["X-Frame-Options"] == "DENY"
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


@pytest.mark.parametrize("csrf_case", ["wrong", "missing", "no-cookie"])
async def test_post_without_valid_csrf_is_refused(client, app, admin_headers, csrf_case) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    _, request_id, csrf = await consent_form(client, query(world))
    form = {"request_id": request_id, "business_id": world.business_id, "decision": "approve"}
    poster = client
    if csrf_case == "wrong":
        form["csrf_token"] = csrf[:-2] + ("AA" if not csrf.endswith("AA") else "BB")
    elif csrf_case == "no-cookie":
        form["csrf_token"] = csrf
        poster = app.test_client()  # a forged cross-site post carries neither cookie
    response = await poster.post("/oauth/authorize", form=form)
    assert "Location" not in response.headers
    assert response.status_code != 303
    assert "code=" not in (await response.get_data(as_text=True))
    # The legitimate decision still works afterwards.
    response = await client.post("/oauth/authorize", form={**form, "csrf_token": csrf})
    assert response.status_code == 303
    assert "code=" in response.headers["Location"]


async def test_the_page_says_who_is_signed_in_who_made_the_app_and_what_it_asks_in_words(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    url = query(world, scope="invoices:read customers:read")

    page, _, csrf = await consent_form(client, url)

    assert f"Signed in as <strong>{world.email}</strong>" in page
    assert 'action="/logout"' in page
    assert f'name="next" value="{html.escape(url)}"' in page
    assert "Not you? Switch account" in page
    assert f"is made by {world.email}" in page
    assert "See your invoices <code>invoices:read</code>" in page
    assert "See your customers <code>customers:read</code>" in page
    # Switching account signs out and comes back to this page once signed in again.
    response = await client.post("/logout", form={"csrf_token": csrf, "next": url})
    assert response.status_code == 303
    location = response.headers["Location"]
    assert urlsplit(location).path == "/login"
    assert parse_qs(urlsplit(location).query)["next"] == [url]


async def _member_of(
    client: Any, admin_headers: dict[str, str], world: World, name: str, role: str
) -> dict[str, Any]:
    business = await (
        await client.post("/admin/businesses", json={"name": name}, headers=admin_headers)
    ).get_json()
    response = await client.put(
        f"/admin/businesses/{business['id']}/members/{world.user_id}",
        json={"role": role},
        headers=admin_headers,
    )
    assert response.status_code == 200
    return business  # type: ignore[no-any-return]


async def test_the_picker_offers_only_businesses_where_the_user_may_approve(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers)  # owner of its business
    viewing = await _member_of(client, admin_headers, world, "Viewed", "viewer")
    installed = await _member_of(client, admin_headers, world, "Installed", "owner")
    response = await client.post(
        "/admin/installations",
        json={
            "appId": world.app_id,
            "businessId": installed["id"],
            "userId": world.user_id,
            "scopes": ["invoices:read", "customers:read"],
        },
        headers=admin_headers,
    )
    assert response.status_code == 201
    demoted = await client.put(
        f"/admin/businesses/{installed['id']}/members/{world.user_id}",
        json={"role": "viewer"},
        headers=admin_headers,
    )
    assert demoted.status_code == 200
    await login(client, world)

    # invoices:read: granted already where it is installed, so a viewer may approve it there.
    page, _, _ = await consent_form(client, query(world))
    offered = set(re.findall(r'<option value="([^"]+)"', page))
    # invoices:write would widen it: only where the role holds apps:install.
    wider, _, _ = await consent_form(client, query(world, scope="invoices:write"))
    offered_wider = set(re.findall(r'<option value="([^"]+)"', wider))

    assert offered == {world.business_id, installed["id"]}
    assert viewing["id"] not in offered
    assert offered_wider == {world.business_id}


async def test_a_user_who_may_install_nowhere_is_told_so(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers, role="viewer")
    await login(client, world)

    response = await client.get(query(world))

    assert response.status_code == 403
    assert await problem_message(response) == (
        "You may not install apps in any of your businesses: ask an owner or an admin"
    )


@pytest.mark.parametrize(
    ("redirect_uri", "source"),
    [
        (REDIRECT_URI, "https://app.example.com"),
        ("http://127.0.0.1:8765/callback", "http://127.0.0.1:8765"),
        # CSP has no form for an IPv6 literal: the scheme stands in.
        ("http://[::1]:8765/callback", "http:"),
    ],
)
async def test_the_consent_form_may_send_the_browser_on_to_the_apps_redirect_uri_only(
    client: Any, admin_headers: dict[str, str], redirect_uri: str, source: str
) -> None:
    """Browsers hold a form's redirect to the page's form-action: the consent page allows the
    origin of the request's redirect URI, and no other; other pages allow their own origin."""
    world = await make_world(client, admin_headers)
    app = await client.post(
        "/admin/apps",
        json={
            "name": "Desk Sync",
            "type": "PUBLIC",
            "redirectUris": [redirect_uri],
            "scopes": ["invoices:read"],
            "developerUserId": world.user_id,
            "reviewed": True,
        },
        headers=admin_headers,
    )
    assert app.status_code == 201
    world.client_id = (await app.get_json())["clientId"]
    await login(client, world)
    _, challenge = pkce_pair()

    consent = await client.get(
        query(
            world,
            redirect_uri=redirect_uri,
            code_challenge=challenge,
            code_challenge_method="S256",
        )
    )
    login_page = await client.get("/login")

    assert consent.status_code == 200, await consent.get_data(as_text=True)
    policy = consent.headers["Content-Security-Policy"]
    assert f"form-action 'self' {source};" in policy
    assert "frame-ancestors 'none'" in policy
    assert "form-action 'self';" in login_page.headers["Content-Security-Policy"]
