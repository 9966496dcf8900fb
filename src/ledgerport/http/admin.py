"""The operator API, ``/admin/*``: the bookkeeping product's backend provisions tenants here.

Request bodies are models validated at the door; answers are the typed dictionaries below, which
are also what the OpenAPI document says each operation answers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, with_config
from quart import Blueprint, request
from quart_schema import security_scheme_blueprint, validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.datastructures import MultiDict

from ledgerport import access, apps, auth, books, catalog, queues, storage
from ledgerport.errors import InvalidInput

from ._answers import App, app_json
from ._context import platform, unit_of_work
from ._failing import failing_webhooks
from ._ids import APP, BUSINESS, USER
from ._openapi import (
    JSON_BODY_ERRORS,
    Param,
    Reply,
    blueprint_raises,
    json_reply,
    one_of,
    operation,
)
from ._session_tokens import SessionToken, session_token_answer
from .developer import iso_time
from .developer.listing import RevisionOut, revision_out

blueprint = Blueprint("admin", __name__, url_prefix="/admin")
security_scheme_blueprint(blueprint, [{"admin": []}])
# The token is checked before every request; every handler uses the database.
blueprint_raises(blueprint, auth.InvalidAdminToken, storage.StorageUnavailable)


def _whole(value: object) -> object:
    return int(value) if isinstance(value, float) and value.is_integer() else value


WholeNumber = Annotated[int, BeforeValidator(_whole)]
"""An integer, also written with a zero fraction (``5.0``), which JSON Schema's integer is."""


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class BusinessIn(_Body):
    name: str = Field(min_length=1, max_length=200)
    sandbox: bool = False
    plan: Literal["free", "paid"] = "paid"
    invoiceLimit: Annotated[WholeNumber, Field(ge=0, le=1_000_000_000)] | None = None


class UserIn(_Body):
    email: str = Field(
        min_length=3,
        max_length=320,
        pattern=r"^[^@\s]+@[^@\s]+$",
        json_schema_extra={"pattern": "^[^@\\s\\u0000]+@[^@\\s\\u0000]+$"},
    )
    password: str = Field(min_length=8, max_length=1024)
    name: str | None = Field(default=None, max_length=200)


class MembershipIn(_Body):
    role: Literal["owner", "admin", "accountant", "viewer"]
    active: bool = True


class RolePermissionsIn(_Body):
    permissions: list[str] = Field(json_schema_extra={"items": one_of(catalog.PERMISSIONS)})


_SCOPES = one_of(catalog.SCOPES)


class AppIn(_Body):
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


class AppStatusIn(_Body):
    status: Literal["ACTIVE", "SUSPENDED", "DEACTIVATED"]


class AppReviewIn(_Body):
    reviewed: bool


class InstallationIn(_Body):
    appId: str = APP.field()
    businessId: str = BUSINESS.field()
    userId: str = USER.field()
    scopes: list[str] = Field(json_schema_extra={"items": _SCOPES, "minItems": 1})


class SessionTokenIn(_Body):
    appId: str = APP.field()
    businessId: str = BUSINESS.field()
    userId: str = USER.field()


class DeveloperTokenIn(_Body):
    userId: str = USER.field()


@with_config(ConfigDict(extra="forbid"))
class Business(TypedDict):
    id: str
    name: str
    sandbox: bool
    plan: Literal["free", "paid"]
    invoiceLimit: int | None


@with_config(ConfigDict(extra="forbid"))
class User(TypedDict):
    id: str
    email: str
    name: str | None


@with_config(ConfigDict(extra="forbid"))
class Membership(TypedDict):
    businessId: str
    userId: str
    role: str
    active: bool


@with_config(ConfigDict(extra="forbid"))
class RolePermissions(TypedDict):
    """What the role now holds in the business."""

    businessId: str
    role: str
    permissions: list[str]


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


_INPUT_ERRORS = (*JSON_BODY_ERRORS, storage.BadValue)
"""A body that cannot be read or breaks its model, or a value (of the body or the path) that the
database cannot store."""
_ROLE = Param("role", "path", "The role whose permissions change", one_of(catalog.ROLES))
_NOT_FOUND = (books.BusinessNotFound, books.UserNotFound)
_DELETED = Reply(204, "Done")


