"""The MCP server of a served instance through the official SDK's client, on both stores.

The operator provisions a business, its owner, a viewer and a confidential app; each token comes
from the authorization code flow (the owner or the viewer signs in and approves the consent
page; PKCE S256; ``resource`` names ``{base}/mcp``, RFC 8707). The SDK's client
(``mcp.client.streamable_http``, ``ClientSession``) lists the tools and calls them; each call's
answer is compared with the same data API call's. Every wait and HTTP call is bounded; the
server is stopped after the module.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import httpx2
import pytest
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ledgerport import catalog

from .served import Server, served, store_env

ADMIN_TOKEN = "lp_admin_e2e-mcp-token-0123456789abcdef"
HTTP_TIMEOUT = 10.0
CALL_BOUND = 60.0
REDIRECT_URI = "https://agent.example/callback"
PASSWORD = "pw-e2e-mcp-123456"
SCOPES = [s for s in catalog.SCOPES if s != "profile:read"]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp(f"mcp-e2e-{request.param}")
    with store_env(request.param, workdir) as env:
        env |= {"LEDGERPORT_PASSWORD_HASHING": "fast", "LEDGERPORT_TRUSTED_PROXIES": "127.0.0.1"}
        with served(workdir, ADMIN_TOKEN, env) as running:
            yield running


@dataclass(frozen=True)
class Books:
    """A business with its owner and a viewer, and an app holding every area scope."""

    base: str
    business_id: str
    client_id: str
    client_secret: str
    owner: str
    viewer: str


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code in (200, 201), response.text
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture(scope="module")
def books(server: Server) -> Books:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=server.base, timeout=HTTP_TIMEOUT, headers=admin) as http:
        business = _ok(http.post("/admin/businesses", json={"name": "Agent Books Ltd"}))
        emails = {}
        for role in ("owner", "viewer"):
            email = f"{role}-{secrets.token_hex(4)}@example.com"
            user = _ok(http.post("/admin/users", json={"email": email, "password": PASSWORD}))
            member = http.put(
                f"/admin/businesses/{business['id']}/members/{user['id']}", json={"role": role}
            )
            assert member.status_code == 200, member.text
            emails[role] = email
        app = _ok(
            http.post(
                "/admin/apps",
                json={
                    "name": "Books Agent",
                    "type": "CONFIDENTIAL",
                    "redirectUris": [REDIRECT_URI],
                    "scopes": SCOPES,
                    "developerUserId": user["id"],
                    "reviewed": True,
                },
            )
        )
    return Books(
        server.base,
        business["id"],
        app["clientId"],
        app["clientSecret"],
        emails["owner"],
        emails["viewer"],
    )


def _field(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]+)"', page)
    assert match is not None, page
    return html.unescape(match[1])


def authorization_code_token(books: Books, email: str, scopes: list[str]) -> str:
    """An access token from the authorization code flow: ``email`` signs in and approves."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    resource = f"{books.base}/mcp"
    query = {
        "response_type": "code",
        "client_id": books.client_id,
        "redirect_uri": REDIRECT_URI,
        "scope": " ".join(scopes),
        "state": secrets.token_urlsafe(16),
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "resource": resource,
    }
    with httpx.Client(base_url=books.base, timeout=HTTP_TIMEOUT) as browser:
        first = browser.get(f"/oauth/authorize?{urlencode(query)}")
        assert first.status_code in (302, 303), first.text
        login = browser.get(first.headers["Location"])
        signed_in = browser.post(
            "/login",
            data={
                "email": email,
                "password": PASSWORD,
                "csrf_token": _field(login.text, "csrf_token"),
                "next": _field(login.text, "next"),
            },
        )
        assert signed_in.status_code == 303, signed_in.text
        consent = browser.get(signed_in.headers["Location"])
        assert consent.status_code == 200, consent.text
        decision = browser.post(
            "/oauth/authorize",
            data={
                "request_id": _field(consent.text, "request_id"),
                "csrf_token": _field(consent.text, "csrf_token"),
                "business_id": books.business_id,
                "decision": "approve",
            },
        )
        assert decision.status_code == 303, decision.text
        code = parse_qs(urlsplit(decision.headers["Location"]).query)["code"][0]
        tokens = _ok(
            browser.post(
                "/oauth/token",
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": REDIRECT_URI,
                    "code_verifier": verifier,
                    "resource": resource,
                },
                auth=(books.client_id, books.client_secret),
            )
        )
    assert tokens["scope"] == " ".join(scopes)
    token: str = tokens["access_token"]
    return token


@pytest.fixture(scope="module")
def owner_token(books: Books) -> str:
    return authorization_code_token(books, books.owner, SCOPES)


@asynccontextmanager
async def mcp_session(
    base: str, token: str, address: str = "198.18.0.1"
) -> AsyncIterator[ClientSession]:
    """An initialized session of the SDK's client with ``token`` (from client ``address``)."""
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": address}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def data_api(base: str, token: str, address: str = "198.18.0.2") -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}", "X-Forwarded-For": address}
    return httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, headers=headers)


def _refusal(result: Any) -> str:
    assert result.is_error, result
    text: str = result.content[0].text
    return text


async def test_the_tools_are_the_data_apis_list_get_and_create(
    books: Books, owner_token: str
) -> None:
    with trio.fail_after(CALL_BOUND):
        async with mcp_session(books.base, owner_token) as session:
            listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    for kind in catalog.RECORD_KINDS:
        plural = "journal_entries" if kind == "journal_entry" else f"{kind}s"
        assert {f"list_{plural}", f"get_{kind}", f"create_{kind}"} <= set(tools), kind
    assert {"list_events", "get_event"} <= set(tools)
    assert not {name for name in tools if not name.startswith(("list_", "get_", "create_"))}
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None
        assert tool.output_schema["type"] == "object"
    assert tools["get_invoice"].input_schema["required"] == ["id"]
    assert {"name", "email", "idempotencyKey"} <= set(
        tools["create_customer"].input_schema["properties"]
    )


