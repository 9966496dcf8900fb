"""Ratings of apps by business users, and the live listings the marketplace shows
(contract.md: App platform surfaces).

A user rates an app 1 to 5 stars with an optional review (at most 2,000 characters), once per
(user, app): rating again edits theirs. Only a user who is an active member of a business where
the app is ACTIVE-installed may rate it (RatingNotAllowed). A listing shows the average and the
count of its app's ratings.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledgerport.errors import InvalidInput
from ledgerport.storage import Row, Transaction

from ._errors import ListingNotFound, RatingNotAllowed
from ._listings import Revision

REVIEW_MAX_LENGTH = 2000
REVIEWS_SHOWN = 50
"""How many ratings a listing's page shows, the most recently written first."""


@dataclass(frozen=True)
class RatingSummary:
    average: float | None
    count: int


@dataclass(frozen=True)
class Rating:
    stars: int
    review: str | None


@dataclass(frozen=True)
class Review:
    """A rating as a listing shows it: the stars, the words, who wrote it (their name, if they
    gave one) and when."""

    stars: int
    review: str | None
    author_name: str | None
    updated_at: float


@dataclass(frozen=True)
class LiveListing:
    app_id: str
    slug: str
    live: Revision
    ratings: RatingSummary


async def rate_app(
    tx: Transaction, *, now: float, app_id: str, user_id: str, stars: int, review: str | None
) -> Rating:
    """Record (or edit) the user's rating of the app."""
    problems: list[str] = []
    if not 1 <= stars <= 5:
        problems.append("stars must be a whole number from 1 to 5")
    text = (review or "").strip() or None
    if text is not None and len(text) > REVIEW_MAX_LENGTH:
        problems.append(f"review must be at most {REVIEW_MAX_LENGTH} characters")
    if problems:
        raise InvalidInput(problems)
    installed = await tx.fetchval(
        "SELECT COUNT(*) FROM installations i JOIN memberships m"
        " ON m.business_id = i.business_id AND m.user_id = $2 AND m.active"
        " WHERE i.app_id = $1 AND i.state = 'ACTIVE'",
        app_id,
        user_id,
    )
    if not int(installed):
        raise RatingNotAllowed()
    await tx.execute(
        "INSERT INTO app_ratings (app_id, user_id, stars, review, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (app_id, user_id)"
        " DO UPDATE SET stars = excluded.stars, review = excluded.review,"
        " updated_at = excluded.updated_at",
        app_id,
        user_id,
        stars,
        text,
        now,
    )
    return Rating(stars, text)


async def rating_summary(tx: Transaction, app_id: str) -> RatingSummary:
    row = await tx.fetchrow(
        "SELECT AVG(stars) AS average, COUNT(*) AS n FROM app_ratings WHERE app_id = $1", app_id
    )
    assert row is not None
    count = int(row["n"])
    return RatingSummary(round(float(row["average"]), 2) if count else None, count)


async def user_rating(tx: Transaction, app_id: str, user_id: str) -> Rating | None:
    row = await tx.fetchrow(
        "SELECT stars, review FROM app_ratings WHERE app_id = $1 AND user_id = $2",
        app_id,
        user_id,
    )
    return None if row is None else Rating(int(row["stars"]), row["review"])


async def reviews(tx: Transaction, app_id: str, limit: int = REVIEWS_SHOWN) -> list[Review]:
    """The app's ratings, the most recently written first, at most ``limit``."""
    rows = await tx.fetch(
        "SELECT r.stars, r.review, r.updated_at, u.name FROM app_ratings r"
        " JOIN users u ON u.id = r.user_id WHERE r.app_id = $1"
        " ORDER BY r.updated_at DESC, r.user_id LIMIT $2",
        app_id,
        limit,
    )
    return [
        Review(int(row["stars"]), row["review"], row["name"], float(row["updated_at"]))
        for row in rows
    ]


_LIVE = (
    "SELECT r.*, l.app_id AS listed_app_id, l.slug AS listed_slug,"
    " s.average AS rating_average, COALESCE(s.n, 0) AS rating_count"
    " FROM listings l JOIN listing_revisions r ON r.id = l.live_revision_id"
    " JOIN apps a ON a.id = l.app_id"
    " LEFT JOIN (SELECT app_id, AVG(stars) AS average, COUNT(*) AS n FROM app_ratings"
    " GROUP BY app_id) s ON s.app_id = l.app_id"
    " WHERE a.status = 'ACTIVE'"
)
"""The live listings of ACTIVE apps with their ratings, in one statement (filters follow)."""


def _live(row: Row) -> LiveListing:
    count = int(row["rating_count"])
    average = round(float(row["rating_average"]), 2) if count else None
    return LiveListing(
        row["listed_app_id"],
        row["listed_slug"],
        Revision.from_row(row),
        RatingSummary(average, count),
    )


async def live_listings(
    tx: Transaction, *, search: str = "", category: str = ""
) -> list[LiveListing]:
    """The listings with a live revision, by name; ``search`` matches the name (any case),
    ``category`` the category."""
    rows = await tx.fetch(
        f"{_LIVE} AND ($1 = '' OR LOWER(r.name) LIKE '%' || LOWER($1) || '%')"
        " AND ($2 = '' OR r.category = $2) ORDER BY LOWER(r.name), l.id",
        search,
        category,
    )
    return [_live(row) for row in rows]


async def live_listing(tx: Transaction, slug: str) -> LiveListing:
    """The live listing at ``slug``; ListingNotFound when none is live there."""
    row = await tx.fetchrow(f"{_LIVE} AND l.slug = $1", slug)
    if row is None:
        raise ListingNotFound(slug)
    return _live(row)
