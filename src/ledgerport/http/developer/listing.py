"""An app's marketplace listing in the console: save the open revision, read it, submit it for
review (contract.md: App platform surfaces)."""

from __future__ import annotations

import time
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from pydantic.config import JsonDict
from quart import g
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._forms import NOT_BLANK
from .._ids import ASSET
from .._openapi import JSON_BODY_ERRORS, json_reply, one_of, operation
from ._blueprint import blueprint, developed_app, iso_time

State = Annotated[str, WithJsonSchema(one_of(apps.REVISION_STATES))]
Category = Annotated[str, WithJsonSchema(one_of(apps.LISTING_CATEGORIES))]


AssetId = Annotated[str, ASSET.field()]
_NOT_BLANK: JsonDict = {"minLength": 1, "pattern": NOT_BLANK}
"""1 character or more, not all white space."""


class ListingIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    # The books check these rules with their own messages; the document states them.
    slug: str = Field(
        max_length=60,
        json_schema_extra={"minLength": 3, "pattern": "^[a-z0-9]+(?:-[a-z0-9]+)*$"},
        description="The listing's address in the marketplace: 3 to 60 lower-case letters and"
        " digits, in words joined by -; unique among listings (SLUG_TAKEN)",
    )
    name: str = Field(max_length=60, json_schema_extra=_NOT_BLANK)
    tagline: str = Field(max_length=120, json_schema_extra=_NOT_BLANK)
    description: str = Field(max_length=5000, json_schema_extra=_NOT_BLANK)
    category: Category
    iconAssetId: str | None = ASSET.field(default=None)
    screenshotAssetIds: list[AssetId] = Field(
        default_factory=list,
        json_schema_extra={"maxItems": 8, "uniqueItems": True},
        description="At most 8 screenshots, each once",
    )


@with_config(ConfigDict(extra="forbid"))
class RevisionOut(TypedDict):
    id: str
    number: int
    state: State
    slug: str
    name: str
    tagline: str
    description: str
    category: Category
    iconAssetId: str | None
    screenshotAssetIds: list[str]
    note: str | None
    createdAt: str
    updatedAt: str


@with_config(ConfigDict(extra="forbid"))
class ListingOut(TypedDict):
    """``live``: the approved revision the marketplace shows; ``draft``: the open revision (the
    latest one when it is not approved), whatever its state."""

    id: str
    slug: str
    live: RevisionOut | None
    draft: RevisionOut | None


def revision_out(revision: apps.Revision) -> RevisionOut:
    content = revision.content
    return {
        "id": revision.id,
        "number": revision.number,
        "state": revision.state,
        "slug": content.slug,
        "name": content.name,
        "tagline": content.tagline,
        "description": content.description,
        "category": content.category,
        "iconAssetId": content.icon_asset_id,
        "screenshotAssetIds": list(content.screenshot_asset_ids),
        "note": revision.note,
        "createdAt": iso_time(revision.created_at),
        "updatedAt": iso_time(revision.updated_at),
    }


def _listing(listing: apps.Listing) -> ListingOut:
    return {
        "id": listing.id,
        "slug": listing.slug,
        "live": revision_out(listing.live) if listing.live else None,
        "draft": revision_out(listing.open) if listing.open else None,
    }


@blueprint.put("/apps/<app_id>/listing")
@validate_request(ListingIn)
@operation(
    json_reply(200, ListingOut, "The listing, its open revision saved"),
    json_reply(201, ListingOut, "The listing, created by this first save"),
    raises=(
        *JSON_BODY_ERRORS,
        InvalidInput,
        apps.SlugTaken,
        apps.ListingExists,
        storage.BadValue,
    ),
)
async def save_listing(app_id: str, data: ListingIn) -> tuple[ListingOut, int]:
    """Save the listing's open revision (a new draft after an approval). The first save creates
    the listing (201); of first saves made at once, one creates it and the others are 409
    LISTING_EXISTS. A revision submitted or in review changes no more until reviewed (400)."""
    # When the request came in, before it waited for anything: the order in which saves came.
    arrived = float(g.get("arrived") or time.time())
    p = platform()
    content = apps.ListingContent(
        slug=data.slug,
        name=data.name,
        tagline=data.tagline,
        description=data.description,
        category=data.category,
        icon_asset_id=data.iconAssetId,
        screenshot_asset_ids=tuple(data.screenshotAssetIds),
    )
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        listing, created = await apps.save_listing(
            tx, now=p.now(), arrived=arrived, app=app, content=content
        )
    return _listing(listing), 201 if created else 200


@blueprint.get("/apps/<app_id>/listing")
@operation(
    json_reply(200, ListingOut, "The listing"),
    raises=(storage.BadValue, apps.ListingNotFound),
)
async def get_listing(app_id: str) -> ListingOut:
    """The listing: its live revision and its open one."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        listing = await apps.find_listing(tx, app_id)
    if listing is None:
        raise apps.ListingNotFound(app_id)
    return _listing(listing)


@blueprint.post("/apps/<app_id>/listing/submit")
@operation(
    json_reply(200, ListingOut, "The listing, its draft submitted for review"),
    raises=(storage.BadValue, apps.ListingNotFound, apps.RevisionInWrongState),
)
async def submit_listing(app_id: str) -> ListingOut:
    """Submit the draft revision for review."""
    p = platform()
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        listing = await apps.submit_listing(tx, now=p.now(), app=app)
    return _listing(listing)
