"""The operator API, ``/admin/*``: the bookkeeping product's backend provisions tenants here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from quart import Blueprint, request
from quart_schema import validate_request

from ledgerport import access, apps, auth, books

from ._context import platform, unit_of_work
from ._session_tokens import session_token_answer

blueprint = Blueprint("admin", __name__, url_prefix="/admin")


class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    @field_validator("*", mode="after")
    @classmethod
    def _no_nul(cls, value: object) -> object:
        # PostgreSQL TEXT cannot hold NUL; refuse it on every backend alike.
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(text, str) and "\x00" in text for text in texts):
            raise ValueError("must not contain NUL characters")
        return value


class BusinessIn(_Body):
    name: str = Field(min_length=1, max_length=200)
    sandbox: bool = False
    plan: Literal["free", "paid"] = "paid"
    invoiceLimit: int | None = Field(default=None, ge=0, le=1_000_000_000)


class UserIn(_Body):
    email: str = Field(min_length=3, max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")
    password: str = Field(min_length=8, max_length=1024)
    name: str | None = Field(default=None, max_length=200)


class MembershipIn(_Body):
    role: Literal["owner", "admin", "accountant", "viewer"]
    active: bool = True


class RolePermissionsIn(_Body):
    permissions: list[str]


class AppIn(_Body):
    name: str = Field(min_length=1, max_length=200)
    type: Literal["CONFIDENTIAL", "PUBLIC"]
    redirectUris: list[str]
    scopes: list[str]
    developerUserId: str
    reviewed: bool = False
    appUrl: str | None = Field(default=None, max_length=512)


class AppStatusIn(_Body):
    status: Literal["ACTIVE", "SUSPENDED", "DEACTIVATED"]


class AppReviewIn(_Body):
    reviewed: bool


class InstallationIn(_Body):
    appId: str
    businessId: str
    userId: str
    scopes: list[str]


class SessionTokenIn(_Body):
    appId: str
    businessId: str
    userId: str


class DeveloperTokenIn(_Body):
    userId: str


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


def _business_json(business: books.Business) -> dict[str, Any]:
    return {
        "id": business.id,
        "name": business.name,
        "sandbox": business.sandbox,
        "plan": business.plan,
        "invoiceLimit": business.invoice_limit,
    }


@blueprint.post("/businesses")
@validate_request(BusinessIn)
async def create_business(data: BusinessIn) -> tuple[dict[str, Any], int]:
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
async def create_user(data: UserIn) -> tuple[dict[str, Any], int]:
    """Create a user who can sign in on the application host."""
    password_hash = await platform().passwords.hash(data.password)
    async with unit_of_work() as tx:
        user = await books.create_user(
            tx, now=platform().now(), email=data.email, password_hash=password_hash, name=data.name
        )
    return {"id": user.id, "email": user.email, "name": user.name}, 201


@blueprint.put("/businesses/<business_id>/members/<user_id>")
@validate_request(MembershipIn)
async def set_member(business_id: str, user_id: str, data: MembershipIn) -> dict[str, Any]:
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
async def set_role(business_id: str, role: str, data: RolePermissionsIn) -> dict[str, Any]:
    """Change which permissions a role holds in one business."""
    async with unit_of_work() as tx:
        held = await books.set_role_permissions(
            tx, business_id=business_id, role=role, permissions=data.permissions
        )
    return {"businessId": business_id, "role": role, "permissions": sorted(held)}


def _app_json(app: apps.App) -> dict[str, Any]:
    return {
        "id": app.id,
        "clientId": app.client_id,
        "name": app.name,
        "type": app.type,
        "redirectUris": list(app.redirect_uris),
        "scopes": list(app.scopes),
        "developerUserId": app.developer_user_id,
        "reviewed": app.reviewed,
        "status": app.status,
        "appUrl": app.app_url,
    }


@blueprint.post("/apps")
@validate_request(AppIn)
async def create_app(data: AppIn) -> tuple[dict[str, Any], int]:
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
    body = _app_json(app)
    body["clientSecret"] = secret
    return body, 201


@blueprint.post("/apps/<app_id>/status")
@validate_request(AppStatusIn)
async def set_app_status(app_id: str, data: AppStatusIn) -> dict[str, Any]:
    """Suspend, deactivate or reactivate an app; takes effect on its next request."""
    async with unit_of_work() as tx:
        app = await apps.set_app_status(tx, app_id, data.status)
    return _app_json(app)


@blueprint.put("/apps/<app_id>/review")
@validate_request(AppReviewIn)
async def set_app_review(app_id: str, data: AppReviewIn) -> dict[str, Any]:
    """Record an app's review: reviewed apps (also dynamically registered clients, which start
    unreviewed) may connect to any business, unreviewed ones to sandbox businesses only."""
    async with unit_of_work() as tx:
        app = await apps.set_app_reviewed(tx, app_id, data.reviewed)
    return _app_json(app)


def _installation_json(installation: apps.Installation) -> dict[str, Any]:
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
async def install(data: InstallationIn) -> tuple[dict[str, Any], int]:
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
async def uninstall(installation_id: str) -> tuple[str, int]:
    """Uninstall: revokes the installation's tokens, cancels its codes, emits app.uninstalled."""
    async with unit_of_work() as tx:
        await access.uninstall(tx, now=platform().now(), installation_id=installation_id)
    return "", 204


@blueprint.delete("/businesses/<business_id>/apps/<app_id>/access")
async def revoke_access(business_id: str, app_id: str) -> tuple[str, int]:
    """The business revokes the app's access: its tokens there stop working at once."""
    async with unit_of_work() as tx:
        await access.revoke_access(tx, now=platform().now(), business_id=business_id, app_id=app_id)
    return "", 204


@blueprint.post("/session-tokens")
@validate_request(SessionTokenIn)
async def session_token(data: SessionTokenIn) -> tuple[dict[str, Any], int]:
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
async def developer_token(data: DeveloperTokenIn) -> tuple[dict[str, str], int]:
    """A bearer token for ``/developer/*`` acting as the user (shown once)."""
    p = platform()
    async with unit_of_work() as tx:
        token = await auth.issue_developer_token(tx, p.keyring, now=p.now(), user_id=data.userId)
    return {"token": token}, 201
