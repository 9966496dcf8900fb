"""The app's marketplace listing in the console: the editor of its content (the open revision's,
or the live one's), its images, submitting a revision for review, and every revision with its
state."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated

from pydantic import Field, WithJsonSchema
from quart import Response, g, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import apps
from ledgerport.errors import InvalidInput

from ..._context import platform, unit_of_work
from ..._ids import ASSET
from ..._openapi import (
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
from .._csrf import CSRF_COOKIE_PARAM, back_with_notice, form_guard
from .._field_problems import FormField, FormProblems, field_problems, one_field_problem
from .._form_models import BUTTON_BODY, PageForm, Repeated, read_form
from .._frame import console_developer, returns_to
from .._notices import (
    Notice,
    form_page,
    with_notice,
)
from .._problems import answers_again
from ._shared import APP_PARAM, CONSOLE_CSP, PAGE_ERRORS, blueprint


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
    raises=PAGE_ERRORS,
    params=(APP_PARAM,),
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
    problems: FormProblems | None = None,
    status: int = 200,
) -> Response:
    """The listing page, its editor holding ``sent`` (else the revision it starts from),
    ``problem`` above it, and ``problems`` beside their fields with their summary at the top."""
    user_id = console_developer()
    async with unit_of_work(reads=True) as tx:
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
        problems=problems,
        current="listing",
    )


LISTING_FIELDS = (
    FormField("name", "Name", ("name",)),
    FormField("slug", "Address", ("slug",)),
    FormField("tagline", "Tagline", ("tagline",)),
    FormField("category", "Category", ("category",)),
    FormField("description", "Description", ("description",)),
    FormField("icon", "Icon", ("icon", "iconAssetId")),
    FormField("screenshots", "Screenshots", ("screenshot", "screenshotAssetIds")),
)
"""The editor's fields in its order: the inputs' ids and labels, and how the listing's rules
name them."""
_WHAT = "the listing was not saved"


def listing_problems(
    refused: InvalidInput | apps.SlugTaken, sent: apps.ListingContent
) -> FormProblems:
    """Why a save was refused, beside the editor's fields: the rules' sentences with each
    field's label, a taken address beside the Address, and an image that is not the app's
    beside the Icon or the Screenshots, whichever chose it."""
    if isinstance(refused, apps.SlugTaken):
        return one_field_problem(
            f"Address {sent.slug} is taken by another listing: choose another",
            "slug",
            outcome=_WHAT,
        )
    messages = []
    for message in refused.messages:
        if message.startswith("asset ") and message.endswith(" is not an asset of the app"):
            chosen_as = "icon" if message.split()[1] == sent.icon_asset_id else "screenshot"
            message = f"{chosen_as} is not one of the app's images any more: choose again"
        messages.append(message)
    return field_problems(messages, LISTING_FIELDS, outcome=_WHAT)


_EDITOR_AGAIN = page(
    400,
    "Refused: the listing page again, its editor holding the content as it was sent, with"
    " what to change beside it (a taken slug, a missing field, an unknown image)",
)


class ListingForm(PageForm):
    """The listing editor: the content of the draft, its images by asset id, and ``then``
    ``submit`` to send it for review once saved. A field left out is as if empty: the form
    comes back saying what is missing."""

    slug: str = ""
    name: str = ""
    tagline: str = ""
    category: str = ""
    description: str = ""
    icon: str = ""
    screenshot: Repeated = Field(default_factory=list)
    then: str = ""


_BACK_TO_LISTING = back_with_notice(lambda app_id: _listing_path(app_id))


@blueprint.post("/console/apps/<app_id>/listing")
@form_guard(_BACK_TO_LISTING)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the listing page, saying what was saved (and submitted)", SET_COOKIE.optional()
    ),
    _EDITOR_AGAIN,
    page(404, "Not an app of the signed-in developer"),
    raises=(*PAGE_ERRORS, InvalidInput, RequestEntityTooLarge),
    bodies=(Body(FORM, ListingForm),),
    params=(APP_PARAM, CSRF_COOKIE_PARAM),
)
async def save_listing(app_id: str) -> ResponseReturnValue:
    """Save the editor's content as the listing's draft revision, as
    ``PUT /developer/apps/{appId}/listing`` does (a revision whose changes were requested, or
    that was rejected, becomes a draft again); with ``then=submit`` the draft goes to review
    in the same step."""
    arrived = float(g.get("arrived") or time.time())
    user_id = console_developer()
    form = await read_form(ListingForm)
    back = _listing_path(app_id)
    content = apps.ListingContent(
        slug=form.slug.strip(),
        name=form.name.strip(),
        tagline=form.tagline.strip(),
        description=form.description.replace("\r\n", "\n"),
        category=form.category,
        icon_asset_id=form.icon or None,
        screenshot_asset_ids=tuple(form.screenshot),
    )
    p = platform()

    async def again(problem: Notice, status: int) -> Response:
        return await _listing_editor(app_id, sent=content, problem=problem, status=status)

    answers_again(again)
    try:
        async with unit_of_work() as tx:
            app = await apps.get_developed_app(tx, app_id, user_id)
            listing, _ = await apps.save_listing(
                tx, now=p.now(), arrived=arrived, app=app, content=content
            )
            if form.then == "submit":
                listing = await apps.submit_listing(tx, now=p.now(), app=app)
    except (InvalidInput, apps.SlugTaken) as refused:
        problems = listing_problems(refused, content)
        return await _listing_editor(app_id, sent=content, problems=problems, status=400)
    assert listing.open is not None
    if form.then == "submit":
        return with_notice(back, "revision-submitted", listing.open.number)
    return with_notice(back, "listing-saved", listing.open.number)


@blueprint.post("/console/apps/<app_id>/listing/submit")
@form_guard(_BACK_TO_LISTING, token_required=False)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the listing page, saying what was done or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=PAGE_ERRORS,
    bodies=BUTTON_BODY,
    params=(APP_PARAM, CSRF_COOKIE_PARAM),
)
async def submit_listing(app_id: str) -> ResponseReturnValue:
    """The submit button: the draft revision goes to review, as
    ``POST /developer/apps/{appId}/listing/submit``."""
    user_id = console_developer()
    back = _listing_path(app_id)
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
    raises=(*PAGE_ERRORS, apps.AssetNotFound),
    params=(APP_PARAM, _ASSET),
)
async def image(app_id: str, asset_id: str) -> ResponseReturnValue:
    """One of the app's images, for its developer's previews (drafts included; the
    marketplace serves only what a live listing shows). An image's bytes never change."""
    user_id = console_developer()
    async with unit_of_work(reads=True) as tx:
        await apps.get_developed_app(tx, app_id, user_id)
        content_type, data = await apps.app_asset(tx, app_id, asset_id)
    response = Response(data, content_type=content_type)
    response.headers["Cache-Control"] = "private, max-age=86400, immutable"
    return response


class ImageUpload(PageForm):
    """The upload form: ``image``, a PNG or JPEG file (left out, the form comes back saying the
    image is missing)."""

    image: Annotated[bytes, WithJsonSchema({"type": "string", "format": "binary"})] = b""
    """Read from the request's files, as an upload is sent (``multipart/form-data``)."""


@blueprint.post("/console/apps/<app_id>/assets")
@form_guard(_BACK_TO_LISTING)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Back to the listing page, saying the image is uploaded or why not", SET_COOKIE.optional()
    ),
    page(404, "Not an app of the signed-in developer"),
    raises=(*PAGE_ERRORS, InvalidInput, RequestEntityTooLarge),
    bodies=(Body("multipart/form-data", ImageUpload),),
    params=(APP_PARAM, CSRF_COOKIE_PARAM),
)
async def upload_image(app_id: str) -> ResponseReturnValue:
    """Upload an image for the listing (a PNG or JPEG file, as
    ``POST /developer/apps/{appId}/assets``); it is then offered as the icon or a screenshot."""
    user_id = console_developer()
    files = await request.files
    back = _listing_path(app_id)
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
