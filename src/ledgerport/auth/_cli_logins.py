"""Signing the ``ledgerport`` command in: the device flow (RFC 8628) for a developer token.

The app device flow (``_device``) installs an app in a business and issues an installation's
tokens; the command line acts as the developer instead, on the console API. So its codes name no
app: the command starts a login (a device code to poll, a user code to show), the signed-in
developer approves the user code in the console, and the command redeems its device code once
for a developer token, which ``logout`` revokes. Codes live ten minutes and are polled at the
same interval, with the same ``slow_down``, as the app device flow's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledgerport import catalog
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Row, Transaction

from ._device import new_user_code, normalize_user_code
from ._errors import (
    AccessDenied,
    AuthorizationPending,
    ExpiredToken,
    InvalidGrant,
    OAuthError,
    SlowDown,
)
from ._sessions import issue_developer_token


@dataclass(frozen=True)
class CliLogin:
    """A started login: what the command polls with and what the developer enters."""

    device_code: str
    user_code: str
    expires_in: int
    interval: int


@dataclass(frozen=True)
class CliLoginOutcome:
    """One poll's answer: the developer token, or the error to report. An error that changed
    the login (a slowed interval, a denial reported once) comes back here, not raised, so that
    the change commits."""

    token: str | None = None
    error: OAuthError | None = None


async def start_cli_login(tx: Transaction, keyring: Keyring, *, now: float) -> CliLogin:
    device_code = new_token(catalog.DEVICE_CODE_PREFIX)
    while True:
        user_code = new_user_code()
        taken = await tx.fetchval(
            "SELECT 1 FROM cli_logins WHERE user_code_hash = $1",
            keyring.hash_token(normalize_user_code(user_code)),
        )
        if not taken:
            break
    await tx.execute(
        "INSERT INTO cli_logins (code_hash, user_code_hash, status, poll_interval, created_at,"
        " expires_at) VALUES ($1, $2, 'pending', $3, $4, $5)",
        keyring.hash_token(device_code),
        keyring.hash_token(normalize_user_code(user_code)),
        catalog.DEVICE_POLL_INTERVAL,
        now,
        now + catalog.DEVICE_CODE_TTL,
    )
    return CliLogin(device_code, user_code, catalog.DEVICE_CODE_TTL, catalog.DEVICE_POLL_INTERVAL)


async def decide_cli_login(
    tx: Transaction, keyring: Keyring, *, now: float, user_code: str, user_id: str, approve: bool
) -> bool:
    """Approve (for ``user_id``) or deny the pending login behind ``user_code``; False when no
    pending, unexpired login has that code."""
    normalized = normalize_user_code(user_code)
    if len(normalized) != catalog.USER_CODE_LENGTH:
        return False
    changed = await tx.execute(
        "UPDATE cli_logins SET status = $1, user_id = $2"
        " WHERE user_code_hash = $3 AND status = 'pending' AND expires_at > $4",
        "approved" if approve else "denied",
        user_id,
        keyring.hash_token(normalized),
        now,
    )
    return changed == 1


async def redeem_cli_login(
    tx: Transaction, keyring: Keyring, *, now: float, device_code: str
) -> CliLoginOutcome:
    """One poll: a developer token once approved (the code is spent), else why not."""
    code_hash = keyring.hash_token(device_code)
    row = await tx.fetchrow("SELECT * FROM cli_logins WHERE code_hash = $1", code_hash)
    if row is None or row["status"] == "consumed":
        return CliLoginOutcome(error=InvalidGrant("unknown or already used device code"))
    if now >= row["expires_at"]:
        return CliLoginOutcome(error=ExpiredToken("the device code has expired"))
    status = row["status"]
    if status == "pending":
        return await _still_pending(tx, now=now, code_hash=code_hash, row=row)
    spent = await tx.execute(
        "UPDATE cli_logins SET status = 'consumed' WHERE code_hash = $1 AND status = $2",
        code_hash,
        status,
    )
    if not spent:
        return CliLoginOutcome(error=InvalidGrant("unknown or already used device code"))
    if status == "denied":
        return CliLoginOutcome(error=AccessDenied("the developer denied the login"))
    token = await issue_developer_token(tx, keyring, now=now, user_id=row["user_id"])
    return CliLoginOutcome(token=token)


async def _still_pending(
    tx: Transaction, *, now: float, code_hash: str, row: Row
) -> CliLoginOutcome:
    """Not decided yet: ``authorization_pending``, or ``slow_down`` (five seconds more from
    now on) to a command polling faster than its interval; the first poll is never slowed."""
    last, interval = row["last_polled_at"], int(row["poll_interval"])
    if last is not None and now - float(last) < interval:
        await tx.execute(
            "UPDATE cli_logins SET poll_interval = $1, last_polled_at = $2 WHERE code_hash = $3",
            interval + catalog.DEVICE_SLOW_DOWN_STEP,
            now,
            code_hash,
        )
        return CliLoginOutcome(error=SlowDown("polling too fast: wait the interval"))
    await tx.execute(
        "UPDATE cli_logins SET last_polled_at = $1 WHERE code_hash = $2", now, code_hash
    )
    return CliLoginOutcome(error=AuthorizationPending("the developer has not approved yet"))


async def revoke_developer_token(tx: Transaction, keyring: Keyring, token: str) -> bool:
    """Forget a developer token (``logout``): False when it was not one."""
    removed = await tx.execute(
        "DELETE FROM developer_tokens WHERE token_hash = $1", keyring.hash_token(token)
    )
    return removed == 1


async def purge_expired_cli_logins(tx: Transaction, *, now: float) -> int:
    return await tx.execute(
        "DELETE FROM cli_logins WHERE expires_at <= $1", now - catalog.EXPIRED_ROW_GRACE
    )
