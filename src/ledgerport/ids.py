"""Opaque identifiers: a short kind prefix and 96 random bits, e.g. ``bus_3f9a...``."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"
