"""A tool call answered in front of the application (``http/mcp/_front``) answers as the
``/mcp`` route answers the same call: the result, the headers, a refused token's 401 and its
challenge, a DPoP proof of ``POST /mcp``; and what is not answered there goes on to the route.

The route's answer is had by sending the same request with an ``Origin`` of the service, which
the front leaves to the route (the route checks it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledgerport.clock import FrozenClock

from ..asgi_scopes import http_scope
from ..dpop_keys import DpopKey
from .data_api import Api, owner_api
from .oauth_helpers import make_world
from .test_dpop import (
    API,
    TOKEN_URL,
    bound_grant,
    challenge,
    code_for,
    redeem,
)

HANDSHAKE = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}
ROUTE = {"Origin": API}
"""What sends a request past the front to the ``/mcp`` route."""
MCP_METADATA = f'resource_metadata="{API}/.well-known/oauth-protected-resource/mcp"'
VARYING = {"content-length", "date", "ratelimit-remaining"}


def _call(name: str, arguments: dict[str, Any]) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return json.dumps(message).encode()


async def _both(client: Any, body: bytes, headers: dict[str, str]) -> tuple[Any, Any]:
    """The same request answered in front of the application, then by the route."""
    front = await client.post("/mcp", data=body, headers={**HANDSHAKE, **headers})
    route = await client.post("/mcp", data=body, headers={**HANDSHAKE, **headers, **ROUTE})
    return front, route


def _header_names(response: Any) -> set[str]:
    return {name.lower() for name in response.headers.keys()} - VARYING


async def _customer(api: Api) -> str:
    response = await api.client.post("/customers", json={"name": "Acme"}, headers=api.headers())
    assert response.status_code == 201
    customer_id: str = (await response.get_json())["id"]
    return customer_id


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("get_customer", None),
        ("list_customers", {}),
        ("create_customer", {"name": "Acme"}),
        ("get_customer", {"id": "cus_000000000000000000000000"}),
        ("list_events", {}),
    ],
)
async def test_a_tool_call_answers_as_the_route_answers_it(
    client: Any, admin_headers: dict[str, str], name: str, arguments: dict[str, Any] | None
) -> None:
    api = await owner_api(client, admin_headers)
    arguments = {"id": await _customer(api)} if arguments is None else arguments
    front, route = await _both(client, _call(name, arguments), api.headers())

    assert front.status_code == route.status_code == 200
    front_json, route_json = await front.get_json(), await route.get_json()
    if name == "create_customer":  # a record each: the same answer but for its id and time
        for answer in (front_json, route_json):
            answer["result"]["structuredContent"].pop("id")
            answer["result"]["structuredContent"].pop("createdAt")
            answer["result"]["content"] = []
    assert front_json == route_json
    assert _header_names(front) == _header_names(route)
    assert "RateLimit-Remaining" in front.headers
    remaining = int(route.headers["RateLimit-Remaining"])
    assert int(front.headers["RateLimit-Remaining"]) == remaining + 1  # each counted once


@pytest.mark.parametrize("authorization", [None, "Bearer nope", "Basic dXNlcjpwYXNz", "DPoP nope"])
async def test_a_refused_token_is_the_requests_401_naming_the_mcp_servers_metadata(
    client: Any, admin_headers: dict[str, str], authorization: str | None
) -> None:
    api = await owner_api(client, admin_headers)
    headers = {} if authorization is None else {"Authorization": authorization}
    front, route = await _both(client, _call("list_customers", {}), headers)

    assert front.status_code == route.status_code == 401
    assert front.headers["WWW-Authenticate"] == route.headers["WWW-Authenticate"]
    assert MCP_METADATA in front.headers["WWW-Authenticate"]
    assert await front.get_json() == await route.get_json()
    assert _header_names(front) == _header_names(route)
    # A good token still gets through.
    answered = await client.post(
        "/mcp", data=_call("list_customers", {}), headers=api.headers(HANDSHAKE)
    )
    assert answered.status_code == 200


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("no_such_tool", {}),
        ("get_customer", {}),
        ("get_customer", {"id": "a/b"}),
        ("list_customers", {"extra": 1}),
    ],
)
async def test_a_call_that_makes_no_data_api_call_is_the_routes_to_answer(
    client: Any, admin_headers: dict[str, str], name: str, arguments: dict[str, Any]
) -> None:
    """An unknown tool or arguments no request can be made of make no data API call: the
    route answers, so a refused token is refused as such (401), and a good one gets the tool's
    refusal, counted once."""
    api = await owner_api(client, admin_headers)
    body = _call(name, arguments)
    refused = await client.post("/mcp", data=body, headers={**HANDSHAKE, "Authorization": "x"})
    assert refused.status_code == 401
    assert MCP_METADATA in refused.headers["WWW-Authenticate"]

    front, route = await _both(client, body, api.headers())
    assert front.status_code == route.status_code == 200
    assert await front.get_json() == await route.get_json()
    assert (await front.get_json())["result"]["isError"] is True
    remaining = int(route.headers["RateLimit-Remaining"])
    assert int(front.headers["RateLimit-Remaining"]) == remaining + 1


async def test_params_the_sdk_refuses_are_the_routes_to_answer(
    client: Any, admin_headers: dict[str, str]
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"arguments": {}}}
    ).encode()
    refused = await client.post("/mcp", data=body, headers=HANDSHAKE)
    assert refused.status_code == 401
    api = await owner_api(client, admin_headers)
    front, route = await _both(client, body, api.headers())
    assert await front.get_json() == await route.get_json()
    assert "error" in await front.get_json()


async def test_a_dpop_bound_token_calls_a_tool_with_a_proof_of_post_mcp(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    """The data API call of a tool call is made in the place of ``POST /mcp``: the proof names
    that request, not the data API's; a proof of the data API's own request is refused, as is
    a proof used already, each with a DPoP challenge naming the MCP server's metadata."""
    world = await make_world(client, admin_headers)
    key = DpopKey()
    access = (await bound_grant(client, world, key, clock))["access_token"]

    def proof(method: str, url: str) -> dict[str, str]:
        made = key.proof(method, url, iat=clock.now(), token=access)
        return {"Authorization": f"DPoP {access}", "DPoP": made}

    body = _call("list_invoices", {})
    good = proof("POST", f"{API}/mcp")
    answered = await client.post("/mcp", data=body, headers={**HANDSHAKE, **good})
    assert answered.status_code == 200, await answered.get_data(as_text=True)
    assert (await answered.get_json())["result"]["isError"] is False

    replayed = await client.post("/mcp", data=body, headers={**HANDSHAKE, **good})
    inner = await client.post(
        "/mcp", data=body, headers={**HANDSHAKE, **proof("GET", f"{API}/invoices")}
    )
    bearer = await client.post(
        "/mcp", data=body, headers={**HANDSHAKE, "Authorization": f"Bearer {access}"}
    )
    for refused in (replayed, inner, bearer):
        assert refused.status_code == 401
        assert MCP_METADATA in refused.headers["WWW-Authenticate"]
    assert "used already" in challenge(replayed)["error_description"]
    assert challenge(inner)["error"] == "invalid_dpop_proof"
    assert challenge(bearer)["error"] == "invalid_token"


