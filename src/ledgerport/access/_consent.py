"""The consent decision shared by the authorization page and the device verification page."""

from __future__ import annotations

from collections.abc import Sequence

from ledgerport import apps, books
from ledgerport.errors import DomainError
from ledgerport.storage import Transaction


class AccessError(DomainError):
    """Root of the access package's errors."""


class NoBusinessToConnect(AccessError):
    """The user is an active member of no business the app may connect to."""

    def __init__(self) -> None:
        super().__init__("You are not an active member of any business")


class BusinessNotOffered(AccessError):
    """The consent form came back naming a business the user is not an active member of."""

    def __init__(self) -> None:
        super().__init__("You are not an active member of that business")


async def consent_businesses(tx: Transaction, app: apps.App, user_id: str) -> list[books.Business]:
    """The businesses the consent form offers: the user's active memberships, sandboxes only
    for an unreviewed app. Raises AppNotReviewed or NoBusinessToConnect when there is none."""
    businesses = [business for business, _ in await books.businesses_of_user(tx, user_id)]
    if not app.reviewed:
        businesses = [business for business in businesses if business.sandbox]
    if businesses:
        return businesses
    if not app.reviewed:
        raise apps.AppNotReviewed()
    raise NoBusinessToConnect()


async def approve(
    tx: Transaction,
    *,
    now: float,
    app: apps.App,
    business_id: str,
    user_id: str,
    scopes: Sequence[str],
) -> apps.Installation:
    """The user approved the form for ``business_id``: install the app there or widen its
    installation (``app.installed`` or ``app.scopes_updated`` follow).

    BusinessNotOffered when the user is not an active member of that business; AppNotReviewed
    for an unreviewed app and a business that is not a sandbox.
    """
    membership = await books.get_membership(tx, business_id, user_id)
    if membership is None or not membership.active:
        raise BusinessNotOffered()
    return await apps.install(
        tx, now=now, app_id=app.id, business_id=business_id, user_id=user_id, scopes=scopes
    )
