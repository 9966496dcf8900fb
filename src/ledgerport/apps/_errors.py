"""What the apps package refuses: unknown apps and installations, stopped or unreviewed apps,
members who are not, scopes the app never registered."""

from __future__ import annotations

from collections.abc import Sequence

from ledgerport import catalog
from ledgerport.errors import DomainError


class AppsError(DomainError):
    """Root of the apps package's errors."""


class AppNotFound(AppsError):
    def __init__(self, app_id: str) -> None:
        super().__init__("App {0} not found", params=[app_id])


class InstallationNotFound(AppsError):
    """No ACTIVE installation with that id."""

    def __init__(self, installation_id: str) -> None:
        super().__init__("Installation {0} not found", params=[installation_id])


class AppHasNoAccess(AppsError):
    """The app has no ACTIVE installation in the business."""

    def __init__(self, app_id: str, business_id: str) -> None:
        super().__init__("App {0} has no access to business {1}", params=[app_id, business_id])


class AppNotActive(AppsError):
    def __init__(self, app_id: str) -> None:
        super().__init__("App {0} is not active", params=[app_id])


class NotAMember(AppsError):
    def __init__(self, user_id: str, business_id: str) -> None:
        super().__init__(
            "User {0} is not an active member of business {1}", params=[user_id, business_id]
        )


class AppNotReviewed(AppsError):
    """An unreviewed app may connect only to sandbox businesses."""

    def __init__(self) -> None:
        super().__init__(catalog.CONSENT_NOT_REVIEWED)


class InstallNotPermitted(AppsError):
    """The user's role lacks apps:install, and the business's ACTIVE installation does not
    already grant every requested scope."""

    def __init__(self) -> None:
        super().__init__(
            "Only an owner or admin of the business can install this app or widen its access"
        )


class ScopesNotRegistered(AppsError):
    def __init__(self, scopes: Sequence[str]) -> None:
        super().__init__(
            "Requested scopes not permitted for this client: {0}", params=[" ".join(scopes)]
        )
