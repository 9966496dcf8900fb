"""An app's webhooks: URL, subscribed events, signing secret and its rotation (spec: Webhook
registration and audiences, Secret rotation; contract.md: Developer console API).

A webhook subscribes to events the app may receive: app events, and business and privacy events
whose gating scope the app registers (the fan-out never delivers the others, so subscribing to
one is refused). A secret is ``whsec_`` and 256 random bits, shown once (at creation or
rotation) and kept encrypted under the root key, because every attempt signs with it. After a
rotation the previous secret signs too, as the second ``v1``, for 24 hours; rotating again
within them replaces it, so at most two secrets ever sign. Deleting a webhook keeps its row
(``deleted_at``): deliveries still waiting for it fail at send time, and its history stays until
the cleanup.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Row, Transaction

from ._apps import ENTITLEMENTS_CHANNEL
from ._errors import WebhookNotFound
from ._targets import Resolver, resolve, webhook_target_problem


def _secret_context(webhook_id: str) -> str:
    return f"webhook-secret:{webhook_id}"


@dataclass(frozen=True)
class Webhook:
    id: str
    app_id: str
    url: str
    events: tuple[str, ...]
    enabled: bool
    created_at: float
    updated_at: float
    deleted: bool
    previous_secret_expires_at: float | None

    @classmethod
    def from_row(cls, row: Row) -> Webhook:
        return cls(
            id=row["id"],
            app_id=row["app_id"],
            url=row["url"],
            events=tuple(json.loads(row["events"])),
            enabled=bool(row["enabled"]),
            created_at=float(row["created_at"]),
            updated_at=float(row["updated_at"]),
            deleted=row["deleted_at"] is not None,
            previous_secret_expires_at=row["previous_secret_expires_at"],
        )

    @property
    def test_event_type(self) -> str:
        """The type of a test delivery: the first subscribed event, else invoice.created."""
        return self.events[0] if self.events else catalog.DEFAULT_TEST_EVENT


def signing_secrets(row: Row, keyring: Keyring, *, now: float) -> tuple[str, ...]:
    """The secrets that sign an attempt at ``now``: the current one, then the previous one while
    its overlap lasts."""
    context = _secret_context(row["id"])
    secrets = [keyring.decrypt(row["secret"], context=context)]
    expires = row["previous_secret_expires_at"]
    if row["previous_secret"] is not None and expires is not None and expires > now:
        secrets.append(keyring.decrypt(row["previous_secret"], context=context))
    return tuple(secrets)


def receivable(event: catalog.EventType, scopes: Collection[str]) -> bool:
    """Whether an app registering ``scopes`` may receive ``event``: an app event always, a
    business or privacy event when its gating scope is among them."""
    return event.audience == "app" or event.scope in scopes


def receivable_events(scopes: Collection[str]) -> tuple[catalog.EventType, ...]:
    """The events of the catalog an app registering ``scopes`` may subscribe a webhook to, in
    the catalog's order."""
    return tuple(event for event in catalog.EVENTS if receivable(event, scopes))


def _event_problems(events: object, scopes: Collection[str]) -> list[str]:
    if not isinstance(events, Sequence) or isinstance(events, str):
        return ["events must be a list of event names"]
    return subscription_problems(events, scopes)


def subscription_problems(events: Sequence[object], scopes: Collection[str]) -> list[str]:
    """What is wrong with a webhook's or a function's ``events`` for an app registering
    ``scopes``: names not in the catalog, events it may not receive (:func:`receivable`), and
    repeats."""
    problems = []
    for index, name in enumerate(events):
        kind = catalog.event_type(name) if isinstance(name, str) else None
        if kind is None:
            problems.append(f"events.{index} {name!r} is not an event of the catalog")
        elif not receivable(kind, scopes):
            problems.append(
                f"events.{index} {name!r} needs the scope {kind.scope},"
                " which the app does not register"
            )
    if len(set(events)) != len(events):
        problems.append("events must not repeat an event")
    return problems


async def _registered_scopes(tx: Transaction, app_id: str) -> tuple[str, ...]:
    scopes = await tx.fetchval("SELECT scopes FROM apps WHERE id = $1", app_id)
    return tuple(json.loads(scopes)) if scopes is not None else ()


async def _check(
    tx: Transaction,
    app_id: str,
    url: object,
    events: object,
    *,
    development: bool,
    loopback: bool,
    resolver: Resolver,
) -> None:
    problems = (
        _event_problems(events, await _registered_scopes(tx, app_id)) if events is not None else []
    )
    if url is not None:
        problem = await webhook_target_problem(
            url, development=development, loopback=loopback, resolver=resolver
        )
        if problem is not None:
            problems.insert(0, f"url {problem}")
    if problems:
        raise InvalidInput(problems)


