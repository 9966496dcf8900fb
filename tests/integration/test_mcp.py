"""The MCP server through the application: what the SDK's client does not reach in
tests/e2e/test_mcp_e2e.py (the 2026-07-28 era's self-contained requests, arguments no request
can be made of) and how a tool call is counted (as its data API call, in the metrics)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_types.methods import serialize_server_result
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ledgerport.platform import Platform

from .data_api import Api, owner_api

HANDSHAKE = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}


async def _call(api: Api, name: str, arguments: dict[str, Any], **headers: str) -> Any:
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = await api.client.post(
        "/mcp", data=json.dumps(body).encode(), headers=api.headers({**HANDSHAKE, **headers})
    )
    assert response.status_code == 200, await response.get_data(as_text=True)
    return json.loads(await response.get_data(as_text=True))["result"]


def _samples(platform: Platform, name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(sorted(sample.labels.values())): sample.value
        for metric in platform.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == name
    }


async def test_a_tool_call_is_counted_as_its_data_api_call(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    api = await owner_api(client, admin_headers)

    created = await _call(api, "create_customer", {"name": "Acme"})
    got = await _call(api, "get_customer", {"id": created["structuredContent"]["id"]})

    assert got["structuredContent"] == created["structuredContent"]
    counted = _samples(platform, "ledgerport_http_requests_total")
    assert counted[("/customers", "201", "POST")] == 1
    assert counted[("/customers/<record:record_id>", "200", "GET")] == 1
    assert counted[("/mcp", "200", "POST")] == 2
    assert _samples(platform, "ledgerport_http_requests_in_flight") == {(): 0.0}


async def test_arguments_no_request_can_be_made_of_are_refused_as_the_api_refuses(
    client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)

    unknown = await _call(api, "list_customers", {"colour": "red"})
    not_an_id = await _call(api, "get_customer", {"id": "cus_1/../x"})
    missing = await _call(api, "get_customer", {})
    no_tool = await _call(api, "delete_customer", {})
    invalid = await _call(api, "create_customer", {"name": ""})

    for result, message in [
        (unknown, "colour Extra inputs are not permitted"),
        (not_an_id, "id must be one record's id"),
        (missing, "id is required"),
        (no_tool, "Unknown tool: delete_customer"),
    ]:
        assert result["isError"] is True
        assert result["content"][0]["text"] == message
    api_answer = await api.call("POST", "/customers", {"name": ""})
    assert invalid["content"][0]["text"] == "; ".join((await api_answer.get_json())["message"])


async def test_the_2026_07_28_eras_self_contained_request_is_served(
    client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "agent", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "list_customers", "arguments": {}, "_meta": meta},
    }
    headers = {
        **HANDSHAKE,
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "list_customers",
    }

    response = await client.post(
        "/mcp", data=json.dumps(body).encode(), headers=api.headers(headers)
    )
    stream = await client.get("/mcp", headers=api.headers(headers))

    assert response.status_code == 200
    result = (await response.get_json())["result"]
    assert result["isError"] is False
    assert result["structuredContent"] == {"data": [], "next": None}
    assert stream.status_code == 405


async def test_a_tool_call_answers_as_the_sdks_transport_answers_it(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """A handshake-era ``tools/call`` is answered in its request's task (``_exchange``); one
    that names no protocol version goes through the SDK's transport: the same answer."""
    api = await owner_api(client, admin_headers)
    created = await _call(api, "create_customer", {"name": "Acme", "email": "ap@acme.example"})
    arguments = {"id": created["structuredContent"]["id"]}
    body = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "get_customer", "arguments": arguments},
    }
    answers = []
    for version in ("2025-11-25", None):
        headers = {k: v for k, v in HANDSHAKE.items() if version or k != "MCP-Protocol-Version"}
        response = await client.post(
            "/mcp", data=json.dumps(body).encode(), headers=api.headers(headers)
        )
        assert response.status_code == 200
        answers.append(await response.get_json())

    assert answers[0] == answers[1]
    assert answers[0]["result"]["structuredContent"] == created["structuredContent"]


@pytest.mark.parametrize("version", HANDSHAKE_PROTOCOL_VERSIONS)
async def test_a_tool_results_json_is_the_data_apis_answer_as_written(
    client: Any, admin_headers: dict[str, str], version: str
) -> None:
    """The exchange writes the data API's body into the checked result by reference: at each
    handshake-era version the answer is what the SDK's check makes of the whole result (the
    body as structured content and as the text block), byte for byte of the API's JSON, without
    the line end that ends the API's answer."""
    api = await owner_api(client, admin_headers)
    for name in ("Acme", 'Quote " and \\ backslash', "Ünïcode ✓"):
        await _call(api, "create_customer", {"name": name})
    response = await client.get("/customers", headers=api.headers())
    assert response.status_code == 200
    page = (await response.get_data(as_text=True)).removesuffix("\n")

    result = await _call(api, "list_customers", {}, **{"MCP-Protocol-Version": version})

    whole = {
        "content": [{"type": "text", "text": page}],
        "structuredContent": json.loads(page),
        "isError": False,
    }
    assert result == serialize_server_result("tools/call", version, whole)
    assert result["content"][0]["text"] == page
    assert {one["name"] for one in result["structuredContent"]["data"]} >= {"Acme", "Ünïcode ✓"}


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        (None, 200),
        ("http://api.ledgerport.test", 200),
        ("HTTP://API.ledgerport.test:80", 200),
        ("http://app.ledgerport.test", 200),
        ("http://api.ledgerport.test:8080", 403),
        ("https://api.ledgerport.test", 403),
        ("http://rebound.attacker.example", 403),
        ("http://127.0.0.1", 403),
        ("null", 403),
        ("http://api.ledgerport.test:99999", 403),
    ],
)
async def test_a_request_from_a_page_of_another_origin_is_refused(
    client: Any, admin_headers: dict[str, str], origin: str | None, status: int
) -> None:
    """The Streamable HTTP transport's guard against DNS rebinding: an ``Origin`` that is not
    the service's own is refused with 403 before anything else (the token is not even looked
    at); none at all, as a client that is not a browser sends, is served."""
    api = await owner_api(client, admin_headers)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    extra = {} if origin is None else {"Origin": origin}
    for headers in (api.headers({**HANDSHAKE, **extra}), {**HANDSHAKE, **extra}):
        response = await client.post("/mcp", data=json.dumps(body).encode(), headers=headers)
        answer = await response.get_json()
        if status == 403:
            assert response.status_code == 403
            assert answer["code"] == "CROSS_SITE_REQUEST"
            assert "Origin is not the service's own" in answer["message"]
        elif "Authorization" in headers:
            assert response.status_code == 200
            assert answer["result"]["tools"]
        else:
            assert response.status_code == 401
