"""An app's marketplace listing and its revisions (contract.md: App platform surfaces).

One listing per app, with a slug unique across listings (SLUG_TAKEN). Its content lives in
numbered revisions. The latest revision that is not approved is the open one: the developer's
saves edit it (a revision that was rejected or had changes requested goes back to draft), and a
save after the last approval opens a new draft. A submitted or in-review revision changes no
more until it is reviewed. Operators review: submitted -> in_review -> approved (it goes live),
rejected or changes_requested (REVIEW_TRANSITIONS).

The listing's first save creates it (201). A save that arrived before the listing was written
(``arrived``, the server's own clock when the request came in, against ``first_saved_wall``)
raced that first save and is LISTING_EXISTS (409): of any number of first saves at once,
exactly one creates the listing, however long the others waited for the database.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.storage import Conflict, Row, Transaction

from ._apps import App
from ._assets import known_assets
from ._errors import (
    ListingExists,
    ListingNotFound,
    RevisionInWrongState,
    RevisionNotFound,
    SlugTaken,
)

RevisionState = Literal[
    "draft", "submitted", "in_review", "changes_requested", "rejected", "approved"
]
REVISION_STATES: tuple[RevisionState, ...] = (
    "draft",
    "submitted",
    "in_review",
    "changes_requested",
    "rejected",
    "approved",
)
ReviewAction = Literal["start", "approve", "reject", "request_changes"]
REVIEW_ACTIONS: tuple[ReviewAction, ...] = ("start", "approve", "reject", "request_changes")
REVIEW_TRANSITIONS: Mapping[tuple[RevisionState, ReviewAction], RevisionState] = {
    ("submitted", "start"): "in_review",
    ("in_review", "approve"): "approved",
    ("in_review", "reject"): "rejected",
    ("in_review", "request_changes"): "changes_requested",
}
"""The operator's review: (state, action) -> the state after; anything else is refused."""
EDITABLE_REVISION_STATES: frozenset[RevisionState] = frozenset(
    {"draft", "changes_requested", "rejected"}
)
"""States of the open revision a save edits (it becomes a draft again)."""
LISTING_CATEGORIES: tuple[str, ...] = (
    "accounting",
    "invoicing",
    "payments",
    "reporting",
    "payroll",
    "inventory",
    "sales",
    "productivity",
    "other",
)
SLUG_PATTERN = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
SLUG_LENGTH = (3, 60)
TEXT_LIMITS = {"name": 60, "tagline": 120, "description": 5000}
SCREENSHOTS_MAX = 8


@dataclass(frozen=True)
class ListingContent:
    slug: str
    name: str
    tagline: str
    description: str
    category: str
    icon_asset_id: str | None = None
    screenshot_asset_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Revision:
    id: str
    listing_id: str
    number: int
    state: RevisionState
    content: ListingContent
    note: str | None
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: Row) -> Revision:
        return cls(
            id=row["id"],
            listing_id=row["listing_id"],
            number=int(row["number"]),
            state=row["state"],
            content=ListingContent(
                slug=row["slug"],
                name=row["name"],
                tagline=row["tagline"],
                description=row["description"],
                category=row["category"],
                icon_asset_id=row["icon_asset_id"],
                screenshot_asset_ids=tuple(json.loads(row["screenshot_asset_ids"])),
            ),
            note=row["note"],
            created_at=float(row["created_at"]),
            updated_at=float(row["updated_at"]),
        )


@dataclass(frozen=True)
class Listing:
    id: str
    app_id: str
    slug: str
    live: Revision | None
    open: Revision | None
    """The latest revision when it is not approved."""


