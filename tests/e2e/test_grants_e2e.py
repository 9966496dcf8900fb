"""Token exchange, the device flow and dynamic registration against a real ``ledgerport serve``.

One server per module (``sys.executable -m ledgerport serve`` in development mode, a SQLite file
in a temporary directory, a free loopback port, every inherited ``LEDGERPORT_*`` variable
removed) is driven over real HTTP with httpx. The operator API provisions a business with an
owner and a viewer, a reviewed confidential app (invoices:read) and its managed install. An "app
backend" verifies session tokens with pyjwt against the published JWKS, exchanges them and calls
the API; a browser-like client signs in and approves a device; a client registered at
/oauth/register runs the authorization code flow against a sandbox business. Every test is
bounded with ``trio.fail_after`` and the server is stopped when the module ends.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import jwt
import pytest
import trio

from .served import Server, served

ADMIN_TOKEN = "lp_admin_e2e-grants-token-0123456789abcdef"
REDIRECT_URI = "http://127.0.0.1:9/callback"
PASSWORD = "correct horse battery"
HTTP_TIMEOUT = 10.0
TEST_TIMEOUT = 60
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


# --- the served instance -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("grants-e2e")
    with served(
        workdir, ADMIN_TOKEN, {"LEDGERPORT_DATABASE_URL": f"sqlite:///{workdir / 'grants.db'}"}
    ) as running:
        yield running


# --- what the operator provisions ----------------------------------------------------------------


@dataclass
class Tenant:
    business_id: str
    users: dict[str, tuple[str, str]]
    """role -> (user id, email)"""
    app_id: str
    client_id: str
    client_secret: str


def _admin_post(admin: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = admin.post(path, json=body)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _member(admin: httpx.Client, business_id: str, role: str) -> tuple[str, str]:
    email = f"{role}-{secrets.token_hex(4)}@example.com"
    user = _admin_post(admin, "/admin/users", {"email": email, "password": PASSWORD})
    member = admin.put(f"/admin/businesses/{business_id}/members/{user['id']}", json={"role": role})
    assert member.status_code == 200, member.text
    return user["id"], email


@pytest.fixture(scope="module")
def tenant(server: Server) -> Tenant:
    """A business with an owner and a viewer, a reviewed confidential app, its managed install."""
    with httpx.Client(
        base_url=server.base,
        timeout=HTTP_TIMEOUT,
        trust_env=False,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ) as admin:
        business = _admin_post(admin, "/admin/businesses", {"name": "Grants Ltd"})
        users = {role: _member(admin, business["id"], role) for role in ("owner", "viewer")}
        app = _admin_post(
            admin,
            "/admin/apps",
            {
                "name": "Embedded Books",
                "type": "CONFIDENTIAL",
                "redirectUris": [REDIRECT_URI],
                "scopes": ["invoices:read"],
                "developerUserId": users["owner"][0],
                "reviewed": True,
            },
        )
        installation = _admin_post(
            admin,
            "/admin/installations",
            {
                "appId": app["id"],
                "businessId": business["id"],
                "userId": users["owner"][0],
                "scopes": ["invoices:read"],
            },
        )
        assert installation["state"] == "ACTIVE"
    return Tenant(business["id"], users, app["id"], app["clientId"], app["clientSecret"])


# --- HTTP helpers --------------------------------------------------------------------------------


def http(base: str, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False, **kwargs)


def basic_auth(client_id: str, secret: str) -> dict[str, str]:
    raw = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


def field(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]+)"', page)
    assert match is not None, page
    return html.unescape(match[1])


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


async def session_token(server: Server, tenant: Tenant, role: str) -> str:
    """What the app bridge hands the embedded page, from the operator endpoint."""
    async with http(server.base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as admin:
        response = await admin.post(
            "/admin/session-tokens",
            json={
                "appId": tenant.app_id,
                "businessId": tenant.business_id,
                "userId": tenant.users[role][0],
            },
        )
    assert response.status_code == 201, response.text
    token: str = response.json()["sessionToken"]
    return token


async def discovery(backend: httpx.AsyncClient) -> dict[str, Any]:
    response = await backend.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200, response.text
    meta: dict[str, Any] = response.json()
    return meta


async def verify_session_token(
    backend: httpx.AsyncClient, server: Server, token: str, client_id: str
) -> dict[str, Any]:
    """The app backend's check: discovery, then jwks_uri, then pyjwt with ES256, aud and iss."""
    meta = await discovery(backend)
    keys = await backend.get(meta["jwks_uri"])
    assert keys.status_code == 200, keys.text
    key_set = jwt.PyJWKSet.from_dict(keys.json())
    kid = jwt.get_unverified_header(token)["kid"]
    signing_key = next(key for key in key_set.keys if key.key_id == kid)
    claims: dict[str, Any] = jwt.decode(
        token,
        signing_key.key,
        algorithms=["ES256"],
        audience=client_id,
        issuer=server.base,
        options={"require": ["exp", "iss", "aud", "sub", "jti"]},
    )
    return claims


