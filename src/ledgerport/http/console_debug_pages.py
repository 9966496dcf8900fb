"""The developer console's pages for debugging an app's webhooks and functions, on the
application host: a webhook with its deliveries (filtered, a page at a time) and the recovery of
its failed ones; a delivery with its payload as sent and every attempt made, and its
redelivery; a function with its runs (filtered by status) and its versions, a version's source
and the rollback to it; a run with its event, its timed log lines, its error and stack into the
source, and its replay.

Server-rendered from the same domain calls as the JSON console API (``developer/webhooks.py``,
``developer/functions.py``), for the signed-in developer; every button is a form with a CSRF
token, every filter a GET form or a link. Anyone else's app, and any webhook, delivery,
function, version or run id that is not the app's, is not found (404). A form's refusal comes
back to its page as a notice, by the error table.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, NotRequired, TypeVar
from urllib.parse import urlencode, urlsplit

from markupsafe import Markup, escape
from quart import Blueprint, g, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.exceptions import NotFound, RequestEntityTooLarge

from ledgerport import apps, auth, catalog, queues, storage
from ledgerport.config import MIB
from ledgerport.errors import InvalidInput

from ._browser import (
    CSRF_COOKIE_PARAM,
    CsrfToken,
    csrf_valid,
    current_user,
    form_page,
    require_form_token,
    returns_to,
    with_notice,
)
from ._context import platform, unit_of_work
from ._design import exact_time
from ._function_budget import count_function_upload
from ._ids import DELIVERY, EVENT, IdKind
from ._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    Param,
    operation,
    page,
    redirect_reply,
)
from ._pages import login_redirect
from ._source_views import SOURCE_PAGE_LINES, numbered_source, shown_stack
from .console_pages import CONSOLE_CSP, LISTED_EXCERPT_CHARS

blueprint = Blueprint("console_debug_pages", __name__)
_Choice = TypeVar("_Choice", bound=str)

_FUNCTION = Param(
    "name", "path", "The function's name: a letter or digit, then up to 63 letters, digits, _ or -"
)
VERSION_MAX = 2**31 - 1
"""The largest version number (a database integer): a larger one is no version's."""
_VERSION = Param(
    "version",
    "path",
    "A version's number",
    {"type": "integer", "minimum": 1, "maximum": VERSION_MAX},
)
_DELIVERY_STATUS = Param(
    "status",
    "query",
    "Only the deliveries in this status (empty: every status)",
    {"type": "string", "enum": ["", *queues.DELIVERY_STATUSES]},
)
_DELIVERY_TYPE = Param(
    "type",
    "query",
    "Only the deliveries of this event type (empty: every type)",
    {"type": "string", "enum": ["", *catalog.EVENT_NAMES]},
)
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


_EVENT_ID = Param(
    "eventId", "query", "Only the delivery of this event (empty: every event)", id_or_nothing(EVENT)
)
_AFTER = Param(
    "after",
    "query",
    "The next of an earlier page: the deliveries after it, with the same filters",
    id_or_nothing(DELIVERY),
)
_RECOVER_SINCE = Param(
    "recover_since",
    "query",
    "What the recovery form's since starts with (UTC, as 2026-09-22T08:00): where an earlier"
    " recovery looked from",
    {"type": "string", "pattern": f"^(?:{_FORM_TIME_PATTERN})?$"},
)
_RECOVER_AFTER = Param(
    "recover_after",
    "query",
    "Where the recovery form goes on: the next of an earlier recovery with that since",
    id_or_nothing(DELIVERY),
)
_FROM = Param(
    "from",
    "query",
    "The first line of the source shown (a page shows 5,000 lines; empty: line 1)",
    {"type": "string", "pattern": "^(?:[1-9][0-9]{0,9})?$"},
)
_RUN_STATUS = Param(
    "status",
    "query",
    "Only the runs in this status (empty: every status)",
    {"type": "string", "enum": ["", *queues.RUN_STATUSES]},
)
_PAGE_ERRORS = (storage.BadValue, apps.AppNotFound, storage.StorageUnavailable)
_SIGN_IN = "Not signed in: to the sign-in page, returning here"
_NOT_THE_APPS = "Not an app of the signed-in developer, or no such {0} of the app"

