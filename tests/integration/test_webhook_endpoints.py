"""Webhook endpoints beyond the spec, through the console API (contract.md, third round): the
signature scheme, rate limit, ordering and headers on create, patch and read, their validation
table, the keys of each scheme and their rotation, the lifecycle as the app sees it, test
deliveries of a chosen type, and the app's operational endpoint."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from ledgerport import apps, catalog
from ledgerport.clock import FrozenClock
from ledgerport.http import create_app
from ledgerport.keys import Keyring
from ledgerport.platform import Platform
from ledgerport.storage import Store

from .data_api import owner_api
from .webhook_world import Console, console_for

TIMEOUT = 30
URL = "http://127.0.0.1:9/hook"
OTHER_URL = "http://127.0.0.1:9/other"
DAY = 24 * 3600

HEALTHY = {
    "deliveredLast24h": 0,
    "failedLast24h": 0,
    "consecutiveFailures": 0,
    "lastDeliveryAt": None,
    "lastError": None,
}
DEFAULTS = {
    "enabled": True,
    "kind": "push",
    "signature": "stripe",
    "rateLimit": None,
    "ordering": "none",
    "headers": {},
    "disabledReason": None,
    "health": HEALTHY,
    "publicKey": None,
}
"""A new endpoint's fields when the create names only its URL and events."""

STRIPE_SECRET = re.compile(r"whsec_[A-Za-z0-9_-]{43}")


async def _console(client: Any, admin_headers: dict[str, str]) -> Console:
    api = await owner_api(client, admin_headers)
    return await console_for(client, admin_headers, api)


async def _problems(response: Any) -> list[str]:
    """The messages of a validation 400, after checking it is the spec's envelope of one (the
    message an array, no code)."""
    body = await response.get_json()
    assert response.status_code == 400, body
    assert body["statusCode"] == 400
    assert body["error"] == "Bad Request"
    assert "code" not in body
    assert isinstance(body["message"], list)
    messages: list[str] = body["message"]
    return messages


def _iso(moment: float) -> str:
    """A moment as the console answers it (ISO 8601 in UTC to the millisecond, ``Z``)."""
    text = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def _standard_base64(text: str, prefix: str, size: int) -> bytes:
    """The bytes of ``prefix`` + standard base64 (canonical, padded) of ``size`` bytes."""
    assert text.startswith(prefix), text
    raw = base64.b64decode(text[len(prefix) :], validate=True)
    assert len(raw) == size
    assert base64.b64encode(raw).decode() == text[len(prefix) :]
    return raw


def _public_key(text: str) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(_standard_base64(text, "whpk_", 32))


def _without_secret(answer: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in answer.items() if name != "secret"}


async def _row(store: Store, webhook_id: str) -> dict[str, Any]:
    async with store.transaction() as tx:
        row = await tx.fetchrow("SELECT * FROM webhooks WHERE id = $1", webhook_id)
    assert row is not None
    return dict(row)


async def _current_key(store: Store, keyring: Keyring, console: Console, webhook_id: str) -> str:
    async with store.transaction() as tx:
        return await apps.webhook_secret(tx, keyring, app_id=console.app_id, webhook_id=webhook_id)


# --- Create, read, change -------------------------------------------------------------------------


async def test_an_endpoint_made_with_every_control_reads_them_back(
    client: Any, admin_headers: dict[str, str]
) -> None:
    controls = {
        "signature": "standard",
        "rateLimit": 25,
        "ordering": "record",
        "headers": {"Authorization": "Bearer abc def", "X-Tenant": "t-1"},
    }
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, ["invoice.created", "invoice.paid"], **controls)
        listed = await console.ok("GET", "/webhooks")
        one = await console.ok("GET", f"/webhooks/{created['id']}")
    expected = {
        **DEFAULTS,
        **controls,
        "id": created["id"],
        "url": URL,
        "events": ["invoice.created", "invoice.paid"],
    }
    assert _without_secret(created) == expected
    assert listed == {"data": [expected], "next": None}
    assert one == expected


