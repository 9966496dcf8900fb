"""The console's blueprint: every route acts as the signed-in developer (their session cookie
or a developer token), on an app they develop; anyone else's app is not found (404), whatever
the request sends.

A browser sends the session cookie with whatever page makes the request: ``SameSite=Lax``
keeps other sites' cross-site posts out, but not a sibling subdomain's (same site, another
origin). So a request authenticated by the cookie with an unsafe method must come from the
service's own origin (``Sec-Fetch-Site: same-origin``, or an ``Origin`` of the service) or carry
the CSRF token of one of its pages (``X-CSRF-Token``); otherwise it is refused (403
CROSS_SITE_REQUEST). A developer token is not sent by a browser on its own: it is unaffected."""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime

from quart import Blueprint, g, request
from quart_schema import security_scheme_blueprint

from ledgerport import apps, auth, storage

from .._browser import SAFE_METHODS, csrf_valid, current_user_id, is_service_origin
from .._context import bearer_token, platform, unit_of_work
from .._function_budget import UPLOAD_ENDPOINTS, refuse_spent_budget
from .._openapi import blueprint_raises

blueprint = Blueprint("developer", __name__, url_prefix="/developer")
security_scheme_blueprint(blueprint, [{"developerToken": []}, {"session": []}])
blueprint_raises(
    blueprint,
    auth.NotSignedIn,
    auth.CrossSiteRequest,
    apps.AppNotFound,
    storage.StorageUnavailable,
)


@blueprint.before_request
async def _developer() -> None:
    """Who is calling: a developer token (Authorization: Bearer) or the browser's session."""
    token = bearer_token()
    user_id: str | None
    if token is not None:
        p = platform()
        async with unit_of_work() as tx:
            user_id = await auth.developer_token_user(tx, p.keyring, token)
    else:
        user_id = await current_user_id()
        if user_id is not None and request.method not in SAFE_METHODS and not _from_our_pages():
            raise auth.CrossSiteRequest()
    if user_id is None:
        raise auth.NotSignedIn("A developer token or a signed-in session is required")
    g.developer_id = user_id
    app_id = (request.view_args or {}).get("app_id")
    if isinstance(app_id, str):
        # Another developer's app is not found whatever the request sends (contract.md: others
        # get 404), so before its body is read; each handler looks again in its transaction.
        async with unit_of_work() as tx:
            await developed_app(tx, app_id)
        if request.endpoint in UPLOAD_ENDPOINTS:
            await refuse_spent_budget(app_id)


CSRF_HEADER = "X-CSRF-Token"
"""Where a cookie-authenticated script sends its page's CSRF token (the forms' ``csrf_token``)."""


def _from_our_pages() -> bool:
    """Whether the browser says the request comes from the service's own origin, or it carries
    a page's CSRF token. ``Sec-Fetch-Site`` is the browser's own word (no page can set it); an
    ``Origin`` must be the application host's or the API host's exactly."""
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        if fetch_site == "same-origin":
            return True
    else:
        origin = request.headers.get("Origin")
        if origin is not None and is_service_origin(origin):
            return True
    return csrf_valid(request.headers.get(CSRF_HEADER))


def developer_id() -> str:
    user_id: str = g.developer_id
    return user_id


async def developed_app(tx: storage.Transaction, app_id: str) -> apps.App:
    """The app, when the caller develops it; AppNotFound otherwise (whose it is stays hidden)."""
    return await apps.get_developed_app(tx, app_id, developer_id())


def iso_time(moment: float) -> str:
    """A moment as the console shows it: ISO 8601 in UTC, to the millisecond, ``Z``: what
    ``datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")`` writes (its
    microseconds rounded half to even, then cut to milliseconds), the whole second's text
    kept for the next moments in it (a page or a stream writes many in the same seconds)."""
    fraction, whole = math.modf(moment)
    micro = round(fraction * 1_000_000)
    if micro >= 1_000_000:
        micro -= 1_000_000
        whole += 1
    elif micro < 0:
        micro += 1_000_000
        whole -= 1
    return f"{_iso_second(int(whole))}.{micro // 1000:03d}Z"


@functools.lru_cache(maxsize=1024)
def _iso_second(whole: int) -> str:
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
