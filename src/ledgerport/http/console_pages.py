"""The developer console's pages on the application host: an app's overview, its webhooks with
their recent deliveries (redeliver and test buttons), its functions with their recent runs and
logs, and its marketplace listing with its revisions. Server-rendered from the same domain calls
as the JSON console API (``/developer/*``, the contract), for the signed-in developer (the
session cookie); the buttons are forms with a CSRF token that come back to the page. Only an
app's developer sees it: anyone else's app is not found."""

from __future__ import annotations

import time
from typing import NotRequired

from quart import Blueprint, Response, g, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps, queues, storage
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
from ._context import platform, unit_of_work
from ._ids import APP
from ._openapi import (
    FORM,
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
from ._pages import Way, login_redirect

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
        "console_webhooks.html", csp=CONSOLE_CSP, app=app, webhooks=webhooks, current="webhooks"
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
    """Each function with its version, events and 100 most recent runs: status, duration,
    logs, error and result."""
    user_id = _developer()
    async with unit_of_work() as tx:
        app = await apps.get_developed_app(tx, app_id, user_id)
        functions = [
            (function, await queues.recent_runs(tx, function))
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
        csp=CONSOLE_CSP,
        app=app,
        listing=listing,
        revisions=revisions,
        ratings=ratings,
        images=images,
        editing=_editing(listing),
        editable=open_revision is None or open_revision.state in apps.EDITABLE_REVISION_STATES,
        categories=apps.LISTING_CATEGORIES,
        current="listing",
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
        "Back to the listing page, saying what was saved (and submitted) or why not",
        SET_COOKIE.optional(),
    ),
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
    returns_to(back)
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


_ASSET = Param("asset_id", "path", "The image")
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
