"""The consent decision shared by the authorization page and the device verification page."""

from __future__ import annotations

from collections.abc import Sequence

from ledgerport import apps, books, catalog
from ledgerport.errors import DomainError
from ledgerport.storage import Transaction


class AccessError(DomainError):
    """Root of the access package's errors."""


class NoBusinessToConnect(AccessError):
    """The user is an active member of no business the app may connect to."""

    def __init__(self) -> None:
        super().__init__("You are not an active member of any business")


class NoBusinessToInstallIn(AccessError):
    """The user's roles may not install apps (apps:install) in any of their businesses, and
    no installation there already grants what is asked."""

    def __init__(self) -> None:
        super().__init__(
            "You may not install apps in any of your businesses: ask an owner or an admin"
        )


class BusinessNotOffered(AccessError):
    """The form came back naming a business it does not offer: one the user is not an active
    member of or, on the marketplace's install form, one the app may not be installed in."""

    def __init__(self) -> None:
        super().__init__("That business is not one you may choose here")


async def consent_businesses(
    tx: Transaction, app: apps.App, user_id: str, scopes: Sequence[str]
) -> list[books.Business]:
    """The businesses the consent form offers for ``scopes``: the user's active memberships
    (sandboxes only for an unreviewed app) where the user may approve them: their role holds
    apps:install, or the app's ACTIVE installation there already grants every one of them.
    Raises AppNotReviewed, NoBusinessToConnect or NoBusinessToInstallIn when there is none."""
    memberships = await books.businesses_of_user(tx, user_id)
    if not app.reviewed:
        memberships = [(business, role) for business, role in memberships if business.sandbox]
    return await _approvable(tx, app, memberships, scopes)


async def install_businesses(tx: Transaction, app: apps.App, user_id: str) -> list[books.Business]:
    """The businesses the marketplace's one-click install offers: the user's active memberships
    where their role holds apps:install or the app is already ACTIVE-installed (a member without
    apps:install may only confirm what that installation grants). An unreviewed app installs
    only into its developer's sandbox businesses: sandboxes where the developer is an active
    member too. Raises AppNotReviewed, NoBusinessToConnect or NoBusinessToInstallIn when there
    is none."""
    memberships = await books.businesses_of_user(tx, user_id)
    if not app.reviewed:
        developers = (
            {
                business.id
                for business, _ in await books.businesses_of_user(tx, app.developer_user_id)
            }
            if app.developer_user_id is not None
            else set()
        )
        memberships = [
            (business, role)
            for business, role in memberships
            if business.sandbox and business.id in developers
        ]
    return await _approvable(tx, app, memberships, ())


async def _approvable(
    tx: Transaction,
    app: apps.App,
    memberships: Sequence[tuple[books.Business, str]],
    scopes: Sequence[str],
) -> list[books.Business]:
    if not memberships:
        if not app.reviewed:
            raise apps.AppNotReviewed()
        raise NoBusinessToConnect()
    offered: list[books.Business] = []
    for business, role in memberships:
        if catalog.PERMISSION_APPS_INSTALL in await books.role_permissions(tx, business.id, role):
            offered.append(business)
            continue
        installation = await apps.active_installation(tx, app.id, business.id)
        if installation is not None and set(scopes) <= set(installation.scopes):
            offered.append(business)
    if not offered:
        raise NoBusinessToInstallIn()
    return offered


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
