"""What the console says before a consequential action, on both stores, counted by the rules the
action itself applies and changing nothing: the waiting deliveries switching a webhook off
fails (``queues.waiting_deliveries``), what a recovery would queue and skip
(``queues.recover_count``, the same answer as ``queues.recover`` on the same data), and what
activating a function's version changes (``apps.version_diff``). Time is the frozen clock's."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import count
from typing import Any

import pytest
import trio

from ledgerport import apps, books, catalog, queues
from ledgerport.clock import FrozenClock
from ledgerport.errors import InvalidInput
from ledgerport.platform import Platform
from ledgerport.storage import Store, Transaction

from ..receiver import Answer
from .webhook_world import deliver, engine_for, hooked

TIMEOUT = 30
T0 = 1_790_002_800.0
EVENTS = ["customer.created", "invoice.created"]
_NUMBERS = count()


@dataclass
class World:
    """An app installed in business A with customers:read and invoices:read and in B with
    invoices:read only; business C has no installation. Its webhook subscribes to EVENTS."""

    app: apps.App
    businesses: dict[str, str]
    webhook: apps.Webhook
    other_webhook: apps.Webhook


async def _world(platform: Platform) -> World:
    now = T0 - 5 * 86400
    async with platform.store.transaction() as tx:
        user = await books.create_user(
            tx, now=now, email=f"owner{next(_NUMBERS)}@example.com", password_hash="x"
        )
        app, _ = await apps.create_app(
            tx,
            platform.keyring,
            now=now,
            name="Counted",
            type="PUBLIC",
            redirect_uris=["https://app.example/callback"],
            scopes=["customers:read", "invoices:read"],
            developer_user_id=user.id,
            reviewed=True,
        )
        businesses = {}
        for name, scopes in (
            ("A", ["customers:read", "invoices:read"]),
            ("B", ["invoices:read"]),
            ("C", []),
        ):
            business = await books.create_business(tx, now=now, name=name)
            await books.set_membership(
                tx, now=now, business_id=business.id, user_id=user.id, role="owner", active=True
            )
            if scopes:
                await apps.install(
                    tx,
                    now=now,
                    app_id=app.id,
                    business_id=business.id,
                    user_id=user.id,
                    scopes=scopes,
                )
            businesses[name] = business.id
        webhook, _ = await apps.create_webhook(
            tx,
            platform.keyring,
            now=now,
            app_id=app.id,
            url="https://hooks.example/counted",
            events=EVENTS,
            development=True,
        )
        other, _ = await apps.create_webhook(
            tx,
            platform.keyring,
            now=now,
            app_id=app.id,
            url="https://hooks.example/other",
            events=EVENTS,
            development=True,
        )
    return World(app, businesses, webhook, other)


@dataclass(frozen=True)
class Made:
    """A delivery as a case makes it: its event type (None: a test delivery), its business,
    its status and when it was created (seconds before T0), and its record when ordered."""

    type: str | None
    business: str | None
    status: queues.DeliveryStatus = "failed"
    ago: float = 100
    record: tuple[str, int] | None = None
    due: bool = True
    """A waiting delivery has its next attempt due (else it waits its turn behind another)."""


async def _make(tx: Transaction, world: World, webhook: apps.Webhook, made: Made) -> str:
    number = next(_NUMBERS)
    delivery_id = f"dlv_case{number:06}"
    at = T0 - made.ago
    waiting = made.status in ("queued", "retrying")
    await tx.execute(
        "INSERT INTO webhook_deliveries (id, webhook_id, app_id, event_id, business_id, type,"
        " body, status, attempts, created_at, updated_at, next_attempt_at, order_key, event_seq)"
        " VALUES ($1, $2, $3, $4, $5, $6, '{}', $7, $8, $9, $9, $10, $11, $12)",
        delivery_id,
        webhook.id,
        world.app.id,
        None if made.type is None else f"evt_case{number:06}",
        None if made.business is None else world.businesses[made.business],
        made.type or "customer.created",
        made.status,
        0 if made.status == "queued" else 6,
        at,
        at if waiting and made.due else None,
        None if made.record is None else made.record[0],
        None if made.record is None else made.record[1],
    )
    return delivery_id


CUSTOMER = "customer.created"
INVOICE = "invoice.created"


@dataclass(frozen=True)
class Case:
    made: list[Made]
    expected: tuple[int, int]
    """(queued, skipped) of the first recovery."""
    app_status: str = "ACTIVE"
    since_ago: float = 1000
    limit: int = queues.RECOVER_MAX
    next_index: int | None = None
    """Which delivery made the answer's ``next`` names (None: no more are left)."""
    after_index: int | None = None
    """Go on after this delivery made (as a recovery given an earlier one's ``next``)."""


