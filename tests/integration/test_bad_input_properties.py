"""Property-based: no body the operator API or registration can receive is answered with a 5xx.

Every library exception that bad input can raise is converted where it is raised (storage turns
unstorable text into BadValue, URL parsing errors become rule violations), so whatever JSON
arrives, on either store, the answer is a 4xx in the endpoint's own shape. Each example sends a
batch of requests, so the stores are created a few times rather than once a request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import pytest
import trio
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ledgerport.clock import FrozenClock
from ledgerport.http import create_app
from ledgerport.storage import open_asyncio_loop

from ..conftest import ADMIN_TOKEN, SECRET_KEY
from ..platforms import build_platform
from ..stores import open_test_store
from .oauth_helpers import make_world

TIMEOUT = 120
BATCH = 40
EXAMPLES = 4

# Text that has broken stores and parsers before: lone surrogates, NUL, huge or odd numbers in
# strings, malformed URLs (an unclosed IPv6 bracket, a port past 65535).
NASTY_TEXT = st.sampled_from(
    [
        "\ud800",
        "a\udfffb",
        "\x00",
        "x\x00y",
        "https://[::1",
        "https://[::1]:99999/",
        "https://example.com:65536/",
        "http://example.com/",
        "https://user:pw@example.com/",
        "javascript:alert(1)",
        "https://example.com/\u2028",
        "",
        " ",
        "9" * 40,
        "é" * 600,
    ]
)
TEXT = st.one_of(
    NASTY_TEXT, st.text(st.characters(exclude_categories=()), max_size=24), st.just("ok")
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=8,
)

# Placeholders replaced by the ids of a real world, so the checks past "not found" run too.
REAL = {"<business>", "<user>", "<app>", "<installation>"}
ID = st.one_of(st.sampled_from(sorted(REAL)), TEXT)


def _body(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Objects with some of the route's fields (each a plausible or an arbitrary value) and
    sometimes a stray one; now and then not an object at all."""
    chosen = st.fixed_dictionaries({}, optional={k: v | JSON for k, v in fields.items()})
    extra = st.dictionaries(TEXT, JSON, max_size=2)
    objects = st.builds(lambda a, b: {**b, **a}, chosen, extra)
    return st.one_of(objects, objects, objects, JSON)


SCOPES = st.lists(st.sampled_from(["invoices:read", "nope", "\ud800", ""]) | TEXT, max_size=4)
URIS = st.lists(TEXT | st.just("https://app.example/cb"), max_size=6)

ADMIN_ROUTES: list[tuple[str, str, dict[str, st.SearchStrategy[Any]] | None]] = [
    ("POST", "/admin/businesses", {"name": TEXT, "sandbox": st.booleans(), "plan": TEXT,
                                   "invoiceLimit": SCALARS}),
    ("POST", "/admin/users", {"email": TEXT, "password": TEXT, "name": TEXT}),
    ("PUT", "/admin/businesses/{business}/members/{user}", {"role": TEXT, "active": SCALARS}),
    ("PUT", "/admin/businesses/{business}/roles/{role}", {"permissions": SCOPES}),
    ("POST", "/admin/apps", {"name": TEXT, "type": st.sampled_from(["PUBLIC", "CONFIDENTIAL"]),
                             "redirectUris": URIS, "scopes": SCOPES, "developerUserId": ID,
                             "reviewed": SCALARS, "appUrl": TEXT}),
    ("POST", "/admin/apps/{app}/status", {"status": TEXT}),
    ("PUT", "/admin/apps/{app}/review", {"reviewed": SCALARS}),
    ("POST", "/admin/installations", {"appId": ID, "businessId": ID, "userId": ID,
                                      "scopes": SCOPES}),
    ("DELETE", "/admin/installations/{installation}", None),
    ("DELETE", "/admin/businesses/{business}/apps/{app}/access", None),
    ("POST", "/admin/session-tokens", {"appId": ID, "businessId": ID, "userId": ID}),
    ("POST", "/admin/developer-tokens", {"userId": ID}),
]  # fmt: skip


@st.composite
def _admin_request(draw: st.DrawFn) -> tuple[str, str, dict[str, str], Any]:
    method, template, fields = draw(st.sampled_from(ADMIN_ROUTES))
    names = [part[1:-1] for part in template.split("/") if part.startswith("{")]
    path_ids = {name: draw(ID) for name in names}
    body = draw(_body(fields)) if fields is not None else None
    return method, template, path_ids, body


