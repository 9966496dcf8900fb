"""A run's outcome as it may be kept (``runtime.bounded``): its log lines' times are kept only
when there is one whole, sane number per line, and cut with the lines; its stack within its
bounds of frames, line length and total, whatever the guest made of it."""

from __future__ import annotations

import pytest

from ledgerport import runtime
from ledgerport.runtime import RunLimits, bounded, bounded_stack

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


def test_past_its_most_log_lines_a_run_keeps_the_first_and_says_how_many_went() -> None:
    lines = [""] * 65_536
    times = list(range(65_536))

    outcome = bounded(
        RunLimits(), ok=True, result=None, logs=lines, error=None, limit=None, log_times=times
    )

    most = runtime.LOG_LINES_MAX
    assert (outcome.ok, outcome.limit, outcome.error) == (True, None, None)
    assert outcome.logs == [""] * (most - 1) + [
        f"[ledgerport] {65_536 - most + 1} more log lines not kept: a run keeps {most} at most"
    ]
    assert outcome.log_times == [*range(most - 1), 65_535]
    again = bounded(
        RunLimits(),
        ok=True,
        result=None,
        logs=outcome.logs,
        error=None,
        limit=None,
        log_times=outcome.log_times,
    )
    assert (again.logs, again.log_times) == (outcome.logs, outcome.log_times)
    within = bounded(RunLimits(), ok=True, result=None, logs=[""] * most, error=None, limit=None)
    assert within.logs == [""] * most


def _stack(frames: int, line: str = "    at down (function.js:1:250123)") -> str:
    return "\n".join(["Error: deep", *[line] * frames])


def test_a_stack_keeps_its_innermost_and_outermost_frames_and_says_how_many_went() -> None:
    frames = [f"    at f{n} (function.js:{n + 1}:1)" for n in range(240)]
    kept = bounded_stack("\n".join(["Error: deep", *frames]))

    assert kept is not None
    lines = kept.split("\n")
    inner = runtime.STACK_FRAMES_MAX - 10
    assert lines[0] == "Error: deep"
    assert lines[1 : inner + 1] == frames[:inner]
    assert lines[inner + 1] == f"    ... {240 - runtime.STACK_FRAMES_MAX} frames left out"
    assert lines[inner + 2 :] == frames[-10:]


def test_a_long_line_of_a_stack_keeps_its_start_and_the_position_at_its_end() -> None:
    name = "f" * 100_000
    kept = bounded_stack(f"Error: {'m' * 100_000}\n    at {name} (function.js:1:9)")

    assert kept is not None
    message, frame = kept.split("\n")
    assert len(message) == len(frame) == runtime.STACK_LINE_MAX
    assert message.startswith("Error: mmm")
    assert frame.startswith("    at fff")
    position = " (function.js:1:9)"
    assert frame.endswith("\u2026" + "f" * (128 - len(position)) + position)


@pytest.mark.parametrize(
    "stack",
    [
        _stack(240),
        _stack(40, "    at " + "g" * 5000 + " (function.js:1:2)"),
        "Error: " + "\n".join(["x" * 600] * 100),
        "Error: short\n    at handler (function.js:2:3)",
        "\ud800 \x00",
    ],
)
def test_a_stack_is_kept_within_its_bounds_and_checking_again_changes_nothing(
    stack: str,
) -> None:
    kept = bounded_stack(stack)

    assert kept is not None
    lines = kept.split("\n")
    assert len(kept) <= runtime.STACK_MAX
    assert max(len(line) for line in lines) <= runtime.STACK_LINE_MAX
    assert sum(line.lstrip().startswith("at ") for line in lines) <= runtime.STACK_FRAMES_MAX
    assert "\x00" not in kept
    assert bounded_stack(kept) == kept
    outcome = bounded(LIMITS, ok=False, result=None, logs=[], error="x", limit=None, stack=stack)
    assert outcome.stack == kept
