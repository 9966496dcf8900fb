"""A function's schedule as a pure rule (contract.md, third round: Hosted functions, schedules):
five cron fields, UTC, at most once a minute; the tick due next, and the latest tick a late
ticker runs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ledgerport import apps, queues


def at(text: str) -> float:
    """A moment written ``2026-12-07 10:15:30`` (UTC), in Unix seconds."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    "schedule",
    [
        None,
        "* * * * *",
        "*/15 * * * *",
        "0 9 * * 1-5",
        "0 9 * * MON-FRI",
        "30 2 1 * *",
        "0 0 L * *",
        "0 12 * JAN,JUL SUN#1",
        "  5   4 * * *  ",
    ],
)
def test_a_schedule_of_five_valid_fields_is_taken(schedule: str | None) -> None:
    assert apps.schedule_problems(schedule) == []


@pytest.mark.parametrize(
    ("schedule", "said"),
    [
        ("* * * * * *", "has 6 fields: it must have five"),
        ("*/10 * * * * *", "more than once a minute"),
        ("* * * *", "has 4 fields"),
        ("", "must be five cron fields"),
        ("   ", "must be five cron fields"),
        ("@hourly", "nicknames are not supported, only five cron fields: write '0 * * * *'"),
        ("@daily", "write '0 0 * * *'"),
        ("@reboot", "nicknames are not supported"),
        ("60 * * * *", "the minute field is not valid"),
        ("* 24 * * *", "the hour field is not valid"),
        ("* * 0 * *", "the day-of-month field is not valid"),
        ("* * * 13 *", "the month field is not valid"),
        ("* * * * 8", "the day-of-week field is not valid"),
        ("*/0 * * * *", "the minute field is not valid"),
        ("0 0 30 2 *", "the day-of-month field is not valid"),
        ("a b c d e", "the minute field is not valid"),
        ("* * * * *" + ",1" * 60, "at most 120 characters"),
        (5, "must be a text of five cron fields, or null"),
    ],
)
def test_a_schedule_that_is_not_five_valid_fields_is_refused_saying_why(
    schedule: object, said: str
) -> None:
    (problem,) = apps.schedule_problems(schedule)
    assert said in problem


@pytest.mark.parametrize(
    ("schedule", "after", "tick"),
    [
        ("* * * * *", "2026-12-07 10:15:30", "2026-12-07 10:16:00"),
        # Strictly after: a moment on a tick has the next one.
        ("* * * * *", "2026-12-07 10:15:00", "2026-12-07 10:16:00"),
        ("*/15 * * * *", "2026-12-07 10:15:00", "2026-12-07 10:30:00"),
        ("0 9 * * 1-5", "2026-12-04 09:00:00", "2026-12-07 09:00:00"),  # Friday to Monday
        ("0 0 1 1 *", "2026-12-07 10:15:30", "2027-01-01 00:00:00"),
        ("0 0 29 2 *", "2026-03-01 00:00:00", "2028-02-29 00:00:00"),
    ],
)
def test_the_next_tick_is_the_first_strictly_after(schedule: str, after: str, tick: str) -> None:
    assert apps.next_tick(schedule, at(after)) == at(tick)
    assert apps.next_tick(schedule, at(after) + 0.999) == at(tick)


@pytest.mark.parametrize(
    ("schedule", "now", "tick"),
    [
        # At or before: a moment on a tick is that tick.
        ("* * * * *", "2026-12-07 10:15:00", "2026-12-07 10:15:00"),
        ("* * * * *", "2026-12-07 10:15:59", "2026-12-07 10:15:00"),
        ("*/15 * * * *", "2026-12-07 10:44:59", "2026-12-07 10:30:00"),
        ("0 9 * * 1-5", "2026-12-07 08:59:00", "2026-12-04 09:00:00"),
    ],
)
def test_the_last_tick_is_the_latest_at_or_before(schedule: str, now: str, tick: str) -> None:
    assert apps.last_tick(schedule, at(now)) == at(tick)
    assert apps.last_tick(schedule, at(now) + 0.5) == at(tick)


def test_a_scheduled_runs_id_is_its_function_business_and_tick() -> None:
    tick = at("2026-12-07 10:15:00")
    first = queues.scheduled_run_id("fn_a", "bus_1", tick)
    assert first == queues.scheduled_run_id("fn_a", "bus_1", tick)
    others = {
        queues.scheduled_run_id("fn_b", "bus_1", tick),
        queues.scheduled_run_id("fn_a", "bus_2", tick),
        queues.scheduled_run_id("fn_a", "bus_1", tick + 60),
    }
    assert first not in others
    assert len(others) == 3
    assert first.startswith("run_")
