"""The public marketplace on the application host: the catalogue (search by name, filter by
category), a listing's page with its images and ratings, the rating form for business users, and
the one-click install (contract.md: App platform surfaces, Application host pages). Listings show
their live revision only, and only the images it names are served.

One-click install is a managed install (partner-api.md: Token exchange, 5): the signed-in user
picks a business and the scopes, the installation is made (or widened) at once, and the browser
goes to the app's embedded page, whose bridge hands the app a session token; the app's first
tokens come from exchanging it. Nothing is redirected to the app.
"""

from __future__ import annotations

from typing import Annotated, NotRequired
from urllib.parse import urlencode

from pydantic import Field, WithJsonSchema
from quart import Blueprint, Response, redirect, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import access, apps, books, storage
from ledgerport.errors import InvalidInput

from ._browser import (
    CSRF_COOKIE_PARAM,
    CsrfToken,
    csrf_valid,
    current_user_id,
    form_page,
    with_notice,
)
from ._consent import described_scopes, developer_name
from ._context import platform, unit_of_work
from ._ids import ASSET, BUSINESS
from ._openapi import (
    FORM,
    SET_COOKIE,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Body,
    Header,
    Param,
    Reply,
    one_of,
    operation,
    page,
    redirect_reply,
)
from ._pages import login_redirect, problem_page

blueprint = Blueprint("marketplace", __name__)

PAGE_TITLE = "Marketplace"
_SLUG = Param("slug", "path", "The listing's slug")
_ERRORS = (storage.BadValue, storage.StorageUnavailable)


@blueprint.get("/marketplace")
@operation(
    page(200, "The catalogue of listed apps"),
    raises=_ERRORS,
    params=(
        Param("q", "query", "Words of the app's name"),
        Param("category", "query", "Only apps of this category"),
    ),
)
async def catalogue() -> ResponseReturnValue:
    """The apps listed in the marketplace, by name: ``q`` searches their names, ``category``
    keeps one category."""
    search = request.args.get("q", "").strip()[:100]
    category = request.args.get("category", "")
    if category not in apps.LISTING_CATEGORIES:
        category = ""
    async with unit_of_work() as tx:
        listed = await apps.live_listings(tx, search=search, category=category)
    return await form_page(
        "marketplace.html",
        listings=listed,
        search=search,
        category=category,
        categories=apps.LISTING_CATEGORIES,
    )


@blueprint.get("/marketplace/<slug>")
@operation(
    page(200, "The listing"),
    page(404, "Nothing is listed there"),
    raises=_ERRORS,
    params=(_SLUG,),
)
async def listing_page(slug: str) -> ResponseReturnValue:
    """A listing: its live revision, its ratings, and for a signed-in member of a business where
    the app is installed, the form to rate it."""
    user_id = await current_user_id()
    async with unit_of_work() as tx:
        try:
            listed = await apps.live_listing(tx, slug)
        except apps.ListingNotFound:
            return await problem_page(f"Nothing is listed at {slug}", 404, title=PAGE_TITLE)
        mine = await apps.user_rating(tx, listed.app_id, user_id) if user_id else None
        user = await books.get_user(tx, user_id) if user_id else None
    return await form_page("marketplace_listing.html", listed=listed, mine=mine, user=user)


class RatingForm(TypedDict):
    """The rating form: the stars and an optional review (trimmed; empty is none)."""

    csrf_token: CsrfToken
    stars: Annotated[str, WithJsonSchema(one_of(["1", "2", "3", "4", "5"]))]
    review: NotRequired[Annotated[str, Field(max_length=apps.REVIEW_MAX_LENGTH)]]


@blueprint.post("/marketplace/<slug>/rating")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Back to the listing, saying what was done or why not", SET_COOKIE.optional()),
    page(404, "Nothing is listed there"),
    raises=_ERRORS,
    bodies=(Body(FORM, RatingForm),),
    params=(_SLUG, CSRF_COOKIE_PARAM),
)
async def rate(slug: str) -> ResponseReturnValue:
    """Rate the app 1 to 5 stars with an optional review; rating again edits the rating."""
    user_id = await current_user_id()
    if user_id is None:
        return login_redirect()
    form = await request.form
    back = f"/marketplace/{slug}"
    if not csrf_valid(form.get("csrf_token")):
        return with_notice(back, "The form expired: try again")
    try:
        stars = int(form.get("stars", ""))
    except ValueError:
        stars = 0
    try:
        async with unit_of_work() as tx:
            listed = await apps.live_listing(tx, slug)
            await apps.rate_app(
                tx,
                now=platform().now(),
                app_id=listed.app_id,
                user_id=user_id,
                stars=stars,
                review=form.get("review"),
            )
    except apps.ListingNotFound:
        return await problem_page(f"Nothing is listed at {slug}", 404, title=PAGE_TITLE)
    except (InvalidInput, apps.RatingNotAllowed) as refused:
        text = (
            "; ".join(refused.messages) if isinstance(refused, InvalidInput) else refused.rendered
        )
        return with_notice(back, f"Not rated: {text}")
    return with_notice(back, "Thank you: your rating is saved")


