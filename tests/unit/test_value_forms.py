"""The decimal and date patterns of the document are what the books take, no more, no less.

Any text of the loose shapes pydantic lets through (an optional sign, digits, a point, digits; four
digits, two, two) is taken by the books exactly when the document's pattern matches it, and every
text the pattern generates is taken.
"""

from __future__ import annotations

import re
from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from ledgerport import books
from ledgerport.http import DATE, NON_NEGATIVE_DECIMAL, NOT_BLANK, POSITIVE_DECIMAL

DECIMAL_LIKE = st.from_regex(r"-?[0-9]{1,15}(\.[0-9]{1,5})?", fullmatch=True) | st.sampled_from(
    ["0", "-0", "-0.00", "0.0000", "0.0001", "-0.0001", "0000000000000", "9999999999999.9999"]
)
DATE_LIKE = st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", fullmatch=True) | st.sampled_from(
    ["0000-01-01", "0001-01-01", "9999-12-31", "2026-02-29", "2028-02-29", "2100-02-29",
     "2000-02-29", "2026-04-31", "2026-13-01", "2026-00-10"]
)  # fmt: skip


def _taken(problem: str | None) -> bool:
    return problem is None


@given(DECIMAL_LIKE)
def test_a_positive_decimal_is_what_a_quantity_or_amount_takes(text: str) -> None:
    documented = re.fullmatch(POSITIVE_DECIMAL, text) is not None

    assert documented == _taken(books.decimal_problem(text, "amount", positive=True))


@given(DECIMAL_LIKE)
def test_a_non_negative_decimal_is_what_a_price_takes(text: str) -> None:
    documented = re.fullmatch(NON_NEGATIVE_DECIMAL, text) is not None

    assert documented == _taken(books.decimal_problem(text, "unitPrice"))


@given(st.from_regex(POSITIVE_DECIMAL, fullmatch=True))
def test_every_documented_positive_decimal_is_taken(text: str) -> None:
    assert books.decimal_problem(text, "quantity", positive=True) is None


@given(st.from_regex(NON_NEGATIVE_DECIMAL, fullmatch=True))
def test_every_documented_non_negative_decimal_is_taken(text: str) -> None:
    assert books.decimal_problem(text, "unitPrice") is None


def _a_date(text: str) -> bool:
    try:
        datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        return False
    return True


@given(DATE_LIKE)
def test_the_date_pattern_is_the_days_that_exist(text: str) -> None:
    assert (re.fullmatch(DATE, text) is not None) == _a_date(text)


@given(st.from_regex(DATE, fullmatch=True))
def test_every_documented_date_exists(text: str) -> None:
    assert _a_date(text)


@given(
    st.text(
        alphabet=st.sampled_from(" \t\n\x0b\x0c\r\x1c\x1f\x85\xa0\u2000\u3000\ufeffa\x00"),
        max_size=6,
    )
)
def test_a_text_that_is_not_blank_is_what_the_books_do_not_trim_away(text: str) -> None:
    documented = re.fullmatch(NOT_BLANK, text) is not None

    assert documented == (bool(text.strip()) and "\x00" not in text)
