"""Versioned schema migrations: ``migrations/<backend>/NNNN_name.sql``, applied in order, once."""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from importlib import resources

from ._interface import MigrationError

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    def statements(self) -> list[str]:
        """The file split into single statements (SQLite executes one at a time)."""
        result: list[str] = []
        pending = ""
        for line in self.sql.splitlines(keepends=True):
            if not pending and (not line.strip() or line.lstrip().startswith("--")):
                continue
            pending += line
            if sqlite3.complete_statement(pending):
                result.append(pending.strip())
                pending = ""
        if pending.strip():
            raise MigrationError(f"migration {self.version:04d}_{self.name}: unterminated SQL")
        return result


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