async def exchange(
    backend: httpx.AsyncClient, tenant: Tenant, subject_token: str, *, as_json: bool
) -> httpx.Response:
    meta = await discovery(backend)
    params = {
        "grant_type": TOKEN_EXCHANGE,
        "subject_token": subject_token,
        "subject_token_type": JWT_TYPE,
    }
    headers = basic_auth(tenant.client_id, tenant.client_secret)
    if as_json:
        return await backend.post(meta["token_endpoint"], json=params, headers=headers)
    return await backend.post(meta["token_endpoint"], data=params, headers=headers)


async def sign_in(browser: httpx.AsyncClient, email: str, next_path: str) -> str:
    """Fill the sign-in form (CSRF token from the page); answers where it sends the browser."""
    page = await browser.get("/login", params={"next": next_path})
    assert page.status_code == 200, page.text
    signed_in = await browser.post(
        "/login",
        data={
            "email": email,
            "password": PASSWORD,
            "csrf_token": field(page.text, "csrf_token"),
            "next": field(page.text, "next"),
        },
    )
    assert signed_in.status_code == 303, signed_in.text
    location: str = signed_in.headers["Location"]
    return location


# The two viewing users of the embedded app: one backend sends a form, the other JSON.
USERS = [
    pytest.param("viewer", False, id="viewer-form"),
    pytest.param("owner", True, id="owner-json"),
]


# --- token exchange ------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "owner"])
async def test_backend_verifies_session_token_with_published_keys(
    server: Server, tenant: Tenant, role: str
) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        token = await session_token(server, tenant, role)
        async with http(server.base) as backend:
            claims = await verify_session_token(backend, server, token, tenant.client_id)

    assert claims["bid"] == tenant.business_id
    assert claims["sub"] == tenant.users[role][0]


@pytest.mark.parametrize(("role", "as_json"), USERS)
async def test_exchanged_token_reads_invoices(
    server: Server, tenant: Tenant, role: str, as_json: bool
) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        token = await session_token(server, tenant, role)
        async with http(server.base) as backend:
            await verify_session_token(backend, server, token, tenant.client_id)
            exchanged = await exchange(backend, tenant, token, as_json=as_json)
            tokens = exchanged.json()
            assert exchanged.status_code == 200, tokens
            assert tokens["issued_token_type"] == ACCESS_TOKEN_TYPE
            assert tokens["scope"] == "invoices:read"
            invoices = await backend.get(
                "/invoices", headers={"Authorization": f"Bearer {tokens['access_token']}"}
            )

    assert invoices.status_code == 200, invoices.text
    assert invoices.json() == {"data": [], "next": None}


@pytest.mark.parametrize(("role", "as_json"), USERS)
async def test_session_token_is_exchanged_only_once(
    server: Server, tenant: Tenant, role: str, as_json: bool
) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        token = await session_token(server, tenant, role)
        async with http(server.base) as backend:
            first = await exchange(backend, tenant, token, as_json=as_json)
            assert first.status_code == 200, first.text
            second = await exchange(backend, tenant, token, as_json=as_json)

    assert second.status_code == 400, second.text
    assert second.json()["error"] == "invalid_grant"
    assert "error_description" not in second.json()
    assert second.headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize(("role", "as_json"), USERS)
async def test_refresh_token_from_exchange_rotates(
    server: Server, tenant: Tenant, role: str, as_json: bool
) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        token = await session_token(server, tenant, role)
        async with http(server.base) as backend:
            first = (await exchange(backend, tenant, token, as_json=as_json)).json()
            meta = await discovery(backend)
            auth = basic_auth(tenant.client_id, tenant.client_secret)
            refresh = {"grant_type": "refresh_token", "refresh_token": first["refresh_token"]}
            rotated = await backend.post(meta["token_endpoint"], data=refresh, headers=auth)
            assert rotated.status_code == 200, rotated.text
            replayed = await backend.post(meta["token_endpoint"], data=refresh, headers=auth)

    assert rotated.json()["refresh_token"] != first["refresh_token"]
    assert rotated.json()["access_token"] != first["access_token"]
    assert replayed.status_code == 400
    assert replayed.json()["error"] == "invalid_grant"
    assert replayed.json()["error_description"] == "refresh token reuse detected"


# --- the device flow -----------------------------------------------------------------------------


