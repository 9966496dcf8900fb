"""Operational endpoints: health and Prometheus metrics."""

from __future__ import annotations

from typing import Literal

from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import ConfigDict, with_config
from quart import Blueprint, Response
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import storage

from ._context import platform
from ._openapi import TEXT, Reply, json_reply, operation

blueprint = Blueprint("ops", __name__)


@with_config(ConfigDict(extra="forbid"))
class Health(TypedDict):
    status: Literal["ok"]


@blueprint.get("/healthz")
@operation(json_reply(200, Health, "The process can serve"), raises=(storage.StorageUnavailable,))
async def healthz() -> tuple[Health, int]:
    """200 when the process can serve: the database answers a trivial query."""
    await platform().store.ping()
    return {"status": "ok"}, 200


@with_config(ConfigDict(extra="forbid"))
class Readiness(TypedDict):
    status: Literal["ok", "unavailable"]
    failing: list[str]
    """What does not run now: ``store`` when the database does not answer, and the services
    of the process that are not running (starting again after an error, or not yet started)."""


@blueprint.get("/readyz")
@operation(
    json_reply(200, Readiness, "Every part of the process runs"),
    json_reply(503, Readiness, "Some part does not run: ``failing`` names them"),
)
async def readyz() -> tuple[Readiness, int, dict[str, str]]:
    """Readiness: 200 when the database answers and every long-lived service of the process
    (node, scheduler, delivery engine, function runner where enabled) runs; 503 naming the
    failing parts otherwise."""
    p = platform()
    failing = p.services.stopped()
    try:
        await p.store.ping()
    except storage.StorageUnavailable:
        failing = ["store", *failing]
    if failing:
        return {"status": "unavailable", "failing": failing}, 503, {"Retry-After": "5"}
    return {"status": "ok", "failing": []}, 200, {}


@blueprint.get("/metrics")
@operation(Reply(200, "Prometheus text exposition format", TEXT))
async def metrics() -> Response:
    return Response(platform().metrics.render(), content_type=CONTENT_TYPE_LATEST)
