"""An app's secrets: values its hosted functions may send to other services without ever seeing
them (contract.md, third round: "Hosted functions: secrets, outbound fetch, schedules").

A secret is written through the console (``PUT .../secrets/{name}``) and never answered again:
the store keeps its value sealed under the root key (``Keyring.encrypt``), bound to the app and
the name, so a sealed value copied to another row does not open. Reads answer names and times
only. A run does not get the values either: the runner loads the sealed values of the app when
it claims the run (:func:`sealed_secrets`), gives the sandbox a placeholder per name, and opens a
value only as a fetch to a host the function allows leaves the engine, where the placeholder
stands in one of its header values (``engine/_egress.py``). A secret deleted or changed is
seen by the next run claimed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.keys import DecryptionError, Keyring
from ledgerport.storage import Row, Transaction

from ._errors import SecretNotFound

_NAME = re.compile(catalog.SECRET_NAME_PATTERN)


@dataclass(frozen=True)
class AppSecret:
    """A secret as it is shown: its name and times, never its value."""

    name: str
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: Row) -> AppSecret:
        return cls(row["name"], float(row["created_at"]), float(row["updated_at"]))


def _context(app_id: str, name: str) -> str:
    return f"app-secret:{app_id}:{name}"


def secret_name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as a secret's name, or None."""
    if not _NAME.match(name):
        return "name must be an upper-case letter, then up to 63 upper-case letters, digits or _"
    return None


def _value_problem(value: str) -> str | None:
    size = len(value.encode())  # a lone surrogate: UnicodeEncodeError, a 400
    if size > catalog.SECRET_VALUE_MAX_BYTES:
        return f"value must be at most {catalog.SECRET_VALUE_MAX_BYTES} bytes of UTF-8"
    if not value:
        return "value must not be empty"
    return None


async def put_secret(
    tx: Transaction, keyring: Keyring, *, now: float, app_id: str, name: str, value: str
) -> AppSecret:
    """Set the app's secret ``name`` to ``value`` (creating it, or replacing its value).
    InvalidInput: a malformed name, an empty value or one over SECRET_VALUE_MAX_BYTES, the
    app's SECRETS_PER_APP_MAX + 1st secret. The value is never part of an error."""
    problems = [p for p in (secret_name_problem(name), _value_problem(value)) if p is not None]
    if problems:
        raise InvalidInput(problems)
    # Two writes of the app's secrets at once: the second waits (the count below holds).
    await tx.serialize(f"secrets:{app_id}")
    sealed = SealedSecret.seal(keyring, app_id=app_id, name=name, value=value).sealed
    row = await tx.fetchrow(
        "SELECT created_at FROM app_secrets WHERE app_id = $1 AND name = $2", app_id, name
    )
    if row is None:
        count = await tx.fetchval("SELECT COUNT(*) FROM app_secrets WHERE app_id = $1", app_id)
        if int(count) >= catalog.SECRETS_PER_APP_MAX:
            raise InvalidInput([f"an app has at most {catalog.SECRETS_PER_APP_MAX} secrets"])
        await tx.execute(
            "INSERT INTO app_secrets (app_id, name, value, created_at, updated_at)"
            " VALUES ($1, $2, $3, $4, $4)",
            app_id,
            name,
            sealed,
            now,
        )
        return AppSecret(name, now, now)
    await tx.execute(
        "UPDATE app_secrets SET value = $1, updated_at = $2 WHERE app_id = $3 AND name = $4",
        sealed,
        now,
        app_id,
        name,
    )
    return AppSecret(name, float(row["created_at"]), now)


async def list_secrets(tx: Transaction, app_id: str) -> list[AppSecret]:
    """The app's secrets by name, without their values."""
    rows = await tx.fetch(
        "SELECT name, created_at, updated_at FROM app_secrets WHERE app_id = $1 ORDER BY name",
        app_id,
    )
    return [AppSecret.from_row(row) for row in rows]


async def delete_secret(tx: Transaction, *, app_id: str, name: str) -> None:
    """Delete the app's secret ``name``: runs claimed from now on no longer have it.
    SecretNotFound when the app has none of that name."""
    deleted = await tx.execute(
        "DELETE FROM app_secrets WHERE app_id = $1 AND name = $2", app_id, name
    )
    if not deleted:
        raise SecretNotFound(name)


@dataclass(frozen=True)
class SealedSecret:
    """A secret as a run holds it: sealed, opened only by :meth:`open` at egress."""

    app_id: str
    name: str
    sealed: str

    @classmethod
    def seal(cls, keyring: Keyring, *, app_id: str, name: str, value: str) -> SealedSecret:
        """``value`` sealed as the app's secret ``name``: it opens under this name only."""
        return cls(app_id, name, keyring.encrypt(value, context=_context(app_id, name)))

    def open(self, keyring: Keyring) -> str | None:
        """The value; None when it does not open (the root key changed under it)."""
        try:
            return keyring.decrypt(self.sealed, context=_context(self.app_id, self.name))
        except DecryptionError:
            return None

    def __repr__(self) -> str:
        return f"SealedSecret({self.app_id!r}, {self.name!r})"


async def sealed_secrets(tx: Transaction, app_id: str) -> dict[str, SealedSecret]:
    """The app's secrets, sealed, by name: what a run claimed now may use."""
    rows = await tx.fetch("SELECT name, value FROM app_secrets WHERE app_id = $1", app_id)
    return {row["name"]: SealedSecret(app_id, row["name"], row["value"]) for row in rows}
