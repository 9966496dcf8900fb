"""The operator API's view of failing webhooks: the apps whose endpoints' recent deliveries mostly
fail, with those endpoints, within a window and above a count the operator may choose."""

from __future__ import annotations

from pydantic import ConfigDict, with_config
from quart import request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.datastructures import MultiDict

from ledgerport import queues
from ledgerport.errors import InvalidInput

from .._context import platform
from .._failing import failing_webhooks
from .._openapi import (
    Param,
    json_reply,
    operation,
)
from ..developer import iso_time
from ._blueprint import blueprint

FAILING_WINDOW_MAX = 86_400
FAILING_AT_LEAST_MAX = 1_000
_FAILING_PARAMS = (
    Param(
        "window",
        "query",
        "Seconds to look back on: deliveries whose latest attempt ended within them count"
        f" (default {int(queues.FAILING_WINDOW)}, as the ledgerport_webhook_apps_failing gauge)",
        {"type": "integer", "minimum": 60, "maximum": FAILING_WINDOW_MAX},
    ),
    Param(
        "atLeast",
        "query",
        "Deliveries a webhook needs to have ended in the window before it can count as failing"
        f" (default {queues.FAILING_AT_LEAST})",
        {"type": "integer", "minimum": 1, "maximum": FAILING_AT_LEAST_MAX},
    ),
)


@with_config(ConfigDict(extra="forbid"))
class FailingWebhookOut(TypedDict):
    """A webhook of the app whose recent deliveries mostly fail."""

    id: str
    url: str
    enabled: bool
    ended: int
    """Its deliveries whose latest attempt ended in the window."""
    failed: int
    """Of those, the ones that failed for good (six attempts)."""
    retrying: int
    """Of those, the ones that wait for a retry."""
    lastEndedAt: str
    lastError: str | None
    """The latest failed attempt's error, as the delivery log shows it."""
    lastResponseCode: int | None


@with_config(ConfigDict(extra="forbid"))
class FailingApp(TypedDict):
    """An app with webhooks whose deliveries keep failing, and whom to tell."""

    appId: str
    appName: str
    appStatus: str
    developerEmail: str
    webhooks: list[FailingWebhookOut]


@with_config(ConfigDict(extra="forbid"))
class FailingApps(TypedDict):
    """Every app with a failing webhook, the most failures first; ``next`` is always null."""

    data: list[FailingApp]
    next: None


def _bounded_int(args: MultiDict[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = args.get(name)
    if raw is None:
        return default
    # ASCII digits only, and few: int() also reads other scripts' digits, signs and spaces.
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9) or not low <= int(raw) <= high:
        raise InvalidInput([f"{name} must be an integer from {low} to {high}"])
    return int(raw)


@blueprint.get("/webhooks/failing")
@operation(
    json_reply(200, FailingApps, "The apps whose webhooks keep failing"),
    raises=(InvalidInput,),
    params=_FAILING_PARAMS,
)
async def failing_apps() -> FailingApps:
    """The apps with a webhook whose deliveries that ended in the window (15 minutes unless
    ``window`` says otherwise) are at least ``atLeast`` (5) and more than half failed for good
    or wait for a retry: what the ``ledgerport_webhook_apps_failing`` gauge counts, named.
    Deliveries refused unsent (a switched-off webhook, a suspended app) do not count."""
    window = _bounded_int(
        request.args, "window", int(queues.FAILING_WINDOW), 60, FAILING_WINDOW_MAX
    )
    at_least = _bounded_int(
        request.args, "atLeast", queues.FAILING_AT_LEAST, 1, FAILING_AT_LEAST_MAX
    )
    failing = await failing_webhooks(platform(), window=window, at_least=at_least)
    by_app: dict[str, FailingApp] = {}
    for webhook in failing:
        app = by_app.setdefault(
            webhook.app_id,
            {
                "appId": webhook.app_id,
                "appName": webhook.app_name,
                "appStatus": webhook.app_status,
                "developerEmail": webhook.developer_email,
                "webhooks": [],
            },
        )
        app["webhooks"].append(
            {
                "id": webhook.webhook_id,
                "url": webhook.url,
                "enabled": webhook.enabled,
                "ended": webhook.ended,
                "failed": webhook.failed,
                "retrying": webhook.retrying,
                "lastEndedAt": iso_time(webhook.last_ended_at),
                "lastError": webhook.last_error,
                "lastResponseCode": webhook.last_response_code,
            }
        )

    def failures(app: FailingApp) -> int:
        return sum(hook["failed"] + hook["retrying"] for hook in app["webhooks"])

    ordered = sorted(by_app.values(), key=lambda app: (-failures(app), app["appId"]))
    return {"data": ordered, "next": None}
