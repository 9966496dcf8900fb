"""Operational events: what happens to an app's endpoints, told to its developer (contract.md,
third round: Operational events), not to businesses.

The engine records ``webhook.endpoint.failing`` (the first delivery of a healthy endpoint failed
for good), ``webhook.endpoint.disabled`` (the engine switched it off: ``data.reason`` as its
``disabledReason``) and ``webhook.endpoint.recovered`` (an attempt succeeded after ``failing``)
here, and the console shows them on the app's page. When the app has an operational endpoint, each
is also delivered to it, as a delivery with no event, signed (the ``stripe`` scheme) and retried
like any other: the endpoint is a row of ``webhooks`` of kind ``operational``, subscribed to no
event of the log, which the app's webhook list never shows and whose own trouble raises no
operational event (it would have nowhere to go).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.keys import Keyring
from ledgerport.storage import Row, Transaction

from ._apps import ENTITLEMENTS_CHANNEL
from ._signing_keys import new_signing_key
from ._targets import Resolver, resolve, webhook_target_problem

OperationalType = Literal[
    "webhook.endpoint.failing", "webhook.endpoint.disabled", "webhook.endpoint.recovered"
]
OPERATIONAL_TYPES: Final[tuple[OperationalType, ...]] = get_args(OperationalType)
OPERATIONAL_EVENTS_SHOWN: Final = 50
"""Operational events the console's app page lists, newest first."""


@dataclass(frozen=True)
class OperationalEvent:
    id: str
    app_id: str
    webhook_id: str
    type: OperationalType
    data: dict[str, Any]
    created_at: float

    @classmethod
    def from_row(cls, row: Row) -> OperationalEvent:
        return cls(
            id=row["id"],
            app_id=row["app_id"],
            webhook_id=row["webhook_id"],
            type=row["type"],
            data=json.loads(row["data"]),
            created_at=float(row["created_at"]),
        )

    def body(self) -> str:
        """What the operational endpoint receives: ``{id, type, created, data}``."""
        return json.dumps(
            {"id": self.id, "type": self.type, "created": int(self.created_at), "data": self.data},
            separators=(",", ":"),
        )


def _secret_context(webhook_id: str) -> str:
    return f"webhook-secret:{webhook_id}"


async def operational_webhook(tx: Transaction, app_id: str) -> Row | None:
    """The app's operational endpoint (not deleted), or None."""
    return await tx.fetchrow(
        "SELECT * FROM webhooks WHERE app_id = $1 AND kind = 'operational' AND deleted_at IS NULL",
        app_id,
    )


async def set_operational_webhook(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app_id: str,
    url: str,
    development: bool = False,
    loopback: bool = False,
    resolver: Resolver = resolve,
) -> tuple[str, str]:
    """Make ``url`` the app's operational endpoint, by the rules of a webhook's URL; answers
    the URL and its signing secret (the ``stripe`` scheme). An app that has one keeps its
    secret: only the URL changes."""
    problem = await webhook_target_problem(
        url, development=development, loopback=loopback, resolver=resolver
    )
    if problem is not None:
        raise InvalidInput([f"url {problem}"])
    row = await operational_webhook(tx, app_id)
    if row is not None:
        await tx.execute(
            "UPDATE webhooks SET url = $1, updated_at = $2, enabled = $3,"
            " disabled_reason = NULL, disabled_at = NULL WHERE id = $4",
            url,
            now,
            True,
            row["id"],
        )
        secret = keyring.decrypt(row["secret"], context=_secret_context(row["id"]))
    else:
        webhook_id = new_id("wh")
        secret = new_signing_key("stripe")
        await tx.execute(
            "INSERT INTO webhooks (id, app_id, url, events, enabled, secret, created_at,"
            " updated_at, kind, switched_on_at) VALUES ($1, $2, $3, '[]', $4, $5, $6, $6,"
            " 'operational', $6)",
            webhook_id,
            app_id,
            url,
            True,
            keyring.encrypt(secret, context=_secret_context(webhook_id)),
            now,
        )
    await tx.notify(ENTITLEMENTS_CHANNEL)
    return url, secret


async def delete_operational_webhook(tx: Transaction, *, now: float, app_id: str) -> bool:
    """The app has no operational endpoint any more (what waits for it fails unsent); answers
    whether it had one."""
    deleted = await tx.execute(
        "UPDATE webhooks SET deleted_at = $1, updated_at = $1, enabled = $2"
        " WHERE app_id = $3 AND kind = 'operational' AND deleted_at IS NULL",
        now,
        False,
        app_id,
    )
    if deleted:
        await tx.notify(ENTITLEMENTS_CHANNEL)
    return bool(deleted)


async def add_operational_event(
    tx: Transaction,
    *,
    now: float,
    app_id: str,
    webhook_id: str,
    type: OperationalType,
    data: dict[str, Any],
) -> OperationalEvent:
    """Record an operational event of the app's endpoint ``webhook_id``."""
    event = OperationalEvent(
        new_id("oev"), app_id, webhook_id, type, {"webhookId": webhook_id, **data}, now
    )
    await tx.execute(
        "INSERT INTO operational_events (id, app_id, webhook_id, type, data, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        event.id,
        app_id,
        webhook_id,
        type,
        json.dumps(event.data),
        now,
    )
    return event


async def operational_events(
    tx: Transaction, app_id: str, *, limit: int = OPERATIONAL_EVENTS_SHOWN
) -> list[OperationalEvent]:
    """The app's newest operational events, newest first."""
    rows = await tx.fetch(
        "SELECT * FROM operational_events WHERE app_id = $1"
        " ORDER BY created_at DESC, id DESC LIMIT $2",
        app_id,
        limit,
    )
    return [OperationalEvent.from_row(row) for row in rows]


async def purge_operational_events(tx: Transaction, *, now: float) -> int:
    """Delete operational events past the history kept (30 days); answers how many."""
    return await tx.execute(
        "DELETE FROM operational_events WHERE created_at < $1", now - catalog.DELIVERY_RETENTION
    )
