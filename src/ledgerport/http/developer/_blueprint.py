"""The console's blueprint: every route acts as the signed-in developer (their session cookie
or a developer token), on an app they develop; anyone else's app is not found (404)."""

from __future__ import annotations

from datetime import UTC, datetime

from quart import Blueprint, g, request
from quart_schema import security_scheme_blueprint

from ledgerport import apps, auth, storage

from .._browser import current_user_id
from .._context import platform, unit_of_work
from .._openapi import blueprint_raises

blueprint = Blueprint("developer", __name__, url_prefix="/developer")
security_scheme_blueprint(blueprint, [{"developerToken": []}, {"session": []}])
blueprint_raises(blueprint, auth.NotSignedIn, apps.AppNotFound, storage.StorageUnavailable)


@blueprint.before_request
async def _developer() -> None:
    """Who is calling: a developer token (Authorization: Bearer) or the browser's session."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    user_id: str | None
    if scheme.lower() == "bearer" and token.strip():
        p = platform()
        async with unit_of_work() as tx:
            user_id = await auth.developer_token_user(tx, p.keyring, token.strip())
    else:
        user_id = await current_user_id()
    if user_id is None:
        raise auth.NotSignedIn("A developer token or a signed-in session is required")
    g.developer_id = user_id


def developer_id() -> str:
    user_id: str = g.developer_id
    return user_id


async def developed_app(tx: storage.Transaction, app_id: str) -> apps.App:
    """The app, when the caller develops it; AppNotFound otherwise (whose it is stays hidden)."""
    return await apps.get_developed_app(tx, app_id, developer_id())


def iso_time(moment: float) -> str:
    """A moment as the console shows it: ISO 8601 in UTC, to the millisecond, ``Z``."""
    return (
        datetime.fromtimestamp(moment, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )
