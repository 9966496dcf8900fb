"""The forms that add a webhook endpoint and edit one: refused, the form comes back as it was
sent with the reason beside it (a URL may hold a receiver's token, so it never rides in a
redirect)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial

from pydantic import Field
from quart import Response
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, catalog
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
from ..._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    operation,
    page,
    redirect_reply,
)
from .._csrf import CSRF_COOKIE_PARAM, form_again, form_guard
from .._field_problems import FormField, FormProblems, refused_beside
from .._form_models import PageForm, Repeated, read_form
from .._frame import console_developer
from .._notices import (
    Notice,
    form_page,
    with_notice,
)
from .._problems import answers_again
from ._forms import areas_out_of_reach, event_groups, kept_order, secret_fingerprint
from ._shared import (
    APP_PARAM,
    CONSOLE_CSP,
    PAGE_ERRORS,
    SIGNED_OUT,
    WEBHOOK_NOT_FOUND,
    WEBHOOK_PARAM,
    blueprint,
    webhook_path,
    webhooks_path,
)

WEBHOOK_FIELDS = (
    FormField("url", "Endpoint URL", ("url",)),
    FormField("events", "Events", ("events",)),
)
"""The endpoint form's fields in its order: the inputs' ids and labels, and how the webhook
rules name them."""
_NUMBERED_EVENT = re.compile(r"^events\.\d+ ")


def webhook_problems(problem: Notice | None, *, adding: bool) -> FormProblems | None:
    """Why the endpoint was not added or saved, beside the form's fields, each said with its
    label (an event's problem names the event); None when nothing was refused."""
    if problem is None or problem.tone != "problem":
        return None
    sentences = [_NUMBERED_EVENT.sub("events: ", s) for s in problem.sentences]
    outcome = "the endpoint was not added" if adding else "the endpoint was not saved"
    return refused_beside(sentences, WEBHOOK_FIELDS, outcome=outcome)


async def _webhook_form(
    app_id: str,
    *,
    webhook_id: str | None,
    url: str,
    events: Sequence[str],
    enabled: bool,
    problem: Notice | None = None,
    status: int = 200,
) -> Response:
    """The form that adds an endpoint (``webhook_id`` None) or edits one, filled with ``url``,
    ``events`` and ``enabled``, ``problem`` beside it."""
    user_id = console_developer()
    async with unit_of_work(reads=True) as tx:
        webhook: apps.Webhook | None = None
        if webhook_id:
            app, webhook = await apps.get_developed_webhook(tx, app_id, user_id, webhook_id)
        else:
            app = await apps.get_developed_app(tx, app_id, user_id)
    action = (
        webhook_path(app_id, webhook_id, "edit") if webhook_id else f"{webhooks_path(app_id)}/new"
    )
    return await form_page(
        "console_webhook_form.html",
        status=status,
        csp=CONSOLE_CSP,
        app=app,
        webhook=webhook,
        action=action,
        url=url,
        url_max=catalog.URI_MAX_LENGTH,
        groups=event_groups(app.scopes, events),
        out_of_reach=areas_out_of_reach(app.scopes),
        enabled=enabled,
        problems=webhook_problems(problem, adding=webhook_id is None),
        current="webhooks",
        below=True,
    )


@blueprint.get("/console/apps/<app_id>/webhooks/new")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that adds an endpoint: its URL, its events by area, enabled"),
    SIGNED_OUT,
    page(404, "Not an app of the signed-in developer"),
    raises=PAGE_ERRORS,
    params=(APP_PARAM,),
)
async def new_webhook_page(app_id: str) -> ResponseReturnValue:
    """The form that adds an endpoint: its URL, the events it receives as checkboxes grouped by
    area (those the app may receive: its own events, and the business and privacy events whose
    read scope it registers), and whether it is enabled."""
    return await _webhook_form(app_id, webhook_id=None, url="", events=(), enabled=True)


class WebhookForm(PageForm):
    """The endpoint form: its URL, the events it receives (``events`` repeated, one per
    checkbox) and, when adding it, ``enabled`` (``true`` when ticked; left out, it is added
    switched off). A field left out is as if empty: the form comes back saying what is
    missing."""

    url: str = ""
    events: Repeated = Field(default_factory=list)
    enabled: str = ""


