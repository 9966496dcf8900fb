"""Marketplace listings in the console and their review by operators: first saves and their race,
slugs, the revision state machine table-driven, edits by state, and going live
(contract.md: App platform surfaces; spec's codes LISTING_EXISTS and SLUG_TAKEN)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from ledgerport import apps
from ledgerport.storage import Store

from .data_api import owner_api
from .webhook_world import Console, console_for

TIMEOUT = 30


def body(slug: str = "books-sync", **changes: Any) -> dict[str, Any]:
    return {
        "slug": slug,
        "name": "Books Sync",
        "tagline": "Your invoices, everywhere",
        "description": "Keeps your invoices in step with the tools you use.",
        "category": "invoicing",
        **changes,
    }


async def _console(client: Any, admin_headers: dict[str, str]) -> Console:
    return await console_for(client, admin_headers, await owner_api(client, admin_headers))


async def _review(client: Any, admin_headers: dict[str, str], revision_id: str, action: str) -> Any:
    return await client.post(
        f"/admin/listing-revisions/{revision_id}/review",
        json={"action": action, "note": f"{action} by the reviewer"},
        headers=admin_headers,
    )


async def test_the_first_save_creates_the_listing_and_later_ones_edit_its_draft(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        missing = await console.call("GET", "/listing")
        first = await console.ok("PUT", "/listing", body(), 201)
        second = await console.ok("PUT", "/listing", body(tagline="Sharper"), 200)
        read = await console.ok("GET", "/listing")
    assert missing.status_code == 404
    assert (await missing.get_json())["code"] == "LISTING_NOT_FOUND"
    assert first["live"] is None
    assert first["draft"]["state"] == "draft"
    assert first["draft"]["number"] == 1
    assert second["id"] == first["id"]
    assert second["draft"]["id"] == first["draft"]["id"]
    assert second["draft"]["tagline"] == "Sharper"
    assert read == second


async def test_concurrent_first_saves_make_one_listing_and_the_rest_are_listing_exists(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    saves = 20
    statuses: list[int] = []
    codes: list[str] = []
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)

        async def save(index: int) -> None:
            response = await console.call("PUT", "/listing", body(tagline=f"Take {index}"))
            statuses.append(response.status_code)
            if response.status_code == 409:
                codes.append((await response.get_json())["code"])

        async with trio.open_nursery() as nursery:
            for index in range(saves):
                nursery.start_soon(save, index)
        async with store.transaction() as tx:
            listings = await tx.fetchval(
                "SELECT COUNT(*) FROM listings WHERE app_id = $1", console.app_id
            )
            revisions = await tx.fetchval(
                "SELECT COUNT(*) FROM listing_revisions r JOIN listings l ON l.id = r.listing_id"
                " WHERE l.app_id = $1",
                console.app_id,
            )
    assert sorted(statuses) == [201] + [409] * (saves - 1)
    assert set(codes) == {"LISTING_EXISTS"}
    assert (listings, revisions) == (1, 1)


async def test_a_slug_belongs_to_one_listing(client: Any, admin_headers: dict[str, str]) -> None:
    with trio.fail_after(TIMEOUT):
        mine = await _console(client, admin_headers)
        theirs = await _console(client, admin_headers)
        await mine.ok("PUT", "/listing", body("shared-name"), 201)
        taken_first = await theirs.call("PUT", "/listing", body("shared-name"))
        await theirs.ok("PUT", "/listing", body("their-name"), 201)
        taken_edit = await theirs.call("PUT", "/listing", body("shared-name"))
        kept = await mine.ok("PUT", "/listing", body("shared-name", name="Still mine"), 200)
    for refused in (taken_first, taken_edit):
        assert refused.status_code == 400
        answer = await refused.get_json()
        assert answer["code"] == "SLUG_TAKEN"
        assert answer["message"] == "The slug shared-name is taken by another listing"
    assert kept["slug"] == "shared-name"


UNKNOWN_ASSET = "ast_000000000000000000000001"
"""A well-formed asset id that names no asset."""


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"slug": "No Caps"}, "slug must be 3 to 60 lower-case letters and digits"),
        ({"slug": "ab"}, "slug must be 3 to 60 lower-case letters and digits"),
        ({"slug": "trailing-"}, "slug must be 3 to 60 lower-case letters and digits"),
        ({"name": "   "}, "name must be 1 to 60 characters"),
        ({"tagline": ""}, "tagline must be 1 to 120 characters"),
        ({"iconAssetId": UNKNOWN_ASSET}, f"asset {UNKNOWN_ASSET} is not an asset of the app"),
        (
            {"screenshotAssetIds": [f"ast_{n:024x}" for n in range(9)]},
            "screenshotAssetIds must name at most 8",
        ),
        ({"iconAssetId": "ast_1"}, "iconAssetId String should match pattern"),
    ],
)
async def test_a_malformed_listing_is_a_validation_error(
    client: Any, admin_headers: dict[str, str], changes: dict[str, Any], message: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        response = await console.call("PUT", "/listing", body(**changes))
        missing = await console.call("GET", "/listing")
    answer = await response.get_json()
    assert response.status_code == 400
    assert "code" not in answer
    assert any(line.startswith(message) for line in answer["message"]), answer
    assert missing.status_code == 404


# How a revision reaches each state: the console's steps, then the reviewer's.
PATHS: dict[str, list[str]] = {
    "draft": [],
    "submitted": ["submit"],
    "in_review": ["submit", "start"],
    "approved": ["submit", "start", "approve"],
    "rejected": ["submit", "start", "reject"],
    "changes_requested": ["submit", "start", "request_changes"],
}


async def _revision_in(
    client: Any, admin_headers: dict[str, str], state: str
) -> tuple[Console, str]:
    console = await _console(client, admin_headers)
    listing = await console.ok("PUT", "/listing", body(f"app-{state.replace('_', '-')}"), 201)
    revision_id = listing["draft"]["id"]
    for step in PATHS[state]:
        if step == "submit":
            await console.ok("POST", "/listing/submit")
        else:
            response = await _review(client, admin_headers, revision_id, step)
            assert response.status_code == 200, await response.get_data(as_text=True)
    return console, revision_id


@pytest.mark.parametrize("action", apps.REVIEW_ACTIONS)
@pytest.mark.parametrize("state", apps.REVISION_STATES)
async def test_the_review_state_machine(
    client: Any, admin_headers: dict[str, str], state: str, action: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console, revision_id = await _revision_in(client, admin_headers, state)
        response = await _review(client, admin_headers, revision_id, action)
        listing = await console.ok("GET", "/listing")
    after = apps.REVIEW_TRANSITIONS.get((state, action))  # type: ignore[call-overload]
    answer = await response.get_json()
    if after is None:
        assert response.status_code == 409
        assert answer["code"] == "INVALID_STATE"
    else:
        assert response.status_code == 200
        assert answer["state"] == after
        assert answer["note"] == f"{action} by the reviewer"
    live = listing["live"]
    became_live = after == "approved" or (state == "approved")
    assert (live is not None and live["id"] == revision_id) == became_live


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        ("draft", "edited"),
        ("changes_requested", "edited"),
        ("rejected", "edited"),
        ("submitted", "refused"),
        ("in_review", "refused"),
        ("approved", "new draft"),
    ],
)
async def test_a_save_by_the_state_of_the_open_revision(
    client: Any, admin_headers: dict[str, str], state: str, outcome: str
) -> None:
    with trio.fail_after(TIMEOUT):
        console, revision_id = await _revision_in(client, admin_headers, state)
        slug = f"app-{state.replace('_', '-')}"
        response = await console.call("PUT", "/listing", body(slug, tagline="Revised"))
        listing = await console.ok("GET", "/listing")
    answer = await response.get_json()
    if outcome == "refused":
        assert response.status_code == 400
        assert answer["message"][0].startswith("revision 1 is ")
        assert listing["draft"]["state"] == state
    elif outcome == "edited":
        assert response.status_code == 200
        assert (answer["draft"]["id"], answer["draft"]["state"]) == (revision_id, "draft")
        assert answer["draft"]["tagline"] == "Revised"
    else:
        assert response.status_code == 200
        assert answer["live"]["id"] == revision_id
        assert answer["draft"]["number"] == 2
        assert answer["draft"]["tagline"] == "Revised"
        assert answer["live"]["tagline"] != "Revised"


async def test_only_a_draft_is_submitted(client: Any, admin_headers: dict[str, str]) -> None:
    with trio.fail_after(TIMEOUT):
        nothing = await _console(client, admin_headers)
        no_listing = await nothing.call("POST", "/listing/submit")
        console, _ = await _revision_in(client, admin_headers, "submitted")
        again = await console.call("POST", "/listing/submit")
        unknown = await _review(client, admin_headers, "rev_unknown", "start")
    assert no_listing.status_code == 404
    assert again.status_code == 409
    assert (await again.get_json())["code"] == "INVALID_STATE"
    assert unknown.status_code == 404
    assert (await unknown.get_json())["code"] == "REVISION_NOT_FOUND"


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 64


async def _upload(console: Console, data: bytes, content_type: str) -> Any:
    return await console.client.post(
        f"/developer/apps/{console.app_id}/assets",
        data=data,
        headers={"Authorization": f"Bearer {console.token}", "Content-Type": content_type},
    )


async def test_assets_are_png_or_jpeg_of_at_most_a_mebibyte(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        png = await _upload(console, PNG, "image/png")
        jpeg = await _upload(console, JPEG, "image/jpeg; charset=binary")
        refused = {
            "gif": await _upload(console, b"GIF89a" + b"\x00" * 10, "image/gif"),
            "png said, jpeg sent": await _upload(console, JPEG, "image/png"),
            "empty": await _upload(console, b"", "image/png"),
            "too large": await _upload(console, PNG + b"\x00" * apps.ASSET_MAX_BYTES, "image/png"),
        }
    assert png.status_code == 201
    assert await png.get_json() == {
        "id": (await png.get_json())["id"],
        "kind": None,
        "contentType": "image/png",
        "size": len(PNG),
    }
    assert (await jpeg.get_json())["contentType"] == "image/jpeg"
    for case, response in refused.items():
        assert response.status_code in (400, 413), case
        assert "code" not in await response.get_json(), case


@pytest.mark.parametrize(
    ("state", "in_use"),
    [
        ("draft", True),
        ("submitted", True),
        ("in_review", True),
        ("changes_requested", True),
        ("rejected", True),
        ("approved", True),  # the live revision
        ("superseded", False),  # an approved revision no longer live
    ],
)
async def test_an_asset_in_use_by_the_live_or_an_open_revision_is_kept(
    client: Any, admin_headers: dict[str, str], state: str, in_use: bool
) -> None:
    with trio.fail_after(TIMEOUT):
        console = await _console(client, admin_headers)
        asset = await (await _upload(console, PNG, "image/png")).get_json()
        listing = await console.ok(
            "PUT", "/listing", body("with-assets", iconAssetId=asset["id"]), 201
        )
        revision_id = listing["draft"]["id"]
        steps = PATHS["approved" if state == "superseded" else state]
        for step in steps:
            if step == "submit":
                await console.ok("POST", "/listing/submit")
            else:
                assert (await _review(client, admin_headers, revision_id, step)).status_code == 200
        if state == "superseded":
            # A second revision without the asset goes live in its place.
            second = await console.ok("PUT", "/listing", body("with-assets"))
            await console.ok("POST", "/listing/submit")
            for step in ("start", "approve"):
                review = await _review(client, admin_headers, second["draft"]["id"], step)
                assert review.status_code == 200
        response = await console.call("DELETE", f"/assets/{asset['id']}")
    if in_use:
        assert response.status_code == 400
        assert (await response.get_json())["code"] == "ASSET_IN_USE"
    else:
        assert response.status_code == 204


async def test_a_listing_names_only_its_apps_assets(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        mine = await _console(client, admin_headers)
        theirs = await _console(client, admin_headers)
        foreign = await (await _upload(theirs, PNG, "image/png")).get_json()
        own = await (await _upload(mine, JPEG, "image/jpeg")).get_json()
        refused = await mine.call(
            "PUT", "/listing", body(screenshotAssetIds=[own["id"], foreign["id"]])
        )
        saved = await mine.ok("PUT", "/listing", body(screenshotAssetIds=[own["id"]]), 201)
        gone = await mine.call("DELETE", "/assets/ast_unknown")
    assert refused.status_code == 400
    assert (await refused.get_json())["message"] == [
        f"asset {foreign['id']} is not an asset of the app"
    ]
    assert saved["draft"]["screenshotAssetIds"] == [own["id"]]
    assert gone.status_code == 404
    assert (await gone.get_json())["code"] == "ASSET_NOT_FOUND"


async def test_two_apps_saving_one_slug_at_once_leave_it_to_one(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    consoles = 6
    answers: list[tuple[int, str | None]] = []
    with trio.fail_after(TIMEOUT):
        apps_consoles = [await _console(client, admin_headers) for _ in range(consoles)]

        async def save(console: Console) -> None:
            response = await console.call("PUT", "/listing", body("contested"))
            answer = await response.get_json()
            answers.append((response.status_code, answer.get("code")))

        async with trio.open_nursery() as nursery:
            for console in apps_consoles:
                nursery.start_soon(save, console)
        async with store.transaction() as tx:
            holders = await tx.fetchval("SELECT COUNT(*) FROM listings WHERE slug = 'contested'")
    assert sorted(answers, key=lambda a: a[0]) == [(201, None)] + [(400, "SLUG_TAKEN")] * (
        consoles - 1
    )
    assert holders == 1
