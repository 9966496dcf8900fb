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

import re
from typing import Annotated
from urllib.parse import urlencode

from pydantic import Field, WithJsonSchema
from quart import Blueprint, Response
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme
from werkzeug.exceptions import RequestEntityTooLarge

from ledgerport import access, apps, books, catalog, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._ids import ASSET, BUSINESS
from .._openapi import (
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
from ._consent import developer_name
from ._csrf import CSRF_COOKIE_PARAM, back_with_notice, form_guard
from ._design import described_scopes
from ._form_models import PageForm, Repeated, query_params, read_form, read_query
from ._frame import Way, current_user, login_redirect, returns_to
from ._install_offer import ANYONE, install_offer
from ._marketplace_forms import install_problems, rating_problems
from ._notices import form_page, this_page_notice, with_notice
from ._page_queries import CatalogueQuery, InstallQuery

blueprint = Blueprint("marketplace", __name__)

PAGE_TITLE = "Marketplace"
WAYS = (Way("Browse the marketplace", "/marketplace"),)
"""Where a marketplace page's problem offers to go on."""
_SLUG = Param("slug", "path", "The listing's slug")
_ERRORS = (storage.BadValue, storage.StorageUnavailable)


def _catalogue_link(category: str, search: str) -> str:
    query = urlencode({k: v for k, v in (("category", category), ("q", search)) if v})
    return f"/marketplace?{query}" if query else "/marketplace"


@blueprint.get("/marketplace")
@operation(
    page(200, "The catalogue of listed apps"),
    raises=(InvalidInput, *_ERRORS),
    params=query_params(CatalogueQuery),
)
async def catalogue() -> ResponseReturnValue:
    """The apps listed in the marketplace, by name, as cards: ``q`` searches their names,
    ``category`` keeps one category (the chips are links that set it)."""
    await current_user()
    query = read_query(CatalogueQuery)
    search, category = query.search or "", query.category or ""
    async with unit_of_work() as tx:
        listed = await apps.live_listings(tx, search=search, category=category)
    chips = [
        (label, _catalogue_link(value, search), value == category)
        for label, value in (
            ("All", ""),
            *((value.capitalize(), value) for value in apps.LISTING_CATEGORIES),
        )
    ]
    return await form_page(
        "marketplace.html", listings=listed, search=search, category=category, chips=chips
    )


@blueprint.get("/marketplace/<slug>")
@operation(
    page(200, "The listing"),
    page(404, "Nothing is listed there"),
    raises=(apps.ListingNotFound, *_ERRORS),
    params=(_SLUG,),
)
async def listing_page(slug: str) -> ResponseReturnValue:
    """A listing: its live revision (the description in Markdown), its ratings and reviews, the
    developer, what the app may access, the businesses of a signed-in member where it is
    installed, and for them the form to rate it. The Install button shows only to someone who
    may install the app somewhere (or who is not signed in yet); anyone else reads why not."""
    user = await current_user()
    async with unit_of_work() as tx:
        listed = await apps.live_listing(tx, slug)
        app = await apps.get_app(tx, listed.app_id)
        developer = await developer_name(tx, app)
        reviews = await apps.reviews(tx, app.id)
        mine = await apps.user_rating(tx, app.id, user.id) if user else None
        standings = await access.standings(tx, app, user.id) if user else []
        roles = (
            {b.id: role for b, role in await books.businesses_of_user(tx, user.id)} if user else {}
        )
    name = listed.live.content.name
    return await form_page(
        "marketplace_listing.html",
        listed=listed,
        app=app,
        developer=developer,
        reviews=reviews,
        mine=mine,
        installed_in=[s.business for s in standings if s.installed],
        offer=install_offer(app, name, standings, roles) if user else ANYONE,
        scopes=described_scopes(app.scopes),
        problems=rating_problems(this_page_notice()),
    )


class RatingForm(PageForm):
    """The rating form: the stars and an optional review (trimmed; empty is none)."""

    stated_required = ("stars",)
    stars: Annotated[str, WithJsonSchema(one_of(["1", "2", "3", "4", "5"]))] = ""
    review: Annotated[
        str, WithJsonSchema({"type": "string", "maxLength": apps.REVIEW_MAX_LENGTH})
    ] = ""


async def _signed_in_first(**_: str) -> Response | None:
    """Who is not signed in goes to the sign-in page first, whatever the form holds."""
    return login_redirect() if await current_user() is None else None


@blueprint.post("/marketplace/<slug>/rating")
@form_guard(
    back_with_notice(lambda slug: f"/marketplace/{slug}"),
    token_required=False,
    before=_signed_in_first,
)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Back to the listing, saying what was done or why not", SET_COOKIE.optional()),
    page(404, "Nothing is listed there"),
    raises=(apps.ListingNotFound, *_ERRORS),
    bodies=(Body(FORM, RatingForm),),
    params=(_SLUG, CSRF_COOKIE_PARAM),
)
async def rate(slug: str) -> ResponseReturnValue:
    """Rate the app 1 to 5 stars with an optional review; rating again edits the rating."""
    user = await current_user()
    if user is None:
        return login_redirect()
    form = await read_form(RatingForm)
    back = f"/marketplace/{slug}"
    try:
        stars = int(form.stars)
    except ValueError:
        stars = 0
    returns_to(back)
    async with unit_of_work() as tx:
        listed = await apps.live_listing(tx, slug)
        await apps.rate_app(
            tx,
            now=platform().now(),
            app_id=listed.app_id,
            user_id=user.id,
            stars=stars,
            review=form.review,
        )
    return with_notice(back, "rating-saved")


