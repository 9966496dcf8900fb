"""Webhooks whose deliveries keep failing, per app, without an app id in any label: the rule
(``queues.failing_webhooks``) as a table, the operator's list (``GET /admin/webhooks/failing``)
and the two gauges of ``/metrics``, on both stores with the injected clock."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from ledgerport import queues
from ledgerport.clock import FrozenClock
from ledgerport.http import create_app
from ledgerport.ids import new_id
from ledgerport.platform import Platform
from ledgerport.storage import StorageUnavailable, Store, StoreStatistics

from ..receiver import Answer
from ..stores import open_test_store
from .webhook_world import Hooked, deliver, engine_for, hooked

TIMEOUT = 30
WINDOW = queues.FAILING_WINDOW
DAY = 24 * 3600.0
MINUTE = 60.0
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Ended:
    """A delivery as the engine leaves it: its status, attempts made, when its latest outcome
    was recorded and when it was created (seconds before now), and its error."""

    status: str
    attempts: int = 1
    ago: float = MINUTE
    created_ago: float | None = None
    error: str | None = None


DELIVERED = Ended("delivered")
FAILED = Ended("failed", attempts=6, error="HTTP 500")
RETRYING = Ended("retrying", attempts=2, error="HTTP 503")
REFUSED = Ended("failed", attempts=0, error="not sent: webhook disabled")
WAITING = Ended("queued", attempts=0)


async def _write(store: Store, now: float, hook: Hooked, deliveries: list[Ended]) -> None:
    """The deliveries of the hook's webhook, written as the engine writes them."""
    async with store.transaction() as tx:
        for delivery in deliveries:
            updated = now - delivery.ago
            created = now - (delivery.created_ago or delivery.ago + MINUTE)
            waiting = delivery.status in ("queued", "retrying")
            await tx.execute(
                "INSERT INTO webhook_deliveries (id, webhook_id, app_id, event_id, business_id,"
                " type, body, status, attempts, response_code, last_error, created_at,"
                " updated_at, next_attempt_at)"
                " VALUES ($1, $2, $3, NULL, $4, 'customer.created', '{}', $5, $6, $7, $8, $9,"
                " $10, $11)",
                new_id("dlv"),
                hook.webhook["id"],
                hook.api.world.app_id,
                hook.api.world.business_id,
                delivery.status,
                delivery.attempts,
                200 if delivery.status == "delivered" else None,
                delivery.error,
                created,
                updated,
                now + 300 if waiting else None,
            )


async def _failing(store: Store, now: float) -> list[queues.FailingWebhook]:
    return await queues.failing_webhooks(
        store.autocommit,
        since=now - WINDOW,
        at_least=queues.FAILING_AT_LEAST,
    )


# (deliveries of one webhook, (ended, failed, retrying) when it counts as failing, else None)
RULE = {
    "every one of five failed or waits for a retry": (
        [FAILED] * 3 + [RETRYING] * 2,
        (5, 3, 2),
    ),
    "three of five: more than half": ([FAILED, FAILED, RETRYING, DELIVERED, DELIVERED], (5, 2, 1)),
    "three of six: half is not more than half": (
        [FAILED, FAILED, RETRYING, DELIVERED, DELIVERED, DELIVERED],
        None,
    ),
    "four, all failed: too few to tell": ([FAILED] * 4, None),
    "ended exactly at the window's start: counted": (
        [replace(FAILED, ago=WINDOW)] * 5,
        (5, 5, 0),
    ),
    "ended before the window": ([replace(FAILED, ago=WINDOW + 1)] * 5, None),
    "refused unsent: says nothing of the receiver": ([REFUSED] * 5 + [FAILED] * 4, None),
    "refused after attempts: not counted either": (
        [replace(REFUSED, attempts=3)] * 5 + [DELIVERED],
        None,
    ),
    "waiting for a first attempt: not ended": ([WAITING] * 5 + [RETRYING] * 4, None),
    "retried hours after it was created: counted": (
        [replace(RETRYING, created_ago=8 * 3600.0)] * 5,
        (5, 0, 5),
    ),
    "created days before, ended in the window: counted": (
        [replace(FAILED, created_ago=3 * DAY)] * 5,
        (5, 5, 0),
    ),
}