def _problems(content: ListingContent) -> list[str]:
    problems: list[str] = []
    low, high = SLUG_LENGTH
    if not (low <= len(content.slug) <= high and SLUG_PATTERN.match(content.slug)):
        problems.append(
            f"slug must be {low} to {high} lower-case letters and digits, in words joined by -"
        )
    for field, limit in TEXT_LIMITS.items():
        value = getattr(content, field)
        if not value.strip() or len(value) > limit:
            problems.append(f"{field} must be 1 to {limit} characters")
    if content.category not in LISTING_CATEGORIES:
        problems.append(f"category must be one of: {', '.join(LISTING_CATEGORIES)}")
    if len(content.screenshot_asset_ids) > SCREENSHOTS_MAX:
        problems.append(f"screenshotAssetIds must name at most {SCREENSHOTS_MAX} assets")
    if len(set(content.screenshot_asset_ids)) != len(content.screenshot_asset_ids):
        problems.append("screenshotAssetIds must not repeat an asset")
    return problems


async def find_listing(tx: Transaction, app_id: str) -> Listing | None:
    row = await tx.fetchrow("SELECT * FROM listings WHERE app_id = $1", app_id)
    if row is None:
        return None
    live = None
    if row["live_revision_id"] is not None:
        live_row = await tx.fetchrow(
            "SELECT * FROM listing_revisions WHERE id = $1", row["live_revision_id"]
        )
        live = Revision.from_row(live_row) if live_row is not None else None
    latest = await tx.fetchrow(
        "SELECT * FROM listing_revisions WHERE listing_id = $1 ORDER BY number DESC LIMIT 1",
        row["id"],
    )
    open_revision = (
        Revision.from_row(latest) if latest is not None and latest["state"] != "approved" else None
    )
    return Listing(row["id"], row["app_id"], row["slug"], live, open_revision)


async def listing_revisions(tx: Transaction, listing_id: str) -> list[Revision]:
    """Every revision of the listing, the newest first."""
    rows = await tx.fetch(
        "SELECT * FROM listing_revisions WHERE listing_id = $1 ORDER BY number DESC", listing_id
    )
    return [Revision.from_row(row) for row in rows]


async def _claim_slug(tx: Transaction, listing_id: str, slug: str) -> None:
    taken = await tx.fetchval(
        "SELECT id FROM listings WHERE slug = $1 AND id <> $2", slug, listing_id
    )
    if taken is not None:
        raise SlugTaken(slug)


