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

Beyond the spec (contract.md, third round), an endpoint chooses its signature scheme (its key is
that scheme's: ``_signing_keys.py``), a rate, ordering by record and headers of its own
(``_webhook_controls.py``), and carries its lifecycle: why the engine switched it off, and its
health as outcomes are recorded (``_endpoint_health.py``). The app's operational endpoint is a
row of this table too (kind ``operational``, ``_operational.py``), which no function here
answers: it is not one of the app's webhooks.

A stream endpoint (kind ``stream``, :func:`create_stream_endpoint`) is one of the app's webhooks
whose deliveries its listener (``ledgerport listen``) pulls over HTTP instead of the engine
posting them (``engine/_stream.py``): its ``url`` is where the listener forwards them, which the
service never reaches; it signs with the stripe scheme and has none of the receiver controls. A
listener that stops pulling for STREAM_ABANDONED is gone: :func:`abandoned_streams` finds it.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.keys import Keyring
from ledgerport.storage import Reader, Row, Transaction

from ._apps import ENTITLEMENTS_CHANNEL, App, app_columns, developed_app_in
from ._endpoint_health import Counts, EndpointState, health_window_start
from ._errors import WebhookNotFound
from ._signing_keys import new_signing_key, public_key
from ._targets import Resolver, resolve, webhook_target_problem
from ._webhook_controls import DisabledReason, Ordering, Scheme, control_problems

WebhookKind = Literal["endpoint", "stream"]
"""How an app's webhook gets its deliveries: ``endpoint``, the engine POSTs them (answered as
``push``); ``stream``, its listener pulls them."""
LISTED_KINDS = "kind IN ('endpoint', 'stream')"
STREAMS_PER_APP = 5
"""Stream endpoints an app has at once, at most (besides WEBHOOKS_PER_APP_MAX others)."""
STREAM_ABANDONED = 3600.0
"""Seconds a stream endpoint lives on without a pull: then it is abandoned (deleted by the
scheduler, what waits for it failed); so long its deliveries wait for a listener."""


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
    signature: Scheme = "stripe"
    rate_limit: int | None = None
    ordering: Ordering = "none"
    headers: Mapping[str, str] = field(default_factory=dict)
    public_key: str | None = None
    """A standard-asymmetric endpoint's public key (``whpk_``...); None in the other schemes."""
    disabled_reason: DisabledReason | None = None
    disabled_at: float | None = None
    """When it was last switched off, by the app or the engine (None while it is on)."""
    health: EndpointState = field(default_factory=lambda: EndpointState())
    kind: WebhookKind = "endpoint"

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
            signature=row["signature"],
            rate_limit=row["rate_limit"],
            ordering=row["ordering"],
            headers=json.loads(row["headers"]),
            public_key=row["public_key"],
            disabled_reason=row["disabled_reason"],
            disabled_at=row["disabled_at"],
            health=EndpointState.from_row(row),
            kind="stream" if row["kind"] == "stream" else "endpoint",
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
    controls: Mapping[str, object] | None = None,
) -> None:
    problems = (
        _event_problems(events, await _registered_scopes(tx, app_id)) if events is not None else []
    )
    problems += control_problems(controls or {})
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
    signature: Scheme = "stripe",
    rate_limit: int | None = None,
    ordering: Ordering = "none",
    headers: Mapping[str, str] | None = None,
    development: bool = False,
    loopback: bool = False,
    resolver: Resolver = resolve,
) -> tuple[Webhook, str | None]:
    """A new webhook of the app; answers it and its signing secret (shown only now), or None
    for a standard-asymmetric endpoint, whose public key the webhook carries instead."""
    headers = dict(headers or {})
    controls = {
        "signature": signature,
        "rate_limit": rate_limit,
        "ordering": ordering,
        "headers": headers,
    }
    await _check(
        tx,
        app_id,
        url,
        events,
        development=development,
        loopback=loopback,
        resolver=resolver,
        controls=controls,
    )
    count = await tx.fetchval(
        "SELECT COUNT(*) FROM webhooks WHERE app_id = $1 AND deleted_at IS NULL"
        " AND kind = 'endpoint'",
        app_id,
    )
    if int(count) >= catalog.WEBHOOKS_PER_APP_MAX:
        raise InvalidInput([f"an app has at most {catalog.WEBHOOKS_PER_APP_MAX} webhooks"])
    webhook_id = new_id("wh")
    key = new_signing_key(signature)
    await tx.execute(
        "INSERT INTO webhooks (id, app_id, url, events, enabled, secret, created_at, updated_at,"
        " signature, rate_limit, ordering, headers, public_key, switched_on_at, disabled_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10, $11, $12, $7, $13)",
        webhook_id,
        app_id,
        url,
        json.dumps(list(events)),
        enabled,
        keyring.encrypt(key, context=_secret_context(webhook_id)),
        now,
        signature,
        rate_limit,
        ordering,
        json.dumps(headers),
        public_key(key) if signature == "standard-asymmetric" else None,
        None if enabled else now,
    )
    webhook = await get_webhook(tx, app_id, webhook_id)
    return webhook, None if signature == "standard-asymmetric" else key


