"""The operator API's tenants: businesses, users, memberships, a role's permissions in a business,
and the redaction of a customer's, a supplier's or a business's personal data."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, with_config
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, books, catalog, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._openapi import (
    Param,
    json_reply,
    one_of,
    operation,
)
from ._blueprint import INPUT_ERRORS, NOT_FOUND, AdminBody, WholeNumber, blueprint


class BusinessIn(AdminBody):
    name: str = Field(min_length=1, max_length=200)
    sandbox: bool = False
    plan: Literal["free", "paid"] = "paid"
    invoiceLimit: Annotated[WholeNumber, Field(ge=0, le=1_000_000_000)] | None = None


class UserIn(AdminBody):
    email: str = Field(
        min_length=3,
        max_length=320,
        pattern=r"^[^@\s]+@[^@\s]+$",
        json_schema_extra={"pattern": "^[^@\\s\\u0000]+@[^@\\s\\u0000]+$"},
    )
    password: str = Field(min_length=8, max_length=1024)
    name: str | None = Field(default=None, max_length=200)


class MembershipIn(AdminBody):
    role: Literal["owner", "admin", "accountant", "viewer"]
    active: bool = True


class RolePermissionsIn(AdminBody):
    permissions: list[str] = Field(json_schema_extra={"items": one_of(catalog.PERMISSIONS)})


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


_ROLE = Param("role", "path", "The role whose permissions change", one_of(catalog.ROLES))


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
@operation(json_reply(201, Business, "The business"), raises=INPUT_ERRORS)
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
@operation(json_reply(201, User, "The user"), raises=(*INPUT_ERRORS, books.EmailTaken))
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
@operation(json_reply(200, Membership, "The membership"), raises=(*INPUT_ERRORS, *NOT_FOUND))
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
    raises=(*INPUT_ERRORS, InvalidInput, books.BusinessNotFound),
    params=(_ROLE,),
)
async def set_role(business_id: str, role: str, data: RolePermissionsIn) -> RolePermissions:
    """Change which permissions a role holds in one business."""
    async with unit_of_work() as tx:
        held = await books.set_role_permissions(
            tx, business_id=business_id, role=role, permissions=data.permissions
        )
    return {"businessId": business_id, "role": role, "permissions": sorted(held)}


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
