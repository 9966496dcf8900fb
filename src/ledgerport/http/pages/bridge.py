"""The app bridge on the application host: embedded app pages and their session tokens.

``GET /apps/<app_id>?business_id=`` frames the app's URL for a signed-in member; its script
(``static/bridge.js``) fetches a session token from ``GET /bridge/session-token`` with the user's
cookie whenever the frame asks, and posts it to the frame's origin only. The token answer is
same-origin JSON (no CORS), never cached, and only for an app ACTIVE-installed in a business
where the user is an active member.

Two blueprints: the page's problems are answered as a page, the token endpoint's in the standard
envelope.
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit, urlunsplit

from quart import Blueprint
from quart.typing import ResponseReturnValue
from quart_schema import security_scheme

from ledgerport import apps, auth, books, catalog, storage
from ledgerport.errors import InvalidInput

from .._browser import current_user_id
from .._context import unit_of_work
from .._openapi import (
    NO_STORE,
    SIGNED_IN,
    SIGNED_IN_OR_SENT_TO_SIGN_IN,
    json_reply,
    operation,
    page,
    redirect_reply,
)
from .._session_tokens import SessionToken, session_token_answer
from ._design import record_words, with_article
from ._form_models import query_params, read_query
from ._frame import Way, current_user, html_page, login_redirect, page_csp, problem_page
from ._notices import form_page
from ._page_queries import EmbeddedQuery, ExtensionQuery, SessionTokenQuery

blueprint = Blueprint("bridge", __name__, static_folder="static", static_url_path="/bridge/static")
token_blueprint = Blueprint("bridge_token", __name__)

PAGE_TITLE = "Cannot open this app"
"""Title of the embedded page's problem pages."""
WAYS = (Way("Browse the marketplace", "/marketplace"), Way("Go to the home page", "/"))
"""Where an embedded page's problem offers to go on."""


def _embedded_csp(app_origin: str) -> str:
    return page_csp(frame_src=app_origin)


_EMBEDDED_ACCESS = (
    apps.AppNotFound,
    books.BusinessNotFound,
    books.UserNotFound,
    apps.AppNotActive,
    auth.NoActiveInstallation,
    apps.NotAMember,
)
"""Why the signed-in user may not view the app in the business: an unknown id, a stopped app, no
ACTIVE installation there, or not an active member (``auth.check_embedded_access``)."""


@blueprint.get("/apps/<app_id>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The page framing the app's URL"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "The app has no page to show"),
    raises=(storage.BadValue, InvalidInput, *_EMBEDDED_ACCESS, storage.StorageUnavailable),
    params=query_params(EmbeddedQuery),
)
async def embedded_app(app_id: str) -> ResponseReturnValue:
    """The page that frames an installed app's URL for a member of ``business_id``, the
    whole width of the window, in the host's frame: the app, the business, the way back; and
    the notice a one-click install left ("installed in ...")."""
    user = await current_user()
    if user is None:
        return login_redirect()
    business_id = read_query(EmbeddedQuery).business_id
    async with unit_of_work() as tx:
        app = await apps.get_app(tx, app_id)
        await auth.check_embedded_access(tx, app=app, business_id=business_id, user_id=user.id)
        business = await books.get_business(tx, business_id)
        listing = await apps.find_listing(tx, app.id)
    parts = urlsplit(app.app_url or "")
    if parts.scheme not in ("https", "http") or not parts.netloc:
        return await problem_page("This app has no page to show", 404, title=PAGE_TITLE, ways=WAYS)
    app_origin = f"{parts.scheme}://{parts.netloc}"
    live = listing.live if listing is not None else None
    return await form_page(
        "embedded.html",
        csp=_embedded_csp(app_origin),
        app_name=app.name,
        app_icon=live.content.icon_asset_id if live is not None else None,
        listing_slug=listing.slug if listing is not None and live is not None else None,
        business=business,
        app_url=app.app_url,
        app_origin=app_origin,
        app_id=app.id,
        business_id=business_id,
    )


