"""How a hosted-function run ended (``engine/_run_outcome.py``), a pure function of the run, the
pool's outcome, the time and the platform's notes: succeeded; a platform failure goes again on
RUN_RETRY_DELAYS until the last; a handler's own throw fails for good, unless it threw a rate
limit's refusal it could not wait out; the platform's notes join the log in time order."""

from __future__ import annotations

import pytest

from ledgerport import queues
from ledgerport.engine import RUN_RETRY_DELAYS, RunNote, run_ended
from ledgerport.runtime import RunLimits, RunOutcome

NOW = 1_790_000_000.0
LIMITS = RunLimits()
REFUSAL = "ApiError: GET /customers: 429 Too many requests"


def _run(attempts: int = 0) -> queues.ClaimedRun:
    return queues.ClaimedRun(
        "run_1", "fn_1", "app_1", "evt_1", "biz_1", "customer.created", "{}", attempts, "node_1"
    )


def _outcome(
    ok: bool = True,
    error: str | None = None,
    *,
    platform_failure: bool = False,
    logs: tuple[str, ...] = ("handler line",),
    log_times: tuple[int, ...] = (5,),
) -> RunOutcome:
    return RunOutcome(
        ok=ok,
        result='{"done":true}' if ok else None,
        logs=list(logs),
        log_times=list(log_times),
        error=error,
        limit=None,
        platform_failure=platform_failure,
        seconds=0.25,
    )


def _ended(
    outcome: RunOutcome,
    attempts: int = 0,
    held_back: dict[str | None, float] | None = None,
    notes: list[RunNote] | None = None,
) -> queues.RunEnded:
    return run_ended(
        _run(attempts),
        3,
        outcome,
        limits=LIMITS,
        started_at=NOW - 1,
        now=NOW,
        held_back=held_back or {},
        notes=notes or [],
    )


def test_a_handler_that_returned_succeeds() -> None:
    ended = _ended(_outcome())

    assert (ended.status, ended.attempts, ended.version) == ("succeeded", 1, 3)
    assert (ended.result, ended.error, ended.next_attempt_at) == ('{"done":true}', None, None)
    assert (ended.started_at, ended.finished_at, ended.duration_ms) == (NOW - 1, NOW, 250.0)


@pytest.mark.parametrize("attempts", range(len(RUN_RETRY_DELAYS) - 1))
def test_a_run_the_platform_failed_goes_again_on_the_schedule(attempts: int) -> None:
    ended = _ended(_outcome(False, "the worker died", platform_failure=True), attempts)

    assert ended.status == "retrying"
    assert ended.attempts == attempts + 1
    assert ended.next_attempt_at == NOW + RUN_RETRY_DELAYS[attempts + 1]


def test_the_last_failure_of_the_platform_is_final() -> None:
    last = len(RUN_RETRY_DELAYS) - 1

    ended = _ended(_outcome(False, "the worker died", platform_failure=True), last)

    assert (ended.status, ended.next_attempt_at) == ("failed", None)


def test_a_handler_that_throws_fails_its_run_for_good() -> None:
    ended = _ended(_outcome(False, "Error: boom"))

    assert (ended.status, ended.error, ended.next_attempt_at) == ("failed", "Error: boom", None)


@pytest.mark.parametrize(("retry_after", "due"), [(0.5, NOW + 1.0), (30.0, NOW + 30.0)])
def test_a_thrown_refusal_goes_again_not_before_its_retry_after(
    retry_after: float, due: float
) -> None:
    ended = _ended(_outcome(False, REFUSAL), held_back={REFUSAL: retry_after})

    assert (ended.status, ended.next_attempt_at) == ("retrying", due)


def test_a_run_that_fails_for_its_own_reason_after_a_refusal_is_not_retried() -> None:
    ended = _ended(_outcome(False, "Error: boom"), held_back={REFUSAL: 30.0})

    assert (ended.status, ended.next_attempt_at) == ("failed", None)


def test_the_platforms_notes_join_the_log_in_the_order_written() -> None:
    notes = [RunNote(1, 0, "[ledgerport] first"), RunNote(9, 1, "[ledgerport] last")]

    ended = _ended(_outcome(), notes=notes)

    assert list(ended.logs) == ["[ledgerport] first", "handler line", "[ledgerport] last"]
    assert list(ended.log_times) == [1, 5, 9]


# Lines "a", "b", "c" logged at 10, 10 and 12 ms; a note about a call made after ``after`` of
# them, answered ``at``. A note's time is the call's on the handler's clock plus the whole
# milliseconds it took: never later than a line logged once it was answered, often the same.
@pytest.mark.parametrize(
    ("at", "after", "logs"),
    [
        # Called before any line, answered before "a" at the same millisecond.
        (10, 0, ["note", "a", "b", "c"]),
        # Called after "a", answered in its millisecond: "b", at 10, came after the answer.
        (10, 1, ["a", "note", "b", "c"]),
        # Called after "b", answered at once: after both, though "b" is at 10 too.
        (10, 2, ["a", "b", "note", "c"]),
        # Called after "a" and answered at 11: "b", logged at 10 meanwhile, comes first.
        (11, 1, ["a", "b", "note", "c"]),
        # Called after every line: last, whatever its time.
        (12, 3, ["a", "b", "c", "note"]),
        # A count past the lines kept (the rest left out for the log limit): last.
        (0, 9, ["a", "b", "c", "note"]),
    ],
)
def test_a_note_goes_after_the_lines_before_its_call_and_before_those_after_its_answer(
    at: int, after: int, logs: list[str]
) -> None:
    outcome = _outcome(logs=("a", "b", "c"), log_times=(10, 10, 12))

    ended = _ended(outcome, notes=[RunNote(at, after, "note")])

    assert list(ended.logs) == logs
    assert len(ended.log_times) == 4


def test_notes_at_one_place_go_in_their_times_order_then_as_told() -> None:
    notes = [RunNote(20, 0, "late"), RunNote(11, 1, "early"), RunNote(11, 0, "told after")]
    outcome = _outcome(logs=("a", "b"), log_times=(10, 30))

    ended = _ended(outcome, notes=notes)

    assert list(ended.logs) == ["a", "early", "told after", "late", "b"]
    assert list(ended.log_times) == [10, 11, 11, 20, 30]


def test_without_the_lines_times_the_notes_come_after_them_untimed() -> None:
    notes = [RunNote(1, 0, "[ledgerport] first")]

    ended = _ended(_outcome(logs=("a", "b"), log_times=()), notes=notes)

    assert list(ended.logs) == ["a", "b", "[ledgerport] first"]
    assert list(ended.log_times) == []
