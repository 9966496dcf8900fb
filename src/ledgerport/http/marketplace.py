"""The public marketplace on the application host: the catalogue (search by name, filter by
category), a listing's page with its ratings, and the rating form for business users
(contract.md: App platform surfaces, Application host pages). Listings show their live
revision only."""

from __future__ import annotations

from urllib.parse import urlencode

from quart import Blueprint, redirect, request
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme

from ledgerport import apps, books, storage
from ledgerport.errors import InvalidInput

from ._browser import csrf_valid, current_user_id, form_page
from ._context import platform, unit_of_work
from ._openapi import (
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    Param,
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


@blueprint.post("/marketplace/<slug>/rating")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    redirect_reply("Back to the listing, saying what was done or why not"),
    page(404, "Nothing is listed there"),
    raises=_ERRORS,
    params=(_SLUG,),
)
async def rate(slug: str) -> ResponseReturnValue:
    """Rate the app 1 to 5 stars with an optional review; rating again edits the rating."""
    user_id = await current_user_id()
    if user_id is None:
        return login_redirect()
    form = await request.form
    back = f"/marketplace/{slug}"
    if not csrf_valid(form.get("csrf_token")):
        return redirect(f"{back}?{urlencode({'notice': 'The form expired: try again'})}", 303)
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
        return redirect(f"{back}?{urlencode({'notice': f'Not rated: {text}'})}", 303)
    return redirect(f"{back}?{urlencode({'notice': 'Thank you: your rating is saved'})}", 303)
