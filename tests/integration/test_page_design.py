"""The pages' design served by the application: the hashed stylesheet and mark with their cache
and policy headers, every page's Content-Security-Policy naming the stylesheet's origin and no
inline style, content negotiation of pages nobody routes, the home page, the sign-in page that
says what it signs in for, the console's listing editor (save, edit and resubmit after
changes are requested, image upload and previews for the developer only), and templates
rendered with no context processor on a worker thread."""

from __future__ import annotations

import html
import inspect
import io
import re
from typing import Any
from urllib.parse import quote

import trio
from werkzeug.datastructures import FileStorage

from .data_api import owner_api
from .oauth_helpers import login
from .test_listings import body
from .test_marketplace import go_live
from .webhook_world import console_for

TIMEOUT = 30
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64
HANDLER = "export const handler = () => 1;"
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


def _links(page: str) -> dict[str, str]:
    return {
        rel: href for rel, href in re.findall(r'<link rel="(stylesheet|icon)" href="([^"]+)"', page)
    }


def _policy(response: Any) -> dict[str, str]:
    parts = (p.strip() for p in response.headers["Content-Security-Policy"].split(";"))
    return dict(part.split(" ", 1) for part in parts if part)


async def _text(client: Any, path: str, status: int = 200, **kw: Any) -> tuple[Any, str]:
    response = await client.get(path, **kw)
    text = await response.get_data(as_text=True)
    assert response.status_code == status, text
    return response, text


async def test_pages_render_with_no_context_processor_on_a_worker_thread(
    app: Any, client: Any
) -> None:
    """Every template context processor of the application is async, so a page runs none on a
    worker thread (a blueprint's own from Flask is left out: it added nothing), and a page
    still renders with what Quart's gives its templates."""
    sync = [
        (name, processor)
        for name, processors in app.template_context_processors.items()
        for processor in processors
        if not inspect.iscoroutinefunction(processor)
    ]
    assert sync == []
    with trio.fail_after(TIMEOUT):
        page = await client.get("/login")
    assert page.status_code == 200
    assert 'name="csrf_token"' in await page.get_data(as_text=True)


async def test_the_stylesheet_and_mark_are_served_hashed_and_kept_for_a_year(client: Any) -> None:
    with trio.fail_after(TIMEOUT):
        _, page = await _text(client, "/login")
        links = _links(page)
        css = await client.get(links["stylesheet"])
        mark = await client.get(links["icon"])
        stale = await client.get("/assets/ledgerport.000000000000.css")
        plain = await client.get("/assets/ledgerport.css")
    assert re.fullmatch(r"/assets/ledgerport\.[0-9a-f]{12}\.css", links["stylesheet"])
    assert re.fullmatch(r"/assets/mark\.[0-9a-f]{12}\.svg", links["icon"])
    assert css.status_code == 200
    assert css.mimetype == "text/css"
    assert css.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert "--lp-color-brand" in await css.get_data(as_text=True)
    assert mark.mimetype == "image/svg+xml"
    assert mark.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert "<svg" in await mark.get_data(as_text=True)
    assert (stale.status_code, plain.status_code) == (404, 404)


