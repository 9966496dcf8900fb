"""The in-process client hosted functions call (``context.api``) reaches the data API and
nothing else: a path the URL map routes to no data API endpoint is answered 404 in the envelope
before the application sees it; every data API route, also one added later, is reachable.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
from quart import request

from ledgerport.http import in_process_api
from ledgerport.runtime import ApiCall

from .data_api import Api, owner_api

TIMEOUT = 30
BASE_URL = "http://api.ledgerport.test"


async def _recorded(app: Any, admin_headers: dict[str, str]) -> tuple[Api, list[str]]:
    """A data API caller's world on ``app``, and the paths the application is asked for from
    now on."""
    api = await owner_api(app.test_client(), admin_headers)
    seen: list[str] = []

    @app.before_request
    async def _record() -> None:
        seen.append(request.path)

    return api, seen


REFUSED = [
    ("GET", "/metrics", None),
    ("GET", "/healthz", None),
    ("GET", "/openapi.json", None),
    ("GET", "/admin/businesses/bus_x", None),
    ("POST", "/admin/businesses", json.dumps({"name": "Mine now"})),
    ("GET", "/developer/apps", None),
    ("POST", "/oauth/token", "grant_type=client_credentials"),
    ("GET", "/.well-known/oauth-authorization-server", None),
    ("GET", "/login", None),
    ("GET", "/marketplace", None),
    ("GET", "/console", None),
    ("GET", "/no/such/route", None),
    ("GET", "/customers/%2e%2e/metrics", None),
]


@pytest.mark.parametrize(
    ("method", "path", "body"), [pytest.param(*case, id=f"{case[0]} {case[1]}") for case in REFUSED]
)
async def test_anything_but_the_data_api_is_not_found(
    fresh_app: Any, admin_headers: dict[str, str], method: str, path: str, body: str | None
) -> None:
    with trio.fail_after(TIMEOUT):
        api, seen = await _recorded(fresh_app, admin_headers)
        async with in_process_api(fresh_app, BASE_URL) as call:
            answered = await call(api.token, ApiCall(method, path, body))
            status, answer = answered.status, answered.body
    sent = path.replace("%2e", ".")
    assert status == 404
    assert answer == {
        "statusCode": 404,
        "message": f"Cannot {method} {sent}",
        "error": "Not Found",
        "params": {"p0": method, "p1": sent},
    }
    assert seen == []


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("GET", "/customers", None, 200),
        ("POST", "/customers", json.dumps({"name": "Acme"}), 201),
        ("GET", "/events", None, 200),
        ("GET", "/customers?limit=1", None, 200),
        # The data API's own path with a method it lacks: the data API answers the 405.
        ("DELETE", "/customers", None, 405),
    ],
)
async def test_the_data_api_is_reached(
    fresh_app: Any,
    admin_headers: dict[str, str],
    method: str,
    path: str,
    body: str | None,
    expected: int,
) -> None:
    with trio.fail_after(TIMEOUT):
        api, seen = await _recorded(fresh_app, admin_headers)
        async with in_process_api(fresh_app, BASE_URL) as call:
            answered = await call(api.token, ApiCall(method, path, body))
            status, answer = answered.status, answered.body
    assert status == expected, answer
    assert seen == [path.partition("?")[0]]


async def test_a_route_is_judged_by_the_endpoint_it_routes_to(
    fresh_app: Any, admin_headers: dict[str, str]
) -> None:
    """No list of prefixes: a data API endpoint added later is reachable, another is not."""

    async def probe() -> dict[str, str]:
        return {"reached": request.path}

    fresh_app.add_url_rule("/probe-data", "api.probe_data", probe)
    fresh_app.add_url_rule("/probe-other", "probe_other", probe)
    with trio.fail_after(TIMEOUT):
        api, seen = await _recorded(fresh_app, admin_headers)
        async with in_process_api(fresh_app, BASE_URL) as call:
            data = await call(api.token, ApiCall("GET", "/probe-data", None))
            other = await call(api.token, ApiCall("GET", "/probe-other", None))
    assert (data.status, data.body) == (200, {"reached": "/probe-data"})
    assert other.status == 404
    assert seen == ["/probe-data"]