ATTEMPTS_SHOWN = 100
"""Attempts a delivery's page shows, the newest: a delivery redelivered again and again has as
many as it was sent, each with up to 4 KiB of answer (the developer API answers every one)."""
RECOVER_DEFAULT_SINCE = 86400
"""Seconds before now the recovery form offers to start from: the last day."""
_FORM_MINUTE = "%Y-%m-%dT%H:%M"


class ButtonForm(TypedDict):
    """A button's form: its CSRF token. Sent without one, the form did not come from its page
    (a 400 page); with one that no longer holds, it goes back to the page, which says the form
    expired."""

    csrf_token: CsrfToken


_BUTTON = (Body(FORM, ButtonForm),)
_BUTTON_ERRORS = (InvalidInput, RequestEntityTooLarge)


async def _pressed() -> bool:
    """Whether a button's form holds a token that holds (InvalidInput when it holds none)."""
    token = (await request.form).get("csrf_token")
    require_form_token(token)
    return csrf_valid(token)


@blueprint.before_request
async def _signed_in() -> ResponseReturnValue | None:
    """Every page is the signed-in developer's: anyone else goes to the sign-in page first."""
    user = await current_user()
    if user is None:
        return login_redirect()
    g.console_user_id = user.id
    return None


def _quota_mib() -> int:
    """The storage quota of an app (LEDGERPORT_APP_STORAGE_QUOTA_MB), in MiB."""
    return platform().config.app_storage_quota // MIB


def _developer() -> str:
    user_id: str = g.console_user_id
    return user_id


def _webhook_path(app_id: str, webhook_id: str) -> str:
    return f"/console/apps/{app_id}/webhooks/{webhook_id}"


def _delivery_path(app_id: str, webhook_id: str, delivery_id: str) -> str:
    return f"{_webhook_path(app_id, webhook_id)}/deliveries/{delivery_id}"


def _function_path(app_id: str, name: str) -> str:
    return f"/console/apps/{app_id}/functions/{name}"


def _run_path(app_id: str, name: str, run_id: str) -> str:
    return f"{_function_path(app_id, name)}/runs/{run_id}"


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


def _choice(name: str, allowed: Sequence[_Choice], what: str) -> _Choice | None:
    """The query parameter ``name``, one of ``allowed`` (``what`` says which in words) or
    empty (None)."""
    value = request.args.get(name, "")
    if value == "":
        return None
    for option in allowed:
        if option == value:
            return option
    raise InvalidInput([f"{name} must be {what}, or empty for all"])


def _one_of(values: Sequence[str]) -> str:
    return f"one of {', '.join(values)}"


def _id(name: str, kind: IdKind) -> str | None:
    """The query parameter ``name``: one id of ``kind`` (spaces around it dropped, as pasted),
    or None when empty."""
    value = request.args.get(name, "").strip()
    if not value:
        return None
    if not re.fullmatch(kind.pattern, value):
        raise InvalidInput([f"{name} must be {kind.description[0].lower()}{kind.description[1:]}"])
    return value


