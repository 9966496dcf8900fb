"""The developer console's pages on the application host: an app's overview; its webhooks with
their recent deliveries (redeliver and test buttons), and the forms that add, edit, switch off
and on, and delete an endpoint and rotate its secret (shown once); its functions with their
recent runs and logs, and the forms that write, edit and delete a function and queue its test
run; and its marketplace listing with its revisions. Server-rendered from the same domain calls
as the JSON console API (``/developer/*``, the contract), for the signed-in developer (the
session cookie). Every form carries a CSRF token; a button comes back to its page with a notice
(303), an editing form that is refused comes back as it was sent, with the reason beside it
(``_errors.answers_again``). Only an app's developer sees it: anyone else's app is not found."""

from __future__ import annotations

import hmac
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired
from urllib.parse import quote

from quart import Blueprint, Response, g, redirect, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, auth, catalog, queues, storage
from ledgerport.errors import InvalidInput

from ._browser import (
    CSRF_COOKIE_PARAM,
    CsrfToken,
    csrf_valid,
    current_user,
    form_page,
    page_csp,
    require_form_token,
    returns_to,
    with_notice,
)
from ._console_forms import (
    areas_out_of_reach,
    event_groups,
    kept_order,
    secret_fingerprint,
    source_problem,
)
from ._context import platform, unit_of_work
from ._design import exact_time
from ._errors import Notice, answers_again, notice_text
from ._function_budget import count_function_upload, queue_test_run
from ._ids import APP, ASSET, FUNCTION_NAME, WEBHOOK
from ._openapi import (
    FORM,
    RETRY_AFTER,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    Header,
    Param,
    Reply,
    operation,
    page,
    redirect_reply,
)
from ._pages import (
    Way,
    clear_notice,
    html_page,
    login_redirect,
    notice_for_this_page,
)

blueprint = Blueprint("console_pages", __name__)

PAGE_TITLE = "Console"
"""Title of the console pages' problem pages."""
WAYS = (Way("Your apps", "/console"),)
"""Where a console page's problem offers to go on."""
_APP = Param("app_id", "path", "The app", APP.schema)


class ConsoleForm(TypedDict):
    """A console button's form: its CSRF token. A form that fails the check, like one the
    action refuses, answers the redirect back to the page, which says why."""

    csrf_token: CsrfToken


_FORM = (Body(FORM, ConsoleForm),)
_PAGE_ERRORS = (storage.BadValue, apps.AppNotFound, storage.StorageUnavailable)


@blueprint.before_request
async def _signed_in() -> ResponseReturnValue | None:
    """Every page is the signed-in developer's: anyone else goes to the sign-in page first."""
    user = await current_user()
    if user is None:
        return login_redirect()
    g.console_user_id = user.id
    return None


def _developer() -> str:
    user_id: str = g.console_user_id
    return user_id


CONSOLE_CSP = page_csp()
"""The console pages load the design's stylesheet and images from this origin (the listing
editor's previews among them), and nothing else."""
LISTED_EXCERPT_CHARS = 300
"""Characters of a run's log lines, error and result a page listing runs shows (the run's page
shows them whole): 20 functions' 100 runs with 4,096 of each made one page of 66 MB in 1.2 s."""
RUNS_PER_FUNCTION = 10
"""A function's runs the functions page lists, the most recent (its own page lists 100)."""


@blueprint.get("/console")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The apps the signed-in user develops"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    raises=_PAGE_ERRORS,
)
async def console_home() -> ResponseReturnValue:
    """The apps the signed-in user develops."""
    user_id = _developer()
    async with unit_of_work() as tx:
        developed = await apps.apps_developed_by(tx, user_id)
    return await form_page("console_home.html", csp=CONSOLE_CSP, apps=developed, current="apps")


@blueprint.get("/console/apps/<app_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's overview"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def app_overview(app_id: str) -> ResponseReturnValue:
    """The app: its client id, status, review, App URL, scopes, pinned version, and how many
    webhooks, functions and extensions it has."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhooks = await apps.list_webhooks(tx, app_id)
        functions = await apps.list_functions(tx, app_id)
        extensions = await apps.list_extensions(tx, app)
    return await form_page(
        "console_app.html",
        csp=CONSOLE_CSP,
        app=app,
        webhooks=len(webhooks),
        functions=len(functions),
        extensions=extensions,
        current="overview",
    )


@blueprint.get("/console/apps/<app_id>/webhooks")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's webhooks and their recent deliveries"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def webhooks_page(app_id: str) -> ResponseReturnValue:
    """Each webhook with its 100 most recent deliveries: status, attempts, response code, last
    error; a button to redeliver one that is not waiting for an attempt, and one to send a
    test delivery."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhooks = [
            (webhook, await queues.recent_deliveries(tx, webhook.id))
            for webhook in await apps.list_webhooks(tx, app_id)
        ]
    return await form_page(
        "console_webhooks.html",
        csp=CONSOLE_CSP,
        app=app,
        webhooks=webhooks,
        now=platform().now(),
        current="webhooks",
    )


