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
    """Deny by default: the token must hold ``scope``, the consenting user must still be an
    active member of the business, and their current role there must hold ``permission``
    (default: the scope's name, as area scopes and role permissions share names; scopes that
    are no permission, such as ``events:read``, need the membership only). The membership and
    role are read at each call, so a member made inactive, or a changed role, counts at once.
    """
    if scope not in grant.scopes:
        raise InsufficientScope(scope)
    needed = permission if permission is not None else scope
    membership = await get_membership(tx, grant.business_id, grant.user_id)
    if membership is None or not membership.active:
        raise PermissionDenied(needed)
    if needed not in catalog.PERMISSIONS:
        return
    if needed not in await role_permissions(tx, grant.business_id, membership.role):
        raise PermissionDenied(needed)
