"""Every form of the application host is CSRF-checked before its handler runs: one guard of the
page blueprints refuses a request with an unsafe method whose ``csrf_token`` is missing or does
not hold. The sweep takes the routes from the application's URL map, so a page route added later
is swept too, whether or not it declares how it answers an expired form."""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest
import trio
from werkzeug.routing import Rule

from ledgerport.http.pages import PAGES

from .oauth_helpers import login, make_world

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

TIMEOUT = 120
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PATH_VALUES = {"version": "1"}
"""Path values a route checks before the token (an activated version must be a number)."""


def _unsafe_page_routes(app: Any) -> list[tuple[Rule, str]]:
    pages = {blueprint.name for blueprint in PAGES.blueprints}
    return [
        (rule, method)
        for rule in app.url_map.iter_rules()
        if rule.endpoint.partition(".")[0] in pages
        for method in sorted((rule.methods or set()) & UNSAFE)
    ]


def _stubbed(app: Any) -> list[str]:
    """Every page handler replaced by one that records that it ran (keeping what the handler
    declares, so the guard reads the same declaration)."""
    ran: list[str] = []
    for rule, _ in _unsafe_page_routes(app):
        handler = app.view_functions[rule.endpoint]

        @functools.wraps(handler)
        async def stub(*_: Any, _endpoint: str = rule.endpoint, **__: Any) -> tuple[str, int]:
            ran.append(_endpoint)
            return "handled", 200

        app.view_functions[rule.endpoint] = stub
    return ran


async def _signed_in(client: Any, admin_headers: dict[str, str]) -> str:
    """A signed-in browser on the test client: the CSRF token of a page it was shown."""
    world = await make_world(client, admin_headers)
    await login(client, world)
    page = await (await client.get("/console")).get_data(as_text=True)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert token is not None
    return token[1]


def _path(app: Any, rule: Rule) -> str:
    values = {name: PATH_VALUES.get(name, "x") for name in rule.arguments}
    adapter = app.url_map.bind("app.ledgerport.test")
    path: str = adapter.build(rule.endpoint, values)
    return path


async def test_the_sweep_finds_the_forms_of_every_page_blueprint(fresh_app: Any) -> None:
    swept = {rule.endpoint for rule, _ in _unsafe_page_routes(fresh_app)}
    assert {
        "pages.login_submit",
        "pages.logout",
        "authorize.decide",
        "device.device_submit",
        "marketplace.install",
        "console_pages.add_webhook",
        "console_pages.upload_image",
        "console_debug_pages.replay",
        "console_secrets.write_secret",
    } <= swept


@pytest.mark.parametrize("sent", ["missing", "empty", "forged"])
async def test_every_unsafe_page_route_refuses_a_form_without_its_token(
    fresh_app: Any, admin_headers: dict[str, str], sent: str
) -> None:
    client = fresh_app.test_client()
    with trio.fail_after(TIMEOUT):
        await _signed_in(client, admin_headers)
        ran = _stubbed(fresh_app)
        form = {"missing": {}, "empty": {"csrf_token": ""}, "forged": {"csrf_token": "forged"}}
        answers = {}
        for rule, method in _unsafe_page_routes(fresh_app):
            response = await client.open(
                _path(fresh_app, rule), method=method, form=form[sent] or {"other": "field"}
            )
            answers[rule.endpoint] = response.status_code
    assert ran == [], f"handlers ran without the form's token: {ran}"
    # Back to the page with a notice, the 400 page or the form again; the form again of an app
    # that is not the signed-in developer's (the sweep's ``x``) is not found.
    assert set(answers.values()) <= {303, 400, 404}, answers
    refused_404 = {endpoint for endpoint, status in answers.items() if status == 404}
    assert refused_404 <= {
        "console_pages.add_webhook",
        "console_pages.edit_webhook",
        "console_pages.add_function",
        "console_pages.edit_function",
        "console_secrets.write_secret",
    }, refused_404


async def test_every_unsafe_page_route_runs_its_handler_with_its_token(
    fresh_app: Any, admin_headers: dict[str, str]
) -> None:
    """The same requests with the token of a page the browser was shown reach each handler:
    the sweep's refusals are the guard's, not some other check's."""
    client = fresh_app.test_client()
    with trio.fail_after(TIMEOUT):
        token = await _signed_in(client, admin_headers)
        ran = _stubbed(fresh_app)
        routes = _unsafe_page_routes(fresh_app)
        for rule, method in routes:
            response = await client.open(
                _path(fresh_app, rule), method=method, form={"csrf_token": token}
            )
            assert response.status_code == 200, rule.endpoint
    assert sorted(ran) == sorted(rule.endpoint for rule, _ in routes)


async def test_a_route_that_declares_nothing_is_refused_all_the_same(
    fresh_app: Any, admin_headers: dict[str, str]
) -> None:
    """A form route added to a page blueprint without a word about expired forms: the guard
    still refuses it, with the 400 problem page, and its handler never runs."""
    ran: list[str] = []
    console = next(b for b in PAGES.blueprints if b.name == "console_pages")
    client = fresh_app.test_client()

    async def added(app_id: str) -> tuple[str, int]:
        ran.append(app_id)
        return "handled", 200

    fresh_app.add_url_rule(
        "/console/apps/<app_id>/added", f"{console.name}.added", added, methods=["POST"]
    )
    with trio.fail_after(TIMEOUT):
        token = await _signed_in(client, admin_headers)
        missing = await client.post("/console/apps/x/added", form={})
        forged = await client.post("/console/apps/x/added", form={"csrf_token": "forged"})
        held = await client.post("/console/apps/x/added", form={"csrf_token": token})
        page = await forged.get_data(as_text=True)
    assert (missing.status_code, forged.status_code, held.status_code) == (400, 400, 200)
    assert "The form expired: open the page and try again" in page
    assert ran == ["x"]
