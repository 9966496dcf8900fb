"""Business records of every kind, kept as documents in one table.

A record's ``data`` is exactly what the API answers and what its events carry (money as
decimal strings), so a read never recomposes it. Ids carry the kind's prefix and are unique
everywhere, but every lookup is scoped to the business: another business's id is not found.
Deleting keeps the row (``deleted_at``) so references from other records still resolve
internally, while the API no longer answers it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.storage import Row, Transaction, placeholders

from ._errors import RecordNotFound

Document = dict[str, Any]

_CURSOR = re.compile(r"c[0-9]{1,18}")
"""A cursor a list returns: ``c`` and a row's sequence number (ASCII digits, within int64)."""


def iso(now: float) -> str:
    """Unix seconds as an ISO 8601 UTC timestamp, to the second."""
    return datetime.fromtimestamp(int(now), UTC).isoformat().replace("+00:00", "Z")


def iso_date(now: float) -> str:
    return datetime.fromtimestamp(now, UTC).date().isoformat()


def _document(row: Row) -> Document:
    document: Document = json.loads(row["data"])
    return document


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"))


async def next_numbers(tx: Transaction, business_id: str, kind: str, count: int = 1) -> list[str]:
    """The business's next ``count`` numbers of a numbered kind (``INV-0007``): one conditional
    write, so two documents created at once never share a number."""
    last = await tx.fetchval(
        "INSERT INTO record_numbers (business_id, kind, last) VALUES ($1, $2, $3)"
        " ON CONFLICT (business_id, kind) DO UPDATE SET last = record_numbers.last + $3"
        " RETURNING last",
        business_id,
        kind,
        count,
    )
    return numbers_ending(kind, int(last), count)


def numbers_ending(kind: str, last: int, count: int) -> list[str]:
    """The ``count`` numbers of a numbered kind up to the ``last`` one drawn (a
    ``record_numbers`` row's ``last`` once they were drawn), in order."""
    prefix = catalog.RECORD_KINDS[kind].number_prefix
    assert prefix is not None, kind
    return [f"{prefix}-{n:0{catalog.NUMBER_DIGITS}d}" for n in range(last - count + 1, last + 1)]


async def insert_record(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    kind: str,
    fields: Mapping[str, Any],
    numbered: bool = False,
    unique: str | None = None,
) -> Document:
    """Store a new record whose answer is its id (and number), then ``fields``, then
    ``createdAt``; answers that document. ``unique`` is a value no other record of the kind in
    the business may have (an account's code): storage.Conflict when one has."""
    if numbered:
        (document,) = await insert_numbered_records(
            tx, now=now, business_id=business_id, kind=kind, fields=[fields]
        )
        return document
    document = _new_document(kind, None, fields, now)
    await _insert_documents(tx, now, business_id, kind, [(unique, document)])
    return document


async def insert_numbered_records(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    kind: str,
    fields: Sequence[Mapping[str, Any]],
    numbers: Sequence[str] | None = None,
) -> list[Document]:
    """:func:`insert_record` of several numbered records, numbered in order, as two statements
    whatever their number (their numbers, then the rows); one when the caller drew the
    ``numbers`` already (:func:`numbers_ending`)."""
    if numbers is None:
        numbers = await next_numbers(tx, business_id, kind, len(fields))
    documents = [
        _new_document(kind, number, each, now) for number, each in zip(numbers, fields, strict=True)
    ]
    await _insert_documents(tx, now, business_id, kind, list(zip(numbers, documents, strict=True)))
    return documents


def _new_document(kind: str, number: str | None, fields: Mapping[str, Any], now: float) -> Document:
    document: Document = {"id": new_id(catalog.RECORD_KINDS[kind].id_prefix)}
    if number is not None:
        document["number"] = number
    document.update(fields)
    document["createdAt"] = iso(now)
    return document


async def _insert_documents(
    tx: Transaction,
    now: float,
    business_id: str,
    kind: str,
    documents: Sequence[tuple[str | None, Document]],
) -> None:
    """Insert (number or unique value, document) pairs: one statement on PostgreSQL."""
    if len(documents) > 1 and tx.kind == "postgresql":
        await tx.execute(
            "INSERT INTO records (id, business_id, kind, number, data, created_at, updated_at)"
            " SELECT id, $1, $2, number, data, $3, $3 FROM unnest($4::text[], $5::text[],"
            " $6::text[]) WITH ORDINALITY AS d(id, number, data, position) ORDER BY position",
            business_id,
            kind,
            now,
            [document["id"] for _, document in documents],
            [number for number, _ in documents],
            [_dumps(document) for _, document in documents],
        )
        return
    insert = (
        "INSERT INTO records (id, business_id, kind, number, data, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $6)"
    )
    rows = [
        (document["id"], business_id, kind, number, _dumps(document), now)
        for number, document in documents
    ]
    if len(rows) == 1:
        await tx.execute(insert, *rows[0])
    else:
        await tx.executemany(insert, rows)


async def live_record_ids(
    tx: Transaction, business_id: str, kind: str, record_ids: Iterable[str]
) -> set[str]:
    """Which of ``record_ids`` are live records of ``kind`` in the business (one statement)."""
    wanted = sorted(set(record_ids))
    if not wanted:
        return set()
    rows = await tx.fetch(
        "SELECT id FROM records WHERE business_id = $1 AND kind = $2 AND deleted_at IS NULL"
        f" AND id IN ({placeholders(len(wanted), 3)})",
        business_id,
        kind,
        *wanted,
    )
    return {row["id"] for row in rows}