def _back(app_id: str, notice: str, *params: object) -> Response:
    return with_notice(f"/console/apps/{app_id}/webhooks", notice, *params)


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/test")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Back to the webhooks page, saying what was done", SET_COOKIE.optional()),
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound),
    bodies=_FORM,
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def send_test(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The test button: a test delivery to the webhook."""
    user_id = _developer()
    if not csrf_valid((await request.form).get("csrf_token")):
        return _back(app_id, "form-expired")
    p = platform()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        delivery_id = await queues.create_test_delivery(
            tx, now=p.now(), webhook=webhook, pinned_version=app.pinned_version
        )
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return _back(app_id, "test-queued", delivery_id)


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/deliveries/<delivery_id>/redeliver")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the webhooks page, saying what was done or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound),
    bodies=_FORM,
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def redeliver(app_id: str, webhook_id: str, delivery_id: str) -> ResponseReturnValue:
    """The redeliver button: the delivery again, or why it cannot go again."""
    user_id = _developer()
    if not csrf_valid((await request.form).get("csrf_token")):
        return _back(app_id, "form-expired")
    p = platform()
    returns_to(f"/console/apps/{app_id}/webhooks")
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        await queues.redeliver(tx, now=p.now(), webhook=webhook, delivery_id=delivery_id)
        await tx.notify(queues.DELIVERIES_CHANNEL)
    return _back(app_id, "redelivered", delivery_id)


@blueprint.get("/console/apps/<app_id>/functions")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's functions and their recent runs"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def functions_page(app_id: str) -> ResponseReturnValue:
    """Each function with its version, events and 10 most recent runs: status, duration, and
    the start of its logs, error and result."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        functions = [
            (
                function,
                await queues.recent_runs(
                    tx, function, shown=RUNS_PER_FUNCTION, excerpt=LISTED_EXCERPT_CHARS
                ),
            )
            for function in await apps.list_functions(tx, app_id)
        ]
    return await form_page(
        "console_functions.html", csp=CONSOLE_CSP, app=app, functions=functions, current="functions"
    )


def _listing_path(app_id: str) -> str:
    return f"/console/apps/{app_id}/listing"


def _editing(listing: apps.Listing | None) -> apps.Revision | None:
    """The revision the editor starts from: the open one, else the live one."""
    if listing is None:
        return None
    return listing.open or listing.live


@blueprint.get("/console/apps/<app_id>/listing")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The app's marketplace listing: its editor, its images and its revisions"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def listing_page(app_id: str) -> ResponseReturnValue:
    """The listing: the live revision and the open one with its state and the reviewer's note;
    the editor (the open revision's content, or the live one's, with previews of the icon and
    screenshots, the app's images to choose from and a form to upload one), which saves a
    draft and can send it for review at once (edit and resubmit after changes are requested);
    a button to submit a draft; every revision with its state."""
    return await _listing_editor(app_id)


@dataclass(frozen=True)
class _Sent:
    """What the editor shows when a save was refused: the content as the person sent it."""

    content: apps.ListingContent


