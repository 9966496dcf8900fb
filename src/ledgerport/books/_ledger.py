"""The chart of accounts and journal posting.

An account has a code unique in the business, a name and a type; once an entry has posted to it,
it is archived rather than deleted. A journal entry is posted whole: two or more lines, each a
debit or a credit on a live account of the business, debits equal to credits
(``journal_entry.posted``). A posted entry is never changed: it is reversed by a new entry of the
opposite lines (``journal_entry.reversed`` for the original, ``journal_entry.posted`` for the
reversal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.storage import Conflict, Transaction

from ._errors import AccountCodeTaken, RecordInWrongState
from ._events import record_event
from ._invoicing import check_dates
from ._money import ZERO, amount, decimal_problem
from ._records import (
    Document,
    add_references,
    delete_record,
    find_record,
    get_record,
    insert_record,
    is_referenced,
    iso,
    iso_date,
    save_record,
    unchanged,
)

JOURNAL_LINES_MIN = 2


def _account_type_problem(account_type: str) -> str | None:
    if account_type not in catalog.ACCOUNT_TYPES:
        return f"type must be one of {', '.join(catalog.ACCOUNT_TYPES)}"
    return None


async def create_account(
    tx: Transaction, *, now: float, business_id: str, code: str, name: str, account_type: str
) -> Document:
    problem = _account_type_problem(account_type)
    if problem is not None:
        raise InvalidInput([problem])
    try:
        account = await insert_record(
            tx,
            now=now,
            business_id=business_id,
            kind="account",
            unique=code,
            fields={"code": code, "name": name.strip(), "type": account_type, "archived": False},
        )
    except Conflict as exc:
        raise AccountCodeTaken(code) from exc
    await record_event(tx, now=now, type="account.created", data=account, business_id=business_id)
    return account


async def update_account(
    tx: Transaction, *, now: float, business_id: str, account_id: str, changes: dict[str, Any]
) -> Document:
    """Rename an account or change its type (its code stays: entries refer to it)."""
    account = await get_record(tx, business_id, "account", account_id, for_update=True)
    problem = _account_type_problem(changes["type"]) if "type" in changes else None
    if problem is not None:
        raise InvalidInput([problem])
    if unchanged(account, changes):
        return account
    account = await save_record(
        tx, now=now, business_id=business_id, kind="account", document={**account, **changes}
    )
    await record_event(tx, now=now, type="account.updated", data=account, business_id=business_id)
    return account


async def archive_account(
    tx: Transaction, *, now: float, business_id: str, account_id: str
) -> Document:
    account = await get_record(tx, business_id, "account", account_id, for_update=True)
    if account["archived"]:
        raise RecordInWrongState("account", account_id, "archived", "archived again")
    account = await save_record(
        tx,
        now=now,
        business_id=business_id,
        kind="account",
        document={**account, "archived": True},
    )
    await record_event(tx, now=now, type="account.archived", data=account, business_id=business_id)
    return account


async def delete_account(tx: Transaction, *, now: float, business_id: str, account_id: str) -> None:
    """Delete an account no entry has posted to (archive a used one instead); emits
    ``account.deleted``."""
    account = await get_record(tx, business_id, "account", account_id, for_update=True)
    if await is_referenced(tx, account_id):
        raise RecordInWrongState("account", account_id, "posted to", "deleted")
    await delete_record(tx, now=now, business_id=business_id, kind="account", record_id=account_id)
    await record_event(
        tx,
        now=now,
        type="account.deleted",
        data={"id": account_id, "code": account["code"]},
        business_id=business_id,
    )


async def _lock_accounts(
    tx: Transaction, business_id: str, lines: Sequence[Mapping[str, Any]]
) -> dict[str, Document]:
    """The live accounts the lines name, locked in id order until the transaction ends: a
    concurrent deletion cannot remove an account this entry posts to, and two entries lock
    their accounts in the same order."""
    named = sorted({str(line.get("accountId", "")) for line in lines})
    accounts = {}
    for account_id in named:
        account = await find_record(tx, business_id, "account", account_id, for_update=True)
        if account is not None:
            accounts[account_id] = account
    return accounts


def _line_problems(index: int, line: Mapping[str, Any]) -> list[str]:
    where = f"lines.{index}"
    problems = [
        problem
        for problem in (
            decimal_problem(line.get("debit", "0.00"), f"{where}.debit"),
            decimal_problem(line.get("credit", "0.00"), f"{where}.credit"),
        )
        if problem is not None
    ]
    if not problems:
        debit = Decimal(line.get("debit", "0.00"))
        credit = Decimal(line.get("credit", "0.00"))
        if (debit > 0) == (credit > 0):
            problems.append(f"{where} must be either a debit or a credit")
    return problems


async def post_journal_entry(
    tx: Transaction,
    *,
    now: float,
    business_id: str,
    lines: Sequence[Mapping[str, Any]],
    date: str | None = None,
    memo: str | None = None,
) -> Document:
    """Post a balanced entry; InvalidInput names every problem (unbalanced, a line neither or
    both debit and credit, an unknown or archived account)."""
    check_dates(date=date)
    problems: list[str] = []
    if len(lines) < JOURNAL_LINES_MIN:
        problems.append(f"lines must hold at least {JOURNAL_LINES_MIN} lines")
    debits = credits = ZERO
    posted = []
    accounts = await _lock_accounts(tx, business_id, lines)
    for index, line in enumerate(lines):
        line_problems = _line_problems(index, line)
        account = accounts.get(str(line.get("accountId", "")))
        if account is None:
            line_problems.append(f"lines.{index}.accountId names no account of this business")
        elif account["archived"]:
            line_problems.append(f"lines.{index}.accountId names an archived account")
        problems += line_problems
        if line_problems:
            continue
        debit = Decimal(amount(Decimal(line.get("debit", "0.00"))))
        credit = Decimal(amount(Decimal(line.get("credit", "0.00"))))
        debits, credits = debits + debit, credits + credit
        posted.append(
            {"accountId": line["accountId"], "debit": amount(debit), "credit": amount(credit)}
        )
    if not problems and debits != credits:
        problems.append(
            f"the entry is not balanced: debits {amount(debits)}, credits {amount(credits)}"
        )
    if problems:
        raise InvalidInput(problems)
    return await _post(
        tx,
        now=now,
        business_id=business_id,
        fields={"status": "posted", "date": date or iso_date(now), "memo": memo, "lines": posted},
    )


async def _post(
    tx: Transaction, *, now: float, business_id: str, fields: Mapping[str, Any]
) -> Document:
    entry = await insert_record(
        tx, now=now, business_id=business_id, kind="journal_entry", numbered=True, fields=fields
    )
    await add_references(
        tx, business_id, entry["id"], (line["accountId"] for line in entry["lines"])
    )
    await record_event(
        tx, now=now, type="journal_entry.posted", data=entry, business_id=business_id
    )
    return entry


async def reverse_journal_entry(
    tx: Transaction, *, now: float, business_id: str, entry_id: str, date: str | None = None
) -> tuple[Document, Document]:
    """Reverse a posted entry by a new one of its lines with debits and credits swapped (on
    ``date``, today by default; archived accounts included); answers (the original, now
    ``reversed``, and the reversal). Emits ``journal_entry.posted`` for the reversal and
    ``journal_entry.reversed`` for the original."""
    check_dates(date=date)
    entry = await get_record(tx, business_id, "journal_entry", entry_id, for_update=True)
    if entry["status"] != "posted":
        raise RecordInWrongState("journal_entry", entry_id, entry["status"], "reversed")
    await _lock_accounts(tx, business_id, entry["lines"])
    reversal = await _post(
        tx,
        now=now,
        business_id=business_id,
        fields={
            "status": "posted",
            "date": date or iso_date(now),
            "memo": f"Reversal of {entry['number']}",
            "lines": [
                {"accountId": line["accountId"], "debit": line["credit"], "credit": line["debit"]}
                for line in entry["lines"]
            ],
            "reversesEntryId": entry_id,
        },
    )
    entry = await save_record(
        tx,
        now=now,
        business_id=business_id,
        kind="journal_entry",
        document={
            **entry,
            "status": "reversed",
            "reversalEntryId": reversal["id"],
            "reversedAt": iso(now),
        },
    )
    await record_event(
        tx, now=now, type="journal_entry.reversed", data=entry, business_id=business_id
    )
    return entry, reversal