def _forward_problem(url: object) -> str | None:
    """What is wrong with a stream endpoint's ``url`` (where its listener forwards; the
    service never reaches it)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return "url must be an http or https URL"
    if len(url) > catalog.URI_MAX_LENGTH or any(c <= " " or c == "\x7f" for c in url):
        return f"url must be at most {catalog.URI_MAX_LENGTH} visible characters"
    return None


async def create_stream_endpoint(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app_id: str,
    url: str,
    events: Sequence[str] | None,
) -> tuple[Webhook, str]:
    """A new stream endpoint of the app (see the module docstring), pulled by a listener from
    ``now`` on, subscribed to ``events`` (None: every event the app may receive); answers it
    and its signing secret (the stripe scheme), shown only now."""
    scopes = await _registered_scopes(tx, app_id)
    if events is None:
        events = [event.name for event in receivable_events(scopes)]
    problems = _event_problems(events, scopes)
    problem = _forward_problem(url)
    if problem is not None:
        problems.insert(0, problem)
    if problems:
        raise InvalidInput(problems)
    count = await tx.fetchval(
        "SELECT COUNT(*) FROM webhooks WHERE app_id = $1 AND deleted_at IS NULL"
        " AND kind = 'stream'",
        app_id,
    )
    if int(count) >= STREAMS_PER_APP:
        raise InvalidInput(
            [f"an app has at most {STREAMS_PER_APP} stream endpoints: stop a listener first"]
        )
    webhook_id = new_id("wh")
    key = new_signing_key("stripe")
    await tx.execute(
        "INSERT INTO webhooks (id, app_id, url, events, enabled, secret, created_at, updated_at,"
        " kind, switched_on_at, stream_seen_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $7, 'stream', $7, $7)",
        webhook_id,
        app_id,
        url,
        json.dumps(list(events)),
        True,
        keyring.encrypt(key, context=_secret_context(webhook_id)),
        now,
    )
    return await get_webhook(tx, app_id, webhook_id), key


async def stream_pulled(tx: Transaction, *, webhook_id: str, now: float) -> None:
    """A listener pulled from the stream endpoint at ``now``: it is not abandoned."""
    await tx.execute(
        "UPDATE webhooks SET stream_seen_at = $1 WHERE id = $2 AND kind = 'stream'",
        now,
        webhook_id,
    )


async def abandoned_streams(tx: Transaction, *, now: float, limit: int = 100) -> list[str]:
    """Delete the stream endpoints no listener pulled from for STREAM_ABANDONED (at most
    ``limit``); answers their ids (``queues.end_stream_deliveries`` then fails what waits for
    them)."""
    rows = await tx.fetch(
        "SELECT id FROM webhooks WHERE kind = 'stream' AND deleted_at IS NULL"
        f" AND stream_seen_at < $1 ORDER BY id LIMIT $2{tx.row_lock}",
        now - STREAM_ABANDONED,
        limit,
    )
    ids = [row["id"] for row in rows]
    for webhook_id in ids:
        await tx.execute(
            "UPDATE webhooks SET deleted_at = $1, updated_at = $1, enabled = $2 WHERE id = $3",
            now,
            False,
            webhook_id,
        )
    if ids:
        await tx.notify(ENTITLEMENTS_CHANNEL)
    return ids


async def _webhook_row(tx: Transaction, app_id: str, webhook_id: str, *, lock: bool) -> Row:
    row = await tx.fetchrow(
        "SELECT * FROM webhooks WHERE id = $1 AND app_id = $2 AND deleted_at IS NULL"
        f" AND {LISTED_KINDS}" + (tx.row_lock if lock else ""),
        webhook_id,
        app_id,
    )
    if row is None:
        raise WebhookNotFound(webhook_id)
    return row


async def get_webhook(tx: Transaction, app_id: str, webhook_id: str) -> Webhook:
    """The app's webhook; WebhookNotFound when it has none with that id (or it was deleted)."""
    return Webhook.from_row(await _webhook_row(tx, app_id, webhook_id, lock=False))


