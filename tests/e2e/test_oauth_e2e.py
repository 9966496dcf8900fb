"""The authorization code flow against a real ``ledgerport serve`` with Authlib as the client.

The operator API provisions a business, a user and a confidential app; an httpx browser signs in
and approves the consent form; Authlib's OAuth2Client (PKCE S256) builds the authorization URL,
fetches, refreshes, introspects and revokes tokens, and calls GET /invoices. Every wait and HTTP
call is bounded and the server is killed in ``finally``.
"""

from __future__ import annotations

import html
import re
import warnings
from pathlib import Path

import httpx
from authlib.common.security import generate_token
from authlib.deprecate import AuthlibDeprecationWarning

with warnings.catch_warnings():
    # Authlib's httpx client asks for the httpx2 package and falls back to httpx with a
    # deprecation warning at import; the fallback is what this test drives.
    warnings.simplefilter("ignore", AuthlibDeprecationWarning)
    from authlib.integrations.httpx_client import OAuth2Client

from .served import start_server, stop, wait_healthy

ADMIN_TOKEN = "lp_admin_e2e-oauth-token-0123456789abcdef"
REDIRECT_URI = "http://127.0.0.1:9/callback"
HTTP_TIMEOUT = 10.0


def field(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]+)"', page)
    assert match is not None, page
    return html.unescape(match[1])


def test_authorization_code_flow_with_authlib(tmp_path: Path) -> None:
    server = start_server(tmp_path, ADMIN_TOKEN)
    base = server.base
    try:
        wait_healthy(server)
        admin = httpx.Client(
            base_url=base,
            timeout=HTTP_TIMEOUT,
            trust_env=False,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        with admin:
            business = admin.post("/admin/businesses", json={"name": "E2E Ltd"}).json()
            user = admin.post(
                "/admin/users", json={"email": "e2e@example.com", "password": "pw-e2e-123456"}
            ).json()
            member = admin.put(
                f"/admin/businesses/{business['id']}/members/{user['id']}", json={"role": "owner"}
            )
            assert member.status_code == 200
            app = admin.post(
                "/admin/apps",
                json={
                    "name": "E2E App",
                    "type": "CONFIDENTIAL",
                    "redirectUris": [REDIRECT_URI],
                    "scopes": ["invoices:read", "customers:read"],
                    "developerUserId": user["id"],
                    "reviewed": True,
                },
            )
            assert app.status_code == 201, app.text
            app_json = app.json()

        meta = httpx.get(
            f"{base}/.well-known/oauth-authorization-server", timeout=HTTP_TIMEOUT, trust_env=False
        ).json()
        assert meta["issuer"] == base

        oauth = OAuth2Client(
            client_id=app_json["clientId"],
            client_secret=app_json["clientSecret"],
            scope="invoices:read",
            redirect_uri=REDIRECT_URI,
            code_challenge_method="S256",
            token_endpoint_auth_method="client_secret_basic",
            timeout=HTTP_TIMEOUT,
            trust_env=False,
        )
        verifier = generate_token(48)
        url, state = oauth.create_authorization_url(
            meta["authorization_endpoint"], code_verifier=verifier
        )
        assert "code_challenge=" in url
        assert "code_challenge_method=S256" in url

        with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False) as browser:
            # Anonymous: sent to sign in, then back to the authorization URL.
            first = browser.get(url)
            assert first.status_code in (302, 303)
            assert first.headers["Location"].startswith("/login?")
            login_page = browser.get(first.headers["Location"])
            assert login_page.status_code == 200
            signed_in = browser.post(
                "/login",
                data={
                    "email": "e2e@example.com",
                    "password": "pw-e2e-123456",
                    "csrf_token": field(login_page.text, "csrf_token"),
                    "next": field(login_page.text, "next"),
                },
            )
            assert signed_in.status_code == 303
            back = signed_in.headers["Location"]
            assert back.startswith("/oauth/authorize?")
            consent = browser.get(back)
            assert consent.status_code == 200
            assert "E2E App" in consent.text
            assert consent.headers["X-Frame-Options"] == "DENY"
            options = re.findall(r'<option value="([^"]+)"', consent.text)
            assert options == [business["id"]]
            decision = browser.post(
                "/oauth/authorize",
                data={
                    "request_id": field(consent.text, "request_id"),
                    "csrf_token": field(consent.text, "csrf_token"),
                    "business_id": business["id"],
                    "decision": "approve",
                },
            )
            assert decision.status_code == 303, decision.text
            callback = decision.headers["Location"]
            assert callback.startswith(REDIRECT_URI + "?")
            assert f"state={state}" in callback

        with oauth:
            token = oauth.fetch_token(
                meta["token_endpoint"], authorization_response=callback, code_verifier=verifier
            )
            assert token["token_type"] == "Bearer"
            assert token["expires_in"] == 3600
            assert token["scope"] == "invoices:read"
            invoices = oauth.get(f"{base}/invoices")
            assert invoices.status_code == 200
            assert invoices.json() == {"data": [], "next": None}

            first_access = token["access_token"]
            refreshed = oauth.refresh_token(meta["token_endpoint"])
            assert refreshed["access_token"] != first_access
            assert refreshed["refresh_token"] != token["refresh_token"]
            assert oauth.get(f"{base}/invoices").status_code == 200
            stale = httpx.get(
                f"{base}/invoices",
                headers={"Authorization": f"Bearer {first_access}"},
                timeout=HTTP_TIMEOUT,
                trust_env=False,
            )
            assert stale.status_code == 401

            info = oauth.introspect_token(
                meta["introspection_endpoint"], token=refreshed["access_token"]
            ).json()
            assert info["active"] is True
            assert info["client_id"] == app_json["clientId"]
            assert info["sub"] == user["id"]
            assert info["scope"] == "invoices:read"

            revoked = oauth.revoke_token(
                meta["revocation_endpoint"],
                token=refreshed["refresh_token"],
                token_type_hint="refresh_token",
            )
            assert revoked.status_code == 200
            assert revoked.headers["Cache-Control"] == "no-store"
            gone = oauth.introspect_token(
                meta["introspection_endpoint"], token=refreshed["access_token"]
            ).json()
            assert gone == {"active": False}
            assert oauth.get(f"{base}/invoices").status_code == 401
    finally:
        stop(server.process)
