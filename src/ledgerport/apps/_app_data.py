"""App data: typed fields an app declares per resource type, and the values it keeps on the
records of the businesses it is installed in.

A field is declared once per app, resource type and key (the developer console), with a type:
TEXT, NUMBER, BOOLEAN, DATE or CHOICE (its options). A value belongs to the app, a business, a
record and a key; writing the same (record, key) again replaces it. Values are the app's own data,
so no role permission governs them, but the installation must hold the read scope of the record's
type: app data must not become a way to learn which records exist where the app cannot read.

Values are stored as JSON, never as floats: NUMBER values are kept and answered as decimal
strings (``"12.50"``), like money elsewhere in the API, whether they came as a decimal string or a
JSON number. Every change of a value records ``app_data.updated`` (an app event of the business)
in the caller's transaction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any, Final, Literal

from ledgerport import catalog
from ledgerport.books import RecordNotFound, record_event, record_exists
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.storage import Row, Transaction, placeholders

from ._apps import active_installation
from ._errors import (
    AppCannotAccessType,
    AppDataFieldExists,
    AppDataFieldNotFound,
    AppDataValueNotFound,
    InvalidAppDataValue,
    InvalidChoices,
    ResourceIdsMissing,
    TooManyResourceIds,
    UnknownAppDataField,
)

AppDataFieldType = Literal["TEXT", "NUMBER", "BOOLEAN", "DATE", "CHOICE"]
APP_DATA_FIELD_TYPES: Final[tuple[AppDataFieldType, ...]] = (
    "TEXT",
    "NUMBER",
    "BOOLEAN",
    "DATE",
    "CHOICE",
)
APP_DATA_KEY_PATTERN: Final = "^[A-Za-z][A-Za-z0-9_]*$"
"""A key begins with a letter and holds letters, digits and underscores (``syncStatus``)."""
APP_DATA_KEY_MAX_LENGTH: Final = 64
APP_DATA_NAME_MAX_LENGTH: Final = 100
"""A field's display name, after trimming."""
APP_DATA_TEXT_MAX_LENGTH: Final = 500
"""Characters of a TEXT value."""
APP_DATA_NUMBER_DIGITS: Final = 15
"""A NUMBER value is below 10**15 in absolute value..."""
APP_DATA_NUMBER_DECIMALS: Final = 8
"""... and has at most 8 decimal places."""

_KEY = re.compile(APP_DATA_KEY_PATTERN.strip("^$"))
_DECIMAL = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DECIMAL_TEXT_MAX = 64
"""Longer decimal strings are refused before parsing: none within the range needs as many."""
EVENT_TYPE: Final = "app_data.updated"

StoredValue = str | bool


@dataclass(frozen=True)
class AppDataField:
    id: str
    app_id: str
    resource_type: str
    key: str
    type: AppDataFieldType
    choices: tuple[str, ...] | None
    """The options of a CHOICE field, trimmed; None for the other types."""
    name: str | None

    @classmethod
    def from_row(cls, row: Row) -> AppDataField:
        return cls(
            id=row["id"],
            app_id=row["app_id"],
            resource_type=row["resource_type"],
            key=row["key"],
            type=row["type"],
            choices=tuple(json.loads(row["choices"])) if row["choices"] is not None else None,
            name=row["name"],
        )


@dataclass(frozen=True)
class AppDataValue:
    id: str
    resource_type: str
    resource_id: str
    key: str
    value: StoredValue

    @classmethod
    def from_row(cls, row: Row) -> AppDataValue:
        value: StoredValue = json.loads(row["value"])
        return cls(row["id"], row["resource_type"], row["resource_id"], row["key"], value)

    def payload(self) -> dict[str, Any]:
        """The value as the API answers it and as ``app_data.updated`` carries it."""
        return {
            "id": self.id,
            "resourceType": self.resource_type,
            "resourceId": self.resource_id,
            "key": self.key,
            "value": self.value,
        }


@dataclass(frozen=True)
class AppDataWrite:
    """One value of a write: ``value`` as the request gave it (JSON numbers as ``Decimal`` or
    ``int``, so no digit was lost to a float)."""

    resource_type: str
    resource_id: str
    key: str
    value: object


