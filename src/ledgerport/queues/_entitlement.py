"""Who may still receive what: an event's gating scope, and the scopes ACTIVE installations grant
(spec: Webhook registration and audiences). The send-time check and redelivery read them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ledgerport import catalog
from ledgerport.storage import Transaction, placeholders


def gating_scope(event_type: str) -> str | None:
    """The scope an app must hold to receive an event of ``event_type`` (None for app events,
    which reach their app whatever it holds)."""
    kind = catalog.event_type(event_type)
    return None if kind is None or kind.audience == "app" else kind.scope


async def installation_scopes(
    tx: Transaction, app_ids: Sequence[str], business_ids: Sequence[str]
) -> dict[tuple[str, str], frozenset[str]]:
    """The scopes each (app, business) ACTIVE installation grants (absent: none)."""
    if not app_ids or not business_ids:
        return {}
    rows = await tx.fetch(
        "SELECT app_id, business_id, scopes FROM installations WHERE state = 'ACTIVE'"
        f" AND app_id IN ({placeholders(len(app_ids))})"
        f" AND business_id IN ({placeholders(len(business_ids), start=len(app_ids) + 1)})",
        *app_ids,
        *business_ids,
    )
    return {
        (row["app_id"], row["business_id"]): frozenset(json.loads(row["scopes"])) for row in rows
    }