@pytest.mark.parametrize(("deliveries", "expected"), RULE.values(), ids=RULE.keys())
async def test_the_rule_of_a_failing_webhook(
    store: Store,
    client: Any,
    admin_headers: dict[str, str],
    clock: FrozenClock,
    deliveries: list[Ended],
    expected: tuple[int, int, int] | None,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await _write(store, clock.now(), hook, deliveries)
            failing = await _failing(store, clock.now())

    if expected is None:
        assert failing == []
        return
    (webhook,) = failing
    assert (webhook.ended, webhook.failed, webhook.retrying) == expected
    assert webhook.webhook_id == hook.webhook["id"]
    assert webhook.app_id == hook.api.world.app_id
    assert webhook.url == hook.webhook["url"]
    assert webhook.developer_email == hook.api.world.email
    assert webhook.app_status == "ACTIVE"
    assert webhook.enabled is True


async def test_the_latest_failure_is_named_and_a_deleted_webhook_is_not_listed(
    store: Store, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    now = clock.now()
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await _write(
                store,
                now,
                hook,
                [replace(FAILED, ago=600), replace(RETRYING, ago=60, error="timed out")]
                + [replace(FAILED, ago=300)] * 3
                + [replace(DELIVERED, ago=30)],
            )
            (named,) = await _failing(store, now)
            await hook.console.ok("DELETE", f"/webhooks/{hook.webhook['id']}", status=204)
            after_delete = await _failing(store, now)

    assert (named.last_error, named.last_response_code) == ("timed out", None)
    assert named.last_ended_at == now - 30  # the delivered one is the latest to end
    assert after_delete == []


class _Recorded:
    """A reader that keeps the statement it is asked and answers no rows."""

    sql = ""

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        self.sql = sql
        return []


async def test_the_count_reads_the_window_not_the_history() -> None:
    """Every read of the deliveries goes through the index on ``updated_at``: the count runs
    every 30 seconds for /metrics (on SQLite on the event loop), and a scan of the history grew
    with every day the service ran."""
    recorded = _Recorded()
    await queues.failing_webhooks(recorded, since=0.0, at_least=queues.FAILING_AT_LEAST)
    async with open_test_store("sqlite") as store:
        plan = [
            row["detail"]
            for row in await store.autocommit.fetch(
                f"EXPLAIN QUERY PLAN {recorded.sql}", 0.0, queues.FAILING_AT_LEAST
            )
        ]

    reads = [step for step in plan if step.startswith(("SCAN d", "SEARCH d"))]
    assert reads == [
        "SEARCH d USING INDEX webhook_deliveries_updated (updated_at>?)",
        "SEARCH d USING INDEX webhook_deliveries_updated (updated_at=?)",
    ], plan


def _operations_example() -> Any:
    """The answer docs/operations.md shows for GET /admin/webhooks/failing."""
    text = (ROOT / "docs" / "operations.md").read_text()
    after = text[text.index("/admin/webhooks/failing?") :]
    opening = after.index("```json\n") + len("```json\n")
    return json.loads(after[opening : after.index("```", opening)])


async def _admin_failing(client: Any, admin_headers: dict[str, str], query: str = "") -> Any:
    response = await client.get(f"/admin/webhooks/failing{query}", headers=admin_headers)
    return response.status_code, await response.get_json()


async def _gauges(client: Any) -> dict[str, float]:
    text = await (await client.get("/metrics")).get_data(as_text=True)
    wanted = {"ledgerport_webhook_apps_failing", "ledgerport_webhooks_failing"}
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in wanted
    }


async def test_a_receiver_that_fails_makes_its_app_listed_and_counted(
    platform: Platform, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as hook,
            engine_for(platform) as engine,
        ):
            hook.receiver.default = Answer(500)
            for index in range(queues.FAILING_AT_LEAST):
                await hook.api.customer(f"Customer {index}")
            await deliver(engine)
            deliveries = await hook.console.deliveries(hook.webhook["id"])
            status, listed = await _admin_failing(client, admin_headers)
            gauges = await _gauges(client)

            clock.advance(WINDOW + 1)  # their outcomes age out of the window
            _, later = await _admin_failing(client, admin_headers)
            wider_status, wider = await _admin_failing(client, admin_headers, "?window=3600")

    assert {d["status"] for d in deliveries} == {"retrying"}
    assert status == 200
    assert listed["next"] is None
    (app,) = listed["data"]
    assert app == {
        "appId": hook.api.world.app_id,
        "appName": app["appName"],
        "appStatus": "ACTIVE",
        "developerEmail": hook.api.world.email,
        "webhooks": [
            {
                "id": hook.webhook["id"],
                "url": hook.receiver.url,
                "enabled": True,
                "ended": 5,
                "failed": 0,
                "retrying": 5,
                "lastEndedAt": app["webhooks"][0]["lastEndedAt"],
                "lastError": "HTTP 500",
                "lastResponseCode": 500,
            }
        ],
    }
    assert app["webhooks"][0]["lastEndedAt"].endswith("Z")
    shown = _operations_example()
    assert shown.keys() == listed.keys()
    assert shown["data"][0].keys() == app.keys()
    assert shown["data"][0]["webhooks"][0].keys() == app["webhooks"][0].keys()
    assert gauges == {"ledgerport_webhook_apps_failing": 1, "ledgerport_webhooks_failing": 1}
    assert later["data"] == []
    assert wider_status == 200
    assert [a["appId"] for a in wider["data"]] == [hook.api.world.app_id]


async def test_apps_are_listed_most_failures_first_with_their_webhooks(
    store: Store, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    now = clock.now()
    with trio.fail_after(TIMEOUT):
        async with (
            hooked(client, admin_headers, ["customer.created"]) as few,
            hooked(client, admin_headers, ["customer.created"]) as many,
        ):
            second = await many.console.webhook(many.receiver.url, ["invoice.created"])
            await _write(store, now, few, [FAILED] * 5)
            await _write(store, now, many, [FAILED] * 5)
            await _write(store, now, replace(many, webhook=second), [RETRYING] * 6)
            status, listed = await _admin_failing(client, admin_headers)
            gauges = await _gauges(client)

    assert status == 200
    assert [app["appId"] for app in listed["data"]] == [
        many.api.world.app_id,
        few.api.world.app_id,
    ]
    assert {hook["id"] for hook in listed["data"][0]["webhooks"]} == {
        many.webhook["id"],
        second["id"],
    }
    assert gauges == {"ledgerport_webhook_apps_failing": 2, "ledgerport_webhooks_failing": 3}


async def test_the_gauges_are_counted_again_only_after_the_refresh_interval(
    store: Store, client: Any, admin_headers: dict[str, str], clock: FrozenClock
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            first = await _gauges(client)
            await _write(store, clock.now(), hook, [FAILED] * 5)
            clock.advance(29)
            cached = await _gauges(client)
            clock.advance(2)
            counted = await _gauges(client)

    assert first["ledgerport_webhooks_failing"] == 0
    assert cached["ledgerport_webhooks_failing"] == 0
    assert counted["ledgerport_webhooks_failing"] == 1


class _BrokenReader:
    """A database that stopped answering, for the count alone."""

    async def fetch(self, sql: str, *args: Any) -> Any:
        raise StorageUnavailable("database is down")

    fetchrow = fetchval = fetch


@dataclass
class _StoreWithoutReads:
    inner: Store

    @property
    def kind(self) -> Any:
        return self.inner.kind

    @property
    def autocommit(self) -> Any:
        return _BrokenReader()

    def statistics(self) -> StoreStatistics:
        return self.inner.statistics()


async def test_metrics_answer_and_keep_the_last_count_when_the_count_fails(
    platform: Platform,
    store: Store,
    client: Any,
    admin_headers: dict[str, str],
    clock: FrozenClock,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, ["customer.created"]) as hook:
            await _write(store, platform.now(), hook, [FAILED] * 5)
            counted = await _gauges(client)
            clock.advance(60)
            broken = replace(platform, store=_StoreWithoutReads(store))  # type: ignore[arg-type]
            response = await create_app(broken).test_client().get("/metrics")
            text = await response.get_data(as_text=True)

    assert counted["ledgerport_webhooks_failing"] == 1
    assert response.status_code == 200
    assert "ledgerport_webhooks_failing 1.0" in text


@pytest.mark.parametrize(
    "query",
    [
        "?window=59",
        "?window=86401",
        "?window=abc",
        "?window=-5",
        "?window=1e3",
        "?window=%D9%A3%D9%A0%D9%A0",  # Arabic-Indic digits: int() would read them
        "?window=" + "9" * 5000,
        "?atLeast=0",
        "?atLeast=1001",
        "?atLeast=",
    ],
)
async def test_bad_parameters_are_a_validation_400(
    client: Any, admin_headers: dict[str, str], query: str
) -> None:
    status, body = await _admin_failing(client, admin_headers, query)

    assert status == 400
    assert isinstance(body["message"], list)
    assert "code" not in body


async def test_the_list_needs_the_admin_token(client: Any) -> None:
    response = await client.get("/admin/webhooks/failing")

    assert response.status_code == 401


@pytest.mark.parametrize(
    "document",
    [
        ROOT / "ops" / "prometheus" / "ledgerport.rules.yml",
        ROOT / "docs" / "operations.md",
    ],
    ids=lambda path: path.name,
)
def test_the_alert_and_the_docs_state_the_window_and_the_threshold(document: Path) -> None:
    text = " ".join(document.read_text().split())
    assert f"ended in the last {int(WINDOW // 60)} minutes" in text
    assert f"at least {queues.FAILING_AT_LEAST} and more than half" in text