# --- Fields --------------------------------------------------------------------------------------


def _checked_choices(choices: object) -> tuple[str, ...]:
    """The options trimmed, or InvalidChoices naming the first rule they break."""
    if choices is None:
        raise InvalidChoices("they are missing or null")
    if not isinstance(choices, list | tuple) or not all(isinstance(o, str) for o in choices):
        raise InvalidChoices("they must be an array of strings")
    options = [option.strip() for option in choices]
    if not catalog.CHOICE_OPTIONS_MIN <= len(options) <= catalog.CHOICE_OPTIONS_MAX:
        raise InvalidChoices(f"{len(options)} options were given")
    if any(not option for option in options):
        raise InvalidChoices("an option is empty after trimming")
    if any(len(option) > catalog.CHOICE_OPTION_MAX_LENGTH for option in options):
        raise InvalidChoices(
            f"an option has more than {catalog.CHOICE_OPTION_MAX_LENGTH} characters after trimming"
        )
    if len(set(options)) != len(options):
        raise InvalidChoices("an option is repeated after trimming")
    return tuple(options)


def _name_problems(name: str | None) -> list[str]:
    if name is not None and not 1 <= len(name.strip()) <= APP_DATA_NAME_MAX_LENGTH:
        return [f"name must be 1 to {APP_DATA_NAME_MAX_LENGTH} characters after trimming"]
    return []


async def app_data_fields(tx: Transaction, app_id: str) -> list[AppDataField]:
    """Every field the app declared, by resource type and key."""
    rows = await tx.fetch(
        "SELECT * FROM app_data_fields WHERE app_id = $1 ORDER BY resource_type, key", app_id
    )
    return [AppDataField.from_row(row) for row in rows]


async def _field(tx: Transaction, app_id: str, field_id: str) -> AppDataField:
    row = await tx.fetchrow(
        f"SELECT * FROM app_data_fields WHERE id = $1 AND app_id = $2{tx.row_lock}",
        field_id,
        app_id,
    )
    if row is None:
        raise AppDataFieldNotFound(field_id)
    return AppDataField.from_row(row)


async def declare_app_data_field(
    tx: Transaction,
    *,
    now: float,
    app_id: str,
    resource_type: str,
    key: str,
    type: str,
    choices: Sequence[str] | None = None,
    name: str | None = None,
) -> AppDataField:
    """Declare the app's field ``key`` on records of ``resource_type``.

    A CHOICE field needs ``choices`` (InvalidChoices otherwise); the other types take none.
    AppDataFieldExists when the app declared the key for the type already.
    """
    problems = _name_problems(name)
    if resource_type not in catalog.APP_DATA_RESOURCE_TYPES:
        problems.append(f"resourceType must be one of {', '.join(catalog.APP_DATA_RESOURCE_TYPES)}")
    if not (len(key) <= APP_DATA_KEY_MAX_LENGTH and _KEY.fullmatch(key)):
        problems.append(
            f"key must be 1 to {APP_DATA_KEY_MAX_LENGTH} letters, digits and underscores,"
            " beginning with a letter"
        )
    if type not in APP_DATA_FIELD_TYPES:
        problems.append(f"type must be one of {', '.join(APP_DATA_FIELD_TYPES)}")
    elif type != "CHOICE" and choices is not None:
        problems.append("choices apply to CHOICE fields only")
    if problems:
        raise InvalidInput(problems)
    options = _checked_choices(choices) if type == "CHOICE" else None
    taken = await tx.fetchval(
        "SELECT 1 FROM app_data_fields WHERE app_id = $1 AND resource_type = $2 AND key = $3",
        app_id,
        resource_type,
        key,
    )
    if taken is not None:
        raise AppDataFieldExists(resource_type, key)
    field = AppDataField(
        id=new_id("apf"),
        app_id=app_id,
        resource_type=resource_type,
        key=key,
        type=next(t for t in APP_DATA_FIELD_TYPES if t == type),
        choices=options,
        name=name.strip() if name is not None else None,
    )
    await tx.execute(
        "INSERT INTO app_data_fields (id, app_id, resource_type, key, type, choices, name,"
        " created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        field.id,
        app_id,
        resource_type,
        key,
        field.type,
        json.dumps(list(options)) if options is not None else None,
        field.name,
        now,
    )
    return field


