"""The consent form shared by the authorization page and the device verification page: the
app (its icon, name and developer), the business first, what its installation already grants
and what is new, where the browser goes next, and Approve or Cancel."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from quart import Response, request

from ledgerport import access, apps, books
from ledgerport.storage import Transaction

from .._context import unit_of_work
from ._design import ScopeWords, described_scopes
from ._field_problems import FormField, FormProblems, refused_beside
from ._frame import current_user, page_csp
from ._notices import form_page

CONSENT_FIELDS = (FormField("business_id", "Business", ("business_id",)),)
"""The consent form's one field a refusal can be about."""
REFUSED_APPROVALS = (access.BusinessNotOffered, apps.InstallNotPermitted)
"""The refusals of an approval the consent form comes back with, beside its business: the held
request stays (the refusal's transaction did not use it up), so the person chooses again."""


def consent_problems(refused: Exception) -> FormProblems:
    """Why nothing was approved, beside the business field (the business the person may not
    choose, or may not install the app in)."""
    return refused_beside(
        (str(refused),), CONSENT_FIELDS, outcome="nothing was approved", owner="business_id"
    )


@dataclass(frozen=True)
class AskedScope:
    """A requested scope as the consent form shows it, with where it is granted already."""

    words: ScopeWords
    granted_in: tuple[str, ...]
    """Names of the offered businesses whose installation grants it already."""


async def consent_page(
    *,
    action: str,
    app: apps.App,
    scopes: Sequence[str],
    offers: Sequence[access.Standing],
    hidden: dict[str, str],
    redirects_to: str | None = None,
    device_code: str | None = None,
    problems: FormProblems | None = None,
) -> Response:
    """Who is signed in (with a way to switch account), the app's icon, name and developer
    (with a link to its marketplace listing when it has a live one), a ``business_id`` select
    of ``offers`` (the one the rule prefers selected), the requested scopes in plain words,
    those the business grants already apart from the new ones and write access marked, where
    the answer goes, and Approve or Cancel; the form posts back to ``action`` with ``hidden``
    fields and a CSRF token. ``redirects_to`` is the URI the form's answer redirects to, when it
    leaves this origin (the page's form-action allows its origin); ``device_code`` the user
    code the device shows, shown again to compare; ``problems`` why the form came back (a
    400, the refusal beside the business field)."""
    user = await current_user()
    async with unit_of_work() as tx:
        developer = await developer_name(tx, app)
        listing = await apps.find_listing(tx, app.id)
    live = listing.live if listing is not None else None
    asked = [
        AskedScope(
            words,
            tuple(o.business.name for o in offers if o.granted and words.scope in o.granted),
        )
        for words in described_scopes(scopes)
    ]
    here = request.full_path.rstrip("?") if request.method == "GET" else "/"
    return await form_page(
        "consent.html",
        csp=None if redirects_to is None else page_csp(_source(redirects_to)),
        action=action,
        app_name=app.name,
        app_icon=live.content.icon_asset_id if live is not None else None,
        developer=developer,
        listing_slug=listing.slug if listing is not None and live is not None else None,
        user=user,
        switch_next=here,
        new_scopes=[s for s in asked if len(s.granted_in) < len(offers)],
        granted_scopes=[s for s in asked if len(s.granted_in) == len(offers)],
        offers=offers,
        chosen=access.preselected(offers, scopes, through="consent"),
        hidden=hidden,
        returns_to=_origin(redirects_to) if redirects_to is not None else None,
        device_code=device_code,
        problems=problems,
        status=400 if problems else 200,
        document_host=urlsplit(app.client_id).hostname if app.metadata_document else None,
    )


async def developer_name(tx: Transaction, app: apps.App) -> str | None:
    """Who makes the app, as the consent and install forms name them: their name, else their
    email; None for a dynamically registered client, which has no developer."""
    if app.developer_user_id is None:
        return None
    developer = await books.get_user(tx, app.developer_user_id)
    return developer.name or developer.email


def _origin(uri: str) -> str:
    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc}"


def _source(uri: str) -> str:
    """The CSP source that allows ``uri``'s origin. CSP has no form for an IPv6 literal (a
    loopback redirect URI such as ``http://[::1]:8080/cb``): its scheme stands in there; the
    form itself still posts only here, and the service redirects only to registered URIs."""
    parts = urlsplit(uri)
    if parts.netloc.startswith("["):
        return f"{parts.scheme}:"
    return f"{parts.scheme}://{parts.netloc}"
