"""Who is signed in shapes the page: the header names them on every page, the device page goes
straight to the code, the sign-in page offers "Continue as", and the marketplace shows its
Install button only to whoever may install. And a refused form's problems are where the eye is:
beside their fields, with the fields' own labels, summarized at the top; the consent page's
problems lead with plain words; the console home creates an app."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from typing import Any

import trio

from ledgerport import catalog

from .data_api import owner_api
from .oauth_helpers import add_member, login, make_world
from .test_marketplace_install import _listed_app
from .webhook_world import hooked

TIMEOUT = 30
HANDLER = "export const handler = () => 1;\n"
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


async def _text(client: Any, path: str, status: int = 200, **kw: Any) -> str:
    response = await client.get(path, **kw)
    text = await response.get_data(as_text=True)
    assert response.status_code == status, text
    return str(text)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None, page
    return found[1]


def _header(page: str) -> str:
    found = re.search(r'<header class="site-header">(.*?)</header>', page, re.S)
    assert found is not None, page
    return found[1]


def _signed_in_as(email: str) -> str:
    return f'title="Signed in as {html.escape(email)}">{html.escape(email)}</span>'


async def test_every_page_names_who_is_signed_in_and_offers_sign_out(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        await _listed_app(client, admin_headers)
        world = await make_world(client, admin_headers)
        signed_out = await _text(client, "/marketplace")
        await login(client, world)
        pages = {
            path: await _text(client, path, status, headers=BROWSER)
            for path, status in (
                ("/", 200),
                ("/marketplace", 200),
                ("/marketplace/books-sync", 200),
                ("/device", 200),
                ("/console", 200),
                ("/login?next=/console", 200),
                ("/no/such/page", 404),
            )
        }
    assert 'href="/login?next=/marketplace"' in _header(signed_out)
    assert "Sign out" not in signed_out
    for path, page in pages.items():
        header = _header(page)
        assert _signed_in_as(world.email) in header, path
        assert ">Sign out</button>" in header, path
        assert 'action="/logout"' in header, path
        assert "/login?next=" not in header, path  # never "Sign in" to someone signed in


async def test_the_device_page_goes_straight_to_the_code_as_the_signed_in_user(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        signed_out = await client.get("/device?user_code=BCDF-GHJK")
        await login(client, world)
        page = await _text(client, "/device?user_code=BCDF-GHJK")
    assert signed_out.status_code == 303
    assert signed_out.headers["Location"].startswith("/login?next=")
    assert 'name="user_code" value="BCDF-GHJK"' in page
    assert f"Connecting as <strong>{html.escape(world.email)}</strong>" in page
    assert "Not you? Switch account" in page
    assert 'name="next" value="/device?user_code=BCDF-GHJK"' in page
    assert "Sign in</a>" not in page


async def test_the_sign_in_page_offers_to_continue_as_the_signed_in_person(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        empty = await _text(client, "/login?next=/console")
        await login(client, world)
        offered = await _text(client, "/login?next=/console")
        switched = await client.post(
            "/logout", form={"csrf_token": _csrf(offered), "next": "/console"}
        )
        again = await _text(client, switched.headers["Location"])
    assert 'type="password"' in empty
    assert "Continue as" not in empty
    assert f"<h1>Continue as {html.escape(world.email)}</h1>" in offered
    assert f'href="/console">Continue as {html.escape(world.email)}</a>' in offered
    assert ">Sign in as someone else</button>" in offered
    assert 'type="password"' not in offered
    assert switched.status_code == 303
    assert switched.headers["Location"] == "/login?next=%2Fconsole"
    assert 'type="password"' in again
    assert 'name="next" value="/console"' in again


def _install_link(page: str) -> bool:
    return 'href="/marketplace/books-sync/install"' in page


async def test_the_install_button_shows_only_to_whoever_may_install(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        developer, _ = await _listed_app(client, admin_headers)
        signed_out = await _text(client, "/marketplace/books-sync")
        await login(client, developer)
        owner = await _text(client, "/marketplace/books-sync")
        user_id, email, password = await add_member(client, admin_headers, developer, "viewer")
        viewer = replace(developer, user_id=user_id, email=email, password=password)
        client.cookie_jar.clear()
        await login(client, viewer)
        as_viewer = await _text(client, "/marketplace/books-sync")
    assert _install_link(signed_out), "the button leads whoever is signed out to sign in"
    assert _install_link(owner)
    assert not _install_link(as_viewer)
    why = re.search(r'id="install-why-not">(.*?)</p>', as_viewer, re.S)
    assert why is not None, as_viewer
    assert html.unescape(why[1]) == (
        "Your role in Acme (viewer) does not allow"
        " installing apps. Ask an owner or an admin of the business to install Books Sync."
    )


async def test_a_refused_listing_save_shows_each_problem_beside_its_field(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        await login(client, api.world)
        path = f"/console/apps/{api.world.app_id}/listing"
        editor = await _text(client, path)
        form = {
            "csrf_token": _csrf(editor),
            "slug": "Not A Slug",
            "name": "Books Sync",
            "tagline": "",
            "category": "invoicing",
            "description": "Keeps invoices in step.",
            "then": "save",
        }
        refused = await client.post(path, form=form)
        page = await refused.get_data(as_text=True)
    assert refused.status_code == 400
    assert f'action="{path}#problems"' in editor, "a refused save opens at the summary"
    summary = re.search(r'<div class="error-summary" id="problems"(.*?)</div>', page, re.S)
    assert summary is not None, page
    assert "autofocus" in summary[1]
    assert "There are 2 problems: the listing was not saved" in summary[1]
    links = re.findall(r'<a href="#(\w+)">(.*?)</a>', summary[1])
    assert [target for target, _ in links] == ["slug", "tagline"]  # in the form's order
    assert links[0][1].startswith("Address must be 3 to 60 lower-case letters and digits")
    assert links[1][1] == "Tagline must be 1 to 120 characters"
    assert "slug must" not in page, "the field is named by its label, never its internal name"
    assert re.search(r'<span class="field-problem" id="slug-problem">Address must', page)
    slug_input = re.search(r'<input id="slug"[^>]*>', page)
    assert slug_input is not None
    assert 'aria-describedby="slug-hint slug-problem"' in slug_input[0]
    assert 'aria-invalid="true"' in slug_input[0]
    assert 'value="Not A Slug"' in slug_input[0]
    name_input = re.search(r'<input id="name"[^>]*>', page)
    assert name_input is not None
    assert "aria-invalid" not in name_input[0]
    # The summary comes before the editor's fields, at the top of the page's content.
    assert page.index('id="problems"') < page.index('id="editor-h"')


async def test_a_taken_address_is_said_beside_the_address(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        await _listed_app(client, admin_headers)  # books-sync is taken
        api = await owner_api(client, admin_headers)
        await login(client, api.world)
        path = f"/console/apps/{api.world.app_id}/listing"
        editor = await _text(client, path)
        refused = await client.post(
            path,
            form={
                "csrf_token": _csrf(editor),
                "slug": "books-sync",
                "name": "Another",
                "tagline": "Another one",
                "category": "invoicing",
                "description": "Another.",
            },
        )
        page = await refused.get_data(as_text=True)
    assert refused.status_code == 400
    assert (
        '<a href="#slug">Address books-sync is taken by another listing: choose another</a>' in page
    )
    assert 'id="slug-problem"' in page


async def test_the_consent_page_leads_with_plain_words(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        await login(client, world)
        page = await _text(
            client,
            f"/oauth/authorize?response_type=code&client_id={world.client_id}"
            "&redirect_uri=https://elsewhere.example/cb&scope=invoices:read&state=s",
            400,
        )
    alert = re.search(r'role="alert">(.*?)</p>', page, re.S)
    assert alert is not None
    assert alert[1].startswith("The app asked to send you back to an address it has not")
    assert "redirect_uri" not in alert[1]
    code = re.search(r'class="problem-code">(.*?)</code>', page)
    assert code is not None
    assert code[1] == catalog.CONSENT_REDIRECT_MISMATCH  # kept, below, for the developer


async def test_the_console_home_creates_an_app(client: Any, admin_headers: dict[str, str]) -> None:
    with trio.fail_after(TIMEOUT):
        world = await make_world(client, admin_headers)
        await login(client, world)
        home = await _text(client, "/console")
        new = await _text(client, "/console/apps/new")
        form = {
            "csrf_token": _csrf(new),
            "name": "Ledger Lens",
            "type": "CONFIDENTIAL",
            "redirect_uris": "https://lens.example/cb\r\nftp://lens.example/cb",
            "scope": "invoices:read",
        }
        refused = await client.post("/console/apps", form=form)
        refused_page = await refused.get_data(as_text=True)
        created = await client.post(
            "/console/apps", form={**form, "redirect_uris": "https://lens.example/cb"}
        )
        created_page = await created.get_data(as_text=True)
        after = await _text(client, "/console")
        unticked = await client.post("/console/apps", form={**form, "scope": ""})
    assert 'href="/console/apps/new">Create app</a>' in home
    assert 'action="/console/apps#problems"' in new
    assert refused.status_code == 400
    summary = re.search(r'class="error-summary".*?</div>', refused_page, re.S)
    assert summary is not None, refused_page
    assert '<a href="#redirect_uris">Redirect URIs, line 2, must' in summary[0], summary[0]
    assert "redirectUris" not in refused_page
    assert 'value="Ledger Lens"' in refused_page
    assert created.status_code == 201, created_page
    client_secret = re.search(r"<code class=\"break\">(lp_cs_[^<]+|[^<]+)</code>", created_page)
    assert client_secret is not None
    assert "shown only here" in created_page
    assert ">Ledger Lens</a>" in after
    assert unticked.status_code == 400
    assert '<a href="#scopes">Scopes must name at least one scope' in (
        await unticked.get_data(as_text=True)
    )


def _menu(page: str) -> str:
    found = re.search(r'<nav aria-label="Menu">(.*?)</nav>', page, re.S)
    assert found, page
    return found[1]


async def test_the_phone_menu_lists_the_pages_below_a_console_section(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            app_id = hook.api.world.app_id
            await hook.console.ok("PUT", "/functions/tells", {"source": HANDLER, "events": []})
            await login(client, hook.api.world)
            base = f"/console/apps/{app_id}"
            endpoint = f"{base}/webhooks/{hook.webhook['id']}"
            menus = {
                path: _menu(await _text(client, path))
                for path in (
                    endpoint,
                    f"{endpoint}/edit",
                    f"{base}/functions/tells",
                    f"{base}/functions/tells/versions/1",
                    f"{base}/secrets",
                )
            }
    webhook, edit, function, version, secrets = menus.values()
    assert f'<a href="{endpoint}" aria-current="page"' in webhook
    assert f'<a href="{base}/webhooks" aria-current="true">Webhooks</a><ul class="sub-nav">' in (
        webhook.replace("\n", "")
    )
    assert f'<a href="{endpoint}/edit" aria-current="page">Edit endpoint</a>' in edit
    assert f'<a href="{base}/functions/tells" aria-current="page">tells</a>' in function
    assert f'<a href="{base}/functions/tells" aria-current="true">tells</a>' in version
    assert f'<a href="{base}/functions/tells/versions/1" aria-current="page">Version 1</a>' in (
        version
    )
    assert "sub-nav" not in secrets  # a section's own page has nothing below it
