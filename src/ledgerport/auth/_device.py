"""The device authorization grant (RFC 8628).

A device code lives ten minutes. Its status moves pending -> approved or denied (the user's
decision on the verification page) -> consumed (tokens issued, or access_denied reported once);
an uninstall cancels an approved code not yet redeemed. Polling a pending code faster than its
interval answers slow_down and adds five seconds to the interval the code expects from then on;
the first poll is never throttled, and a client polling at the new interval is answered normally.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledgerport import catalog
from ledgerport.apps import App, Installation, get_app
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Transaction

from ._errors import (
    AccessDenied,
    AuthorizationPending,
    ExpiredToken,
    InvalidGrant,
    InvalidTarget,
    SlowDown,
)
from ._grants import Binding, Outcome, authorization_stands, start_family_from_grant


def new_user_code() -> str:
    """Eight consonants shown as ``BCDF-GHJK``: about 2.6e10 codes, easy to read and type."""
    letters = "".join(
        secrets.choice(catalog.USER_CODE_ALPHABET) for _ in range(catalog.USER_CODE_LENGTH)
    )
    half = catalog.USER_CODE_LENGTH // 2
    return f"{letters[:half]}-{letters[half:]}"


def normalize_user_code(entered: str) -> str:
    """What a person typed, compared case-insensitively and ignoring dashes and spaces."""
    return "".join(ch for ch in entered.upper() if ch.isalnum())


@dataclass(frozen=True)
class DeviceAuthorization:
    device_code: str
    user_code: str
    expires_in: int
    interval: int

    def response(self, verification_uri: str) -> dict[str, Any]:
        return {
            "device_code": self.device_code,
            "user_code": self.user_code,
            "verification_uri": verification_uri,
            "verification_uri_complete": f"{verification_uri}?user_code={self.user_code}",
            "expires_in": self.expires_in,
            "interval": self.interval,
        }


async def start_device_authorization(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app: App,
    scopes: Sequence[str],
    resource: str | None,
) -> DeviceAuthorization:
    device_code = new_token(catalog.DEVICE_CODE_PREFIX)
    while True:
        user_code = new_user_code()
        taken = await tx.fetchval(
            "SELECT 1 FROM device_codes WHERE user_code_hash = $1",
            keyring.hash_token(normalize_user_code(user_code)),
        )
        if not taken:
            break
    await tx.execute(
        "INSERT INTO device_codes (code_hash, user_code_hash, app_id, scopes, resource, status,"
        " poll_interval, created_at, expires_at)"
        " VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8)",
        keyring.hash_token(device_code),
        keyring.hash_token(normalize_user_code(user_code)),
        app.id,
        json.dumps(list(scopes)),
        resource,
        catalog.DEVICE_POLL_INTERVAL,
        now,
        now + catalog.DEVICE_CODE_TTL,
    )
    return DeviceAuthorization(
        device_code, user_code, catalog.DEVICE_CODE_TTL, catalog.DEVICE_POLL_INTERVAL
    )


@dataclass(frozen=True)
class DeviceRequest:
    """A pending device code as the verification page shows it."""

    user_code_hash: str
    app: App
    scopes: tuple[str, ...]


async def find_pending_device_request(
    tx: Transaction, keyring: Keyring, *, now: float, user_code: str
) -> DeviceRequest | None:
    """The pending, unexpired request behind a user code of an active app, else None."""
    normalized = normalize_user_code(user_code)
    if len(normalized) != catalog.USER_CODE_LENGTH:
        return None
    row = await tx.fetchrow(
        "SELECT user_code_hash, app_id, scopes FROM device_codes"
        " WHERE user_code_hash = $1 AND status = 'pending' AND expires_at > $2",
        keyring.hash_token(normalized),
        now,
    )
    if row is None:
        return None
    app = await get_app(tx, row["app_id"])
    if not app.active:
        return None
    return DeviceRequest(row["user_code_hash"], app, tuple(json.loads(row["scopes"])))


async def approve_device_request(
    tx: Transaction,
    *,
    now: float,
    request: DeviceRequest,
    user_id: str,
    installation: Installation,
) -> bool:
    """Record the approval; False when the code stopped being pending meanwhile."""
    changed = await tx.execute(
        "UPDATE device_codes SET status = 'approved', decided_at = $1, user_id = $2,"
        " business_id = $3, installation_id = $4"
        " WHERE user_code_hash = $5 AND status = 'pending' AND expires_at > $1",
        now,
        user_id,
        installation.business_id,
        installation.id,
        request.user_code_hash,
    )
    return changed == 1


async def deny_device_request(
    tx: Transaction, *, now: float, request: DeviceRequest, user_id: str
) -> bool:
    changed = await tx.execute(
        "UPDATE device_codes SET status = 'denied', decided_at = $1, user_id = $2"
        " WHERE user_code_hash = $3 AND status = 'pending' AND expires_at > $1",
        now,
        user_id,
        request.user_code_hash,
    )
    return changed == 1


async def poll_device_code(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    app: App,
    device_code: str,
    resource: str | None = None,
    jkt: str | None = None,
) -> Outcome:
    """One poll at the token endpoint; the tokens are bound to the DPoP key ``jkt`` when the
    request carried a proof. Errors that change state come back in the Outcome."""
    code_hash = keyring.hash_token(device_code)
    row = await tx.fetchrow("SELECT * FROM device_codes WHERE code_hash = $1", code_hash)
    if row is None or row["app_id"] != app.id or row["status"] in ("consumed", "cancelled"):
        return Outcome(error=InvalidGrant())
    if now >= row["expires_at"]:
        return Outcome(error=ExpiredToken("the device code has expired"))
    status = row["status"]
    if status == "denied":
        claimed = await tx.execute(
            "UPDATE device_codes SET status = 'consumed' WHERE code_hash = $1"
            " AND status = 'denied'",
            code_hash,
        )
        if not claimed:
            return Outcome(error=InvalidGrant())
        return Outcome(error=AccessDenied("the user denied the request"))
    if status == "pending":
        last, interval = row["last_polled_at"], int(row["poll_interval"])
        if last is not None and now - float(last) < interval:
            await tx.execute(
                "UPDATE device_codes SET poll_interval = $1, last_polled_at = $2"
                " WHERE code_hash = $3",
                interval + catalog.DEVICE_SLOW_DOWN_STEP,
                now,
                code_hash,
            )
            wait = interval + catalog.DEVICE_SLOW_DOWN_STEP
            return Outcome(error=SlowDown(f"poll at most every {wait} seconds"))
        await tx.execute(
            "UPDATE device_codes SET last_polled_at = $1 WHERE code_hash = $2", now, code_hash
        )
        return Outcome(error=AuthorizationPending("the user has not decided yet"))
    if not await authorization_stands(
        tx,
        installation_id=row["installation_id"],
        business_id=row["business_id"],
        user_id=row["user_id"],
    ):
        return Outcome(error=InvalidGrant())
    if resource is not None and row["resource"] is not None and resource != row["resource"]:
        return Outcome(error=InvalidTarget("resource differs from the device authorization"))
    claimed = await tx.execute(
        "UPDATE device_codes SET status = 'consumed' WHERE code_hash = $1 AND status = 'approved'",
        code_hash,
    )
    if not claimed:
        return Outcome(error=InvalidGrant())
    family_id, pair = await start_family_from_grant(
        tx,
        keyring,
        now=now,
        row=row,
        grant_type=catalog.GRANT_DEVICE_CODE,
        binding=Binding.of(app, jkt),
    )
    await tx.execute(
        "UPDATE device_codes SET family_id = $1 WHERE code_hash = $2", family_id, code_hash
    )
    return Outcome(pair=pair)


async def cancel_device_codes(tx: Transaction, *, now: float, installation_id: str) -> None:
    """An uninstall cancels the installation's approved device codes not yet redeemed."""
    await tx.execute(
        "UPDATE device_codes SET status = 'cancelled', decided_at = $1"
        " WHERE installation_id = $2 AND status = 'approved'",
        now,
        installation_id,
    )


async def purge_expired_device_codes(tx: Transaction, *, now: float) -> int:
    return await tx.execute(
        "DELETE FROM device_codes WHERE expires_at <= $1", now - catalog.EXPIRED_ROW_GRACE
    )
