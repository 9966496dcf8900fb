"""Opaque identifiers: a short kind prefix and 96 random bits, e.g. ``bus_3f9a...``."""

from __future__ import annotations

import secrets

RANDOM_BYTES = 12
"""The random part of an id, written as twice as many lowercase hexadecimal digits."""


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(RANDOM_BYTES)}"


def id_pattern(*prefixes: str) -> str:
    """The regular expression (unanchored) of the ids of ``prefixes``' kinds."""
    kinds = prefixes[0] if len(prefixes) == 1 else f"(?:{'|'.join(prefixes)})"
    return f"{kinds}_[0-9a-f]{{{2 * RANDOM_BYTES}}}"
