"""The console's webhook routes (contract.md: Developer console API): create with the secret
shown once, list, edit, delete, the URL and event rules, only the app's developer."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from ledgerport import catalog
from ledgerport.platform import Platform
from ledgerport.storage import Store

from .data_api import owner_api
from .webhook_world import Console, console_for

TIMEOUT = 30
URL = "http://127.0.0.1:9/hook"


async def _console(client: Any, admin_headers: dict[str, str]) -> Console:
    api = await owner_api(client, admin_headers)
    return await console_for(client, admin_headers, api)


FRESH = {
    "signature": "stripe",
    "kind": "push",
    "rateLimit": None,
    "ordering": "none",
    "headers": {},
    "disabledReason": None,
    "health": {
        "deliveredLast24h": 0,
        "failedLast24h": 0,
        "consecutiveFailures": 0,
        "lastDeliveryAt": None,
        "lastError": None,
    },
    "publicKey": None,
}
"""The fields of contract.md's third round, as a new endpoint answers them by default."""


async def test_create_list_edit_delete(client: Any, admin_headers: dict[str, str]) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, ["invoice.created", "invoice.paid"])
        listed = await console.ok("GET", "/webhooks")
        changed = await console.ok(
            "PATCH",
            f"/webhooks/{created['id']}",
            {"events": ["payment.received"], "enabled": False},
        )
        after_change = await console.ok("GET", "/webhooks")
        await console.ok("DELETE", f"/webhooks/{created['id']}", status=204)
        after_delete = await console.ok("GET", "/webhooks")
        again = await console.call("PATCH", f"/webhooks/{created['id']}", {"enabled": True})
    assert created["secret"].startswith(catalog.WEBHOOK_SECRET_PREFIX)
    assert set(created) == {"id", "url", "events", "enabled", "secret", *FRESH}
    assert listed == {
        "data": [
            {
                "id": created["id"],
                "url": URL,
                "events": ["invoice.created", "invoice.paid"],
                "enabled": True,
                **FRESH,
            }
        ],
        "next": None,
    }
    assert changed == {
        "id": created["id"],
        "url": URL,
        "events": ["payment.received"],
        "enabled": False,
        **FRESH,
    }
    assert after_change["data"] == [changed]
    assert after_delete == {"data": [], "next": None}
    assert again.status_code == 404
    assert (await again.get_json())["code"] == "WEBHOOK_NOT_FOUND"