async def get_developed_webhook(
    tx: Transaction, app_id: str, developer_user_id: str, webhook_id: str
) -> tuple[App, Webhook]:
    """The app, when ``developer_user_id`` develops it (AppNotFound otherwise, as
    ``get_developed_app``), and its webhook (:func:`get_webhook`, WebhookNotFound alike), in
    one statement: what the console's pages of a webhook read first."""
    row = await tx.fetchrow(
        f"SELECT {app_columns('a')}, w.* FROM apps a LEFT JOIN webhooks w ON w.app_id = a.id"
        f" AND w.id = $2 AND w.deleted_at IS NULL AND w.{LISTED_KINDS} WHERE a.id = $1",
        app_id,
        webhook_id,
    )
    app = developed_app_in(row, app_id, developer_user_id)
    if row is None or row["id"] is None:
        raise WebhookNotFound(webhook_id)
    return app, Webhook.from_row(row)


async def webhook_secret(tx: Transaction, keyring: Keyring, *, app_id: str, webhook_id: str) -> str:
    """The webhook's current signing secret, for the one answer that shows it right after the
    webhook is made or its secret rotated (the console's page, the answer to a change of
    scheme; nothing else shows it again). A standard-asymmetric endpoint's is its private key,
    which nothing shows: ask for its ``public_key``."""
    row = await _webhook_row(tx, app_id, webhook_id, lock=False)
    return keyring.decrypt(row["secret"], context=_secret_context(row["id"]))


async def list_webhooks(tx: Transaction, app_id: str) -> list[Webhook]:
    """The app's webhooks, oldest first (at most WEBHOOKS_PER_APP_MAX)."""
    rows = await tx.fetch(
        f"SELECT * FROM webhooks WHERE app_id = $1 AND deleted_at IS NULL AND {LISTED_KINDS}"
        " ORDER BY created_at, id",
        app_id,
    )
    return [Webhook.from_row(row) for row in rows]


@dataclass(frozen=True)
class WebhookHealth:
    """A webhook as the console's list shows it first: the webhook (``enabled``,
    ``disabled_reason``, and its ``health``: state, failures in a row, the last delivered, the
    last error) and its counts of the last 24 hours."""

    webhook: Webhook
    counts: Counts


async def webhook_health(reader: Reader, app_id: str, *, now: float) -> list[WebhookHealth]:
    """The app's webhooks as :func:`list_webhooks` lists them, each with its health counts of
    the last 24 hours at ``now`` (``health_counts``): one statement for all."""
    rows = await reader.fetch(
        "SELECT w.*, COALESCE(c.delivered, 0) AS delivered_24h, COALESCE(c.failed, 0) AS"
        " failed_24h FROM webhooks w LEFT JOIN (SELECT webhook_id, SUM(delivered) AS delivered,"
        " SUM(failed) AS failed FROM webhook_health_hours WHERE hour >= $2 AND webhook_id IN"
        " (SELECT id FROM webhooks WHERE app_id = $1 AND deleted_at IS NULL"
        f" AND {LISTED_KINDS}) GROUP BY webhook_id) c ON c.webhook_id = w.id"
        f" WHERE w.app_id = $1 AND w.deleted_at IS NULL AND w.{LISTED_KINDS}"
        " ORDER BY w.created_at, w.id",
        app_id,
        health_window_start(now),
    )
    return [
        WebhookHealth(
            Webhook.from_row(row), Counts(int(row["delivered_24h"]), int(row["failed_24h"]))
        )
        for row in rows
    ]


async def get_webhook_health(
    reader: Reader, app_id: str, webhook_id: str, *, now: float
) -> WebhookHealth:
    """The app's webhook (:func:`get_webhook`, WebhookNotFound alike) with its health counts of
    the last 24 hours at ``now`` (``health_counts``): one statement."""
    row = await reader.fetchrow(
        "SELECT w.*, COALESCE(c.delivered, 0) AS delivered_24h, COALESCE(c.failed, 0) AS"
        " failed_24h FROM webhooks w LEFT JOIN (SELECT webhook_id, SUM(delivered) AS delivered,"
        " SUM(failed) AS failed FROM webhook_health_hours WHERE webhook_id = $1 AND hour >= $3"
        " GROUP BY webhook_id) c ON c.webhook_id = w.id"
        f" WHERE w.id = $1 AND w.app_id = $2 AND w.deleted_at IS NULL AND w.{LISTED_KINDS}",
        webhook_id,
        app_id,
        health_window_start(now),
    )
    if row is None:
        raise WebhookNotFound(webhook_id)
    return WebhookHealth(
        Webhook.from_row(row), Counts(int(row["delivered_24h"]), int(row["failed_24h"]))
    )


