"""The operator API's apps: registering one, its status and review, installing it in a business
and ending that, session and developer tokens, and the review of a listing's revision."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, with_config
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import access, apps, auth, books, catalog, storage
from ledgerport.errors import InvalidInput

from .._answers import App, app_json
from .._context import platform, unit_of_work
from .._ids import APP, BUSINESS, USER
from .._openapi import (
    json_reply,
    one_of,
    operation,
)
from .._session_tokens import SessionToken, session_token_answer
from ..developer.listing import RevisionOut, revision_out
from ._blueprint import DELETED, INPUT_ERRORS, NOT_FOUND, AdminBody, blueprint

_SCOPES = one_of(catalog.SCOPES)


class AppIn(AdminBody):
    name: str = Field(min_length=1, max_length=catalog.CLIENT_NAME_MAX_LENGTH)
    type: Literal["CONFIDENTIAL", "PUBLIC"]
    # The rules apps.create_app checks, stated in the document only: its messages stay.
    redirectUris: list[str] = Field(
        json_schema_extra={
            "minItems": catalog.REDIRECT_URIS_MIN,
            "maxItems": catalog.REDIRECT_URIS_MAX,
            "items": {"type": "string", "minLength": 1, "maxLength": catalog.URI_MAX_LENGTH},
        }
    )
    scopes: list[str] = Field(json_schema_extra={"items": _SCOPES})
    developerUserId: str = USER.field()
    reviewed: bool = False
    appUrl: str | None = Field(default=None, max_length=512)


class AppStatusIn(AdminBody):
    status: Literal["ACTIVE", "SUSPENDED", "DEACTIVATED"]


class AppReviewIn(AdminBody):
    reviewed: bool


class InstallationIn(AdminBody):
    appId: str = APP.field()
    businessId: str = BUSINESS.field()
    userId: str = USER.field()
    scopes: list[str] = Field(json_schema_extra={"items": _SCOPES, "minItems": 1})


class SessionTokenIn(AdminBody):
    appId: str = APP.field()
    businessId: str = BUSINESS.field()
    userId: str = USER.field()


class DeveloperTokenIn(AdminBody):
    userId: str = USER.field()


@with_config(ConfigDict(extra="forbid"))
class RegisteredApp(App):
    """The app; a CONFIDENTIAL app's client secret is shown here only (null for PUBLIC)."""

    clientSecret: str | None


@with_config(ConfigDict(extra="forbid"))
class Installation(TypedDict):
    id: str
    appId: str
    businessId: str
    userId: str
    state: str
    scopes: list[str]


@with_config(ConfigDict(extra="forbid"))
class DeveloperToken(TypedDict):
    """A bearer token for /developer/* as the user, shown once."""

    token: str


@blueprint.post("/apps")
@validate_request(AppIn)
@operation(
    json_reply(201, RegisteredApp, "The app, with its client secret"),
    raises=(*INPUT_ERRORS, InvalidInput, books.UserNotFound),
)
async def create_app(data: AppIn) -> tuple[RegisteredApp, int]:
    """Register an app; a CONFIDENTIAL app's client secret is in this answer only."""
    p = platform()
    async with unit_of_work() as tx:
        app, secret = await apps.create_app(
            tx,
            p.keyring,
            now=p.now(),
            name=data.name,
            type=data.type,
            redirect_uris=data.redirectUris,
            scopes=data.scopes,
            developer_user_id=data.developerUserId,
            reviewed=data.reviewed,
            app_url=data.appUrl,
        )
    return {**app_json(app), "clientSecret": secret}, 201


@blueprint.post("/apps/<app_id>/status")
@validate_request(AppStatusIn)
@operation(json_reply(200, App, "The app"), raises=(*INPUT_ERRORS, apps.AppNotFound))
async def set_app_status(app_id: str, data: AppStatusIn) -> App:
    """Suspend, deactivate or reactivate an app; takes effect on its next request."""
    async with unit_of_work() as tx:
        app = await apps.set_app_status(tx, app_id, data.status)
    return app_json(app)


@blueprint.put("/apps/<app_id>/review")
@validate_request(AppReviewIn)
@operation(json_reply(200, App, "The app"), raises=(*INPUT_ERRORS, apps.AppNotFound))
async def set_app_review(app_id: str, data: AppReviewIn) -> App:
    """Record an app's review: reviewed apps (also dynamically registered clients, which start
    unreviewed) may connect to any business, unreviewed ones to sandbox businesses only."""
    async with unit_of_work() as tx:
        app = await apps.set_app_reviewed(tx, app_id, data.reviewed)
    return app_json(app)