async def change_app_data_field(
    tx: Transaction, *, now: float, app_id: str, field_id: str, changes: Mapping[str, Any]
) -> AppDataField:
    """Change a field's ``choices`` (CHOICE fields only; null is InvalidChoices) and its display
    ``name`` (null clears it); keys left out of ``changes`` stay as they are.

    Values written before keep their value even when new options no longer hold it: a write
    must fit the field as it is when written.
    """
    field = await _field(tx, app_id, field_id)
    unknown = sorted(set(changes) - {"choices", "name"})
    problems = [f"{name} cannot be changed" for name in unknown]
    if "name" in changes:
        problems += _name_problems(changes["name"])
    if "choices" in changes and field.type != "CHOICE":
        problems.append("choices apply to CHOICE fields only")
    if problems:
        raise InvalidInput(problems)
    choices = _checked_choices(changes["choices"]) if "choices" in changes else field.choices
    name = changes.get("name", field.name)
    changed = AppDataField(
        field.id,
        app_id,
        field.resource_type,
        field.key,
        field.type,
        choices,
        name.strip() if name is not None else None,
    )
    await tx.execute(
        "UPDATE app_data_fields SET choices = $1, name = $2, updated_at = $3 WHERE id = $4",
        json.dumps(list(choices)) if choices is not None else None,
        changed.name,
        now,
        field.id,
    )
    return changed


async def delete_app_data_field(tx: Transaction, *, app_id: str, field_id: str) -> None:
    """Delete a field and its values in every business. Records no event: the developer deleted
    the field, and what the app kept under it goes with it."""
    field = await _field(tx, app_id, field_id)
    await tx.execute(
        "DELETE FROM app_data_values WHERE app_id = $1 AND resource_type = $2 AND key = $3",
        app_id,
        field.resource_type,
        field.key,
    )
    await tx.execute("DELETE FROM app_data_fields WHERE id = $1", field.id)


# --- Values --------------------------------------------------------------------------------------


def _number(value: object) -> str | None:
    """``value`` as a decimal string within range, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if len(value) > _DECIMAL_TEXT_MAX or not _DECIMAL.fullmatch(value):
            return None
        number = Decimal(value)
    elif isinstance(value, int | Decimal):
        number = Decimal(value)
    elif isinstance(value, float):
        # A caller that parsed JSON numbers as floats: their shortest repr is the number sent
        # whenever it has 15 significant digits or fewer.
        number = Decimal(repr(value))
    else:
        return None
    exponent = number.as_tuple().exponent
    if not isinstance(exponent, int) or exponent < -APP_DATA_NUMBER_DECIMALS:
        return None  # not finite, or too many decimal places
    if not number.is_zero() and number.adjusted() >= APP_DATA_NUMBER_DIGITS:
        return None
    return format(abs(number) if number.is_zero() else number, "f")


def _conformed(field: AppDataField, value: object) -> StoredValue | None:
    """``value`` as stored for ``field``, or None when it breaks the field's rules."""
    if field.type == "BOOLEAN":
        return value if isinstance(value, bool) else None
    if field.type == "NUMBER":
        return _number(value)
    if not isinstance(value, str):
        return None
    if field.type == "TEXT":
        return value if len(value) <= APP_DATA_TEXT_MAX_LENGTH else None
    if field.type == "DATE":
        if not _DATE.fullmatch(value):
            return None
        try:
            date.fromisoformat(value)
        except ValueError:
            return None
        return value
    return value if field.choices is not None and value in field.choices else None


_REASONS: Mapping[str, str] = {
    "TEXT": f"must be a string of at most {APP_DATA_TEXT_MAX_LENGTH} characters",
    "NUMBER": (
        'must be a number (a decimal string such as "12.50", or a JSON number) below'
        f" 10^{APP_DATA_NUMBER_DIGITS} in absolute value, with at most"
        f" {APP_DATA_NUMBER_DECIMALS} decimal places"
    ),
    "BOOLEAN": "must be true or false",
    "DATE": "must be an ISO 8601 date such as 2026-09-22",
    "CHOICE": "must be one of the field's choices",
}


