"""The console's pages manage an app's webhooks and functions, on both stores: add an endpoint
and see its signing secret once (in one answer only: never in a URL, a cookie, a later page or
the log), edit it, switch it off and on, delete it and rotate its secret after a confirmation
step; write a function, see where a refused source goes wrong, edit it, delete it and queue its
test run. A refused form comes back as it was sent with the error table's words; a form without
its token, or with a stale one, does nothing; another developer's app is not found."""

from __future__ import annotations

import html
import json
import logging
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
import trio

from ledgerport import auth, catalog
from ledgerport.clock import FrozenClock
from ledgerport.engine import verify_header
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..receiver import receiving
from .oauth_helpers import World, login, make_world
from .test_function_runs import functions_world
from .webhook_world import Console, deliver, engine_for

TIMEOUT = 60
HOOK = "http://127.0.0.1:9/hooks/books"
SCOPES = ("invoices:read", "invoices:write", "customers:read")
"""What the test app registers: no supplier, payment or other area's read scope."""
SECRET = re.compile(r"whsec_[A-Za-z0-9_-]{20,}")
HANDLER = "export function handler(event, context) {\n  return { type: event.type };\n}\n"


@dataclass
class Developer:
    """A signed-in developer of an app registering SCOPES, and the app's JSON console."""

    world: World
    console: Console

    @property
    def base(self) -> str:
        return f"/console/apps/{self.world.app_id}"


async def developer(
    client: Any, admin_headers: dict[str, str], scopes: tuple[str, ...] = SCOPES
) -> Developer:
    world = await make_world(client, admin_headers, scopes=scopes)
    issued = await client.post(
        "/admin/developer-tokens", json={"userId": world.user_id}, headers=admin_headers
    )
    assert issued.status_code == 201
    await login(client, world)
    return Developer(world, Console(client, (await issued.get_json())["token"], world.app_id))


async def page_of(client: Any, path: str, status: int = 200) -> str:
    response = await client.get(path)
    text = await response.get_data(as_text=True)
    assert response.status_code == status, (path, text)
    assert response.headers["Cache-Control"] == "no-store"
    return text


def csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, page
    return found[1]


def checked(page: str) -> list[str]:
    return re.findall(r'name="events" value="([^"]+)" checked', page)


def offered(page: str) -> list[str]:
    return re.findall(r'name="events" value="([^"]+)"', page)


def field_value(page: str, name: str) -> str:
    found = re.search(rf'name="{name}"[^>]* value="([^"]*)"', page)
    assert found, page
    return html.unescape(found[1])


def textarea(page: str) -> str:
    found = re.search(r'<textarea id="source"[^>]*>\n(.*?)</textarea>', page, re.S)
    assert found, page
    return html.unescape(found[1])


def alert(page: str) -> str:
    """The problems at the top of a refused form's page: the summary's items, a line each (or
    the one alert of a form with no summary)."""
    found = re.search(r'<div class="error-summary"[^>]*role="alert"[^>]*>(.*?)</div>', page, re.S)
    if found is None:
        found = re.search(r'role="alert"[^>]*>(.*?)</(?:p|div)>', page, re.S)
        assert found, page
        return html.unescape(re.sub(r"<[^>]+>", "", found[1])).strip()
    items = re.findall(r"<li>(.*?)</li>", found[1], re.S)
    return "\n".join(html.unescape(re.sub(r"<[^>]+>", "", item)).strip() for item in items)


def beside(page: str, input_id: str) -> str | None:
    """The words beside the field ``input_id``, marked invalid and described by them, whose
    line in the summary links to it; None when it has none."""
    found = re.search(rf'<span class="field-problem" id="{input_id}-problem">(.*?)</span>', page)
    if found is None:
        return None
    field = re.search(rf'<(?:input|textarea|fieldset)[^>]* id="{input_id}"[^>]*>', page)
    assert field is not None, page
    assert f"{input_id}-problem" in field[0], field[0]
    assert re.search(rf'<li><a href="#{input_id}">', page), page
    return html.unescape(found[1])


def source_problem(page: str) -> str:
    """The words of the problem shown beside the source at its place."""
    found = re.search(r'<div class="source-problem"[^>]*>\s*<p[^>]*>(.*?)</p>', page, re.S)
    assert found, page
    return html.unescape(re.sub(r"<[^>]+>", "", found[1])).strip()


_LABELS = {
    "url": ("url", "Endpoint URL"),
    "name": ("name", "Name"),
    "source": ("source", "Source"),
    "schedule": ("schedule", "Schedule"),
}


