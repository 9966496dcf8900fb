"""An endpoint's signing secret: rotating it (a confirmation page first) and the page that shows
it once, after the adding or rotating form, through a notice that carries a keyed fingerprint of
it, never the secret."""

from __future__ import annotations

import hmac
from urllib.parse import quote

from quart import redirect
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
from .._csrf import CSRF_COOKIE_PARAM, back_with_notice, form_guard
from .._design import exact_time
from .._form_models import read_form
from .._frame import console_developer, html_page, page_csp, returns_to
from .._notices import (
    clear_notice,
    notice_for_this_page,
    notice_text,
    with_notice,
)
from ._forms import secret_fingerprint
from ._shared import (
    APP_PARAM,
    PAGE_ERRORS,
    SIGNED_OUT,
    WEBHOOK_NOT_FOUND,
    WEBHOOK_PARAM,
    ConfirmForm,
    blueprint,
    confirm_page,
    webhook_path,
    webhooks_path,
)

SECRET_CSP = page_csp(scripts=True)
"""The page that shows a signing secret once also loads the copy button's script (hashed, from
this origin); it works without it."""


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/rotate")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The confirmation step of rotating an endpoint's signing secret"),
    SIGNED_OUT,
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound),
    params=(APP_PARAM, WEBHOOK_PARAM),
)
async def rotate_secret_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Confirm rotating the endpoint's signing secret: the new one is shown once, the current
    one keeps signing beside it for 24 hours, and one rotated before that stops now."""
    p = platform()
    async with unit_of_work(reads=True) as tx:
        app, webhook = await apps.get_developed_webhook(tx, app_id, console_developer(), webhook_id)
    now = p.now()
    consequences = [
        "A new signing secret is made and shown once, on the next page: copy it then.",
        "The current secret keeps signing beside the new one, as a second v1 value of"
        " X-Webhook-Signature, for 24 hours (until"
        f" {exact_time(now + catalog.WEBHOOK_SECRET_OVERLAP)}): give your receiver the new"
        " secret within that time.",
    ]
    previous = webhook.previous_secret_expires_at
    if previous is not None and previous > now:
        consequences.append(
            "The secret rotated out before the current one, which signs until"
            f" {exact_time(previous)}, stops signing now: at most two secrets sign at once."
        )
    return await confirm_page(
        app,
        current="webhooks",
        nav_label="Rotate the secret",
        heading="Rotate the signing secret?",
        lead=webhook.url,
        consequences=consequences,
        action=webhook_path(app_id, webhook_id, "rotate"),
        button="Rotate the secret",
        danger=False,
        back=webhooks_path(app_id),
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/rotate")
@form_guard(back_with_notice(lambda app_id, webhook_id: webhook_path(app_id, webhook_id, "rotate")))
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Rotated: to the page that shows the new secret once; or, not confirmed, to the"
        " confirmation page",
        SET_COOKIE.optional(),
    ),
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ConfirmForm),),
    params=(APP_PARAM, WEBHOOK_PARAM, CSRF_COOKIE_PARAM),
)
async def rotate_secret(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Rotate the signing secret, confirmed, as ``POST .../rotate-secret``; the new secret is
    shown once, on the next page."""
    user_id = console_developer()
    form = await read_form(ConfirmForm)
    confirming = webhook_path(app_id, webhook_id, "rotate")
    returns_to(confirming)
    p = platform()
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        await apps.get_webhook(tx, app_id, webhook_id)
        if form.confirm != "yes":
            return redirect(quote(confirming), 303)
        rotation = await apps.rotate_webhook_secret(
            tx, p.keyring, now=p.now(), app_id=app_id, webhook_id=webhook_id
        )
    if rotation.secret is None:
        # A standard-asymmetric endpoint: no secret to show; its page shows the public key.
        return redirect(quote(f"/console/apps/{app_id}/webhooks/{webhook_id}"), 303)
    return with_notice(
        webhook_path(app_id, webhook_id, "secret"),
        "secret-rotated",
        exact_time(rotation.previous_expires_at),
        secret_fingerprint(p.keyring, webhook_id, rotation.secret),
    )


_REVEALS = frozenset({"webhook-created", "secret-rotated"})
"""The notices that show a secret once: their last value is its fingerprint."""


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/secret")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(
        200,
        "Right after the endpoint is added or its secret rotated: the secret, once, with a copy"
        " button; any other time: that it is not shown again, and the way to rotate it",
    ),
    SIGNED_OUT,
    WEBHOOK_NOT_FOUND,
    raises=(*PAGE_ERRORS, apps.WebhookNotFound),
    params=(APP_PARAM, WEBHOOK_PARAM),
)
async def webhook_secret_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The endpoint's signing secret, shown once: only with the notice the adding or rotating
    answer left for this page (signed, 60 seconds, cleared by this answer), and only when the
    secret is still the one that answer made. The page is never cached; a reload, the back
    button or a later visit say it is not shown again."""
    p = platform()
    left = notice_for_this_page()
    async with unit_of_work(reads=True) as tx:
        app, webhook = await apps.get_developed_webhook(tx, app_id, console_developer(), webhook_id)
        secret: str | None = None
        if left is not None and left[0] in _REVEALS and left[1]:
            current = await apps.webhook_secret(tx, p.keyring, app_id=app_id, webhook_id=webhook_id)
            shown = secret_fingerprint(p.keyring, webhook_id, current)
            if hmac.compare_digest(shown, left[1][-1]):
                secret = current
    response = await html_page(
        "console_webhook_secret.html",
        csp=SECRET_CSP,
        notice=notice_text(*left) if secret is not None and left is not None else None,
        app=app,
        webhook=webhook,
        secret=secret,
        current="webhooks",
        below=True,
    )
    clear_notice(response)
    return response
