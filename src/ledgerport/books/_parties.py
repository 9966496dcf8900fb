"""Customers and suppliers: the parties a business invoices and buys from.

Every change records its event in the same transaction (``customer.created``, ...), whose data
is the record as the API answers it.
"""

from __future__ import annotations

from typing import Any, Literal

from ledgerport.storage import Transaction

from ._events import record_event
from ._records import (
    Document,
    delete_record,
    get_record,
    insert_record,
    iso,
    save_record,
    unchanged,
)

PartyKind = Literal["customer", "supplier"]


async def create_party(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    kind: PartyKind,
    name: str,
    email: str | None,
) -> Document:
    party = await insert_record(
        tx,
        now=now,
        business_id=business_id,
        kind=kind,
        fields={"name": name.strip(), "email": email},
    )
    await record_event(tx, now=now, type=f"{kind}.created", data=party, business_id=business_id)
    return party


async def update_party(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    kind: PartyKind,
    party_id: str,
    changes: dict[str, Any],
) -> Document:
    """Apply ``changes`` (``name``, ``email``); nothing changed records no event."""
    party = await get_record(tx, business_id, kind, party_id, for_update=True)
    if "name" in changes:
        changes = {**changes, "name": str(changes["name"]).strip()}
    if unchanged(party, changes):
        return party
    party = await save_record(
        tx, now=now, business_id=business_id, kind=kind, document={**party, **changes}
    )
    await record_event(tx, now=now, type=f"{kind}.updated", data=party, business_id=business_id)
    return party


async def delete_party(
    tx: Transaction, *, now: float, business_id: str, kind: PartyKind, party_id: str
) -> None:
    await delete_record(tx, now=now, business_id=business_id, kind=kind, record_id=party_id)
    await record_event(
        tx, now=now, type=f"{kind}.deleted", data={"id": party_id}, business_id=business_id
    )


async def redact_party(
    tx: Transaction, *, now: float, business_id: str, kind: PartyKind, party_id: str
) -> Document:
    """A person asked to be forgotten: their name and email are erased from the record, and
    ``customer.redact`` / ``supplier.redact`` asks every entitled app to erase what it holds."""
    party = await get_record(tx, business_id, kind, party_id, for_update=True)
    notice = {f"{kind}Id": party_id, "email": party.get("email"), "requestedAt": iso(now)}
    party = await save_record(
        tx,
        now=now,
        business_id=business_id,
        kind=kind,
        document={**party, "name": "Redacted", "email": None, "redacted": True},
    )
    await record_event(tx, now=now, type=f"{kind}.redact", data=notice, business_id=business_id)
    return party
