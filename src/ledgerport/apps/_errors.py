"""What the apps package refuses: unknown apps and installations, stopped or unreviewed apps,
members who are not, scopes the app never registered, app data fields and values that break
their rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ledgerport import catalog
from ledgerport.errors import DomainError

from ._module_source import SyntaxProblem


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


class UnsupportedApiVersion(AppsError):
    """The version asked for (header, pin or current) does not exist or is past its sunset."""

    def __init__(self, version: str) -> None:
        super().__init__(
            "API version {0} does not exist or is no longer supported", params=[version]
        )


class IdempotencyKeyReused(AppsError):
    """An Idempotency-Key came back with another request than the one it first carried."""

    def __init__(self) -> None:
        super().__init__("This Idempotency-Key was used for another request in the last 24 hours")


class ScopesNotRegistered(AppsError):
    def __init__(self, scopes: Sequence[str]) -> None:
        super().__init__(
            "Requested scopes not permitted for this client: {0}", params=[" ".join(scopes)]
        )


# --- App data ------------------------------------------------------------------------------------


class AppDataForConnectedAppsOnly(AppsError):
    """/app-data was asked for with the application host's session cookie: app data answers
    connected apps only, which present an OAuth access token."""

    def __init__(self) -> None:
        super().__init__(
            "The app data API is available to connected apps only: it needs an OAuth access"
            " token, not a session cookie"
        )


class UnknownAppDataField(AppsError):
    """The app declared no field with that key for that resource type."""

    def __init__(self, resource_type: str, key: str) -> None:
        super().__init__(
            "{0} is not an app data field this app declared for {1}", params=[key, resource_type]
        )


class InvalidAppDataValue(AppsError):
    """Values break their fields' type, length, range or choice rules; ``details`` names every
    one ({resourceType, resourceId, key, reason}), so one answer lists all there is to fix."""

    def __init__(self, details: Sequence[Mapping[str, str]]) -> None:
        self.details = [dict(detail) for detail in details]
        super().__init__(
            "{0} app data value(s) break their field's rules: see details",
            params=[len(self.details)],
        )


class AppCannotAccessType(AppsError):
    """The installation lacks the read scope of the resource type."""

    def __init__(self, resource_type: str, scope: str) -> None:
        super().__init__(
            "The app's installation lacks {0}, which app data on {1} records needs",
            params=[scope, resource_type],
        )


class ResourceIdsMissing(AppsError):
    """GET /app-data named no resource."""

    def __init__(self) -> None:
        super().__init__("Provide resourceId or resourceIds")


class TooManyResourceIds(AppsError):
    def __init__(self, given: int) -> None:
        super().__init__(
            "resourceIds accepts at most {0} ids; {1} were given",
            params=[catalog.APP_DATA_RESOURCE_IDS_MAX, given],
        )


class AppDataValueNotFound(AppsError):
    """The app has no app data value with that id in the business."""

    def __init__(self, value_id: str) -> None:
        super().__init__("App data value {0} not found", params=[value_id])


class InvalidChoices(AppsError):
    """A CHOICE field's options are not 1 to 50 distinct non-empty strings of at most 60
    characters after trimming; ``reason`` says which rule they break."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            "choices must be {0} to {1} distinct non-empty options of at most {2} characters: {3}",
            params=[
                catalog.CHOICE_OPTIONS_MIN,
                catalog.CHOICE_OPTIONS_MAX,
                catalog.CHOICE_OPTION_MAX_LENGTH,
                reason,
            ],
        )


class AppDataFieldExists(AppsError):
    """The app already declared a field with that key for that resource type."""

    def __init__(self, resource_type: str, key: str) -> None:
        super().__init__(
            "An app data field {0} is already declared for {1}", params=[key, resource_type]
        )


class AppDataFieldNotFound(AppsError):
    """The app has no app data field with that id."""

    def __init__(self, field_id: str) -> None:
        super().__init__("App data field {0} not found", params=[field_id])


# --- Webhooks ------------------------------------------------------------------------------------


