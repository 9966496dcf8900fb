"""The notice a page shows (what the last form did, or why not) comes only from the service: a
signed cookie scoped to the page, shown once. A crafted link's ``?notice=`` shows nothing, nor
does a cookie that was tampered with, meant for another page, or is older than NOTICE_TTL (the
clock moves, nothing sleeps).
"""

from __future__ import annotations

import base64
import html
import json
import re
from typing import Any

import pytest
import trio

from ledgerport import catalog

from .data_api import Api, owner_api
from .oauth_helpers import login
from .test_listings import body
from .test_marketplace import go_live
from .webhook_world import console_for

TIMEOUT = 30
LISTING = "/marketplace/books-sync"
SAVED = "Thank you: your rating is saved"
_PROBLEM = "problem:"
FORGED = "Your account is locked: call +1 555 0100 with your password"


def _notice(page: str) -> str | None:
    found = re.search(r'<p class="notice notice-\w+" role="(?:status|alert)">(.*?)</p>', page, re.S)
    return html.unescape(found[1]) if found else None


def _set_cookie(response: Any, name: str) -> tuple[str, dict[str, str]]:
    """The value and the attributes (lowercased names) of the cookie ``name`` the answer sets."""
    for header in response.headers.getlist("Set-Cookie"):
        pair, *attributes = (part.strip() for part in header.split(";"))
        key, _, value = pair.partition("=")
        if key == name:
            parsed = dict(attribute.partition("=")[::2] for attribute in attributes)
            return value, {k.lower(): v for k, v in parsed.items()}
    raise AssertionError(f"no {name} cookie in {response.headers.getlist('Set-Cookie')}")


async def _page(client: Any, path: str, cookie: str | None = None) -> tuple[Any, str]:
    headers = {"Cookie": f"lp_notice={cookie}"} if cookie is not None else {}
    response = await client.get(path, headers=headers)
    text = await response.get_data(as_text=True)
    assert response.status_code == 200, text
    return response, text


async def _rated(client: Any, admin_headers: dict[str, str]) -> tuple[Api, Any]:
    """A live listing whose app is installed in its developer's business; the developer signs
    in and rates it. Answers the developer and the rating's answer (303 with a notice)."""
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    await go_live(client, admin_headers, console, body("books-sync"))
    await login(client, api.world)
    _, page = await _page(client, LISTING)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert csrf, page
    response = await client.post(
        f"{LISTING}/rating", form={"csrf_token": csrf[1], "stars": "4", "review": "Good"}
    )
    assert response.status_code == 303
    return api, response


async def test_a_notice_shows_once_and_not_on_reload(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        _, rated = await _rated(client, admin_headers)
        shown, first = await _page(client, rated.headers["Location"])
        _, reloaded = await _page(client, LISTING)
    assert rated.headers["Location"] == LISTING
    value, attributes = _set_cookie(rated, "lp_notice")
    assert value
    assert attributes["path"] == LISTING
    assert attributes["max-age"] == str(catalog.NOTICE_TTL)
    assert "httponly" in attributes
    assert attributes["samesite"] == "Lax"
    assert _notice(first) == SAVED
    cleared, cleared_attributes = _set_cookie(shown, "lp_notice")
    assert cleared == ""
    assert cleared_attributes["path"] == LISTING
    assert cleared_attributes["max-age"] == "0"
    assert _notice(reloaded) is None


async def test_a_notice_in_the_query_string_shows_nothing(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        api, _ = await _rated(client, admin_headers)
        await _page(client, LISTING)  # the rating's own notice, shown and cleared
        pages = [
            (await _page(client, f"{path}?{query}"))[1]
            for path in (LISTING, f"/console/apps/{api.world.app_id}/webhooks")
            for query in (f"notice={FORGED}", f"notice={SAVED}")
        ]
    for page in pages:
        assert _notice(page) is None
        assert "call +1 555" not in page


def _tampered(genuine: str, case: str) -> str:
    payload, _, signature = genuine.rpartition(".")
    path, expires, code, _ = json.loads(base64.urlsafe_b64decode(payload))
    if case == "other-words":
        forged = json.dumps([path, expires, code, [FORGED]]).encode()
        return f"{base64.urlsafe_b64encode(forged).decode()}.{signature}"
    if case == "other-code":
        forged = json.dumps([path, expires, f"{_PROBLEM}ledgerport.errors.DomainError", [FORGED]])
        return f"{base64.urlsafe_b64encode(forged.encode()).decode()}.{signature}"
    if case == "other-signature":
        return f"{payload}.{'0' * len(signature)}"
    if case == "unsigned":
        return payload
    if case == "not-base64":
        return f"!!!.{signature}"
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case", ["other-words", "other-code", "other-signature", "unsigned", "not-base64"]
)
async def test_a_tampered_notice_shows_nothing(client, admin_headers, case: str) -> None:
    with trio.fail_after(TIMEOUT):
        _, rated = await _rated(client, admin_headers)
        genuine, _ = _set_cookie(rated, "lp_notice")
        browser = client.app.test_client()
        _, genuine_page = await _page(browser, LISTING, genuine)
        _, tampered_page = await _page(browser, LISTING, _tampered(genuine, case))
    assert _notice(genuine_page) == SAVED
    assert _notice(tampered_page) is None
    assert "call +1 555" not in tampered_page


async def test_a_notice_for_another_page_shows_nothing(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        _, rated = await _rated(client, admin_headers)
        genuine, _ = _set_cookie(rated, "lp_notice")
        _, elsewhere = await _page(client.app.test_client(), "/marketplace", genuine)
    assert _notice(elsewhere) is None


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(catalog.NOTICE_TTL - 1, SAVED), (catalog.NOTICE_TTL, None)],
    ids=["just-in-time", "too-late"],
)
async def test_a_notice_lives_notice_ttl_seconds(
    client, admin_headers, clock, seconds: int, shown: str | None
) -> None:
    with trio.fail_after(TIMEOUT):
        _, rated = await _rated(client, admin_headers)
        genuine, _ = _set_cookie(rated, "lp_notice")
        clock.advance(seconds)
        _, page = await _page(client.app.test_client(), LISTING, genuine)
    assert _notice(page) == shown


async def test_the_document_offers_no_notice_parameter(client) -> None:
    document = await (await client.get("/openapi.json")).get_json()
    parameters = [
        parameter["name"]
        for path_item in document["paths"].values()
        for operation in path_item.values()
        if isinstance(operation, dict)
        for parameter in operation.get("parameters", ())
    ]
    assert "notice" not in parameters