CASES = {
    "every rule lets them go": Case(
        [Made(CUSTOMER, "A"), Made(INVOICE, "B"), Made(None, None)], (3, 0)
    ),
    "a scope or an installation missing": Case(
        [Made(CUSTOMER, "B"), Made(INVOICE, "C"), Made(CUSTOMER, "A")], (1, 2)
    ),
    "the app suspended": Case(
        [Made(CUSTOMER, "A"), Made(None, None)], (0, 2), app_status="SUSPENDED"
    ),
    "the app deactivated": Case([Made(INVOICE, "A")], (0, 1), app_status="DEACTIVATED"),
    "only what failed, created since": Case(
        [
            Made(CUSTOMER, "A", ago=2000),
            Made(CUSTOMER, "A", status="delivered"),
            Made(CUSTOMER, "A", status="queued"),
            Made(CUSTOMER, "A", status="retrying"),
            Made(CUSTOMER, "A", ago=1000),  # created at since itself
        ],
        (1, 0),
    ),
    "ordered by record, behind an open one": Case(
        [
            Made(CUSTOMER, "A", record=("cus_1", 1), ago=300),
            Made(CUSTOMER, "A", record=("cus_1", 2), ago=200),
            Made(CUSTOMER, "A", status="queued", record=("cus_1", 3), ago=100),
        ],
        (2, 0),
    ),
    "bounded": Case(
        [Made(CUSTOMER, "A", ago=500 - n) for n in range(5)], (3, 0), limit=3, next_index=2
    ),
    "going on after a bounded one": Case(
        [Made(CUSTOMER, "A", ago=500 - n) for n in range(5)], (2, 0), limit=3, after_index=2
    ),
    "bounded, with refusals": Case(
        [
            Made(CUSTOMER, "A", ago=400),
            Made(CUSTOMER, "B", ago=300),
            Made(INVOICE, "B", ago=200),
            Made(INVOICE, "C", ago=100),
        ],
        (2, 1),
        limit=3,
        next_index=2,
    ),
    "nothing to recover": Case([Made(CUSTOMER, "A", status="delivered")], (0, 0)),
}


async def _snapshot(tx: Transaction) -> list[dict[str, Any]]:
    rows = await tx.fetch(
        "SELECT id, status, attempts, next_attempt_at, updated_at, lease, last_error"
        " FROM webhook_deliveries ORDER BY id"
    )
    return [dict(row) for row in rows]


@pytest.mark.parametrize("name", list(CASES))
async def test_the_dry_count_of_a_recovery_is_what_the_recovery_does(
    platform: Platform, clock: FrozenClock, name: str
) -> None:
    case = CASES[name]
    clock.set(T0)
    world = await _world(platform)
    async with platform.store.transaction() as tx:
        made = [await _make(tx, world, world.webhook, m) for m in case.made]
        await _make(tx, world, world.other_webhook, Made(CUSTOMER, "A"))
        if case.app_status != "ACTIVE":
            await apps.set_app_status(tx, world.app.id, case.app_status)
    arguments: dict[str, Any] = {
        "now": platform.now(),
        "webhook": world.webhook,
        "since": T0 - case.since_ago,
        "after": None if case.after_index is None else made[case.after_index],
        "limit": case.limit,
    }
    async with platform.store.transaction() as tx:
        before = await _snapshot(tx)
        dry = await queues.recover_count(tx, **arguments)
        unchanged = await _snapshot(tx)
    async with platform.store.transaction() as tx:
        real = await queues.recover(tx, **arguments)
        after = await _snapshot(tx)
    expected = queues.Recovered(
        *case.expected, None if case.next_index is None else made[case.next_index]
    )
    assert dry == real == expected
    assert unchanged == before
    # The recovery itself changed exactly what it counted as queued.
    requeued = [
        row["id"]
        for row, was in zip(after, before, strict=True)
        if (row["status"], was["status"]) == ("queued", "failed")
    ]
    assert len(requeued) == real.queued