async def create_webhook(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app_id: str,
    url: str,
    events: Sequence[str],
    enabled: bool = True,
    development: bool = False,
    loopback: bool = False,
    resolver: Resolver = resolve,
) -> tuple[Webhook, str]:
    """A new webhook of the app; answers it and its signing secret (shown only now)."""
    await _check(
        tx, app_id, url, events, development=development, loopback=loopback, resolver=resolver
    )
    count = await tx.fetchval(
        "SELECT COUNT(*) FROM webhooks WHERE app_id = $1 AND deleted_at IS NULL", app_id
    )
    if int(count) >= catalog.WEBHOOKS_PER_APP_MAX:
        raise InvalidInput([f"an app has at most {catalog.WEBHOOKS_PER_APP_MAX} webhooks"])
    webhook_id = new_id("wh")
    secret = new_token(catalog.WEBHOOK_SECRET_PREFIX)
    await tx.execute(
        "INSERT INTO webhooks (id, app_id, url, events, enabled, secret, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        webhook_id,
        app_id,
        url,
        json.dumps(list(events)),
        enabled,
        keyring.encrypt(secret, context=_secret_context(webhook_id)),
        now,
    )
    return await get_webhook(tx, app_id, webhook_id), secret


async def _webhook_row(tx: Transaction, app_id: str, webhook_id: str, *, lock: bool) -> Row:
    row = await tx.fetchrow(
        "SELECT * FROM webhooks WHERE id = $1 AND app_id = $2 AND deleted_at IS NULL"
        + (tx.row_lock if lock else ""),
        webhook_id,
        app_id,
    )
    if row is None:
        raise WebhookNotFound(webhook_id)
    return row


async def get_webhook(tx: Transaction, app_id: str, webhook_id: str) -> Webhook:
    """The app's webhook; WebhookNotFound when it has none with that id (or it was deleted)."""
    return Webhook.from_row(await _webhook_row(tx, app_id, webhook_id, lock=False))


async def webhook_secret(tx: Transaction, keyring: Keyring, *, app_id: str, webhook_id: str) -> str:
    """The webhook's current signing secret, for the one answer that shows it right after the
    webhook is made or its secret rotated (the console's page; nothing else shows it again)."""
    row = await _webhook_row(tx, app_id, webhook_id, lock=False)
    return keyring.decrypt(row["secret"], context=_secret_context(row["id"]))


async def list_webhooks(tx: Transaction, app_id: str) -> list[Webhook]:
    """The app's webhooks, oldest first (at most WEBHOOKS_PER_APP_MAX)."""
    rows = await tx.fetch(
        "SELECT * FROM webhooks WHERE app_id = $1 AND deleted_at IS NULL ORDER BY created_at, id",
        app_id,
    )
    return [Webhook.from_row(row) for row in rows]


async def update_webhook(
    tx: Transaction,
    *,
    now: float,
    app_id: str,
    webhook_id: str,
    changes: Mapping[str, Any],
    development: bool = False,
    loopback: bool = False,
    resolver: Resolver = resolve,
) -> Webhook:
    """Change any of ``url``, ``events``, ``enabled``; the others stay."""
    await _webhook_row(tx, app_id, webhook_id, lock=True)
    await _check(
        tx,
        app_id,
        changes.get("url"),
        changes.get("events"),
        development=development,
        loopback=loopback,
        resolver=resolver,
    )
    columns = {
        "url": changes.get("url"),
        "events": json.dumps(list(changes["events"])) if "events" in changes else None,
        "enabled": changes.get("enabled"),
    }
    for column, value in columns.items():
        if column in changes:
            await tx.execute(
                f"UPDATE webhooks SET {column} = $1, updated_at = $2 WHERE id = $3",
                value,
                now,
                webhook_id,
            )
    await tx.notify(ENTITLEMENTS_CHANNEL)
    return await get_webhook(tx, app_id, webhook_id)


async def delete_webhook(tx: Transaction, *, now: float, app_id: str, webhook_id: str) -> None:
    """Delete the webhook: nothing more is created for it, and what waits fails at send time."""
    await _webhook_row(tx, app_id, webhook_id, lock=True)
    await tx.execute(
        "UPDATE webhooks SET deleted_at = $1, updated_at = $1, enabled = $2 WHERE id = $3",
        now,
        False,
        webhook_id,
    )
    await tx.notify(ENTITLEMENTS_CHANNEL)


async def rotate_webhook_secret(
    tx: Transaction, keyring: Keyring, *, now: float, app_id: str, webhook_id: str
) -> tuple[str, float]:
    """A new secret; the current one keeps signing as the second v1 for the overlap. Answers
    the new secret (shown only now) and when the previous one stops signing."""
    row = await _webhook_row(tx, app_id, webhook_id, lock=True)
    secret = new_token(catalog.WEBHOOK_SECRET_PREFIX)
    expires_at = now + catalog.WEBHOOK_SECRET_OVERLAP
    await tx.execute(
        "UPDATE webhooks SET previous_secret = secret, previous_secret_expires_at = $1,"
        " secret = $2, updated_at = $3 WHERE id = $4",
        expires_at,
        keyring.encrypt(secret, context=_secret_context(row["id"])),
        now,
        webhook_id,
    )
    await tx.notify(ENTITLEMENTS_CHANNEL)
    return secret, expires_at


async def purge_deleted_webhooks(tx: Transaction, *, now: float) -> int:
    """Delete the webhooks deleted more than the delivery history kept (30 days) ago that no
    delivery refers to any more (the cleanup calls it after ``queues.purge_deliveries``);
    answers how many."""
    return await tx.execute(
        "DELETE FROM webhooks WHERE deleted_at IS NOT NULL AND deleted_at < $1 AND NOT EXISTS"
        " (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = webhooks.id)",
        now - catalog.DELIVERY_RETENTION,
    )
