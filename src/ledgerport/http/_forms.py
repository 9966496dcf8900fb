"""The forms of the values the data API checks beyond their type, as the OpenAPI document states
them: decimal strings (money and quantities) and dates.

Each pattern says exactly what the books take, so a client built from the document never sends a
value refused for its form: ``books.decimal_problem`` takes up to 13 digits and 4 decimals, never a
negative number (``-0`` is zero), and a quantity or an amount only above zero; a date is a day of
the proleptic Gregorian calendar from 0001-01-01 to 9999-12-31 (``strptime("%Y-%m-%d")``).
A text the books trim must hold something besides white space (``str.strip``'s, which is not
JSON Schema's ``\\s``). ``tests/unit/test_value_forms.py`` holds the patterns to those checks.
"""

from __future__ import annotations

from typing import Final

INTEGER_DIGITS: Final = 13
FRACTION_DIGITS: Final = 4


def _with_a_nonzero_digit(most: int) -> str:
    """1 to ``most`` digits, at least one of them not 0."""
    return "|".join(f"0{{{zeros}}}[1-9][0-9]{{0,{most - 1 - zeros}}}" for zeros in range(most))


NON_NEGATIVE_DECIMAL: Final = (
    f"^(?:[0-9]{{1,{INTEGER_DIGITS}}}(?:\\.[0-9]{{1,{FRACTION_DIGITS}}})?"
    f"|-0{{1,{INTEGER_DIGITS}}}(?:\\.0{{1,{FRACTION_DIGITS}}})?)$"
)
"""A decimal string of zero or more: ``"0"``, ``"10.00"``, ``"1234.5678"``."""
POSITIVE_DECIMAL: Final = (
    f"^(?:(?:{_with_a_nonzero_digit(INTEGER_DIGITS)})(?:\\.[0-9]{{1,{FRACTION_DIGITS}}})?"
    f"|0{{1,{INTEGER_DIGITS}}}\\.(?:{_with_a_nonzero_digit(FRACTION_DIGITS)}))$"
)
"""A decimal string above zero: ``"1"``, ``"0.5"``, ``"10.00"``."""

_YEAR = "(?:[0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)"
_MONTH_DAY = (
    "(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
    "|(?:0[13-9]|1[0-2])-(?:29|30)"
    "|(?:0[13578]|1[02])-31)"
)
_LEAP_DAY = (
    "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29"
)
DATE: Final = f"^(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_DAY})$"
"""An ISO 8601 calendar date that exists: ``2026-09-22``, ``2028-02-29``, not ``2026-02-29``."""

WHITE_SPACE: Final = (
    "\\t\\n\\u000b\\u000c\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000"
)
"""The characters ``str.isspace`` calls white space, as a JSON Schema character class's body."""
NOT_BLANK: Final = f"^[^\\u0000]*[^\\u0000{WHITE_SPACE}][^\\u0000]*$"
"""A text with something besides white space (as ``str.isspace`` has it), and no NUL."""
