"""Business areas, OAuth scopes, role permissions and role defaults, app data resource types."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

# --- Business areas and OAuth scopes -------------------------------------------------------------

AREAS: Final[tuple[str, ...]] = (
    "customers",
    "suppliers",
    "invoices",
    "payments",
    "purchases",
    "purchase-returns",
    "quotes",
    "accounts",
    "journal",
)
"""The business areas named by the interface; each has a ``:read`` and a ``:write`` scope."""

SCOPES: Final[tuple[str, ...]] = (
    "profile:read",
    "events:read",
    "app-data:read",
    "app-data:write",
    *(f"{area}:{access}" for area in AREAS for access in ("read", "write")),
)
"""Every OAuth scope, in the stable order the discovery document lists as scopes_supported."""

_SCOPE_SET: Final[frozenset[str]] = frozenset(SCOPES)


def is_scope(name: str) -> bool:
    """Tell whether ``name`` is one of the service's OAuth scopes (exact, case-sensitive)."""
    return name in _SCOPE_SET


_AREA_NOUNS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "customers": "customers",
        "suppliers": "suppliers",
        "invoices": "invoices",
        "payments": "payments",
        "purchases": "purchases (bills from suppliers)",
        "purchase-returns": "purchase returns",
        "quotes": "quotes",
        "accounts": "chart of accounts",
        "journal": "journal entries",
    }
)

SCOPE_DESCRIPTIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "profile:read": "See your name and email address",
        "events:read": "See the history of changes to the business's books",
        "app-data:read": "Read what the app stores on your records",
        "app-data:write": "Store its own information on your records",
        **{f"{area}:read": f"See your {noun}" for area, noun in _AREA_NOUNS.items()},
        **{f"{area}:write": f"Create and change your {noun}" for area, noun in _AREA_NOUNS.items()},
    }
)
"""Each scope in plain words, as the consent, device and install pages show it."""


# --- Role permissions --------------------------------------------------------------------------

PERMISSION_JOURNAL_POST: Final = "journal:post"
PERMISSION_ACCOUNTS_WRITE: Final = "accounts:write"
PERMISSION_PAYMENTS_DELETE: Final = "payments:delete"
PERMISSION_APPS_INSTALL: Final = "apps:install"
"""Installing an app in a business, or widening its installation (contract.md)."""

PERMISSIONS: Final[tuple[str, ...]] = (
    *(f"{area}:{access}" for area in AREAS for access in ("read", "write")),
    PERMISSION_JOURNAL_POST,
    PERMISSION_PAYMENTS_DELETE,
    PERMISSION_APPS_INSTALL,
)
"""Every role permission: read and write per area, plus journal posting, payment deletion and
installing apps.

A call needs both the token's scope and the user's permission; the two gates are separate.
"""

PERMISSION_DESCRIPTIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        **{f"{area}:read": f"See the {noun}" for area, noun in _AREA_NOUNS.items()},
        **{f"{area}:write": f"Create and change the {noun}" for area, noun in _AREA_NOUNS.items()},
        PERMISSION_JOURNAL_POST: "Post journal entries to the ledger",
        PERMISSION_PAYMENTS_DELETE: "Delete payments",
        PERMISSION_APPS_INSTALL: "Install apps and widen what they may do",
    }
)
"""Each role permission in plain words."""

SENSITIVE_PERMISSIONS: Final[frozenset[str]] = frozenset(
    {
        PERMISSION_JOURNAL_POST,
        PERMISSION_ACCOUNTS_WRITE,
        PERMISSION_PAYMENTS_DELETE,
        PERMISSION_APPS_INSTALL,
    }
)
"""Permissions held by default only by the owner and admin roles."""

ROLES: Final[tuple[str, ...]] = ("owner", "admin", "accountant", "viewer")

ROLE_DEFAULTS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "owner": frozenset(PERMISSIONS),
        "admin": frozenset(PERMISSIONS),
        "accountant": frozenset(PERMISSIONS) - SENSITIVE_PERMISSIONS,
        "viewer": frozenset(p for p in PERMISSIONS if p.endswith(":read")),
    }
)
"""What each role holds until a business changes it (``PUT /admin/businesses/{id}/roles/{r}``)."""


# --- App data ------------------------------------------------------------------------------------

APP_DATA_RESOURCE_SCOPES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "invoice": "invoices:read",
        "customer": "customers:read",
        "supplier": "suppliers:read",
        "payment": "payments:read",
        "purchase": "purchases:read",
        "purchase_return": "purchase-returns:read",
        "quote": "quotes:read",
        "account": "accounts:read",
        "journal_entry": "journal:read",
    }
)
"""Each app data resource type and the read scope an installation needs to use app data on it."""

APP_DATA_RESOURCE_TYPES: Final[tuple[str, ...]] = tuple(APP_DATA_RESOURCE_SCOPES)
