"""UI extensions in the developer console: every extension target with and without its scope,
paths that name a page on the App URL's origin and every way one may try not to, and the
declare, replace, list and delete cycle (contract.md: App platform surfaces; spec's codes
EXTENSION_PATH_INVALID and EXTENSION_SCOPE_REQUIRED)."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
import trio

from ledgerport import catalog

from .webhook_world import Console

TIMEOUT = 30
APP_URL = "https://app.example.com/base/"


async def _console(
    client: Any,
    admin_headers: dict[str, str],
    scopes: list[str],
    app_url: str | None = APP_URL,
) -> Console:
    """The console of a new app with ``scopes`` and ``app_url``, as its developer."""

    async def created(path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await client.post(path, json=body, headers=admin_headers)
        assert response.status_code == 201, await response.get_data(as_text=True)
        answer: dict[str, Any] = await response.get_json()
        return answer

    user = await created(
        "/admin/users",
        {"email": f"{secrets.token_hex(4)}@example.com", "password": "correct horse battery"},
    )
    app = await created(
        "/admin/apps",
        {
            "name": "Extender",
            "type": "CONFIDENTIAL",
            "redirectUris": ["https://app.example.com/cb"],
            "scopes": scopes,
            "developerUserId": user["id"],
            "reviewed": True,
            **({"appUrl": app_url} if app_url else {}),
        },
    )
    token = await created("/admin/developer-tokens", {"userId": user["id"]})
    return Console(client, token["token"], app["id"])


async def _put(console: Console, target: str, path: str, status: int) -> dict[str, Any]:
    response = await console.call("PUT", f"/extensions/{target}", {"path": path})
    assert response.status_code == status, await response.get_data(as_text=True)
    answer: dict[str, Any] = await response.get_json()
    return answer


GOOD_PATHS = {
    "/extensions/invoice": "https://app.example.com/extensions/invoice",
    "/ext?record=inv_1&x=%20": "https://app.example.com/ext?record=inv_1&x=%20",
    "/a/b.c/..d/...": "https://app.example.com/a/b.c/..d/...",
    "/%7Euser/page": "https://app.example.com/%7Euser/page",
    "/": "https://app.example.com/",
}

BAD_PATHS = {
    "backslash": "/ext\\page",
    "backslash to another host": "/\\evil.example/x",
    "space": "/ext page",
    "tab": "/ext\tpage",
    "newline": "/ext\npage",
    "control character": "/ext\x01",
    "delete character": "/ext\x7f",
    "another host": "//evil.example/x",
    "relative": "ext/page",
    "absolute URL": "https://evil.example/x",
    "same origin as a URL": "https://app.example.com/x",
    "scheme only": "javascript:alert(1)",
    "dot dot": "/../x",
    "dot dot inside": "/a/../b",
    "dot dot at the end": "/a/..",
    "dot": "/./x",
    "dot at the end": "/a/.",
    "dot dot before a query": "/a/..?x=1",
    "encoded dot dot": "/%2e%2e/x",
    "encoded dot dot, upper case": "/%2E%2E/x",
    "half-encoded dot dot": "/.%2e/x",
    "double-encoded dot dot": "/%252e%252e/x",
    "encoded slashes to another host": "/%2f%2fevil.example",
    "encoded backslash": "/%5cevil.example",
    "double-encoded backslash": "/%255c",
    "encoded space": "/ext%20page",
    "encoded newline": "/ext%0apage",
    "encoded null": "/ext%00",
    "fragment": "/ext#top",
    "encoded many times over": "/%25252525252e",
}


@pytest.mark.parametrize("path", sorted(GOOD_PATHS))
async def test_a_path_on_the_app_urls_origin_is_a_page_there(
    client: Any, admin_headers: dict[str, str], path: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers, ["invoices:read"])
        extension = await _put(console, "invoice.details", path, 200)
    assert extension["url"] == GOOD_PATHS[path]
    assert extension["path"] == path


@pytest.mark.parametrize("case", sorted(BAD_PATHS))
async def test_a_path_that_is_not_a_page_on_the_origin_is_extension_path_invalid(
    client: Any, admin_headers: dict[str, str], case: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers, ["invoices:read"])
        error = await _put(console, "invoice.details", BAD_PATHS[case], 400)
        listed = await console.ok("GET", "/extensions")
    assert error["code"] == "EXTENSION_PATH_INVALID"
    assert error["message"].startswith("Extension path invalid: ")
    assert listed["data"] == []


@pytest.mark.parametrize("target", sorted(catalog.EXTENSION_TARGETS))
async def test_a_record_target_needs_its_read_scope(
    client: Any, admin_headers: dict[str, str], target: str
) -> None:
    needed = catalog.EXTENSION_TARGETS[target].scope
    with trio.fail_after(TIMEOUT):
        without = await _console(client, admin_headers, ["profile:read"])
        response = await without.call("PUT", f"/extensions/{target}", {"path": "/x"})
        status, body = response.status_code, await response.get_json()
        if needed is not None:
            with_scope = await _console(client, admin_headers, [needed])
            granted = await _put(with_scope, target, "/x", 200)
            assert granted["target"] == target
    if needed is None:
        assert status == 200  # the dashboard card needs no scope
    else:
        assert status == 400
        assert body["code"] == "EXTENSION_SCOPE_REQUIRED"
        assert body["message"] == (
            f"Extension {target} needs the scope {needed}, which the app does not register"
        )


async def test_an_app_without_an_app_url_declares_no_extension(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers, ["invoices:read"], app_url=None)
        error = await _put(console, "dashboard.card", "/card", 400)
    assert error["code"] == "EXTENSION_PATH_INVALID"
    assert "no App URL" in error["message"]


async def test_an_unknown_target_is_a_validation_error(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers, ["invoices:read"])
        error = await _put(console, "invoice.sidebar", "/x", 400)
    assert "code" not in error
    assert error["message"][0].startswith("target must be one of the extension targets:")


async def test_declare_replace_list_and_delete(client: Any, admin_headers: dict[str, str]) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers, ["invoices:read", "customers:read"])
        card = await _put(console, "dashboard.card", "/card", 200)
        first = await _put(console, "invoice.details", "/invoice", 200)
        replaced = await console.ok(
            "PUT", "/extensions/invoice.details", {"path": "/invoice/v2", "label": "  Review  "}
        )
        await _put(console, "customer.details", "/customer", 200)
        listed = await console.ok("GET", "/extensions")
        await console.ok("DELETE", "/extensions/customer.details", status=204)
        gone = await console.call("DELETE", "/extensions/customer.details")
        after = await console.ok("GET", "/extensions")
    assert card["label"] == "Extender"  # the app's name when none is given
    assert replaced["label"] == "Review"
    assert replaced["url"] == "https://app.example.com/invoice/v2"
    assert replaced["createdAt"] == first["createdAt"]
    assert [e["target"] for e in listed["data"]] == [
        "invoice.details",
        "customer.details",
        "dashboard.card",
    ]
    assert gone.status_code == 404
    assert (await gone.get_json())["code"] == "EXTENSION_NOT_FOUND"
    assert [e["target"] for e in after["data"]] == ["invoice.details", "dashboard.card"]


async def test_only_the_apps_developer_touches_its_extensions(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        mine = await _console(client, admin_headers, ["invoices:read"])
        await _put(mine, "invoice.details", "/x", 200)
        other = await _console(client, admin_headers, ["invoices:read"])
        stranger = Console(client, other.token, mine.app_id)
        answers = [
            await stranger.call("GET", "/extensions"),
            await stranger.call("PUT", "/extensions/invoice.details", {"path": "/evil"}),
            await stranger.call("DELETE", "/extensions/invoice.details"),
        ]
        still = await mine.ok("GET", "/extensions")
    assert [answer.status_code for answer in answers] == [404, 404, 404]
    assert still["data"][0]["path"] == "/x"