async def _listing_editor(
    app_id: str,
    *,
    sent: apps.ListingContent | None = None,
    problem: Notice | None = None,
    status: int = 200,
) -> Response:
    """The listing page, its editor holding ``sent`` (else the revision it starts from) and
    ``problem`` beside it."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        listing = await apps.find_listing(tx, app_id)
        revisions = await apps.listing_revisions(tx, listing.id) if listing else []
        ratings = await apps.rating_summary(tx, app_id)
        images = await apps.app_assets(tx, app_id)
    open_revision = listing.open if listing is not None else None
    return await form_page(
        "console_listing.html",
        status=status,
        csp=CONSOLE_CSP,
        app=app,
        listing=listing,
        revisions=revisions,
        ratings=ratings,
        images=images,
        editing=_Sent(sent) if sent is not None else _editing(listing),
        editable=open_revision is None or open_revision.state in apps.EDITABLE_REVISION_STATES,
        categories=apps.LISTING_CATEGORIES,
        problem=problem,
        current="listing",
    )


_EDITOR_AGAIN = page(
    400,
    "Refused: the listing page again, its editor holding the content as it was sent, with"
    " what to change beside it (a taken slug, a missing field, an unknown image)",
)


class ListingForm(TypedDict):
    """The listing editor: the content of the draft, its images by asset id, and ``then``
    ``submit`` to send it for review once saved. A field left out is as if empty: the form
    comes back saying what is missing."""

    csrf_token: CsrfToken
    slug: NotRequired[str]
    name: NotRequired[str]
    tagline: NotRequired[str]
    category: NotRequired[str]
    description: NotRequired[str]
    icon: NotRequired[str]
    screenshot: NotRequired[list[str] | str]
    then: NotRequired[str]


@blueprint.post("/console/apps/<app_id>/listing")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the listing page, saying what was saved (and submitted)", SET_COOKIE.optional()
    ),
    _EDITOR_AGAIN,
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ListingForm),),
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def save_listing(app_id: str) -> ResponseReturnValue:
    """Save the editor's content as the listing's draft revision, as
    ``PUT /developer/apps/{appId}/listing`` does (a revision whose changes were requested, or
    that was rejected, becomes a draft again); with ``then=submit`` the draft goes to review
    in the same step."""
    arrived = float(g.get("arrived") or time.time())
    user_id = _developer()
    form = await request.form
    back = _listing_path(app_id)
    require_form_token(form.get("csrf_token"))
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(back, "form-expired")
    content = apps.ListingContent(
        slug=form.get("slug", "").strip(),
        name=form.get("name", "").strip(),
        tagline=form.get("tagline", "").strip(),
        description=form.get("description", "").replace("\r\n", "\n"),
        category=form.get("category", ""),
        icon_asset_id=form.get("icon") or None,
        screenshot_asset_ids=tuple(form.getlist("screenshot")),
    )
    p = platform()

    async def again(problem: Notice, status: int) -> Response:
        return await _listing_editor(app_id, sent=content, problem=problem, status=status)

    answers_again(again)
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        listing, _ = await apps.save_listing(
            tx, now=p.now(), arrived=arrived, app=app, content=content
        )
        if form.get("then") == "submit":
            listing = await apps.submit_listing(tx, now=p.now(), app=app)
    assert listing.open is not None
    if form.get("then") == "submit":
        return with_notice(back, "revision-submitted", listing.open.number)
    return with_notice(back, "listing-saved", listing.open.number)


@blueprint.post("/console/apps/<app_id>/listing/submit")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the listing page, saying what was done or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    bodies=_FORM,
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def submit_listing(app_id: str) -> ResponseReturnValue:
    """The submit button: the draft revision goes to review, as
    ``POST /developer/apps/{appId}/listing/submit``."""
    user_id = _developer()
    back = _listing_path(app_id)
    if not csrf_valid((await request.form).get("csrf_token")):
        return with_notice(back, "form-expired")
    returns_to(back)
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        listing = await apps.submit_listing(tx, now=platform().now(), app=app)
    assert listing.open is not None
    return with_notice(back, "revision-submitted", listing.open.number)


_ASSET = Param("asset_id", "path", "The image", ASSET.schema)
_IMAGE_HEADERS = (Header("Cache-Control", "Kept a day by this browser: an image never changes"),)


@blueprint.get("/console/apps/<app_id>/assets/<asset_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    Reply(200, "The image", "image/png", None, _IMAGE_HEADERS),
    Reply(200, "The image", "image/jpeg", None, _IMAGE_HEADERS),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Not an image of an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, apps.AssetNotFound),
    params=(_APP, _ASSET),
)
async def image(app_id: str, asset_id: str) -> ResponseReturnValue:
    """One of the app's images, for its developer's previews (drafts included; the
    marketplace serves only what a live listing shows). An image's bytes never change."""
    user_id = _developer()
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        content_type, data = await apps.app_asset(tx, app_id, asset_id)
    response = Response(data, content_type=content_type)
    response.headers["Cache-Control"] = "private, max-age=86400, immutable"
    return response


class ImageUpload(TypedDict):
    """The upload form: ``image``, a PNG or JPEG file (left out, the form comes back saying the
    image is missing)."""

    csrf_token: CsrfToken
    image: NotRequired[bytes]


