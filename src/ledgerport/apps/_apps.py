"""Apps (OAuth clients) and their installations in businesses."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ledgerport import catalog
from ledgerport.books import (
    get_business,
    get_membership,
    get_user,
    record_event,
    role_permissions,
)
from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.keys import Keyring, new_token
from ledgerport.storage import Reader, Row, Transaction

from ._errors import (
    AppNotActive,
    AppNotFound,
    AppNotReviewed,
    InstallationNotFound,
    InstallNotPermitted,
    NotAMember,
    ScopesNotRegistered,
    UnsupportedApiVersion,
)
from ._uris import redirect_uri_problems, web_url_problem

AppType = Literal["CONFIDENTIAL", "PUBLIC"]
AppStatus = Literal["ACTIVE", "SUSPENDED", "DEACTIVATED"]
APP_TYPES: tuple[AppType, ...] = ("CONFIDENTIAL", "PUBLIC")
APP_STATUSES: tuple[AppStatus, ...] = ("ACTIVE", "SUSPENDED", "DEACTIVATED")
ENTITLEMENTS_CHANNEL = "entitlements"
"""Notified by every commit that changes what a webhook delivery's send-time check reads: an
app's status, an installation's state or scopes, a webhook's URL, switch or secrets."""
APPS_CHANNEL = "apps"
"""Notified by every commit that changes an app's row (``AppDirectory`` forgets the apps it
keeps)."""


@dataclass(frozen=True)
class App:
    id: str
    client_id: str
    name: str
    type: AppType
    client_secret_hash: str | None
    redirect_uris: tuple[str, ...]
    scopes: tuple[str, ...]
    developer_user_id: str | None
    reviewed: bool
    status: AppStatus
    app_url: str | None
    pinned_version: str | None
    registration: dict[str, object] | None = None
    """Client metadata as registered at ``/oauth/register`` (RFC 7591); None otherwise."""

    @classmethod
    def from_row(cls, row: Row) -> App:
        return cls(
            id=row["id"],
            client_id=row["client_id"],
            name=row["name"],
            type=row["type"],
            client_secret_hash=row["client_secret_hash"],
            redirect_uris=tuple(json.loads(row["redirect_uris"])),
            scopes=tuple(json.loads(row["scopes"])),
            developer_user_id=row["developer_user_id"],
            reviewed=bool(row["reviewed"]),
            status=row["status"],
            app_url=row["app_url"],
            pinned_version=row["pinned_version"],
            registration=json.loads(row["registration"]) if row["registration"] else None,
        )

    @property
    def active(self) -> bool:
        return self.status == "ACTIVE"

    @property
    def metadata_document(self) -> bool:
        """Whether the app is a client named by its metadata document's URL (its client_id):
        made by the authorization endpoint from the document, never reviewed."""
        return self.client_id.startswith(("https://", "http://"))

    @property
    def reaches_any_business(self) -> bool:
        """Whether the app may be connected to any business, not only sandboxes: a reviewed
        app, or a metadata document client (limited to the scopes the operator allows it)."""
        return self.reviewed or self.metadata_document


@dataclass(frozen=True)
class Installation:
    id: str
    app_id: str
    business_id: str
    user_id: str
    scopes: tuple[str, ...]
    state: str

    @classmethod
    def from_row(cls, row: Row) -> Installation:
        return cls(
            row["id"],
            row["app_id"],
            row["business_id"],
            row["user_id"],
            tuple(json.loads(row["scopes"])),
            row["state"],
        )


def ordered_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    """Scopes deduplicated in the catalog's order."""
    wanted = set(scopes)
    return tuple(s for s in catalog.SCOPES if s in wanted)


def _scope_problems(scopes: Sequence[str], field: str) -> list[str]:
    return [f"{field} contains unknown scope {s}" for s in scopes if not catalog.is_scope(s)]


