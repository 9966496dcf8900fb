"""An app's uploaded images for its marketplace listing: PNG or JPEG, at most 1 MiB
(contract.md: App platform surfaces). The bytes must be what the declared type says (their
signature is checked). An asset that the live revision or an open revision of the listing
(draft, submitted, in review, changes requested, rejected) refers to cannot be deleted
(ASSET_IN_USE)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from ledgerport.errors import InvalidInput
from ledgerport.ids import new_id
from ledgerport.storage import Transaction

from ._errors import AssetInUse, AssetNotFound

ASSET_MAX_BYTES = 1024 * 1024
ASSET_SIGNATURES = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
}
"""The types an asset may have, and how their bytes begin."""


@dataclass(frozen=True)
class Asset:
    id: str
    app_id: str
    content_type: str
    size: int
    created_at: float


async def upload_asset(
    tx: Transaction, *, now: float, app_id: str, content_type: str, data: bytes
) -> Asset:
    """Keep ``data`` as an asset of the app; InvalidInput unless it is a PNG or JPEG of at most
    ASSET_MAX_BYTES whose bytes match its type."""
    kind = content_type.split(";", 1)[0].strip().lower()
    signature = ASSET_SIGNATURES.get(kind)
    if signature is None:
        raise InvalidInput(["Content-Type must be image/png or image/jpeg"])
    if not data:
        raise InvalidInput(["the body must hold the image"])
    if len(data) > ASSET_MAX_BYTES:
        raise InvalidInput([f"an asset is at most {ASSET_MAX_BYTES} bytes"])
    if not data.startswith(signature):
        raise InvalidInput(
            [f"the body is not {'a PNG' if kind == 'image/png' else 'a JPEG'} image"]
        )
    asset = Asset(new_id("ast"), app_id, kind, len(data), now)
    await tx.execute(
        "INSERT INTO app_assets (id, app_id, content_type, size, sha256, data, created_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7)",
        asset.id,
        app_id,
        kind,
        len(data),
        hashlib.sha256(data).hexdigest(),
        data,
        now,
    )
    return asset


async def known_assets(tx: Transaction, app_id: str, asset_ids: list[str]) -> set[str]:
    """Which of ``asset_ids`` are the app's assets."""
    if not asset_ids:
        return set()
    rows = await tx.fetch("SELECT id FROM app_assets WHERE app_id = $1", app_id)
    mine = {row["id"] for row in rows}
    return {asset_id for asset_id in asset_ids if asset_id in mine}


async def app_assets(tx: Transaction, app_id: str) -> list[Asset]:
    """The app's uploaded images, the newest first, for its developer to choose from."""
    rows = await tx.fetch(
        "SELECT id, app_id, content_type, size, created_at FROM app_assets WHERE app_id = $1"
        " ORDER BY created_at DESC, id",
        app_id,
    )
    return [
        Asset(r["id"], r["app_id"], r["content_type"], int(r["size"]), float(r["created_at"]))
        for r in rows
    ]


async def app_asset(tx: Transaction, app_id: str, asset_id: str) -> tuple[str, bytes]:
    """The type and bytes of one of the app's images, whatever shows it (the console previews
    drafts with it); AssetNotFound for any other app's."""
    row = await tx.fetchrow(
        "SELECT content_type, data FROM app_assets WHERE id = $1 AND app_id = $2",
        asset_id,
        app_id,
    )
    if row is None:
        raise AssetNotFound(asset_id)
    return row["content_type"], bytes(row["data"])


async def listed_asset(tx: Transaction, asset_id: str) -> tuple[str, bytes]:
    """The type and bytes of an asset that a live listing shows (its icon or a screenshot), for
    the marketplace pages; AssetNotFound for any other asset, so that drafts stay private."""
    row = await tx.fetchrow(
        "SELECT a.content_type, a.data, r.icon_asset_id, r.screenshot_asset_ids"
        " FROM app_assets a JOIN listings l ON l.app_id = a.app_id"
        " JOIN listing_revisions r ON r.id = l.live_revision_id WHERE a.id = $1",
        asset_id,
    )
    if row is None or (
        row["icon_asset_id"] != asset_id
        and asset_id not in json.loads(row["screenshot_asset_ids"] or "[]")
    ):
        raise AssetNotFound(asset_id)
    return row["content_type"], bytes(row["data"])


async def delete_asset(tx: Transaction, *, app_id: str, asset_id: str) -> None:
    """Delete the asset; AssetInUse while the live revision or an open revision refers to it."""
    found = await tx.fetchval(
        "SELECT id FROM app_assets WHERE id = $1 AND app_id = $2", asset_id, app_id
    )
    if found is None:
        raise AssetNotFound(asset_id)
    rows = await tx.fetch(
        "SELECT r.number, r.state, r.icon_asset_id, r.screenshot_asset_ids,"
        " r.id = l.live_revision_id AS live FROM listing_revisions r"
        " JOIN listings l ON l.id = r.listing_id WHERE l.app_id = $1"
        " AND (r.state <> 'approved' OR r.id = l.live_revision_id)",
        app_id,
    )
    for row in rows:
        if row["icon_asset_id"] == asset_id or asset_id in json.loads(row["screenshot_asset_ids"]):
            where = "live" if row["live"] else row["state"].replace("_", " ")
            raise AssetInUse(asset_id, int(row["number"]), where)
    await tx.execute("DELETE FROM app_assets WHERE id = $1", asset_id)
