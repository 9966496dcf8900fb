"""A hosted function's schedule: five cron fields, read in UTC (contract.md, third round:
Hosted functions, schedules), and the ticks they make.

The fields are cron's (minute, hour, day of the month, month, day of the week), as ``cronsim``
reads them: numbers, ``*``, ranges, lists, steps, month and day names, and ``L``, ``LW`` and
``#`` for the last or the n-th day. Five fields cannot fire more than once a minute, so the rule
"at most once a minute" is the rule "five fields": a sixth field (seconds) is refused, and so
are the ``@`` nicknames (say ``0 * * * *``, not ``@hourly``), so that what is stored is what
the console shows and every schedule reads the same way. A schedule that never fires (the 30th
of February) is refused too.

Ticks are whole minutes in Unix seconds, as every time in the store. :func:`next_tick` is the
first tick after a moment (what a function's ``schedule_next_at`` holds: the tick due next);
:func:`last_tick` the latest at or before one (the tick a late ticker runs: one tick for
everything missed, however many were).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronsim import CronSim, CronSimError

SCHEDULE_MAX_CHARS = 120
"""The longest schedule kept (five fields with long lists fit well within it)."""
SCHEDULE_FIELDS = "minute hour day-of-month month day-of-week"
_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def normal_schedule(schedule: str) -> str:
    """The schedule as kept: its fields separated by one space, upper case as written."""
    return " ".join(schedule.split())


def schedule_problems(schedule: object) -> list[str]:
    """What is wrong with ``schedule`` as a function's schedule (None: it has none)."""
    if schedule is None:
        return []
    if not isinstance(schedule, str):
        return ["schedule must be a text of five cron fields, or null"]
    text = normal_schedule(schedule)
    if not text:
        return [f"schedule must be five cron fields ({SCHEDULE_FIELDS}), UTC, or null"]
    if len(text) > SCHEDULE_MAX_CHARS:
        return [f"schedule must be at most {SCHEDULE_MAX_CHARS} characters"]
    if text.startswith("@"):
        known = _NICKNAMES.get(text.lower())
        instead = f": write {known!r}" if known else ""
        return [f"schedule {text!r}: nicknames are not supported, only five cron fields{instead}"]
    fields = text.split(" ")
    if len(fields) != 5:
        more = " (a sixth field, seconds, would run more than once a minute)" * (len(fields) > 5)
        return [
            f"schedule {text!r} has {len(fields)} fields: it must have five ({SCHEDULE_FIELDS}),"
            f" UTC{more}"
        ]
    try:
        ticks = CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
        next(ticks)
    except CronSimError as exc:
        return [f"schedule {text!r}: {_reason(exc)}"]
    except StopIteration:
        return [f"schedule {text!r} never fires"]
    return []


def _reason(exc: CronSimError) -> str:
    """cronsim's words ("Bad day-of-month") as the rest of the API's."""
    said = str(exc)
    if said.startswith("Bad "):
        return f"the {said[4:]} field is not valid"
    return said[:1].lower() + said[1:]


def next_tick(schedule: str, after: float) -> float | None:
    """The first tick of ``schedule`` (checked: :func:`schedule_problems`) strictly after
    ``after``; None when it fires no more within cron's reach (50 years)."""
    moment = datetime.fromtimestamp(int(after), UTC)
    try:
        return next(CronSim(schedule, moment)).timestamp()
    except StopIteration:
        return None


def last_tick(schedule: str, at: float) -> float | None:
    """The latest tick of ``schedule`` at or before ``at`` (None: none within 50 years)."""
    # Reading backwards, cronsim steps one second back before it looks: from the second after
    # ``at``'s, the tick at ``at``'s own second counts.
    moment = datetime.fromtimestamp(int(at), UTC) + timedelta(seconds=1)
    try:
        return next(CronSim(schedule, moment, reverse=True)).timestamp()
    except StopIteration:
        return None