@blueprint.post("/console/apps/<app_id>/assets")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the listing page, saying the image is uploaded or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, InvalidInput, RequestEntityTooLarge),
    bodies=(Body("multipart/form-data", ImageUpload),),
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def upload_image(app_id: str) -> ResponseReturnValue:
    """Upload an image for the listing (a PNG or JPEG file, as
    ``POST /developer/apps/{appId}/assets``); it is then offered as the icon or a screenshot."""
    user_id = _developer()
    form = await request.form
    files = await request.files
    back = _listing_path(app_id)
    require_form_token(form.get("csrf_token"))
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(back, "form-expired")
    returns_to(back)
    upload = files.get("image")
    data = upload.read() if upload is not None else b""
    content_type = (upload.mimetype if upload is not None else "") or "image/png"
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        await apps.upload_asset(
            tx, now=platform().now(), app_id=app_id, content_type=content_type, data=data
        )
    return with_notice(back, "image-uploaded")


# --- Webhook endpoints: add, edit, switch off and on, delete, rotate the secret ---------------

_WEBHOOK = Param("webhook_id", "path", "The webhook", WEBHOOK.schema)
SECRET_CSP = page_csp(scripts=True)
"""The page that shows a signing secret once also loads the copy button's script (hashed, from
this origin); it works without it."""
_NOT_FOUND = page(404, "Not an app of the signed-in developer, or not one of its webhooks")
_SIGNED_OUT = redirect_reply("Not signed in: to the sign-in page, returning here")


def _webhooks_path(app_id: str) -> str:
    return f"/console/apps/{app_id}/webhooks"


def _webhook_path(app_id: str, webhook_id: str, tail: str) -> str:
    return f"/console/apps/{app_id}/webhooks/{webhook_id}/{tail}"


def _expired() -> Notice:
    expired = notice_text("form-expired")
    assert expired is not None
    return expired


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
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id) if webhook_id else None
    action = (
        _webhook_path(app_id, webhook_id, "edit") if webhook_id else f"{_webhooks_path(app_id)}/new"
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
        problem=problem,
        current="webhooks",
        below=True,
    )


@blueprint.get("/console/apps/<app_id>/webhooks/new")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that adds an endpoint: its URL, its events by area, enabled"),
    _SIGNED_OUT,
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def new_webhook_page(app_id: str) -> ResponseReturnValue:
    """The form that adds an endpoint: its URL, the events it receives as checkboxes grouped by
    area (those the app may receive: its own events, and the business and privacy events whose
    read scope it registers), and whether it is enabled."""
    return await _webhook_form(app_id, webhook_id=None, url="", events=(), enabled=True)


class WebhookForm(TypedDict):
    """The endpoint form: its URL, the events it receives (``events`` repeated, one per
    checkbox) and, when adding it, ``enabled`` (``true`` when ticked; left out, it is added
    switched off). A field left out is as if empty: the form comes back saying what is
    missing."""

    csrf_token: CsrfToken
    url: NotRequired[str]
    events: NotRequired[list[str] | str]
    enabled: NotRequired[str]


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


@blueprint.post("/console/apps/<app_id>/webhooks/new")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Added: to the page that shows its signing secret once", SET_COOKIE.optional()),
    _FORM_AGAIN,
    page(404, "Not an app of the signed-in developer"),
    raises=(*_PAGE_ERRORS, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, WebhookForm),),
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def add_webhook(app_id: str) -> ResponseReturnValue:
    """Add the endpoint, as ``POST /developer/apps/{appId}/webhooks``; then its signing secret
    is shown once, on the next page (never in a URL or a cookie: the answer's notice carries a
    keyed fingerprint of it)."""
    user_id = _developer()
    form = await request.form
    require_form_token(form.get("csrf_token"))
    url = form.get("url", "").strip()
    events = form.getlist("events")
    enabled = form.get("enabled") == "true"

    async def again(problem: Notice, status: int) -> Response:
        return await _webhook_form(
            app_id,
            webhook_id=None,
            url=url,
            events=events,
            enabled=enabled,
            problem=problem,
            status=status,
        )

    if not csrf_valid(form.get("csrf_token")):
        return await again(_expired(), 400)
    answers_again(again)
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
    return with_notice(
        _webhook_path(app_id, webhook.id, "secret"),
        "webhook-created",
        secret_fingerprint(p.keyring, webhook.id, secret),
    )


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/edit")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that edits an endpoint: its URL and its events"),
    _SIGNED_OUT,
    _NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound),
    params=(_APP, _WEBHOOK),
)
async def edit_webhook_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The form that edits an endpoint: its URL and its events (an event it receives that the
    app no longer registers the scope of stays ticked, marked, until it is unticked)."""
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
    return await _webhook_form(
        app_id,
        webhook_id=webhook_id,
        url=webhook.url,
        events=webhook.events,
        enabled=webhook.enabled,
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/edit")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Saved: back to the webhooks page, saying so", SET_COOKIE.optional()),
    _FORM_AGAIN,
    _NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, WebhookForm),),
    params=(_APP, _WEBHOOK, CSRF_COOKIE_PARAM),
)
async def edit_webhook(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Save the endpoint's URL and events, as ``PATCH /developer/apps/{appId}/webhooks/{id}``;
    the events it had keep their order (its first is the type of its test deliveries)."""
    user_id = _developer()
    form = await request.form
    require_form_token(form.get("csrf_token"))
    url = form.get("url", "").strip()
    events = form.getlist("events")

    async def again(problem: Notice, status: int) -> Response:
        return await _webhook_form(
            app_id,
            webhook_id=webhook_id,
            url=url,
            events=events,
            enabled=True,
            problem=problem,
            status=status,
        )

    if not csrf_valid(form.get("csrf_token")):
        return await again(_expired(), 400)
    answers_again(again)
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
    return with_notice(_webhooks_path(app_id), "webhook-saved", webhook.url)