async def update_webhook(
    tx: Transaction,
    *,
    now: float,
    app_id: str,
    webhook_id: str,
    changes: Mapping[str, Any],
    keyring: Keyring | None = None,
    development: bool = False,
    loopback: bool = False,
    resolver: Resolver = resolve,
) -> Webhook:
    """Change any of ``url``, ``events``, ``enabled``, ``signature``, ``rate_limit``,
    ``ordering`` and ``headers``; the others stay.

    Switched on (``enabled`` true while it was off), the endpoint's ``disabled_reason`` is
    cleared and the disable rule's window starts again (the engine's core has the same
    transition, ``engine/_health.py``); switched off by the app, the reason stays null. A new
    ``signature`` scheme gets a new key at once (``keyring`` needed), which
    :func:`webhook_secret` then answers (no overlap across schemes: the old key stops signing
    now)."""
    row = await _webhook_row(tx, app_id, webhook_id, lock=True)
    if row["kind"] == "stream":
        fixed = sorted(set(changes) - {"events", "enabled"})
        if fixed:
            raise InvalidInput([f"{name} of a stream endpoint cannot be changed" for name in fixed])
    controls = {
        name: changes[name]
        for name in ("signature", "rate_limit", "ordering", "headers")
        if name in changes
    }
    await _check(
        tx,
        app_id,
        changes.get("url"),
        changes.get("events"),
        development=development,
        loopback=loopback,
        resolver=resolver,
        controls=controls,
    )
    columns: dict[str, object] = {
        name: changes[name] for name in ("url", "rate_limit", "ordering") if name in changes
    }
    if "events" in changes:
        columns["events"] = json.dumps(list(changes["events"]))
    if "headers" in changes:
        columns["headers"] = json.dumps(dict(changes["headers"]))
    if "enabled" in changes:
        enabled = bool(changes["enabled"])
        columns["enabled"] = enabled
        if enabled and not row["enabled"]:
            columns.update(
                disabled_reason=None,
                disabled_at=None,
                switched_on_at=now,
                recent_failures="[]",
            )
        elif not enabled and row["enabled"]:
            columns.update(disabled_reason=None, disabled_at=now)
    scheme = changes.get("signature")
    if scheme is not None and scheme != row["signature"]:
        if keyring is None:
            raise ValueError("a change of signature scheme needs the keyring")
        key = new_signing_key(scheme)
        columns.update(
            signature=scheme,
            secret=keyring.encrypt(key, context=_secret_context(webhook_id)),
            previous_secret=None,
            previous_secret_expires_at=None,
            public_key=public_key(key) if scheme == "standard-asymmetric" else None,
            previous_public_key=None,
        )
    if columns:
        names = list(columns)
        assignments = ", ".join(f"{name} = ${index}" for index, name in enumerate(names, 3))
        await tx.execute(
            f"UPDATE webhooks SET updated_at = $2, {assignments} WHERE id = $1",
            webhook_id,
            now,
            *(columns[name] for name in names),
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


@dataclass(frozen=True)
class Rotation:
    """A new signing key: the secret (shown only now), or for a standard-asymmetric endpoint
    its new public key, and when the previous key stops signing."""

    secret: str | None
    public_key: str | None
    previous_expires_at: float


async def rotate_webhook_secret(
    tx: Transaction, keyring: Keyring, *, now: float, app_id: str, webhook_id: str
) -> Rotation:
    """A new key of the endpoint's scheme; the current one keeps signing (the second ``v1``,
    or ``v1a``) for the overlap, and rotating again within it replaces it."""
    row = await _webhook_row(tx, app_id, webhook_id, lock=True)
    key = new_signing_key(row["signature"])
    asymmetric = row["signature"] == "standard-asymmetric"
    expires_at = now + catalog.WEBHOOK_SECRET_OVERLAP
    await tx.execute(
        "UPDATE webhooks SET previous_secret = secret, previous_secret_expires_at = $1,"
        " secret = $2, updated_at = $3, previous_public_key = public_key, public_key = $5"
        " WHERE id = $4",
        expires_at,
        keyring.encrypt(key, context=_secret_context(row["id"])),
        now,
        webhook_id,
        public_key(key) if asymmetric else None,
    )
    await tx.notify(ENTITLEMENTS_CHANNEL)
    if asymmetric:
        return Rotation(None, public_key(key), expires_at)
    return Rotation(key, None, expires_at)


async def purge_deleted_webhooks(tx: Transaction, *, now: float) -> int:
    """Delete the webhooks deleted more than the delivery history kept (30 days) ago that no
    delivery refers to any more (the cleanup calls it after ``queues.purge_deliveries``);
    answers how many."""
    return await tx.execute(
        "DELETE FROM webhooks WHERE deleted_at IS NOT NULL AND deleted_at < $1 AND NOT EXISTS"
        " (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = webhooks.id)",
        now - catalog.DELIVERY_RETENTION,
    )
