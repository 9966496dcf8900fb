"""Helpers to drive the OAuth flows through the test client."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from ledgerport import books

REDIRECT_URI = "https://app.example.com/callback"


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    return verifier, challenge.rstrip(b"=").decode()


def basic(client_id: str, secret: str) -> dict[str, str]:
    raw = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


@dataclass
class World:
    business_id: str
    user_id: str
    email: str
    password: str
    app_id: str
    client_id: str
    client_secret: str | None


async def make_world(
    client: Any,
    admin_headers: dict[str, str],
    *,
    app_type: str = "CONFIDENTIAL",
    role: str = "owner",
    reviewed: bool = True,
    sandbox: bool = False,
    scopes: tuple[str, ...] = ("invoices:read", "invoices:write", "customers:read"),
    business_fields: dict[str, Any] | None = None,
) -> World:
    """A business (``business_fields`` adds fields such as its plan), a member with ``role`` and an
    app registered with ``scopes``."""
    business = await (
        await client.post(
            "/admin/businesses",
            json={"name": "Acme", "sandbox": sandbox, **(business_fields or {})},
            headers=admin_headers,
        )
    ).get_json()
    email, password = f"{secrets.token_hex(4)}@example.com", "correct horse battery"
    user = await (
        await client.post(
            "/admin/users", json={"email": email, "password": password}, headers=admin_headers
        )
    ).get_json()
    response = await client.put(
        f"/admin/businesses/{business['id']}/members/{user['id']}",
        json={"role": role},
        headers=admin_headers,
    )
    assert response.status_code == 200
    app = await (
        await client.post(
            "/admin/apps",
            json={
                "name": "Books Sync",
                "type": app_type,
                "redirectUris": [REDIRECT_URI],
                "scopes": list(scopes),
                "developerUserId": user["id"],
                "reviewed": reviewed,
            },
            headers=admin_headers,
        )
    ).get_json()
    return World(
        business["id"],
        user["id"],
        email,
        password,
        app["id"],
        app["clientId"],
        app.get("clientSecret"),
    )


async def login(client: Any, world: World) -> None:
    page = await (await client.get("/login")).get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert csrf is not None
    response = await client.post(
        "/login",
        form={"email": world.email, "password": world.password, "csrf_token": csrf[1], "next": "/"},
    )
    assert response.status_code == 303


async def authorize(
    client: Any,
    world: World,
    *,
    scope: str = "invoices:read",
    challenge: str | None = None,
    method: str = "S256",
    decision: str = "approve",
    state: str = "xyz",
    extra: dict[str, str] | None = None,
) -> dict[str, list[str]]:
    """Consent through the pages; answers the callback's query parameters."""
    query = {
        "response_type": "code",
        "client_id": world.client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": scope,
        "state": state,
        **(extra or {}),
    }
    if challenge is not None:
        query |= {"code_challenge": challenge, "code_challenge_method": method}
    _, callback = await decide_consent(
        client, world, f"/oauth/authorize?{urlencode(query)}", REDIRECT_URI, decision
    )
    return callback


async def decide_consent(
    client: Any, world: World, path: str, redirect_uri: str, decision: str = "approve"
) -> tuple[str, dict[str, list[str]]]:
    """Open the consent page at ``path`` and answer it with ``decision`` for the world's
    business: the page, and the query of the callback to ``redirect_uri``."""
    response = await client.get(path)
    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    request_id = re.search(r'name="request_id" value="([^"]+)"', page)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert request_id is not None
    assert csrf is not None
    response = await client.post(
        "/oauth/authorize",
        form={
            "request_id": request_id[1],
            "csrf_token": csrf[1],
            "business_id": world.business_id,
            "decision": decision,
        },
    )
    assert response.status_code == 303, await response.get_data(as_text=True)
    location = response.headers["Location"]
    assert location.startswith(redirect_uri + "?")
    return page, parse_qs(urlsplit(location).query)


async def token_request(
    client: Any, world: World, form: dict[str, str], *, use_basic: bool = True
) -> Any:
    headers: dict[str, str] = {}
    if world.client_secret is not None and use_basic:
        headers = basic(world.client_id, world.client_secret)
    else:
        form = {"client_id": world.client_id, **form}
    return await client.post("/oauth/token", form=form, headers=headers)