class SwitchForm(TypedDict):
    """The switch button: ``enabled`` ``true`` switches the endpoint on, anything else off."""

    csrf_token: CsrfToken
    enabled: NotRequired[str]


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/enabled")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the webhooks page, saying what was done or why not", SET_COOKIE.optional()
    ),
    _NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, SwitchForm),),
    params=(_APP, _WEBHOOK, CSRF_COOKIE_PARAM),
)
async def switch_webhook(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Switch the endpoint on or off, as ``PATCH`` with ``enabled``: switched off, it gets no
    new deliveries and those waiting for it fail without being sent."""
    user_id = _developer()
    form = await request.form
    back = _webhooks_path(app_id)
    require_form_token(form.get("csrf_token"))
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(back, "form-expired")
    enabled = form.get("enabled") == "true"
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.update_webhook(
            tx,
            now=platform().now(),
            app_id=app_id,
            webhook_id=webhook_id,
            changes={"enabled": enabled},
        )
    return with_notice(back, "webhook-enabled" if enabled else "webhook-disabled", webhook.url)


class ConfirmForm(TypedDict):
    """A confirmation page's form: ``confirm`` ``yes`` does it; without it, the answer is the
    confirmation page."""

    csrf_token: CsrfToken
    confirm: NotRequired[str]


async def _confirm_page(
    app: apps.App,
    *,
    current: str,
    nav_label: str,
    heading: str,
    lead: str,
    consequences: Sequence[str],
    action: str,
    button: str,
    danger: bool,
    back: str,
) -> Response:
    return await form_page(
        "console_confirm.html",
        csp=CONSOLE_CSP,
        app=app,
        current=current,
        below=True,
        nav_label=nav_label,
        heading=heading,
        lead=lead,
        consequences=consequences,
        action=action,
        button=button,
        danger=danger,
        back=back,
    )


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/delete")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The confirmation step of deleting an endpoint: what happens, and the button"),
    _SIGNED_OUT,
    _NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound),
    params=(_APP, _WEBHOOK),
)
async def delete_webhook_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Confirm deleting the endpoint: what happens to its deliveries, and the button."""
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
    return await _confirm_page(
        app,
        current="webhooks",
        nav_label="Delete endpoint",
        heading="Delete this endpoint?",
        lead=webhook.url,
        consequences=(
            "It gets no new deliveries, and the deliveries waiting for it fail without being sent.",
            "Its signing secret signs nothing more, and it leaves this console's list with its"
            " recent deliveries.",
            "To switch it off for a while instead, keep it and use its Switch off button.",
        ),
        action=_webhook_path(app_id, webhook_id, "delete"),
        button="Delete the endpoint",
        danger=True,
        back=_webhooks_path(app_id),
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/delete")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Deleted: back to the webhooks page, saying so; or, not confirmed, to the"
        " confirmation page",
        SET_COOKIE.optional(),
    ),
    _NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ConfirmForm),),
    params=(_APP, _WEBHOOK, CSRF_COOKIE_PARAM),
)
async def delete_webhook(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Delete the endpoint, confirmed, as ``DELETE /developer/apps/{appId}/webhooks/{id}``;
    unconfirmed, to its confirmation page (an endpoint that is not there is not found)."""
    user_id = _developer()
    form = await request.form
    confirming = _webhook_path(app_id, webhook_id, "delete")
    require_form_token(form.get("csrf_token"))
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(confirming, "form-expired")
    back = _webhooks_path(app_id)
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
        if form.get("confirm") != "yes":
            return redirect(quote(confirming), 303)
        await apps.delete_webhook(tx, now=platform().now(), app_id=app_id, webhook_id=webhook_id)
    return with_notice(back, "webhook-deleted", webhook.url)


@blueprint.get("/console/apps/<app_id>/webhooks/<webhook_id>/rotate")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The confirmation step of rotating an endpoint's signing secret"),
    _SIGNED_OUT,
    _NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound),
    params=(_APP, _WEBHOOK),
)
async def rotate_secret_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Confirm rotating the endpoint's signing secret: the new one is shown once, the current
    one keeps signing beside it for 24 hours, and one rotated before that stops now."""
    p = platform()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
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
    return await _confirm_page(
        app,
        current="webhooks",
        nav_label="Rotate the secret",
        heading="Rotate the signing secret?",
        lead=webhook.url,
        consequences=consequences,
        action=_webhook_path(app_id, webhook_id, "rotate"),
        button="Rotate the secret",
        danger=False,
        back=_webhooks_path(app_id),
    )


@blueprint.post("/console/apps/<app_id>/webhooks/<webhook_id>/rotate")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Rotated: to the page that shows the new secret once; or, not confirmed, to the"
        " confirmation page",
        SET_COOKIE.optional(),
    ),
    _NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ConfirmForm),),
    params=(_APP, _WEBHOOK, CSRF_COOKIE_PARAM),
)
async def rotate_secret(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """Rotate the signing secret, confirmed, as ``POST .../rotate-secret``; the new secret is
    shown once, on the next page."""
    user_id = _developer()
    form = await request.form
    confirming = _webhook_path(app_id, webhook_id, "rotate")
    require_form_token(form.get("csrf_token"))
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(confirming, "form-expired")
    returns_to(confirming)
    p = platform()
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        await apps.get_webhook(tx, app_id, webhook_id)
        if form.get("confirm") != "yes":
            return redirect(quote(confirming), 303)
        secret, previous_until = await apps.rotate_webhook_secret(
            tx, p.keyring, now=p.now(), app_id=app_id, webhook_id=webhook_id
        )
    return with_notice(
        _webhook_path(app_id, webhook_id, "secret"),
        "secret-rotated",
        exact_time(previous_until),
        secret_fingerprint(p.keyring, webhook_id, secret),
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
    _SIGNED_OUT,
    _NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.WebhookNotFound),
    params=(_APP, _WEBHOOK),
)
async def webhook_secret_page(app_id: str, webhook_id: str) -> ResponseReturnValue:
    """The endpoint's signing secret, shown once: only with the notice the adding or rotating
    answer left for this page (signed, 60 seconds, cleared by this answer), and only when the
    secret is still the one that answer made. The page is never cached; a reload, the back
    button or a later visit say it is not shown again."""
    p = platform()
    left = notice_for_this_page()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        webhook = await apps.get_webhook(tx, app_id, webhook_id)
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