async def _granted_scopes(tx: Transaction, app_id: str, business_id: str) -> tuple[str, ...]:
    """What the app's ACTIVE installation in the business grants now (nothing without one)."""
    installation = await active_installation(tx, app_id, business_id)
    return () if installation is None else installation.scopes


def _check_access(resource_type: str, granted: Sequence[str]) -> None:
    scope = catalog.APP_DATA_RESOURCE_SCOPES[resource_type]
    if scope not in granted:
        raise AppCannotAccessType(resource_type, scope)


def _write_problems(values: Sequence[AppDataWrite]) -> list[str]:
    problems = []
    if not 1 <= len(values) <= catalog.APP_DATA_VALUES_MAX:
        problems.append(f"values must hold 1 to {catalog.APP_DATA_VALUES_MAX} values")
    seen: dict[tuple[str, str, str], int] = {}
    for index, item in enumerate(values):
        if item.resource_type not in catalog.APP_DATA_RESOURCE_TYPES:
            problems.append(
                f"values.{index}.resourceType must be one of"
                f" {', '.join(catalog.APP_DATA_RESOURCE_TYPES)}"
            )
        target = (item.resource_type, item.resource_id, item.key)
        if target in seen:
            problems.append(f"values.{index} repeats the resource and key of values.{seen[target]}")
        seen.setdefault(target, index)
    return problems


async def write_app_data(
    tx: Transaction,
    *,
    now: float,
    app_id: str,
    business_id: str,
    values: Sequence[AppDataWrite],
) -> list[AppDataValue]:
    """Write the app's ``values`` on records of the business, all or none; answers them as
    stored, in the order given.

    Checked before anything is written, in this order: the request itself (1 to 25 values, known
    resource types, no (resource, key) twice: InvalidInput); the installation holds each type's
    read scope (AppCannotAccessType); each key is a field the app declared for the type
    (UnknownAppDataField); each value fits its field (InvalidAppDataValue naming every value that
    does not); each record is a live one of the business (RecordNotFound). A value equal to the
    stored one changes nothing; each other records ``app_data.updated``.
    """
    problems = _write_problems(values)
    if problems:
        raise InvalidInput(problems)
    granted = await _granted_scopes(tx, app_id, business_id)
    for item in values:
        _check_access(item.resource_type, granted)
    fields = {(f.resource_type, f.key): f for f in await app_data_fields(tx, app_id)}
    declared = []
    for item in values:
        field = fields.get((item.resource_type, item.key))
        if field is None:
            raise UnknownAppDataField(item.resource_type, item.key)
        declared.append(field)
    stored: list[StoredValue] = []
    details = []
    for item, field in zip(values, declared, strict=True):
        conformed = _conformed(field, item.value)
        if conformed is None:
            details.append(
                {
                    "resourceType": item.resource_type,
                    "resourceId": item.resource_id,
                    "key": item.key,
                    "reason": f"{item.key} {_REASONS[field.type]}",
                }
            )
        else:
            stored.append(conformed)
    if details:
        raise InvalidAppDataValue(details)
    resources = dict.fromkeys((item.resource_type, item.resource_id) for item in values)
    for resource_type, resource_id in resources:
        if not await record_exists(tx, business_id, resource_type, resource_id):
            raise RecordNotFound(resource_type, resource_id)
    return [
        await _put(tx, now=now, app_id=app_id, business_id=business_id, item=item, value=value)
        for item, value in zip(values, stored, strict=True)
    ]