async def test_the_secret_is_stored_encrypted(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [])
        rotated = await console.ok("POST", f"/webhooks/{created['id']}/rotate-secret")
        async with store.transaction() as tx:
            row = await tx.fetchrow("SELECT * FROM webhooks WHERE id = $1", created["id"])
    assert row is not None
    stored = " ".join(str(value) for value in row.values())
    assert created["secret"] not in stored
    assert rotated["secret"] not in stored
    assert "whsec_" not in stored


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"url": "ftp://example.com/x", "events": []}, "url"),
        ({"url": "http://hooks.example.com/x", "events": []}, "https"),
        ({"url": URL, "events": ["no.such_event"]}, "events"),
        ({"url": URL, "events": ["invoice.created", "invoice.created"]}, "repeat"),
        ({"url": URL}, "events"),
        ({"url": URL, "events": [], "secret": "whsec_mine"}, "secret"),
        ({"url": URL, "events": [], "enabled": "yes"}, "enabled"),
    ],
)
async def test_bad_webhooks_are_refused(
    client: Any, admin_headers: dict[str, str], body: dict[str, Any], fragment: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        response = await console.call("POST", "/webhooks", body)
        answer = await response.get_json()
        listed = await console.ok("GET", "/webhooks")
    assert response.status_code == 400
    assert fragment in str(answer)
    assert listed["data"] == []


async def test_an_event_needs_its_scope_among_the_apps_registered_scopes(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    """The fan-out never delivers a business or privacy event to an app without its gating
    scope, so subscribing to one is refused (at creation and on a change of events); app events
    need none."""
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        async with store.transaction() as tx:
            await tx.execute(
                "UPDATE apps SET scopes = $1 WHERE id = $2", '["invoices:read"]', console.app_id
            )
        refused = await console.call(
            "POST", "/webhooks", {"url": URL, "events": ["app.installed", "customer.redact"]}
        )
        created = await console.webhook(URL, ["invoice.created", "app.uninstalled"])
        changed = await console.call(
            "PATCH", f"/webhooks/{created['id']}", {"events": ["payment.received"]}
        )
        moved = await console.call("PATCH", f"/webhooks/{created['id']}", {"url": f"{URL}/2"})
        listed = await console.ok("GET", "/webhooks")
    assert refused.status_code == 400
    assert (await refused.get_json())["message"] == [
        "events.1 'customer.redact' needs the scope customers:read, which the app does not register"
    ]
    assert changed.status_code == 400
    assert (await changed.get_json())["message"] == [
        "events.0 'payment.received' needs the scope payments:read, which the app does not register"
    ]
    assert moved.status_code == 200  # a change that names no events checks none
    assert [(w["url"], w["events"]) for w in listed["data"]] == [
        (f"{URL}/2", ["invoice.created", "app.uninstalled"])
    ]


async def test_an_app_has_at_most_20_webhooks(client: Any, admin_headers: dict[str, str]) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        for _ in range(catalog.WEBHOOKS_PER_APP_MAX):
            await console.webhook(URL, [])
        response = await console.call("POST", "/webhooks", {"url": URL, "events": []})
    assert response.status_code == 400
    assert "at most 20 webhooks" in str(await response.get_json())


async def test_only_the_apps_developer_sees_its_webhooks(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        mine = await _console(client, admin_headers)
        theirs = await _console(client, admin_headers)
        created = await mine.webhook(URL, [])
        intruder = Console(client, theirs.token, mine.app_id)
        answers = [
            await intruder.call("GET", "/webhooks"),
            await intruder.call("POST", "/webhooks", {"url": URL, "events": []}),
            await intruder.call("PATCH", f"/webhooks/{created['id']}", {"enabled": False}),
            await intruder.call("DELETE", f"/webhooks/{created['id']}"),
            await intruder.call("POST", f"/webhooks/{created['id']}/test"),
            await intruder.call("POST", f"/webhooks/{created['id']}/rotate-secret"),
            await intruder.call("GET", f"/webhooks/{created['id']}/deliveries"),
        ]
        # Another app's webhook through one's own app is not found either.
        crossed = await theirs.call("DELETE", f"/webhooks/{created['id']}")
        anonymous = await client.app.test_client().get(f"/developer/apps/{mine.app_id}/webhooks")
    assert [a.status_code for a in answers] == [404] * len(answers)
    assert crossed.status_code == 404
    assert anonymous.status_code == 401


async def test_production_refuses_private_targets(platform: Platform, store: Store) -> None:
    """In production, https only, and no private, loopback or link-local target (the host
    names are resolved: a name of this machine is refused too)."""
    from dataclasses import replace

    from ledgerport.http import create_app

    from ..conftest import ADMIN_TOKEN

    production = replace(platform, config=replace(platform.config, env="production"))
    client = create_app(production).test_client()
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, headers)
        console = await console_for(client, headers, api)
        answers = {
            url: await console.call("POST", "/webhooks", {"url": url, "events": []})
            for url in (
                "https://127.0.0.1/hook",
                "https://10.0.0.7/hook",
                "https://169.254.169.254/latest",
                "https://[::1]/hook",
                "https://localhost/hook",
                "http://127.0.0.1:8080/hook",
            )
        }
    assert {url: a.status_code for url, a in answers.items()} == dict.fromkeys(answers, 400)


async def test_production_on_a_loopback_service_delivers_to_this_machine_only(
    platform: Platform, store: Store
) -> None:
    """A service whose API and application hosts are loopback addresses has every client on
    this machine: its webhooks may reach the machine's loopback addresses (http included), and
    nothing else of the network it sits on."""
    from dataclasses import replace

    from ledgerport.http import create_app

    from ..conftest import ADMIN_TOKEN

    local = replace(
        platform.config,
        env="production",
        base_url="http://127.0.0.1:8080",
        auth_url="http://127.0.0.1:8080",
    )
    client = create_app(replace(platform, config=local)).test_client()
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    urls = {
        "http://127.0.0.1:9001/hook": 201,
        "http://localhost:9001/hook": 201,
        "https://[::1]/hook": 201,
        "https://10.0.0.7/hook": 400,
        "https://169.254.169.254/latest": 400,
        "http://10.0.0.7/hook": 400,
        "http://hooks.example.com/hook": 400,
    }
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, headers)
        console = await console_for(client, headers, api)
        answers = {
            url: await console.call("POST", "/webhooks", {"url": url, "events": []}) for url in urls
        }
    assert {url: a.status_code for url, a in answers.items()} == urls


async def test_production_judges_the_ipv4_address_an_ipv6_target_carries(
    platform: Platform, store: Store
) -> None:
    """6to4, Teredo and NAT64 spellings of loopback, private and link-local addresses are
    refused as the addresses themselves are; the same spellings of a public address are saved."""
    from dataclasses import replace

    from ledgerport.http import create_app

    from ..conftest import ADMIN_TOKEN

    production = replace(platform, config=replace(platform.config, env="production"))
    client = create_app(production).test_client()
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    refused = [
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b:1::5db8:d822",  # the local-use NAT64 prefix, refused whole
    ]
    saved = [
        "2002:5db8:d822::1",  # 6to4 of 93.184.216.34
        "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34
    ]
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, headers)
        console = await console_for(client, headers, api)
        answers = {
            address: await console.call(
                "POST", "/webhooks", {"url": f"https://[{address}]/hook", "events": []}
            )
            for address in refused + saved
        }
        listed = await console.ok("GET", "/webhooks")
    assert {a: r.status_code for a, r in answers.items()} == {
        **dict.fromkeys(refused, 400),
        **dict.fromkeys(saved, 201),
    }
    for address in refused:
        body = await answers[address].get_json()
        assert any("private, loopback" in message for message in body["message"]), body
    assert sorted(w["url"] for w in listed["data"]) == sorted(
        f"https://[{address}]/hook" for address in saved
    )