@blueprint.before_request
async def _require_admin_token() -> None:
    header = request.headers.get("Authorization", "")
    scheme, _, presented = header.partition(" ")
    p = platform()
    if (
        scheme.lower() != "bearer"
        or not presented.strip()
        or not auth.admin_token_matches(p.keyring, presented.strip(), p.admin_token_hash)
    ):
        raise auth.InvalidAdminToken()


def _business_json(business: books.Business) -> Business:
    return {
        "id": business.id,
        "name": business.name,
        "sandbox": business.sandbox,
        "plan": business.plan,
        "invoiceLimit": business.invoice_limit,
    }


@blueprint.post("/businesses")
@validate_request(BusinessIn)
@operation(json_reply(201, Business, "The business"), raises=_INPUT_ERRORS)
async def create_business(data: BusinessIn) -> tuple[Business, int]:
    """Create a business (tenant)."""
    async with unit_of_work() as tx:
        business = await books.create_business(
            tx,
            now=platform().now(),
            name=data.name,
            sandbox=data.sandbox,
            plan=data.plan,
            invoice_limit=data.invoiceLimit,
        )
    return _business_json(business), 201


@blueprint.post("/users")
@validate_request(UserIn)
@operation(json_reply(201, User, "The user"), raises=(*_INPUT_ERRORS, books.EmailTaken))
async def create_user(data: UserIn) -> tuple[User, int]:
    """Create a user who can sign in on the application host."""
    password_hash = await platform().passwords.hash(data.password)
    async with unit_of_work() as tx:
        user = await books.create_user(
            tx, now=platform().now(), email=data.email, password_hash=password_hash, name=data.name
        )
    return {"id": user.id, "email": user.email, "name": user.name}, 201


@blueprint.put("/businesses/<business_id>/members/<user_id>")
@validate_request(MembershipIn)
@operation(json_reply(200, Membership, "The membership"), raises=(*_INPUT_ERRORS, *_NOT_FOUND))
async def set_member(business_id: str, user_id: str, data: MembershipIn) -> Membership:
    """Add a user to a business with a role, or change their role or active flag."""
    async with unit_of_work() as tx:
        membership = await books.set_membership(
            tx,
            now=platform().now(),
            business_id=business_id,
            user_id=user_id,
            role=data.role,
            active=data.active,
        )
    return {
        "businessId": membership.business_id,
        "userId": membership.user_id,
        "role": membership.role,
        "active": membership.active,
    }


@blueprint.put("/businesses/<business_id>/roles/<role>")
@validate_request(RolePermissionsIn)
@operation(
    json_reply(200, RolePermissions, "What the role holds in the business now"),
    raises=(*_INPUT_ERRORS, InvalidInput, books.BusinessNotFound),
    params=(_ROLE,),
)
async def set_role(business_id: str, role: str, data: RolePermissionsIn) -> RolePermissions:
    """Change which permissions a role holds in one business."""
    async with unit_of_work() as tx:
        held = await books.set_role_permissions(
            tx, business_id=business_id, role=role, permissions=data.permissions
        )
    return {"businessId": business_id, "role": role, "permissions": sorted(held)}


