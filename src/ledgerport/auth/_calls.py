"""The two gates of a data API call: the token's scope, then the user's role permission."""

from __future__ import annotations

from ledgerport import catalog

from ._errors import InsufficientScope, PermissionDenied
from ._grants import AccessGrant


def check_call(grant: AccessGrant, *, scope: str, permission: str | None = None) -> None:
    """Deny by default: the token must hold ``scope``, the consenting user must still be an
    active member of the business, and their current role there must hold ``permission``
    (default: the scope's name, as area scopes and role permissions share names; scopes that
    are no permission, such as ``events:read``, need the membership only). The membership and
    role come with the grant, read with the token at each call (``resolve_access_token``), so
    a member made inactive, or a changed role, counts at once.
    """
    if scope not in grant.scopes:
        raise InsufficientScope(scope)
    needed = permission if permission is not None else scope
    if grant.permissions is None:
        raise PermissionDenied(needed)
    if needed in catalog.PERMISSIONS and needed not in grant.permissions:
        raise PermissionDenied(needed)