# --- A webhook ------------------------------------------------------------------------------------


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The webhook, its deliveries (filtered, a page at a time) and its recovery form"),
    redirect_reply(_SIGN_IN),
    page(404, _NOT_THE_APPS.format("webhook")),
    raises=(*_PAGE_ERRORS, InvalidInput, apps.WebhookNotFound),
    params=(
        _DELIVERY_STATUS,
        _DELIVERY_TYPE,
        _EVENT_ID,
        _AFTER,
        _RECOVER_SINCE,
        _RECOVER_AFTER,
    ),
)
async def webhook_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The webhook: its URL, whether it is on, its events; its deliveries, newest first, 100 a
    page (``after``: the next of the page before), filtered by status, event type and event
    id (each kept in the address and shown as applied), each with its event, status, attempts,
    response and when its next attempt is due, test deliveries marked; and the form that
    redelivers every failed delivery since a moment. When attempts' kept answers were dropped
    to keep the app within its storage quota, it says so."""
    status = _choice("status", queues.DELIVERY_STATUSES, _one_of(queues.DELIVERY_STATUSES))
    event_type = _choice("type", catalog.EVENT_NAMES, "an event type of the catalog")
    event_id = _id("eventId", EVENT)
    after = _id("after", DELIVERY)
    recover_after = _id("recover_after", DELIVERY)
    since_text = request.args.get("recover_since", "")
    if since_text and not _FORM_TIME.fullmatch(since_text):
        raise InvalidInput(["recover_since must be a date and time in UTC, as 2026-09-22T08:00"])
    p = platform()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        deliveries = await queues.delivery_page(
            tx,
            webhook.id,
            statuses=[status] if status else [],
            types=[event_type] if event_type else [],
            event_id=event_id,
            after=after,
        )
        storage = await queues.app_storage(tx, app_id)
    filters = {"status": status, "type": event_type, "eventId": event_id}
    here = _webhook_path(app_id, webhook_id)
    applied = [
        AppliedFilter(_FILTER_LABELS[name], value, here + query_string({**filters, name: None}))
        for name, value in filters.items()
        if value
    ]
    now = p.now()
    earliest = now - catalog.DELIVERY_RETENTION + 60
    if not since_text:
        since_text = form_time(max(now - RECOVER_DEFAULT_SINCE, earliest))
    subscribed = list(webhook.events) or [webhook.test_event_type]
    return await form_page(
        "console_webhook.html",
        csp=CONSOLE_CSP,
        app=app,
        webhook=webhook,
        webhook_label=url_label(webhook.url),
        deliveries=deliveries.deliveries,
        filters=filters,
        applied=applied,
        subscribed_types=subscribed,
        other_types=[name for name in catalog.EVENT_NAMES if name not in subscribed],
        next_href=(
            here + query_string({**filters, "after": deliveries.next}) if deliveries.next else None
        ),
        newest_href=here + query_string(filters) if after else None,
        paged=after is not None,
        statuses=queues.DELIVERY_STATUSES,
        recover_since=since_text,
        recover_after=recover_after,
        recover_min=form_time(earliest),
        recover_max=form_time(now),
        recover_max_count=queues.RECOVER_MAX,
        storage=storage,
        quota_mib=_quota_mib(),
        current="webhooks",
        below=True,
    )


class RecoverForm(TypedDict):
    """The recovery form: ``since``, a date and time in UTC (``2026-09-22T08:00``, as a
    ``datetime-local`` field sends it) within the last 30 days; ``after``, the next of an
    earlier recovery with that since, to go on after it. Left out, since comes back as a
    notice saying what is wrong."""

    csrf_token: CsrfToken
    since: NotRequired[str]
    after: NotRequired[Annotated[str, DELIVERY.document]]


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/recover")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the webhook's page, saying how many were queued again and skipped, or why"
        " not (with where to go on when more are left)",
        SET_COOKIE.optional(),
    ),
    page(404, _NOT_THE_APPS.format("webhook")),
    raises=(*_PAGE_ERRORS, InvalidInput, RequestEntityTooLarge, apps.WebhookNotFound),
    bodies=(Body(FORM, RecoverForm),),
    params=(CSRF_COOKIE_PARAM,),
)
async def recover(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Redeliver every failed delivery of the webhook created at or after ``since``, as
    ``POST /developer/apps/{appId}/webhooks/{webhookId}/recover`` does: those the redelivery
    rules refuse are skipped and counted. One recovery looks at the oldest 500 at most; when
    more are left the page offers to go on after them."""
    form = await request.form
    back = _webhook_path(app_id, webhook_id)
    require_form_token(form.get("csrf_token"))
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(back, "form-expired")
    p = platform()
    returns_to(back)
    after = form.get("after", "").strip() or None
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        since = parse_form_time(form.get("since", ""))
        recovered = await queues.recover(tx, now=p.now(), webhook=webhook, since=since, after=after)
        if recovered.queued:
            await tx.notify(queues.DELIVERIES_CHANNEL)
    shown = exact_time(since)
    if recovered.next is not None:
        go_on = {"recover_since": form_time(since), "recover_after": recovered.next}
        return with_notice(
            back,
            "recovered-partly",
            shown,
            recovered.queued,
            recovered.skipped,
            query=urlencode(go_on),
        )
    if after is None and recovered.queued == recovered.skipped == 0:
        return with_notice(back, "recovered-nothing", shown)
    return with_notice(back, "recovered", shown, recovered.queued, recovered.skipped)