# --- Functions: write, edit, delete, test run -----------------------------------------------

STARTER_SOURCE = """export async function handler(event, context) {
  context.log(`${event.type} ${event.id}`);
  return { received: event.type };
}
"""
"""What a new function's source starts as."""
_NAME = Param(
    "name",
    "path",
    "The function's name",
    FUNCTION_NAME,
)
_FUNCTION_NOT_FOUND = page(
    404, "Not an app of the signed-in developer, or not one of its functions"
)


def _functions_path(app_id: str) -> str:
    return f"/console/apps/{app_id}/functions"


def _function_path(app_id: str, name: str, tail: str) -> str:
    return f"/console/apps/{app_id}/functions/{name}/{tail}"


async def _function_form(
    app_id: str,
    *,
    function_name: str | None,
    name: str,
    source: str,
    events: Sequence[str],
    problem: Notice | None = None,
    status: int = 200,
) -> Response:
    """The form that writes a new function (``function_name`` None) or a new version of one,
    filled with ``name``, ``source`` and ``events``, ``problem`` beside the source (with the
    lines up to the place it names)."""
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        function = await apps.get_function(tx, app_id, function_name) if function_name else None
    action = (
        _function_path(app_id, function_name, "edit")
        if function_name
        else f"{_functions_path(app_id)}/new"
    )
    return await form_page(
        "console_function_form.html",
        status=status,
        csp=CONSOLE_CSP,
        app=app,
        function=function,
        action=action,
        name=name,
        source=source,
        groups=event_groups(app.scopes, events),
        out_of_reach=areas_out_of_reach(app.scopes),
        problem=problem,
        position=source_problem(problem.text, source) if problem is not None else None,
        current="functions",
        below=True,
    )


