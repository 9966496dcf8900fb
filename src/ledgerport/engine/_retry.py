"""The retry schedule as a pure function (spec: Limits, webhook retry delays).

Attempt ``n`` (1-based) waits ``delays[n - 1]`` seconds after the previous failure; attempt 1 is
at once. After the last attempt fails there is no next one: the delivery is failed for good.
"""

from __future__ import annotations

from collections.abc import Sequence


def next_attempt_at(attempts_made: int, failed_at: float, delays: Sequence[float]) -> float | None:
    """When the attempt after ``attempts_made`` failed ones is due, or None when none is left."""
    if attempts_made < 1:
        raise ValueError("next_attempt_at follows a failed attempt")
    if attempts_made >= len(delays):
        return None
    return failed_at + delays[attempts_made]
