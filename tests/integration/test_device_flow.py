"""The device authorization grant (RFC 8628): device authorization, polling, the verification
page and the limits around them.

Spec: Endpoints > OAuth and discovery (/oauth/device/authorize), States and transitions > Device
flow and Tokens and codes, Errors > OAuth endpoint errors (token endpoint causes, other OAuth
endpoints), Authentication > Client authentication rules; contract.md: Application host pages
(``GET {auth_url}/device``), Details fixed for consistency (lockout). Time moves only through the
frozen clock.
"""

from __future__ import annotations

import dataclasses
import html
import re
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
import trio

from ledgerport import catalog

from .oauth_helpers import (
    ABSENT,
    DEVICE_CODE,
    World,
    add_member,
    assert_oauth_error,
    basic,
    device_authorize,
    device_decide,
    exchange,
    install,
    installation_id,
    login,
    make_world,
    poll,
    session_token,
    set_status,
    token_request,
)

API = "http://api.ledgerport.test"
VERIFICATION_URI = "http://app.ledgerport.test/device"
CONSONANTS = "BCDFGHJKLMNPQRSTVWXZ"
USER_CODE_FORM = re.compile(rf"^[{CONSONANTS}]{{4}}-[{CONSONANTS}]{{4}}$")
OTHER_IP = {"client": ("203.0.113.9", 40000)}
THIRD_IP = {"client": ("198.51.100.7", 40000)}
FORM_TYPE = {"Content-Type": "application/x-www-form-urlencoded"}
NOT_REVIEWED = "app has not completed review"
CODE_TTL = 600
INTERVAL = 5
WRONG_CODE_LIMIT = 10
GUESS_WINDOW = 300
LOCK_SECONDS = 60
LOCK_FAILURES = 10


# Everything that stores or reads device codes, grants and installations runs on both backends.
# Lockouts and wrong-code windows live in memory (contract.md allows it), and request checks and
# page rendering do not depend on storage: those run on SQLite only, which keeps the file quick.
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


# --- helpers --------------------------------------------------------------------------------------


async def assert_locked(response: Any, retry_after: int | None = None) -> None:
    body = await assert_oauth_error(response, 429, "temporarily_unavailable")
    seconds = int(response.headers["Retry-After"])
    assert 1 <= seconds <= LOCK_SECONDS
    if retry_after is not None:
        assert seconds == retry_after
    assert str(seconds) in body["error_description"]


async def start(client: Any, world: World, **kwargs: Any) -> dict[str, Any]:
    """A successful device authorization of the world's client."""
    response = await device_authorize(client, world, **kwargs)
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == 200, body
    return body


async def approve(client: Any, world: World, user_code: str, decision: str = "approve") -> None:
    """The world's user signs in and decides on the verification page for its business."""
    await login(client, world)
    response = await device_decide(client, world, user_code, decision=decision)
    assert response.status_code == 200, await response.get_data(as_text=True)


async def poll_tokens(client: Any, world: World, device_code: str) -> dict[str, Any]:
    response = await poll(client, world, device_code)
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == 200, body
    return body


def raw_form(pairs: list[tuple[str, str]]) -> str:
    return "&".join(f"{k}={quote(v, safe='')}" for k, v in pairs)


async def post_device_authorize(
    client: Any, world: World, pairs: list[tuple[str, str]], *, secret: str | None = None, **kw: Any
) -> Any:
    """POST raw form pairs (repeats allowed) authenticated by Basic with ``secret``."""
    return await client.post(
        "/oauth/device/authorize",
        data=raw_form(pairs),
        headers={**basic(world.client_id, secret or world.client_secret or ""), **FORM_TYPE},
        **kw,
    )