def labelled(words: str) -> tuple[str, str]:
    """The field a rule's sentence names and the sentence as the page says it, with the
    field's label (an event's problem names the event)."""
    numbered = re.match(r"events\.\d+ (.*)", words, re.S)
    if numbered:
        return "events", f"Events: {numbered[1]}"
    if words.startswith("Function source "):
        return "source", words
    name, _, rest = words.partition(" ")
    input_id, label = _LABELS[name.rstrip(":")]
    if name.endswith(":"):
        return input_id, f"{label}: {rest}"
    return input_id, f"{label} {rest}"


def notice(page: str) -> str | None:
    found = re.search(r'<p class="notice notice-\w+" role="(?:status|alert)">(.*?)</p>', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", "", found[1])) if found else None


async def post(client: Any, path: str, form: dict[str, Any]) -> tuple[Any, str]:
    """Post ``form``: a list is a field sent once per item, as checkboxes are."""
    fields = [
        (name, item)
        for name, value in form.items()
        for item in (value if isinstance(value, list) else [value])
    ]
    response = await client.post(
        path,
        data=urlencode(fields),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    return response, await response.get_data(as_text=True)


async def add_endpoint(
    client: Any, dev: Developer, url: str = HOOK, events: tuple[str, ...] = ("customer.created",)
) -> tuple[Any, str]:
    form_page = await page_of(client, f"{dev.base}/webhooks/new")
    response, _ = await post(
        client,
        f"{dev.base}/webhooks/new",
        {"csrf_token": csrf(form_page), "url": url, "events": list(events), "enabled": "true"},
    )
    return response, form_page


# --- Webhooks ----------------------------------------------------------------------------------


async def test_an_endpoint_is_added_from_the_page_and_its_secret_shown_once(
    client: Any,
    admin_headers: dict[str, str],
    platform: Platform,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        async with receiving() as receiver:
            form = await page_of(client, f"{dev.base}/webhooks/new")
            added, added_text = await post(
                client,
                f"{dev.base}/webhooks/new",
                {
                    "csrf_token": csrf(form),
                    "url": f"  {receiver.url}  ",
                    "events": ["customer.created", "invoice.created"],
                    "enabled": "true",
                },
            )
            assert added.status_code == 303, added_text
            shown = await page_of(client, added.headers["Location"])
            again = await page_of(client, added.headers["Location"])
            others = [
                await page_of(client, path)
                for path in (
                    f"{dev.base}/webhooks",
                    f"{dev.base}/webhooks/new",
                    f"{dev.base}",
                    "/console",
                )
            ]
            (webhook,) = (await dev.console.ok("GET", "/webhooks"))["data"]
            others.append(await page_of(client, f"{dev.base}/webhooks/{webhook['id']}/edit"))
            # The secret shown is the one that signs: a test delivery from the page verifies.
            listing = others[0]
            tested, _ = await post(
                client,
                f"{dev.base}/webhooks/{webhook['id']}/test",
                {"csrf_token": csrf(listing)},
            )
            async with engine_for(platform) as engine:
                await deliver(engine)
            (received,) = receiver.received
            after = await page_of(client, tested.headers["Location"])
    found = SECRET.search(shown)
    assert found is not None, shown
    secret = found[0]
    assert added.status_code == 303
    assert added.headers["Location"] == f"{dev.base}/webhooks/{webhook['id']}/secret"
    assert secret not in added.headers["Location"]
    assert all(secret not in cookie for cookie in added.headers.getlist("Set-Cookie"))
    assert "This is the only time the secret is shown" in shown
    assert notice(shown) == "Endpoint added: copy its signing secret now"
    assert re.search(rf'<textarea id="secret"[^>]* readonly[^>]*>{secret}</textarea>', shown)
    assert re.search(
        r'<button type="button" class="copy-button" data-copy="secret"[^>]* hidden>', shown
    )
    assert re.search(r'<script src="/assets/copy\.[0-9a-f]{12}\.js" defer></script>', shown)
    assert secret not in again
    assert "Shown once only" in again
    assert f'href="{dev.base}/webhooks/{webhook["id"]}/rotate"' in again
    for other in others:
        assert secret not in other
        assert "whsec_" not in other
    assert all(secret not in record.getMessage() for record in caplog.records)
    assert secret not in caplog.text
    # The events as the form sent them (in the page's order); the URL trimmed.
    assert webhook["url"] == receiver.url
    assert webhook["events"] == ["customer.created", "invoice.created"]
    assert webhook["enabled"] is True
    assert verify_header(
        received.headers["x-webhook-signature"],
        received.body,
        secret,
        now=platform.now(),
        tolerance=300,
    )
    assert json.loads(received.body)["type"] == "customer.created"
    delivery = json.loads(received.body)["id"]
    assert notice(after) == f"Test delivery {delivery} queued"
    row = re.search(rf'<tr id="{delivery}">(.*?)</tr>', after, re.S)
    assert row is not None
    assert 'class="badge badge-test">Test<' in row[1]


async def test_the_secret_page_shows_nothing_once_its_minute_has_passed(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    """The answer's notice lives 60 seconds (the clock is moved, nothing sleeps)."""
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        added, _ = await add_endpoint(client, dev)
        clock.advance(catalog.NOTICE_TTL + 1)
        late = await page_of(client, added.headers["Location"])
    assert "whsec_" not in late
    assert "Shown once only" in late


async def test_the_secret_page_shows_only_the_secret_its_answer_made(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """Rotated meanwhile (through the API, say), the secret is not the one the notice names:
    the page shows neither."""
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        added, _ = await add_endpoint(client, dev)
        (webhook,) = (await dev.console.ok("GET", "/webhooks"))["data"]
        rotated = await dev.console.ok("POST", f"/webhooks/{webhook['id']}/rotate-secret")
        shown = await page_of(client, added.headers["Location"])
    assert rotated["secret"] not in shown
    assert "whsec_" not in shown
    assert "Shown once only" in shown


async def test_rotating_from_the_page_shows_the_new_secret_once_and_both_sign(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        async with receiving() as receiver:
            added, _ = await add_endpoint(client, dev, receiver.url)
            first = SECRET.search(await page_of(client, added.headers["Location"]))
            assert first is not None
            (webhook,) = (await dev.console.ok("GET", "/webhooks"))["data"]
            rotate = f"{dev.base}/webhooks/{webhook['id']}/rotate"
            confirm = await page_of(client, rotate)
            unconfirmed, _ = await post(client, rotate, {"csrf_token": csrf(confirm)})
            rotated, _ = await post(client, rotate, {"csrf_token": csrf(confirm), "confirm": "yes"})
            shown = await page_of(client, rotated.headers["Location"])
            endpoint = await page_of(client, f"{dev.base}/webhooks/{webhook['id']}")
            again = await page_of(client, rotate)
            await dev.console.ok("POST", f"/webhooks/{webhook['id']}/test", None, 202)
            async with engine_for(platform) as engine:
                await deliver(engine)
            (received,) = receiver.received
    second = SECRET.search(shown)
    assert second is not None
    assert second[0] != first[0]
    assert "A new signing secret is made and shown once" in confirm
    assert "for 24 hours" in confirm
    assert "stops signing now" not in confirm  # no earlier rotation is still signing
    assert (unconfirmed.status_code, unconfirmed.headers["Location"]) == (303, rotate)
    assert rotated.status_code == 303
    assert rotated.headers["Location"] == f"{dev.base}/webhooks/{webhook['id']}/secret"
    assert (notice(shown) or "").startswith("Secret rotated: the previous one keeps signing")
    assert "the previous secret keeps signing beside the current one" in endpoint
    assert "stops signing now" in again  # rotating again ends the one rotated out
    header = received.headers["x-webhook-signature"]
    assert header.count("v1=") == 2
    for secret in (first[0], second[0]):
        assert verify_header(header, received.body, secret, now=platform.now(), tolerance=300)


async def test_an_endpoint_is_edited_switched_off_and_on_and_deleted_after_a_confirmation(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        webhook = await dev.console.webhook(HOOK, ["invoice.paid", "customer.created"])
        edit = f"{dev.base}/webhooks/{webhook['id']}/edit"
        form = await page_of(client, edit)
        saved, _ = await post(
            client,
            edit,
            {
                "csrf_token": csrf(form),
                "url": "http://127.0.0.1:9/hooks/v2",
                "events": ["customer.created", "invoice.created", "invoice.paid"],
            },
        )
        after_edit = await page_of(client, saved.headers["Location"])
        edited = await dev.console.ok("GET", "/webhooks")
        switch = f"{dev.base}/webhooks/{webhook['id']}/enabled"
        asked, _ = await post(client, switch, {"csrf_token": csrf(form), "enabled": "false"})
        still_on = (await dev.console.ok("GET", "/webhooks"))["data"][0]["enabled"]
        off_confirm = await page_of(client, asked.headers["Location"])
        off, _ = await post(
            client,
            f"{dev.base}/webhooks/{webhook['id']}/switch-off",
            {"csrf_token": csrf(form), "confirm": "yes"},
        )
        off_page = await page_of(client, off.headers["Location"])
        switched_off = (await dev.console.ok("GET", "/webhooks"))["data"][0]["enabled"]
        on, _ = await post(client, switch, {"csrf_token": csrf(form), "enabled": "true"})
        on_page = await page_of(client, on.headers["Location"])
        switched_on = (await dev.console.ok("GET", "/webhooks"))["data"][0]["enabled"]
        delete = f"{dev.base}/webhooks/{webhook['id']}/delete"
        confirm = await page_of(client, delete)
        unconfirmed, _ = await post(client, delete, {"csrf_token": csrf(form)})
        still = await dev.console.ok("GET", "/webhooks")
        deleted, _ = await post(client, delete, {"csrf_token": csrf(form), "confirm": "yes"})
        after_delete = await page_of(client, deleted.headers["Location"])
        gone = await dev.console.ok("GET", "/webhooks")
        edit_gone = await client.get(edit)
    assert checked(form) == ["customer.created", "invoice.paid"]
    assert field_value(form, "url") == HOOK
    assert 'name="enabled"' not in form  # switched with its own button
    assert saved.status_code == 303
    assert notice(after_edit) == "Endpoint http://127.0.0.1:9/hooks/v2 saved"
    # The events it had keep their order: its first is still its test deliveries' type.
    assert edited["data"][0]["events"] == ["invoice.paid", "customer.created", "invoice.created"]
    # Switching off asks first, saying how many waiting deliveries will fail.
    assert (asked.status_code, still_on) == (303, True)
    assert asked.headers["Location"] == f"{dev.base}/webhooks/{webhook['id']}/switch-off"
    assert "Switch this endpoint off?" in off_confirm
    assert "No delivery waits for it now: none will fail." in off_confirm
    assert switched_off is False
    assert (notice(off_page) or "").startswith("Endpoint http://127.0.0.1:9/hooks/v2 switched off")
    assert "Switched off" in off_page
    assert ">Switch on</button>" in off_page
    assert switched_on is True
    assert (notice(on_page) or "").startswith("Endpoint http://127.0.0.1:9/hooks/v2 switched on")
    assert "Delete this endpoint?" in confirm
    assert 'name="confirm" value="yes"' in confirm
    assert "No delivery waits for it now: none will fail." in confirm
    assert (unconfirmed.status_code, unconfirmed.headers["Location"]) == (303, delete)
    assert len(still["data"]) == 1
    assert deleted.status_code == 303
    assert notice(after_delete) == "Endpoint http://127.0.0.1:9/hooks/v2 deleted"
    assert gone["data"] == []
    assert edit_gone.status_code == 404


async def test_the_event_checkboxes_offer_what_the_app_may_receive_grouped_by_area(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        form = await page_of(client, f"{dev.base}/webhooks/new")
        webhook = await dev.console.webhook(HOOK, ["customer.created", "customer.updated"])
        # The app stops registering customers:read: the event stays ticked, marked.
        async with store.transaction() as tx:
            await tx.execute(
                "UPDATE apps SET scopes = $1 WHERE id = $2",
                json.dumps(["invoices:read"]),
                dev.world.app_id,
            )
        edit = await page_of(client, f"{dev.base}/webhooks/{webhook['id']}/edit")
    legends = re.findall(r'<fieldset class="event-group">\s*<legend>([^<]+)</legend>', form)
    assert legends == ["The app itself", "Privacy requests", "Customers", "Invoices"]
    receivable = [e.name for e in catalog.EVENTS if e.audience == "app" or e.scope in SCOPES]
    assert offered(form) == receivable
    assert "supplier.created" not in form
    assert checked(form) == []
    assert 'name="enabled" value="true" checked' in form
    assert "need the area's read scope, which the app does not register" in form
    assert checked(edit) == ["customer.created", "customer.updated"]
    assert "Needs customers:read, which the app does not register" in edit


REFUSALS = [
    pytest.param(
        {"url": "https://hooks.example.com/x y"},
        "url must not contain spaces or control characters",
        id="space-in-url",
    ),
    pytest.param(
        {"url": "http://hooks.example.com/ledgerport"},
        "url must use https (http only on a loopback address)",
        id="http-off-loopback",
    ),
    pytest.param({"url": ""}, "url must be a non-empty string", id="no-url"),
    pytest.param(
        {"url": "ftp://hooks.example.com/in"}, "url must be an absolute https URI", id="ftp"
    ),
    pytest.param(
        {"events": ["invoice.created", "invoice.exploded"]},
        "events.1 'invoice.exploded' is not an event of the catalog",
        id="unknown-event",
    ),
    pytest.param(
        {"events": ["supplier.created"]},
        "events.0 'supplier.created' needs the scope suppliers:read,"
        " which the app does not register",
        id="scope-not-registered",
    ),
]


@pytest.mark.parametrize(("sent", "words"), REFUSALS)
async def test_a_refused_endpoint_comes_back_as_it_was_sent_with_the_reason(
    client: Any, admin_headers: dict[str, str], sent: dict[str, Any], words: str
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        form = await page_of(client, f"{dev.base}/webhooks/new")
        fields = {"url": HOOK, "events": ["invoice.created"], **sent}
        refused, page = await post(
            client, f"{dev.base}/webhooks/new", {"csrf_token": csrf(form), **fields}
        )
        listed = await dev.console.ok("GET", "/webhooks")
        webhook = await dev.console.webhook(HOOK, ["invoice.created"])
        edit = f"{dev.base}/webhooks/{webhook['id']}/edit"
        edit_refused, edit_page = await post(client, edit, {"csrf_token": csrf(form), **fields})
        unchanged = await dev.console.ok("GET", "/webhooks")
    for response, text in ((refused, page), (edit_refused, edit_page)):
        assert response.status_code == 400, text
        assert "text/html" in response.headers["Content-Type"]
        input_id, said = labelled(words)
        assert said in (beside(text, input_id) or ""), text
        assert said in alert(text)
        assert field_value(text, "url") == fields["url"].strip()
        assert checked(text) == fields["events"]
        if input_id == "url":  # a fieldset is described by its problem, never marked invalid
            assert 'aria-describedby="url-hint url-problem" aria-invalid="true"' in text
        assert csrf(text)
    assert 'name="enabled" value="true"' in page
    assert 'name="enabled" value="true" checked' not in page  # left unticked, kept so
    assert listed["data"] == []
    assert [_configured(w) for w in unchanged["data"]] == [
        {"id": webhook["id"], "url": HOOK, "events": ["invoice.created"], "enabled": True}
    ]


async def test_an_app_with_its_20_webhooks_adds_no_more_from_the_page(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        for n in range(catalog.WEBHOOKS_PER_APP_MAX):
            await dev.console.webhook(f"{HOOK}/{n}", [])
        refused, page = await add_endpoint(client, dev)
        text = await refused.get_data(as_text=True)
    assert refused.status_code == 400
    assert alert(text) == "An app has at most 20 webhooks"  # the form's, beside no field
    assert beside(text, "url") is None
    assert page


async def test_a_form_with_a_stale_token_does_nothing_and_one_without_is_refused(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        webhook = await dev.console.webhook(HOOK, ["invoice.created"])
        await dev.console.ok(
            "PUT", "/functions/tells", {"source": HANDLER, "events": ["invoice.created"]}
        )
        wh = f"{dev.base}/webhooks/{webhook['id']}"
        fn = f"{dev.base}/functions/tells"
        fields = {
            f"{dev.base}/webhooks/new": {"url": HOOK, "events": ["invoice.paid"]},
            f"{wh}/edit": {"url": f"{HOOK}/v2", "events": ["invoice.paid"]},
            f"{dev.base}/functions/new": {"name": "other", "source": HANDLER},
            f"{fn}/edit": {"source": "export const handler = () => 2;", "events": []},
        }
        stale = {
            path: await post(client, path, {"csrf_token": "forged", **sent})
            for path, sent in fields.items()
        }
        buttons = [f"{wh}/enabled", f"{wh}/delete", f"{wh}/rotate", f"{fn}/delete", f"{fn}/test"]
        stale_buttons = [
            (await post(client, path, {"csrf_token": "forged", "confirm": "yes"}))[0]
            for path in buttons
        ]
        missing = [
            (await post(client, path, {"confirm": "yes", "enabled": "false"}))[0]
            for path in [*fields, *buttons]
        ]
        webhooks = await dev.console.ok("GET", "/webhooks")
        functions = await dev.console.ok("GET", "/functions")
        runs = await dev.console.ok("GET", "/functions/tells/runs")
    for path, (response, text) in stale.items():
        assert response.status_code == 400, path
        assert alert(text) == "The form expired: try again", path
        assert csrf(text) != "forged"
    assert field_value(stale[f"{wh}/edit"][1], "url") == f"{HOOK}/v2"
    assert textarea(stale[f"{fn}/edit"][1]) == "export const handler = () => 2;"
    assert [r.status_code for r in stale_buttons] == [303] * len(buttons)
    for missing_token in missing:
        assert missing_token.status_code == 400
        assert "The form was not sent from its page" in await missing_token.get_data(as_text=True)
    assert [_configured(w) for w in webhooks["data"]] == [
        {"id": webhook["id"], "url": HOOK, "events": ["invoice.created"], "enabled": True}
    ]
    assert [(f["name"], f["version"]) for f in functions["data"]] == [("tells", 1)]
    assert runs["data"] == []


async def test_another_developers_app_is_not_found_on_any_page_or_form(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        mine = await developer(client, admin_headers)
        webhook = await mine.console.webhook(HOOK, ["invoice.created"])
        await mine.console.ok(
            "PUT", "/functions/tells", {"source": HANDLER, "events": ["invoice.created"]}
        )
        theirs = await developer(client, admin_headers)  # now signed in as them
        form = await page_of(client, f"{theirs.base}/webhooks/new")
        wh = f"{mine.base}/webhooks/{webhook['id']}"
        fn = f"{mine.base}/functions/tells"
        pages = [
            f"{mine.base}/webhooks/new",
            f"{wh}/edit",
            f"{wh}/delete",
            f"{wh}/rotate",
            f"{wh}/secret",
            f"{mine.base}/functions/new",
            f"{fn}/edit",
            f"{fn}/delete",
        ]
        answers = [await client.get(path) for path in pages]
        posts = [
            (
                await post(
                    client,
                    path,
                    {
                        "csrf_token": csrf(form),
                        "confirm": "yes",
                        "url": HOOK,
                        "name": "mine",
                        "source": HANDLER,
                        "enabled": "false",
                    },
                )
            )[0]
            for path in [*pages[:4], f"{wh}/enabled", *pages[5:], f"{fn}/test"]
            if not path.endswith("/secret")
        ]
        # The cockpit's object pages and confirmations, and the actions they confirm.
        cockpit = [
            wh,
            f"{wh}/switch-off",
            f"{wh}/recover?since=2026-01-01T00:00",
            fn,
            f"{fn}/versions/1",
            f"{fn}/versions/1/activate",
        ]
        cockpit_answers = [await client.get(path) for path in cockpit]
        cockpit_posts = [
            (
                await post(
                    client,
                    path,
                    {"csrf_token": csrf(form), "confirm": "yes", "since": "2026-01-01T00:00"},
                )
            )[0]
            for path in [f"{wh}/switch-off", f"{wh}/recover", f"{fn}/versions/1/activate"]
        ]
        # Their own app does not lend its id to mine: a webhook of mine through their app.
        crossed = await client.get(f"{theirs.base}/webhooks/{webhook['id']}/edit")
        webhooks = await mine.console.ok("GET", "/webhooks")
        functions = await mine.console.ok("GET", "/functions")
    assert [a.status_code for a in answers] == [404] * len(pages)
    assert [p.status_code for p in posts] == [404] * len(posts)
    assert [a.status_code for a in cockpit_answers] == [404] * len(cockpit)
    assert [p.status_code for p in cockpit_posts] == [404] * len(cockpit_posts)
    for answer in [*answers, *posts, *cockpit_answers, *cockpit_posts, crossed]:
        assert "text/html" in answer.headers["Content-Type"]
    assert crossed.status_code == 404
    assert webhooks["data"][0]["enabled"] is True
    assert [(f["name"], f["version"]) for f in functions["data"]] == [("tells", 1)]


# --- Functions ---------------------------------------------------------------------------------

SYNTAX_ERROR = (
    "export function handler(event) {\n  const total = event.data.total\n"
    "  return { total: total * };\n}\n"
)


async def test_a_function_is_written_on_the_page_its_syntax_error_shown_at_its_place(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        new = f"{dev.base}/functions/new"
        form = await page_of(client, new)
        refused, page = await post(
            client,
            new,
            {
                "csrf_token": csrf(form),
                "name": "tells",
                "source": SYNTAX_ERROR.replace("\n", "\r\n"),
                "events": ["invoice.created", "customer.created"],
            },
        )
        nothing = await dev.console.ok("GET", "/functions")
        saved, _ = await post(
            client,
            new,
            {
                "csrf_token": csrf(page),
                "name": "tells",
                "source": HANDLER,
                "events": ["invoice.created", "customer.created"],
            },
        )
        listing = await page_of(client, saved.headers["Location"])
        stored = await dev.console.ok("GET", "/functions/tells")
    assert "export async function handler(event, context)" in textarea(form)
    assert refused.status_code == 400
    problem = source_problem(page)
    assert beside(page, "source") is None  # said at its place, beside the source
    assert 'aria-describedby="source-hint source-problem" aria-invalid="true"' in page
    assert alert(page) == "Syntax error at line 3, column 27: Unexpected token '}'"
    assert '<a href="#source">' in page
    # V8 stops at the "}" where an operand should follow "*".
    assert problem == "Syntax error at line 3, column 27: Unexpected token '}'"
    excerpt = re.search(r'<figure class="source-excerpt">.*?<pre[^>]*>(.*?)</pre>', page, re.S)
    assert excerpt is not None
    lines = html.unescape(re.sub(r"<[^>]+>", "", excerpt[1])).split("\n")
    assert lines[:-1] == [
        "   1 export function handler(event) {",
        "   2   const total = event.data.total",
        "   3   return { total: total * };",
    ]
    assert lines[-1] == " " * (5 + 26) + "^"  # under column 27 of line 3
    assert textarea(page) == SYNTAX_ERROR  # kept as typed, line breaks as they were
    assert field_value(page, "name") == "tells"
    assert checked(page) == ["customer.created", "invoice.created"]
    assert 'aria-invalid="true"' in page
    assert nothing["data"] == []
    assert saved.status_code == 303
    assert notice(listing) == "Function tells saved: version 1 runs from now on"
    assert stored["source"] == HANDLER
    assert stored["events"] == ["invoice.created", "customer.created"]  # as sent


FUNCTION_REFUSALS = [
    pytest.param(
        {"source": "export const run = () => 1;"},
        "Function source is not an ES module exporting a handler: the module exports no handler",
        id="no-handler",
    ),
    pytest.param(
        {"source": 'import x from "y";\nexport const handler = () => x;'},
        "source: import is not allowed (line 1, column 1)",
        id="import",
    ),
    pytest.param(
        {"events": ["invoice.exploded"]},
        "events.0 'invoice.exploded' is not an event of the catalog",
        id="unknown-event",
    ),
    pytest.param(
        {"events": ["payment.received"]},
        "events.0 'payment.received' needs the scope payments:read, which the app does not"
        " register",
        id="scope-not-registered",
    ),
    pytest.param(
        {"name": "-bad name"},
        "name must be a letter or digit, then up to 63 letters, digits, _ or -",
        id="bad-name",
    ),
    pytest.param(
        {"name": "taken"},
        "name 'taken' is taken: edit that function, or choose another name",
        id="name-taken",
    ),
    pytest.param(
        {"name": "new"},
        "name 'new' is reserved (the console's page for a new function)",
        id="name-reserved",
    ),
]


@pytest.mark.parametrize(("sent", "words"), FUNCTION_REFUSALS)
async def test_a_refused_function_comes_back_as_it_was_sent_with_the_reason(
    client: Any, admin_headers: dict[str, str], sent: dict[str, Any], words: str
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        await dev.console.ok("PUT", "/functions/taken", {"source": HANDLER, "events": []})
        form = await page_of(client, f"{dev.base}/functions/new")
        fields = {"name": "fresh", "source": HANDLER, "events": ["invoice.created"], **sent}
        refused, page = await post(
            client, f"{dev.base}/functions/new", {"csrf_token": csrf(form), **fields}
        )
        functions = await dev.console.ok("GET", "/functions")
    assert refused.status_code == 400, page
    input_id, said = labelled(words)
    shown = beside(page, input_id)
    if shown is None and input_id == "source":  # at its place in the source, when it has one
        shown = source_problem(page)
        assert f'<li><a href="#source">{html.escape(said, quote=False)}' in page, page
    assert said.lower() in (shown or "").lower(), page
    assert said in alert(page)
    assert textarea(page) == fields["source"]
    assert field_value(page, "name") == fields["name"]
    assert checked(page) == fields["events"]
    assert [(f["name"], f["version"]) for f in functions["data"]] == [("taken", 1)]


async def test_a_function_is_edited_to_its_next_version_and_deleted_after_a_confirmation(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        await dev.console.ok(
            "PUT", "/functions/tells", {"source": HANDLER, "events": ["invoice.created"]}
        )
        edit = f"{dev.base}/functions/tells/edit"
        form = await page_of(client, edit)
        refused, refused_page = await post(
            client,
            edit,
            {"csrf_token": csrf(form), "source": "export const handler = (", "events": []},
        )
        saved, _ = await post(
            client,
            edit,
            {
                "csrf_token": csrf(form),
                "source": "export const handler = () => 2;\n",
                "events": ["customer.created"],
            },
        )
        listing = await page_of(client, saved.headers["Location"])
        stored = await dev.console.ok("GET", "/functions/tells")
        delete = f"{dev.base}/functions/tells/delete"
        confirm = await page_of(client, delete)
        unconfirmed, _ = await post(client, delete, {"csrf_token": csrf(form)})
        deleted, _ = await post(client, delete, {"csrf_token": csrf(form), "confirm": "yes"})
        after = await page_of(client, deleted.headers["Location"])
        gone = await dev.console.ok("GET", "/functions")
        missing = await client.get(edit)
    assert textarea(form) == HANDLER
    assert checked(form) == ["invoice.created"]
    assert 'name="name"' not in form  # a function keeps its name
    assert "Save version 2" in form
    assert refused.status_code == 400
    assert source_problem(refused_page).startswith("Syntax error at line 1, column")
    assert notice(listing) == "Function tells saved: version 2 runs from now on"
    assert (stored["version"], stored["source"], stored["events"]) == (
        2,
        "export const handler = () => 2;\n",
        ["customer.created"],
    )
    assert "Delete the function tells?" in confirm
    assert (unconfirmed.status_code, unconfirmed.headers["Location"]) == (303, delete)
    assert notice(after) == "Function tells deleted: it runs no more"
    assert gone["data"] == []
    assert missing.status_code == 404
    assert "That function no longer exists" in await missing.get_data(as_text=True)


async def test_the_test_button_queues_a_run_that_is_listed_and_runs(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with functions_world(client, admin_headers, app, platform) as world:
            console = world.console
            await login(client, world.api.world)
            base = f"/console/apps/{world.api.world.app_id}"
            await console.ok(
                "PUT",
                "/functions/tells",
                {
                    "source": "export const handler = (event) => ({ test: event.data.test });",
                    "events": ["customer.created"],
                },
            )
            listing = await page_of(client, f"{base}/functions")
            queued, _ = await post(
                client, f"{base}/functions/tells/test", {"csrf_token": csrf(listing)}
            )
            told = await page_of(client, queued.headers["Location"])
            while await world.runner.claim_once():
                await world.runner.settle()
            ran = await page_of(client, f"{base}/functions/tells")
            (run,) = (await console.ok("GET", "/functions/tells/runs"))["data"]
    assert queued.status_code == 303
    assert queued.headers["Location"] == f"{base}/functions/tells"
    assert notice(told) == f"Test run {run['id']} of tells queued"
    row = re.search(rf'<tr id="{run["id"]}">(.*?)</tr>', told, re.S)
    assert row is not None
    assert "badge-queued" in row[1]
    assert 'badge-test">Test<' in row[1]
    done = re.search(rf'<tr id="{run["id"]}">(.*?)</tr>', ran, re.S)
    assert done is not None
    assert "badge-succeeded" in done[1]
    assert run["result"] == {"test": True}
    assert run["type"] == "customer.created"


async def test_test_runs_and_uploads_from_the_page_count_against_the_apps_budget(
    client: Any, admin_headers: dict[str, str], platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        await dev.console.ok("PUT", "/functions/tells", {"source": HANDLER, "events": []})
        # The rest of the minute's budget is spent (the limiter counts; nothing sleeps).
        budget = auth.Budget(catalog.RATE_LIMIT_FUNCTION_UPLOADS, (dev.world.app_id,))
        while (await platform.limiter.take(budget)).refused_by is None:
            pass
        listing = await page_of(client, f"{dev.base}/functions")
        tested, _ = await post(
            client, f"{dev.base}/functions/tells/test", {"csrf_token": csrf(listing)}
        )
        told = await page_of(client, tested.headers["Location"])
        edit = f"{dev.base}/functions/tells/edit"
        form = await page_of(client, edit)
        limited, page = await post(
            client,
            edit,
            {"csrf_token": csrf(form), "source": "export const handler = () => 3;"},
        )
        runs = await dev.console.ok("GET", "/functions/tells/runs")
        stored = await dev.console.ok("GET", "/functions/tells")
    assert tested.status_code == 303
    assert (notice(told) or "").startswith("Too many requests: retry after")
    assert limited.status_code == 429
    assert int(limited.headers["Retry-After"]) > 0
    assert alert(page).startswith("Too many requests: retry after")
    assert textarea(page) == "export const handler = () => 3;"
    assert runs["data"] == []
    assert stored["version"] == 1


async def test_a_function_on_no_event_is_test_run_on_the_default_sample(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        await dev.console.ok("PUT", "/functions/idle", {"source": HANDLER, "events": []})
        listing = await page_of(client, f"{dev.base}/functions/idle")
        tested, _ = await post(
            client, f"{dev.base}/functions/idle/test", {"csrf_token": csrf(listing)}
        )
        (run,) = (await dev.console.ok("GET", "/functions/idle/runs"))["data"]
    assert tested.status_code == 303
    assert run["type"] == catalog.DEFAULT_TEST_EVENT
    assert "no event (a test run is on <code>invoice.created</code>)" in listing


async def test_a_function_rolled_back_is_edited_from_the_version_that_runs(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """Rolled back to version 1 of 2 (through the API): the page edits version 1's source, and
    saving it makes version 3, which runs from then on."""
    with trio.fail_after(TIMEOUT):
        dev = await developer(client, admin_headers)
        for source in (HANDLER, "export const handler = () => 2;"):
            await dev.console.ok("PUT", "/functions/tells", {"source": source, "events": []})
        await dev.console.ok("POST", "/functions/tells/versions/1/activate")
        listing = await page_of(client, f"{dev.base}/functions")
        edit = f"{dev.base}/functions/tells/edit"
        form = await page_of(client, edit)
        saved, _ = await post(
            client,
            edit,
            {"csrf_token": csrf(form), "source": "export const handler = () => 3;"},
        )
        after = await page_of(client, saved.headers["Location"])
        stored = await dev.console.ok("GET", "/functions/tells")
    assert "rolled back from version 2" in listing
    assert "Version 1 runs now (rolled back from version 2)" in form
    assert textarea(form) == HANDLER
    assert "Save version 3" in form
    assert notice(after) == "Function tells saved: version 3 runs from now on"
    assert (stored["version"], stored["source"]) == (3, "export const handler = () => 3;")


def _configured(webhook: dict[str, Any]) -> dict[str, Any]:
    """What the console's webhook form sets of an endpoint (its id, URL, events, and whether
    it is on), out of all the API answers."""
    return {name: webhook[name] for name in ("id", "url", "events", "enabled")}