async def test_a_body_past_the_bound_is_the_routes_to_refuse(
    client: Any, app: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    bound = app.config["MAX_CONTENT_LENGTH"]
    body = _call("create_customer", {"name": "A" * bound})
    refused = await client.post("/mcp", data=body, headers=api.headers(HANDSHAKE))
    assert refused.status_code == 413


@pytest.mark.parametrize(
    ("extra", "body", "reaches_the_route"),
    [
        ({}, _call("list_customers", {}), False),
        ({"origin": API}, _call("list_customers", {}), True),
        ({"query": "a=%00"}, _call("list_customers", {}), True),
        ({}, _call("no_such_tool", {}), True),
        ({}, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(), True),
        ({"mcp-protocol-version": "2026-07-28"}, _call("list_customers", {}), True),
    ],
)
async def test_only_a_tool_call_that_makes_its_call_is_answered_in_front(
    client: Any,
    app: Any,
    admin_headers: dict[str, str],
    extra: dict[str, str],
    body: bytes,
    reaches_the_route: bool,
) -> None:
    """The front itself, in front of an application that records what reaches it: a tool call
    is answered without it; anything else reaches it with its body whole."""
    from ledgerport.http import mcp

    api = await owner_api(client, admin_headers)
    reached: list[bytes] = []

    async def route(scope: Any, receive: Any, send: Any) -> None:
        whole = b""
        while True:
            message = await receive()
            whole += message["body"]
            if not message["more_body"]:
                break
        reached.append(whole)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    extra = dict(extra)
    query = extra.pop("query", "")
    headers = {k.lower(): v for k, v in api.headers(HANDSHAKE).items()} | extra
    scope = http_scope(
        "POST",
        "/mcp",
        query_string=query.encode(),
        headers=[(k.encode(), v.encode()) for k, v in headers.items()]
        + [(b"content-length", str(len(body)).encode())],
        client=("127.0.0.1", 5000),
        server=("127.0.0.1", 80),
    )
    sent: list[dict[str, Any]] = []
    # As a server sends a body: here its bytes, then its end (hypercorn, quart's test client).
    messages = [
        {"type": "http.request", "body": body, "more_body": True},
        {"type": "http.request", "body": b"", "more_body": False},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await mcp.InFront(app, route)(scope, receive, send)

    assert reached == ([body] if reaches_the_route else [])
    status = sent[0]["status"]
    assert status == (204 if reaches_the_route else 200)
    if not reaches_the_route:
        assert json.loads(sent[1]["body"])["result"]["isError"] is False


async def test_with_nonces_on_a_tool_calls_proof_carries_the_servers_nonce(
    nonce_client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    """The data API call's ``DPoP-Nonce`` is the ``/mcp`` answer's, with the challenge asking
    for it and with the answer once the proof carries it."""
    client = nonce_client
    world = await make_world(client, admin_headers)
    key = DpopKey()
    code, verifier = await code_for(client, world)
    proof = key.proof("POST", TOKEN_URL, iat=clock.now())
    nonce = (await redeem(client, world, code, verifier, DPoP=proof)).headers["DPoP-Nonce"]
    proof = key.proof("POST", TOKEN_URL, iat=clock.now(), nonce=nonce)
    access = (await (await redeem(client, world, code, verifier, DPoP=proof)).get_json())[
        "access_token"
    ]

    def call(**changes: Any) -> Any:
        made = key.proof("POST", f"{API}/mcp", iat=clock.now(), token=access, **changes)
        headers = {**HANDSHAKE, "Authorization": f"DPoP {access}", "DPoP": made}
        return client.post("/mcp", data=_call("list_invoices", {}), headers=headers)

    asked = await call()
    assert asked.status_code == 401
    assert challenge(asked)["error"] == "use_dpop_nonce"
    assert asked.headers["DPoP-Nonce"] == nonce
    answered = await call(nonce=nonce)
    assert answered.status_code == 200
    assert answered.headers["DPoP-Nonce"] == nonce
    assert (await answered.get_json())["result"]["isError"] is False
