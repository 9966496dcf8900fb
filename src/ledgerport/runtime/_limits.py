"""What one run may use, and the check of a run's outcome against it.

The harness inside V8 enforces the log and result limits as the run goes, but whatever runs in
the isolate can reach what the harness uses, so nothing outside the guest takes its word for
them: the worker, the pool and the engine each pass the outcome through :func:`bounded` before
it goes further. It is pure and idempotent, so checking again costs little and changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

ERROR_MAX = 4096
"""Characters of a run's error message kept (a longer one is cut, with an ellipsis)."""
STACK_MAX = 8192
"""Characters of the stack of what a handler threw kept (a longer one is cut, likewise)."""
STACK_FRAMES_MAX = 50
"""Frames of a stack kept: the 40 innermost and the 10 outermost, with a line between them
saying how many were left out (a recursion's stack is the same frame hundreds of times)."""
STACK_OUTER_FRAMES = 10
"""Of STACK_FRAMES_MAX, the outermost frames kept (where the handler was called from)."""
STACK_LINE_MAX = 512
"""Characters of one line of a stack kept: a longer one keeps its start and its end (a frame's
position is at its end), an ellipsis between them."""
_LINE_END_KEPT = 128
_FRAME_LINE = re.compile(r"^\s*at ")
LOG_TIME_MAX = 24 * 3600 * 1000
"""Milliseconds after the handler was called a log line's time may say at most."""
LOG_LINES_MAX = 1000
"""Log lines a run keeps: past them the rest are left out, and the last line kept says how many
(the run is not failed for it). 64 KiB of empty lines were 65,536 lines: a run page of 13 MB
that took 6.6 s, an answer of 3 MB."""
_NUL = "\x00"
_REPLACEMENT = "\ufffd"


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate (JavaScript strings may hold them, UTF-8 cannot) and
    each NUL (PostgreSQL's text refuses it) replaced by U+FFFD."""
    if text.isascii():
        return text.replace(_NUL, _REPLACEMENT)
    text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.replace(_NUL, _REPLACEMENT)


@dataclass(frozen=True)
class RunLimits:
    """What one run may use (contract.md: Hosted functions)."""

    cpu: float = 2.0
    """Seconds of CPU (the kernel's granularity is a second)."""
    wall: float = 10.0
    """Seconds from the run's start to its end."""
    heap: int = 64 * 1024 * 1024
    """Bytes of V8 heap."""
    log: int = 64 * 1024
    """Bytes of log lines (UTF-8, a newline each)."""
    result: int = 64 * 1024
    """Bytes of the result's JSON."""


@dataclass(frozen=True)
class Bounded:
    """An outcome within its limits."""

    ok: bool
    result: str | None
    logs: list[str]
    error: str | None
    limit: str | None
    stack: str | None = None
    log_times: list[int] = field(default_factory=list)
    """When each kept log line was written, in milliseconds after the handler was called (empty
    when that is not known)."""


def bounded(
    limits: RunLimits,
    *,
    ok: bool,
    result: str | None,
    logs: list[str],
    error: str | None,
    limit: str | None,
    stack: str | None = None,
    log_times: Sequence[object] = (),
) -> Bounded:
    """The outcome as it may be kept: the log lines that fit in ``limits.log`` (past it the run
    failed on the log limit), LOG_LINES_MAX of them at most (the last one saying how many more
    were left out), a result that is JSON of at most ``limits.result`` bytes (else
    the run failed on the result limit, or on a result that is not JSON), an error of at most
    ERROR_MAX characters and a stack within its bounds (:func:`bounded_stack`), and no NUL or
    lone surrogate in the text (:func:`clean_text`; one rule on both stores). A run that names
    a limit did not succeed. ``log_times`` are kept for the kept lines when there is one per
    line, each a whole number of milliseconds from 0 to LOG_TIME_MAX; otherwise none is."""
    if len(logs) > LOG_LINES_MAX:
        logs, log_times = _lines_kept(logs, log_times)
    kept: list[str] = []
    size = 0
    for line in logs:
        line = clean_text(line)
        size += len(line.encode()) + 1
        if size > limits.log:
            ok = False
            if limit is None:
                limit, error = "log", f"log limit of {limits.log} bytes exceeded"
            break
        kept.append(line)
    if result is not None:
        result = clean_text(result)
        if len(result.encode()) > limits.result:
            ok, result = False, None
            if limit is None:
                limit, error = "result", f"result larger than {limits.result} bytes"
        elif not _is_json(result):
            ok, result = False, None
            error = error or "result is not JSON"
    if limit is not None:
        ok = False
    times = [t for t in log_times if type(t) is int and 0 <= t <= LOG_TIME_MAX]
    return Bounded(
        ok=ok,
        result=result,
        logs=kept,
        error=_cut(error, ERROR_MAX),
        limit=limit,
        stack=bounded_stack(stack),
        log_times=times[: len(kept)] if len(times) == len(logs) == len(log_times) else [],
    )


class Reported(Protocol):
    """An outcome as something reported it: a worker's Done, a pool's RunOutcome."""

    @property
    def ok(self) -> bool: ...
    @property
    def result(self) -> str | None: ...
    @property
    def logs(self) -> list[str]: ...
    @property
    def error(self) -> str | None: ...
    @property
    def limit(self) -> str | None: ...
    @property
    def stack(self) -> str | None: ...
    @property
    def log_times(self) -> list[int]: ...


def recheck(limits: RunLimits, reported: Reported) -> Bounded:
    """:func:`bounded` of what ``reported`` holds: the check made again where an outcome is
    received (the pool's of a Done, the engine's of a RunOutcome)."""
    return bounded(
        limits,
        ok=reported.ok,
        result=reported.result,
        logs=reported.logs,
        error=reported.error,
        limit=reported.limit,
        stack=reported.stack,
        log_times=reported.log_times,
    )


def _lines_kept(logs: list[str], log_times: Sequence[object]) -> tuple[list[str], Sequence[object]]:
    """The first LOG_LINES_MAX - 1 lines, then one saying how many more were left out (at the
    time of the last one, when the lines have times)."""
    first = LOG_LINES_MAX - 1
    note = (
        f"[ledgerport] {len(logs) - first} more log lines not kept: a run keeps"
        f" {LOG_LINES_MAX} at most"
    )
    times: Sequence[object] = ()
    if len(log_times) == len(logs):
        times = [*log_times[:first], log_times[-1]]
    return [*logs[:first], note], times


def bounded_stack(stack: str | None) -> str | None:
    """A stack as it may be kept: each line at most STACK_LINE_MAX characters, at most
    STACK_FRAMES_MAX frames (the innermost and the outermost; a line says how many between
    them were left out), at most STACK_MAX characters in all, in clean text. The guest writes
    its stack (``Error.stackTraceLimit``, the message, the functions' names), so nothing of it
    is kept unbounded. Idempotent."""
    if stack is None:
        return None
    lines = [_cut_line(line) for line in clean_text(stack).split("\n")]
    frames = [index for index, line in enumerate(lines) if _FRAME_LINE.match(line)]
    if len(frames) > STACK_FRAMES_MAX:
        inner_end = frames[STACK_FRAMES_MAX - STACK_OUTER_FRAMES]
        outer_start = frames[-STACK_OUTER_FRAMES]
        left_out = len(frames) - STACK_FRAMES_MAX
        lines = [
            *lines[:inner_end],
            f"    ... {left_out} frames left out",
            *lines[outer_start:],
        ]
    return _cut("\n".join(lines), STACK_MAX)


def _cut_line(line: str) -> str:
    if len(line) <= STACK_LINE_MAX:
        return line
    head = STACK_LINE_MAX - _LINE_END_KEPT - 1
    return line[:head] + "\u2026" + line[-_LINE_END_KEPT:]


def _cut(text: str | None, most: int) -> str | None:
    if text is None:
        return None
    text = clean_text(text)
    return text if len(text) <= most else text[: most - 1] + "\u2026"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