async def find_record(
    tx: Transaction, business_id: str, kind: str, record_id: str, *, for_update: bool = False
) -> Document | None:
    """The business's live record of ``kind`` called ``record_id``, or None. ``for_update``
    locks the row on PostgreSQL until the transaction ends (SQLite's write transactions are
    serialized already), for read-modify-write of a record."""
    row = await tx.fetchrow(
        "SELECT data FROM records WHERE id = $1 AND business_id = $2 AND kind = $3"
        f" AND deleted_at IS NULL{tx.row_lock if for_update else ''}",
        record_id,
        business_id,
        kind,
    )
    return None if row is None else _document(row)


async def get_record(
    tx: Transaction, business_id: str, kind: str, record_id: str, *, for_update: bool = False
) -> Document:
    """As :func:`find_record`, raising RecordNotFound when there is none."""
    document = await find_record(tx, business_id, kind, record_id, for_update=for_update)
    if document is None:
        raise RecordNotFound(kind, record_id)
    return document


async def record_exists(tx: Transaction, business_id: str, kind: str, record_id: str) -> bool:
    found = await tx.fetchval(
        "SELECT 1 FROM records WHERE id = $1 AND business_id = $2 AND kind = $3"
        " AND deleted_at IS NULL",
        record_id,
        business_id,
        kind,
    )
    return found is not None


def unchanged(document: Document, changes: Mapping[str, Any]) -> bool:
    """Whether ``changes`` would leave ``document`` as it is: an update that changes nothing
    writes nothing and records no ``.updated`` event."""
    return all(document.get(key) == value for key, value in changes.items())


async def save_record(
    tx: Transaction, *, now: float, business_id: str, kind: str, document: Document
) -> Document:
    """Store a changed record; ``updatedAt`` is set to now."""
    document = {**document, "updatedAt": iso(now)}
    await tx.execute(
        "UPDATE records SET data = $1, updated_at = $2"
        " WHERE id = $3 AND business_id = $4 AND kind = $5 AND deleted_at IS NULL",
        _dumps(document),
        now,
        document["id"],
        business_id,
        kind,
    )
    return document


async def delete_record(
    tx: Transaction, *, now: float, business_id: str, kind: str, record_id: str
) -> None:
    changed = await tx.execute(
        "UPDATE records SET deleted_at = $1"
        " WHERE id = $2 AND business_id = $3 AND kind = $4 AND deleted_at IS NULL",
        now,
        record_id,
        business_id,
        kind,
    )
    if not changed:
        raise RecordNotFound(kind, record_id)


async def set_due_watch(tx: Transaction, record_id: str, due_on: str | None) -> None:
    """Watch the record for its due date ``due_on`` (see :func:`due_records`); None stops."""
    await tx.execute("UPDATE records SET due_on = $1 WHERE id = $2", due_on, record_id)


async def due_records(tx: Transaction, *, before: str, limit: int) -> list[tuple[str, str]]:
    """(business id, record id) of at most ``limit`` watched records due before the ISO date
    ``before``, earliest first."""
    rows = await tx.fetch(
        "SELECT business_id, id FROM records WHERE due_on IS NOT NULL AND due_on < $1"
        " AND deleted_at IS NULL ORDER BY due_on, seq LIMIT $2",
        before,
        limit,
    )
    return [(row["business_id"], row["id"]) for row in rows]


async def add_references(
    tx: Transaction, business_id: str, record_id: str, referenced_ids: Iterable[str]
) -> None:
    """Note that ``record_id`` refers to each of ``referenced_ids`` (see :func:`is_referenced`)."""
    await tx.executemany(
        "INSERT INTO record_references (business_id, referenced_id, record_id)"
        " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        [(business_id, referenced, record_id) for referenced in sorted(set(referenced_ids))],
    )


async def is_referenced(tx: Transaction, record_id: str) -> bool:
    """Whether a record refers to ``record_id`` in a way that keeps it from being deleted."""
    found = await tx.fetchval(
        "SELECT 1 FROM record_references WHERE referenced_id = $1 LIMIT 1", record_id
    )
    return found is not None


def decode_cursor(cursor: str) -> int:
    if not _CURSOR.fullmatch(cursor):
        raise InvalidInput(["cursor is not a cursor this list returned"])
    return int(cursor[1:])


async def list_records(
    tx: Transaction, business_id: str, kind: str, *, limit: int, after: str | None
) -> tuple[list[Document], str | None]:
    """A page of the business's live records of ``kind``, oldest first, and the cursor of the
    next page (None on the last). Keyset paging on (business, kind, seq)."""
    texts, next_cursor = await list_record_texts(tx, business_id, kind, limit=limit, after=after)
    return [json.loads(text) for text in texts], next_cursor


async def list_record_texts(
    tx: Transaction, business_id: str, kind: str, *, limit: int, after: str | None
) -> tuple[list[str], str | None]:
    """:func:`list_records`, each record as its stored JSON text (to answer as it is)."""
    after_seq = decode_cursor(after) if after else 0
    rows = await tx.fetch(
        "SELECT seq, data FROM records WHERE business_id = $1 AND kind = $2 AND seq > $3"
        " AND deleted_at IS NULL ORDER BY seq LIMIT $4",
        business_id,
        kind,
        after_seq,
        limit + 1,
    )
    page = rows[:limit]
    next_cursor = f"c{page[-1]['seq']}" if len(rows) > limit else None
    return [row["data"] for row in page], next_cursor
