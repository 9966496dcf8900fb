"""The query strings of the marketplace, the sign-in, code and bridge pages and the function
pages, read into models: for each parameter a good value, none, a malformed one, one too long
and one holding a NUL. A bad value is a 400 in the route's envelope (a page, or the bridge
token's JSON) naming the parameter and why, never a 500 nor a default read in its place."""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
import trio

from ledgerport import queues
from ledgerport.clock import FrozenClock

from .oauth_helpers import World, install, login, make_world
from .test_extension_page import _world as extension_world
from .test_marketplace_install import _listed_app
from .webhook_world import hooked

TIMEOUT = 60
LONG = 3000
"""Characters of a value too long for any of these parameters."""
NUL = "\x00 must not contain NUL characters"
HANDLER = "export const handler = () => 1;\n"


@dataclass(frozen=True)
class Case:
    """One value of a parameter: the query it is sent as, and what the answer must be."""

    label: str
    query: str
    status: int
    words: str = ""


def _cases(
    name: str,
    *,
    good: str,
    malformed: str,
    refused: str,
    missing: int = 200,
    missing_words: str = "",
    long_words: str = "",
    bad_status: int = 400,
) -> list[Case]:
    """A parameter's five cases: ``good`` answers 200, none ``missing`` (with
    ``missing_words``), ``malformed`` and one LONG characters long are refused with ``refused``
    (or ``long_words``), and a NUL names the parameter."""
    return [
        Case("good", f"{name}={good}", 200),
        Case("missing", "", missing, missing_words),
        Case("malformed", f"{name}={malformed}", bad_status, refused),
        Case("too long", f"{name}={'b' * LONG}", 400, long_words or refused),
        Case("NUL", f"{name}=a%00b", 400, f"query parameter {name}" + NUL[1:]),
    ]


@dataclass(frozen=True)
class Page:
    """A page to ask: its path, the rest of its query (the other parameters) and the ids a
    good value names (``{business_id}`` in a case's query)."""

    path: str
    rest: str = ""
    ids: dict[str, str] = field(default_factory=dict)


Setup = Callable[[Any, dict[str, str]], Awaitable[Page]]
"""Makes what a page needs and signs in whoever reads it."""


async def _catalogue(client: Any, admin_headers: dict[str, str]) -> Page:
    return Page("/marketplace")


async def _sign_in(client: Any, admin_headers: dict[str, str]) -> Page:
    return Page("/login")


async def _device(client: Any, admin_headers: dict[str, str]) -> Page:
    await login(client, await make_world(client, admin_headers))
    return Page("/device")


async def _cli_login(client: Any, admin_headers: dict[str, str]) -> Page:
    await login(client, await make_world(client, admin_headers))
    return Page("/console/cli-login")


async def _install_page(client: Any, admin_headers: dict[str, str]) -> Page:
    await _listed_app(client, admin_headers)
    buyer = await make_world(client, admin_headers)
    await login(client, buyer)
    return Page("/marketplace/books-sync/install")


async def _installed(client: Any, admin_headers: dict[str, str]) -> World:
    world, console = await extension_world(client, admin_headers)
    await console.ok("PUT", "/extensions/invoice.details", {"path": "/ext"})
    await install(client, admin_headers, world, ("invoices:read",))
    await login(client, world)
    return world


async def _embedded(client: Any, admin_headers: dict[str, str]) -> Page:
    world = await _installed(client, admin_headers)
    return Page(f"/apps/{world.app_id}", ids={"business_id": world.business_id})


async def _extension(client: Any, admin_headers: dict[str, str]) -> Page:
    world = await _installed(client, admin_headers)
    path = f"/apps/{world.app_id}/extensions/invoice.details"
    return Page(path, f"business_id={world.business_id}")


async def _token_business(client: Any, admin_headers: dict[str, str]) -> Page:
    world = await _installed(client, admin_headers)
    ids = {"business_id": world.business_id}
    return Page("/bridge/session-token", f"app_id={world.app_id}", ids)


