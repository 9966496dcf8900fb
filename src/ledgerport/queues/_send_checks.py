"""The send-time check (spec: States: Webhook delivery, "send-time check"): what the attempts of
one webhook's deliveries need, read just before they are sent: the URL and the signing secrets,
or why each delivery must fail without being sent."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledgerport.apps import Scheme, signing_secrets
from ledgerport.keys import Keyring
from ledgerport.storage import Row, Transaction, placeholders

from ._deliveries import ClaimedDelivery
from ._entitlement import gating_scope, installation_scopes


@dataclass(frozen=True)
class SendPlan:
    """What attempts of one webhook's deliveries need, read just before they are sent: the URL
    and the signing secrets, or why each delivery must fail without being sent."""

    url: str
    secrets: tuple[str, ...]
    refusals: Mapping[str, str]
    """Delivery id → why it fails unsent (spec: the send-time check)."""
    secrets_change_at: float | None = None
    """When the previous secret stops signing (the plan's secrets are wrong from then on)."""
    scheme: Scheme = "stripe"
    """How the attempts are signed (``secrets`` are that scheme's keys)."""
    headers: tuple[tuple[str, str], ...] = ()
    """The endpoint's own headers, sent after ours."""
    rate_limit: int | None = None
    """Attempts a second the endpoint takes at most, across every process (None: no limit)."""


async def send_plan(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    webhook_id: str,
    deliveries: Sequence[ClaimedDelivery],
) -> SendPlan:
    """The send-time check of ``deliveries``, all of ``webhook_id`` (see :func:`send_plans`)."""
    plans = await send_plans(tx, keyring, now=now, deliveries={webhook_id: deliveries})
    return plans[webhook_id]


async def send_plans(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    deliveries: Mapping[str, Sequence[ClaimedDelivery]],
) -> dict[str, SendPlan]:
    """The send-time check of each webhook's ``deliveries``, in two queries whatever their
    number: the webhook deleted or switched off, the app suspended or deactivated, and for
    business and privacy events the app no longer installed in the business or the event's
    gating scope no longer held."""
    webhook_ids = sorted(deliveries)
    if not webhook_ids:
        return {}
    rows = await tx.fetch(
        "SELECT w.*, a.status AS app_status, a.scopes AS app_scopes FROM webhooks w"
        f" JOIN apps a ON a.id = w.app_id WHERE w.id IN ({placeholders(len(webhook_ids))})",
        *webhook_ids,
    )
    by_id = {row["id"]: row for row in rows}
    gated = {
        webhook_id: [d for d in batch if d.event_id is not None and gating_scope(d.type)]
        for webhook_id, batch in deliveries.items()
    }
    granted = await installation_scopes(
        tx,
        sorted({by_id[w]["app_id"] for w, batch in gated.items() if batch and w in by_id}),
        sorted({d.business_id for batch in gated.values() for d in batch if d.business_id}),
    )
    return {
        webhook_id: plan_for(
            by_id.get(webhook_id), deliveries[webhook_id], gated[webhook_id], granted, keyring, now
        )
        for webhook_id in webhook_ids
    }


def plan_for(
    row: Row | None,
    deliveries: Sequence[ClaimedDelivery],
    gated: Sequence[ClaimedDelivery],
    granted: Mapping[tuple[str, str], frozenset[str]],
    keyring: Keyring,
    now: float,
) -> SendPlan:
    if row is None:
        return SendPlan("", (), {d.id: "webhook deleted" for d in deliveries})
    common: str | None = None
    if row["deleted_at"] is not None:
        common = "webhook deleted"
    elif not row["enabled"]:
        common = "webhook disabled"
    elif row["app_status"] != "ACTIVE":
        common = f"app {row['app_status'].lower()}"
    if common is not None:
        return SendPlan(row["url"], (), {d.id: common for d in deliveries})
    app_scopes = frozenset(json.loads(row["app_scopes"]))
    refusals: dict[str, str] = {}
    for delivery in gated:
        scope = gating_scope(delivery.type)
        held = granted.get((row["app_id"], delivery.business_id or ""))
        if held is None:
            refusals[delivery.id] = "app not installed in the business"
        elif scope not in held or scope not in app_scopes:
            refusals[delivery.id] = f"scope {scope} no longer held"
    overlap_ends = row["previous_secret_expires_at"]
    headers = row["headers"]
    return SendPlan(
        row["url"],
        signing_secrets(row, keyring, now=now),
        refusals,
        overlap_ends if overlap_ends is not None and overlap_ends > now else None,
        scheme=row["signature"],
        headers=tuple((json.loads(headers) if isinstance(headers, str) else headers).items()),
        rate_limit=row["rate_limit"],
    )
