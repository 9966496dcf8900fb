"""What the console's forms show beside their fields, as pure functions: the event types an app
may receive as checkboxes grouped by area, the order a saved form's events keep, where a refused
upload's problem lies in its source, and the fingerprint that binds the one showing of a
webhook's signing secret to that secret.

The rules themselves are the domain's (``apps.receivable``, the upload checks): these only say
how the pages present them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ledgerport import apps, catalog
from ledgerport.keys import Keyring

from ._source_views import index_of_column

APP_GROUP = "app"
PRIVACY_GROUP = "privacy"
UNKNOWN_GROUP = "unknown"
_GROUP_WORDS = {
    APP_GROUP: (
        "The app itself",
        "Installs, uninstalls, scope changes, redaction requests and app data: sent whatever"
        " the app's installations",
    ),
    PRIVACY_GROUP: (
        "Privacy requests",
        "Requests to erase a customer's or supplier's personal data; each needs its area's"
        " read scope",
    ),
    UNKNOWN_GROUP: (
        "Not events of the catalog",
        "No event has these names: untick them",
    ),
}
FINGERPRINT_CHARS = 24
"""Hex digits of a secret's fingerprint in the notice that shows it once."""
_POSITION = re.compile(r"\bline (\d+), column (\d+)\b")
EXCERPT_LINES_BEFORE = 2
"""Lines of the source shown above the line a problem is on."""
_TAB_WIDTH = 4


@dataclass(frozen=True)
class EventChoice:
    """One event type's checkbox."""

    name: str
    checked: bool
    receivable: bool
    """False for an event already chosen that the app may not receive (its scope is no longer
    registered): kept, checked, so saving it again says why not."""
    scope: str | None


@dataclass(frozen=True)
class EventGroup:
    """The checkboxes of one area (or of the app's own events, or of the privacy requests)."""

    key: str
    title: str
    hint: str
    choices: tuple[EventChoice, ...]


def _group_of(event: catalog.EventType) -> str:
    if event.audience == "app":
        return APP_GROUP
    if event.audience == "privacy":
        return PRIVACY_GROUP
    return event.area or APP_GROUP


def _group_words(key: str) -> tuple[str, str]:
    if key in _GROUP_WORDS:
        return _GROUP_WORDS[key]
    return key.replace("-", " ").capitalize(), f"Needs {key}:read"


def event_groups(scopes: Collection[str], chosen: Sequence[str]) -> tuple[EventGroup, ...]:
    """The checkboxes of a form that subscribes an app registering ``scopes`` to events: every
    event it may receive, in the catalog's order, grouped (the app's own events, the privacy
    requests, then each business area), those in ``chosen`` checked; and the chosen ones it may
    not receive, in their group, checked and marked (names the catalog does not hold, which
    only a form not sent from its page can send, last), so the refusal that names them can be
    corrected on the form."""
    picked = set(chosen)
    groups: dict[str, list[EventChoice]] = {}
    for event in catalog.EVENTS:
        receivable = apps.receivable(event, scopes)
        if not receivable and event.name not in picked:
            continue
        choice = EventChoice(event.name, event.name in picked, receivable, event.scope)
        groups.setdefault(_group_of(event), []).append(choice)
    unknown = [name for name in dict.fromkeys(chosen) if catalog.event_type(name) is None]
    if unknown:
        groups[UNKNOWN_GROUP] = [EventChoice(name, True, False, None) for name in unknown]
    return tuple(
        EventGroup(key, *_group_words(key), tuple(choices)) for key, choices in groups.items()
    )


def areas_out_of_reach(scopes: Collection[str]) -> tuple[str, ...]:
    """The business areas none of whose events an app registering ``scopes`` may receive, in
    the catalog's order: the form says their read scope is what is missing."""
    areas: dict[str, None] = {}
    for event in catalog.EVENTS:
        if event.audience == "business" and event.area and not apps.receivable(event, scopes):
            areas.setdefault(event.area)
    return tuple(areas)


def kept_order(chosen: Sequence[str], before: Sequence[str]) -> list[str]:
    """The events a form sends (in the page's order), with those the webhook had before in the
    order they had: its first event is the type of its test deliveries, which a form of
    checkboxes cannot order."""
    position = {name: index for index, name in enumerate(before)}
    return sorted(chosen, key=lambda name: position.get(name, len(before)))


# --- Where a refused upload's problem lies ---------------------------------------------------


@dataclass(frozen=True)
class ExcerptLine:
    number: int
    text: str


@dataclass(frozen=True)
class SourceProblem:
    """Where a problem lies in a function's source: its line and column (as the upload's checks
    name them: lines as V8 numbers them, the column in UTF-16 code units from 1, as V8 and a
    browser's text count), the parser's words for a syntax error, and the lines up to it with
    the caret's place under the last one."""

    line: int
    column: int
    excerpt: tuple[ExcerptLine, ...]
    caret: int
    """Characters before the caret on the problem's line, tabs expanded."""
    words: str | None = None
    """The parser's words (``missing ) after argument list``), for a syntax error."""


def source_problem(problem: str | apps.SyntaxProblem, source: str) -> SourceProblem | None:
    """Where ``problem`` lies in ``source``, with the lines up to it: a syntax error the
    compiler answered (``FunctionSourceNoHandler.syntax``), or the first place a refusal's text
    names (``line 3, column 7``); None when it names no place, or one the source does not
    have."""
    words = None
    if isinstance(problem, apps.SyntaxProblem):
        line, column, words = problem.line, problem.column, problem.words
    else:
        found = _POSITION.search(problem)
        if found is None:
            return None
        line, column = int(found[1]), int(found[2])
    lines = apps.source_lines(source)
    if not 1 <= line <= len(lines) or column < 1:
        return None
    text = lines[line - 1]
    before = text[: index_of_column(text, column)]
    first = max(1, line - EXCERPT_LINES_BEFORE)
    excerpt = tuple(
        ExcerptLine(number, lines[number - 1].expandtabs(_TAB_WIDTH))
        for number in range(first, line + 1)
    )
    return SourceProblem(line, column, excerpt, len(before.expandtabs(_TAB_WIDTH)), words)


# --- The one showing of a signing secret -------------------------------------------------------


def secret_fingerprint(keyring: Keyring, webhook_id: str, secret: str) -> str:
    """What the notice that shows a webhook's secret once carries instead of the secret: a keyed
    hash, so the page shows only the secret that answer made, and nothing that reads the
    notice learns it."""
    return keyring.hash_token(f"webhook-secret-shown:{webhook_id}:{secret}")[:FINGERPRINT_CHARS]
