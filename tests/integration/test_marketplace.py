"""The public marketplace: the catalogue with search and category, a listing's page with its
ratings, and rating by business users (once each, editable; only where the app is installed)."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import urlencode

import trio

from .data_api import Api, owner_api
from .form_problems import beside, summary
from .oauth_helpers import REDIRECT_URI, login, make_world
from .test_listings import body
from .webhook_world import Console, console_for

TIMEOUT = 30


async def _listed(
    client: Any, admin_headers: dict[str, str], slug: str, name: str, category: str
) -> tuple[Api, Console]:
    """An app installed in its developer's business, listed live at ``slug``."""
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    await go_live(client, admin_headers, console, body(slug, name=name, category=category))
    return api, console


async def go_live(
    client: Any, admin_headers: dict[str, str], console: Console, content: dict[str, Any]
) -> None:
    """The listing's first save, submitted and approved: ``content`` is live."""
    listing = await console.ok("PUT", "/listing", content, 201)
    await console.ok("POST", "/listing/submit")
    for action in ("start", "approve"):
        response = await client.post(
            f"/admin/listing-revisions/{listing['draft']['id']}/review",
            json={"action": action},
            headers=admin_headers,
        )
        assert response.status_code == 200


async def _text(client: Any, path: str, status: int = 200) -> str:
    response = await client.get(path)
    text = await response.get_data(as_text=True)
    assert response.status_code == status, text
    return text


async def _rated(client: Any, slug: str, stars: str, review: str = "") -> str:
    """The listing after rating the app: what the rating form's answer left on it."""
    page = await _text(client, f"/marketplace/{slug}")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert csrf, page
    response = await client.post(
        f"/marketplace/{slug}/rating",
        form={"csrf_token": csrf[1], "stars": stars, "review": review},
    )
    assert response.status_code == 303
    assert response.headers["Location"] == f"/marketplace/{slug}"
    return await _text(client, f"/marketplace/{slug}")


async def _rate(client: Any, slug: str, stars: str, review: str = "") -> str:
    page = await _rated(client, slug, stars, review)
    shown = re.search(r'<p class="notice notice-\w+" role="(?:status|alert)">(.*?)</p>', page)
    if shown is not None:
        return html.unescape(shown[1])
    problems = summary(page)
    assert problems, "the listing shows no notice"
    return "\n".join(problems)


async def test_the_catalogue_searches_names_and_filters_categories(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        await _listed(client, admin_headers, "books-sync", "Books Sync", "invoicing")
        await _listed(client, admin_headers, "pay-tracker", "Pay Tracker", "payments")
        draft_only = await console_for(
            client, admin_headers, await owner_api(client, admin_headers)
        )
        await draft_only.ok("PUT", "/listing", body("not-yet", name="Not Yet"), 201)
        everything = await _text(client, "/marketplace")
        searched = await _text(client, "/marketplace?q=SYNC")
        payments = await _text(client, "/marketplace?category=payments")
        client.cookie_jar.clear()  # signed out
        listing = await _text(client, "/marketplace/books-sync")
        unlisted = await _text(client, "/marketplace/not-yet", 404)
    assert "Books Sync" in everything
    assert "Pay Tracker" in everything
    assert "Not Yet" not in everything  # a draft is not listed
    assert "Books Sync" in searched
    assert "Pay Tracker" not in searched
    assert "Pay Tracker" in payments
    assert "Books Sync" not in payments
    assert "Not rated yet" in listing
    assert 'href="/login?next=/marketplace/books-sync"' in listing
    assert "Nothing is listed here" in unlisted
    assert 'href="/marketplace">Browse the marketplace</a>' in unlisted


async def test_a_member_where_the_app_is_installed_rates_it_once_and_may_change_it(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api, _ = await _listed(client, admin_headers, "books-sync", "Books Sync", "invoicing")
        await login(client, api.world)
        first = await _rate(client, "books-sync", "4", "Good")
        again = await _rate(client, "books-sync", "2", "Worse lately")
        page = await _text(client, "/marketplace/books-sync")
        refused = await _rate(client, "books-sync", "6")
        catalogue = await _text(client, "/marketplace")
    assert first == "Thank you: your rating is saved"
    assert again == first
    assert "Rated 2.0 of 5 from 1 rating" in page
    assert "(you gave 2)" in page
    assert "Worse lately" in page
    assert refused == "Stars must be a whole number from 1 to 5"
    assert 'aria-label="2 out of 5 stars"' in catalogue
    assert "2.0 (1)" in catalogue


async def test_a_refused_rating_says_each_problem_beside_its_field(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api, _ = await _listed(client, admin_headers, "books-sync", "Books Sync", "invoicing")
        await login(client, api.world)
        both = await _rated(client, "books-sync", "0", "x" * 2001)
        again = await _text(client, "/marketplace/books-sync")
    assert summary(both) == [
        "Stars must be a whole number from 1 to 5",
        "Your review must be at most 2000 characters",
    ]
    assert beside(both, "stars") == "Stars must be a whole number from 1 to 5"
    assert beside(both, "review") == "Your review must be at most 2000 characters"
    assert summary(again) == []  # said once: a reload shows none
    assert 'aria-invalid="true"' not in again


async def test_only_members_of_a_business_with_the_app_installed_rate_it(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        await _listed(client, admin_headers, "books-sync", "Books Sync", "invoicing")
        stranger = await make_world(client, admin_headers)
        await login(client, stranger)
        refused = await _rate(client, "books-sync", "5")
        page = await _text(client, "/marketplace/books-sync")
    assert refused == "Only a member of a business where the app is installed may rate it"
    assert beside(page, "stars") is None  # said at the top: it is no field's
    assert "Not rated yet" in page


async def test_the_consent_page_links_to_a_live_listing_and_the_console_shows_it(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api, console = await _listed(client, admin_headers, "books-sync", "Books Sync", "other")
        await console.ok("PUT", "/listing", body("books-sync", tagline="Next version"))
        world = api.world
        await login(client, world)
        query = urlencode(
            {
                "response_type": "code",
                "client_id": world.client_id,
                "redirect_uri": REDIRECT_URI,
                "scope": "invoices:read",
                "state": "s",
            }
        )
        consent = await _text(client, f"/oauth/authorize?{query}")
        page = await _text(client, f"/console/apps/{world.app_id}/listing")
    assert '<a href="/marketplace/books-sync">See it in the marketplace</a>' in consent
    assert "Live: revision 1, approved" in page
    assert "Open revision: revision 2, draft" in page
    assert "Next version" in page
    assert 'href="/marketplace/books-sync"' in page
