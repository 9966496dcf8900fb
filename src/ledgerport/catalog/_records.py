"""The business records of the data API: their kinds, ids, numbers and the plans' ceilings.

The kinds are the app data resource types (contract.md); each belongs to a business area, whose
scopes gate it. The numbering, the default currency and the free plan's yearly ceilings are
ledgerport's own (the spec leaves them open); docs/catalog.md lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final


@dataclass(frozen=True, slots=True)
class RecordKind:
    """One kind of business record: its name (the app data resource type), the prefix of its
    ids, its business area and, for numbered documents, the prefix of their numbers."""

    name: str
    id_prefix: str
    area: str
    number_prefix: str | None = None


RECORD_KINDS: Final[Mapping[str, RecordKind]] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            RecordKind("customer", "cus", "customers"),
            RecordKind("supplier", "sup", "suppliers"),
            RecordKind("invoice", "inv", "invoices", "INV"),
            RecordKind("payment", "pay", "payments"),
            RecordKind("purchase", "pur", "purchases", "PUR"),
            RecordKind("purchase_return", "prt", "purchase-returns", "PRT"),
            RecordKind("quote", "quo", "quotes", "QUO"),
            RecordKind("account", "acc", "accounts"),
            RecordKind("journal_entry", "jnl", "journal", "JE"),
        )
    }
)
"""Every kind of business record, by name."""

NUMBER_DIGITS: Final = 4
"""Numbers are the prefix and a zero-padded sequence per business: INV-0001, INV-0002, ..."""

DEFAULT_CURRENCY: Final = "EUR"
"""The currency of a document created without one."""

ACCOUNT_TYPES: Final[tuple[str, ...]] = ("asset", "liability", "equity", "income", "expense")

FREE_PLAN_YEARLY_INVOICES: Final = 100
"""Invoices a business on the free plan may create in a calendar year (its invoiceLimit, when
set, replaces this figure)."""
FREE_PLAN_YEARLY_TURNOVER: Final = "100000.00"
"""The free plan's turnover cap: the sum of a calendar year's invoice totals, in any currency."""

INTERNAL_AREAS: Final[tuple[str, ...]] = (
    "users",
    "memberships",
    "roles",
    "settings",
    "billing",
    "bank-connections",
)
"""The bookkeeping product's own areas on the API host, outside the partner surface: any call
to ``/<area>`` or below it answers 403 ENDPOINT_NOT_EXPOSED, whatever its token."""
