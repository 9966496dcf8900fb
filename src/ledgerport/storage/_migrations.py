"""Versioned schema migrations: ``migrations/<backend>/NNNN_name.sql``, applied in order, once."""

from __future__ import annotations

import re
from importlib import resources

from ._interface import Migration, MigrationError

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def load_migrations(kind: str) -> list[Migration]:
    folder = resources.files("ledgerport.storage") / "migrations" / kind
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match is None:
            continue
        found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise MigrationError(f"{kind} migrations are not numbered 0001.. without gaps: {versions}")
    return found