async def test_list_get_and_create_answer_the_data_apis_json(
    books: Books, owner_token: str
) -> None:
    with trio.fail_after(CALL_BOUND):
        async with mcp_session(books.base, owner_token) as session:
            created = await session.call_tool(
                "create_customer", {"name": "Acme Trading", "email": "ap@acme.example"}
            )
            assert not created.is_error, created
            customer = created.structured_content
            got = await session.call_tool("get_customer", {"id": customer["id"]})
            listed = await session.call_tool("list_customers", {"limit": 100})
            events = await session.call_tool("list_events", {"types": "customer.created"})
    with data_api(books.base, owner_token) as http:
        assert got.structured_content == _ok(http.get(f"/customers/{customer['id']}"))
        assert listed.structured_content == _ok(http.get("/customers", params={"limit": 100}))
    assert customer["name"] == "Acme Trading"
    assert (
        got.content[0].text.strip() == httpx.Response(200, content=got.content[0].text).text.strip()
    )
    assert customer["id"] in {item["data"]["id"] for item in events.structured_content["data"]}


async def test_a_create_with_an_idempotency_key_writes_once(books: Books, owner_token: str) -> None:
    arguments = {"name": "Once Ltd", "idempotencyKey": secrets.token_hex(8)}
    with trio.fail_after(CALL_BOUND):
        async with mcp_session(books.base, owner_token) as session:
            first = await session.call_tool("create_customer", arguments)
            again = await session.call_tool("create_customer", arguments)
            changed = await session.call_tool("create_customer", {**arguments, "name": "Other"})
    assert first.structured_content == again.structured_content
    assert "Idempotency-Key" in _refusal(changed)


async def test_a_token_without_the_scope_is_refused_with_the_data_apis_message(
    books: Books,
) -> None:
    token = authorization_code_token(books, books.owner, ["customers:read"])
    with data_api(books.base, token) as http:
        expected = http.post("/customers", json={"name": "Nope"})
    assert expected.status_code == 403
    with trio.fail_after(CALL_BOUND):
        async with mcp_session(books.base, token) as session:
            refused = await session.call_tool("create_customer", {"name": "Nope"})
            allowed = await session.call_tool("list_customers", {})
    assert _refusal(refused) == expected.json()["message"]
    assert expected.json()["code"] in refused.content[1].text
    assert not allowed.is_error


async def test_a_role_without_the_permission_is_refused_as_the_data_api_refuses(
    books: Books, owner_token: str
) -> None:
    # The owner's consent installed the app; the viewer consents within that installation.
    token = authorization_code_token(books, books.viewer, SCOPES)
    with data_api(books.base, token) as http:
        expected = http.post("/customers", json={"name": "Nope"})
    assert expected.status_code == 403
    with trio.fail_after(CALL_BOUND):
        async with mcp_session(books.base, token) as session:
            refused = await session.call_tool("create_customer", {"name": "Nope"})
            read = await session.call_tool("list_customers", {})
    assert _refusal(refused) == expected.json()["message"]
    assert not read.is_error


async def test_no_token_is_a_401_naming_the_mcp_resources_metadata(books: Books) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=books.base, timeout=HTTP_TIMEOUT) as http:
        refused = await http.post("/mcp", json=body, headers=headers)
        metadata = await http.get("/.well-known/oauth-protected-resource/mcp")
    assert refused.status_code == 401
    challenge = refused.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{books.base}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert metadata.json() == {
        "resource": f"{books.base}/mcp",
        "authorization_servers": [books.base],
        "scopes_supported": list(catalog.SCOPES),
        "bearer_methods_supported": ["header"],
        "dpop_signing_alg_values_supported": list(catalog.DPOP_SIGNING_ALGS),
    }


async def test_a_tool_call_is_one_call_against_the_limits_and_is_refused_past_them(
    books: Books,
) -> None:
    token = authorization_code_token(books, books.owner, ["customers:read"])
    limit = catalog.RATE_LIMIT_APP_PER_BUSINESS.limit
    with data_api(books.base, token) as http:
        async with mcp_session(books.base, token) as session:
            # The client reads the tools' output schemas (tools/list) on its first call.
            await session.call_tool("list_customers", {})
            before = int(http.get("/customers").headers["RateLimit-Remaining"])
            await session.call_tool("list_customers", {})
            after = int(http.get("/customers").headers["RateLimit-Remaining"])
        assert before - after == 2
    async with (
        mcp_session(books.base, token, "198.20.0.2") as session,
        httpx.AsyncClient(base_url=books.base, timeout=HTTP_TIMEOUT) as http,
    ):
        limiter = trio.CapacityLimiter(16)

        async def spend(n: int) -> None:
            async with limiter:
                address = {"X-Forwarded-For": f"198.19.{n // 200}.{n % 200 + 1}"}
                headers = {"Authorization": f"Bearer {token}", **address}
                await http.get("/customers", headers=headers)

        with trio.fail_after(CALL_BOUND):
            async with trio.open_nursery() as nursery:
                for n in range(limit):
                    nursery.start_soon(spend, n)
        expected = await http.get(
            "/customers",
            headers={"Authorization": f"Bearer {token}", "X-Forwarded-For": "198.20.0.1"},
        )
        assert expected.status_code == 429
        with trio.fail_after(CALL_BOUND):
            refused = await session.call_tool("list_customers", {})
    assert _refusal(refused) == expected.json()["message"]
    assert "RATE_LIMITED" in refused.content[1].text
