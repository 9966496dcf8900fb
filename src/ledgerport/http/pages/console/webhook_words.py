"""What the webhook cockpit says of an endpoint, a delivery and an attempt, in words: the
endpoint's state (sending, failing, switched off and by whom), what went wrong with a
delivery (a timeout, a refused connection, the status code) rather than a bare "failed", and
where a delivery's redeliveries began in its attempt log. Pure functions of what the domain
reads, so the pages and their tests share them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ledgerport import apps, queues

ERROR_CHARS_SHOWN = 120
"""Characters of an error a table row shows; the delivery's page has all of it."""

_DISABLED_BY = {
    "gone": "the receiver answered 410 Gone",
    "failing": "no delivery succeeded for too long",
}


@dataclass(frozen=True)
class StateWords:
    """An endpoint's state as a badge says it: its words, its tone (a badge class) and, when
    the service switched it off, why."""

    label: str
    tone: str
    reason: str | None = None


def endpoint_state(webhook: apps.Webhook) -> StateWords:
    """Sending (failing, while its deliveries fail), or switched off: by the app, or by the
    service with the lifecycle's ``disabledReason`` in words."""
    if webhook.enabled:
        if webhook.health.state == "failing":
            return StateWords("Sending, failing", "failed")
        return StateWords("Sending", "active")
    if webhook.disabled_reason is not None:
        return StateWords(
            "Switched off by the service",
            "off",
            _DISABLED_BY.get(webhook.disabled_reason, webhook.disabled_reason),
        )
    return StateWords("Switched off", "off")


def what_happened(response_code: int | None, error: str | None) -> str:
    """What went wrong, in words a row can hold: a timeout, a refused connection, a status
    code, or why it was not sent; empty when nothing did."""
    if error is None:
        if response_code is not None and not 200 <= response_code < 300:
            return f"Answered HTTP {response_code}"
        return ""
    text = error.strip()
    if text.startswith("timeout:"):
        words = f"Timed out: {text.removeprefix('timeout:').strip()}"
    elif text.startswith("HTTP "):
        words = f"Answered {text}"
    elif text.startswith("connection error:"):
        cause = text.removeprefix("connection error:").strip()
        lowered = cause.lower()
        if "refused" in lowered or "all attempts to connect" in lowered:
            words = "Connection refused"
        elif "resolve" in lowered:
            words = f"Name not resolved: {cause}"
        else:
            words = f"Connection failed: {cause}"
    elif text.startswith("not sent:"):
        words = f"Not sent: {text.removeprefix('not sent:').strip()}"
    else:
        words = text
    return shortened(words)


def response_or_error(response_code: int | None, error: str | None) -> str:
    """What a delivery's row says of its last answer: what went wrong, or the code it got.
    ``static/live.js`` says the same of the rows it adds (``responseOrError``)."""
    words = what_happened(response_code, error)
    return words or ("" if response_code is None else str(response_code))


def shortened(text: str, limit: int = ERROR_CHARS_SHOWN) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


@dataclass(frozen=True)
class AttemptLine:
    """An attempt as the delivery's timeline shows it: the attempt, what happened, and
    whether a redelivery began with it."""

    attempt: queues.LoggedAttempt
    happened: str
    redelivery: bool


def attempt_lines(
    attempts: Sequence[queues.LoggedAttempt],
    *,
    current_run: int,
    attempts_made: int,
    max_attempts: int,
) -> list[AttemptLine]:
    """``attempts`` (oldest first) with where each redelivery began: the log numbers attempts
    across redeliveries, so a run of them ends with an answer in 2xx, a 410 Gone, a send the
    check refused, or its last attempt (``max_attempts``); the attempt after it began a
    redelivery. The current run began ``current_run`` attempts before the last one made
    (``attempts_made``), which marks the newest redelivery whatever the run before said."""
    lines: list[AttemptLine] = []
    newest_start = attempts_made - current_run + 1 if 0 < current_run <= attempts_made else None
    in_run = 0
    ended = False
    for index, attempt in enumerate(attempts):
        starts = index > 0 and (ended or attempt.attempt == newest_start)
        if attempt.attempt == newest_start and newest_start > 1:
            starts = True
        in_run = 1 if starts or index == 0 else in_run + 1
        code = attempt.response_code
        ended = (
            (code is not None and 200 <= code < 300)
            or code == 410
            or (attempt.error or "").startswith("not sent:")
            or in_run >= max_attempts
        )
        lines.append(AttemptLine(attempt, what_happened(code, attempt.error), starts))
    return lines