async def test_an_endpoint_made_with_url_and_events_only_takes_the_defaults(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [])
        switched_off = await console.webhook(URL, [], enabled=False)
        one = await console.ok("GET", f"/webhooks/{created['id']}")
        off = await console.ok("GET", f"/webhooks/{switched_off['id']}")
    assert one == {**DEFAULTS, "id": created["id"], "url": URL, "events": []}
    assert STRIPE_SECRET.fullmatch(created["secret"])
    # Switched off by the app at creation: no reason.
    assert off == {**DEFAULTS, "id": switched_off["id"], "url": URL, "events": [], "enabled": False}


async def test_reading_an_unknown_or_deleted_endpoint_is_a_404(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [])
        await console.ok("DELETE", f"/webhooks/{created['id']}", status=204)
        deleted = await console.call("GET", f"/webhooks/{created['id']}")
        unknown = await console.call("GET", "/webhooks/wh_00000000000000000000000000")
    for response in (deleted, unknown):
        assert response.status_code == 404
        assert (await response.get_json())["code"] == "WEBHOOK_NOT_FOUND"


async def test_only_the_apps_developer_reads_one_of_its_endpoints(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        mine = await _console(client, admin_headers)
        theirs = await _console(client, admin_headers)
        created = await mine.webhook(URL, [])
        intruder = await Console(client, theirs.token, mine.app_id).call(
            "GET", f"/webhooks/{created['id']}"
        )
        crossed = await theirs.call("GET", f"/webhooks/{created['id']}")
        anonymous = await client.app.test_client().get(
            f"/developer/apps/{mine.app_id}/webhooks/{created['id']}"
        )
    assert (intruder.status_code, crossed.status_code, anonymous.status_code) == (404, 404, 401)
    assert (await crossed.get_json())["code"] == "WEBHOOK_NOT_FOUND"


@pytest.mark.parametrize(
    "change",
    [
        {"rateLimit": 7},
        {"rateLimit": None},
        {"ordering": "record"},
        {"ordering": "none"},
        {"headers": {"X-Api-Key": "k1"}},
        {"headers": {}},
        {"signature": "stripe"},
        {"url": OTHER_URL, "ordering": "record", "rateLimit": 1000},
    ],
    ids=json.dumps,
)
async def test_a_change_of_a_control_leaves_the_others(
    client: Any, admin_headers: dict[str, str], change: dict[str, Any]
) -> None:
    start = {"rateLimit": 3, "ordering": "none", "headers": {"X-Old": "1"}}
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, ["invoice.created"], **start)
        changed = await console.ok("PATCH", f"/webhooks/{created['id']}", change)
        one = await console.ok("GET", f"/webhooks/{created['id']}")
    expected = {**_without_secret(created), **change}
    assert changed == expected  # the same scheme: no new secret
    assert one == expected


async def test_a_change_of_scheme_answers_the_new_key_once(
    client: Any, admin_headers: dict[str, str], store: Store, keyring: Keyring
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [])
        hook = f"/webhooks/{created['id']}"
        standard = await console.ok("PATCH", hook, {"signature": "standard"})
        asymmetric = await console.ok("PATCH", hook, {"signature": "standard-asymmetric"})
        private = await _current_key(store, keyring, console, created["id"])
        read = await console.ok("GET", hook)
        again = await console.ok("PATCH", hook, {"signature": "standard-asymmetric"})
        back = await console.ok("PATCH", hook, {"signature": "stripe"})
        read_back = await console.ok("GET", hook)
    _standard_base64(standard["secret"], "whsec_", 32)
    assert standard["secret"] != created["secret"]
    assert (standard["signature"], standard["publicKey"]) == ("standard", None)
    assert "secret" not in asymmetric
    assert asymmetric["signature"] == "standard-asymmetric"
    _public_key(asymmetric["publicKey"])
    assert apps.public_key(private) == asymmetric["publicKey"]
    assert read == _without_secret(asymmetric)
    assert again == read  # the same scheme again: the key stays
    assert STRIPE_SECRET.fullmatch(back["secret"])
    assert (back["signature"], back["publicKey"]) == ("stripe", None)
    assert read_back == _without_secret(back)


# --- The validation table ------------------------------------------------------------------------

LONG_NAME = "X-" + "a" * 63
TEN = {f"X-H{index}": "v" for index in range(10)}

