"""A client ID metadata document client against a real ``ledgerport serve``: its document served
by a loopback HTTP server, the browser signs in and approves, the client redeems its code by
client_id alone and calls GET /invoices. Every HTTP call is bounded; the servers are stopped."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from .served import Server, served, store_env

ADMIN_TOKEN = "lp_admin_e2e-cimd-token-0123456789abcdef"
HTTP_TIMEOUT = 10.0
REDIRECT_URI = "http://127.0.0.1:9/callback"


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgres", id="postgresql", marks=pytest.mark.postgres),
    ]
)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    with store_env(request.param, tmp_path) as env, served(tmp_path, ADMIN_TOKEN, env) as running:
        yield running


@pytest.fixture
def document_url() -> Iterator[str]:
    """A loopback HTTP server answering the client's metadata document at /client.json."""
    fetched: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetched.append(self.path)
            url = f"http://127.0.0.1:{self.server.server_address[1]}/client.json"
            body = json.dumps(
                {"client_id": url, "client_name": "E2E Agent", "redirect_uris": [REDIRECT_URI]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "max-age=300")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/client.json"
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert fetched == ["/client.json"]


def field(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]+)"', page)
    assert match is not None, page
    return html.unescape(match[1])


def test_a_document_client_end_to_end(server: Server, document_url: str) -> None:
    base = server.base
    with httpx.Client(
        base_url=base,
        timeout=HTTP_TIMEOUT,
        trust_env=False,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ) as admin:
        business = admin.post("/admin/businesses", json={"name": "Agent Ltd"}).json()
        user = admin.post(
            "/admin/users", json={"email": "agent@example.com", "password": "pw-e2e-123456"}
        ).json()
        member = admin.put(
            f"/admin/businesses/{business['id']}/members/{user['id']}", json={"role": "owner"}
        )
        assert member.status_code == 200
    meta = httpx.get(
        f"{base}/.well-known/oauth-authorization-server", timeout=HTTP_TIMEOUT, trust_env=False
    ).json()
    assert meta["client_id_metadata_document_supported"] is True
    verifier = secrets.token_urlsafe(48)
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )
    query = {
        "response_type": "code",
        "client_id": document_url,
        "redirect_uri": REDIRECT_URI,
        "scope": "invoices:read",
        "state": "e2e",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False) as browser:
        login_page = browser.get("/login")
        signed_in = browser.post(
            "/login",
            data={
                "email": "agent@example.com",
                "password": "pw-e2e-123456",
                "csrf_token": field(login_page.text, "csrf_token"),
                "next": "/",
            },
        )
        assert signed_in.status_code == 303
        consent = browser.get(f"/oauth/authorize?{urlencode(query)}")
        assert consent.status_code == 200, consent.text
        assert "E2E Agent" in consent.text
        assert "not reviewed" in consent.text
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
    callback = parse_qs(urlsplit(decision.headers["Location"]).query)
    assert callback["state"] == ["e2e"]
    token = httpx.post(
        f"{base}/oauth/token",
        data={
            "grant_type": "authorization_code",
            "client_id": document_url,
            "code": callback["code"][0],
            "redirect_uri": REDIRECT_URI,
            "code_verifier": verifier,
        },
        timeout=HTTP_TIMEOUT,
        trust_env=False,
    )
    assert token.status_code == 200, token.text
    invoices = httpx.get(
        f"{base}/invoices",
        headers={"Authorization": f"Bearer {token.json()['access_token']}"},
        timeout=HTTP_TIMEOUT,
        trust_env=False,
    )
    assert invoices.status_code == 200, invoices.text
