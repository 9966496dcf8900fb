"""Businesses, users, memberships and the permissions each role holds in a business."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.storage import Conflict, Row, Transaction

from ._errors import BusinessNotFound, EmailTaken, UserNotFound

Plan = Literal["free", "paid"]


@dataclass(frozen=True)
class Business:
    id: str
    name: str
    sandbox: bool
    plan: Plan
    invoice_limit: int | None

    @classmethod
    def from_row(cls, row: Row) -> Business:
        return cls(row["id"], row["name"], bool(row["sandbox"]), row["plan"], row["invoice_limit"])


@dataclass(frozen=True)
class User:
    id: str
    email: str
    name: str | None


@dataclass(frozen=True)
class Membership:
    business_id: str
    user_id: str
    role: str
    active: bool


def normalize_email(email: str) -> str:
    return email.strip().lower()


async def create_business(
    tx: Transaction,
    *,
    now: float,
    name: str,
    sandbox: bool = False,
    plan: Plan = "paid",
    invoice_limit: int | None = None,
) -> Business:
    business = Business(new_id("bus"), name, sandbox, plan, invoice_limit)
    await tx.execute(
        "INSERT INTO businesses (id, name, sandbox, plan, invoice_limit, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        business.id,
        name,
        sandbox,
        plan,
        invoice_limit,
        now,
    )
    return business


async def get_business(tx: Transaction, business_id: str) -> Business:
    row = await tx.fetchrow("SELECT * FROM businesses WHERE id = $1", business_id)
    if row is None:
        raise BusinessNotFound(business_id)
    return Business.from_row(row)


async def create_user(
    tx: Transaction, *, now: float, email: str, password_hash: str, name: str | None = None
) -> User:
    """Insert a user whose password the caller hashed (outside the transaction: it is slow)."""
    user = User(new_id("usr"), normalize_email(email), name)
    try:
        await tx.execute(
            "INSERT INTO users (id, email, password_hash, name, created_at)"
            " VALUES ($1, $2, $3, $4, $5)",
            user.id,
            user.email,
            password_hash,
            name,
            now,
        )
    except Conflict as exc:
        raise EmailTaken(user.email) from exc
    return user


async def get_user(tx: Transaction, user_id: str) -> User:
    row = await tx.fetchrow("SELECT id, email, name FROM users WHERE id = $1", user_id)
    if row is None:
        raise UserNotFound(user_id)
    return User(row["id"], row["email"], row["name"])


async def find_user_by_email(tx: Transaction, email: str) -> tuple[User, str] | None:
    """The user and their password hash, or None."""
    row = await tx.fetchrow("SELECT * FROM users WHERE email = $1", normalize_email(email))
    if row is None:
        return None
    return User(row["id"], row["email"], row["name"]), row["password_hash"]


async def set_membership(
    tx: Transaction, *, now: float, business_id: str, user_id: str, role: str, active: bool
) -> Membership:
    if role not in catalog.ROLES:
        raise InvalidInput([f"role must be one of {', '.join(catalog.ROLES)}"])
    await get_business(tx, business_id)
    await get_user(tx, user_id)
    await tx.execute(
        "INSERT INTO memberships (business_id, user_id, role, active, updated_at)"
        " VALUES ($1, $2, $3, $4, $5)"
        " ON CONFLICT (business_id, user_id)"
        " DO UPDATE SET role = excluded.role, active = excluded.active,"
        " updated_at = excluded.updated_at",
        business_id,
        user_id,
        role,
        active,
        now,
    )
    return Membership(business_id, user_id, role, active)


async def get_membership(tx: Transaction, business_id: str, user_id: str) -> Membership | None:
    row = await tx.fetchrow(
        "SELECT * FROM memberships WHERE business_id = $1 AND user_id = $2", business_id, user_id
    )
    if row is None:
        return None
    return Membership(row["business_id"], row["user_id"], row["role"], bool(row["active"]))


async def businesses_of_user(tx: Transaction, user_id: str) -> list[tuple[Business, str]]:
    """The businesses where the user is an active member, with their role, by name."""
    rows = await tx.fetch(
        "SELECT b.*, m.role AS member_role FROM businesses b"
        " JOIN memberships m ON m.business_id = b.id"
        " WHERE m.user_id = $1 AND m.active ORDER BY b.name, b.id",
        user_id,
    )
    return [(Business.from_row(r), r["member_role"]) for r in rows]


async def set_role_permissions(
    tx: Transaction, *, business_id: str, role: str, permissions: Sequence[str]
) -> frozenset[str]:
    if role not in catalog.ROLES:
        raise InvalidInput([f"role must be one of {', '.join(catalog.ROLES)}"])
    unknown = sorted(set(permissions) - set(catalog.PERMISSIONS))
    if unknown:
        raise InvalidInput([f"permissions contains unknown permission {p}" for p in unknown])
    await get_business(tx, business_id)
    held = frozenset(permissions)
    await tx.execute(
        "INSERT INTO role_permissions (business_id, role, permissions) VALUES ($1, $2, $3)"
        " ON CONFLICT (business_id, role) DO UPDATE SET permissions = excluded.permissions",
        business_id,
        role,
        json.dumps(sorted(held)),
    )
    return held


async def role_permissions(tx: Transaction, business_id: str, role: str) -> frozenset[str]:
    """What ``role`` holds in the business: its override if set, else the catalog default."""
    stored = await tx.fetchval(
        "SELECT permissions FROM role_permissions WHERE business_id = $1 AND role = $2",
        business_id,
        role,
    )
    if stored is None:
        return catalog.ROLE_DEFAULTS[role]
    return frozenset(json.loads(stored))
