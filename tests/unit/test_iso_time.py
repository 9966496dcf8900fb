"""The console's times: ``iso_time`` writes what ``datetime`` writes, to the millisecond, for
any moment from 1970 to the year 9999 (it keeps each whole second's text for the next moments
in it, and rounds the fraction itself)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledgerport.http.developer import iso_time

LAST = 253_402_300_799.0
"""The last whole second of the year 9999."""


def by_datetime(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


@given(st.floats(min_value=0, max_value=LAST, allow_nan=False))
def test_any_moment_is_written_as_datetime_writes_it(moment: float) -> None:
    assert iso_time(moment) == by_datetime(moment)


@pytest.mark.parametrize(
    "moment",
    [0.0, 0.0005, 0.9995, 0.9999995, 1_765_000_000.4995, 1_765_000_000.9999995, LAST + 0.999],
)
def test_the_edges_of_a_second_round_as_datetime_rounds_them(moment: float) -> None:
    assert iso_time(moment) == by_datetime(moment)
