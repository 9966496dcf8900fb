"""An app's UI extensions: a page of the app (a path on its App URL's origin) shown at one of the
service's extension targets (contract.md: App platform surfaces; ``catalog.EXTENSION_TARGETS``).

The path must name a page on the App URL's origin and nothing else, so it is refused
(EXTENSION_PATH_INVALID) when it holds a backslash, whitespace or a control character (raw, or
percent-encoded at any depth before the query), has dot segments (encoded or not), starts with
``//`` (another host), carries a scheme or a fragment, otherwise resolves anywhere but that
origin, or is longer than ``catalog.EXTENSION_PATH_MAX_LENGTH``. A query may carry encoded
characters: they are its values. A target on a record needs that record type's read scope
among the app's registered scopes (EXTENSION_SCOPE_REQUIRED). An app declares at most one
extension per target: declaring again replaces it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urljoin, urlsplit

from ledgerport import catalog
from ledgerport.errors import InvalidInput
from ledgerport.storage import Row, Transaction

from ._apps import App, active_installation
from ._errors import (
    ExtensionNotFound,
    ExtensionNotGranted,
    ExtensionPathInvalid,
    ExtensionScopeRequired,
)

_FORBIDDEN = re.compile(r"[\\\s\x00-\x1f\x7f]")
_DOT_SEGMENT = re.compile(r"(^|/)\.{1,2}(/|$)")
DECODING_ROUNDS = 5
"""Percent-decodings looked through for a forbidden character or a dot segment."""


@dataclass(frozen=True)
class Extension:
    app_id: str
    target: str
    path: str
    label: str
    url: str
    """The page's address: the path resolved against the App URL."""
    created_at: float
    updated_at: float


def extension_url(app_url: str, path: str) -> str:
    """The page that ``path`` names on ``app_url``'s origin; ExtensionPathInvalid when it names
    anything else (see the module docstring), or is longer than the paths kept."""
    if len(path) > catalog.EXTENSION_PATH_MAX_LENGTH:
        raise ExtensionPathInvalid(
            f"the path must be at most {catalog.EXTENSION_PATH_MAX_LENGTH} characters"
        )
    if not path.startswith("/") or path.startswith("//"):
        raise ExtensionPathInvalid("the path must start with a single /")
    if "#" in path:
        raise ExtensionPathInvalid("the path must not carry a fragment")
    if _FORBIDDEN.search(path):
        raise ExtensionPathInvalid(
            "the path must not hold a backslash, whitespace or a control character"
        )
    # The part before the query, decoded as often as it decodes: a query's encoded characters
    # are its values, the path's could become a way elsewhere.
    decoded = path.split("?", 1)[0]
    for _ in range(DECODING_ROUNDS):
        if _FORBIDDEN.search(decoded):
            raise ExtensionPathInvalid(
                "the path must not hold a backslash, whitespace or a control character"
            )
        if _DOT_SEGMENT.search(decoded):
            raise ExtensionPathInvalid("the path must not have . or .. segments")
        if decoded.startswith("//"):
            raise ExtensionPathInvalid("the path must start with a single /")
        deeper = unquote(decoded)
        if deeper == decoded:
            break
        decoded = deeper
    else:
        raise ExtensionPathInvalid("the path is encoded too many times over")
    base = urlsplit(app_url)
    url = urljoin(app_url, path)
    resolved = urlsplit(url)
    if (resolved.scheme, resolved.netloc) != (base.scheme, base.netloc):
        raise ExtensionPathInvalid("the path does not resolve to a page on the App URL's origin")
    return url


def _from_row(row: Row, app_url: str) -> Extension:
    return Extension(
        app_id=row["app_id"],
        target=row["target"],
        path=row["path"],
        label=row["label"],
        url=urljoin(app_url, row["path"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


async def put_extension(
    tx: Transaction, *, now: float, app: App, target: str, path: str, label: str | None
) -> Extension:
    """Declare (or replace) ``app``'s extension at ``target``."""
    kind = catalog.EXTENSION_TARGETS.get(target)
    if kind is None:
        raise InvalidInput(
            [f"target must be one of the extension targets: {', '.join(catalog.EXTENSION_TARGETS)}"]
        )
    if not app.app_url:
        raise ExtensionPathInvalid("the app has no App URL to resolve the path against")
    url = extension_url(app.app_url, path)
    if kind.scope is not None and kind.scope not in app.scopes:
        raise ExtensionScopeRequired(target, kind.scope)
    shown = (label or "").strip() or app.name
    await tx.execute(
        "INSERT INTO app_extensions (app_id, target, path, label, created_at, updated_at)"
        " VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (app_id, target)"
        " DO UPDATE SET path = excluded.path, label = excluded.label,"
        " updated_at = excluded.updated_at",
        app.id,
        target,
        path,
        shown,
        now,
    )
    row = await tx.fetchrow(
        "SELECT * FROM app_extensions WHERE app_id = $1 AND target = $2", app.id, target
    )
    assert row is not None
    return Extension(
        app.id, target, path, shown, url, float(row["created_at"]), float(row["updated_at"])
    )


async def list_extensions(tx: Transaction, app: App) -> list[Extension]:
    rows = await tx.fetch("SELECT * FROM app_extensions WHERE app_id = $1", app.id)
    order = list(catalog.EXTENSION_TARGETS)
    rows.sort(key=lambda row: order.index(row["target"]) if row["target"] in order else len(order))
    return [_from_row(row, app.app_url or "") for row in rows]


async def delete_extension(tx: Transaction, *, app: App, target: str) -> None:
    removed = await tx.execute(
        "DELETE FROM app_extensions WHERE app_id = $1 AND target = $2", app.id, target
    )
    if not removed:
        raise ExtensionNotFound(target)


async def get_extension(tx: Transaction, *, app: App, target: str) -> Extension:
    """The app's extension at ``target``; ExtensionNotFound when it declared none there."""
    row = await tx.fetchrow(
        "SELECT * FROM app_extensions WHERE app_id = $1 AND target = $2", app.id, target
    )
    if row is None or not app.app_url:
        raise ExtensionNotFound(target)
    return _from_row(row, app.app_url)


async def check_extension_granted(
    tx: Transaction, *, app: App, target: str, business_id: str
) -> None:
    """An extension on a record shows only where the app's installation was granted that
    record type's read scope: ExtensionNotGranted otherwise."""
    kind = catalog.EXTENSION_TARGETS.get(target)
    if kind is None or kind.scope is None:
        return
    installation = await active_installation(tx, app.id, business_id)
    if installation is None or kind.scope not in installation.scopes:
        raise ExtensionNotGranted(target, kind.scope)