_INSTALL_REFUSED = (
    apps.AppNotReviewed,
    access.NoBusinessToConnect,
    access.NoBusinessToInstallIn,
)
"""Why the install page has no business to offer the signed-in user."""


@blueprint.get("/marketplace/<slug>/install")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The install form: the businesses the user may install in, the app's scopes"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Nothing is listed there"),
    raises=(*_INSTALL_REFUSED, *_ERRORS),
    params=(_SLUG,),
)
async def install_page(slug: str) -> ResponseReturnValue:
    """The one-click install form: who is signed in, the app and its developer, a business to
    install in (those where the user may install apps, or where the app is installed) and the
    app's scopes in plain words, each one a checkbox."""
    user_id = await current_user_id()
    if user_id is None:
        return login_redirect()
    async with unit_of_work() as tx:
        try:
            listed = await apps.live_listing(tx, slug)
        except apps.ListingNotFound:
            return await problem_page(f"Nothing is listed at {slug}", 404, title=PAGE_TITLE)
        app = await apps.get_app(tx, listed.app_id)
        businesses = await access.install_businesses(tx, app, user_id)
        installed = {
            business.id
            for business in businesses
            if await apps.active_installation(tx, app.id, business.id) is not None
        }
        user = await books.get_user(tx, user_id)
        developer = await developer_name(tx, app)
    return await form_page(
        "marketplace_install.html",
        listed=listed,
        app=app,
        user=user,
        developer=developer,
        businesses=businesses,
        installed=installed,
        scopes=described_scopes(app.scopes),
    )


class InstallForm(TypedDict):
    """The install form: the business and the scopes (``scope`` repeated, one per checkbox)."""

    csrf_token: CsrfToken
    business_id: Annotated[str, BUSINESS.document]
    scope: list[str]


@blueprint.post("/marketplace/<slug>/install")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Installed: to the app's embedded page in the business (or back to the install form,"
        " saying why not)",
        SET_COOKIE.optional(),
    ),
    page(400, "The form expired (CSRF check failed)"),
    page(404, "Nothing is listed there"),
    raises=(
        *_INSTALL_REFUSED,
        access.BusinessNotOffered,
        RequestEntityTooLarge,
        storage.Conflict,
        *_ERRORS,
    ),
    bodies=(Body(FORM, InstallForm),),
    params=(_SLUG, CSRF_COOKIE_PARAM),
)
async def install(slug: str) -> ResponseReturnValue:
    """Install the app in the chosen business with the chosen scopes (a managed install; it
    widens an installation that is already there), then open the app's page in that business,
    where the app's first tokens come from token exchange."""
    user_id = await current_user_id()
    if user_id is None:
        return login_redirect()
    form = await request.form
    back = f"/marketplace/{slug}/install"
    if not csrf_valid(form.get("csrf_token")):
        return await problem_page(
            "The form expired: open the install page again", 400, title=PAGE_TITLE
        )
    business_id = form.get("business_id", "")
    scopes = form.getlist("scope")
    p = platform()
    try:
        async with unit_of_work() as tx:
            listed = await apps.live_listing(tx, slug)
            app = await apps.get_app(tx, listed.app_id)
            offered = await access.install_businesses(tx, app, user_id)
            business = next((b for b in offered if b.id == business_id), None)
            if business is None:
                raise access.BusinessNotOffered()
            if not scopes:
                raise InvalidInput(["choose at least one of the scopes"])
            await apps.install(
                tx,
                now=p.now(),
                app_id=app.id,
                business_id=business.id,
                user_id=user_id,
                scopes=scopes,
            )
    except apps.ListingNotFound:
        return await problem_page(f"Nothing is listed at {slug}", 404, title=PAGE_TITLE)
    except (
        InvalidInput,
        access.BusinessNotOffered,
        apps.InstallNotPermitted,
        apps.ScopesNotRegistered,
        apps.AppNotActive,
    ) as refused:
        text = (
            "; ".join(refused.messages) if isinstance(refused, InvalidInput) else refused.rendered
        )
        return with_notice(back, f"Not installed: {text}")
    if app.app_url:
        return redirect(f"/apps/{app.id}?{urlencode({'business_id': business.id})}", 303)
    return with_notice(f"/marketplace/{slug}", f"Installed in {business.name}")


_IMAGE_HEADERS = (Header("Cache-Control", "Kept for a day: an asset never changes"),)


@blueprint.get("/marketplace/assets/<asset_id>")
@operation(
    Reply(200, "The image", "image/png", None, _IMAGE_HEADERS),
    Reply(200, "The image", "image/jpeg", None, _IMAGE_HEADERS),
    page(404, "No live listing shows that image"),
    raises=_ERRORS,
    params=(Param("asset_id", "path", "The asset's id", ASSET.schema),),
)
async def asset(asset_id: str) -> ResponseReturnValue:
    """An icon or screenshot that a live listing shows. An asset's bytes never change (a new
    image is a new asset), so it may be kept for a day."""
    try:
        async with unit_of_work() as tx:
            content_type, data = await apps.listed_asset(tx, asset_id)
    except apps.AssetNotFound:
        return await problem_page("No live listing shows that image", 404, title=PAGE_TITLE)
    response = Response(data, content_type=content_type)
    response.headers["Cache-Control"] = "public, max-age=86400, immutable"
    return response
