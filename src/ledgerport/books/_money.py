"""Money and quantities as decimal strings: parsed to Decimal, never through a float.

Amounts are answered with two decimals (``"1210.00"``); quantities keep up to four. Rounding is
half up, line by line, the way an invoice shows it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from ledgerport import catalog
from ledgerport.errors import InvalidInput

_DECIMAL = re.compile(r"-?[0-9]{1,13}(\.[0-9]{1,4})?")
_CURRENCY = re.compile(r"[A-Z]{3}")
CENT = Decimal("0.01")
ZERO = Decimal("0.00")
MAX_TOTAL = Decimal("9999999999999.99")
"""The largest total of a document's lines: the largest amount a decimal string can state (13
digits before the point). Quantities and prices are each within it, but their products are not,
and a total beyond it could not be counted in cents as a 64-bit integer."""


def decimal_problem(value: object, field: str, *, positive: bool = False) -> str | None:
    """What is wrong with ``value`` as a decimal string, or None."""
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        return f'{field} must be a decimal string such as "10.00" (at most 4 decimals)'
    number = Decimal(value)
    if positive and number <= 0:
        return f"{field} must be greater than 0"
    if not positive and number < 0:
        return f"{field} must not be negative"
    return None


def amount(value: Decimal) -> str:
    """``value`` as money: two decimals, rounded half up."""
    return str(value.quantize(CENT, rounding=ROUND_HALF_UP))


def currency_problem(value: object, field: str = "currency") -> str | None:
    if not isinstance(value, str) or not _CURRENCY.fullmatch(value):
        return f'{field} must be an ISO 4217 code of three capital letters such as "EUR"'
    return None


def currency_or_default(value: str | None) -> str:
    return value if value is not None else catalog.DEFAULT_CURRENCY


def priced_lines(
    lines: Sequence[Mapping[str, Any]], field: str = "lines"
) -> tuple[list[dict[str, str]], Decimal]:
    """Document lines ``{description, quantity, unitPrice}`` checked and the document's total
    (each line's quantity times unit price, rounded to the cent, summed, at most MAX_TOTAL).
    InvalidInput names every bad line."""
    problems: list[str] = []
    if not lines:
        problems.append(f"{field} must hold at least one line")
    checked: list[dict[str, str]] = []
    total = ZERO
    for index, line in enumerate(lines):
        where = f"{field}.{index}"
        line_problems = [
            problem
            for problem in (
                decimal_problem(line.get("quantity"), f"{where}.quantity", positive=True),
                decimal_problem(line.get("unitPrice"), f"{where}.unitPrice"),
            )
            if problem is not None
        ]
        if line_problems:
            problems += line_problems
            continue
        quantity, unit_price = Decimal(line["quantity"]), Decimal(line["unitPrice"])
        total += Decimal(amount(quantity * unit_price))
        checked.append(
            {
                "description": str(line.get("description", "")),
                "quantity": line["quantity"],
                "unitPrice": line["unitPrice"],
            }
        )
    if not problems and total > MAX_TOTAL:
        problems.append(f"{field} must total at most {MAX_TOTAL} (quantity times unitPrice)")
    if problems:
        raise InvalidInput(problems)
    return checked, total