@blueprint.post("/apps")
@validate_request(AppIn)
@operation(
    json_reply(201, RegisteredApp, "The app, with its client secret"),
    raises=(*_INPUT_ERRORS, InvalidInput, books.UserNotFound),
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
@operation(json_reply(200, App, "The app"), raises=(*_INPUT_ERRORS, apps.AppNotFound))
async def set_app_status(app_id: str, data: AppStatusIn) -> App:
    """Suspend, deactivate or reactivate an app; takes effect on its next request."""
    async with unit_of_work() as tx:
        app = await apps.set_app_status(tx, app_id, data.status)
    return app_json(app)


@blueprint.put("/apps/<app_id>/review")
@validate_request(AppReviewIn)
@operation(json_reply(200, App, "The app"), raises=(*_INPUT_ERRORS, apps.AppNotFound))
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
        *_INPUT_ERRORS,
        InvalidInput,
        apps.ScopesNotRegistered,
        apps.AppNotReviewed,
        apps.AppNotFound,
        *_NOT_FOUND,
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
@operation(_DELETED, raises=(storage.BadValue, apps.InstallationNotFound))
async def uninstall(installation_id: str) -> tuple[str, int]:
    """Uninstall: revokes the installation's tokens, cancels its codes, emits app.uninstalled."""
    async with unit_of_work() as tx:
        await access.uninstall(tx, now=platform().now(), installation_id=installation_id)
    return "", 204


@blueprint.delete("/businesses/<business_id>/apps/<app_id>/access")
@operation(
    _DELETED,
    raises=(storage.BadValue, books.BusinessNotFound, apps.AppNotFound, apps.AppHasNoAccess),
)
async def revoke_access(business_id: str, app_id: str) -> tuple[str, int]:
    """The business revokes the app's access: its tokens there stop working at once."""
    async with unit_of_work() as tx:
        await access.revoke_access(tx, now=platform().now(), business_id=business_id, app_id=app_id)
    return "", 204


@with_config(ConfigDict(extra="forbid"))
class Redaction(TypedDict):
    """How many apps were asked to erase the business's data."""

    notified: int


_REDACTED = json_reply(200, dict[str, Any], "The record, its personal data erased")
_REDACT_RAISES = (storage.BadValue, books.BusinessNotFound, books.RecordNotFound)


async def _redact(business_id: str, kind: books.PartyKind, party_id: str) -> dict[str, Any]:
    async with unit_of_work() as tx:
        await books.get_business(tx, business_id)
        return await books.redact_party(
            tx, now=platform().now(), business_id=business_id, kind=kind, party_id=party_id
        )


@blueprint.post("/businesses/<business_id>/customers/<customer_id>/redact")
@operation(_REDACTED, raises=_REDACT_RAISES)
async def redact_customer(business_id: str, customer_id: str) -> dict[str, Any]:
    """A customer asked to be forgotten: their name and email are erased, and every entitled
    app gets customer.redact to erase what it holds."""
    return await _redact(business_id, "customer", customer_id)


@blueprint.post("/businesses/<business_id>/suppliers/<supplier_id>/redact")
@operation(_REDACTED, raises=_REDACT_RAISES)
async def redact_supplier(business_id: str, supplier_id: str) -> dict[str, Any]:
    """A supplier asked to be forgotten: as for a customer, with supplier.redact."""
    return await _redact(business_id, "supplier", supplier_id)


@blueprint.post("/businesses/<business_id>/redact")
@operation(
    json_reply(202, Redaction, "The apps ever installed in the business are asked to erase"),
    raises=(storage.BadValue, books.BusinessNotFound),
)
async def redact_business(business_id: str) -> tuple[Redaction, int]:
    """The business asked to be forgotten: every app ever installed there gets business.redact."""
    async with unit_of_work() as tx:
        notified = await apps.request_business_redaction(
            tx, now=platform().now(), business_id=business_id
        )
    return {"notified": notified}, 202


@blueprint.post("/session-tokens")
@validate_request(SessionTokenIn)
@operation(
    json_reply(201, SessionToken, "The session token"),
    raises=(
        *_INPUT_ERRORS,
        apps.AppNotFound,
        *_NOT_FOUND,
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
    raises=(*_INPUT_ERRORS, books.UserNotFound),
)
async def developer_token(data: DeveloperTokenIn) -> tuple[DeveloperToken, int]:
    """A bearer token for ``/developer/*`` acting as the user (shown once)."""
    p = platform()
    async with unit_of_work() as tx:
        token = await auth.issue_developer_token(tx, p.keyring, now=p.now(), user_id=data.userId)
    return {"token": token}, 201


class ReviewIn(_Body):
    action: Literal["start", "approve", "reject", "request_changes"]
    note: str | None = Field(default=None, max_length=2000)


@blueprint.post("/listing-revisions/<revision_id>/review")
@validate_request(ReviewIn)
@operation(
    json_reply(200, RevisionOut, "The revision after the review step"),
    raises=(*_INPUT_ERRORS, apps.RevisionNotFound, apps.RevisionInWrongState),
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


FAILING_WINDOW_MAX = 86_400
FAILING_AT_LEAST_MAX = 1_000
_FAILING_PARAMS = (
    Param(
        "window",
        "query",
        "Seconds to look back on: deliveries whose latest attempt ended within them count"
        f" (default {int(queues.FAILING_WINDOW)}, as the ledgerport_webhook_apps_failing gauge)",
        {"type": "integer", "minimum": 60, "maximum": FAILING_WINDOW_MAX},
    ),
    Param(
        "atLeast",
        "query",
        "Deliveries a webhook needs to have ended in the window before it can count as failing"
        f" (default {queues.FAILING_AT_LEAST})",
        {"type": "integer", "minimum": 1, "maximum": FAILING_AT_LEAST_MAX},
    ),
)


@with_config(ConfigDict(extra="forbid"))
class FailingWebhookOut(TypedDict):
    """A webhook of the app whose recent deliveries mostly fail."""

    id: str
    url: str
    enabled: bool
    ended: int
    """Its deliveries whose latest attempt ended in the window."""
    failed: int
    """Of those, the ones that failed for good (six attempts)."""
    retrying: int
    """Of those, the ones that wait for a retry."""
    lastEndedAt: str
    lastError: str | None
    """The latest failed attempt's error, as the delivery log shows it."""
    lastResponseCode: int | None


@with_config(ConfigDict(extra="forbid"))
class FailingApp(TypedDict):
    """An app with webhooks whose deliveries keep failing, and whom to tell."""

    appId: str
    appName: str
    appStatus: str
    developerEmail: str
    webhooks: list[FailingWebhookOut]


@with_config(ConfigDict(extra="forbid"))
class FailingApps(TypedDict):
    """Every app with a failing webhook, the most failures first; ``next`` is always null."""

    data: list[FailingApp]
    next: None


def _bounded_int(args: MultiDict[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = args.get(name)
    if raw is None:
        return default
    # ASCII digits only, and few: int() also reads other scripts' digits, signs and spaces.
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or not low <= int(raw) <= high:
        raise InvalidInput([f"{name} must be an integer from {low} to {high}"])
    return int(raw)


@blueprint.get("/webhooks/failing")
@operation(
    json_reply(200, FailingApps, "The apps whose webhooks keep failing"),
    raises=(InvalidInput,),
    params=_FAILING_PARAMS,
)
async def failing_apps() -> FailingApps:
    """The apps with a webhook whose deliveries that ended in the window (15 minutes unless
    ``window`` says otherwise) are at least ``atLeast`` (5) and more than half failed for good
    or wait for a retry: what the ``ledgerport_webhook_apps_failing`` gauge counts, named.
    Deliveries refused unsent (a switched-off webhook, a suspended app) do not count."""
    window = _bounded_int(
        request.args, "window", int(queues.FAILING_WINDOW), 60, FAILING_WINDOW_MAX
    )
    at_least = _bounded_int(
        request.args, "atLeast", queues.FAILING_AT_LEAST, 1, FAILING_AT_LEAST_MAX
    )
    failing = await failing_webhooks(platform(), window=window, at_least=at_least)
    by_app: dict[str, FailingApp] = {}
    for webhook in failing:
        app = by_app.setdefault(
            webhook.app_id,
            {
                "appId": webhook.app_id,
                "appName": webhook.app_name,
                "appStatus": webhook.app_status,
                "developerEmail": webhook.developer_email,
                "webhooks": [],
            },
        )
        app["webhooks"].append(
            {
                "id": webhook.webhook_id,
                "url": webhook.url,
                "enabled": webhook.enabled,
                "ended": webhook.ended,
                "failed": webhook.failed,
                "retrying": webhook.retrying,
                "lastEndedAt": iso_time(webhook.last_ended_at),
                "lastError": webhook.last_error,
                "lastResponseCode": webhook.last_response_code,
            }
        )

    def failures(app: FailingApp) -> int:
        return sum(hook["failed"] + hook["retrying"] for hook in app["webhooks"])

    ordered = sorted(by_app.values(), key=lambda app: (-failures(app), app["appId"]))
    return {"data": ordered, "next": None}