async def create_app(
    tx: Transaction,
    keyring: Keyring,
    *,
    now: float,
    name: str,
    type: AppType,
    redirect_uris: Sequence[str],
    scopes: Sequence[str],
    developer_user_id: str | None,
    reviewed: bool = False,
    app_url: str | None = None,
    registration: dict[str, object] | None = None,
) -> tuple[App, str | None]:
    """Register an app; answers it and, for a CONFIDENTIAL app, its client secret (shown once).

    ``developer_user_id`` is None only for a client registered dynamically (RFC 7591), which no
    developer owns in the console.
    """
    problems = redirect_uri_problems(list(redirect_uris)) + _scope_problems(scopes, "scopes")
    if type not in APP_TYPES:
        problems.append("type must be CONFIDENTIAL or PUBLIC")
    if not name.strip():
        problems.append("name must not be empty")
    app_url_problem = web_url_problem(app_url) if app_url is not None else None
    if app_url_problem:
        problems.append(f"appUrl {app_url_problem}")
    if problems:
        raise InvalidInput(problems)
    if developer_user_id is not None:
        await get_user(tx, developer_user_id)
    secret = new_token(catalog.CLIENT_SECRET_PREFIX) if type == "CONFIDENTIAL" else None
    app = App(
        id=new_id("app"),
        client_id=new_id("cid"),
        name=name.strip(),
        type=type,
        client_secret_hash=keyring.hash_token(secret) if secret else None,
        redirect_uris=tuple(redirect_uris),
        scopes=ordered_scopes(scopes),
        developer_user_id=developer_user_id,
        reviewed=reviewed,
        status="ACTIVE",
        app_url=app_url,
        pinned_version=None,
        registration=registration,
    )
    await tx.execute(
        "INSERT INTO apps (id, client_id, name, type, client_secret_hash, redirect_uris, scopes,"
        " developer_user_id, reviewed, status, app_url, created_at, registration)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        app.id,
        app.client_id,
        app.name,
        app.type,
        app.client_secret_hash,
        json.dumps(list(app.redirect_uris)),
        json.dumps(list(app.scopes)),
        app.developer_user_id,
        app.reviewed,
        app.status,
        app.app_url,
        now,
        json.dumps(registration) if registration is not None else None,
    )
    return app, secret


async def get_app(tx: Transaction, app_id: str) -> App:
    row = await tx.fetchrow("SELECT * FROM apps WHERE id = $1", app_id)
    if row is None:
        raise AppNotFound(app_id)
    return App.from_row(row)


async def get_developed_app(tx: Transaction, app_id: str, developer_user_id: str) -> App:
    """The app, when ``developer_user_id`` develops it; AppNotFound otherwise (whose it is
    stays hidden)."""
    app = await get_app(tx, app_id)
    if app.developer_user_id != developer_user_id:
        raise AppNotFound(app_id)
    return app


_APP_COLUMNS = (
    "id",
    "client_id",
    "name",
    "type",
    "client_secret_hash",
    "redirect_uris",
    "scopes",
    "developer_user_id",
    "reviewed",
    "status",
    "app_url",
    "pinned_version",
    "registration",
)


def app_columns(alias: str) -> str:
    """The columns of the apps row ``alias`` that :func:`developed_app_in` reads, each named
    ``app__`` and its name, to be read beside another table's row in one statement."""
    return ", ".join(f"{alias}.{column} AS app__{column}" for column in _APP_COLUMNS)


def developed_app_in(row: Row | None, app_id: str, developer_user_id: str) -> App:
    """The app read by :func:`app_columns` in ``row`` (None: no such app), when
    ``developer_user_id`` develops it; AppNotFound otherwise, as :func:`get_developed_app`."""
    if row is None or row["app__developer_user_id"] != developer_user_id:
        raise AppNotFound(app_id)
    return App.from_row({column: row[f"app__{column}"] for column in _APP_COLUMNS})


async def apps_developed_by(tx: Transaction, user_id: str) -> list[App]:
    """The apps ``user_id`` develops, by name."""
    rows = await tx.fetch(
        "SELECT * FROM apps WHERE developer_user_id = $1 ORDER BY name, id", user_id
    )
    return [App.from_row(row) for row in rows]


async def find_app_by_client_id(reader: Reader, client_id: str) -> App | None:
    row = await reader.fetchrow("SELECT * FROM apps WHERE client_id = $1", client_id)
    return None if row is None else App.from_row(row)


