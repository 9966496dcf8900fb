"""What the console's pages for debugging webhooks and functions share: their blueprint (every
page the signed-in developer's), their page policy (the live streams), their buttons, and the
helpers that read their filters and show what a delivery or a run holds."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

from markupsafe import Markup, escape
from quart import Blueprint
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, storage
from ledgerport.config import MIB
from ledgerport.errors import InvalidInput

from ..._context import platform
from ..._ids import IdKind
from .._frame import console_signed_in, page_csp

LIVE_CSP = page_csp(live=True)
"""The webhook's and the function's pages: their tables follow the app's live streams
(``static/live.js``, ``developer/streams.py``)."""

blueprint = Blueprint("console_debug_pages", __name__)
_FORM_TIME_PATTERN = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?"
_FORM_TIME = re.compile(_FORM_TIME_PATTERN)


def id_or_nothing(kind: IdKind) -> dict[str, Any]:
    """The schema of a GET form's field that holds one id of ``kind``, or nothing (a form
    sends its empty fields)."""
    return {
        **kind.schema,
        "pattern": f"^(?:{kind.pattern[1:-1]})?$",
        "description": f"{kind.description}; empty for none",
    }


PAGE_ERRORS = (storage.BadValue, apps.AppNotFound, storage.StorageUnavailable)
SIGN_IN = "Not signed in: to the sign-in page, returning here"
NOT_THE_APPS = "Not an app of the signed-in developer, or no such {0} of the app"
_FORM_MINUTE = "%Y-%m-%dT%H:%M"


BUTTON_ERRORS = (InvalidInput, RequestEntityTooLarge)


blueprint.before_request(console_signed_in)


def quota_mib() -> int:
    """The storage quota of an app (LEDGERPORT_APP_STORAGE_QUOTA_MB), in MiB."""
    return platform().config.app_storage_quota // MIB


# --- Pure helpers the pages use -------------------------------------------------------------------


def pretty_json(value: Any) -> str:
    """A JSON value as a person reads it: indented by two, keys in their order, characters as
    they are (a payload's ``\\u00e9`` shows as ``é``)."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def pretty_payload(payload: str) -> str:
    """A delivery's body pretty-printed (the text itself when it is not JSON)."""
    try:
        return pretty_json(json.loads(payload))
    except ValueError:
        return payload


def url_label(url: str) -> str:
    """A webhook's URL in a few words: its host and path."""
    parts = urlsplit(url)
    return (parts.netloc + parts.path) or url


def form_time(moment: float) -> str:
    """A moment as a ``datetime-local`` field holds it, in UTC, to the minute."""
    return datetime.fromtimestamp(moment, UTC).strftime(_FORM_MINUTE)


def parse_form_time(text: str) -> float:
    """The moment a ``datetime-local`` field names, read in UTC (as the form says), or an ISO
    8601 time with its UTC offset; InvalidInput for anything else."""
    text = text.strip()
    try:
        if _FORM_TIME.fullmatch(text):
            return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is not None:
            return moment.timestamp()
    except (ValueError, OverflowError):
        pass
    raise InvalidInput(["since must be a date and time in UTC, as 2026-09-22T08:00"])


def query_string(values: Mapping[str, str | None]) -> str:
    """``?`` and the values given (those empty or None left out), or nothing."""
    kept = {name: value for name, value in values.items() if value}
    return f"?{urlencode(kept)}" if kept else ""


@dataclass(frozen=True)
class ShownLogLine:
    """A run's log line and when it was written: the instant (``<time datetime>``), the exact
    time to the millisecond, and how long after the handler was called."""

    message: str
    instant: str | None = None
    exact: str | None = None
    offset: str | None = None


def shown_log_lines(
    lines: Sequence[tuple[float | None, str]], started_at: float | None
) -> list[ShownLogLine]:
    """A run's log lines (``queues.RunDetail.log_lines``) as its page shows them; a line whose
    time is not known shows none."""
    shown = []
    for at, message in lines:
        if at is None:
            shown.append(ShownLogLine(message))
            continue
        moment = datetime.fromtimestamp(at, UTC)
        millis = f"{moment.microsecond // 1000:03d}"
        offset = None
        if started_at is not None:
            offset = f"+{max(at - started_at, 0.0) * 1000:.0f} ms"
        shown.append(
            ShownLogLine(
                message,
                moment.strftime(f"%Y-%m-%dT%H:%M:%S.{millis}Z"),
                moment.strftime(f"%-d %b %Y, %H:%M:%S.{millis} UTC"),
                offset,
            )
        )
    return shown


def log_rows(lines: Sequence[ShownLogLine]) -> Markup:
    """The rows of a run page's log table: each line's time and text. Made here rather than by
    a template loop, which cost ten times as much a row (a run keeps 1,000 lines)."""
    rows = []
    for line in lines:
        at = ""
        if line.instant:
            shown, exact = escape(line.offset or line.exact), escape(line.exact)
            at = f'<time datetime="{escape(line.instant)}" title="{exact}">{shown}</time>'
        rows.append(
            f'<tr>\n  <td class="nowrap" data-label="Time">{at}</td>\n  <td class="wide"'
            f' data-label="Line"><pre>{escape(line.message)}</pre></td>\n</tr>\n'
        )
    return Markup("".join(rows))


@dataclass(frozen=True)
class AppliedFilter:
    """A filter the deliveries are shown with: what it filters in words, its value, and the
    page without it."""

    label: str
    value: str
    without: str


_FILTER_LABELS = {"status": "Status", "type": "Event type", "eventId": "Event id"}


def one_of_words(values: Sequence[str]) -> str:
    return f"one of {', '.join(values)}"