async def test_every_page_allows_its_stylesheet_and_images_and_no_inline_style(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        await go_live(client, admin_headers, console, body("books-sync"))
        webhook = (await console.webhook("http://127.0.0.1:9/hook", []))["id"]
        await console.ok("PUT", "/functions/tells", {"source": HANDLER, "events": []})
        delivery = (await console.ok("POST", f"/webhooks/{webhook}/test", status=202))["deliveryId"]
        await console.ok("PUT", "/functions/f", {"source": HANDLER, "events": ["customer.created"]})
        run = (await console.ok("POST", "/functions/f/test", status=202))["runId"]
        await login(client, api.world)
        app = api.world.app_id
        pages = [
            "/login",
            "/marketplace",
            "/marketplace/books-sync",
            "/marketplace/books-sync/install",
            "/device",
            "/console",
            f"/console/apps/{app}",
            f"/console/apps/{app}/webhooks",
            f"/console/apps/{app}/functions",
            f"/console/apps/{app}/listing",
            f"/console/apps/{app}/webhooks/new",
            f"/console/apps/{app}/webhooks/{webhook}/edit",
            f"/console/apps/{app}/webhooks/{webhook}/rotate",
            f"/console/apps/{app}/webhooks/{webhook}/delete",
            f"/console/apps/{app}/webhooks/{webhook}/secret",
            f"/console/apps/{app}/functions/new",
            f"/console/apps/{app}/functions/tells/edit",
            f"/console/apps/{app}/functions/tells/delete",
            f"/console/apps/{app}/webhooks/{webhook}",
            f"/console/apps/{app}/webhooks/{webhook}/deliveries/{delivery}",
            f"/console/apps/{app}/functions/f",
            f"/console/apps/{app}/functions/f/versions/1",
            f"/console/apps/{app}/functions/f/runs/{run}",
        ]
        answers = [await _text(client, path, headers=BROWSER) for path in pages]
        _, unknown = await _text(client, "/nowhere", 404, headers=BROWSER)
    live = {f"/console/apps/{app}/webhooks/{webhook}", f"/console/apps/{app}/functions/f"}
    for path, (response, page) in zip(pages, answers, strict=True):
        policy = _policy(response)
        # Only the page that shows a secret once loads a script, the copy button's, and the
        # webhook's and the function's pages the live rows' (which opens the live stream),
        # each from here.
        scripts = path.endswith("/secret") or path in live
        assert policy.get("script-src") == ("'self'" if scripts else None), path
        assert policy.get("connect-src") == ("'self'" if path in live else None), path
        assert policy["style-src"] == "'self'", path
        assert policy["img-src"] == "'self'", path
        assert policy["frame-ancestors"] == "'none'", path
        assert "unsafe-inline" not in response.headers["Content-Security-Policy"], path
        assert _links(page)["stylesheet"].startswith("/assets/ledgerport."), path
        assert "<style" not in page, path
        assert " style=" not in page, path
    assert "/assets/ledgerport." in unknown


async def test_a_browser_that_reaches_no_route_gets_a_page_and_an_api_client_the_envelope(
    client: Any,
) -> None:
    with trio.fail_after(TIMEOUT):
        page_answer, page = await _text(client, "/no/such/page", 404, headers=BROWSER)
        json_answer = await client.get("/no/such/page")
        any_answer = await client.get("/no/such/page", headers={"Accept": "*/*"})
        api_answer = await client.get("/invoices", headers=BROWSER)
    assert page_answer.mimetype == "text/html"
    assert "<h1>Page not found</h1>" in page
    assert "There is no page at this address" in page
    assert 'href="/">Go to the home page</a>' in page
    assert "Cannot GET" not in page  # plain words, not the envelope's
    for answer in (json_answer, any_answer):
        assert answer.mimetype == "application/json"
        assert (await answer.get_json())["message"] == "Cannot GET /no/such/page"
    # A routed API answers its envelope whoever asks.
    assert api_answer.mimetype == "application/json"


async def test_the_home_page_and_what_signing_in_is_for(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        await go_live(client, admin_headers, console, body("books-sync", name="Books Sync"))
        authorize = f"/oauth/authorize?client_id={api.world.client_id}&scope=invoices:read"
        client.cookie_jar.clear()  # signed out: the sign-in form says what it is for
        purposes = [
            (await _text(client, f"/login?next={quote(target, safe='')}"))[1]
            for target in (authorize, "/marketplace/books-sync/install", "/device", "/console")
        ]
        await login(client, api.world)
        _, home = await _text(client, "/", headers=BROWSER)
        plain = await client.get("/")
    assert "Sign in to continue to Books Sync." in purposes[0]
    assert "Sign in to install Books Sync." in purposes[1]
    assert "Sign in to connect a device." in purposes[2]
    assert "Sign in to the developer console." in purposes[3]
    assert 'href="/marketplace"' in home
    assert 'href="/console"' in home
    assert html.escape(api.world.email) in home
    assert plain.mimetype == "text/plain"
    assert await plain.get_data(as_text=True) == f"Signed in as {api.world.email}"


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None, page
    return found[1]


def _notice(page: str) -> str | None:
    found = re.search(r'<p class="notice notice-\w+" role="(?:status|alert)">(.*?)</p>', page)
    return html.unescape(found[1]) if found else None


async def test_the_listing_editor_saves_uploads_previews_and_resubmits_after_changes(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        await login(client, api.world)
        path = f"/console/apps/{api.world.app_id}/listing"
        _, empty = await _text(client, path)
        uploaded = await client.post(
            f"/console/apps/{api.world.app_id}/assets",
            form={"csrf_token": _csrf(empty)},
            files={"image": FileStorage(io.BytesIO(PNG), "icon.png", content_type="image/png")},
        )
        _, with_image = await _text(client, uploaded.headers["Location"])
        asset = re.search(r'name="icon" value="(ast_[^"]+)"', with_image)
        assert asset is not None, with_image
        form = {
            "csrf_token": _csrf(with_image),
            "slug": "books-sync",
            "name": "Books Sync",
            "tagline": "Invoices, synced",
            "category": "invoicing",
            "description": "Keeps **invoices** in step.\r\n\r\n- one\r\n- two",
            "icon": asset[1],
            "then": "submit",
        }
        submitted = await client.post(path, form=form)
        _, after_submit = await _text(client, submitted.headers["Location"])
        revision = re.search(r'id="rev-(rev_[^"]+)"', after_submit)
        assert revision is not None
        for action in ("start", "request_changes"):
            await client.post(
                f"/admin/listing-revisions/{revision[1]}/review",
                json={"action": action, "note": "Say what it syncs"},
                headers=admin_headers,
            )
        _, changes = await _text(client, path)
        refused = await client.post(
            path, form={**form, "slug": "Not A Slug", "tagline": "Kept as sent"}
        )
        refused_page = await refused.get_data(as_text=True)
        resubmitted = await client.post(
            path, form={**form, "tagline": "Invoices and payments, synced"}
        )
        _, after_resubmit = await _text(client, resubmitted.headers["Location"])
        preview = await client.get(f"/console/apps/{api.world.app_id}/assets/{asset[1]}")
        stranger = await owner_api(client, admin_headers)
        client.cookie_jar.clear()
        await login(client, stranger.world)
        theirs = await client.get(f"/console/apps/{api.world.app_id}/assets/{asset[1]}")
    assert "Write the listing" in empty
    assert _notice(with_image) == "Image uploaded: choose it as the icon or a screenshot"
    assert _notice(after_submit) == "Revision 1 submitted for review"
    assert f'src="/console/apps/{api.world.app_id}/assets/{asset[1]}"' in after_submit
    assert "<strong>invoices</strong>" in after_submit  # the description as it will show
    assert "It changes no more until it is reviewed." in after_submit
    assert "Say what it syncs" in changes
    assert "Changes were requested: edit the listing below" in changes
    assert 'value="Invoices, synced"' in changes  # the editor holds the revision
    assert _notice(after_resubmit) == "Revision 1 submitted for review"
    assert "Open revision: revision 1, submitted" in after_resubmit
    assert refused.status_code == 400, "a refused save shows the editor again, as it was sent"
    assert 'value="Not A Slug"' in refused_page
    assert 'value="Kept as sent"' in refused_page
    assert 'id="problems"' in refused_page  # the summary, linking to the Address
    assert '<a href="#slug">Address must be 3 to 60' in refused_page
    assert 'aria-invalid="true"' in refused_page
    assert preview.status_code == 200
    assert preview.mimetype == "image/png"
    assert await preview.get_data() == PNG
    assert theirs.status_code == 404