async def full_grant(client: Any, world: World, scope: str = "invoices:read") -> dict[str, Any]:
    verifier, challenge = pkce_pair()
    await login(client, world)
    callback = await authorize(client, world, scope=scope, challenge=challenge)
    response = await token_request(
        client,
        world,
        {
            "grant_type": "authorization_code",
            "code": callback["code"][0],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
        },
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    body: dict[str, Any] = await response.get_json()
    return body


TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"


async def install(
    client: Any,
    admin_headers: dict[str, str],
    world: World,
    scopes: tuple[str, ...] = ("invoices:read",),
    *,
    user_id: str | None = None,
) -> dict[str, Any]:
    """A managed install of the world's app in its business (operator API)."""
    response = await client.post(
        "/admin/installations",
        json={
            "appId": world.app_id,
            "businessId": world.business_id,
            "userId": user_id or world.user_id,
            "scopes": list(scopes),
        },
        headers=admin_headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    body: dict[str, Any] = await response.get_json()
    return body


async def add_member(
    client: Any, admin_headers: dict[str, str], world: World, role: str
) -> tuple[str, str, str]:
    """A new user with ``role`` in the world's business; answers (user id, email, password)."""
    email, password = f"{secrets.token_hex(4)}@example.com", "correct horse battery"
    user = await (
        await client.post(
            "/admin/users", json={"email": email, "password": password}, headers=admin_headers
        )
    ).get_json()
    response = await client.put(
        f"/admin/businesses/{world.business_id}/members/{user['id']}",
        json={"role": role},
        headers=admin_headers,
    )
    assert response.status_code == 200
    return user["id"], email, password


async def session_token(
    client: Any, admin_headers: dict[str, str], world: World, *, user_id: str | None = None
) -> str:
    """A session token from the operator endpoint, as the app bridge would hand it."""
    response = await client.post(
        "/admin/session-tokens",
        json={
            "appId": world.app_id,
            "businessId": world.business_id,
            "userId": user_id or world.user_id,
        },
        headers=admin_headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    token: str = (await response.get_json())["sessionToken"]
    return token


async def exchange(
    client: Any,
    world: World,
    subject_token: str,
    *,
    as_json: bool = False,
    extra: dict[str, str] | None = None,
) -> Any:
    """POST a token exchange with the world's client authenticated by HTTP Basic."""
    assert world.client_secret is not None
    params = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": subject_token,
        "subject_token_type": JWT_TYPE,
        **(extra or {}),
    }
    headers = basic(world.client_id, world.client_secret)
    if as_json:
        return await client.post("/oauth/token", json=params, headers=headers)
    return await client.post("/oauth/token", form=params, headers=headers)


async def device_authorize(
    client: Any, world: World, *, scope: str = "invoices:read", extra: dict[str, str] | None = None
) -> Any:
    """POST /oauth/device/authorize as the world's client (Basic, or client_id for PUBLIC)."""
    form = {"scope": scope, **(extra or {})}
    headers: dict[str, str] = {}
    if world.client_secret is not None:
        headers = basic(world.client_id, world.client_secret)
    else:
        form["client_id"] = world.client_id
    return await client.post("/oauth/device/authorize", form=form, headers=headers)


async def poll(client: Any, world: World, device_code: str) -> Any:
    return await token_request(
        client, world, {"grant_type": DEVICE_CODE, "device_code": device_code}
    )


async def enter_user_code(client: Any, user_code: str) -> Any:
    """Submit a user code on the verification page of a signed-in browser."""
    page = await (await client.get("/device")).get_data(as_text=True)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert csrf is not None, page
    return await client.post("/device", form={"user_code": user_code, "csrf_token": csrf[1]})


async def device_decide(
    client: Any, world: World, user_code: str, *, decision: str = "approve"
) -> Any:
    """Enter the code, then approve or deny on the consent form for the world's business."""
    response = await enter_user_code(client, user_code)
    page = await response.get_data(as_text=True)
    assert response.status_code == 200, page
    hidden = re.search(r'name="user_code" value="([^"]+)"', page)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert hidden is not None, page
    assert csrf is not None
    return await client.post(
        "/device/decision",
        form={
            "user_code": hidden[1],
            "csrf_token": csrf[1],
            "decision": decision,
            "business_id": world.business_id,
        },
    )


ABSENT = object()
"""``description=ABSENT``: the OAuth error must carry no error_description."""


async def assert_oauth_error(
    response: Any, status: int, error: str, description: object = None
) -> dict[str, Any]:
    """Status, no-store headers and the OAuth error shape ``{error, error_description?, message}``.

    ``description`` None checks only the shape, ABSENT requires no error_description, and any
    other value requires exactly that error_description.
    """
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == status, body
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Pragma"] == "no-cache"
    assert body["error"] == error, body
    assert set(body) <= {"error", "error_description", "message"}, body
    assert isinstance(body["message"], str)
    assert body["message"]
    if "error_description" in body:
        assert isinstance(body["error_description"], str)
        assert body["error_description"]
    if description is ABSENT:
        assert "error_description" not in body, body
    elif description is not None:
        assert body.get("error_description") == description, body
    return body


async def installation_id(platform: Any, world: World) -> str:
    """The id of the world's app's installation in its business (any state)."""
    async with platform.store.transaction() as tx:
        value = await tx.fetchval(
            "SELECT id FROM installations WHERE app_id = $1 AND business_id = $2",
            world.app_id,
            world.business_id,
        )
    assert value is not None
    return str(value)


async def set_status(client: Any, admin_headers: dict[str, str], world: World, status: str) -> None:
    """Set the world's app's status through the operator API."""
    response = await client.post(
        f"/admin/apps/{world.app_id}/status", json={"status": status}, headers=admin_headers
    )
    assert response.status_code == 200


PASSWORD = "correct horse battery"


async def new_user(platform: Any) -> tuple[str, str]:
    """A user who can sign in with PASSWORD, stored directly; answers (id, email)."""
    email = f"{secrets.token_hex(6)}@example.com"
    password_hash = await platform.passwords.hash(PASSWORD)
    async with platform.store.transaction() as tx:
        user = await books.create_user(
            tx, now=platform.now(), email=email, password_hash=password_hash
        )
    return user.id, email