async def _token_app(client: Any, admin_headers: dict[str, str]) -> Page:
    world = await _installed(client, admin_headers)
    ids = {"app_id": world.app_id}
    return Page("/bridge/session-token", f"business_id={world.business_id}", ids)


async def _function(client: Any, admin_headers: dict[str, str], hook: Any) -> Page:
    await hook.console.ok("PUT", "/functions/f", {"source": HANDLER, "events": []})
    await login(client, hook.api.world)
    return Page(f"/console/apps/{hook.api.world.app_id}/functions/f")


A_DAY_AGO = datetime.fromtimestamp(FrozenClock().now() - 86400, UTC).strftime("%Y-%m-%dT%H:%M")
"""A moment the recovery may start from: a day before the tests' clock."""
RECORD = f"inv_{'0' * 24}"
STATUSES = ", ".join(queues.RUN_STATUSES)
PARAMETERS: dict[str, tuple[Setup | str, list[Case]]] = {
    "marketplace q": (
        _catalogue,
        [
            Case("good", "q=Books", 200),
            Case("missing", "", 200),
            Case("blank", "q=+++", 200),
            Case("too long", f"q={'b' * 101}", 400, "q must be at most 100 characters"),
            Case("NUL", "q=a%00b", 400, "query parameter q" + NUL[1:]),
        ],
    ),
    "marketplace category": (
        _catalogue,
        _cases(
            "category",
            good="accounting",
            malformed="games",
            refused="category must be a category of the marketplace, or empty for all",
        ),
    ),
    "sign-in next": (
        _sign_in,
        [
            Case("good", "next=/console", 200, 'name="next" value="/console"'),
            Case("missing", "", 200, 'name="next" value="/"'),
            Case("foreign", "next=https://evil.example", 200, 'name="next" value="/"'),
            Case("too long", f"next=/{'b' * 2000}", 400, "next must be at most 2000 characters"),
            Case("NUL", "next=/a%00b", 400, "query parameter next" + NUL[1:]),
        ],
    ),
    "device user_code": (
        _device,
        _cases(
            "user_code",
            good="bcdf-ghjk",
            malformed="1234-5678",
            refused="user_code must be the code shown: 8 letters, as BCDF-GHJK",
        ),
    ),
    "command line user_code": (
        _cli_login,
        _cases(
            "user_code",
            good="BCDF GHJK",
            malformed="BCDF-GHJ",
            refused="user_code must be the code shown: 8 letters, as BCDF-GHJK",
        ),
    ),
    "install business_id": (
        _install_page,
        _cases(
            "business_id",
            good=f"bus_{'0' * 24}",
            malformed="bus_1",
            refused="business_id must be the id of a business",
        ),
    ),
    "install scope": (
        _install_page,
        _cases(
            "scope",
            good="invoices:read&chosen=1",
            malformed="everything",
            refused="scope must be a scope, as invoices:read",
        ),
    ),
    "install chosen": (
        _install_page,
        _cases("chosen", good="1", malformed="yes", refused="chosen must be 1, or empty for all"),
    ),
    "embedded business_id": (
        _embedded,
        _cases(
            "business_id",
            good="{business_id}",
            malformed="bus_1",
            refused="business_id must be the id of a business",
            missing=400,
            missing_words="business_id is required",
        ),
    ),
    "extension record_id": (
        _extension,
        [
            Case("good", f"record_id={RECORD}", 200),
            Case("missing", "", 400, "record_id is required: invoice.details shows an invoice"),
            Case("malformed", "record_id=inv_1", 400, "record_id must be the id of a record"),
            Case("too long", f"record_id=inv_{'0' * LONG}", 400, "record_id must be the id of"),
            Case("NUL", "record_id=a%00b", 400, "query parameter record_id" + NUL[1:]),
        ],
    ),
    "bridge token business_id": (
        _token_business,
        _cases(
            "business_id",
            good="{business_id}",
            malformed="bus_1",
            refused="business_id must be the id of a business",
            missing=400,
            missing_words="business_id is required",
        ),
    ),
    "bridge token app_id": (
        _token_app,
        _cases(
            "app_id",
            good="{app_id}",
            malformed="app_1",
            refused="app_id must be the id of an app",
            missing=400,
            missing_words="app_id is required",
        ),
    ),
    "webhook status": (
        "webhook",
        _cases(
            "status",
            good="failed",
            malformed="lost",
            refused="status must be one of queued, retrying, delivered, failed, or empty for all",
        ),
    ),
    "webhook type": (
        "webhook",
        _cases(
            "type",
            good="invoice.created",
            malformed="nothing.happened",
            refused="type must be an event type of the catalog, or empty for all",
        ),
    ),
    "webhook eventId": (
        "webhook",
        _cases(
            "eventId",
            good=f"evt_{'0' * 24}",
            malformed="evt_1",
            refused="eventId must be the id of an event",
        ),
    ),
    "webhook after": (
        "webhook",
        [
            # Well-formed, but the next of no page of its deliveries: the page's own refusal.
            Case(
                "of no page",
                f"after=dlv_{'0' * 24}",
                400,
                "after must be the next of an earlier page of this webhook's deliveries",
            ),
            *_cases(
                "after", good="", malformed="dlv_1", refused="after must be the id of a webhook"
            )[1:],
        ],
    ),
    "webhook recover_since": (
        "webhook",
        _cases(
            "recover_since",
            good="2026-09-22T08:00",
            malformed="yesterday",
            refused="recover_since must be a date and time in UTC",
        ),
    ),
    "recovery since": (
        "recover",
        _cases(
            "since",
            good=A_DAY_AGO,
            malformed="2026-13-45T10:00",
            refused="since must be a date and time in UTC",
            missing=400,
            missing_words="since must be a date and time in UTC",
        ),
    ),
    "function status": (
        "function",
        _cases(
            "status",
            good="failed",
            malformed="lost",
            refused=f"status must be one of {STATUSES}, or empty for all",
        ),
    ),
    "version from": (
        "version",
        _cases("from", good="1", malformed="x", refused="from must be a line of the source"),
    ),
}


