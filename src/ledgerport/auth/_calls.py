"""The two gates of a data API call: the token's scope, then the user's role permission."""

from __future__ import annotations

from ledgerport import catalog
from ledgerport.books import get_membership, role_permissions
from ledgerport.storage import Transaction

from ._errors import InsufficientScope, PermissionDenied
from ._grants import AccessGrant


async def check_call(
    tx: Transaction, grant: AccessGrant, *, scope: str, permission: str | None = None
) -> None:
    """Deny by default: the token must hold ``scope`` and the consenting user's current role in
    the business must hold ``permission`` (default: the scope's name, as area scopes and role
    permissions share names). The role is read at each call, so a changed role counts at once.
    """
    if scope not in grant.scopes:
        raise InsufficientScope(scope)
    needed = permission if permission is not None else scope
    if needed not in catalog.PERMISSIONS:
        return
    membership = await get_membership(tx, grant.business_id, grant.user_id)
    held = (
        await role_permissions(tx, grant.business_id, membership.role)
        if membership is not None and membership.active
        else frozenset()
    )
    if needed not in held:
        raise PermissionDenied(needed)
