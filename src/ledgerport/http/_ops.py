"""Operational endpoints: health and Prometheus metrics."""

from __future__ import annotations

import hmac
from typing import Literal

from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import ConfigDict, with_config
from quart import Blueprint, Response, request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.exceptions import NotFound

from ledgerport import auth, storage
from ledgerport.ops import NotReady
from ledgerport.server import MANAGEMENT

from ._context import bearer_token, platform
from ._failing import refresh_failing_gauges
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
    status: Literal["ok"]
    failing: list[str]
    """Empty: nothing fails."""


@blueprint.get("/readyz")
@operation(json_reply(200, Readiness, "Every part of the process runs"), raises=(NotReady,))
async def readyz() -> Readiness:
    """Readiness: 200 when the database answers and every long-lived service of the process
    (node, scheduler, delivery engine, function runner where enabled) runs; otherwise 503
    NOT_READY, its message naming the failing parts, with Retry-After."""
    p = platform()
    failing = p.services.stopped()
    try:
        await p.store.ping()
    except storage.StorageUnavailable:
        failing = ["store", *failing]
    if failing:
        raise NotReady(failing)
    return {"status": "ok", "failing": []}


@blueprint.get("/metrics")
@operation(
    Reply(200, "Prometheus text exposition format", TEXT), raises=(auth.InvalidMetricsToken,)
)
async def metrics() -> Response:
    """Prometheus text: this process's metrics and the database-wide gauges (see
    docs/operations.md). With LEDGERPORT_METRICS_TOKEN set, a scrape presents it as a bearer
    token (401 otherwise); in production without it, /metrics is answered on the management
    listener only (404 here)."""
    _check_scrape()
    p = platform()
    await refresh_failing_gauges(p)
    return Response(p.metrics.render(), content_type=CONTENT_TYPE_LATEST)


def _check_scrape() -> None:
    """Who may read the metrics: they tell an outsider the service's traffic, its apps' failing
    webhooks and its versions. With a metrics token, only a scrape presenting it, wherever
    /metrics is answered. Without one, the management listener (an operator's network), or the
    main listener in development; production's main listener answers 404, as if there were
    no such path."""
    config = platform().config
    if config.metrics_token is not None:
        given = bearer_token()
        if not (
            given is not None
            and given.isascii()
            and hmac.compare_digest(given, config.metrics_token)
        ):
            raise auth.InvalidMetricsToken()
        return
    if config.development or request.scope.get(MANAGEMENT, False):
        return
    raise NotFound()