_INSTALL_REFUSED = (
    apps.AppNotReviewed,
    access.NoBusinessToConnect,
    access.NoBusinessToInstallIn,
)
"""Why the install page has no business to offer the signed-in user."""
_BUSINESS_ID = re.compile(BUSINESS.pattern)
_CHOSEN = "chosen"
"""The install form's query flag: the scopes in the query are what the person ticked."""


@blueprint.get("/marketplace/<slug>/install")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The install form: the businesses the user may install in, the app's scopes"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "Nothing is listed there"),
    raises=(apps.ListingNotFound, *_INSTALL_REFUSED, InvalidInput, *_ERRORS),
    params=(_SLUG, *query_params(InstallQuery)),
)
async def install_page(slug: str) -> ResponseReturnValue:
    """The one-click install form: who is signed in, the app and its developer, a business to
    install in (those where the user may install apps, or where the app is installed; one
    where it can still be installed preselected) and the app's scopes in plain words, each one
    a checkbox, and what happens next. After a refusal the form comes back as it was sent."""
    user = await current_user()
    if user is None:
        return login_redirect()
    query = read_query(InstallQuery)
    async with unit_of_work() as tx:
        listed = await apps.live_listing(tx, slug)
        app = await apps.get_app(tx, listed.app_id)
        offers = await access.install_businesses(tx, app, user.id)
        developer = await developer_name(tx, app)
    asked = query.business_id
    chosen = (
        asked
        if any(o.business.id == asked for o in offers)
        else access.preselected(offers, app.scopes, through="marketplace")
    )
    ticked = set(query.scope) if query.chosen == "1" else set(app.scopes)
    return await form_page(
        "marketplace_install.html",
        listed=listed,
        app=app,
        user=user,
        developer=developer,
        offers=offers,
        chosen=chosen,
        ticked=ticked,
        scopes=described_scopes(app.scopes),
        problems=install_problems(this_page_notice()),
    )


class InstallForm(PageForm):
    """The install form: the business and the scopes (``scope`` repeated, one per checkbox;
    none ticked, or no business, and the form comes back saying why)."""

    business_id: Annotated[str, BUSINESS.document] = ""
    scope: Repeated = Field(default_factory=list)


def _install_choices(form: InstallForm) -> str:
    """The install form's choices, as the query the form is shown again with (a business id
    of no id's form, which no offer has, left out: the form preselects one)."""
    business = (
        [("business_id", form.business_id)] if _BUSINESS_ID.fullmatch(form.business_id) else []
    )
    chosen = [*business, *(("scope", s) for s in form.scope if s in catalog.SCOPES)]
    return urlencode([*chosen, (_CHOSEN, "1")])


async def _back_to_install(slug: str) -> Response:
    """Back to the install form with its choices, saying the form expired."""
    form = await read_form(InstallForm)
    return with_notice(f"/marketplace/{slug}/install", "form-expired", query=_install_choices(form))


@blueprint.post("/marketplace/<slug>/install")
@form_guard(
    _back_to_install,
    before=_signed_in_first,
)
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply(
        "Installed: to the app's embedded page in the business (or its listing, for an app"
        " without a page), saying where it is installed; or back to the install form as it was"
        " sent, saying why not",
        SET_COOKIE.optional(),
    ),
    page(404, "Nothing is listed there"),
    raises=(apps.ListingNotFound, InvalidInput, RequestEntityTooLarge, *_ERRORS),
    bodies=(Body(FORM, InstallForm),),
    params=(_SLUG, CSRF_COOKIE_PARAM),
)
async def install(slug: str) -> ResponseReturnValue:
    """Install the app in the chosen business with the chosen scopes (a managed install; it
    widens an installation that is already there), then open the app's page in that business,
    where the app's first tokens come from token exchange."""
    user = await current_user()
    if user is None:
        return login_redirect()
    form = await read_form(InstallForm)
    business_id = form.business_id
    scopes = form.scope
    back = f"/marketplace/{slug}/install"
    sent = _install_choices(form)
    returns_to(back, sent)
    async with unit_of_work() as tx:
        listed = await apps.live_listing(tx, slug)
        app = await apps.get_app(tx, listed.app_id)
        _, business = await access.install_from_marketplace(
            tx,
            now=platform().now(),
            app=app,
            business_id=business_id,
            user_id=user.id,
            scopes=scopes,
        )
    if app.app_url:
        return with_notice(
            f"/apps/{app.id}",
            "installed",
            app.name,
            business.name,
            query=urlencode({"business_id": business.id}),
        )
    return with_notice(f"/marketplace/{slug}", "installed", app.name, business.name)


_IMAGE_HEADERS = (Header("Cache-Control", "Kept for a day: an asset never changes"),)


@blueprint.get("/marketplace/assets/<asset_id>")
@operation(
    Reply(200, "The image", "image/png", None, _IMAGE_HEADERS),
    Reply(200, "The image", "image/jpeg", None, _IMAGE_HEADERS),
    page(404, "No live listing shows that image"),
    raises=(apps.AssetNotFound, *_ERRORS),
    params=(Param("asset_id", "path", "The asset's id", ASSET.schema),),
)
async def asset(asset_id: str) -> ResponseReturnValue:
    """An icon or screenshot that a live listing shows. An asset's bytes never change (a new
    image is a new asset), so it may be kept for a day."""
    async with unit_of_work() as tx:
        content_type, data = await apps.listed_asset(tx, asset_id)
    response = Response(data, content_type=content_type)
    response.headers["Cache-Control"] = "public, max-age=86400, immutable"
    return response