class WebhookNotFound(AppsError):
    """The app has no webhook with that id (or it was deleted)."""

    def __init__(self, webhook_id: str) -> None:
        super().__init__("Webhook {0} not found", params=[webhook_id])


class ExtensionPathInvalid(AppsError):
    """An extension's path is malformed or names no page on the App URL's origin."""

    def __init__(self, reason: str) -> None:
        super().__init__("Extension path invalid: {0}", params=[reason])


class ExtensionScopeRequired(AppsError):
    """An extension on a record needs that record type's read scope, which the app does not
    register."""

    def __init__(self, target: str, scope: str) -> None:
        super().__init__(
            "Extension {0} needs the scope {1}, which the app does not register",
            params=[target, scope],
        )


class ExtensionNotGranted(AppsError):
    """The app's installation in the business lacks the scope its extension on a record needs."""

    def __init__(self, target: str, scope: str) -> None:
        super().__init__(
            "The app was not granted {0} in this business, which its {1} extension needs",
            params=[scope, target],
        )


class ExtensionNotFound(AppsError):
    def __init__(self, target: str) -> None:
        super().__init__("The app has no extension at {0}", params=[target])


class ListingExists(AppsError):
    """Two first saves of one listing raced: another one created it."""

    def __init__(self) -> None:
        super().__init__(
            "The listing was created by another save meanwhile: load it and save again"
        )


class SlugTaken(AppsError):
    def __init__(self, slug: str) -> None:
        super().__init__("The slug {0} is taken by another listing", params=[slug])


class ListingNotFound(AppsError):
    def __init__(self, app_id: str) -> None:
        super().__init__("App {0} has no listing", params=[app_id])


class RevisionNotFound(AppsError):
    def __init__(self, revision_id: str) -> None:
        super().__init__("Listing revision {0} not found", params=[revision_id])


class RevisionInWrongState(AppsError):
    def __init__(self, revision_id: str, state: str, action: str) -> None:
        super().__init__(
            "Listing revision {0} is {1}: it cannot be {2}", params=[revision_id, state, action]
        )


class AssetNotFound(AppsError):
    def __init__(self, asset_id: str) -> None:
        super().__init__("Asset {0} not found", params=[asset_id])


class AssetInUse(AppsError):
    """The live revision or an open revision of the listing refers to the asset."""

    def __init__(self, asset_id: str, number: int, where: str) -> None:
        super().__init__(
            "Asset {0} is in use by revision {1} ({2}) of the listing",
            params=[asset_id, number, where],
        )


class RatingNotAllowed(AppsError):
    """Only a member of a business where the app is installed may rate it."""

    def __init__(self) -> None:
        super().__init__("Only a member of a business where the app is installed may rate it")


class FunctionNotFound(AppsError):
    """The app has no hosted function of that name (or it was deleted)."""

    def __init__(self, name: str) -> None:
        super().__init__("Function {0} not found", params=[name])


class SecretNotFound(AppsError):
    """The app has no secret of that name."""

    def __init__(self, name: str) -> None:
        super().__init__("Secret {0} not found", params=[name])


class FunctionVersionNotFound(AppsError):
    """The function keeps no version of that number (never uploaded, or no longer kept)."""

    def __init__(self, name: str, version: int) -> None:
        super().__init__("Function {0} has no version {1}", params=[name, version])


class FunctionSourceNoHandler(AppsError):
    """The upload is not an ES module exporting ``handler``; ``reason`` says what is wrong.

    For a syntax error, ``reason`` is where and why (``syntax``: its line, its column and the
    parser's words), which the message and its params carry too: ``syntax error at line {0},
    column {1}: {2}``. Otherwise ``syntax`` is None and the one param is the reason."""

    syntax: SyntaxProblem | None

    def __init__(self, reason: str | SyntaxProblem) -> None:
        prefix = "Function source is not an ES module exporting a handler: "
        if isinstance(reason, SyntaxProblem):
            self.syntax = reason
            super().__init__(
                prefix + "syntax error at line {0}, column {1}: {2}",
                params=[reason.line, reason.column, reason.words],
            )
        else:
            self.syntax = None
            super().__init__(prefix + "{0}", params=[reason])
