"""Idempotency keys of an app's writes in a business.

A write carrying ``Idempotency-Key`` claims the key in the write's own transaction, before it
writes: the first request inserts the claim, performs, and stores its answer with it; a request
with the key arriving meanwhile waits on the claim (PostgreSQL's unique index holds it until the
first commits; SQLite's write transactions run one at a time) and then replays the stored
answer. A write that fails rolls its claim back with it, so a retry performs anew. The same key
with another request (method, path or body) is refused; keys are kept 24 hours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.storage import Transaction

from ._errors import IdempotencyKeyReused

KEY_MAX_LENGTH = 255
_PENDING = 0


@dataclass(frozen=True)
class StoredAnswer:
    status: int
    body: Any


def check_key(key: str) -> None:
    if not 1 <= len(key) <= KEY_MAX_LENGTH or not key.isascii() or not key.isprintable():
        raise InvalidInput(
            [f"Idempotency-Key must be 1 to {KEY_MAX_LENGTH} printable ASCII characters"]
        )


async def claim_idempotency_key(
    tx: Transaction, *, now: float, app_id: str, business_id: str, key: str, fingerprint: str
) -> StoredAnswer | None:
    """None when this request is the key's first (claimed now: perform, then store the answer
    with :func:`store_idempotent_answer`); else the first request's answer to replay."""
    check_key(key)
    await tx.execute(
        "DELETE FROM idempotency_keys WHERE app_id = $1 AND business_id = $2 AND key = $3"
        " AND created_at <= $4",
        app_id,
        business_id,
        key,
        now - catalog.IDEMPOTENCY_WINDOW,
    )
    claimed = await tx.execute(
        "INSERT INTO idempotency_keys (app_id, business_id, key, fingerprint, status, response,"
        " created_at) VALUES ($1, $2, $3, $4, $5, '', $6)"
        " ON CONFLICT (app_id, business_id, key) DO NOTHING",
        app_id,
        business_id,
        key,
        fingerprint,
        _PENDING,
        now,
    )
    if claimed:
        return None
    row = await tx.fetchrow(
        "SELECT fingerprint, status, response FROM idempotency_keys"
        " WHERE app_id = $1 AND business_id = $2 AND key = $3",
        app_id,
        business_id,
        key,
    )
    assert row is not None
    assert row["status"] != _PENDING  # the claimer has committed its answer
    if row["fingerprint"] != fingerprint:
        raise IdempotencyKeyReused()
    return StoredAnswer(int(row["status"]), json.loads(row["response"]))


async def store_idempotent_answer(
    tx: Transaction, *, app_id: str, business_id: str, key: str, status: int, body: Any
) -> None:
    await tx.execute(
        "UPDATE idempotency_keys SET status = $1, response = $2"
        " WHERE app_id = $3 AND business_id = $4 AND key = $5",
        status,
        json.dumps(body, separators=(",", ":")),
        app_id,
        business_id,
        key,
    )


async def purge_idempotency_keys(tx: Transaction, *, now: float) -> int:
    return await tx.execute(
        "DELETE FROM idempotency_keys WHERE created_at <= $1", now - catalog.IDEMPOTENCY_WINDOW
    )
