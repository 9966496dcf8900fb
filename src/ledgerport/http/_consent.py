"""The consent form shared by the authorization page and the device verification page, and
what the marketplace's install form shows the same way: scopes in plain words, the developer."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from quart import Response, request

from ledgerport import apps, books, catalog
from ledgerport.storage import Transaction

from ._browser import current_user_id, form_page, page_csp
from ._context import unit_of_work


async def consent_page(
    *,
    action: str,
    app: apps.App,
    scopes: Sequence[str],
    businesses: Sequence[books.Business],
    hidden: dict[str, str],
    redirects_to: str | None = None,
) -> Response:
    """Who is signed in (with a way to switch account), the app's name and developer (with a
    link to its marketplace listing when it has a live one), the requested scopes in plain
    words, a ``business_id`` select and approve/deny buttons; the form posts back to
    ``action`` with ``hidden`` fields and a CSRF token. ``redirects_to`` is the URI the form's
    answer redirects to, when it leaves this origin (the page's form-action allows its
    origin)."""
    user_id = await current_user_id()
    async with unit_of_work() as tx:
        user = await books.get_user(tx, user_id) if user_id else None
        developer = await developer_name(tx, app)
        listing = await apps.find_listing(tx, app.id)
    here = request.full_path.rstrip("?") if request.method == "GET" else "/"
    return await form_page(
        "consent.html",
        csp=None if redirects_to is None else page_csp(_source(redirects_to)),
        action=action,
        app_name=app.name,
        developer=developer,
        listing_slug=listing.slug if listing is not None and listing.live is not None else None,
        user=user,
        switch_next=here,
        scopes=described_scopes(scopes),
        businesses=businesses,
        hidden=hidden,
    )


def described_scopes(scopes: Sequence[str]) -> list[tuple[str, str]]:
    """Each scope with its plain-language description, as the consent and install forms show
    them."""
    return [(scope, catalog.SCOPE_DESCRIPTIONS.get(scope, scope)) for scope in scopes]


async def developer_name(tx: Transaction, app: apps.App) -> str | None:
    """Who makes the app, as the consent and install forms name them: their name, else their
    email; None for a dynamically registered client, which has no developer."""
    if app.developer_user_id is None:
        return None
    developer = await books.get_user(tx, app.developer_user_id)
    return developer.name or developer.email


def _source(uri: str) -> str:
    """The CSP source that allows ``uri``'s origin. CSP has no form for an IPv6 literal (a
    loopback redirect URI such as ``http://[::1]:8080/cb``): its scheme stands in there; the
    form itself still posts only here, and the service redirects only to registered URIs."""
    parts = urlsplit(uri)
    if parts.netloc.startswith("["):
        return f"{parts.scheme}:"
    return f"{parts.scheme}://{parts.netloc}"
