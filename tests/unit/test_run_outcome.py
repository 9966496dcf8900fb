"""A run's outcome as it may be kept (``runtime.bounded``): its log lines' times are kept only
when there is one whole, sane number per line, and cut with the lines."""

from __future__ import annotations

import pytest

from ledgerport.runtime import RunLimits, bounded

LIMITS = RunLimits(log=10)

TIMES = {
    # name: (lines, times reported, times kept)
    "one per line": (["a", "b"], [0, 7], [0, 7]),
    "none reported": (["a", "b"], [], []),
    "one missing": (["a", "b"], [0], []),
    "one too many": (["a"], [0, 1], []),
    "a fraction": (["a", "b"], [0, 1.5], []),
    "a boolean": (["a", "b"], [0, True], []),
    "a negative": (["a", "b"], [-1, 3], []),
    "past a day": (["a", "b"], [0, 24 * 3600 * 1000 + 1], []),
    "a text": (["a", "b"], [0, "3"], []),
    # Past the log limit (10 bytes, a newline each) the lines are cut, and their times.
    "cut with the lines": (["aaaa", "bbbb", "cccc"], [1, 2, 3], [1, 2]),
}


@pytest.mark.parametrize("name", sorted(TIMES))
def test_log_times_are_kept_one_per_kept_line_or_not_at_all(name: str) -> None:
    lines, reported, kept = TIMES[name]
    outcome = bounded(
        LIMITS, ok=True, result=None, logs=lines, error=None, limit=None, log_times=reported
    )
    assert outcome.log_times == kept
    assert len(outcome.log_times) in (0, len(outcome.logs))
