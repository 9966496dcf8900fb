"""The console's pages for an app's secrets and a function's allowed hosts, on both stores: a
secret is saved, replaced and deleted from its page, its value never shown again (not on the
page, not in the form sent back when refused, not in a notice or the log); a function's hosts
are written and edited in its form, a refused one coming back as it was sent; a form with a
stale token does nothing; another developer's app is not found."""

from __future__ import annotations

import html
import logging
import re
from typing import Any

import pytest
import trio

from ledgerport.platform import Platform

from .test_console_manage import (
    HANDLER,
    Developer,
    alert,
    beside,
    csrf,
    developer,
    field_value,
    notice,
    page_of,
    post,
)

TIMEOUT = 60
VALUE = "sk_live_51HpageValueNeverShown"


def names(page: str) -> list[str]:
    return re.findall(r'<td data-label="Name"><code>([^<]+)</code></td>', page)


async def save(client: Any, dev: Developer, name: str, value: str) -> tuple[Any, str]:
    page = await page_of(client, f"{dev.base}/secrets")
    return await post(
        client, f"{dev.base}/secrets", {"csrf_token": csrf(page), "name": name, "value": value}
    )


async def test_a_secret_is_saved_replaced_and_deleted_from_its_page_never_shown(
    client: Any, admin_headers: dict[str, str], platform: Platform, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        empty = await page_of(client, f"{dev.base}/secrets")
        saved, _ = await save(client, dev, "STRIPE_KEY", VALUE)
        listed = await page_of(client, saved.headers["Location"])
        replaced, _ = await save(client, dev, "STRIPE_KEY", VALUE + "2")
        after_replace = await page_of(client, replaced.headers["Location"])
        api = await dev.console.ok("GET", "/secrets")
        deleted, _ = await post(
            client,
            f"{dev.base}/secrets/STRIPE_KEY/delete",
            {"csrf_token": csrf(after_replace)},
        )
        gone = await page_of(client, deleted.headers["Location"])
        overview = await page_of(client, dev.base)
    assert names(empty) == []
    assert "No secret yet." in empty
    assert saved.status_code == 303
    assert (
        notice(listed) == "Secret STRIPE_KEY saved: runs that start from now on send its new value"
    )
    assert names(listed) == ["STRIPE_KEY"]
    assert [s["name"] for s in api["data"]] == ["STRIPE_KEY"]
    assert notice(gone) == "Secret STRIPE_KEY deleted: runs that start from now on lack it"
    assert names(gone) == []
    assert f'href="/console/apps/{dev.world.app_id}/secrets"' in overview
    for page in (listed, after_replace, gone):
        assert VALUE not in page
    assert VALUE not in caplog.text


REFUSED = {
    "lower-case name": (
        "stripe_key",
        VALUE,
        "name must be an upper-case letter, then up to 63 upper-case letters, digits or _",
    ),
    "no name": ("", VALUE, "name must be an upper-case letter"),
    "empty value": ("STRIPE_KEY", "", "value must not be empty"),
    "value too large": ("STRIPE_KEY", VALUE * 200, "value must be at most 4096 bytes of UTF-8"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_a_refused_secret_comes_back_with_its_name_and_never_its_value(
    client: Any, admin_headers: dict[str, str], case: str
) -> None:
    name, value, words = REFUSED[case]
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        refused, page = await save(client, dev, name, value)
        api = await dev.console.ok("GET", "/secrets")
    assert refused.status_code == 400, page
    assert words in alert(page)
    assert field_value(page, "name") == name
    assert VALUE not in page
    assert 'name="value" type="password"' in page
    assert api["data"] == []


async def test_a_stale_form_saves_nothing_and_another_developers_app_is_not_found(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        theirs = await developer(client, admin_headers)
        await theirs.console.ok("PUT", "/secrets/THEIRS", {"value": VALUE})
        dev = await developer(client, admin_headers)
        stale, stale_page = await post(
            client,
            f"{dev.base}/secrets",
            {"csrf_token": "x" * 43, "name": "KEY", "value": VALUE},
        )
        missing = await client.get(f"{theirs.base}/secrets")
        page = await page_of(client, f"{dev.base}/secrets")
        delete, _ = await post(
            client, f"{theirs.base}/secrets/THEIRS/delete", {"csrf_token": csrf(page)}
        )
        still = await theirs.console.ok("GET", "/secrets")
        mine = await dev.console.ok("GET", "/secrets")
    assert stale.status_code == 400
    assert "The form expired" in alert(stale_page)
    assert mine["data"] == []
    assert missing.status_code == 404
    assert delete.status_code == 404
    assert [s["name"] for s in still["data"]] == ["THEIRS"]


def hosts_field(page: str) -> str:
    found = re.search(r'<textarea id="allowed_hosts"[^>]*>\n(.*?)</textarea>', page, re.S)
    assert found, page
    return html.unescape(found[1])


async def test_a_functions_hosts_are_written_and_edited_in_its_form(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        new = f"{dev.base}/functions/new"
        form = await page_of(client, new)
        saved, _ = await post(
            client,
            new,
            {
                "csrf_token": csrf(form),
                "name": "sync",
                "source": HANDLER,
                "events": ["invoice.created"],
                "allowed_hosts": "API.Stripe.com\r\n*.hubspot.com, 203.0.113.7\r\n",
            },
        )
        stored = await dev.console.ok("GET", "/functions/sync")
        edit = await page_of(client, f"{dev.base}/functions/sync/edit")
        shown = await page_of(client, f"{dev.base}/functions/sync")
        refused, again = await post(
            client,
            f"{dev.base}/functions/sync/edit",
            {
                "csrf_token": csrf(edit),
                "source": HANDLER,
                "events": ["invoice.created"],
                "allowed_hosts": "api.stripe.com\r\nhttps://evil.example/",
            },
        )
        unchanged = await dev.console.ok("GET", "/functions/sync")
    assert saved.status_code == 303
    assert stored["allowedHosts"] == ["api.stripe.com", "*.hubspot.com", "203.0.113.7"]
    assert hosts_field(edit) == "api.stripe.com\n*.hubspot.com\n203.0.113.7"
    assert "<code>*.hubspot.com</code>" in shown
    assert refused.status_code == 400
    said = "Hosts it may fetch from, line 2, must be a host name"
    assert said in alert(again)
    assert said in (beside(again, "allowed_hosts") or "")
    assert hosts_field(again) == "api.stripe.com\nhttps://evil.example/"
    assert unchanged == stored
