"""Answers more than one blueprint gives: an app as the operator and its developer see it."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps


@with_config(ConfigDict(extra="forbid"))
class App(TypedDict):
    id: str
    clientId: str
    name: str
    type: Literal["CONFIDENTIAL", "PUBLIC"]
    redirectUris: list[str]
    scopes: list[str]
    developerUserId: str | None
    reviewed: bool
    status: Literal["ACTIVE", "SUSPENDED", "DEACTIVATED"]
    appUrl: str | None
    pinnedVersion: str | None


def app_json(app: apps.App) -> App:
    return {
        "id": app.id,
        "clientId": app.client_id,
        "name": app.name,
        "type": app.type,
        "redirectUris": list(app.redirect_uris),
        "scopes": list(app.scopes),
        "developerUserId": app.developer_user_id,
        "reviewed": app.reviewed,
        "status": app.status,
        "appUrl": app.app_url,
        "pinnedVersion": app.pinned_version,
    }
