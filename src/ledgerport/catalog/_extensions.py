"""The UI extension targets (contract.md: App platform surfaces): where an app's pages appear in
the service. A target on a record (its details page or its list's actions) needs that record
type's read scope among the app's registered scopes; the dashboard card needs none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

from ._records import RECORD_KINDS

ExtensionPlace = Literal["details", "list.action", "card"]


@dataclass(frozen=True, slots=True)
class ExtensionTarget:
    name: str
    place: ExtensionPlace
    record_type: str | None
    """The record type shown there (an app data resource type); None on the dashboard."""

    @property
    def scope(self) -> str | None:
        """The scope an app must register to extend this target."""
        if self.record_type is None:
            return None
        return f"{RECORD_KINDS[self.record_type].area}:read"


def _target(record_type: str, place: ExtensionPlace) -> ExtensionTarget:
    return ExtensionTarget(f"{record_type}.{place}", place, record_type)


EXTENSION_TARGETS: Final[Mapping[str, ExtensionTarget]] = MappingProxyType(
    {
        target.name: target
        for target in (
            _target("invoice", "details"),
            _target("invoice", "list.action"),
            _target("customer", "details"),
            _target("customer", "list.action"),
            _target("supplier", "details"),
            _target("supplier", "list.action"),
            _target("payment", "details"),
            _target("purchase", "details"),
            _target("purchase", "list.action"),
            _target("purchase_return", "details"),
            _target("quote", "details"),
            _target("quote", "list.action"),
            _target("account", "details"),
            _target("journal_entry", "details"),
            ExtensionTarget("dashboard.card", "card", None),
        )
    }
)
EXTENSION_LABEL_MAX_LENGTH: Final = 60
EXTENSION_PATH_MAX_LENGTH: Final = 512