@blueprint.get("/console/apps/<app_id>/functions/new")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that writes a new function: its name, events and source"),
    _SIGNED_OUT,
    page(404, "Not an app of the signed-in developer"),
    raises=_PAGE_ERRORS,
    params=(_APP,),
)
async def new_function_page(app_id: str) -> ResponseReturnValue:
    """The form that writes a new function: its name, the events it runs on as checkboxes
    grouped by area, and its source, started with a handler that logs its event."""
    return await _function_form(
        app_id, function_name=None, name="", source=STARTER_SOURCE, events=()
    )


class FunctionForm(TypedDict):
    """The function form: its ``name`` (a new function only), its ``source`` and the events it
    runs on (``events`` repeated, one per checkbox). A field left out is as if empty: the form
    comes back saying what is wrong."""

    csrf_token: CsrfToken
    name: NotRequired[str]
    source: NotRequired[str]
    events: NotRequired[list[str] | str]


_UPLOAD_AGAIN = page(
    400,
    "The form again as it was sent, saying why not beside the source (with the line and"
    " column of a syntax error): the form expired, the source, the name or an event is refused",
)
_UPLOAD_LIMITED = page(
    429, "The form again as it was sent: the app's uploads are over budget", RETRY_AFTER
)
_UPLOAD_RAISES = (
    *_PAGE_ERRORS,
    InvalidInput,
    apps.FunctionSourceNoHandler,
    auth.RateLimited,
    RequestEntityTooLarge,
)


async def _upload(
    app_id: str, *, name: str, source: str, events: Sequence[str]
) -> apps.HostedFunction:
    """Upload the function as ``PUT /developer/apps/{appId}/functions/{name}`` does: counted
    against the app's budget, compiled outside any transaction, then stored as its new
    version."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
    await count_function_upload(app.id)
    upload = await apps.prepare_function(app, name=name, source=source, events=events)
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        return await apps.put_function(tx, now=platform().now(), app=app, upload=upload)


def _source(form: Mapping[str, str]) -> str:
    """The source as typed: a browser sends a text area's line breaks as CRLF."""
    return form.get("source", "").replace("\r\n", "\n")


@blueprint.post("/console/apps/<app_id>/functions/new")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Saved: back to the functions page, saying so", SET_COOKIE.optional()),
    _UPLOAD_AGAIN,
    _UPLOAD_LIMITED,
    page(404, "Not an app of the signed-in developer"),
    raises=_UPLOAD_RAISES,
    bodies=(Body(FORM, FunctionForm),),
    params=(_APP, CSRF_COOKIE_PARAM),
)
async def add_function(app_id: str) -> ResponseReturnValue:
    """Write a new function (version 1), as ``PUT /developer/apps/{appId}/functions/{name}``
    for a name the app has no function of: a name that is taken is refused, so no function is
    replaced unseen."""
    form = await request.form
    require_form_token(form.get("csrf_token"))
    name = form.get("name", "").strip()
    source = _source(form)
    events = form.getlist("events")

    async def again(problem: Notice, status: int) -> Response:
        return await _function_form(
            app_id,
            function_name=None,
            name=name,
            source=source,
            events=events,
            problem=problem,
            status=status,
        )

    if not csrf_valid(form.get("csrf_token")):
        return await again(_expired(), 400)
    answers_again(again)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        taken = any(function.name == name for function in await apps.list_functions(tx, app_id))
    if taken:
        raise InvalidInput([f"name {name!r} is taken: edit that function, or choose another name"])
    function = await _upload(app_id, name=name, source=source, events=events)
    return with_notice(_functions_path(app_id), "function-saved", function.name, function.version)


@blueprint.get("/console/apps/<app_id>/functions/<name>/edit")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The form that edits a function: its events and the source that runs now"),
    _SIGNED_OUT,
    _FUNCTION_NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.FunctionNotFound),
    params=(_APP, _NAME),
)
async def edit_function_page(app_id: str, name: str) -> ResponseReturnValue:
    """The form that edits a function: its events, and the source of the version that runs,
    saved as its next version."""
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        function = await apps.get_function(tx, app_id, name)
        source = await apps.function_source(tx, function)
    return await _function_form(
        app_id, function_name=name, name=name, source=source, events=function.events
    )


