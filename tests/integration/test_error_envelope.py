"""The standard error envelope on every non-OAuth route: routing, parsing, size and crashes.

``{statusCode, message, error, code?, params?}``: statusCode and error (the HTTP reason phrase)
are the contract, message is a string (an array for validation failures), and params holds the
values interpolated into message under the keys p0, p1, ...
"""

from __future__ import annotations

import json
import re
from http import HTTPStatus
from typing import Any

import pytest

ONE_MIB = 1024 * 1024
ADMIN_TOKEN = "lp_admin_test-token-0123456789abcdef"  # conftest's token
JSON_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
CRASH_MESSAGE = "kaboom: secret internal detail 7f3a"

# Routing and body parsing fail before any storage access, alike on both backends: these tables
# run once (on SQLite) to keep the suite fast.
before_storage = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


async def _envelope(response: Any, status: int) -> dict[str, Any]:
    """Check the response is the standard envelope for ``status``; answer its body."""
    assert response.status_code == status, await response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    body: dict[str, Any] = await response.get_json()
    assert body["statusCode"] == status
    assert body["error"] == HTTPStatus(status).phrase
    assert isinstance(body["message"], str | list)
    assert set(body) <= {"statusCode", "message", "error", "code", "params", "details"}
    if "params" in body:
        _assert_params(body)
    return body


def _assert_params(body: dict[str, Any]) -> None:
    params = body["params"]
    assert isinstance(params, dict)
    assert params, "params present but empty"
    assert all(re.fullmatch(r"p\d+", key) for key in params)
    assert sorted(params, key=lambda key: int(key[1:])) == [f"p{i}" for i in range(len(params))]
    for value in params.values():
        assert str(value) in body["message"]


# --- Routing -------------------------------------------------------------------------------------


@before_storage
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/no/such/route"),
        ("POST", "/admin/no-such-route"),
        ("DELETE", "/admin/businesses/x/y/z"),
        ("GET", "/healthz/extra"),
    ],
)
async def test_unknown_route_is_404_envelope(
    client: Any, admin_headers: dict[str, str], method: str, path: str
) -> None:
    response = await client.open(path, method=method, headers=admin_headers)

    body = await _envelope(response, 404)
    assert isinstance(body["message"], str)
    assert body.get("params") == {"p0": method, "p1": path}


@before_storage
@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/healthz", "GET"),
        ("GET", "/admin/businesses", "POST"),
        ("PUT", "/login", "POST"),
        ("POST", "/metrics", "GET"),
    ],
)
async def test_wrong_method_is_405_envelope_with_allow(
    client: Any, admin_headers: dict[str, str], method: str, path: str, allowed: str
) -> None:
    response = await client.open(path, method=method, headers=admin_headers)

    body = await _envelope(response, 405)
    assert isinstance(body["message"], str)
    allow = {item.strip() for item in response.headers["Allow"].split(",")}
    assert allowed in allow
    assert method not in allow


async def test_domain_error_params_interpolate_into_the_message(
    client: Any, admin_headers: dict[str, str]
) -> None:
    response = await client.post(
        "/admin/developer-tokens",
        json={"userId": "usr_00000000000000000000042a"},
        headers=admin_headers,
    )

    body = await _envelope(response, 404)
    assert "params" in body
    assert "usr_00000000000000000000042a" in body["params"].values()


async def test_envelopes_carry_security_headers(client: Any) -> None:
    response = await client.get("/no/such/route")

    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


# --- Unparseable bodies --------------------------------------------------------------------------

UNPARSEABLE_BODIES = {
    "plain-text": ("text/plain", b"name=Acme"),
    "form-encoded": ("application/x-www-form-urlencoded", b"name=Acme"),
    "malformed-json": ("application/json", b'{"name": '),
    "trailing-garbage": ("application/json", b'{"name": "Acme"} x'),
    "single-quotes": ("application/json", b"{'name': 'Acme'}"),
    "empty-json": ("application/json", b""),
    "json-null": ("application/json", b"null"),
    "json-array": ("application/json", b'[{"name": "Acme"}]'),
    "json-string": ("application/json", b'"Acme"'),
    "json-number": ("application/json", b"42"),
    "no-content-type": (None, b'{"name": "Acme"}'),
}