async def save_listing(
    tx: Transaction, *, now: float, arrived: float, app: App, content: ListingContent
) -> tuple[Listing, bool]:
    """Save ``content`` into the listing's open revision (see the module docstring); answers
    the listing and whether this save created it."""
    problems = _problems(content)
    named = [a for a in (content.icon_asset_id, *content.screenshot_asset_ids) if a is not None]
    known = await known_assets(tx, app.id, named)
    problems += [
        f"asset {asset_id} is not an asset of the app"
        for asset_id in named
        if asset_id not in known
    ]
    if problems:
        raise InvalidInput(problems)
    await tx.serialize(f"listing:{app.id}")
    existing = await tx.fetchrow(f"SELECT * FROM listings WHERE app_id = $1{tx.row_lock}", app.id)
    created = False
    if existing is None:
        listing_id = new_id("lst")
        taken = await tx.fetchval("SELECT id FROM listings WHERE slug = $1", content.slug)
        if taken is not None:
            raise SlugTaken(content.slug)
        try:
            await tx.execute(
                "INSERT INTO listings (id, app_id, slug, live_revision_id, first_saved_wall,"
                " created_at, updated_at) VALUES ($1, $2, $3, NULL, $4, $5, $5)",
                listing_id,
                app.id,
                content.slug,
                time.time(),
                now,
            )
        except Conflict as exc:
            # Another save took the slug or created this app's listing meanwhile.
            if "slug" in str(exc):
                raise SlugTaken(content.slug) from exc
            raise ListingExists() from exc
        created = True
    elif arrived < float(existing["first_saved_wall"]):
        raise ListingExists()
    else:
        listing_id = existing["id"]
        await _claim_slug(tx, listing_id, content.slug)
        try:
            await tx.execute(
                "UPDATE listings SET slug = $1, updated_at = $2 WHERE id = $3",
                content.slug,
                now,
                listing_id,
            )
        except Conflict as exc:  # another listing took the slug meanwhile
            raise SlugTaken(content.slug) from exc
    latest = await tx.fetchrow(
        "SELECT * FROM listing_revisions WHERE listing_id = $1 ORDER BY number DESC LIMIT 1",
        listing_id,
    )
    values = (
        content.slug,
        content.name,
        content.tagline,
        content.description,
        content.category,
        content.icon_asset_id,
        json.dumps(list(content.screenshot_asset_ids)),
        now,
    )
    if latest is not None and latest["state"] in EDITABLE_REVISION_STATES:
        await tx.execute(
            "UPDATE listing_revisions SET state = 'draft', slug = $1, name = $2, tagline = $3,"
            " description = $4, category = $5, icon_asset_id = $6, screenshot_asset_ids = $7,"
            " updated_at = $8 WHERE id = $9",
            *values,
            latest["id"],
        )
    elif latest is not None and latest["state"] != "approved":
        raise InvalidInput(
            [
                f"revision {latest['number']} is {latest['state'].replace('_', ' ')}:"
                " it changes no more until it is reviewed"
            ]
        )
    else:
        number = 1 if latest is None else int(latest["number"]) + 1
        await tx.execute(
            "INSERT INTO listing_revisions (id, listing_id, number, state, slug, name, tagline,"
            " description, category, icon_asset_id, screenshot_asset_ids, note, created_at,"
            " updated_at) VALUES ($9, $10, $11, 'draft', $1, $2, $3, $4, $5, $6, $7, NULL, $8, $8)",
            *values,
            new_id("rev"),
            listing_id,
            number,
        )
    listing = await find_listing(tx, app.id)
    assert listing is not None
    return listing, created


async def submit_listing(tx: Transaction, *, now: float, app: App) -> Listing:
    """The open revision, a draft, goes to review (submitted)."""
    listing = await find_listing(tx, app.id)
    if listing is None:
        raise ListingNotFound(app.id)
    if listing.open is None or listing.open.state != "draft":
        state = "none" if listing.open is None else listing.open.state
        raise RevisionInWrongState(
            listing.open.id if listing.open else "-", state.replace("_", " "), "submitted"
        )
    await tx.execute(
        "UPDATE listing_revisions SET state = 'submitted', updated_at = $1 WHERE id = $2",
        now,
        listing.open.id,
    )
    updated = await find_listing(tx, app.id)
    assert updated is not None
    return updated


async def review_revision(
    tx: Transaction, *, now: float, revision_id: str, action: ReviewAction, note: str | None
) -> Revision:
    """An operator's review step (REVIEW_TRANSITIONS); approving puts the revision live."""
    row = await tx.fetchrow(
        f"SELECT * FROM listing_revisions WHERE id = $1{tx.row_lock}", revision_id
    )
    if row is None:
        raise RevisionNotFound(revision_id)
    after = REVIEW_TRANSITIONS.get((row["state"], action))
    if after is None:
        raise RevisionInWrongState(revision_id, row["state"].replace("_", " "), _done(action))
    await tx.execute(
        "UPDATE listing_revisions SET state = $1, note = $2, updated_at = $3 WHERE id = $4",
        after,
        note,
        now,
        revision_id,
    )
    if after == "approved":
        await tx.execute(
            "UPDATE listings SET live_revision_id = $1, updated_at = $2 WHERE id = $3",
            revision_id,
            now,
            row["listing_id"],
        )
    updated = await tx.fetchrow("SELECT * FROM listing_revisions WHERE id = $1", revision_id)
    assert updated is not None
    return Revision.from_row(updated)


def _done(action: ReviewAction) -> str:
    return {
        "start": "taken into review",
        "approve": "approved",
        "reject": "rejected",
        "request_changes": "sent back for changes",
    }[action]