def _real(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [_real(item, ids) for item in value]
    if isinstance(value, dict):
        return {_real(k, ids): _real(v, ids) for k, v in value.items()}
    return value


async def _world_ids(client: Any, admin_headers: dict[str, str]) -> dict[str, str]:
    world = await make_world(client, admin_headers)
    response = await client.post(
        "/admin/installations",
        json={
            "appId": world.app_id,
            "businessId": world.business_id,
            "userId": world.user_id,
            "scopes": ["invoices:read"],
        },
        headers=admin_headers,
    )
    assert response.status_code == 201, await response.get_data(as_text=True)
    return {
        "<business>": world.business_id,
        "<user>": world.user_id,
        "<app>": world.app_id,
        "<installation>": (await response.get_json())["id"],
    }


def _raw_json(body: Any) -> bytes:
    # ensure_ascii escapes lone surrogates as \\ud800, as a client's JSON encoder would.
    return json.dumps(body).encode()


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    # A failing batch is reported whole: shrinking a batch of requests against a real store
    # takes minutes, and the assertion names the request that failed.
    phases=[Phase.explicit, Phase.generate],
)
BACKEND = pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@asynccontextmanager
async def _client(backend: str) -> AsyncIterator[Any]:
    """A served application over a store of its own: each example starts afresh (function
    fixtures would outlive the example's trio run)."""
    async with open_asyncio_loop(), open_test_store(backend) as store:
        platform = await build_platform(
            store,
            FrozenClock(),
            {
                "LEDGERPORT_ADMIN_TOKEN": ADMIN_TOKEN,
                "LEDGERPORT_SECRET_KEY": SECRET_KEY,
                "LEDGERPORT_ENV": "development",
                "LEDGERPORT_PASSWORD_HASHING": "fast",
            },
        )
        yield create_app(platform).test_client()


@BACKEND
@SETTINGS
@given(requests=st.lists(_admin_request(), min_size=BATCH, max_size=BATCH))
async def test_operator_api_never_answers_5xx(backend: str, requests: list[Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with _client(backend) as client:
            await _operator_requests(client, ADMIN_HEADERS, requests)


async def _operator_requests(
    client: Any, admin_headers: dict[str, str], requests: list[Any]
) -> None:
    ids = await _world_ids(client, admin_headers)
    for method, template, path_ids, body in requests:
        path = template.format(
            **{
                name: quote(_real(value, ids), safe="", errors="surrogatepass")
                for name, value in path_ids.items()
            }
        )
        response = await client.open(
            path,
            method=method,
            data=_raw_json(_real(body, ids)) if body is not None else None,
            headers={**admin_headers, "Content-Type": "application/json"},
        )
        text = await response.get_data(as_text=True)
        assert response.status_code < 500, (method, path, body, text)
        if response.status_code >= 400:
            envelope = json.loads(text)
            assert envelope["statusCode"] == response.status_code


REGISTRATION_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "redirect_uris": URIS,
    "client_name": TEXT,
    "token_endpoint_auth_method": st.sampled_from(["none", "client_secret_basic", "x"]),
    "grant_types": st.lists(TEXT, max_size=3),
    "response_types": st.lists(TEXT, max_size=2),
    "scope": TEXT,
    "contacts": st.lists(TEXT, max_size=12),
    "client_uri": TEXT,
    "logo_uri": TEXT,
    "tos_uri": TEXT,
    "policy_uri": TEXT,
}


@BACKEND
@SETTINGS
@given(bodies=st.lists(_body(REGISTRATION_FIELDS), min_size=BATCH, max_size=BATCH))
async def test_registration_never_answers_5xx(backend: str, bodies: list[Any]) -> None:
    with trio.fail_after(TIMEOUT):
        async with _client(backend) as client:
            await _registrations(client, bodies)


async def _registrations(client: Any, bodies: list[Any]) -> None:
    for n, body in enumerate(bodies):
        response = await client.post(
            "/oauth/register",
            data=_raw_json(body),
            headers={"Content-Type": "application/json"},
            # Another address each time: the registration limit is not what is tested.
            scope_base={"client": (f"198.18.{n // 250}.{n % 250}", 40000)},
        )
        text = await response.get_data(as_text=True)
        assert response.status_code < 500, (body, text)
        answer = json.loads(text)
        if response.status_code >= 400:
            assert answer["error"] in {
                "invalid_request",
                "invalid_redirect_uri",
                "invalid_client_metadata",
            }, answer
        else:
            assert response.status_code == 201