REFUSED_HEADERS: dict[str, tuple[Any, str]] = {
    "more than 10 entries": ({**TEN, "X-H10": "v"}, "headers has at most 10 entries"),
    "a name that is no token": ({"X Bad": "v"}, "headers.X Bad "),
    "a name with a colon": ({"X-Bad:": "v"}, "headers.X-Bad: "),
    "a name of 65 characters": ({LONG_NAME: "v"}, f"headers.{LONG_NAME} "),
    "Host": ({"Host": "example.com"}, "headers.Host "),
    "content-type": ({"content-type": "text/plain"}, "headers.content-type "),
    "Content-Length": ({"Content-Length": "5"}, "headers.Content-Length "),
    "User-Agent": ({"User-Agent": "mine"}, "headers.User-Agent "),
    "webhook-foo": ({"webhook-foo": "v"}, "headers.webhook-foo "),
    "X-Webhook-Bar": ({"X-Webhook-Bar": "v"}, "headers.X-Webhook-Bar "),
    "a value of 513 characters": ({"X-Long": "v" * 513}, "headers.X-Long "),
    "a value with a control character": ({"X-Ctl": "a\x01b"}, "headers.X-Ctl "),
    "a value with a tab": ({"X-Tab": "a\tb"}, "headers.X-Tab "),
    "a value that is not ASCII": ({"X-Accent": "café"}, "headers.X-Accent "),
    "a value that is not a string": ({"X-Number": 5}, "headers.X-Number"),
    "two names differing only in case": ({"X-Token": "a", "x-token": "b"}, "headers.x-token "),
    "headers that are not an object": (["X-A", "v"], "headers"),
}