_EXTENSION_ACCESS = (
    *_EMBEDDED_ACCESS,
    apps.ExtensionNotFound,
    apps.ExtensionNotGranted,
    InvalidInput,
)
EXTENSION_FRAME_SANDBOX = "allow-scripts allow-forms allow-same-origin allow-popups"
"""What an extension's frame may do: run its scripts against its own origin, submit its forms
and open popups; not navigate the page around it, nor download."""


@blueprint.get("/apps/<app_id>/extensions/<target>")
@security_scheme(SIGNED_IN_OR_SENT_TO_SIGN_IN)
@operation(
    page(200, "The page framing the extension"),
    redirect_reply("Not signed in: to the sign-in page, returning here"),
    page(404, "No such extension"),
    raises=(storage.BadValue, *_EXTENSION_ACCESS, storage.StorageUnavailable),
    params=query_params(ExtensionQuery),
)
async def extension_page(app_id: str, target: str) -> ResponseReturnValue:
    """The page that frames an app's extension at ``target`` for a member of ``business_id``,
    with the record it is shown for: the frame's address carries ``ledgerport_target``,
    ``ledgerport_business`` and, on a record, ``ledgerport_record``; the bridge hands the frame
    session tokens and renews them while the page is open."""
    user = await current_user()
    if user is None:
        return login_redirect()
    user_id = user.id
    asked = read_query(ExtensionQuery)
    business_id, record_id = asked.business_id, asked.record_id or ""
    kind = catalog.EXTENSION_TARGETS.get(target)
    async with unit_of_work() as tx:
        app = await apps.get_app(tx, app_id)
        await auth.check_embedded_access(tx, app=app, business_id=business_id, user_id=user_id)
        extension = await apps.get_extension(tx, app=app, target=target)
        await apps.check_extension_granted(tx, app=app, target=target, business_id=business_id)
        business = await books.get_business(tx, business_id)
    if kind is not None and kind.record_type is not None and not record_id:
        shown = with_article(kind.record_type)
        raise InvalidInput([f"record_id is required: {target} shows {shown}"])
    record_label = None
    if record_id and kind is not None and kind.record_type is not None:
        async with unit_of_work() as tx:
            try:
                document: books.Document | None = await books.get_record(
                    tx, business_id, kind.record_type, record_id
                )
            except books.RecordNotFound:
                document = None
        record_label = record_words(kind.record_type, document)
    context = {"ledgerport_target": target, "ledgerport_business": business_id}
    if record_id:
        context["ledgerport_record"] = record_id
    parts = urlsplit(extension.url)
    query = "&".join(filter(None, [parts.query, urlencode(context)]))
    frame_url = urlunsplit(parts._replace(query=query))
    app_origin = f"{parts.scheme}://{parts.netloc}"
    return await html_page(
        "extension.html",
        csp=_embedded_csp(app_origin),
        app_name=app.name,
        business=business,
        label=extension.label,
        frame_url=frame_url,
        app_origin=app_origin,
        app_id=app.id,
        business_id=business_id,
        target=target,
        record_id=record_id,
        record_label=record_label,
        sandbox=EXTENSION_FRAME_SANDBOX,
    )


@token_blueprint.get("/bridge/session-token")
@security_scheme(SIGNED_IN)
@operation(
    json_reply(200, SessionToken, "The session token", *NO_STORE),
    raises=(
        auth.NotSignedIn,
        InvalidInput,
        storage.BadValue,
        *_EMBEDDED_ACCESS,
        storage.StorageUnavailable,
    ),
    params=query_params(SessionTokenQuery),
)
async def session_token() -> tuple[SessionToken, int, dict[str, str]]:
    """A session token for the signed-in user viewing ``app_id`` in ``business_id``."""
    user_id = await current_user_id()
    if user_id is None:
        raise auth.NotSignedIn("Sign in to view apps")
    query = read_query(SessionTokenQuery)
    body = await session_token_answer(
        app_id=query.app_id, business_id=query.business_id, user_id=user_id, source="bridge"
    )
    return body, 200, {"Cache-Control": "no-store", "Pragma": "no-cache"}
