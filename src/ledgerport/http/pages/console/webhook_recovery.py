"""Recovering an endpoint's failed deliveries from the console, asked first: the endpoint's
page sends the moment to recover from (a GET form), the confirmation page says how many
deliveries the recovery will queue again and skip (``queues.recover_count``, a dry count by the
recovery's own rule, changing nothing), and its button does it (``queues.recover``)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, urlencode

from quart import redirect
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, queues
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
from ..._ids import DELIVERY
from ..._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    operation,
    page,
    redirect_reply,
)
from .._csrf import CSRF_COOKIE_PARAM, back_with_notice, form_guard
from .._design import exact_time
from .._form_models import PageForm, query_params, read_form, read_query
from .._frame import console_developer, returns_to
from .._notices import form_page, with_notice
from ._debug import (
    NOT_THE_APPS,
    PAGE_ERRORS,
    SIGN_IN,
    blueprint,
    form_time,
    parse_form_time,
    url_label,
)
from ._shared import CONSOLE_CSP
from .webhook_queries import RecoverQuery


def _webhook_path(app_id: str, webhook_id: str) -> str:
    return f"/console/apps/{app_id}/webhooks/{webhook_id}"


def _recover_path(app_id: str, webhook_id: str) -> str:
    return f"{_webhook_path(app_id, webhook_id)}/recover"


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/recover")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(
        200,
        "The confirmation step of a recovery: how many failed deliveries it will queue again"
        " and skip, counted now, and the button",
    ),
    redirect_reply(SIGN_IN),
    page(400, "The moment is missing, out of the last 30 days, or in the future"),
    page(404, NOT_THE_APPS.format("webhook")),
    raises=(*PAGE_ERRORS, InvalidInput, apps.WebhookNotFound),
    params=query_params(RecoverQuery),
)
async def recover_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Confirm a recovery from ``since`` (after ``after``, going on): what it would do now,
    counted by the rule it applies (the deliveries it queues again, those the redelivery
    rules skip, and whether more are left beyond the RECOVER_MAX it looks at)."""
    query = read_query(RecoverQuery)
    since, after = query.since, query.after
    p = platform()
    async with unit_of_work(reads=True) as tx:
        app, webhook = await apps.get_developed_webhook(tx, app_id, console_developer(), webhook_id)
        counted = await queues.recover_count(
            tx, now=p.now(), webhook=webhook, since=since, after=after
        )
    return await form_page(
        "console_webhook_recover.html",
        csp=CONSOLE_CSP,
        app=app,
        webhook=webhook,
        webhook_label=url_label(webhook.url),
        since=form_time(since),
        since_shown=exact_time(since),
        after=after or "",
        counted=counted,
        looked_at_most=queues.RECOVER_MAX,
        action=_recover_path(app_id, webhook_id),
        back=_webhook_path(app_id, webhook_id),
        current="webhooks",
        below=True,
    )


class RecoverForm(PageForm):
    """The recovery's confirmation form: ``since``, a date and time in UTC
    (``2026-09-22T08:00``, as a ``datetime-local`` field sends it) within the last 30 days;
    ``after``, the next of an earlier recovery with that since, to go on after it; ``confirm``
    ``yes`` recovers (without it, the answer is the confirmation page). Left out, since comes
    back as a notice saying what is wrong."""

    since: str = ""
    after: Annotated[str, DELIVERY.document] = ""
    confirm: str = ""


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/recover")
@form_guard(back_with_notice(_webhook_path))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the webhook's page, saying how many were queued again and skipped, or why"
        " not (with where to go on when more are left); not confirmed, to the confirmation"
        " page",
        SET_COOKIE.optional(),
    ),
    page(404, NOT_THE_APPS.format("webhook")),
    raises=(*PAGE_ERRORS, InvalidInput, RequestEntityTooLarge, apps.WebhookNotFound),
    bodies=(Body(FORM, RecoverForm),),
    params=(CSRF_COOKIE_PARAM,),
)
async def recover(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Redeliver every failed delivery of the webhook created at or after ``since``, confirmed,
    as ``POST /developer/apps/{appId}/webhooks/{webhookId}/recover`` does: those the
    redelivery rules refuse are skipped and counted. One recovery looks at the oldest 500 at
    most; when more are left the page offers to go on after them."""
    form = await read_form(RecoverForm)
    back = _webhook_path(app_id, webhook_id)
    p = platform()
    returns_to(back)
    after = form.after.strip() or None
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, console_developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        since = parse_form_time(form.since)
        if form.confirm != "yes":
            return _to_confirm(app_id, webhook_id, since, after)
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


def _to_confirm(
    app_id: str, webhook_id: str, since: float, after: str | None
) -> ResponseReturnValue:
    query = {"since": form_time(since), **({"after": after} if after else {})}
    return redirect(quote(_recover_path(app_id, webhook_id)) + "?" + urlencode(query), 303)