@pytest.mark.parametrize(("headers", "named"), REFUSED_HEADERS.values(), ids=REFUSED_HEADERS.keys())
async def test_refused_headers_are_a_400_naming_them(
    client: Any, admin_headers: dict[str, str], headers: Any, named: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        on_create = await console.call(
            "POST", "/webhooks", {"url": URL, "events": [], "headers": headers}
        )
        create_problems = await _problems(on_create)
        created = await console.webhook(URL, [], headers={"X-Kept": "1"})
        on_change = await console.call("PATCH", f"/webhooks/{created['id']}", {"headers": headers})
        change_problems = await _problems(on_change)
        listed = await console.ok("GET", "/webhooks")
    for problems in (create_problems, change_problems):
        assert any(problem.startswith(named) for problem in problems), problems
    assert [w["headers"] for w in listed["data"]] == [{"X-Kept": "1"}]


ACCEPTED_HEADERS: dict[str, dict[str, str]] = {
    "10 entries": TEN,
    "a name of 64 characters": {LONG_NAME[:-1]: "v"},
    "a value of 512 characters": {"X-Long": "v" * 512},
    "a value with spaces between": {"Authorization": "Bearer a b"},
    "every token character": {"X-!#$%&'*+.^_`|~0-9": "v"},
    "every visible ASCII character": {"X-Visible": "".join(map(chr, range(0x21, 0x7F)))},
    "a name that only begins like a refused one": {"Hostname": "h", "X-Webhooks": "w"},
}


@pytest.mark.parametrize("headers", ACCEPTED_HEADERS.values(), ids=ACCEPTED_HEADERS.keys())
async def test_accepted_headers_are_kept_as_given(
    client: Any, admin_headers: dict[str, str], headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [], headers=headers)
        one = await console.ok("GET", f"/webhooks/{created['id']}")
    assert created["headers"] == one["headers"] == headers


RATE_LIMITS: dict[str, tuple[Any, bool]] = {
    "0": (0, False),
    "1001": (1001, False),
    "1.5": (1.5, False),
    "a string": ("5", False),
    "true": (True, False),
    "-1": (-1, False),
    "1": (1, True),
    "1000": (1000, True),
    "null": (None, True),
}


@pytest.mark.parametrize(("limit", "accepted"), RATE_LIMITS.values(), ids=RATE_LIMITS.keys())
async def test_rate_limits(
    client: Any, admin_headers: dict[str, str], limit: Any, accepted: bool
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        on_create = await console.call(
            "POST", "/webhooks", {"url": URL, "events": [], "rateLimit": limit}
        )
        created = await console.webhook(URL, [], rateLimit=500)
        on_change = await console.call("PATCH", f"/webhooks/{created['id']}", {"rateLimit": limit})
        one = await console.ok("GET", f"/webhooks/{created['id']}")
    if accepted:
        assert on_create.status_code == 201
        assert on_change.status_code == 200
        assert (await on_create.get_json())["rateLimit"] == limit
        assert one["rateLimit"] == limit
    else:
        for response in (on_create, on_change):
            problems = await _problems(response)
            assert any(problem.startswith("rateLimit") for problem in problems), problems
        assert one["rateLimit"] == 500


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("ordering", "sequential"),
        ("ordering", "RECORD"),
        ("ordering", None),
        ("ordering", 1),
        ("signature", "hmac"),
        ("signature", "Standard"),
        ("signature", "standard-asymetric"),
        ("signature", None),
    ],
)
async def test_unknown_orderings_and_schemes_are_refused(
    client: Any, admin_headers: dict[str, str], field: str, value: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        on_create = await console.call(
            "POST", "/webhooks", {"url": URL, "events": [], field: value}
        )
        created = await console.webhook(URL, [])
        on_change = await console.call("PATCH", f"/webhooks/{created['id']}", {field: value})
        listed = await console.ok("GET", "/webhooks")
    for response in (on_create, on_change):
        problems = await _problems(response)
        assert any(problem.startswith(field) for problem in problems), problems
    assert listed["data"] == [_without_secret(created)]


# --- Keys of each scheme -------------------------------------------------------------------------


async def test_a_standard_secret_is_whsec_and_32_bytes_of_standard_base64(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        secrets = [
            (await console.webhook(URL, [], signature="standard"))["secret"] for _ in range(3)
        ]
    for secret in secrets:
        _standard_base64(secret, "whsec_", 32)
    assert len(set(secrets)) == 3


async def test_a_standard_asymmetric_endpoint_answers_its_public_key_and_no_secret(
    client: Any, admin_headers: dict[str, str], store: Store, keyring: Keyring
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, ["invoice.created"], signature="standard-asymmetric")
        listed = await console.ok("GET", "/webhooks")
        private = await _current_key(store, keyring, console, created["id"])
    assert "secret" not in created
    assert created["signature"] == "standard-asymmetric"
    _public_key(created["publicKey"])
    assert apps.public_key(private) == created["publicKey"]
    assert listed["data"] == [created]


@pytest.mark.parametrize("scheme", ["stripe", "standard"])
async def test_rotating_a_secret_answers_it_and_when_the_previous_stops(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock, scheme: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [], signature=scheme)
        rotated = await console.ok("POST", f"/webhooks/{created['id']}/rotate-secret")
        one = await console.ok("GET", f"/webhooks/{created['id']}")
    assert set(rotated) == {"secret", "previousSecretExpiresAt"}
    assert rotated["secret"] != created["secret"]
    if scheme == "standard":
        _standard_base64(rotated["secret"], "whsec_", 32)
    else:
        assert STRIPE_SECRET.fullmatch(rotated["secret"])
    assert rotated["previousSecretExpiresAt"] == _iso(clock.now() + DAY)
    assert one == _without_secret(created)


async def test_rotating_an_asymmetric_key_answers_the_new_public_key(
    client: Any, admin_headers: dict[str, str], clock: FrozenClock, store: Store, keyring: Keyring
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [], signature="standard-asymmetric")
        rotated = await console.ok("POST", f"/webhooks/{created['id']}/rotate-secret")
        one = await console.ok("GET", f"/webhooks/{created['id']}")
        private = await _current_key(store, keyring, console, created["id"])
        row = await _row(store, created["id"])
    assert set(rotated) == {"publicKey", "previousPublicKeyExpiresAt"}
    _public_key(rotated["publicKey"])
    assert rotated["publicKey"] != created["publicKey"]
    assert rotated["previousPublicKeyExpiresAt"] == _iso(clock.now() + DAY)
    assert one["publicKey"] == rotated["publicKey"]
    assert apps.public_key(private) == rotated["publicKey"]
    assert (row["public_key"], row["previous_public_key"]) == (
        rotated["publicKey"],
        created["publicKey"],
    )


@pytest.mark.parametrize("scheme", ["stripe", "standard", "standard-asymmetric"])
async def test_keys_are_not_stored_in_clear(
    client: Any, admin_headers: dict[str, str], store: Store, keyring: Keyring, scheme: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [], signature=scheme)
        first = await _current_key(store, keyring, console, created["id"])
        rotated = await console.ok("POST", f"/webhooks/{created['id']}/rotate-secret")
        second = await _current_key(store, keyring, console, created["id"])
        row = await _row(store, created["id"])
    stored = " ".join(str(value) for value in row.values())
    assert first != second
    assert rotated.get("secret", second) == second
    for key in (first, second):
        assert key not in stored
        assert key.split("_", 1)[1] not in stored
    assert "whsec_" not in stored
    assert "whsk_" not in stored


# --- The lifecycle as the app sees it ------------------------------------------------------------


async def test_switching_on_an_endpoint_the_engine_switched_off_clears_its_reason(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, ["invoice.created"])
        hook = f"/webhooks/{created['id']}"
        async with store.transaction() as tx:
            await tx.execute(
                "UPDATE webhooks SET enabled = $1, disabled_reason = 'failing', disabled_at = $2,"
                " recent_failures = '[1, 2, 3]' WHERE id = $3",
                False,
                clock.now() - 60,
                created["id"],
            )
        off = await console.ok("GET", hook)
        moved = await console.ok("PATCH", hook, {"url": OTHER_URL})
        still_off = await console.ok("PATCH", hook, {"enabled": False})
        clock.advance(30)
        switched_on = await console.ok("PATCH", hook, {"enabled": True})
        row = await _row(store, created["id"])
        listed = await console.ok("GET", "/webhooks")
    assert (off["enabled"], off["disabledReason"]) == (False, "failing")
    # A change of anything else, or switching off what is off, keeps the engine's reason.
    assert (moved["enabled"], moved["disabledReason"]) == (False, "failing")
    assert (still_off["enabled"], still_off["disabledReason"]) == (False, "failing")
    assert (switched_on["enabled"], switched_on["disabledReason"]) == (True, None)
    assert listed["data"] == [switched_on]
    # The disable rule's window starts again.
    assert (row["disabled_at"], row["switched_on_at"], row["recent_failures"]) == (
        None,
        clock.now(),
        "[]",
    )


async def test_switched_off_by_the_app_an_endpoint_has_no_reason(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [])
        off = await console.ok("PATCH", f"/webhooks/{created['id']}", {"enabled": False})
        row = await _row(store, created["id"])
    assert (off["enabled"], off["disabledReason"]) == (False, None)
    assert (row["disabled_reason"], row["disabled_at"]) == (None, clock.now())


async def test_health_reads_what_the_engine_kept_and_the_last_24_hours(
    client: Any, admin_headers: dict[str, str], store: Store, clock: FrozenClock
) -> None:
    """The counts are the newest 24 hours' (the current one and the 23 before it)."""
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [])
        quiet = await console.webhook(URL, [])
        now = clock.now()
        hour = apps.hour_of(now)
        async with store.transaction() as tx:
            await tx.execute(
                "UPDATE webhooks SET health = 'failing', consecutive_failures = 2,"
                " last_delivery_at = $1, last_error = 'HTTP 500' WHERE id = $2",
                now - 3600.5,
                created["id"],
            )
            for at, delivered, failed in ((hour, 3, 1), (hour - 23, 1, 1), (hour - 24, 50, 50)):
                await tx.execute(
                    "INSERT INTO webhook_health_hours (webhook_id, hour, delivered, failed)"
                    " VALUES ($1, $2, $3, $4)",
                    created["id"],
                    at,
                    delivered,
                    failed,
                )
        one = await console.ok("GET", f"/webhooks/{created['id']}")
        listed = await console.ok("GET", "/webhooks")
    assert one["health"] == {
        "deliveredLast24h": 4,
        "failedLast24h": 2,
        "consecutiveFailures": 2,
        "lastDeliveryAt": _iso(now - 3600.5),
        "lastError": "HTTP 500",
    }
    assert {w["id"]: w["health"] for w in listed["data"]} == {
        created["id"]: one["health"],
        quiet["id"]: HEALTHY,
    }
    assert quiet["health"] == HEALTHY


# --- Test deliveries of a chosen type ------------------------------------------------------------


async def test_a_test_delivery_of_a_subscribed_type(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, ["invoice.created", "payment.received"])
        test = f"/webhooks/{created['id']}/test"
        chosen = await console.ok("POST", test, {"type": "payment.received"}, status=202)
        first = await console.ok("POST", test, {"type": "invoice.created"}, status=202)
        default = await console.ok("POST", test, status=202)
        empty = await console.ok("POST", test, {}, status=202)
        deliveries = await console.deliveries(created["id"])
        detail = await console.ok(
            "GET", f"/webhooks/{created['id']}/deliveries/{chosen['deliveryId']}"
        )
    types = {d["id"]: d["type"] for d in deliveries}
    queued = [chosen, first, default, empty]
    assert [types[answer["deliveryId"]] for answer in queued] == [
        "payment.received",
        "invoice.created",
        "invoice.created",  # no body: the first subscribed type
        "invoice.created",  # an empty object: the same
    ]
    assert len(deliveries) == len(queued)
    assert [(d["test"], d["eventId"]) for d in deliveries] == [(True, None)] * len(queued)
    payload = json.loads(detail["payload"])
    assert (payload["type"], payload["data"]["test"]) == ("payment.received", True)


async def test_a_test_delivery_with_no_body_on_an_endpoint_with_no_events(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, [])
        queued = await console.ok("POST", f"/webhooks/{created['id']}/test", status=202)
        deliveries = await console.deliveries(created["id"])
        refused = await console.call(
            "POST", f"/webhooks/{created['id']}/test", {"type": catalog.DEFAULT_TEST_EVENT}
        )
    assert [(d["id"], d["type"]) for d in deliveries] == [
        (queued["deliveryId"], catalog.DEFAULT_TEST_EVENT)
    ]
    # The default of an endpoint that subscribes to nothing is no type it may name.
    assert any("type" in problem for problem in await _problems(refused))


REFUSED_TEST_BODIES: dict[str, bytes] = {
    "a type it does not subscribe to": b'{"type": "invoice.paid"}',
    "a type not in the catalog": b'{"type": "no.such_event"}',
    "a type that is not a string": b'{"type": 5}',
    "another field": b'{"kind": "invoice.created"}',
    "malformed JSON": b'{"type": ',
    "a JSON array": b'["invoice.created"]',
    "a JSON string": b'"invoice.created"',
}


@pytest.mark.parametrize("body", REFUSED_TEST_BODIES.values(), ids=REFUSED_TEST_BODIES.keys())
async def test_a_refused_test_body_is_a_400_and_queues_nothing(
    client: Any, admin_headers: dict[str, str], body: bytes
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        created = await console.webhook(URL, ["invoice.created"])
        response = await client.open(
            f"/developer/apps/{console.app_id}/webhooks/{created['id']}/test",
            method="POST",
            data=body,
            headers={
                "Authorization": f"Bearer {console.token}",
                "Content-Type": "application/json",
            },
        )
        problems = await _problems(response)
        deliveries = await console.deliveries(created["id"])
    assert problems
    assert deliveries == []


# --- The operational endpoint --------------------------------------------------------------------


async def _operational_id(store: Store, app_id: str) -> str:
    async with store.transaction() as tx:
        webhook_id = await tx.fetchval(
            "SELECT id FROM webhooks WHERE app_id = $1 AND kind = 'operational'"
            " AND deleted_at IS NULL",
            app_id,
        )
    assert webhook_id is not None
    return str(webhook_id)


async def test_the_operational_endpoint_keeps_its_secret_across_urls(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        first = await console.ok("PUT", "/operational-webhook", {"url": URL})
        webhook_id = await _operational_id(store, console.app_id)
        second = await console.ok("PUT", "/operational-webhook", {"url": OTHER_URL})
        row = await _row(store, webhook_id)
    assert set(first) == {"url", "secret"}
    assert first["url"] == URL
    assert STRIPE_SECRET.fullmatch(first["secret"])
    assert second == {"url": OTHER_URL, "secret": first["secret"]}
    assert (row["url"], row["signature"], row["enabled"]) == (OTHER_URL, "stripe", True)
    stored = " ".join(str(value) for value in row.values())
    assert "whsec_" not in stored


async def test_deleting_the_operational_endpoint(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        never = await console.call("DELETE", "/operational-webhook")
        await console.ok("PUT", "/operational-webhook", {"url": URL})
        webhook_id = await _operational_id(store, console.app_id)
        deleted = await console.call("DELETE", "/operational-webhook")
        again = await console.call("DELETE", "/operational-webhook")
        row = await _row(store, webhook_id)
    assert [r.status_code for r in (never, deleted, again)] == [204, 204, 204]
    assert row["deleted_at"] is not None
    assert not row["enabled"]


async def test_the_operational_endpoint_is_none_of_the_apps_webhooks(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        await console.ok("PUT", "/operational-webhook", {"url": URL})
        webhook_id = await _operational_id(store, console.app_id)
        hook = f"/webhooks/{webhook_id}"
        answers = {
            "read": await console.call("GET", hook),
            "change": await console.call("PATCH", hook, {"enabled": False}),
            "test": await console.call("POST", f"{hook}/test"),
            "rotate": await console.call("POST", f"{hook}/rotate-secret"),
            "deliveries": await console.call("GET", f"{hook}/deliveries"),
            "delete": await console.call("DELETE", hook),
        }
        empty = await console.ok("GET", "/webhooks")
        made = [await console.webhook(URL, []) for _ in range(catalog.WEBHOOKS_PER_APP_MAX)]
        one_more = await console.call("POST", "/webhooks", {"url": URL, "events": []})
        listed = await console.ok("GET", "/webhooks")
        row = await _row(store, webhook_id)
    assert {name: r.status_code for name, r in answers.items()} == dict.fromkeys(answers, 404)
    for response in answers.values():
        assert (await response.get_json())["code"] == "WEBHOOK_NOT_FOUND"
    assert empty == {"data": [], "next": None}
    assert one_more.status_code == 400
    assert sorted(w["id"] for w in listed["data"]) == sorted(w["id"] for w in made)
    assert (row["deleted_at"], row["enabled"]) == (None, True)


@pytest.mark.parametrize(
    "body", [{}, {"url": ""}, {"url": 5}, {"url": URL, "secret": "whsec_mine"}], ids=json.dumps
)
async def test_a_refused_operational_body_is_a_400(
    client: Any, admin_headers: dict[str, str], body: dict[str, Any]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        response = await console.call("PUT", "/operational-webhook", body)
        problems = await _problems(response)
    assert any(problem.startswith(("url", "secret")) for problem in problems), problems


async def test_only_the_apps_developer_sets_its_operational_endpoint(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        mine = await _console(client, admin_headers)
        theirs = await _console(client, admin_headers)
        intruder = Console(client, theirs.token, mine.app_id)
        put = await intruder.call("PUT", "/operational-webhook", {"url": URL})
        delete = await intruder.call("DELETE", "/operational-webhook")
        anonymous = await client.app.test_client().put(
            f"/developer/apps/{mine.app_id}/operational-webhook", json={"url": URL}
        )
    assert (put.status_code, delete.status_code, anonymous.status_code) == (404, 404, 401)


async def test_production_refuses_an_operational_url_as_a_webhook_url(
    platform: Platform, store: Store, admin_headers: dict[str, str]
) -> None:
    production = replace(platform, config=replace(platform.config, env="production"))
    client = create_app(production).test_client()
    urls = [
        "http://hooks.example.com/x",
        "ftp://hooks.example.com/x",
        "https://127.0.0.1/hook",
        "https://10.0.0.7/hook",
        "https://[::1]/hook",
    ]
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        answers = {}
        for url in urls:
            operational = await console.call("PUT", "/operational-webhook", {"url": url})
            webhook = await console.call("POST", "/webhooks", {"url": url, "events": []})
            answers[url] = (await _problems(operational), await _problems(webhook))
        async with store.transaction() as tx:
            kept = await tx.fetchval(
                "SELECT COUNT(*) FROM webhooks WHERE app_id = $1", console.app_id
            )
    for url, (operational, webhook) in answers.items():
        assert operational == webhook, url
        assert operational[0].startswith("url "), url
    assert int(kept) == 0
