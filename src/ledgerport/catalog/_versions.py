"""Dated API versions and their 12-month support."""

from __future__ import annotations

import calendar
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

# --- API versions --------------------------------------------------------------------------------

API_VERSION_SUPPORT_MONTHS: Final = 12


@dataclass(frozen=True, slots=True)
class ApiVersion:
    """A dated API version, served from ``released`` until (excluding) ``sunset``."""

    name: str
    released: datetime.date
    sunset: datetime.date


def _add_months(day: datetime.date, months: int) -> datetime.date:
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    return datetime.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _api_version(name: str) -> ApiVersion:
    released = datetime.date.fromisoformat(name)
    return ApiVersion(name, released, _add_months(released, API_VERSION_SUPPORT_MONTHS))


API_VERSIONS: Final[tuple[ApiVersion, ...]] = (
    _api_version("2025-09-15"),
    _api_version("2026-03-01"),
    _api_version("2026-09-22"),
)
"""Every API version ever released, oldest first."""

CURRENT_API_VERSION: Final = "2026-09-22"

_API_VERSIONS_BY_NAME: Final[Mapping[str, ApiVersion]] = MappingProxyType(
    {version.name: version for version in API_VERSIONS}
)


def resolve_version(name: str, today: datetime.date) -> ApiVersion | None:
    """Return the version called ``name`` if it is still supported on ``today``.

    None when no such version exists or it is past its sunset (``today >= sunset``); the caller
    answers 400 UNSUPPORTED_API_VERSION. Pure: the caller passes the date from its clock.
    """
    version = _API_VERSIONS_BY_NAME.get(name)
    if version is None or today >= version.sunset:
        return None
    return version