async def test_device_flow_end_to_end(server: Server, tenant: Tenant) -> None:
    auth = basic_auth(tenant.client_id, tenant.client_secret)
    with trio.fail_after(TEST_TIMEOUT):
        async with http(server.base) as device, http(server.base) as browser:
            meta = await discovery(device)
            started = await device.post(
                meta["device_authorization_endpoint"], data={"scope": "invoices:read"}, headers=auth
            )
            assert started.status_code == 200, started.text
            grant = started.json()
            poll_form = {"grant_type": DEVICE_CODE, "device_code": grant["device_code"]}
            pending = await device.post(meta["token_endpoint"], data=poll_form, headers=auth)
            assert pending.json()["error"] == "authorization_pending"

            # The person opens the verification URI, is sent to sign in, then enters the code.
            anonymous = await browser.get(grant["verification_uri"])
            assert anonymous.status_code in (302, 303)
            next_path = parse_qs(urlsplit(anonymous.headers["Location"]).query)["next"][0]
            back = await sign_in(browser, tenant.users["owner"][1], next_path)
            assert urlsplit(back).path == "/device"
            code_form = await browser.get(back)
            assert code_form.status_code == 200, code_form.text
            consent = await browser.post(
                "/device",
                data={
                    "user_code": grant["user_code"],
                    "csrf_token": field(code_form.text, "csrf_token"),
                },
            )
            assert consent.status_code == 200, consent.text
            assert "Embedded Books" in consent.text
            approved = await browser.post(
                "/device/decision",
                data={
                    "user_code": field(consent.text, "user_code"),
                    "csrf_token": field(consent.text, "csrf_token"),
                    "business_id": tenant.business_id,
                    "decision": "approve",
                },
            )
            assert approved.status_code == 200, approved.text

            polled = await device.post(meta["token_endpoint"], data=poll_form, headers=auth)

    tokens = polled.json()
    assert polled.status_code == 200, tokens
    assert tokens["token_type"] == "Bearer"
    assert tokens["scope"] == "invoices:read"
    assert tokens["access_token"]
    assert tokens["refresh_token"]


# --- dynamic registration ------------------------------------------------------------------------


async def test_registered_client_completes_code_flow_in_a_sandbox(server: Server) -> None:
    with trio.fail_after(TEST_TIMEOUT):
        async with (
            http(server.base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as admin,
            http(server.base) as backend,
            http(server.base) as browser,
        ):
            business = await admin.post(
                "/admin/businesses", json={"name": "Sandbox Ltd", "sandbox": True}
            )
            assert business.status_code == 201, business.text
            business_id = business.json()["id"]
            email = f"sandbox-{secrets.token_hex(4)}@example.com"
            user = await admin.post("/admin/users", json={"email": email, "password": PASSWORD})
            assert user.status_code == 201, user.text
            member = await admin.put(
                f"/admin/businesses/{business_id}/members/{user.json()['id']}",
                json={"role": "owner"},
            )
            assert member.status_code == 200, member.text

            meta = await discovery(backend)
            registration = await backend.post(
                meta["registration_endpoint"],
                json={
                    "redirect_uris": [REDIRECT_URI],
                    "client_name": "Registered Books",
                    "scope": "invoices:read",
                },
            )
            assert registration.status_code == 201, registration.text
            client = registration.json()

            verifier, challenge = pkce_pair()
            state = secrets.token_urlsafe(16)
            query = urlencode(
                {
                    "response_type": "code",
                    "client_id": client["client_id"],
                    "redirect_uri": REDIRECT_URI,
                    "scope": "invoices:read",
                    "state": state,
                    "code_challenge": challenge,
                    "code_challenge_method": "S256",
                }
            )
            authorize_url = f"{meta['authorization_endpoint']}?{query}"
            anonymous = await browser.get(authorize_url)
            assert anonymous.status_code in (302, 303)
            next_path = parse_qs(urlsplit(anonymous.headers["Location"]).query)["next"][0]
            back = await sign_in(browser, email, next_path)
            consent = await browser.get(back)
            assert consent.status_code == 200, consent.text
            assert re.findall(r'<option value="([^"]+)"', consent.text) == [business_id]
            decision = await browser.post(
                "/oauth/authorize",
                data={
                    "request_id": field(consent.text, "request_id"),
                    "csrf_token": field(consent.text, "csrf_token"),
                    "business_id": business_id,
                    "decision": "approve",
                },
            )
            assert decision.status_code == 303, decision.text
            callback = urlsplit(decision.headers["Location"])
            assert f"{callback.scheme}://{callback.netloc}{callback.path}" == REDIRECT_URI
            params = parse_qs(callback.query)
            assert params["state"] == [state]

            redeemed = await backend.post(
                meta["token_endpoint"],
                data={
                    "grant_type": "authorization_code",
                    "code": params["code"][0],
                    "redirect_uri": REDIRECT_URI,
                    "code_verifier": verifier,
                },
                headers=basic_auth(client["client_id"], client["client_secret"]),
            )
            tokens = redeemed.json()
            assert redeemed.status_code == 200, tokens
            invoices = await backend.get(
                "/invoices", headers={"Authorization": f"Bearer {tokens['access_token']}"}
            )

    assert tokens["scope"] == "invoices:read"
    assert invoices.status_code == 200, invoices.text
    assert invoices.json() == {"data": [], "next": None}
