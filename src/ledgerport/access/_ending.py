"""Ending an installation: its tokens and codes die with it, in the same transaction."""

from __future__ import annotations

from datetime import UTC, datetime

from ledgerport import apps, auth, books
from ledgerport.storage import Transaction


def _iso(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")


async def end_installation(
    tx: Transaction, *, now: float, installation: apps.Installation, state: str, reason: str
) -> None:
    """Move an ACTIVE installation to ``state``, revoke every token family of it, cancel its
    unredeemed authorization codes and approved device codes, and record ``app.uninstalled``."""
    await apps.end_installation_state(tx, now=now, installation=installation, state=state)
    await auth.end_installation_grants(tx, now=now, installation_id=installation.id)
    await auth.cancel_device_codes(tx, now=now, installation_id=installation.id)
    await apps.record_installation_event(
        tx,
        now=now,
        type="app.uninstalled",
        installation=installation,
        data={"reason": reason, "uninstalledAt": _iso(now)},
    )


async def uninstall(tx: Transaction, *, now: float, installation_id: str) -> None:
    """Uninstall: InstallationNotFound unless the installation is ACTIVE."""
    installation = await apps.get_installation(tx, installation_id)
    if installation.state != "ACTIVE":
        raise apps.InstallationNotFound(installation_id)
    await end_installation(
        tx, now=now, installation=installation, state="UNINSTALLED", reason="uninstalled"
    )


async def revoke_access(tx: Transaction, *, now: float, business_id: str, app_id: str) -> None:
    """The business withdraws the app's access: the installation ends and its tokens die."""
    await books.get_business(tx, business_id)
    await apps.get_app(tx, app_id)
    installation = await apps.active_installation(tx, app_id, business_id)
    if installation is None:
        raise apps.AppHasNoAccess(app_id, business_id)
    await end_installation(
        tx, now=now, installation=installation, state="REVOKED", reason="access_revoked"
    )