# --- A delivery -----------------------------------------------------------------------------------


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The delivery: its payload as sent and every attempt made"),
    redirect_reply(_SIGN_IN),
    page(404, _NOT_THE_APPS.format("webhook or delivery")),
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound, queues.DeliveryNotFound),
)
async def delivery_page(app_id: str, webhook_id: str, delivery_id: str) -> ResponseReturnValue:
    """The delivery: its status, event, when it was created and when its next attempt is due;
    the payload as sent (pretty-printed, and the exact text its signatures were computed over);
    every attempt ever made, oldest first, redeliveries included, each with when it started,
    how long it took, the response code, the request's headers as sent (its signature among
    them), the first 4 KiB of the answer (marked when the answer went on, or saying it was
    dropped for the app's storage quota) and the error, the 100 newest when there are more;
    and the redeliver button when the redelivery rules allow it, else why not."""
    p = platform()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        detail = await queues.get_delivery(tx, webhook.id, delivery_id, attempts=ATTEMPTS_SHOWN)
        refusal = await queues.redelivery_check(
            tx, now=p.now(), webhook=webhook, delivery_id=delivery_id
        )
    return await form_page(
        "console_delivery.html",
        csp=CONSOLE_CSP,
        app=app,
        webhook=webhook,
        webhook_label=url_label(webhook.url),
        delivery=detail.delivery,
        payload=detail.payload,
        pretty=pretty_payload(detail.payload),
        attempts=detail.attempt_log,
        attempts_made=detail.attempt_log[-1].attempt if detail.attempt_log else 0,
        refusal=refusal,
        body_kept=queues.RESPONSE_BODY_KEPT,
        quota_mib=_quota_mib(),
        current="webhooks",
        below=True,
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/resend")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the delivery's page, saying it is queued again or why not",
        SET_COOKIE.optional(),
    ),
    page(404, _NOT_THE_APPS.format("webhook or delivery")),
    raises=(
        *_PAGE_ERRORS,
        *_BUTTON_ERRORS,
        apps.WebhookNotFound,
        queues.DeliveryNotFound,
        queues.RedeliveryRefused,
    ),
    bodies=_BUTTON,
    params=(CSRF_COOKIE_PARAM,),
)
async def resend(app_id: str, webhook_id: str, delivery_id: str) -> ResponseReturnValue:
    """The delivery page's redeliver button: the delivery again, as
    ``POST .../deliveries/{deliveryId}/redeliver`` (same id, event and body, a fresh attempt
    count and signature), back to its page; a refusal of the redelivery rules comes back as a
    notice there."""
    back = _delivery_path(app_id, webhook_id, delivery_id)
    if not await _pressed():
        return with_notice(back, "form-expired")
    p = platform()
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        await queues.get_delivery(tx, webhook.id, delivery_id)
        await queues.redeliver(tx, now=p.now(), webhook=webhook, delivery_id=delivery_id)
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return with_notice(back, "redelivered", delivery_id)


# --- A function -----------------------------------------------------------------------------------


def _version_number(text: str) -> int:
    """A version's number from its path; NotFound (as for a path no route takes) when it is no
    number a version can have."""
    if re.fullmatch(r"[1-9][0-9]{0,9}", text) and int(text) <= VERSION_MAX:
        return int(text)
    raise NotFound()


