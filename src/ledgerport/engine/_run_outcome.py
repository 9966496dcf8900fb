"""How a hosted-function run ended, as it is recorded: pure functions of the run, what the pool
answered, the time, and what the platform noted of the run.

A run whose handler returned succeeded. One the platform failed (its worker died), or whose
handler threw the refusal of a rate limit it could not wait out (``_run_calls.py``), goes again
on RUN_RETRY_DELAYS (and not before that refusal's Retry-After); the third failure is final. A
handler that throws for its own reason, or breaks a limit, fails its run for good. What the
guest reported is checked once more (``runtime.recheck``) before anything of it is kept, and the
platform's notes join the run's log in the order they were written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ledgerport import apps, queues
from ledgerport.runtime import RunLimits, RunOutcome, recheck

from ._retry import next_attempt_at

RUN_RETRY_DELAYS = (0.0, 1.0, 10.0)
"""The schedule of a run the platform failed, read as the webhook retry delays are
(``next_attempt_at``): the first attempt at once, the second 1 s and the third 10 s after the
failure before it; the third failure is final."""


def given_back(run: queues.ClaimedRun, *, now: float) -> queues.RunEnded:
    """A run the runner gave back (it stops, or a fault): due again at once, its attempt not
    counted."""
    return queues.RunEnded(
        run_id=run.id,
        lease=run.lease,
        status="retrying" if run.attempts else "queued",
        attempts=run.attempts,
        version=None,
        duration_ms=None,
        logs=(),
        error="the service stopped during the run" if run.attempts else None,
        result=None,
        finished_at=now,
        next_attempt_at=now,
    )


def unrun(run: queues.ClaimedRun, reason: str, *, now: float) -> queues.RunEnded:
    """A run its check just before it started refused (``reason``): failed, not run."""
    return queues.RunEnded(
        run_id=run.id,
        lease=run.lease,
        status="failed",
        attempts=run.attempts,
        version=None,
        duration_ms=None,
        logs=(),
        error=f"not run: {reason}",
        result=None,
        finished_at=now,
        next_attempt_at=None,
    )


def run_ended(
    run: queues.ClaimedRun,
    version: int,
    outcome: RunOutcome,
    *,
    limits: RunLimits,
    started_at: float,
    now: float,
    held_back: Mapping[str | None, float],
    notes: Sequence[RunNote],
) -> queues.RunEnded:
    """How a run of the function's ``version`` that started at ``started_at`` ended at ``now``
    with the pool's ``outcome`` (see the module docstring). ``held_back``: the errors a handler
    ends its run with by throwing a rate limit's refusal, each with its Retry-After; ``notes``:
    what the platform told the run's log."""
    attempts = run.attempts + 1
    # Checked once more before anything is stored: nothing of the guest's is believed.
    kept = recheck(limits, outcome)
    status: queues.RunStatus
    due: float | None = None
    # The Retry-After of the rate limit whose refusal the handler threw, when it did.
    retry_after = held_back.get(kept.error)
    if kept.ok:
        status = "succeeded"
    else:
        # A throwing handler is not tried again, unless it threw a rate limit's refusal
        # of its call: a run that failed for its own reason after a 429 is not retried.
        if outcome.platform_failure or retry_after is not None:
            due = next_attempt_at(attempts, now, RUN_RETRY_DELAYS)
        if due is not None and retry_after is not None:
            due = max(due, now + retry_after)
        status = "retrying" if due is not None else "failed"
    logs, times = with_notes(kept.logs, kept.log_times, notes)
    return queues.RunEnded(
        run_id=run.id,
        lease=run.lease,
        status=status,
        attempts=attempts,
        version=version,
        duration_ms=round(outcome.seconds * 1000, 3),
        logs=logs,
        error=kept.error,
        stack=None if kept.stack is None else apps.source_stack(kept.stack),
        result=kept.result,
        finished_at=now,
        next_attempt_at=due,
        started_at=started_at,
        log_times=times,
    )


class RunNote(NamedTuple):
    """A line the platform tells a run's log about a call of the run: written ``at``
    milliseconds after the handler was called (on its clock), after the ``after`` lines it had
    logged when it made the call."""

    at: int
    after: int
    text: str


def with_notes(
    logs: list[str], times: list[int], notes: Sequence[RunNote]
) -> tuple[list[str], list[int]]:
    """The run's log lines and the platform's notes in the order they were written, with their
    times; the notes after the lines, and no times, when the lines' times are not known.

    A note goes after the lines logged before its call, and before the first line after them
    whose time is not earlier than its own: the note's time is never later than that of a line
    logged once the call was answered, so it comes first on a tie."""
    if len(times) != len(logs):
        return [*logs, *(note.text for note in notes)], []
    placed = [
        (next((i for i in range(n.after, len(times)) if times[i] >= n.at), len(times)), n)
        for n in notes
    ]
    placed.sort(key=lambda pair: (pair[0], pair[1].at))
    merged_logs: list[str] = []
    merged_times: list[int] = []
    line = 0
    for place, note in placed:
        merged_logs += logs[line:place]
        merged_times += times[line:place]
        line = max(line, place)
        merged_logs.append(note.text)
        merged_times.append(note.at)
    return [*merged_logs, *logs[line:]], [*merged_times, *times[line:]]
