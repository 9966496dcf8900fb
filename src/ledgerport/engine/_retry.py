"""The retry schedule as pure functions (spec: Limits, webhook retry delays; contract.md, third
round: jitter, Retry-After, 410 Gone).

Attempt ``n`` (1-based) waits ``delays[n - 1]`` seconds after the previous failure; attempt 1 is
at once. After the last attempt fails there is no next one: the delivery is failed for good.
Every delay is lengthened by a random part of at most a tenth of it (never shortened: the
schedule is a floor), so that a receiver's outage ending does not meet every delivery's retry at
the same second. A receiver that answers 429 or 503 with ``Retry-After`` (seconds, or an HTTP
date) moves the next attempt to no earlier than the time it names, at most six hours ahead; the
attempt still counts. A 410 Gone fails the delivery at once, whatever attempts are left.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from email.utils import parsedate_to_datetime

from ledgerport import catalog

Jitter = Callable[[float], float]
"""A random part of a delay, from 0 to at most the delay it is given times RETRY_JITTER."""


def jitter(delay: float) -> float:
    """A random part of ``delay``: uniform in [0, RETRY_JITTER * delay]."""
    return random.uniform(0.0, catalog.RETRY_JITTER * delay)


def next_attempt_at(
    attempts_made: int,
    failed_at: float,
    delays: Sequence[float],
    *,
    spread: Jitter | None = None,
) -> float | None:
    """When the attempt after ``attempts_made`` failed ones is due, or None when none is left;
    with ``spread``, the delay is lengthened by what it answers (its random part)."""
    if attempts_made < 1:
        raise ValueError("next_attempt_at follows a failed attempt")
    if attempts_made >= len(delays):
        return None
    delay = delays[attempts_made]
    extra = 0.0 if spread is None else min(max(spread(delay), 0.0), catalog.RETRY_JITTER * delay)
    return failed_at + delay + extra


def retry_after_seconds(value: str | None, *, now: float) -> float | None:
    """The seconds a ``Retry-After`` header value asks to wait from ``now`` (delta-seconds, or an
    HTTP date), capped at RETRY_AFTER_MAX; None when there is none or it cannot be read. A date
    in the past asks for no wait."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        seconds = float(int(text[:12]))
    else:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if moment.tzinfo is None:
            return None
        seconds = moment.timestamp() - now
    return min(max(seconds, 0.0), float(catalog.RETRY_AFTER_MAX))


RETRY_AFTER_STATUSES = frozenset({429, 503})
"""The answers whose Retry-After the engine honours."""
GONE = 410
"""The answer that switches an endpoint off at once."""


def schedule(
    *,
    attempts_made: int,
    failed_at: float,
    delays: Sequence[float],
    status: int | None,
    retry_after: str | None,
    spread: Jitter | None = jitter,
) -> float | None:
    """When a delivery whose attempt number ``attempts_made`` just failed (with ``status``, or
    no answer) is due next, or None when it has failed for good: the schedule with its jitter,
    moved later by a 429 or 503's ``Retry-After``; None at once for a 410."""
    if status == GONE:
        return None
    due = next_attempt_at(attempts_made, failed_at, delays, spread=spread)
    if due is None or status not in RETRY_AFTER_STATUSES:
        return due
    asked = retry_after_seconds(retry_after, now=failed_at)
    return due if asked is None else max(due, failed_at + asked)
