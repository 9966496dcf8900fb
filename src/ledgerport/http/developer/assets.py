"""An app's listing assets in the console: upload a PNG or JPEG (the raw bytes with their
Content-Type), delete one no revision in use refers to (contract.md: App platform surfaces)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, WithJsonSchema, with_config
from quart import Response, request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._ids import ASSET
from .._openapi import Body, Param, Reply, json_reply, operation
from ._blueprint import blueprint, developed_app

Image = Annotated[bytes, WithJsonSchema({"type": "string", "format": "binary"})]
ASSET_ID = Param("asset_id", "path", "The asset's id", ASSET.schema)


@with_config(ConfigDict(extra="forbid"))
class AssetOut(TypedDict):
    id: str
    kind: str | None
    """Not set: an asset serves as icon or screenshot by where a revision names it."""
    contentType: str
    size: int


@blueprint.post("/apps/<app_id>/assets")
@operation(
    json_reply(201, AssetOut, "The asset"),
    raises=(InvalidInput, storage.BadValue),
    bodies=(Body("image/png", Image), Body("image/jpeg", Image)),
)
async def upload_asset(app_id: str) -> tuple[AssetOut, int]:
    """Upload an image for the listing: the raw bytes of a PNG or JPEG (at most 1 MiB), with
    its Content-Type; bytes that are not what the type says are refused."""
    p = platform()
    data = await request.get_data(as_text=False)
    assert isinstance(data, bytes)
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        asset = await apps.upload_asset(
            tx,
            now=p.now(),
            app_id=app_id,
            content_type=request.headers.get("Content-Type", ""),
            data=data,
        )
    return {
        "id": asset.id,
        "kind": None,
        "contentType": asset.content_type,
        "size": asset.size,
    }, 201


@blueprint.delete("/apps/<app_id>/assets/<asset_id>")
@operation(
    Reply(204, "The asset is deleted"),
    raises=(storage.BadValue, apps.AssetNotFound, apps.AssetInUse),
    params=(ASSET_ID,),
)
async def delete_asset(app_id: str, asset_id: str) -> Response:
    """Delete an asset; ASSET_IN_USE while the live revision or an open revision of the
    listing (draft, submitted, in review, changes requested, rejected) names it."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.delete_asset(tx, app_id=app_id, asset_id=asset_id)
    return Response("", status=204)