async def _text(response: Any) -> str:
    if response.mimetype == "application/json":
        answered = await response.get_json()
        return " ".join(answered.get("message", [])) or str(answered)
    return html.unescape(await response.get_data(as_text=True))


async def _ask(client: Any, page: Page, cases: list[Case]) -> list[tuple[int, str, str]]:
    """Each case's status, type and text, asked of ``page``."""
    answers = []
    for case in cases:
        query = "&".join(filter(None, [case.query.format(**page.ids), page.rest]))
        answer = await client.get(f"{page.path}?{query}" if query else page.path)
        answers.append((answer.status_code, answer.mimetype, await _text(answer)))
    return answers


@pytest.mark.parametrize("parameter", list(PARAMETERS), ids=list(PARAMETERS))
async def test_a_query_parameter_is_read_or_refused_saying_which_and_why(
    client: Any, admin_headers: dict[str, str], parameter: str
) -> None:
    setup, cases = PARAMETERS[parameter]
    with trio.fail_after(TIMEOUT):
        if isinstance(setup, str):
            async with hooked(client, admin_headers, []) as hook:
                page = await _function(client, admin_headers, hook)
                endpoint = f"/console/apps/{hook.api.world.app_id}/webhooks/{hook.webhook['id']}"
                page = {
                    "version": Page(f"{page.path}/versions/1"),
                    "webhook": Page(endpoint),
                    "recover": Page(f"{endpoint}/recover"),
                }.get(setup, page)
                answers = await _ask(client, page, cases)
        else:
            page = await setup(client, admin_headers)
            answers = await _ask(client, page, cases)
    json_route = page.path.startswith("/bridge/")
    for case, (status, mimetype, text) in zip(cases, answers, strict=True):
        assert status == case.status, (case.label, re.findall(r'class="alert"[^>]*>(.*?)<', text))
        assert case.words in text, (case.label, text[:3000])
        assert mimetype == ("application/json" if json_route else "text/html"), case.label
