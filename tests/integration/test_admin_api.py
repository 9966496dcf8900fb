"""The operator API (``/admin/*``), row by row of contract.md's table (session tokens aside)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledgerport import books, catalog
from ledgerport.platform import Platform

ADMIN_TOKEN = "lp_admin_test-token-0123456789abcdef"  # conftest's token
UNKNOWN_ID = "xyz_does-not-exist"
"""In a path: an id that names nothing (404), whatever its form."""
UNKNOWN_IDS = {
    "appId": "app_000000000000000000000000",
    "businessId": "bus_000000000000000000000000",
    "userId": "usr_000000000000000000000000",
}
"""In a body, ids of the form the document states (a malformed one is a validation failure)
that name nothing."""
APP_SCOPES = ["customers:read", "customers:write", "invoices:read"]
UNUSABLE_PASSWORD_HASH = "unusable"  # seeded users never sign in; Argon2 is slow

# Requests refused before any storage access behave the same on both backends; running these
# large tables once (on SQLite) keeps the suite fast. Everything that stores runs on both.
before_storage = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


# --- Helpers -------------------------------------------------------------------------------------


async def _seed_user(platform: Platform, email: str = "dev@example.com") -> str:
    """A user inserted directly (the admin route hashes a password, which is slow)."""
    async with platform.store.transaction() as tx:
        user = await books.create_user(
            tx, now=platform.now(), email=email, password_hash=UNUSABLE_PASSWORD_HASH
        )
    return user.id


async def _create(
    client: Any, headers: dict[str, str], path: str, body: dict[str, Any]
) -> dict[str, Any]:
    response = await client.post(path, json=body, headers=headers)
    assert response.status_code == 201, await response.get_data(as_text=True)
    created: dict[str, Any] = await response.get_json()
    return created


async def _business(client: Any, headers: dict[str, str], **fields: Any) -> str:
    body = await _create(client, headers, "/admin/businesses", {"name": "Acme", **fields})
    return str(body["id"])


async def _app(client: Any, headers: dict[str, str], developer_id: str, **fields: Any) -> str:
    body = {
        "name": "Ledger Sync",
        "type": "CONFIDENTIAL",
        "redirectUris": ["https://sync.example/callback"],
        "scopes": APP_SCOPES,
        "developerUserId": developer_id,
        "reviewed": True,
        **fields,
    }
    return str((await _create(client, headers, "/admin/apps", body))["id"])


async def _member(
    client: Any,
    headers: dict[str, str],
    business_id: str,
    user_id: str,
    role: str = "owner",
    *,
    active: bool = True,
) -> Any:
    return await client.put(
        f"/admin/businesses/{business_id}/members/{user_id}",
        json={"role": role, "active": active},
        headers=headers,
    )


async def _events(platform: Platform) -> list[dict[str, Any]]:
    async with platform.store.transaction() as tx:
        rows = await tx.fetch("SELECT type, business_id, app_id, data FROM events ORDER BY seq")
    return [{**row, "data": json.loads(row["data"])} for row in rows]


async def _installation_row(platform: Platform, installation_id: str) -> dict[str, Any]:
    async with platform.store.transaction() as tx:
        row = await tx.fetchrow("SELECT * FROM installations WHERE id = $1", installation_id)
    assert row is not None
    return row


async def _assert_envelope(response: Any, status: int, reason: str) -> dict[str, Any]:
    assert response.status_code == status, await response.get_data(as_text=True)
    body: dict[str, Any] = await response.get_json()
    assert body["statusCode"] == status
    assert body["error"] == reason
    assert isinstance(body["message"], str | list)
    return body


async def _assert_validation_failure(response: Any) -> dict[str, Any]:
    """400 with an array of per-field strings and no ``code`` (spec: Errors)."""
    body = await _assert_envelope(response, 400, "Bad Request")
    assert isinstance(body["message"], list)
    assert body["message"]
    assert all(isinstance(item, str) and item for item in body["message"])
    assert "code" not in body
    return body


@pytest.fixture
async def world(client: Any, admin_headers: dict[str, str], platform: Platform) -> dict[str, str]:
    """A developer who owns a business (and a sandbox one) and a reviewed app."""
    user_id = await _seed_user(platform)
    business_id = await _business(client, admin_headers)
    sandbox_id = await _business(client, admin_headers, name="Sandbox", sandbox=True)
    for business in (business_id, sandbox_id):
        assert (await _member(client, admin_headers, business, user_id)).status_code == 200
    app_id = await _app(client, admin_headers, user_id)
    return {"user": user_id, "business": business_id, "sandbox": sandbox_id, "app": app_id}


async def _install(
    client: Any, headers: dict[str, str], world: dict[str, str], scopes: list[str], **over: str
) -> Any:
    body = {
        "appId": world["app"],
        "businessId": world["business"],
        "userId": world["user"],
        "scopes": scopes,
        **over,
    }
    return await client.post("/admin/installations", json=body, headers=headers)


# --- Authentication ------------------------------------------------------------------------------

ADMIN_ROUTES = [
    ("POST", "/admin/businesses", {"name": "Acme"}),
    ("POST", "/admin/users", {"email": "a@example.com", "password": "long enough"}),
    ("PUT", f"/admin/businesses/{UNKNOWN_ID}/members/{UNKNOWN_ID}", {"role": "owner"}),
    ("PUT", f"/admin/businesses/{UNKNOWN_ID}/roles/viewer", {"permissions": []}),
    (
        "POST",
        "/admin/apps",
        {
            "name": "X",
            "type": "PUBLIC",
            "redirectUris": ["https://x.example/cb"],
            "scopes": ["invoices:read"],
            "developerUserId": UNKNOWN_ID,
        },
    ),
    ("POST", f"/admin/apps/{UNKNOWN_ID}/status", {"status": "SUSPENDED"}),
    (
        "POST",
        "/admin/installations",
        {"appId": UNKNOWN_ID, "businessId": UNKNOWN_ID, "userId": UNKNOWN_ID, "scopes": []},
    ),
    ("DELETE", f"/admin/installations/{UNKNOWN_ID}", None),
    ("DELETE", f"/admin/businesses/{UNKNOWN_ID}/apps/{UNKNOWN_ID}/access", None),
    ("POST", "/admin/developer-tokens", {"userId": UNKNOWN_ID}),
]
ROUTE_IDS = [f"{method} {path}" for method, path, _ in ADMIN_ROUTES]

BAD_AUTHORIZATIONS = {
    "missing": None,
    "empty": "",
    "no-scheme": ADMIN_TOKEN,
    "basic-scheme": f"Basic {ADMIN_TOKEN}",
    "bearer-without-token": "Bearer",
    "bearer-blank": "Bearer    ",
    "wrong-token": "Bearer lp_admin_wrong-token-0123456789abcdef",
    "token-with-suffix": f"Bearer {ADMIN_TOKEN}x",
    "token-prefix": f"Bearer {ADMIN_TOKEN[:-1]}",
}


async def _assert_unauthorized(response: Any) -> None:
    body = await _assert_envelope(response, 401, "Unauthorized")
    assert isinstance(body["message"], str)


@before_storage
@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES, ids=ROUTE_IDS)
@pytest.mark.parametrize("authorization", ["missing", "wrong-token"])
async def test_every_admin_route_requires_the_admin_token(
    client: Any, method: str, path: str, body: dict[str, Any] | None, authorization: str
) -> None:
    value = BAD_AUTHORIZATIONS[authorization]
    headers = {} if value is None else {"Authorization": value}

    response = await client.open(path, method=method, json=body, headers=headers)

    await _assert_unauthorized(response)


@pytest.mark.parametrize("authorization", sorted(BAD_AUTHORIZATIONS))
async def test_malformed_authorization_is_401_and_changes_nothing(
    client: Any, platform: Platform, authorization: str
) -> None:
    value = BAD_AUTHORIZATIONS[authorization]
    headers = {} if value is None else {"Authorization": value}

    response = await client.post("/admin/businesses", json={"name": "Acme"}, headers=headers)

    await _assert_unauthorized(response)
    async with platform.store.transaction() as tx:
        assert await tx.fetchval("SELECT COUNT(*) FROM businesses") == 0


async def test_authentication_comes_before_body_validation(client: Any) -> None:
    response = await client.post("/admin/businesses", json={"name": 5})

    await _assert_unauthorized(response)


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
async def test_right_token_is_accepted_with_any_scheme_case(client: Any, scheme: str) -> None:
    response = await client.post(
        "/admin/businesses",
        json={"name": "Acme"},
        headers={"Authorization": f"{scheme} {ADMIN_TOKEN}"},
    )

    assert response.status_code == 201


# --- Businesses ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"name": "Acme"},
            {"name": "Acme", "sandbox": False, "plan": "paid", "invoiceLimit": None},
        ),
        (
            {"name": "Sandbox Co", "sandbox": True, "plan": "free", "invoiceLimit": 50},
            {"name": "Sandbox Co", "sandbox": True, "plan": "free", "invoiceLimit": 50},
        ),
        (
            {"name": "Zero", "plan": "paid", "invoiceLimit": 0},
            {"name": "Zero", "sandbox": False, "plan": "paid", "invoiceLimit": 0},
        ),
        (
            {"name": "Nulls", "invoiceLimit": None, "sandbox": False},
            {"name": "Nulls", "sandbox": False, "plan": "paid", "invoiceLimit": None},
        ),
        (
            {"name": "Whole", "invoiceLimit": 25.0},
            {"name": "Whole", "sandbox": False, "plan": "paid", "invoiceLimit": 25},
        ),
    ],
    ids=["defaults", "all-fields", "zero-limit", "explicit-null", "integer-with-zero-fraction"],
)
async def test_create_business(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    body: dict[str, Any],
    expected: dict[str, Any],
) -> None:
    response = await client.post("/admin/businesses", json=body, headers=admin_headers)

    assert response.status_code == 201
    created = await response.get_json()
    assert isinstance(created["id"], str)
    assert created["id"]
    assert created == {"id": created["id"], **expected}
    async with platform.store.transaction() as tx:
        stored = await books.get_business(tx, created["id"])
    assert (stored.name, stored.sandbox, stored.plan, stored.invoice_limit) == (
        expected["name"],
        expected["sandbox"],
        expected["plan"],
        expected["invoiceLimit"],
    )


@pytest.mark.parametrize("limit", [2**63, 10**24, 2.5, "25", True, -1.0])
async def test_an_invoice_limit_that_is_no_64_bit_whole_number_is_a_validation_failure(
    client: Any, admin_headers: dict[str, str], limit: object
) -> None:
    """Beyond 64 bits, or not a whole number (JSON Schema's integer takes 25.0, not a string)."""
    response = await client.post(
        "/admin/businesses", json={"name": "Acme", "invoiceLimit": limit}, headers=admin_headers
    )

    await _assert_validation_failure(response)


async def test_nul_character_in_a_name_is_refused_on_either_store(
    client: Any, admin_headers: dict[str, str]
) -> None:
    response = await client.post(
        "/admin/businesses", json={"name": "Ac\u0000me"}, headers=admin_headers
    )

    body = await _assert_validation_failure(response)
    assert body["message"] == ["name must not contain NUL characters"]


async def test_business_ids_are_distinct(client: Any, admin_headers: dict[str, str]) -> None:
    first = await _business(client, admin_headers)
    second = await _business(client, admin_headers)

    assert first != second


# --- Users ---------------------------------------------------------------------------------------


async def test_create_user(client: Any, admin_headers: dict[str, str], platform: Platform) -> None:
    password = "correct horse battery staple"

    response = await client.post(
        "/admin/users",
        json={"email": "ada@example.com", "password": password, "name": "Ada"},
        headers=admin_headers,
    )

    assert response.status_code == 201
    created = await response.get_json()
    assert created["email"] == "ada@example.com"
    assert isinstance(created["id"], str)
    assert created["id"]
    async with platform.store.transaction() as tx:
        row = await tx.fetchrow("SELECT * FROM users WHERE id = $1", created["id"])
    assert row is not None
    assert password not in json.dumps(row, default=str)
    assert row["password_hash"].startswith("$argon2")


async def test_duplicate_email_is_409(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    await _seed_user(platform, "ada@example.com")

    response = await client.post(
        "/admin/users",
        json={"email": "Ada@Example.com", "password": "correct horse battery staple"},
        headers=admin_headers,
    )

    await _assert_envelope(response, 409, "Conflict")
    async with platform.store.transaction() as tx:
        assert await tx.fetchval("SELECT COUNT(*) FROM users") == 1


# --- Memberships ---------------------------------------------------------------------------------


@pytest.mark.parametrize("role", catalog.ROLES)
async def test_put_member(
    client: Any, admin_headers: dict[str, str], platform: Platform, role: str
) -> None:
    user_id = await _seed_user(platform)
    business_id = await _business(client, admin_headers)

    response = await _member(client, admin_headers, business_id, user_id, role)

    assert response.status_code == 200
    assert await response.get_json() == {
        "businessId": business_id,
        "userId": user_id,
        "role": role,
        "active": True,
    }
    async with platform.store.transaction() as tx:
        stored = await books.get_membership(tx, business_id, user_id)
    assert stored == books.Membership(business_id, user_id, role, True)


async def test_put_member_defaults_active_and_updates_in_place(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    user_id = await _seed_user(platform)
    business_id = await _business(client, admin_headers)
    path = f"/admin/businesses/{business_id}/members/{user_id}"

    first = await client.put(path, json={"role": "viewer"}, headers=admin_headers)
    second = await client.put(
        path, json={"role": "accountant", "active": False}, headers=admin_headers
    )

    assert first.status_code == 200
    assert (await first.get_json())["active"] is True
    assert second.status_code == 200
    assert (await second.get_json())["active"] is False
    async with platform.store.transaction() as tx:
        stored = await books.get_membership(tx, business_id, user_id)
        count = await tx.fetchval("SELECT COUNT(*) FROM memberships")
    assert stored == books.Membership(business_id, user_id, "accountant", False)
    assert count == 1


@pytest.mark.parametrize("unknown", ["business", "user"])
async def test_membership_of_unknown_business_or_user_is_404(
    client: Any, admin_headers: dict[str, str], platform: Platform, unknown: str
) -> None:
    user_id = await _seed_user(platform)
    business_id = await _business(client, admin_headers)
    if unknown == "business":
        business_id = UNKNOWN_ID
    else:
        user_id = UNKNOWN_ID

    response = await _member(client, admin_headers, business_id, user_id)

    await _assert_envelope(response, 404, "Not Found")


# --- Role permissions ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", catalog.ROLES)
@pytest.mark.parametrize(
    "permissions",
    [["invoices:read", "journal:post"], []],
    ids=["some", "none"],
)
async def test_put_role_permissions(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    role: str,
    permissions: list[str],
) -> None:
    business_id = await _business(client, admin_headers)
    other_business = await _business(client, admin_headers, name="Other")

    response = await client.put(
        f"/admin/businesses/{business_id}/roles/{role}",
        json={"permissions": permissions},
        headers=admin_headers,
    )

    assert response.status_code == 200
    async with platform.store.transaction() as tx:
        assert await books.role_permissions(tx, business_id, role) == frozenset(permissions)
        assert (
            await books.role_permissions(tx, other_business, role) == (catalog.ROLE_DEFAULTS[role])
        )
        for other_role in catalog.ROLES:
            if other_role != role:
                assert (
                    await books.role_permissions(tx, business_id, other_role)
                    == (catalog.ROLE_DEFAULTS[other_role])
                )


async def test_role_permissions_can_change_again(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    business_id = await _business(client, admin_headers)
    path = f"/admin/businesses/{business_id}/roles/accountant"

    for permissions in (["journal:post"], ["payments:read", "payments:delete"]):
        response = await client.put(path, json={"permissions": permissions}, headers=admin_headers)
        assert response.status_code == 200

    async with platform.store.transaction() as tx:
        held = await books.role_permissions(tx, business_id, "accountant")
    assert held == {"payments:read", "payments:delete"}


@pytest.mark.parametrize("role", ["superuser", "Owner", "developer"])
async def test_unknown_role_is_400(client: Any, admin_headers: dict[str, str], role: str) -> None:
    business_id = await _business(client, admin_headers)

    response = await client.put(
        f"/admin/businesses/{business_id}/roles/{role}",
        json={"permissions": ["invoices:read"]},
        headers=admin_headers,
    )

    await _assert_validation_failure(response)


@pytest.mark.parametrize(
    "permissions",
    [["invoices:delete"], ["invoices:read", "admin:everything"], ["profile:read"]],
)
async def test_unknown_permission_is_400_and_changes_nothing(
    client: Any, admin_headers: dict[str, str], platform: Platform, permissions: list[str]
) -> None:
    business_id = await _business(client, admin_headers)

    response = await client.put(
        f"/admin/businesses/{business_id}/roles/viewer",
        json={"permissions": permissions},
        headers=admin_headers,
    )

    await _assert_validation_failure(response)
    async with platform.store.transaction() as tx:
        held = await books.role_permissions(tx, business_id, "viewer")
    assert held == catalog.ROLE_DEFAULTS["viewer"]


async def test_role_permissions_of_unknown_business_is_404(
    client: Any, admin_headers: dict[str, str]
) -> None:
    response = await client.put(
        f"/admin/businesses/{UNKNOWN_ID}/roles/viewer",
        json={"permissions": ["invoices:read"]},
        headers=admin_headers,
    )

    await _assert_envelope(response, 404, "Not Found")


# --- Apps ----------------------------------------------------------------------------------------


async def test_create_confidential_app_shows_the_secret_once_and_stores_only_a_hash(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    developer_id = await _seed_user(platform)

    response = await client.post(
        "/admin/apps",
        json={
            "name": "Ledger Sync",
            "type": "CONFIDENTIAL",
            "redirectUris": ["https://sync.example/callback"],
            "scopes": APP_SCOPES,
            "developerUserId": developer_id,
        },
        headers=admin_headers,
    )

    assert response.status_code == 201
    created = await response.get_json()
    for key in ("id", "clientId", "clientSecret"):
        assert isinstance(created[key], str)
        assert created[key]
    secret = created["clientSecret"]
    async with platform.store.transaction() as tx:
        row = await tx.fetchrow("SELECT * FROM apps WHERE id = $1", created["id"])
    assert row is not None
    assert row["client_id"] == created["clientId"]
    assert all(secret not in str(value) for value in row.values())
    assert row["client_secret_hash"] == platform.keyring.hash_token(secret)


async def test_create_public_app_has_no_secret(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    developer_id = await _seed_user(platform)

    response = await client.post(
        "/admin/apps",
        json={
            "name": "Desktop Ledger",
            "type": "PUBLIC",
            "redirectUris": ["http://127.0.0.1:8000/cb"],
            "scopes": ["invoices:read"],
            "developerUserId": developer_id,
            "appUrl": "https://desktop.example",
        },
        headers=admin_headers,
    )

    assert response.status_code == 201
    created = await response.get_json()
    assert created.get("clientSecret") is None
    assert created["id"]
    assert created["clientId"]
    async with platform.store.transaction() as tx:
        row = await tx.fetchrow("SELECT * FROM apps WHERE id = $1", created["id"])
    assert row is not None
    assert row["client_secret_hash"] is None
    assert row["type"] == "PUBLIC"


async def test_app_ids_and_client_ids_are_distinct(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    developer_id = await _seed_user(platform)
    body = {
        "name": "A",
        "type": "PUBLIC",
        "redirectUris": ["https://a.example/cb"],
        "scopes": ["invoices:read"],
        "developerUserId": developer_id,
    }

    first = await _create(client, admin_headers, "/admin/apps", body)
    second = await _create(client, admin_headers, "/admin/apps", body)

    assert first["id"] != second["id"]
    assert first["clientId"] != second["clientId"]


_PREFIX = "https://app.example/"
ACCEPTED_REDIRECT_URIS = {
    "https": ["https://app.example/callback"],
    "loopback-ip-with-port": ["http://127.0.0.1:8000/cb"],
    "localhost": ["http://localhost/cb"],
    "ipv6-loopback": ["http://[::1]:9000/cb"],
    "five": [f"https://app.example/cb{i}" for i in range(5)],
    "512-chars": [_PREFIX + "a" * (512 - len(_PREFIX))],
    "trailing-slash": ["https://app.example/cb/"],
}
REJECTED_REDIRECT_URIS = {
    "none": [],
    "six": [f"https://app.example/cb{i}" for i in range(6)],
    "513-chars": [_PREFIX + "a" * (513 - len(_PREFIX))],
    "http-non-loopback": ["http://app.example/cb"],
    "http-private-address": ["http://192.168.1.10/cb"],
    "wildcard-host": ["https://*.app.example/cb"],
    "wildcard-path": ["https://app.example/*"],
    "query": ["https://app.example/cb?tenant=1"],
    "empty-query": ["https://app.example/cb?"],
    "fragment": ["https://app.example/cb#top"],
    "relative": ["/callback"],
    "other-scheme": ["ftp://app.example/cb"],
    "one-bad-among-good": ["https://app.example/cb", "http://evil.example/cb"],
    "empty-string": [""],
}


@pytest.mark.parametrize(
    "uris", list(ACCEPTED_REDIRECT_URIS.values()), ids=list(ACCEPTED_REDIRECT_URIS)
)
async def test_acceptable_redirect_uris(
    client: Any, admin_headers: dict[str, str], platform: Platform, uris: list[str]
) -> None:
    developer_id = await _seed_user(platform)

    response = await client.post(
        "/admin/apps",
        json={
            "name": "A",
            "type": "PUBLIC",
            "redirectUris": uris,
            "scopes": ["invoices:read"],
            "developerUserId": developer_id,
        },
        headers=admin_headers,
    )

    assert response.status_code == 201, await response.get_data(as_text=True)
    async with platform.store.transaction() as tx:
        stored = await tx.fetchval("SELECT redirect_uris FROM apps")
    assert json.loads(stored) == uris


@before_storage
@pytest.mark.parametrize(
    "uris", list(REJECTED_REDIRECT_URIS.values()), ids=list(REJECTED_REDIRECT_URIS)
)
async def test_unacceptable_redirect_uris_are_400(
    client: Any, admin_headers: dict[str, str], platform: Platform, uris: list[str]
) -> None:
    developer_id = await _seed_user(platform)

    response = await client.post(
        "/admin/apps",
        json={
            "name": "A",
            "type": "CONFIDENTIAL",
            "redirectUris": uris,
            "scopes": ["invoices:read"],
            "developerUserId": developer_id,
        },
        headers=admin_headers,
    )

    await _assert_validation_failure(response)
    async with platform.store.transaction() as tx:
        assert await tx.fetchval("SELECT COUNT(*) FROM apps") == 0


@pytest.mark.parametrize(
    "scopes",
    [["invoices:delete"], ["invoices:read", "openid"], ["Invoices:read"], ["journal:post"]],
)
async def test_app_with_unknown_scope_is_400(
    client: Any, admin_headers: dict[str, str], platform: Platform, scopes: list[str]
) -> None:
    developer_id = await _seed_user(platform)

    response = await client.post(
        "/admin/apps",
        json={
            "name": "A",
            "type": "PUBLIC",
            "redirectUris": ["https://a.example/cb"],
            "scopes": scopes,
            "developerUserId": developer_id,
        },
        headers=admin_headers,
    )

    await _assert_validation_failure(response)


async def test_app_of_unknown_developer_is_404(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    response = await client.post(
        "/admin/apps",
        json={
            "name": "A",
            "type": "PUBLIC",
            "redirectUris": ["https://a.example/cb"],
            "scopes": ["invoices:read"],
            "developerUserId": UNKNOWN_IDS["userId"],
        },
        headers=admin_headers,
    )

    await _assert_envelope(response, 404, "Not Found")
    async with platform.store.transaction() as tx:
        assert await tx.fetchval("SELECT COUNT(*) FROM apps") == 0


@pytest.mark.parametrize(
    ("status", "install_answer"),
    [("SUSPENDED", 409), ("DEACTIVATED", 409), ("ACTIVE", 201)],
)
async def test_app_status(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    world: dict[str, str],
    status: str,
    install_answer: int,
) -> None:
    if status == "ACTIVE":  # reactivation after a suspension
        await client.post(
            f"/admin/apps/{world['app']}/status",
            json={"status": "SUSPENDED"},
            headers=admin_headers,
        )

    response = await client.post(
        f"/admin/apps/{world['app']}/status", json={"status": status}, headers=admin_headers
    )

    assert response.status_code == 200
    async with platform.store.transaction() as tx:
        assert (await tx.fetchval("SELECT status FROM apps WHERE id = $1", world["app"])) == status
    installed = await _install(client, admin_headers, world, ["invoices:read"])
    assert installed.status_code == install_answer
    if install_answer == 409:
        await _assert_envelope(installed, 409, "Conflict")


async def test_status_of_unknown_app_is_404(client: Any, admin_headers: dict[str, str]) -> None:
    response = await client.post(
        f"/admin/apps/{UNKNOWN_ID}/status", json={"status": "SUSPENDED"}, headers=admin_headers
    )

    await _assert_envelope(response, 404, "Not Found")


# --- Installations -------------------------------------------------------------------------------


async def test_install_creates_an_active_installation_and_emits_app_installed(
    client: Any, admin_headers: dict[str, str], platform: Platform, world: dict[str, str]
) -> None:
    response = await _install(client, admin_headers, world, ["invoices:read", "customers:read"])

    assert response.status_code == 201
    body = await response.get_json()
    assert isinstance(body["id"], str)
    assert body["id"]
    assert body["state"] == "ACTIVE"
    assert sorted(body["scopes"]) == ["customers:read", "invoices:read"]
    row = await _installation_row(platform, body["id"])
    assert (row["app_id"], row["business_id"], row["state"]) == (
        world["app"],
        world["business"],
        "ACTIVE",
    )
    events = await _events(platform)
    assert [(e["type"], e["business_id"], e["app_id"]) for e in events] == [
        ("app.installed", world["business"], world["app"])
    ]
    assert events[0]["data"]["installationId"] == body["id"]


async def test_second_install_widens_to_the_union_and_emits_scopes_updated(
    client: Any, admin_headers: dict[str, str], platform: Platform, world: dict[str, str]
) -> None:
    first = await (await _install(client, admin_headers, world, ["invoices:read"])).get_json()

    response = await _install(client, admin_headers, world, ["customers:read", "customers:write"])

    assert response.status_code == 201
    widened = await response.get_json()
    assert widened["id"] == first["id"]
    assert widened["state"] == "ACTIVE"
    assert sorted(widened["scopes"]) == ["customers:read", "customers:write", "invoices:read"]
    row = await _installation_row(platform, first["id"])
    assert sorted(json.loads(row["scopes"])) == sorted(widened["scopes"])
    assert [e["type"] for e in await _events(platform)] == ["app.installed", "app.scopes_updated"]
    async with platform.store.transaction() as tx:
        assert await tx.fetchval("SELECT COUNT(*) FROM installations") == 1


async def test_install_within_held_scopes_changes_nothing(
    client: Any, admin_headers: dict[str, str], platform: Platform, world: dict[str, str]
) -> None:
    await _install(client, admin_headers, world, ["invoices:read", "customers:read"])

    response = await _install(client, admin_headers, world, ["customers:read"])

    assert response.status_code in (200, 201)
    assert sorted((await response.get_json())["scopes"]) == ["customers:read", "invoices:read"]
    assert [e["type"] for e in await _events(platform)] == ["app.installed"]


async def test_uninstall_emits_app_uninstalled_and_a_second_delete_is_404(
    client: Any, admin_headers: dict[str, str], platform: Platform, world: dict[str, str]
) -> None:
    installed = await (await _install(client, admin_headers, world, ["invoices:read"])).get_json()
    path = f"/admin/installations/{installed['id']}"

    response = await client.delete(path, headers=admin_headers)

    assert response.status_code == 204
    assert await response.get_data() == b""
    assert (await _installation_row(platform, installed["id"]))["state"] != "ACTIVE"
    events = await _events(platform)
    assert [e["type"] for e in events] == ["app.installed", "app.uninstalled"]
    assert events[1]["data"]["installationId"] == installed["id"]
    assert (events[1]["business_id"], events[1]["app_id"]) == (world["business"], world["app"])
    await _assert_envelope(await client.delete(path, headers=admin_headers), 404, "Not Found")
    assert len(await _events(platform)) == 2


async def test_reinstall_after_uninstall_is_active_again(
    client: Any, admin_headers: dict[str, str], platform: Platform, world: dict[str, str]
) -> None:
    installed = await (await _install(client, admin_headers, world, ["invoices:read"])).get_json()
    await client.delete(f"/admin/installations/{installed['id']}", headers=admin_headers)

    response = await _install(client, admin_headers, world, ["customers:read"])

    assert response.status_code == 201
    body = await response.get_json()
    assert body["state"] == "ACTIVE"
    assert body["scopes"] == ["customers:read"]
    assert [e["type"] for e in await _events(platform)] == [
        "app.installed",
        "app.uninstalled",
        "app.installed",
    ]


async def test_uninstall_of_unknown_installation_is_404(
    client: Any, admin_headers: dict[str, str]
) -> None:
    response = await client.delete(f"/admin/installations/{UNKNOWN_ID}", headers=admin_headers)

    await _assert_envelope(response, 404, "Not Found")


async def test_revoke_business_app_access(
    client: Any, admin_headers: dict[str, str], platform: Platform, world: dict[str, str]
) -> None:
    installed = await (await _install(client, admin_headers, world, ["invoices:read"])).get_json()
    path = f"/admin/businesses/{world['business']}/apps/{world['app']}/access"

    response = await client.delete(path, headers=admin_headers)

    assert response.status_code == 204
    assert (await _installation_row(platform, installed["id"]))["state"] != "ACTIVE"
    events = await _events(platform)
    assert [e["type"] for e in events] == ["app.installed", "app.uninstalled"]
    assert events[1]["data"]["installationId"] == installed["id"]
    await _assert_envelope(await client.delete(path, headers=admin_headers), 404, "Not Found")


@pytest.mark.parametrize("unknown", ["none", "business", "app"])
async def test_revoke_access_without_installation_is_404(
    client: Any, admin_headers: dict[str, str], world: dict[str, str], unknown: str
) -> None:
    business_id = UNKNOWN_ID if unknown == "business" else world["business"]
    app_id = UNKNOWN_ID if unknown == "app" else world["app"]

    response = await client.delete(
        f"/admin/businesses/{business_id}/apps/{app_id}/access", headers=admin_headers
    )

    await _assert_envelope(response, 404, "Not Found")


@pytest.mark.parametrize(
    "scopes", [["invoices:delete"], ["invoices:read", "nope:read"], []], ids=str
)
async def test_install_with_unknown_or_no_scopes_is_400(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    world: dict[str, str],
    scopes: list[str],
) -> None:
    response = await _install(client, admin_headers, world, scopes)

    await _assert_validation_failure(response)
    assert await _events(platform) == []


@pytest.mark.parametrize(
    "scopes", [["payments:read"], ["invoices:read", "invoices:write"]], ids=str
)
async def test_install_with_scopes_the_app_did_not_register_is_400(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    world: dict[str, str],
    scopes: list[str],
) -> None:
    response = await _install(client, admin_headers, world, scopes)

    await _assert_envelope(response, 400, "Bad Request")
    assert await _events(platform) == []


@pytest.mark.parametrize(("business", "answer"), [("business", 400), ("sandbox", 201)])
async def test_unreviewed_app_installs_only_into_sandbox_businesses(
    client: Any,
    admin_headers: dict[str, str],
    world: dict[str, str],
    business: str,
    answer: int,
) -> None:
    unreviewed = await _app(client, admin_headers, world["user"], reviewed=False)

    response = await _install(
        client,
        admin_headers,
        world,
        ["invoices:read"],
        appId=unreviewed,
        businessId=world[business],
    )

    assert response.status_code == answer
    if answer == 400:
        await _assert_envelope(response, 400, "Bad Request")


@pytest.mark.parametrize("membership", ["inactive", "none"])
async def test_install_by_a_user_who_is_not_an_active_member_is_409(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    world: dict[str, str],
    membership: str,
) -> None:
    outsider = await _seed_user(platform, "outsider@example.com")
    if membership == "inactive":
        answer = await _member(
            client, admin_headers, world["business"], outsider, "admin", active=False
        )
        assert answer.status_code == 200

    response = await _install(client, admin_headers, world, ["invoices:read"], userId=outsider)

    await _assert_envelope(response, 409, "Conflict")
    assert await _events(platform) == []


@pytest.mark.parametrize("unknown", ["appId", "businessId", "userId"])
async def test_install_naming_an_unknown_record_is_404(
    client: Any, admin_headers: dict[str, str], world: dict[str, str], unknown: str
) -> None:
    response = await _install(
        client, admin_headers, world, ["invoices:read"], **{unknown: UNKNOWN_IDS[unknown]}
    )

    await _assert_envelope(response, 404, "Not Found")


# --- Developer tokens ----------------------------------------------------------------------------


async def test_developer_token_is_shown_once_and_stored_as_a_hash(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    user_id = await _seed_user(platform)

    response = await client.post(
        "/admin/developer-tokens", json={"userId": user_id}, headers=admin_headers
    )

    assert response.status_code == 201
    body = await response.get_json()
    assert list(body) == ["token"]
    token = body["token"]
    assert isinstance(token, str)
    assert len(token) >= 32
    async with platform.store.transaction() as tx:
        rows = await tx.fetch("SELECT * FROM developer_tokens")
    assert len(rows) == 1
    assert rows[0]["user_id"] == user_id
    assert all(token not in str(value) for value in rows[0].values())
    assert rows[0]["token_hash"] == platform.keyring.hash_token(token)


async def test_developer_tokens_differ(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    user_id = await _seed_user(platform)

    first = await _create(client, admin_headers, "/admin/developer-tokens", {"userId": user_id})
    second = await _create(client, admin_headers, "/admin/developer-tokens", {"userId": user_id})

    assert first["token"] != second["token"]


async def test_developer_token_for_unknown_user_is_404(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    response = await client.post(
        "/admin/developer-tokens", json={"userId": UNKNOWN_IDS["userId"]}, headers=admin_headers
    )

    await _assert_envelope(response, 404, "Not Found")
    async with platform.store.transaction() as tx:
        assert await tx.fetchval("SELECT COUNT(*) FROM developer_tokens") == 0


# --- Malformed bodies ----------------------------------------------------------------------------

_APP_BODY = {
    "name": "A",
    "type": "PUBLIC",
    "redirectUris": ["https://a.example/cb"],
    "scopes": ["invoices:read"],
    "developerUserId": UNKNOWN_IDS["userId"],
}
_INSTALL_BODY = {
    **UNKNOWN_IDS,
    "scopes": ["invoices:read"],
}
_MEMBER_PATH = f"/admin/businesses/{UNKNOWN_ID}/members/{UNKNOWN_ID}"
_ROLE_PATH = f"/admin/businesses/{UNKNOWN_ID}/roles/viewer"
_STATUS_PATH = f"/admin/apps/{UNKNOWN_ID}/status"


def _without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


MALFORMED_BODIES = {
    "business-no-name": ("POST", "/admin/businesses", {}),
    "business-name-number": ("POST", "/admin/businesses", {"name": 5}),
    "business-name-empty": ("POST", "/admin/businesses", {"name": ""}),
    "business-sandbox-string": ("POST", "/admin/businesses", {"name": "A", "sandbox": "yes"}),
    "business-plan-unknown": ("POST", "/admin/businesses", {"name": "A", "plan": "gold"}),
    "business-limit-string": ("POST", "/admin/businesses", {"name": "A", "invoiceLimit": "10"}),
    "business-limit-float": ("POST", "/admin/businesses", {"name": "A", "invoiceLimit": 1.5}),
    "business-limit-bool": ("POST", "/admin/businesses", {"name": "A", "invoiceLimit": True}),
    "business-limit-negative": ("POST", "/admin/businesses", {"name": "A", "invoiceLimit": -1}),
    "user-no-email": ("POST", "/admin/users", {"password": "long enough"}),
    "user-no-password": ("POST", "/admin/users", {"email": "a@example.com"}),
    "user-email-number": ("POST", "/admin/users", {"email": 5, "password": "long enough"}),
    "user-password-number": ("POST", "/admin/users", {"email": "a@x.com", "password": 12345678}),
    "user-email-malformed": ("POST", "/admin/users", {"email": "nope", "password": "long enough"}),
    "member-no-role": ("PUT", _MEMBER_PATH, {}),
    "member-role-unknown": ("PUT", _MEMBER_PATH, {"role": "superuser"}),
    "member-role-number": ("PUT", _MEMBER_PATH, {"role": 1}),
    "member-active-string": ("PUT", _MEMBER_PATH, {"role": "owner", "active": "yes"}),
    "role-no-permissions": ("PUT", _ROLE_PATH, {}),
    "role-permissions-string": ("PUT", _ROLE_PATH, {"permissions": "invoices:read"}),
    "role-permissions-numbers": ("PUT", _ROLE_PATH, {"permissions": [1]}),
    **{
        f"app-no-{key}": ("POST", "/admin/apps", _without(_APP_BODY, key))
        for key in ("name", "type", "redirectUris", "scopes", "developerUserId")
    },
    "app-type-unknown": ("POST", "/admin/apps", {**_APP_BODY, "type": "SECRET"}),
    "app-uris-string": ("POST", "/admin/apps", {**_APP_BODY, "redirectUris": "https://a/cb"}),
    "app-scopes-string": ("POST", "/admin/apps", {**_APP_BODY, "scopes": "invoices:read"}),
    "app-reviewed-string": ("POST", "/admin/apps", {**_APP_BODY, "reviewed": "yes"}),
    "app-developer-number": ("POST", "/admin/apps", {**_APP_BODY, "developerUserId": 7}),
    "status-missing": ("POST", _STATUS_PATH, {}),
    "status-unknown": ("POST", _STATUS_PATH, {"status": "PAUSED"}),
    "status-lower-case": ("POST", _STATUS_PATH, {"status": "active"}),
    **{
        f"install-no-{key}": ("POST", "/admin/installations", _without(_INSTALL_BODY, key))
        for key in _INSTALL_BODY
    },
    "install-scopes-string": (
        "POST",
        "/admin/installations",
        {**_INSTALL_BODY, "scopes": "invoices:read"},
    ),
    "install-app-number": ("POST", "/admin/installations", {**_INSTALL_BODY, "appId": 5}),
    "developer-token-no-user": ("POST", "/admin/developer-tokens", {}),
    "developer-token-user-number": ("POST", "/admin/developer-tokens", {"userId": 5}),
}


@before_storage
@pytest.mark.parametrize(
    ("method", "path", "body"), list(MALFORMED_BODIES.values()), ids=list(MALFORMED_BODIES)
)
async def test_missing_or_wrong_typed_fields_are_validation_failures(
    client: Any, admin_headers: dict[str, str], method: str, path: str, body: dict[str, Any]
) -> None:
    response = await client.open(path, method=method, json=body, headers=admin_headers)

    await _assert_validation_failure(response)


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_json_body_sent_as_another_type_says_to_send_json(
    client: Any, admin_headers: dict[str, str], content_type: str | None
) -> None:
    headers = dict(admin_headers)
    if content_type is not None:
        headers["Content-Type"] = content_type

    response = await client.post("/admin/businesses", data='{"name": "Acme"}', headers=headers)

    body = await response.get_json()
    assert response.status_code == 400
    assert body["message"] == [
        "request body must be JSON: send it with Content-Type: application/json"
    ]
