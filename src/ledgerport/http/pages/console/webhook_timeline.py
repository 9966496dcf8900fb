"""A delivery's attempts as its page's timeline, and an endpoint's deliveries as its page's
table rows, made here rather than by a template loop: a delivery redelivered to 30 attempts has
some 300 lines of headers, and the template's loops cost more than the rest of the page (its
every call awaited); the same markup, made in one pass."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from ledgerport import queues

from .._design import time_element
from .webhook_words import AttemptLine

_REDELIVERED = ' <span class="badge badge-plain wh-redelivered">Redelivered</span>'


def _answer(code: int | None) -> str:
    if code is None:
        return '<span class="badge badge-failed">No answer</span>'
    tone = "delivered" if 200 <= code < 300 else "failed"
    return f'<span class="badge badge-{tone}">HTTP {code}</span>'


def _body(line: AttemptLine, *, now: float, quota_mib: int) -> str:
    a = line.attempt
    if a.body_dropped_at is not None:
        return (
            f'<p class="muted">Dropped {time_element(a.body_dropped_at, now)} to keep the app'
            f" within its storage quota of {quota_mib} MiB (its oldest output goes first).</p>\n"
        )
    if a.response_body is None:
        error = f": {escape(a.error)}" if a.error else ""
        return f'<p class="muted">No answer came{error}.</p>\n'
    if not a.response_body:
        return '<p class="muted">Empty.</p>\n'
    return f'<pre tabindex="0" class="code-block">{escape(a.response_text)}</pre>\n'


def attempt_items(
    lines: Sequence[AttemptLine], *, now: float, quota_mib: int, body_kept: int
) -> Markup:
    """The ``<li>`` of each attempt of the timeline: its line (number, a redelivery's mark,
    when, how long, the answer's code and what went wrong), opening onto the request's headers
    as sent and the answer kept (or why none is)."""
    kept_kib = body_kept // 1024
    items = []
    for line in lines:
        a = line.attempt
        headers = "".join(
            f"  <dt><code>{escape(name)}</code></dt><dd><code>{escape(value)}</code></dd>\n"
            for name, value in a.request_headers.items()
        )
        happened = (
            f' <span class="wh-error">{escape(line.happened)}</span>' if line.happened else ""
        )
        cut = (
            f'<p class="small"><span class="badge badge-retrying">Cut at {kept_kib} KiB</span>'
            f" The answer went on: only its first {kept_kib} KiB were read and kept.</p>\n"
            if a.response_truncated
            else ""
        )
        items.append(
            f'<li class="attempt{" wh-rerun" if line.redelivery else ""}"'
            f' id="attempt-{a.attempt}">\n<details>\n'
            f'<summary><span class="wh-n">Attempt {a.attempt}</span>'
            f"{_REDELIVERED if line.redelivery else ''}"
            f' <span class="wh-when">{time_element(a.started_at, now)}</span>'
            f' <span class="wh-ms">{a.duration_ms:.0f} ms</span> {_answer(a.response_code)}'
            f"{happened}</summary>\n"
            '<div class="wh-attempt-body">\n<h3 class="wh-sub">Request headers</h3>\n'
            f'<dl class="facts headers">\n{headers}</dl>\n'
            '<h3 class="wh-sub">Response body</h3>\n'
            f"{_body(line, now=now, quota_mib=quota_mib)}{cut}</div>\n</details>\n</li>\n"
        )
    return Markup("".join(items))


def delivery_rows(rows: Sequence[tuple[queues.Delivery, str]], *, base: str, now: float) -> Markup:
    """The rows of the endpoint page's deliveries table (``base``: the endpoint's page), each
    delivery with what its last answer says (``response_or_error``): its link, event type and
    event id (or the test badge), status, attempts, what went wrong, its next attempt and its
    creation. The same cells ``static/live.js`` makes of a stream event."""
    made = []
    for d, happened in rows:
        kind = (
            '<span class="badge badge-test">Test</span>'
            if d.test
            else f'<code class="event-id">{escape(d.event_id)}</code>'
        )
        status = escape(d.status)
        event = ".<wbr>".join(str(escape(part)) for part in d.type.split("."))
        made.append(
            f'<tr id="{escape(d.id)}">\n'
            f'  <td class="id" data-label="Delivery"><a href="{escape(base)}/deliveries/'
            f'{escape(d.id)}"><code>{escape(d.id)}</code></a></td>\n'
            f'  <td data-label="Event"><div class="stacked">{event} {kind}</div></td>\n'
            f'  <td class="nowrap" data-label="Status"><span class="badge badge-{status}">'
            f"{status}</span></td>\n"
            f'  <td class="num" data-label="Attempts">{d.attempts}</td>\n'
            f'  <td class="wh-error" data-label="Response or error">{escape(happened)}</td>\n'
            f'  <td class="nowrap" data-label="Next attempt">'
            f"{time_element(d.next_attempt_due, now)}</td>\n"
            f'  <td class="nowrap" data-label="Created">{time_element(d.created_at, now)}</td>\n'
            "</tr>\n"
        )
    return Markup("".join(made))