@pytest.mark.parametrize("action", ["recover", "recover_count"])
@pytest.mark.parametrize(
    ("since", "after", "problem"),
    [
        (T0 - catalog.DELIVERY_RETENTION - 1, None, "since must be within the last 30 days"),
        (T0 + 1, None, "since must not be in the future"),
        (T0 - 10, "dlv_unknown", "after must be the next of an earlier recovery"),
    ],
)
async def test_a_dry_count_refuses_what_the_recovery_refuses(
    platform: Platform,
    clock: FrozenClock,
    action: str,
    since: float,
    after: str | None,
    problem: str,
) -> None:
    clock.set(T0)
    world = await _world(platform)
    with pytest.raises(InvalidInput) as refused:
        async with platform.store.transaction() as tx:
            await getattr(queues, action)(
                tx, now=platform.now(), webhook=world.webhook, since=since, after=after
            )
    assert any(problem in message for message in refused.value.messages)


async def test_the_waiting_deliveries_are_those_queued_retrying_or_waiting_their_turn(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0)
    world = await _world(platform)
    async with platform.store.transaction() as tx:
        for made in (
            Made(CUSTOMER, "A", status="queued"),
            Made(CUSTOMER, "A", status="queued", record=("cus_1", 1)),
            Made(CUSTOMER, "A", status="queued", record=("cus_1", 2), due=False),
            Made(INVOICE, "B", status="retrying"),
            Made(None, None, status="queued"),
            Made(CUSTOMER, "A", status="delivered"),
            Made(CUSTOMER, "A", status="failed"),
        ):
            await _make(tx, world, world.webhook, made)
        await _make(tx, world, world.other_webhook, Made(CUSTOMER, "A", status="queued"))
    async with platform.store.transaction() as tx:
        waiting = await queues.waiting_deliveries(tx, world.webhook.id)
        others = await queues.waiting_deliveries(tx, world.other_webhook.id)
        none = await queues.waiting_deliveries(tx, "wh_unknown")
    assert (waiting, others, none) == (5, 1, 0)


async def test_switching_a_webhook_off_fails_as_many_deliveries_as_the_count_said(
    platform: Platform,
    client: Any,
    admin_headers: dict[str, str],
    store: Store,
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, EVENTS) as hook,
            engine_for(platform) as engine,
        ):
            webhook_id = hook.webhook["id"]
            hook.receiver.default = Answer(500)
            for name in ("One", "Two", "Three"):
                await hook.api.customer(name)
            await deliver(engine)  # each answered 500: retrying
            await hook.console.ok("POST", f"/webhooks/{webhook_id}/test", status=202)
            async with store.transaction() as tx:
                counted = await queues.waiting_deliveries(tx, webhook_id)
            await hook.console.ok("PATCH", f"/webhooks/{webhook_id}", {"enabled": False})
            clock.advance(catalog.WEBHOOK_RETRY_DELAYS[1])
            await deliver(engine)
            listed = await hook.console.deliveries(webhook_id)
            sent = len(hook.receiver.received)
    failed_unsent = [d for d in listed if d["lastError"] == "not sent: webhook disabled"]
    assert counted == 4
    assert len(failed_unsent) == counted
    assert all(d["status"] == "failed" for d in listed)
    assert sent == 3  # the first attempts only


# --- A function's versions -----------------------------------------------------------------------

VERSION_ONE = """export async function handler(event, context) {
  context.log("one");
  return 1;
}
"""
VERSION_TWO = """export async function handler(event, context) {
  context.log("two");
  const extra = true;
  return 2;
}
"""


async def test_the_diff_of_two_kept_versions_is_read_then_made_outside_the_transaction(
    platform: Platform, clock: FrozenClock
) -> None:
    clock.set(T0)
    world = await _world(platform)
    async with platform.store.transaction() as tx:
        for at, source in ((T0 - 60, VERSION_ONE), (T0, VERSION_TWO)):
            upload = apps.FunctionUpload("f", source, (), apps.compile_module(source))
            function = await apps.put_function(tx, now=at, app=world.app, upload=upload)
        active = await apps.version_source(tx, function, function.version)
        rollback_to = await apps.version_source(tx, function, 1)
        with pytest.raises(apps.FunctionVersionNotFound):
            await apps.version_source(tx, function, 3)
    diff = await apps.version_diff(active, rollback_to)
    assert (diff.old.version, diff.old.active, diff.new.version, diff.new.active) == (
        2,
        True,
        1,
        False,
    )
    assert diff.diff.unified("function.js (version 2)", "function.js (version 1)") == (
        "--- function.js (version 2)\n"
        "+++ function.js (version 1)\n"
        "@@ -1,6 +1,5 @@\n"
        " export async function handler(event, context) {\n"
        '-  context.log("two");\n'
        "-  const extra = true;\n"
        "-  return 2;\n"
        '+  context.log("one");\n'
        "+  return 1;\n"
        " }\n"
        " \n"
    )
    assert (diff.diff.added, diff.diff.removed) == (2, 3)
