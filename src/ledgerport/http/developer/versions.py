"""Pinning an app to an API version: its calls without a Service-Version header get it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from quart_schema import validate_request

from ledgerport import apps, catalog

from .._answers import App, app_json
from .._context import platform, unit_of_work
from .._openapi import JSON_BODY_ERRORS, json_reply, operation
from ._blueprint import blueprint, developed_app


class VersionIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    version: str = Field(
        min_length=1,
        max_length=10,
        description=f"A supported API version, e.g. {catalog.CURRENT_API_VERSION}",
    )


def _today() -> Any:
    return datetime.fromtimestamp(platform().now(), UTC).date()


@blueprint.put("/apps/<app_id>/version")
@validate_request(VersionIn)
@operation(
    json_reply(200, App, "The app, pinned"),
    raises=(*JSON_BODY_ERRORS, apps.UnsupportedApiVersion),
)
async def pin(app_id: str, data: VersionIn) -> App:
    """Pin the app to a supported version; UNSUPPORTED_API_VERSION for an unknown or sunset one."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        app = await apps.pin_version(tx, app_id, data.version, today=_today())
    return app_json(app)


@blueprint.delete("/apps/<app_id>/version")
@operation(json_reply(200, App, "The app, following the current version again"))
async def unpin(app_id: str) -> App:
    """Unpin: calls without a header get the current version."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        app = await apps.pin_version(tx, app_id, None, today=_today())
    return app_json(app)