def csrf_of(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match is not None, page
    return match[1]


def alert_of(page: str) -> str:
    # A message the specification fixes is the detail below the plain words; another is the
    # alert itself.
    match = re.search(r'class="problem-code">(.*?)</code>', page, re.S) or re.search(
        r'role="alert">(.*?)</p>', page, re.S
    )
    assert match is not None, page
    return html.unescape(match[1]).strip()


async def enter_code(client: Any, user_code: str, **kw: Any) -> Any:
    """Fetch the entry form and submit ``user_code`` (``scope_base`` picks the IP)."""
    page = await (await client.get("/device", **kw)).get_data(as_text=True)
    return await client.post(
        "/device", form={"user_code": user_code, "csrf_token": csrf_of(page)}, **kw
    )


async def consent_of(client: Any, user_code: str) -> tuple[str, str, str]:
    """The consent page for a code: (page, hidden user_code, csrf token)."""
    response = await enter_code(client, user_code)
    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    hidden = re.search(r'name="user_code" value="([^"]+)"', page)
    assert hidden is not None, page
    return page, hidden[1], csrf_of(page)


async def decide(client: Any, hidden: str, csrf: str, business_id: str, decision: str) -> Any:
    return await client.post(
        "/device/decision",
        form={
            "user_code": hidden,
            "csrf_token": csrf,
            "business_id": business_id,
            "decision": decision,
        },
    )


async def new_business(
    client: Any, admin_headers: dict[str, str], *, sandbox: bool, member: str | None
) -> str:
    business = await (
        await client.post(
            "/admin/businesses",
            json={"name": "Sandbox" if sandbox else "Other", "sandbox": sandbox},
            headers=admin_headers,
        )
    ).get_json()
    if member is not None:
        response = await client.put(
            f"/admin/businesses/{business['id']}/members/{member}",
            json={"role": "owner"},
            headers=admin_headers,
        )
        assert response.status_code == 200
    return str(business["id"])


async def second_user(client: Any, admin_headers: dict[str, str], world: World) -> World:
    user_id, email, password = await add_member(client, admin_headers, world, "owner")
    return dataclasses.replace(world, user_id=user_id, email=email, password=password)


async def installation_scopes(client: Any, admin_headers: dict[str, str], world: World) -> set[str]:
    """The installation's granted scopes, as a token exchange hands them out."""
    subject = await session_token(client, admin_headers, world)
    response = await exchange(client, world, subject)
    body = await response.get_json()
    assert response.status_code == 200, body
    return set(body["scope"].split())


# --- device authorization response ----------------------------------------------------------------


async def test_authorization_response_fields(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    assert isinstance(body["device_code"], str)
    assert len(body["device_code"]) >= 20
    assert USER_CODE_FORM.match(body["user_code"]), body["user_code"]
    assert body["verification_uri"] == VERIFICATION_URI
    assert body["expires_in"] == CODE_TTL
    assert body["interval"] == INTERVAL


@SQLITE_ONLY
async def test_verification_uri_complete_carries_the_user_code(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    complete = urlsplit(body["verification_uri_complete"])
    assert f"{complete.scheme}://{complete.netloc}{complete.path}" == VERIFICATION_URI
    assert parse_qs(complete.query) == {"user_code": [body["user_code"]]}


@SQLITE_ONLY
async def test_authorization_response_is_not_cached(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    response = await device_authorize(client, world)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Pragma"] == "no-cache"


async def test_each_authorization_gets_fresh_codes(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    first, second = await start(client, world), await start(client, world)
    assert first["device_code"] != second["device_code"]
    assert first["user_code"] != second["user_code"]


@SQLITE_ONLY
@pytest.mark.parametrize("method", ["basic", "body_secret", "public_client_id"])
async def test_client_authentication_methods(client, admin_headers, method: str) -> None:
    app_type = "PUBLIC" if method == "public_client_id" else "CONFIDENTIAL"
    world = await make_world(client, admin_headers, app_type=app_type)
    form = {"scope": "invoices:read"}
    headers: dict[str, str] = {}
    if method == "basic":
        assert world.client_secret is not None
        headers = basic(world.client_id, world.client_secret)
    elif method == "body_secret":
        assert world.client_secret is not None
        form |= {"client_id": world.client_id, "client_secret": world.client_secret}
    else:
        assert world.client_secret is None
        form |= {"client_id": world.client_id}
    response = await client.post("/oauth/device/authorize", form=form, headers=headers)
    body = await response.get_json()
    assert response.status_code == 200, body
    assert USER_CODE_FORM.match(body["user_code"])


@SQLITE_ONLY
async def test_unrecognized_parameters_are_ignored(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    response = await device_authorize(
        client, world, extra={"audience": "something", "x_device_model": "kiosk-7", "state": "s"}
    )
    body = await response.get_json()
    assert response.status_code == 200, body
    assert USER_CODE_FORM.match(body["user_code"])


# --- device authorization errors ------------------------------------------------------------------


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("case", "basic_used"),
    [
        ("missing_client_id", False),
        ("unknown_client_body", False),
        ("unknown_client_basic", True),
        ("suspended_basic", True),
        ("deactivated_body", False),
        ("confidential_without_secret", False),
        ("wrong_secret_basic", True),
        ("wrong_secret_body", False),
    ],
)
async def test_invalid_client(client, admin_headers, case: str, basic_used: bool) -> None:
    world = await make_world(client, admin_headers)
    secret = world.client_secret or ""
    form = {"scope": "invoices:read"}
    headers: dict[str, str] = {}
    if case == "unknown_client_body":
        form |= {"client_id": "no-such-client", "client_secret": "whatever"}
    elif case == "unknown_client_basic":
        headers = basic("no-such-client", "whatever")
    elif case == "suspended_basic":
        await set_status(client, admin_headers, world, "SUSPENDED")
        headers = basic(world.client_id, secret)
    elif case == "deactivated_body":
        await set_status(client, admin_headers, world, "DEACTIVATED")
        form |= {"client_id": world.client_id, "client_secret": secret}
    elif case == "confidential_without_secret":
        form |= {"client_id": world.client_id}
    elif case == "wrong_secret_basic":
        headers = basic(world.client_id, secret + "x")
    elif case == "wrong_secret_body":
        form |= {"client_id": world.client_id, "client_secret": secret + "x"}
    response = await client.post("/oauth/device/authorize", form=form, headers=headers)
    await assert_oauth_error(response, 401, "invalid_client")
    challenge = response.headers.get("WWW-Authenticate")
    if basic_used:
        assert challenge is not None
        assert challenge.startswith("Basic realm=")
    else:
        assert challenge is None


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("scope", "named"),
    [
        pytest.param("invoices:read payments:read", "payments:read", id="catalog-scope"),
        pytest.param("made-up:scope", "made-up:scope", id="unknown-scope"),
    ],
)
async def test_unregistered_scope(client, admin_headers, scope: str, named: str) -> None:
    world = await make_world(client, admin_headers)
    response = await device_authorize(client, world, scope=scope)
    body = await assert_oauth_error(response, 400, "invalid_scope")
    assert named in body["error_description"]


@SQLITE_ONLY
async def test_missing_scope_is_invalid_request(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    response = await client.post(
        "/oauth/device/authorize", form={}, headers=basic(world.client_id, world.client_secret)
    )
    await assert_oauth_error(response, 400, "invalid_request")


@SQLITE_ONLY
@pytest.mark.parametrize(
    "resources",
    [
        pytest.param(["https://evil.example.com/"], id="other-origin"),
        pytest.param(["http://api.ledgerport.test:8443/"], id="other-port"),
        pytest.param(["/invoices"], id="relative"),
        pytest.param([API + "/", API + "/invoices"], id="sent-twice"),
        pytest.param([API + "/" + "a" * (catalog.URI_MAX_LENGTH - len(API))], id="513-chars"),
    ],
)
async def test_invalid_target(client, admin_headers, resources: list[str]) -> None:
    world = await make_world(client, admin_headers)
    pairs = [("scope", "invoices:read")] + [("resource", r) for r in resources]
    response = await post_device_authorize(client, world, pairs)
    await assert_oauth_error(response, 400, "invalid_target")


@pytest.mark.parametrize(
    "resource",
    [
        pytest.param(API + "/", id="root"),
        pytest.param(API + "/" + "a" * (catalog.URI_MAX_LENGTH - len(API) - 1), id="512-chars"),
    ],
)
async def test_valid_resource_accepted(client, admin_headers, resource: str) -> None:
    world = await make_world(client, admin_headers)
    assert len(resource) <= catalog.URI_MAX_LENGTH
    response = await post_device_authorize(
        client, world, [("scope", "invoices:read"), ("resource", resource)]
    )
    assert response.status_code == 200, await response.get_json()


# --- the device authorization lockout -------------------------------------------------------------


async def lock_device(client: Any, world: World, **kw: Any) -> None:
    """Ten wrong secrets at /oauth/device/authorize from one IP: each still 401."""
    for attempt in range(LOCK_FAILURES):
        response = await client.post(
            "/oauth/device/authorize",
            form={"scope": "invoices:read"},
            headers=basic(world.client_id, "wrong-secret"),
            **kw,
        )
        assert response.status_code == 401, attempt


async def lock_token(client: Any, world: World) -> None:
    """Ten wrong secrets at /oauth/token from one IP: each still 401."""
    for attempt in range(LOCK_FAILURES):
        response = await client.post(
            "/oauth/token",
            form={"grant_type": DEVICE_CODE, "device_code": "lp_dc_unknown"},
            headers=basic(world.client_id, "wrong-secret"),
        )
        assert response.status_code == 401, attempt


@SQLITE_ONLY
async def test_ten_failures_lock_device_authorization(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await lock_device(client, world)
    await assert_locked(await device_authorize(client, world), LOCK_SECONDS)


@SQLITE_ONLY
async def test_nine_failures_do_not_lock_device_authorization(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    for _ in range(LOCK_FAILURES - 1):
        response = await client.post(
            "/oauth/device/authorize",
            form={"scope": "invoices:read"},
            headers=basic(world.client_id, "wrong-secret"),
        )
        assert response.status_code == 401
    response = await device_authorize(client, world)
    assert response.status_code == 200, await response.get_json()


@SQLITE_ONLY
async def test_failures_older_than_a_minute_do_not_count(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    for _ in range(LOCK_FAILURES - 1):
        response = await client.post(
            "/oauth/device/authorize",
            form={"scope": "invoices:read"},
            headers=basic(world.client_id, "wrong-secret"),
        )
        assert response.status_code == 401
    clock.advance(LOCK_SECONDS)
    response = await client.post(
        "/oauth/device/authorize",
        form={"scope": "invoices:read"},
        headers=basic(world.client_id, "wrong-secret"),
    )
    assert response.status_code == 401
    response = await device_authorize(client, world)
    assert response.status_code == 200, await response.get_json()


@SQLITE_ONLY
async def test_device_lock_leaves_other_ip_unaffected(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    await lock_device(client, world)
    response = await client.post(
        "/oauth/device/authorize",
        form={"scope": "invoices:read"},
        headers=basic(world.client_id, world.client_secret),
        scope_base=OTHER_IP,
    )
    assert response.status_code == 200, await response.get_json()


@SQLITE_ONLY
async def test_device_lock_does_not_lock_token_endpoint(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await lock_device(client, world)
    await assert_locked(await device_authorize(client, world))
    response = await poll(client, world, "lp_dc_unknown")
    await assert_oauth_error(response, 400, "invalid_grant")


@SQLITE_ONLY
async def test_token_lock_does_not_lock_device_authorization(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await lock_token(client, world)
    await assert_locked(await poll(client, world, "lp_dc_unknown"))
    response = await device_authorize(client, world)
    assert response.status_code == 200, await response.get_json()


@SQLITE_ONLY
async def test_device_lock_lifts_after_sixty_seconds(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    await lock_device(client, world)
    clock.advance(LOCK_SECONDS - 1)
    await assert_locked(await device_authorize(client, world), 1)
    clock.advance(1)
    response = await device_authorize(client, world)
    assert response.status_code == 200, await response.get_json()


# --- polling --------------------------------------------------------------------------------------


async def test_first_poll_right_away_is_not_slow_down(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, "authorization_pending")


async def test_polling_at_the_interval_stays_pending(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    for attempt in range(4):
        clock.advance(INTERVAL)
        response = await poll(client, world, body["device_code"])
        assert (await response.get_json())["error"] == "authorization_pending", attempt


async def test_polling_again_at_once_is_slow_down(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await poll(client, world, body["device_code"])
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, "slow_down")


@pytest.mark.parametrize(
    ("wait", "expected"),
    [
        pytest.param(INTERVAL + 5, "authorization_pending", id="new-interval"),
        pytest.param(INTERVAL, "slow_down", id="old-interval"),
    ],
)
async def test_after_slow_down_the_interval_grows_by_five(
    client, admin_headers, clock, wait: int, expected: str
) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await poll(client, world, body["device_code"])
    slowed = await poll(client, world, body["device_code"])
    assert (await slowed.get_json())["error"] == "slow_down"
    clock.advance(wait)
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, expected)


@pytest.mark.parametrize("app_type", ["CONFIDENTIAL", "PUBLIC"])
async def test_approved_poll_issues_tokens_with_requested_scope(
    client, admin_headers, app_type: str
) -> None:
    world = await make_world(client, admin_headers, app_type=app_type)
    body = await start(client, world, scope="invoices:read customers:read")
    await approve(client, world, body["user_code"])
    response = await poll(client, world, body["device_code"])
    tokens = await response.get_json()
    assert response.status_code == 200, tokens
    assert response.headers["Cache-Control"] == "no-store"
    assert tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 3600
    assert tokens["access_token"]
    assert tokens["refresh_token"]
    assert set(tokens["scope"].split()) == {"invoices:read", "customers:read"}


@SQLITE_ONLY
async def test_device_access_token_lists_invoices(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"])
    tokens = await poll_tokens(client, world, body["device_code"])
    response = await client.get(
        "/invoices", headers={"Authorization": f"Bearer {tokens['access_token']}"}
    )
    assert response.status_code == 200, await response.get_json()
    assert "data" in await response.get_json()


async def test_poll_after_tokens_is_invalid_grant(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"])
    await poll_tokens(client, world, body["device_code"])
    clock.advance(INTERVAL)
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, "invalid_grant")


async def test_denied_code_answers_access_denied(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"], decision="deny")
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, "access_denied")


async def test_denied_code_is_consumed_after_access_denied(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"], decision="deny")
    first = await poll(client, world, body["device_code"])
    assert (await first.get_json())["error"] == "access_denied"
    clock.advance(INTERVAL)
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, "invalid_grant")


@pytest.mark.parametrize("state", ["pending", "approved"])
async def test_code_expires_after_ten_minutes(client, admin_headers, clock, state: str) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    if state == "approved":
        await approve(client, world, body["user_code"])
    clock.advance(CODE_TTL)
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, "expired_token")


@SQLITE_ONLY
async def test_approved_code_redeemable_just_before_expiry(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"])
    clock.advance(CODE_TTL - 1)
    response = await poll(client, world, body["device_code"])
    assert response.status_code == 200, await response.get_json()


async def test_code_of_another_client_is_invalid_grant(client, admin_headers) -> None:
    owner = await make_world(client, admin_headers)
    thief = await make_world(client, admin_headers)
    body = await start(client, owner)
    await approve(client, owner, body["user_code"])
    response = await poll(client, thief, body["device_code"])
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)
    # The attempt did not spend the owner's code.
    await poll_tokens(client, owner, body["device_code"])


@SQLITE_ONLY
async def test_unknown_device_code_is_invalid_grant(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    response = await poll(client, world, "lp_dc_doesnotexist")
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)


@SQLITE_ONLY
async def test_missing_device_code_is_invalid_request(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    response = await token_request(client, world, {"grant_type": DEVICE_CODE})
    await assert_oauth_error(response, 400, "invalid_request")


async def test_uninstall_cancels_approved_code(client, admin_headers, platform) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"])
    ins = await installation_id(platform, world)
    response = await client.delete(f"/admin/installations/{ins}", headers=admin_headers)
    assert response.status_code == 204
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)


@SQLITE_ONLY
async def test_uninstall_and_reinstall_keeps_code_cancelled(
    client, admin_headers, platform
) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"])
    ins = await installation_id(platform, world)
    response = await client.delete(f"/admin/installations/{ins}", headers=admin_headers)
    assert response.status_code == 204
    await install(client, admin_headers, world)
    response = await poll(client, world, body["device_code"])
    await assert_oauth_error(response, 400, "invalid_grant", ABSENT)


@pytest.mark.parametrize(
    ("refresh_resource", "expected"),
    [
        pytest.param(API + "/invoices", 200, id="same-resource"),
        pytest.param(API + "/customers", 400, id="other-resource"),
    ],
)
async def test_resource_is_carried_into_the_grant(
    client, admin_headers, refresh_resource: str, expected: int
) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world, extra={"resource": API + "/invoices"})
    await approve(client, world, body["user_code"])
    tokens = await poll_tokens(client, world, body["device_code"])
    response = await token_request(
        client,
        world,
        {
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "resource": refresh_resource,
        },
    )
    answer = await response.get_json()
    assert response.status_code == expected, answer
    if expected == 400:
        assert answer["error"] == "invalid_target"


async def test_poll_with_other_resource_is_invalid_target(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world, extra={"resource": API + "/invoices"})
    await approve(client, world, body["user_code"])
    response = await token_request(
        client,
        world,
        {"grant_type": DEVICE_CODE, "device_code": body["device_code"], "resource": API + "/x"},
    )
    await assert_oauth_error(response, 400, "invalid_target")


# --- verification page ----------------------------------------------------------------------------


@SQLITE_ONLY
async def test_device_page_without_session_redirects_to_login(client) -> None:
    response = await client.get("/device?user_code=BCDF-GHJK")
    assert response.status_code == 303
    location = urlsplit(response.headers["Location"])
    assert location.path == "/login"
    assert not location.netloc
    assert parse_qs(location.query)["next"] == ["/device?user_code=BCDF-GHJK"]


@SQLITE_ONLY
async def test_device_page_shows_code_form(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    response = await client.get("/device")
    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    form = re.search(r'<form method="post" action="/device">(.*?)</form>', page, re.S)
    assert form is not None, page
    assert 'name="user_code"' in form[1]
    assert 'name="csrf_token"' in form[1]


@SQLITE_ONLY
async def test_device_page_forbids_framing(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await login(client, world)
    response = await client.get("/device")
    assert response.status_code == 200
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


@SQLITE_ONLY
async def test_verification_uri_complete_prefills_the_code(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    complete = urlsplit(body["verification_uri_complete"])
    response = await client.get(f"{complete.path}?{complete.query}")
    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    field = re.search(r'<input id="user_code" name="user_code" value="([^"]*)"', page)
    assert field is not None, page
    assert field[1] == body["user_code"]


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param(lambda code: code, id="as-shown"),
        pytest.param(lambda code: code.lower(), id="lower-case"),
        pytest.param(lambda code: code.replace("-", ""), id="no-dash"),
        pytest.param(lambda code: code.replace("-", "").lower(), id="lower-no-dash"),
        pytest.param(lambda code: code.replace("-", " "), id="space"),
    ],
)
async def test_code_spellings_reach_consent(client, admin_headers, spelling: Any) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    response = await enter_code(client, spelling(body["user_code"]))
    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    assert 'name="decision" value="approve"' in page
    assert "Books Sync" in page
    assert "invoices:read" in page


@SQLITE_ONLY
async def test_unknown_code_shows_error_and_form(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await start(client, world)
    await login(client, world)
    response = await enter_code(client, "BBBB-BBBB")
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert alert_of(page)
    assert 'action="/device"' in page
    assert 'name="user_code" value="BBBB-BBBB"' in page
    assert 'name="decision"' not in page


async def test_expired_code_is_refused(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    clock.advance(CODE_TTL)
    response = await enter_code(client, body["user_code"])
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert 'name="decision"' not in page


@SQLITE_ONLY
@pytest.mark.parametrize("csrf", [None, "forged-token"])
async def test_code_entry_without_valid_csrf_is_refused(
    client, admin_headers, csrf: str | None
) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    await client.get("/device")
    form = {"user_code": body["user_code"]}
    if csrf is not None:
        form["csrf_token"] = csrf
    response = await client.post("/device", form=form)
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert 'name="decision"' not in page


async def test_decision_without_csrf_is_refused(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    _, hidden, _ = await consent_of(client, body["user_code"])
    response = await client.post(
        "/device/decision",
        form={"user_code": hidden, "business_id": world.business_id, "decision": "approve"},
    )
    assert response.status_code == 400
    # Nothing was decided: the device is still waiting.
    pending = await poll(client, world, body["device_code"])
    assert (await pending.get_json())["error"] == "authorization_pending"


async def test_decision_on_non_member_business_is_refused(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    foreign = await new_business(client, admin_headers, sandbox=False, member=None)
    body = await start(client, world)
    await login(client, world)
    _, hidden, csrf = await consent_of(client, body["user_code"])
    response = await decide(client, hidden, csrf, foreign, "approve")
    # The form again, the refusal beside the business; the request waits still.
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert 'id="business_id-problem">That business is not one you may choose here<' in page
    pending = await poll(client, world, body["device_code"])
    assert (await pending.get_json())["error"] == "authorization_pending"
    # ... and a business it offers is approved on it.
    approved = await decide(client, hidden, csrf, world.business_id, "approve")
    assert approved.status_code == 200, await approved.get_data(as_text=True)
    await poll_tokens(client, world, body["device_code"])


@pytest.mark.parametrize("second", ["approve", "deny"])
async def test_decided_code_cannot_be_decided_again(client, admin_headers, second: str) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    _, hidden, csrf = await consent_of(client, body["user_code"])
    first = await decide(client, hidden, csrf, world.business_id, "approve")
    assert first.status_code == 200
    again = await decide(client, hidden, csrf, world.business_id, second)
    assert again.status_code == 400, await again.get_data(as_text=True)
    # The first decision stands.
    await poll_tokens(client, world, body["device_code"])


@SQLITE_ONLY
async def test_decided_code_cannot_be_entered_again(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"])
    response = await enter_code(client, body["user_code"])
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert 'name="decision"' not in page


# --- unreviewed apps and installations ------------------------------------------------------------


def offered_businesses(page: str) -> set[str]:
    select = re.search(r'<select[^>]*name="business_id"[^>]*>(.*?)</select>', page, re.S)
    assert select is not None, page
    return set(re.findall(r'<option value="([^"]+)"', select[1]))


async def test_unreviewed_app_offers_only_sandbox_businesses(client, admin_headers) -> None:
    world = await make_world(client, admin_headers, reviewed=False)
    sandbox = await new_business(client, admin_headers, sandbox=True, member=world.user_id)
    body = await start(client, world)
    await login(client, world)
    page, _, _ = await consent_of(client, body["user_code"])
    assert offered_businesses(page) == {sandbox}


async def test_unreviewed_app_refused_on_non_sandbox_business(client, admin_headers) -> None:
    world = await make_world(client, admin_headers, reviewed=False)
    await new_business(client, admin_headers, sandbox=True, member=world.user_id)
    body = await start(client, world)
    await login(client, world)
    _, hidden, csrf = await consent_of(client, body["user_code"])
    response = await decide(client, hidden, csrf, world.business_id, "approve")
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert alert_of(page) == NOT_REVIEWED
    pending = await poll(client, world, body["device_code"])
    assert (await pending.get_json())["error"] == "authorization_pending"


async def test_unreviewed_app_approved_on_sandbox_gets_tokens(client, admin_headers) -> None:
    world = await make_world(client, admin_headers, reviewed=False)
    sandbox = await new_business(client, admin_headers, sandbox=True, member=world.user_id)
    body = await start(client, world)
    await login(client, world)
    _, hidden, csrf = await consent_of(client, body["user_code"])
    response = await decide(client, hidden, csrf, sandbox, "approve")
    assert response.status_code == 200, await response.get_data(as_text=True)
    await poll_tokens(client, world, body["device_code"])


@SQLITE_ONLY
async def test_unreviewed_app_without_sandbox_shows_problem(client, admin_headers) -> None:
    world = await make_world(client, admin_headers, reviewed=False)
    body = await start(client, world)
    await login(client, world)
    response = await enter_code(client, body["user_code"])
    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert alert_of(page) == NOT_REVIEWED
    assert 'name="decision"' not in page


async def test_approval_creates_installation(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    before = await client.post(
        "/admin/session-tokens",
        json={"appId": world.app_id, "businessId": world.business_id, "userId": world.user_id},
        headers=admin_headers,
    )
    assert before.status_code == 409
    body = await start(client, world, scope="invoices:read customers:read")
    await approve(client, world, body["user_code"])
    assert await installation_scopes(client, admin_headers, world) == {
        "invoices:read",
        "customers:read",
    }


async def test_approval_widens_installation(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world, ("invoices:read",))
    body = await start(client, world, scope="customers:read")
    await approve(client, world, body["user_code"])
    assert await installation_scopes(client, admin_headers, world) == {
        "invoices:read",
        "customers:read",
    }


async def test_token_after_widening_has_only_requested_scope(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world, ("invoices:read",))
    body = await start(client, world, scope="customers:read")
    await approve(client, world, body["user_code"])
    tokens = await poll_tokens(client, world, body["device_code"])
    assert tokens["scope"] == "customers:read"


# --- wrong-code guessing ------------------------------------------------------------------------


async def guess_wrong(client: Any, times: int, **kw: Any) -> None:
    for attempt in range(times):
        response = await enter_code(client, "BBBB-BBBB", **kw)
        assert response.status_code == 400, attempt


async def assert_guessing_blocked(response: Any) -> None:
    page = await response.get_data(as_text=True)
    assert response.status_code == 429, page
    seconds = int(response.headers["Retry-After"])
    assert 1 <= seconds <= GUESS_WINDOW
    assert 'name="decision"' not in page


@SQLITE_ONLY
async def test_ten_wrong_codes_block_even_a_right_code(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    await guess_wrong(client, WRONG_CODE_LIMIT)
    await assert_guessing_blocked(await enter_code(client, body["user_code"]))


@SQLITE_ONLY
async def test_nine_wrong_codes_do_not_block(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    await guess_wrong(client, WRONG_CODE_LIMIT - 1)
    response = await enter_code(client, body["user_code"])
    assert response.status_code == 200, await response.get_data(as_text=True)


@SQLITE_ONLY
async def test_wrong_code_limit_is_per_user(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    await guess_wrong(client, WRONG_CODE_LIMIT)
    # The same user from another address is still blocked.
    await assert_guessing_blocked(await enter_code(client, body["user_code"], scope_base=OTHER_IP))


@SQLITE_ONLY
async def test_wrong_code_limit_is_per_ip(client, app, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    other = await second_user(client, admin_headers, world)
    body = await start(client, world)
    await login(client, world)
    await guess_wrong(client, WRONG_CODE_LIMIT)
    # Another user from the same address is blocked too.
    browser = app.test_client()
    await login(browser, other)
    await assert_guessing_blocked(await enter_code(browser, body["user_code"]))


@SQLITE_ONLY
async def test_wrong_code_limit_spares_other_users_and_ips(client, app, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    other = await second_user(client, admin_headers, world)
    body = await start(client, world)
    await login(client, world)
    await guess_wrong(client, WRONG_CODE_LIMIT)
    browser = app.test_client()
    await login(browser, other)
    response = await enter_code(browser, body["user_code"], scope_base=THIRD_IP)
    assert response.status_code == 200, await response.get_data(as_text=True)


@SQLITE_ONLY
async def test_wrong_code_limit_lifts_after_the_window(client, admin_headers, clock) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    await guess_wrong(client, WRONG_CODE_LIMIT)
    clock.advance(GUESS_WINDOW - 1)
    await assert_guessing_blocked(await enter_code(client, body["user_code"]))
    clock.advance(1)
    response = await enter_code(client, body["user_code"])
    assert response.status_code == 200, await response.get_data(as_text=True)


@SQLITE_ONLY
async def test_wrong_codes_at_the_decision_step_count_too(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    page = await (await client.get("/device")).get_data(as_text=True)
    csrf = csrf_of(page)
    for attempt in range(WRONG_CODE_LIMIT):
        guess = await decide(
            client, f"BBBBBBB{CONSONANTS[attempt]}", csrf, world.business_id, "deny"
        )
        assert guess.status_code == 400, attempt
    await assert_guessing_blocked(await enter_code(client, body["user_code"]))


@SQLITE_ONLY
async def test_decision_step_is_refused_while_guessing_is_blocked(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await login(client, world)
    csrf = csrf_of(await (await client.get("/device")).get_data(as_text=True))
    for attempt in range(WRONG_CODE_LIMIT):
        await enter_code(client, f"BBBBBBB{CONSONANTS[attempt]}")

    response = await decide(client, body["user_code"], csrf, world.business_id, "approve")

    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) > 0


async def _poll_into(responses: list[Any], client: Any, world: World, device_code: str) -> None:
    responses.append(await poll(client, world, device_code))


async def test_concurrent_polls_of_an_approved_code_issue_tokens_once(client, admin_headers):
    world = await make_world(client, admin_headers)
    body = await start(client, world)
    await approve(client, world, body["user_code"])
    responses: list[Any] = []

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(_poll_into, responses, client, world, body["device_code"])

    assert sorted(r.status_code for r in responses) == [200, 400, 400]
    for loser in (r for r in responses if r.status_code == 400):
        await assert_oauth_error(loser, 400, "invalid_grant", ABSENT)