@blueprint.post("/console/apps/<app_id>/functions/<name>/edit")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Saved: back to the functions page, saying so", SET_COOKIE.optional()),
    _UPLOAD_AGAIN,
    _UPLOAD_LIMITED,
    _FUNCTION_NOT_FOUND,
    raises=(*_UPLOAD_RAISES, apps.FunctionNotFound),
    bodies=(Body(FORM, FunctionForm),),
    params=(_APP, _NAME, CSRF_COOKIE_PARAM),
)
async def edit_function(app_id: str, name: str) -> ResponseReturnValue:
    """Save the source and events as the function's next version, as
    ``PUT /developer/apps/{appId}/functions/{name}``; it runs from then on."""
    form = await request.form
    require_form_token(form.get("csrf_token"))
    source = _source(form)
    events = form.getlist("events")

    async def again(problem: Notice, status: int) -> Response:
        return await _function_form(
            app_id,
            function_name=name,
            name=name,
            source=source,
            events=events,
            problem=problem,
            status=status,
        )

    if not csrf_valid(form.get("csrf_token")):
        return await again(_expired(), 400)
    answers_again(again)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        await apps.get_function(tx, app_id, name)
    function = await _upload(app_id, name=name, source=source, events=events)
    return with_notice(_functions_path(app_id), "function-saved", function.name, function.version)


@blueprint.get("/console/apps/<app_id>/functions/<name>/delete")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The confirmation step of deleting a function: what happens, and the button"),
    _SIGNED_OUT,
    _FUNCTION_NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.FunctionNotFound),
    params=(_APP, _NAME),
)
async def delete_function_page(app_id: str, name: str) -> ResponseReturnValue:
    """Confirm deleting the function: what happens to its runs, and the button."""
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, _developer())
        function = await apps.get_function(tx, app_id, name)
    return await _confirm_page(
        app,
        current="functions",
        nav_label=f"Delete {function.name}",
        heading=f"Delete the function {function.name}?",
        lead=f"Version {function.version} of it runs now.",
        consequences=(
            "It runs no more: runs still queued for it fail without running.",
            "It leaves this console's list with its recent runs, and its name is free again.",
        ),
        action=_function_path(app_id, name, "delete"),
        button="Delete the function",
        danger=True,
        back=_functions_path(app_id),
    )


@blueprint.post("/console/apps/<app_id>/functions/<name>/delete")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Deleted: back to the functions page, saying so; or, not confirmed, to the"
        " confirmation page",
        SET_COOKIE.optional(),
    ),
    _FUNCTION_NOT_FOUND,
    raises=(*_PAGE_ERRORS, apps.FunctionNotFound, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ConfirmForm),),
    params=(_APP, _NAME, CSRF_COOKIE_PARAM),
)
async def delete_function(app_id: str, name: str) -> ResponseReturnValue:
    """Delete the function, confirmed, as ``DELETE /developer/apps/{appId}/functions/{name}``."""
    form = await request.form
    confirming = _function_path(app_id, name, "delete")
    require_form_token(form.get("csrf_token"))
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(confirming, "form-expired")
    back = _functions_path(app_id)
    returns_to(back)
    async with unit_of_work() as tx:
        await apps.get_developed_app(tx, app_id, _developer())
        await apps.get_function(tx, app_id, name)
        if form.get("confirm") != "yes":
            return redirect(quote(confirming), 303)
        await apps.delete_function(tx, now=platform().now(), app_id=app_id, name=name)
    return with_notice(back, "function-deleted", name)


class ButtonForm(TypedDict):
    """A button's form: its CSRF token."""

    csrf_token: CsrfToken


@blueprint.post("/console/apps/<app_id>/functions/<name>/test")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the functions page, saying the test run is queued or why not",
        SET_COOKIE.optional(),
    ),
    _FUNCTION_NOT_FOUND,
    raises=(
        *_PAGE_ERRORS,
        apps.FunctionNotFound,
        auth.RateLimited,
        InvalidInput,
        RequestEntityTooLarge,
    ),
    bodies=(Body(FORM, ButtonForm),),
    params=(_APP, _NAME, CSRF_COOKIE_PARAM),
)
async def test_run(app_id: str, name: str) -> ResponseReturnValue:
    """The test button, as ``POST /developer/apps/{appId}/functions/{name}/test``: one run of
    the function on the sample of its first event type (``invoice.created`` for a function on
    none) with ``test: true``, businessId ``test``, eventId null, in no business; listed with
    its runs. Counted against the app's upload budget."""
    form = await request.form
    back = _functions_path(app_id)
    require_form_token(form.get("csrf_token"))
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(back, "form-expired")
    returns_to(back)
    run_id, function_name = await queue_test_run(app_id, name, _developer())
    return with_notice(back, "test-run-queued", run_id, function_name)