async def set_app_status(tx: Transaction, app_id: str, status: str) -> App:
    if status not in APP_STATUSES:
        raise InvalidInput(["status must be one of ACTIVE, SUSPENDED, DEACTIVATED"])
    changed = await tx.execute("UPDATE apps SET status = $1 WHERE id = $2", status, app_id)
    if not changed:
        raise AppNotFound(app_id)
    await tx.notify(ENTITLEMENTS_CHANNEL)
    await tx.notify(APPS_CHANNEL)
    return await get_app(tx, app_id)


async def set_app_reviewed(tx: Transaction, app_id: str, reviewed: bool) -> App:
    """Record the outcome of the app's review: a reviewed app may connect to any business.

    Withdrawing the review keeps existing installations; new consents are limited to sandbox
    businesses again.
    """
    changed = await tx.execute("UPDATE apps SET reviewed = $1 WHERE id = $2", reviewed, app_id)
    if not changed:
        raise AppNotFound(app_id)
    await tx.notify(APPS_CHANNEL)
    return await get_app(tx, app_id)


def resolve_api_version(
    requested: str | None, pinned: str | None, *, today: datetime.date
) -> catalog.ApiVersion:
    """The version a call is served in: the Service-Version header, else the app's pin, else
    the current one; UnsupportedApiVersion when that one does not exist or is past sunset.

    ``requested`` is None only when the header is absent: sent empty, it names no version
    (spec: a version that does not exist is UNSUPPORTED_API_VERSION), never the pin."""
    name = requested if requested is not None else pinned or catalog.CURRENT_API_VERSION
    version = catalog.resolve_version(name, today)
    if version is None:
        raise UnsupportedApiVersion(name)
    return version


async def pin_version(
    tx: Transaction, app_id: str, version: str | None, *, today: datetime.date
) -> App:
    """Pin the app to a supported version (its calls without a header get it), or unpin."""
    if version is not None and catalog.resolve_version(version, today) is None:
        raise UnsupportedApiVersion(version)
    changed = await tx.execute("UPDATE apps SET pinned_version = $1 WHERE id = $2", version, app_id)
    if not changed:
        raise AppNotFound(app_id)
    await tx.notify(APPS_CHANNEL)
    return await get_app(tx, app_id)


async def get_installation(tx: Transaction, installation_id: str) -> Installation:
    row = await tx.fetchrow("SELECT * FROM installations WHERE id = $1", installation_id)
    if row is None:
        raise InstallationNotFound(installation_id)
    return Installation.from_row(row)


async def active_installation(
    tx: Transaction, app_id: str, business_id: str
) -> Installation | None:
    row = await tx.fetchrow(
        "SELECT * FROM installations WHERE app_id = $1 AND business_id = $2 AND state = 'ACTIVE'",
        app_id,
        business_id,
    )
    return None if row is None else Installation.from_row(row)