async def _put(
    tx: Transaction,
    *,
    now: float,
    app_id: str,
    business_id: str,
    item: AppDataWrite,
    value: StoredValue,
) -> AppDataValue:
    """Store one value, replacing the record's value of the key; records the change."""
    encoded = json.dumps(value)
    target = (app_id, business_id, item.resource_type, item.resource_id, item.key)
    row = await tx.fetchrow(
        "SELECT id, value FROM app_data_values WHERE app_id = $1 AND business_id = $2"
        f" AND resource_type = $3 AND resource_id = $4 AND key = $5{tx.row_lock}",
        *target,
    )
    if row is not None:
        written = AppDataValue(row["id"], item.resource_type, item.resource_id, item.key, value)
        if row["value"] == encoded:
            return written
        await tx.execute(
            "UPDATE app_data_values SET value = $1, updated_at = $2 WHERE id = $3",
            encoded,
            now,
            row["id"],
        )
    else:
        # A concurrent first write of the same key waits on the unique index, then updates.
        value_id = await tx.fetchval(
            "INSERT INTO app_data_values (id, app_id, business_id, resource_type, resource_id,"
            " key, value, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)"
            " ON CONFLICT (app_id, business_id, resource_type, resource_id, key)"
            " DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
            " RETURNING id",
            new_id("apd"),
            *target,
            encoded,
            now,
        )
        written = AppDataValue(value_id, item.resource_type, item.resource_id, item.key, value)
    await record_event(
        tx,
        now=now,
        type=EVENT_TYPE,
        business_id=business_id,
        app_id=app_id,
        data=written.payload(),
    )
    return written


async def read_app_data(
    tx: Transaction,
    *,
    app_id: str,
    business_id: str,
    resource_ids: Sequence[str],
    resource_type: str | None = None,
) -> list[AppDataValue]:
    """The app's values in the business on the records ``resource_ids`` names (blank names
    ignored, repeated ones looked up once): ResourceIdsMissing when it names none,
    TooManyResourceIds when it gives more than 50, repeated ones counted as given. Ordered as
    the ids were given, then by type and key.

    With ``resource_type``, only values on records of that type (AppCannotAccessType when the
    installation lacks its read scope); without it, values on types the installation cannot
    read are left out.
    """
    given = [i for i in resource_ids if i.strip()]
    if not given:
        raise ResourceIdsMissing()
    if len(given) > catalog.APP_DATA_RESOURCE_IDS_MAX:
        raise TooManyResourceIds(len(given))
    ids = list(dict.fromkeys(given))
    if resource_type is not None and resource_type not in catalog.APP_DATA_RESOURCE_TYPES:
        raise InvalidInput(
            [f"resourceType must be one of {', '.join(catalog.APP_DATA_RESOURCE_TYPES)}"]
        )
    granted = await _granted_scopes(tx, app_id, business_id)
    if resource_type is not None:
        _check_access(resource_type, granted)
        types = [resource_type]
    else:
        types = [t for t, scope in catalog.APP_DATA_RESOURCE_SCOPES.items() if scope in granted]
    if not types:
        return []
    rows = await tx.fetch(
        "SELECT id, resource_type, resource_id, key, value FROM app_data_values"
        f" WHERE app_id = $1 AND business_id = $2 AND resource_id IN ({placeholders(len(ids), 3)})"
        f" AND resource_type IN ({placeholders(len(types), 3 + len(ids))})",
        app_id,
        business_id,
        *ids,
        *types,
    )
    position = {resource_id: index for index, resource_id in enumerate(ids)}
    rows.sort(key=lambda r: (position[r["resource_id"]], r["resource_type"], r["key"]))
    return [AppDataValue.from_row(row) for row in rows]


async def delete_app_data_value(
    tx: Transaction, *, now: float, app_id: str, business_id: str, value_id: str
) -> None:
    """Delete one of the app's values in the business (AppDataValueNotFound when it has no such
    value there); records ``app_data.updated`` with a null value."""
    rows = await tx.fetch(
        "DELETE FROM app_data_values WHERE id = $1 AND app_id = $2 AND business_id = $3"
        " RETURNING resource_type, resource_id, key",
        value_id,
        app_id,
        business_id,
    )
    if not rows:
        raise AppDataValueNotFound(value_id)
    (row,) = rows
    await record_event(
        tx,
        now=now,
        type=EVENT_TYPE,
        business_id=business_id,
        app_id=app_id,
        data={
            "id": value_id,
            "resourceType": row["resource_type"],
            "resourceId": row["resource_id"],
            "key": row["key"],
            "value": None,
        },
    )