_FORM_AGAIN = page(
    400,
    "The form again as it was sent, saying why not beside it: the form expired, the URL or an"
    " event is refused, or the app has its 20 webhooks",
)


async def _resolved(url: str) -> apps.Resolver:
    """The endpoint's host resolved before the transaction that saves it (as the JSON API
    does: no transaction waits for a name)."""
    config = platform().config
    return await apps.resolve_ahead(
        url, development=config.development, loopback=config.loopback_webhooks
    )


async def _sent_again(
    problem: Notice, status: int, *, app_id: str, webhook_id: str | None = None
) -> Response:
    """The form that adds an endpoint (``webhook_id`` None) or edits one again, as it was
    sent, ``problem`` beside it."""
    form = await read_form(WebhookForm)
    return await _webhook_form(
        app_id,
        webhook_id=webhook_id,
        url=form.url.strip(),
        events=form.events,
        enabled=webhook_id is not None or form.enabled == "true",
        problem=problem,
        status=status,
    )


@blueprint.post("/console/apps/<app_id>/webhooks/new")
@form_guard(form_again(_sent_again))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Added: to the page that shows its signing secret once", SET_COOKIE.optional()),
    _FORM_AGAIN,
    page(404, "Not an app of the signed-in developer"),
    raises=(*PAGE_ERRORS, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, WebhookForm),),
    params=(APP_PARAM, CSRF_COOKIE_PARAM),
)
async def add_webhook(app_id: str) -> ResponseReturnValue:
    """Add the endpoint, as ``POST /developer/apps/{appId}/webhooks``; then its signing secret
    is shown once, on the next page (never in a URL or a cookie: the answer's notice carries a
    keyed fingerprint of it)."""
    user_id = console_developer()
    form = await read_form(WebhookForm)
    url = form.url.strip()
    events = form.events
    enabled = form.enabled == "true"
    answers_again(partial(_sent_again, app_id=app_id))
    p = platform()
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
    resolver = await _resolved(url)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        webhook, secret = await apps.create_webhook(
            tx,
            p.keyring,
            now=p.now(),
            app_id=app_id,
            url=url,
            events=events,
            enabled=enabled,
            development=p.config.development,
            loopback=p.config.loopback_webhooks,
            resolver=resolver,
        )
    assert secret is not None  # the form makes stripe endpoints, whose secret is shown
    return with_notice(
        webhook_path(app_id, webhook.id, "secret"),
        "webhook-created",
        secret_fingerprint(p.keyring, webhook.id, secret),
    )


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/edit")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that edits an endpoint: its URL and its events"),
    SIGNED_OUT,
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound),
    params=(APP_PARAM, WEBHOOK_PARAM),
)
async def edit_webhook_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The form that edits an endpoint: its URL and its events (an event it receives that the
    app no longer registers the scope of stays ticked, marked, until it is unticked)."""
    async with unit_of_work(reads=True) as tx:
        _, webhook = await apps.get_developed_webhook(tx, app_id, console_developer(), webhook_id)
    return await _webhook_form(
        app_id,
        webhook_id=webhook_id,
        url=webhook.url,
        events=webhook.events,
        enabled=webhook.enabled,
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/edit")
@form_guard(form_again(_sent_again))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Saved: to the endpoint's page, saying so", SET_COOKIE.optional()),
    _FORM_AGAIN,
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, WebhookForm),),
    params=(APP_PARAM, WEBHOOK_PARAM, CSRF_COOKIE_PARAM),
)
async def edit_webhook(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Save the endpoint's URL and events, as ``PATCH /developer/apps/{appId}/webhooks/{id}``;
    the events it had keep their order (its first is the type of its test deliveries)."""
    user_id = console_developer()
    form = await read_form(WebhookForm)
    url = form.url.strip()
    events = form.events
    answers_again(partial(_sent_again, app_id=app_id, webhook_id=webhook_id))
    p = platform()
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        before = await apps.get_webhook(tx, app_id, webhook_id)
    resolver = await _resolved(url)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.update_webhook(
            tx,
            now=p.now(),
            app_id=app_id,
            webhook_id=webhook_id,
            changes={"url": url, "events": kept_order(events, before.events)},
            development=p.config.development,
            loopback=p.config.loopback_webhooks,
            resolver=resolver,
        )
    return with_notice(f"{webhooks_path(app_id)}/{webhook_id}", "webhook-saved", webhook.url)
