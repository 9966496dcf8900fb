"""The chart of accounts and journal posting of the token's business.

Changing accounts needs the role permission accounts:write; posting or reversing a journal
entry needs the scope journal:write and the role permission journal:post (owners and admins by
default).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ledgerport import books, catalog

from .._ids import ACCOUNT
from .._openapi import JSON, json_reply, operation
from .._openapi import Body as BodyDoc
from ._blueprint import blueprint
from ._endpoint import REPLAYED_HEADER, Call, data_route
from ._records import (
    ANSWER_HEADERS,
    WRITE_PARAMS,
    Body,
    Changes,
    Date,
    NonNegativeDecimal,
    OptionalText,
    Record,
    Text,
    changed,
    changes_of,
    created,
    deleted,
    reads,
    record_write_params,
    write_raises,
)


class AccountIn(Body):
    code: str = Field(min_length=1, max_length=20)
    name: str = Text
    type: Literal["asset", "liability", "equity", "income", "expense"]


class AccountChanges(Changes):
    name: str | None = OptionalText
    type: Literal["asset", "liability", "equity", "income", "expense"] | None = None


class JournalLineIn(Body):
    accountId: str = ACCOUNT.field()
    debit: NonNegativeDecimal = "0.00"
    credit: NonNegativeDecimal = "0.00"


class JournalEntryIn(Body):
    lines: list[JournalLineIn] = Field(min_length=2, max_length=200)
    date: Date | None = None
    memo: str | None = Field(default=None, max_length=500)


class ReversalIn(Body):
    date: Date | None = None


reads("account", "/accounts")
reads("journal_entry", "/journal-entries")


@blueprint.post("/accounts")
@operation(
    created("account"),
    raises=write_raises(books.AccountCodeTaken),
    bodies=(BodyDoc(JSON, AccountIn),),
    params=WRITE_PARAMS,
)
@data_route("accounts:write", body=AccountIn, status=201)
async def create_account(tx: Any, call: Call, data: AccountIn) -> books.Document:
    """Add an account to the chart (its code unique in the business); emits account.created."""
    return await books.create_account(
        tx,
        now=call.now,
        business_id=call.business_id,
        code=data.code,
        name=data.name,
        account_type=data.type,
    )


@blueprint.patch("/accounts/<record:record_id>")
@operation(
    changed("account"),
    raises=write_raises(),
    bodies=(BodyDoc(JSON, AccountChanges, required=False),),
    params=record_write_params("account"),
)
@data_route("accounts:write", body=AccountChanges)
async def change_account(
    tx: Any, call: Call, data: AccountChanges, record_id: str
) -> books.Document:
    """Rename an account or change its type; emits account.updated."""
    return await books.update_account(
        tx,
        now=call.now,
        business_id=call.business_id,
        account_id=record_id,
        changes=changes_of(data),
    )


@blueprint.post("/accounts/<record:record_id>/archive")
@operation(
    changed("account"),
    raises=write_raises(books.RecordInWrongState),
    params=record_write_params("account"),
)
@data_route("accounts:write")
async def archive_account(tx: Any, call: Call, record_id: str) -> books.Document:
    """Archive an account: no new entries may use it; emits account.archived."""
    return await books.archive_account(
        tx, now=call.now, business_id=call.business_id, account_id=record_id
    )


@blueprint.delete("/accounts/<record:record_id>")
@operation(
    deleted("account"),
    raises=write_raises(books.RecordInWrongState),
    params=record_write_params("account"),
)
@data_route("accounts:write", status=204)
async def delete_account(tx: Any, call: Call, record_id: str) -> None:
    """Delete an account no journal entry has posted to (archive a used one); emits
    account.deleted."""
    await books.delete_account(tx, now=call.now, business_id=call.business_id, account_id=record_id)


@blueprint.post("/journal-entries")
@operation(
    created("journal_entry"),
    raises=write_raises(),
    bodies=(BodyDoc(JSON, JournalEntryIn),),
    params=WRITE_PARAMS,
)
@data_route(
    "journal:write", permission=catalog.PERMISSION_JOURNAL_POST, body=JournalEntryIn, status=201
)
async def post_journal_entry(tx: Any, call: Call, data: JournalEntryIn) -> books.Document:
    """Post a balanced journal entry (debits equal credits); emits journal_entry.posted."""
    return await books.post_journal_entry(
        tx,
        now=call.now,
        business_id=call.business_id,
        lines=[line.model_dump() for line in data.lines],
        date=data.date,
        memo=data.memo,
    )


@blueprint.post("/journal-entries/<record:record_id>/reverse")
@operation(
    json_reply(201, Record, "The reversing entry", *ANSWER_HEADERS, REPLAYED_HEADER),
    raises=write_raises(books.RecordInWrongState),
    bodies=(BodyDoc(JSON, ReversalIn, required=False),),
    params=record_write_params("journal_entry"),
)
@data_route(
    "journal:write", permission=catalog.PERMISSION_JOURNAL_POST, body=ReversalIn, status=201
)
async def reverse_journal_entry(
    tx: Any, call: Call, data: ReversalIn, record_id: str
) -> books.Document:
    """Reverse a posted entry by a new one of its lines, debits and credits swapped (on
    ``date``, today by default); answers the new entry. Emits journal_entry.posted and
    journal_entry.reversed."""
    _, reversal = await books.reverse_journal_entry(
        tx, now=call.now, business_id=call.business_id, entry_id=record_id, date=data.date
    )
    return reversal