def _installation_json(installation: apps.Installation) -> Installation:
    return {
        "id": installation.id,
        "appId": installation.app_id,
        "businessId": installation.business_id,
        "userId": installation.user_id,
        "state": installation.state,
        "scopes": list(installation.scopes),
    }


@blueprint.post("/installations")
@validate_request(InstallationIn)
@operation(
    json_reply(201, Installation, "The ACTIVE installation"),
    raises=(
        *INPUT_ERRORS,
        InvalidInput,
        apps.ScopesNotRegistered,
        apps.AppNotReviewed,
        apps.AppNotFound,
        *NOT_FOUND,
        apps.AppNotActive,
        apps.NotAMember,
        apps.InstallNotPermitted,
        storage.Conflict,
    ),
)
async def install(data: InstallationIn) -> tuple[Installation, int]:
    """Managed install (or widening of an ACTIVE installation); emits app.installed."""
    async with unit_of_work() as tx:
        installation = await apps.install(
            tx,
            now=platform().now(),
            app_id=data.appId,
            business_id=data.businessId,
            user_id=data.userId,
            scopes=data.scopes,
        )
    return _installation_json(installation), 201


@blueprint.delete("/installations/<installation_id>")
@operation(DELETED, raises=(storage.BadValue, apps.InstallationNotFound))
async def uninstall(installation_id: str) -> tuple[str, int]:
    """Uninstall: revokes the installation's tokens, cancels its codes, emits app.uninstalled."""
    async with unit_of_work() as tx:
        await access.uninstall(tx, now=platform().now(), installation_id=installation_id)
    return "", 204


@blueprint.delete("/businesses/<business_id>/apps/<app_id>/access")
@operation(
    DELETED,
    raises=(storage.BadValue, books.BusinessNotFound, apps.AppNotFound, apps.AppHasNoAccess),
)
async def revoke_access(business_id: str, app_id: str) -> tuple[str, int]:
    """The business revokes the app's access: its tokens there stop working at once."""
    async with unit_of_work() as tx:
        await access.revoke_access(tx, now=platform().now(), business_id=business_id, app_id=app_id)
    return "", 204


@blueprint.post("/session-tokens")
@validate_request(SessionTokenIn)
@operation(
    json_reply(201, SessionToken, "The session token"),
    raises=(
        *INPUT_ERRORS,
        apps.AppNotFound,
        *NOT_FOUND,
        apps.AppNotActive,
        auth.NoActiveInstallation,
        apps.NotAMember,
    ),
)
async def session_token(data: SessionTokenIn) -> tuple[SessionToken, int]:
    """What the app bridge hands an embedded page: a session token for (app, business, user).

    409 when the app is stopped, has no ACTIVE installation in the business, or the user is not
    an active member there.
    """
    body = await session_token_answer(
        app_id=data.appId, business_id=data.businessId, user_id=data.userId, source="admin"
    )
    return body, 201


@blueprint.post("/developer-tokens")
@validate_request(DeveloperTokenIn)
@operation(
    json_reply(201, DeveloperToken, "The developer token"),
    raises=(*INPUT_ERRORS, books.UserNotFound),
)
async def developer_token(data: DeveloperTokenIn) -> tuple[DeveloperToken, int]:
    """A bearer token for ``/developer/*`` acting as the user (shown once)."""
    p = platform()
    async with unit_of_work() as tx:
        token = await auth.issue_developer_token(tx, p.keyring, now=p.now(), user_id=data.userId)
    return {"token": token}, 201


class ReviewIn(AdminBody):
    action: Literal["start", "approve", "reject", "request_changes"]
    note: str | None = Field(default=None, max_length=2000)


@blueprint.post("/listing-revisions/<revision_id>/review")
@validate_request(ReviewIn)
@operation(
    json_reply(200, RevisionOut, "The revision after the review step"),
    raises=(*INPUT_ERRORS, apps.RevisionNotFound, apps.RevisionInWrongState),
)
async def review_listing_revision(revision_id: str, data: ReviewIn) -> RevisionOut:
    """A review step on a listing revision: ``start`` takes a submitted one into review; from
    review, ``approve`` puts it live, ``reject`` or ``request_changes`` send it back. Any
    other step is 409 INVALID_STATE."""
    async with unit_of_work() as tx:
        revision = await apps.review_revision(
            tx, now=platform().now(), revision_id=revision_id, action=data.action, note=data.note
        )
    return revision_out(revision)