async def install(
    tx: Transaction,
    *,
    now: float,
    app_id: str,
    business_id: str,
    user_id: str,
    scopes: Sequence[str],
) -> Installation:
    """Install the app in the business, or widen an ACTIVE installation to the union of scopes.

    Emits ``app.installed`` for a new (or renewed) installation and ``app.scopes_updated`` when
    an ACTIVE one gains scopes. Installing or widening needs the user's role to hold
    ``apps:install`` (owner and admin by default); without it, only scopes the ACTIVE
    installation already grants may be approved (InstallNotPermitted otherwise).
    """
    problems = _scope_problems(scopes, "scopes")
    if not scopes:
        problems.append("scopes must name at least one scope")
    if problems:
        raise InvalidInput(problems)
    app = await get_app(tx, app_id)
    business = await get_business(tx, business_id)
    if not app.active:
        raise AppNotActive(app_id)
    unregistered = [s for s in ordered_scopes(scopes) if s not in app.scopes]
    if unregistered:
        raise ScopesNotRegistered(unregistered)
    if not app.reaches_any_business and not business.sandbox:
        raise AppNotReviewed()
    membership = await get_membership(tx, business_id, user_id)
    if membership is None or not membership.active:
        await get_user(tx, user_id)
        raise NotAMember(user_id, business_id)
    may_install = catalog.PERMISSION_APPS_INSTALL in await role_permissions(
        tx, business_id, membership.role
    )

    row = await tx.fetchrow(
        "SELECT * FROM installations WHERE app_id = $1 AND business_id = $2", app_id, business_id
    )
    if row is not None and row["state"] == "ACTIVE":
        current = Installation.from_row(row)
        widened = ordered_scopes([*current.scopes, *scopes])
        await tx.notify(ENTITLEMENTS_CHANNEL)
        if widened == current.scopes:
            return current
        if not may_install:
            raise InstallNotPermitted()
        await tx.execute(
            "UPDATE installations SET scopes = $1, updated_at = $2 WHERE id = $3",
            json.dumps(list(widened)),
            now,
            current.id,
        )
        widened_installation = Installation(
            current.id, app_id, business_id, current.user_id, widened, "ACTIVE"
        )
        await record_installation_event(
            tx,
            now=now,
            type="app.scopes_updated",
            installation=widened_installation,
            data={"scopes": list(widened), "previousScopes": list(current.scopes)},
        )
        return widened_installation

    if not may_install:
        raise InstallNotPermitted()
    granted = ordered_scopes(scopes)
    if row is None:
        installation = Installation(new_id("ins"), app_id, business_id, user_id, granted, "ACTIVE")
        await tx.execute(
            "INSERT INTO installations (id, app_id, business_id, user_id, scopes, state,"
            " created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 'ACTIVE', $6, $6)",
            installation.id,
            app_id,
            business_id,
            user_id,
            json.dumps(list(granted)),
            now,
        )
    else:
        installation = Installation(row["id"], app_id, business_id, user_id, granted, "ACTIVE")
        await tx.execute(
            "UPDATE installations SET state = 'ACTIVE', user_id = $1, scopes = $2,"
            " updated_at = $3 WHERE id = $4",
            user_id,
            json.dumps(list(granted)),
            now,
            installation.id,
        )
    await record_installation_event(
        tx,
        now=now,
        type="app.installed",
        installation=installation,
        data={"state": "ACTIVE", "scopes": list(granted)},
    )
    await tx.notify(ENTITLEMENTS_CHANNEL)
    return installation


async def record_installation_event(
    tx: Transaction,
    *,
    now: float,
    type: str,
    installation: Installation,
    data: dict[str, object],
) -> None:
    """Record an app-lifecycle event of the installation (its id leads ``data``)."""
    await record_event(
        tx,
        now=now,
        type=type,
        business_id=installation.business_id,
        app_id=installation.app_id,
        data={"installationId": installation.id, **data},
    )


async def end_installation_state(
    tx: Transaction, *, now: float, installation: Installation, state: str
) -> None:
    """Move an ACTIVE installation to ``state`` (UNINSTALLED, REVOKED).

    Only the installation's row: ending one also revokes its tokens and records
    ``app.uninstalled``, which ``ledgerport.access.end_installation`` does in the same transaction.
    """
    changed = await tx.execute(
        "UPDATE installations SET state = $1, updated_at = $2 WHERE id = $3 AND state = 'ACTIVE'",
        state,
        now,
        installation.id,
    )
    if not changed:
        raise InstallationNotFound(installation.id)
    await tx.notify(ENTITLEMENTS_CHANNEL)


async def request_business_redaction(tx: Transaction, *, now: float, business_id: str) -> int:
    """The business asked to be forgotten: every app ever installed there gets
    ``business.redact`` (an app event, whatever the installation's state); answers how many."""
    await get_business(tx, business_id)
    rows = await tx.fetch(
        "SELECT * FROM installations WHERE business_id = $1 ORDER BY created_at, id", business_id
    )
    requested_at = datetime.datetime.fromtimestamp(int(now), datetime.UTC).isoformat()
    for row in rows:
        await record_installation_event(
            tx,
            now=now,
            type="business.redact",
            installation=Installation.from_row(row),
            data={"requestedAt": requested_at.replace("+00:00", "Z")},
        )
    return len(rows)
