"""Which of a person's businesses an app may be given access to, and giving it: the consent
decision of the authorization and device pages, and the marketplace's one-click install.

One rule decides what every page offers (:func:`offered`, pure): the user's active memberships,
narrowed for an app that has not completed review, where the user's role may install apps or
the app's ACTIVE installation already grants what is asked. The pages show what the rule offers
and the decisions check the business that comes back against the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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


class NoScopeChosen(AccessError):
    """The install form came back with every scope unticked."""

    def __init__(self) -> None:
        super().__init__("Tick at least one kind of access to install the app")


Through = Literal["consent", "marketplace"]
"""Where access is given: the consent page (authorization and device flows) or the
marketplace's one-click install."""


@dataclass(frozen=True)
class Standing:
    """One of the user's businesses as it stands for an app: what the rule judges."""

    business: books.Business
    may_install: bool
    """The user's role there holds apps:install."""
    granted: tuple[str, ...] | None
    """What the app's ACTIVE installation there grants; None when it is not installed."""
    with_developer: bool
    """The app's developer is an active member of it too."""

    @property
    def installed(self) -> bool:
        return self.granted is not None

    def already_grants(self, scopes: Sequence[str]) -> bool:
        return self.granted is not None and set(scopes) <= set(self.granted)

    def new_scopes(self, scopes: Sequence[str]) -> list[str]:
        """Of ``scopes``, those the installation here does not grant yet."""
        held = set(self.granted or ())
        return [scope for scope in scopes if scope not in held]


def reachable(standing: Standing, *, reviewed: bool, through: Through) -> bool:
    """Whether the app may be given access in the business at all: any business for a reviewed
    app; for one that has not completed review, only a sandbox, and through the marketplace
    only a sandbox its developer belongs to (its own sandbox)."""
    if reviewed:
        return True
    return standing.business.sandbox and (through == "consent" or standing.with_developer)


def offered(
    standings: Sequence[Standing],
    *,
    reviewed: bool,
    scopes: Sequence[str] | None,
    through: Through,
) -> list[Standing]:
    """The businesses a page offers, in the order given: reachable ones where the user's role
    may install apps, or where the app's ACTIVE installation already grants ``scopes`` (None:
    is installed at all, for the install form, whose scopes are ticked afterwards)."""
    return [
        standing
        for standing in standings
        if reachable(standing, reviewed=reviewed, through=through)
        and (
            standing.may_install
            or (standing.installed if scopes is None else standing.already_grants(scopes))
        )
    ]


def none_offered(standings: Sequence[Standing], *, reviewed: bool, through: Through) -> DomainError:
    """Why :func:`offered` offers nothing: the app has not completed review (nothing reachable
    for it), the user belongs to no business, or their roles may install nowhere."""
    if not any(reachable(s, reviewed=reviewed, through=through) for s in standings):
        return apps.AppNotReviewed() if not reviewed else NoBusinessToConnect()
    return NoBusinessToInstallIn()


def preselected(offers: Sequence[Standing], scopes: Sequence[str], *, through: Through) -> str:
    """The business a form picks first. Consent: where the app is installed already (the usual
    reason to be asked again), else the first. Install: the first where the app can still be
    installed or given more of ``scopes``, else the first."""
    if through == "consent":
        chosen = next((s for s in offers if s.installed), None)
    else:
        chosen = next((s for s in offers if s.may_install and not s.already_grants(scopes)), None)
    return (chosen or offers[0]).business.id


async def standings(tx: Transaction, app: apps.App, user_id: str) -> list[Standing]:
    """How each of the user's active memberships stands for ``app``, by business name."""
    memberships = await books.businesses_of_user(tx, user_id)
    developers: set[str] = set()
    if app.developer_user_id is not None:
        developers = {b.id for b, _ in await books.businesses_of_user(tx, app.developer_user_id)}
    found = []
    for business, role in memberships:
        permissions = await books.role_permissions(tx, business.id, role)
        installation = await apps.active_installation(tx, app.id, business.id)
        found.append(
            Standing(
                business,
                catalog.PERMISSION_APPS_INSTALL in permissions,
                installation.scopes if installation is not None else None,
                business.id in developers,
            )
        )
    return found


async def offers(
    tx: Transaction,
    app: apps.App,
    user_id: str,
    *,
    scopes: Sequence[str] | None,
    through: Through,
) -> list[Standing]:
    """What a page offers the user for ``app`` (:func:`offered`); AppNotReviewed,
    NoBusinessToConnect or NoBusinessToInstallIn when it is nothing."""
    found = await standings(tx, app, user_id)
    chosen = offered(found, reviewed=app.reaches_any_business, scopes=scopes, through=through)
    if not chosen:
        raise none_offered(found, reviewed=app.reaches_any_business, through=through)
    return chosen


async def consent_businesses(
    tx: Transaction, app: apps.App, user_id: str, scopes: Sequence[str]
) -> list[Standing]:
    """The businesses the consent form offers for ``scopes``."""
    return await offers(tx, app, user_id, scopes=scopes, through="consent")


async def install_businesses(tx: Transaction, app: apps.App, user_id: str) -> list[Standing]:
    """The businesses the marketplace's one-click install offers."""
    return await offers(tx, app, user_id, scopes=None, through="marketplace")


async def approve(
    tx: Transaction,
    *,
    now: float,
    app: apps.App,
    business_id: str,
    user_id: str,
    scopes: Sequence[str],
) -> apps.Installation:
    """The user approved the consent form for ``business_id``: install the app there or widen
    its installation (``app.installed`` or ``app.scopes_updated`` follow).

    BusinessNotOffered when the user is not an active member of that business; AppNotReviewed
    for an unreviewed app and a business that is not a sandbox; InstallNotPermitted when the
    user's role may not install and the installation does not grant every scope already.
    """
    membership = await books.get_membership(tx, business_id, user_id)
    if membership is None or not membership.active:
        raise BusinessNotOffered()
    return await apps.install(
        tx, now=now, app_id=app.id, business_id=business_id, user_id=user_id, scopes=scopes
    )


async def install_from_marketplace(
    tx: Transaction,
    *,
    now: float,
    app: apps.App,
    business_id: str,
    user_id: str,
    scopes: Sequence[str],
) -> tuple[apps.Installation, books.Business]:
    """The one-click install: the app in ``business_id`` with the ticked ``scopes`` (widening an
    installation that is there). BusinessNotOffered unless the install form offers that
    business (the same rule); NoScopeChosen when nothing is ticked; then as :func:`approve`."""
    offered_here = await install_businesses(tx, app, user_id)
    business = next((s.business for s in offered_here if s.business.id == business_id), None)
    if business is None:
        raise BusinessNotOffered()
    if not scopes:
        raise NoScopeChosen()
    installation = await apps.install(
        tx, now=now, app_id=app.id, business_id=business.id, user_id=user_id, scopes=scopes
    )
    return installation, business
