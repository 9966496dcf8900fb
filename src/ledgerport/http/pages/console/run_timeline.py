"""A run's log as its page shows it: a timeline of one line each, when it was written, what it
says, and, where a line has more (a log line of several lines or a long one, a fetch the
platform told in the log), that more behind a ``<details>`` that opens without script.

The platform writes its own lines into a run's log (``[ledgerport] ...``: ``engine/_egress.py``
tells each fetch, ``engine/_run_calls.py`` the data API calls it refused); the timeline marks
them as the platform's, and a fetch's line as a fetch, its method, host, answer and time
apart. A run keeps 1,000 log lines at most: the lines are made here rather than by a template
loop, which costs ten times as much a line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from ._debug import ShownLogLine

PLATFORM_MARK = "[ledgerport] "
"""How the lines the platform writes into a run's log begin."""
SUMMARY_CHARS = 160
"""Characters of a line the timeline shows before it is opened: a longer line, or one of
several lines, shows its first line cut there, the whole behind ``<details>``."""
_FETCH = re.compile(
    r"fetch (?P<method>\S+) (?P<host>\S+): (?P<outcome>.*?)(?: \((?P<took>\d+ ms)\))?"
)


@dataclass(frozen=True)
class Fetch:
    """A fetch as the platform told it in the log: its method, host, answer (a status) or
    why it failed or was refused, and the time it took (None: not said)."""

    method: str
    host: str
    outcome: str
    took: str | None

    @property
    def answered(self) -> bool:
        return self.outcome.isdigit()


def fetch_of(message: str) -> Fetch | None:
    """The fetch a log line tells, when the platform wrote it about one."""
    if not message.startswith(PLATFORM_MARK):
        return None
    found = _FETCH.fullmatch(message[len(PLATFORM_MARK) :])
    if found is None:
        return None
    return Fetch(found["method"], found["host"], found["outcome"], found["took"])


def _summary(text: str) -> tuple[str, bool]:
    """The part of a line shown closed, and whether there is more."""
    first = text.split("\n", 1)[0]
    if len(first) > SUMMARY_CHARS:
        return first[:SUMMARY_CHARS] + "\u2026", True
    return first, first != text


def _time(line: ShownLogLine) -> str:
    if not line.instant:
        return '<span class="fn-at"></span>'
    shown, exact = escape(line.offset or line.exact), escape(line.exact)
    return (
        f'<span class="fn-at"><time datetime="{escape(line.instant)}" title="{exact}">'
        f"{shown}</time></span>"
    )


def _fetch_item(at: str, fetch: Fetch) -> str:
    kind = "fetch" if fetch.answered else "fetch failed"
    summary = f"{fetch.method} {fetch.host}: {fetch.outcome}"
    facts = [("Method", fetch.method), ("Host", fetch.host)]
    facts.append(("Answer" if fetch.answered else "Outcome", fetch.outcome))
    if fetch.took is not None:
        facts.append(("Took", fetch.took))
    details = "".join(f"<dt>{name}</dt><dd>{escape(value)}</dd>" for name, value in facts)
    return (
        f'<li class="fn-fetch">{at}<details><summary><span class="fn-kind">{kind}</span>'
        f'<span class="fn-text">{escape(summary)}</span></summary>'
        f'<dl class="facts">{details}</dl></details></li>\n'
    )


def timeline_items(lines: Sequence[ShownLogLine]) -> Markup:
    """The items of a run's timeline for its log lines: each line's time and text, a long line
    or one of several lines closed on its start, the platform's lines marked, a fetch's with
    its method, host, answer and time behind the line."""
    items = []
    for line in lines:
        at = _time(line)
        fetch = fetch_of(line.message)
        if fetch is not None:
            items.append(_fetch_item(at, fetch))
            continue
        message = line.message
        kind = ""
        if message.startswith(PLATFORM_MARK):
            message = message[len(PLATFORM_MARK) :]
            kind = '<span class="fn-kind">ledgerport</span>'
        shown, more = _summary(message)
        if more:
            items.append(
                f"<li>{at}<details><summary>{kind}<span class='fn-text'>{escape(shown)}</span>"
                f'</summary><pre class="fn-text">{escape(message)}</pre></details></li>\n'
            )
        else:
            items.append(f'<li>{at}<p class="fn-text">{kind}{escape(message)}</p></li>\n')
    return Markup("".join(items))