@blueprint.get("/console/apps/<app_id>/functions/<name>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The function, its runs (filtered by status) and its versions"),
    redirect_reply(_SIGN_IN),
    page(404, _NOT_THE_APPS.format("function")),
    raises=(*_PAGE_ERRORS, InvalidInput, apps.FunctionNotFound),
    params=(_FUNCTION, _RUN_STATUS),
)
async def function_page(app_id: str, name: str) -> ResponseReturnValue:
    """The function: its active and newest versions and its events; its 100 most recent runs,
    newest first (``status`` keeps those in one status), each linking to its page; and every
    version kept, newest first, the active one marked, each with its source's page and, but
    the active one, a button that makes it active (a rollback). When runs' output was dropped
    to keep the app within its storage quota, it says so, and so does each such run."""
    status = _choice("status", queues.RUN_STATUSES, _one_of(queues.RUN_STATUSES))
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        function = await apps.get_function(tx, app_id, name)
        runs = await queues.recent_runs(
            tx, function, statuses=[status] if status else [], excerpt=LISTED_EXCERPT_CHARS
        )
        versions = await apps.function_versions(tx, function)
        storage = await queues.app_storage(tx, app_id)
    here = _function_path(app_id, name)
    chips = [("All", here, status is None)] + [
        (shown, here + query_string({"status": shown}), status == shown)
        for shown in queues.RUN_STATUSES
    ]
    return await form_page(
        "console_function.html",
        csp=CONSOLE_CSP,
        app=app,
        function=function,
        runs=runs,
        versions=versions,
        chips=chips,
        storage=storage,
        quota_mib=_quota_mib(),
        current="functions",
        below=True,
    )


@blueprint.get("/console/apps/<app_id>/functions/<name>/versions/<version>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "A version kept of the function and its source, line by line, a page at a time"),
    redirect_reply(_SIGN_IN),
    page(404, _NOT_THE_APPS.format("function or version")),
    raises=(
        *_PAGE_ERRORS,
        InvalidInput,
        NotFound,
        apps.FunctionNotFound,
        apps.FunctionVersionNotFound,
    ),
    params=(_FUNCTION, _VERSION, _FROM),
)
async def version_page(app_id: str, name: str, version: str) -> ResponseReturnValue:
    """A version kept of the function: when it was uploaded, whether it is active (else a
    button that makes it active), and its source as uploaded, each line numbered and
    addressable (``#L12``), as a stack frame's position links to it; 5,000 lines a page,
    ``from`` the first (links to the lines before and after)."""
    number = _version_number(version)
    first_text = request.args.get("from", "").strip() or "1"
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        function = await apps.get_function(tx, app_id, name)
        kept, source = await apps.version_source(tx, function, number)
    lines = apps.source_lines(source)
    if not re.fullmatch(r"[1-9][0-9]{0,9}", first_text) or int(first_text) > len(lines):
        raise InvalidInput([f"from must be a line of the source: from 1 to {len(lines)}"])
    first = int(first_text)
    shown = lines[first - 1 : first - 1 + SOURCE_PAGE_LINES]
    here = f"{_function_path(app_id, name)}/versions/{number}"
    earlier = later = None
    if first > 1:
        back = max(first - SOURCE_PAGE_LINES, 1)
        earlier = here if back == 1 else f"{here}?from={back}"
    if first - 1 + len(shown) < len(lines):
        later = f"{here}?from={first + len(shown)}"
    return await form_page(
        "console_version.html",
        csp=CONSOLE_CSP,
        app=app,
        function=function,
        version=kept,
        source=numbered_source(shown, first),
        first=first,
        last=first + len(shown) - 1,
        total=len(lines),
        earlier_href=earlier,
        later_href=later,
        current="functions",
        below=True,
    )


