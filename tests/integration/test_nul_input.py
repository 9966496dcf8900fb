"""A NUL character (U+0000) anywhere in a request's text is a validation failure, on either
store alike, and nothing is written: in a JSON body (also inside an invoice line or an account
code), a form field, the query string and a path parameter; answered in the route's shape (the
envelope's array message, the OAuth endpoints' invalid_request, the page's 400).

Spec: Errors (validation failures: an array message, no code; OAuth endpoint errors).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

import pytest

from .data_api import LINE, Api, owner_api
from .oauth_helpers import REDIRECT_URI, assert_oauth_error, basic, make_world
from .oauth_helpers import login as sign_in
from .webhook_world import Console, console_for

NUL = "\x00"


async def assert_validation_failure(response: Any, *, names: str) -> None:
    """400 in the envelope: an array of sentences naming ``names``, no code."""
    body = await response.get_json()
    assert response.status_code == 400, body
    assert body["statusCode"] == 400
    assert body["error"] == "Bad Request"
    assert body["message"] == [f"{names} must not contain NUL characters"], body
    assert "code" not in body


async def count(platform: Any, table: str) -> int:
    async with platform.store.transaction() as tx:
        value: int = await tx.fetchval(f"SELECT COUNT(*) FROM {table}")
    return value


# --- The data API ---------------------------------------------------------------------------------


DATA_API_WRITES = [
    pytest.param("/customers", {"name": f"Acme{NUL}Trading"}, "name", id="customer-name"),
    pytest.param(
        "/customers",
        {"name": "Acme", "email": f"billing{NUL}@acme.example"},
        "email",
        id="customer-email",
    ),
    pytest.param("/suppliers", {"name": f"{NUL}Paper Co"}, "name", id="supplier-name"),
    pytest.param(
        "/invoices",
        {"lines": [LINE, {**LINE, "description": f"Consulting{NUL}"}]},
        "lines.1.description",
        id="invoice-line-description",
    ),
    pytest.param(
        "/accounts",
        {"code": f"40{NUL}0", "name": "Sales", "type": "income"},
        "code",
        id="account-code",
    ),
    pytest.param(
        "/customers", {f"na{NUL}me": "Acme"}, "a field name in the request body", id="key"
    ),
]


@pytest.mark.parametrize(("path", "body", "names"), DATA_API_WRITES)
async def test_data_api_refuses_a_nul_in_the_body(
    client, admin_headers, platform, path: str, body: dict[str, Any], names: str
) -> None:
    api = await owner_api(client, admin_headers)
    if path == "/invoices":
        body = {"customerId": (await api.customer())["id"], **body}
    listed = await api.ok("GET", path)
    events = await count(platform, "events")

    await assert_validation_failure(await api.call("POST", path, body), names=names)

    assert await api.ok("GET", path) == listed
    assert await count(platform, "events") == events


async def test_data_api_refuses_a_nul_in_a_change(client, admin_headers, platform) -> None:
    api = await owner_api(client, admin_headers)
    customer = await api.customer("Acme")
    response = await api.call("PATCH", f"/customers/{customer['id']}", {"name": f"Ac{NUL}me"})

    await assert_validation_failure(response, names="name")
    assert (await api.ok("GET", f"/customers/{customer['id']}"))["name"] == "Acme"


async def test_data_api_refuses_a_nul_in_the_query_string(client, admin_headers) -> None:
    api = await owner_api(client, admin_headers)

    response = await api.call("GET", "/customers", query={"cursor": f"cus_{NUL}"})

    await assert_validation_failure(response, names="query parameter cursor")


# --- The operator API -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "names"),
    [
        pytest.param({"email": f"ann{NUL}@example.com", "password": "long enough"}, "email"),
        pytest.param(
            {"email": "ann@example.com", "password": "long enough", "name": f"Ann{NUL}"}, "name"
        ),
        pytest.param({"email": "ann@example.com", "password": f"long{NUL}enough"}, "password"),
    ],
)
async def test_operator_api_refuses_a_nul_in_the_body(
    client, admin_headers, platform, body: dict[str, Any], names: str
) -> None:
    users = await count(platform, "users")

    response = await client.post("/admin/users", json=body, headers=admin_headers)

    await assert_validation_failure(response, names=names)
    assert await count(platform, "users") == users


async def test_operator_api_refuses_a_nul_in_a_path_parameter(
    client, admin_headers, platform
) -> None:
    world = await make_world(client, admin_headers)
    memberships = await count(platform, "memberships")

    response = await client.put(
        f"/admin/businesses/{world.business_id}/members/{quote(world.user_id + NUL)}",
        json={"role": "viewer"},
        headers=admin_headers,
    )

    await assert_validation_failure(response, names="path parameter user_id")
    assert await count(platform, "memberships") == memberships


# --- The developer API ----------------------------------------------------------------------------


async def _console(client: Any, admin_headers: dict[str, str]) -> tuple[Api, Console]:
    api = await owner_api(client, admin_headers)
    return api, await console_for(client, admin_headers, api)


async def test_developer_api_refuses_a_nul_in_the_body(client, admin_headers, platform) -> None:
    _, console = await _console(client, admin_headers)

    response = await console.call(
        "POST", "/webhooks", {"url": f"http://127.0.0.1:9/{NUL}hook", "events": []}
    )

    await assert_validation_failure(response, names="url")
    assert (await console.ok("GET", "/webhooks"))["data"] == []
    assert await count(platform, "webhooks") == 0


async def test_developer_api_refuses_a_nul_in_a_path_parameter(client, admin_headers) -> None:
    api, console = await _console(client, admin_headers)

    response = await client.get(
        f"/developer/apps/{quote(api.world.app_id + NUL)}/webhooks",
        headers={"Authorization": f"Bearer {console.token}"},
    )

    await assert_validation_failure(response, names="path parameter app_id")


# --- The OAuth endpoints --------------------------------------------------------------------------


async def test_token_endpoint_refuses_a_nul_in_a_form_field(
    client, admin_headers, platform
) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None
    families = await count(platform, "token_families")

    response = await client.post(
        "/oauth/token",
        form={"grant_type": "authorization_code", "code": f"lp_code_{NUL}", "redirect_uri": "x"},
        headers=basic(world.client_id, world.client_secret),
    )

    body = await assert_oauth_error(response, 400, "invalid_request")
    assert body["error_description"] == "form field code must not contain NUL characters"
    assert await count(platform, "token_families") == families


async def test_token_exchange_refuses_a_nul_in_its_json_body(client, admin_headers) -> None:
    world = await make_world(client, admin_headers)
    assert world.client_secret is not None

    response = await client.post(
        "/oauth/token",
        json={
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "subject_token": f"ey{NUL}",
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
        },
        headers=basic(world.client_id, world.client_secret),
    )

    body = await assert_oauth_error(response, 400, "invalid_request")
    assert body["error_description"] == "subject_token must not contain NUL characters"


async def test_registration_refuses_a_nul_and_registers_nothing(client, platform) -> None:
    apps_before = await count(platform, "apps")

    response = await client.post(
        "/oauth/register",
        data=json.dumps({"redirect_uris": [REDIRECT_URI], "client_name": f"Pocket{NUL}Books"}),
        headers={"Content-Type": "application/json"},
    )

    await assert_oauth_error(response, 400, "invalid_request")
    assert await count(platform, "apps") == apps_before


async def test_discovery_refuses_a_nul_in_the_query_string(client) -> None:
    response = await client.get("/.well-known/oauth-authorization-server", query_string={"x": NUL})

    body = await assert_oauth_error(response, 400, "invalid_request")
    assert body["error_description"] == "query parameter x must not contain NUL characters"


# --- Form pages -----------------------------------------------------------------------------------


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None, page
    return found[1]


async def test_sign_in_form_refuses_a_nul_with_its_page(client, admin_headers, platform) -> None:
    world = await make_world(client, admin_headers)
    csrf = _csrf(await (await client.get("/login")).get_data(as_text=True))

    response = await client.post(
        "/login",
        form={"email": world.email + NUL, "password": world.password, "csrf_token": csrf},
    )

    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert response.mimetype == "text/html"
    assert "form field email must not contain NUL characters" in page
    assert not any("lp_session" in c for c in response.headers.getlist("Set-Cookie"))
    assert await count(platform, "login_sessions") == 0


async def test_a_page_refuses_a_nul_in_the_query_string(client) -> None:
    response = await client.get("/login", query_string={"next": f"/x{NUL}"})

    page = await response.get_data(as_text=True)
    assert response.status_code == 400, page
    assert response.mimetype == "text/html"
    assert "query parameter next must not contain NUL characters" in page


# --- A multipart part with no readable name -------------------------------------------------------

_BOUNDARY = "ledgerport-boundary"
_NAMELESS = (
    f'--{_BOUNDARY}\r\nContent-Disposition: form-data; name="a\\"\r\n\r\n1\r\n'
    f'--{_BOUNDARY}\r\nContent-Disposition: form-data; name="b"\r\n\r\n2\r\n'
    f"--{_BOUNDARY}--\r\n"
).encode()


async def test_a_form_part_without_a_readable_name_is_refused_not_a_failure(
    client, admin_headers
) -> None:
    """A part whose name's closing quote is escaped has no name once parsed: refused as bad
    input wherever a form is read, the pages' CSRF check included (it was a 500 there). The
    OAuth endpoints take no multipart body at all."""
    headers = {"Content-Type": f"multipart/form-data; boundary={_BOUNDARY}"}
    login = await client.post("/login", data=_NAMELESS, headers=headers)
    world = await make_world(client, admin_headers)
    await sign_in(client, world)
    page = await client.post(
        f"/console/apps/{world.app_id}/assets", data=_NAMELESS, headers=headers
    )

    for response in (page, login):
        assert response.status_code == 400
        assert "a form field has no name" in await response.get_data(as_text=True)
