"""The pages' design in headless Chromium, flow by flow, at a phone's width (390) and a laptop's
(1280), with a screenshot of each page at each width: the consent page that tells what the
business already grants from what is new; the install form that keeps a person's unticked boxes
after a refusal; the device page that shows the code again; a listing with its reviews and its
Markdown description; the catalogue filtered by a category chip; the problem pages of an
unknown path and of a bad authorization request; the console's side navigation."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from ..e2e.served import Server
from .conftest import SIZES, Opened, Shots, open_page
from .operator import Operator, Person
from .partner_app import PartnerApp
from .test_browser_flows import LISTING, SCOPES, made_app, sign_in


@pytest.fixture
def sized(browser: Browser, server: Server) -> Iterator[dict[str, Opened]]:
    """A page at each width, each in a context of its own (signed in separately)."""
    opened = {size: open_page(browser, server, size) for size in SIZES}
    try:
        yield opened
    finally:
        for one in opened.values():
            one.close()


def _no_console_errors(opened: dict[str, Opened]) -> None:
    assert {size: one.errors for size, one in opened.items() if one.errors} == {}


def _authorize(client_id: str, partner: PartnerApp, scope: str, **extra: str) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": f"{partner.origin}/callback",
        "scope": scope,
        "state": "st",
        **extra,
    }
    return f"/oauth/authorize?{urlencode(query)}"


def test_the_consent_page_tells_what_is_granted_already_from_what_is_new(
    sized: dict[str, Opened], operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner)
    operator.install(app, business, owner, ["invoices:read"])
    url = _authorize(app.client_id, partner, "invoices:read customers:write")

    for size, opened in sized.items():
        page = opened.page
        page.goto(url)
        sign_in(page, shots, owner)
        expect(page.get_by_role("heading", level=1)).to_have_text(
            "Books Sync wants access to your books"
        )
        # The business first, then what is new, then what its installation grants already.
        expect(page.get_by_label("Business")).to_have_value(business)
        new = page.get_by_role("list", name="New access it asks for")
        expect(new.get_by_role("listitem")).to_have_count(1)
        expect(new).to_contain_text("Create and change your customers")
        expect(new).to_contain_text("Write access")
        granted = page.get_by_role("list", name="Already granted in Acme Trading")
        expect(granted.get_by_role("listitem")).to_have_count(1)
        expect(granted).to_contain_text("See your invoices")
        expect(page.get_by_text("you go back to")).to_contain_text(partner.origin)
        expect(page.get_by_role("button", name="Approve")).to_have_class(
            re.compile(r"\bbutton-primary\b")
        )
        expect(page.get_by_role("button", name="Cancel")).to_be_visible()
        shots.take(page, f"consent-{size}")

    page = sized["desktop"].page
    with page.expect_navigation(url=re.compile(re.escape(f"{partner.origin}/callback"))):
        page.get_by_role("button", name="Approve").click()
    assert "code=" in page.url
    _no_console_errors(sized)


def test_a_refused_install_comes_back_with_the_unticked_boxes_kept(
    sized: dict[str, Opened], operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    studio = operator.business("Sync Studio")
    developer = operator.person("Dev Eloper", studio)
    app = made_app(operator, partner, developer)
    operator.list_live(app, LISTING)
    shop = operator.business("Corner Shop")
    owner = operator.person("Olga Owner", shop)
    operator.install(app, shop, owner, ["invoices:read"])
    # An accountant may confirm what the installation grants, not widen it.
    accountant = operator.person("Cal Accountant", shop, role="accountant")

    for size, opened in sized.items():
        page = opened.page
        page.goto("/marketplace/books-sync/install")
        sign_in(page, shots, accountant)
        expect(page.get_by_label("Business")).to_have_value(shop)
        page.get_by_label("Create and change your customers").uncheck()
        shots.take(page, f"install-form-{size}")
        page.get_by_role("button", name="Install").click()

        expect(page.get_by_role("alert")).to_contain_text("Only an owner or admin")
        expect(page.get_by_label("See your invoices")).to_be_checked()
        expect(page.get_by_label("See your customers")).to_be_checked()
        expect(page.get_by_label("Create and change your customers")).not_to_be_checked()
        expect(page.get_by_label("Business")).to_have_value(shop)
        expect(page.get_by_role("link", name="Cancel")).to_have_attribute(
            "href", "/marketplace/books-sync"
        )
        shots.take(page, f"install-refused-{size}")
    _no_console_errors(sized)


def _device_code(server: Server, client_id: str, client_secret: str) -> str:
    basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
    response = httpx.post(
        f"{server.base}/oauth/device/authorize",
        data={"scope": "invoices:read"},
        headers={"Authorization": f"Basic {basic}"},
        trust_env=False,
    )
    assert response.status_code == 200, response.text
    return str(response.json()["user_code"])


def test_the_device_page_shows_the_code_again_to_compare_with_the_device(
    server: Server,
    sized: dict[str, Opened],
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner)

    for size, opened in sized.items():
        user_code = _device_code(server, app.client_id, app.client_secret)
        page = opened.page
        page.goto("/device")
        sign_in(page, shots, owner)
        expect(page.get_by_role("heading", level=1)).to_have_text("Connect a device")
        # Typed the way people do: lower case, no dash.
        page.get_by_label("Code").fill(user_code.replace("-", "").lower())
        shots.take(page, f"device-code-{size}")
        page.get_by_role("button", name="Continue").click()
        expect(page.locator(".device-code")).to_have_text(user_code)
        expect(page.get_by_text("Check that your device shows this code")).to_be_visible()
        shots.take(page, f"device-consent-{size}")
        page.get_by_role("button", name="Approve").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Device connected")
        shots.take(page, f"device-connected-{size}")
    _no_console_errors(sized)


DESCRIPTION = (
    "Keeps your **invoices** in step with the tools you use.\n\n"
    "## What it does\n\n"
    "- Sends new invoices\n"
    "- Reminds late payers\n\n"
    "Read the [guide](https://books-sync.example/guide).\n\n"
    "<script>document.title = 'owned'</script> [bad](javascript:alert(1))"
)


def _rate(page: Page, stars: str, review: str) -> None:
    page.get_by_label("Stars", exact=True).select_option(stars)
    page.get_by_label("Your review (optional)").fill(review)
    page.get_by_role("button", name="Rate").click()
    expect(page.get_by_role("status")).to_have_text("Thank you: your rating is saved")


def test_a_listing_shows_its_reviews_with_stars_and_its_description_in_markdown(
    sized: dict[str, Opened], operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    colleague = operator.person("Bo Bookkeeper", business, role="accountant")
    app = made_app(operator, partner, owner, app_url=f"{partner.origin}/embedded")
    operator.list_live(app, {**LISTING, "description": DESCRIPTION})
    operator.install(app, business, owner, SCOPES)

    raters: dict[str, Person] = {"phone": owner, "desktop": colleague}
    for size, opened in sized.items():
        page = opened.page
        page.goto("/marketplace/books-sync")
        page.get_by_role("link", name="Sign in", exact=True).first.click()
        sign_in(page, shots, raters[size])
        _rate(page, "4" if size == "phone" else "5", f"Review from the {size}")

    for size, opened in sized.items():
        page = opened.page
        page.reload()
        reviews = page.get_by_role("region", name="Ratings and reviews")
        expect(reviews.get_by_role("listitem")).to_have_count(2)
        expect(reviews.get_by_role("img", name="4 out of 5 stars")).to_have_count(1)
        expect(reviews.get_by_role("img", name="5 out of 5 stars")).to_have_count(1)
        expect(reviews).to_contain_text("Review from the phone")
        expect(reviews).to_contain_text("Bo Bookkeeper")
        expect(page.get_by_role("img", name="4.5 out of 5 stars")).to_be_visible()
        expect(page.get_by_text("Rated 4.5 of 5 from 2 ratings")).to_be_visible()

        about = page.get_by_role("region", name="About Books Sync")
        expect(about.locator("strong")).to_have_text("invoices")
        expect(about.get_by_role("heading", name="What it does", level=4)).to_be_visible()
        expect(about.get_by_role("listitem")).to_have_count(2)
        guide = about.get_by_role("link", name="guide")
        expect(guide).to_have_attribute("href", "https://books-sync.example/guide")
        expect(guide).to_have_attribute("rel", "nofollow noopener")
        expect(about).to_contain_text("<script>")  # shown as text, never run
        expect(about.get_by_role("link", name="bad")).to_have_count(0)
        assert page.title() != "owned"

        expect(page.get_by_text("Installed in Acme Trading")).to_be_visible()
        access = page.get_by_role("region", name="What it may access")
        expect(access.get_by_role("listitem")).to_have_count(len(SCOPES))
        expect(access.get_by_text("Write access")).to_have_count(1)
        expect(page.get_by_role("definition").filter(has_text="Ada Owner")).to_be_visible()
        shots.take(page, f"listing-{size}")
    _no_console_errors(sized)


def test_the_catalogue_is_filtered_by_a_category_chip(
    sized: dict[str, Opened], operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    studio = operator.business("Sync Studio")
    developer = operator.person("Dev Eloper", studio)
    books = made_app(operator, partner, developer)
    operator.list_live(books, LISTING)
    pay = operator.app(
        developer, name="Pay Tracker", scopes=["payments:read"], redirect_uri=f"{partner.origin}/cb"
    )
    operator.list_live(
        pay,
        {
            "slug": "pay-tracker",
            "name": "Pay Tracker",
            "tagline": "Who paid, who did not",
            "description": "Follows payments.",
            "category": "payments",
        },
    )

    for size, opened in sized.items():
        page = opened.page
        page.goto("/marketplace")
        chips = page.get_by_role("navigation", name="Categories")
        expect(chips.get_by_role("link", name="All")).to_have_attribute("aria-current", "page")
        expect(page.locator(".app-card")).to_have_count(2)
        chips.get_by_role("link", name="Payments").click()
        expect(page).to_have_url(re.compile(r"/marketplace\?category=payments$"))
        expect(chips.get_by_role("link", name="Payments")).to_have_attribute("aria-current", "page")
        expect(chips.locator("[aria-current]")).to_have_count(1)
        expect(page.locator(".app-card")).to_have_count(1)
        expect(page.get_by_role("heading", name="Pay Tracker")).to_be_visible()
        shots.take(page, f"catalogue-payments-{size}")
        # The search keeps the category.
        page.get_by_label("Search by name").fill("books")
        page.get_by_role("button", name="Search").click()
        expect(page.locator(".app-card")).to_have_count(0)
        expect(page.get_by_text("No app matches")).to_be_visible()
    _no_console_errors(sized)


def test_a_browser_gets_problem_pages_and_an_api_client_the_envelope(
    server: Server,
    sized: dict[str, Opened],
    operator: Operator,
    partner: PartnerApp,
    shots: Shots,
) -> None:
    business = operator.business("Acme Trading")
    owner = operator.person("Ada Owner", business)
    app = made_app(operator, partner, owner)
    mismatched = _authorize(app.client_id, partner, "invoices:read").replace(
        "%2Fcallback", "%2Felsewhere"
    )

    for size, opened in sized.items():
        page = opened.page
        response = page.goto("/no/such/page")
        assert response is not None
        assert response.status == 404
        assert "text/html" in (response.headers.get("content-type") or "")
        expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")
        expect(page.get_by_role("alert")).to_contain_text("There is no page at this address")
        expect(page.get_by_role("link", name="Go to the home page")).to_be_visible()
        shots.take(page, f"unknown-path-{size}")

        page.goto("/login")
        sign_in(page, shots, owner)
        response = page.goto(mismatched)
        assert response is not None
        assert response.status == 400
        assert page.url.startswith(server.base)  # never sent to the unregistered address
        expect(page.get_by_role("alert")).to_contain_text("Go back to the app and start again")
        expect(page.locator(".problem-code")).to_have_text(
            "redirect_uri does not match any registered URI"
        )
        expect(page.get_by_role("button", name="Approve")).to_have_count(0)
        shots.take(page, f"bad-authorization-{size}")
        opened.errors[:] = [e for e in opened.errors if "status of 40" not in e]

    answered = httpx.get(f"{server.base}/no/such/page", trust_env=False)
    assert answered.status_code == 404
    assert answered.json()["statusCode"] == 404
    _no_console_errors(sized)


_ROW_DISPLAY = "getComputedStyle(document.querySelector('tbody tr')).display"


def test_the_console_has_side_navigation_that_marks_the_page_and_tables_that_fit(
    sized: dict[str, Opened], operator: Operator, partner: PartnerApp, shots: Shots
) -> None:
    business = operator.business("Acme Trading")
    developer = operator.person("Dev Eloper", business)
    app = made_app(operator, partner, developer)
    console = operator.console(app)
    console.ok(
        "POST", "/webhooks", {"url": f"{partner.origin}/hook", "events": ["customer.created"]}
    )
    console.ok(
        "PUT",
        "/functions/on-customer",
        {"source": "export const handler = () => 1", "events": ["customer.created"]},
    )
    console.ok("POST", "/functions/on-customer/test")

    for size, opened in sized.items():
        page = opened.page
        page.goto(f"/console/apps/{app.id}/functions")
        sign_in(page, shots, developer)
        nav = page.get_by_role("navigation", name="Console")
        expect(nav.locator('[aria-current="page"]')).to_have_count(1)
        expect(nav.get_by_role("link", name="Functions")).to_have_attribute("aria-current", "page")
        expect(page.locator("tbody tr")).to_have_count(1)
        expect(page.locator("tbody tr th")).to_contain_text("on-customer")
        expect(page.locator("tbody tr .fn-state")).to_contain_text("Version 1")
        nav_box = nav.bounding_box()
        main_box = page.locator("main").bounding_box()
        assert nav_box is not None
        assert main_box is not None
        if size == "desktop":
            assert nav_box["x"] + nav_box["width"] <= main_box["x"] + 1  # beside the page
            assert main_box["width"] > 900  # the rest of the window is the page's
            assert page.evaluate(
                "getComputedStyle(document.querySelector('tbody tr')).display"
            ) == ("table-row")
        else:
            assert main_box["y"] + main_box["height"] <= nav_box["y"] + 1  # the page first
            # The functions' list stays a table on a phone: a row a function.
            assert page.evaluate(
                "getComputedStyle(document.querySelector('tbody tr')).display"
            ) == ("table-row")
        shots.take(page, f"console-functions-{size}")
        wraps = page.evaluate(
            "[...document.querySelectorAll('.table-wrap')]"
            ".map((w) => w.scrollWidth - w.clientWidth)"
        )
        assert wraps
        assert max(wraps) <= 1, wraps

        nav.get_by_role("link", name="Webhooks").click()
        expect(nav.get_by_role("link", name="Webhooks")).to_have_attribute("aria-current", "page")
        expect(nav.locator('[aria-current="page"]')).to_have_count(1)
        shots.take(page, f"console-webhooks-{size}")
    _no_console_errors(sized)
