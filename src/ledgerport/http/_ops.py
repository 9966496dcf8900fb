"""Operational endpoints: health and Prometheus metrics."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST
from quart import Blueprint, Response

from ._context import platform

blueprint = Blueprint("ops", __name__)


@blueprint.get("/healthz")
async def healthz() -> tuple[dict[str, str], int]:
    """200 when the process can serve: the database answers a trivial query."""
    await platform().store.ping()
    return {"status": "ok"}, 200


@blueprint.get("/metrics")
async def metrics() -> Response:
    return Response(platform().metrics.render(), content_type=CONTENT_TYPE_LATEST)