@before_storage
@pytest.mark.parametrize(
    ("content_type", "data"), list(UNPARSEABLE_BODIES.values()), ids=list(UNPARSEABLE_BODIES)
)
async def test_unparseable_admin_body_is_400_envelope(
    client: Any, platform: Any, content_type: str | None, data: bytes
) -> None:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    if content_type is not None:
        headers["Content-Type"] = content_type

    response = await client.post("/admin/businesses", data=data, headers=headers)

    await _envelope(response, 400)
    async with platform.store.transaction() as tx:
        assert await tx.fetchval("SELECT COUNT(*) FROM businesses") == 0


async def test_json_body_that_is_not_utf8_is_400(client: Any) -> None:
    response = await client.post(
        "/admin/businesses", data=b'{"name": "Acme \xff"}', headers=JSON_HEADERS
    )

    await _envelope(response, 400)


async def test_deeply_nested_json_is_400(client: Any) -> None:
    depth = 100_000
    response = await client.post(
        "/admin/businesses", data=b"[" * depth + b"]" * depth, headers=JSON_HEADERS
    )

    await _envelope(response, 400)


# --- Size limit ----------------------------------------------------------------------------------


def _json_body_of_size(size: int) -> bytes:
    """A JSON object of exactly ``size`` bytes whose name is too long to be accepted."""
    shell = b'{"name": ""}'
    return shell[:-2] + b"a" * (size - len(shell)) + shell[-2:]


@pytest.mark.parametrize(
    ("size", "status"),
    [(ONE_MIB, 400), (ONE_MIB + 1, 413), (4 * ONE_MIB, 413)],
    ids=["exactly-1MiB", "1MiB-plus-1", "4MiB"],
)
async def test_body_over_one_mib_is_413_envelope(client: Any, size: int, status: int) -> None:
    data = _json_body_of_size(size)
    assert len(data) == size

    response = await client.post("/admin/businesses", data=data, headers=JSON_HEADERS)

    body = await _envelope(response, status)
    if status == 413:
        assert isinstance(body["message"], str)


# --- Crashes -------------------------------------------------------------------------------------


def _crashing_view(kind: str) -> Any:
    async def crash() -> str:
        if kind == "runtime":
            raise RuntimeError(CRASH_MESSAGE)
        if kind == "key":
            return {}[CRASH_MESSAGE]  # type: ignore[no-any-return]
        raise ZeroDivisionError(CRASH_MESSAGE)

    return crash


@pytest.mark.parametrize("kind", ["runtime", "key", "zero-division"])
async def test_exception_in_a_handler_is_500_envelope_without_internals(
    fresh_app: Any, kind: str
) -> None:
    app = fresh_app
    app.add_url_rule("/test-only/crash", f"test_crash_{kind}", _crashing_view(kind))
    client = app.test_client()

    response = await client.get("/test-only/crash")

    body = await _envelope(response, 500)
    assert isinstance(body["message"], str)
    assert "params" not in body
    text = await response.get_data(as_text=True)
    leaks = ("Traceback", CRASH_MESSAGE, "RuntimeError", "KeyError", "ZeroDivisionError", ".py")
    for leak in (*leaks, 'File "', "test_error_envelope", "/test-only/crash"):
        assert leak not in text
    # The service keeps serving after the crash.
    assert (await client.get("/healthz")).status_code == 200


async def test_envelope_fields_keep_their_documented_order(client: Any) -> None:
    response = await client.get("/no-such-route")

    raw = await response.get_data(as_text=True)
    assert list(json.loads(raw)) == ["statusCode", "message", "error", "params"]