@blueprint.post("/console/apps/<app_id>/functions/<name>/versions/<version>/activate")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the function's page, saying which version is active now",
        SET_COOKIE.optional(),
    ),
    page(404, _NOT_THE_APPS.format("function or version")),
    raises=(
        *_PAGE_ERRORS,
        *_BUTTON_ERRORS,
        NotFound,
        apps.FunctionNotFound,
        apps.FunctionVersionNotFound,
    ),
    bodies=_BUTTON,
    params=(_FUNCTION, _VERSION, CSRF_COOKIE_PARAM),
)
async def activate(app_id: str, name: str, version: str) -> ResponseReturnValue:
    """A version's activate button: that version becomes the active one (a rollback, or
    forward again), as ``POST .../versions/{version}/activate``: runs that start from then on
    run it."""
    number = _version_number(version)
    back = _function_path(app_id, name)
    if not await _pressed():
        return with_notice(back, "form-expired")
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        await apps.activate_version(
            tx, now=platform().now(), app_id=app_id, name=name, version=number
        )
    return with_notice(back, "version-activated", number)


# --- A run ----------------------------------------------------------------------------------------


@blueprint.get("/console/apps/<app_id>/functions/<name>/runs/<run_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The run: its event, log lines, error and stack into the source"),
    redirect_reply(_SIGN_IN),
    page(404, _NOT_THE_APPS.format("function or run")),
    raises=(*_PAGE_ERRORS, apps.FunctionNotFound, queues.RunNotFound),
    params=(_FUNCTION,),
)
async def run_page(app_id: str, name: str, run_id: str) -> ResponseReturnValue:
    """The run: its status, duration, the version it ran, the run it replays; the event it ran
    on, pretty-printed; its log lines with when each was written; its result; the error it
    ended with and, when the handler threw an Error, its stack, each frame's position linking
    to its line in the source of the version that ran, shown with the lines around it (or, for
    a run whose output was dropped to keep the app within its storage quota, when that was);
    and the replay button."""
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        function = await apps.get_function(tx, app_id, name)
        detail = await queues.get_run(tx, function, run_id)
        ran = detail.run.version
        source = None
        if ran is not None:
            try:
                _, source = await apps.version_source(tx, function, ran)
            except apps.FunctionVersionNotFound:
                pass  # no longer kept: named, not linked
    version_href = None
    if source is not None:
        version_href = f"{_function_path(app_id, name)}/versions/{ran}"
    stack = (
        shown_stack(detail.stack, source=source, version_href=version_href)
        if detail.stack is not None
        else []
    )
    result = detail.run.result
    return await form_page(
        "console_run.html",
        csp=CONSOLE_CSP,
        app=app,
        function=function,
        run=detail.run,
        started_at=detail.started_at,
        log_rows=log_rows(shown_log_lines(detail.log_lines, detail.started_at)),
        event=pretty_json(detail.event),
        result=None if result is None else pretty_json(result),
        stack=stack,
        version_href=version_href,
        quota_mib=_quota_mib(),
        current="functions",
        below=True,
    )


@blueprint.post("/console/apps/<app_id>/functions/<name>/runs/<run_id>/replay")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "To the new run's page, saying it is queued; or back to the run's page, saying why not",
        SET_COOKIE.optional(),
    ),
    page(404, _NOT_THE_APPS.format("function or run")),
    raises=(
        *_PAGE_ERRORS,
        *_BUTTON_ERRORS,
        apps.FunctionNotFound,
        queues.RunNotFound,
        auth.RateLimited,
    ),
    bodies=_BUTTON,
    params=(_FUNCTION, CSRF_COOKIE_PARAM),
)
async def replay(app_id: str, name: str, run_id: str) -> ResponseReturnValue:
    """The replay button: a new run of the function on the event the run ran on, as
    ``POST .../runs/{runId}/replay`` (the same business, the version active when it starts, a
    token of its own), counted against the app's upload budget; then the new run's page."""
    back = _run_path(app_id, name, run_id)
    if not await _pressed():
        return with_notice(back, "form-expired")
    p = platform()
    returns_to(back)
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        function = await apps.get_function(tx, app_id, name)
        # Not found is found before the budget is spent.
        await queues.get_run(tx, function, run_id)
    await count_function_upload(app.id)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        function = await apps.get_function(tx, app_id, name)
        replay_id = await queues.replay_run(tx, now=p.now(), function=function, run_id=run_id)
    return with_notice(_run_path(app_id, name, replay_id), "replay-queued", run_id)
