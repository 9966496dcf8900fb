"""An app's secrets in the console API: write, list (names only), delete (contract.md, third
round: "Hosted functions: secrets, outbound fetch, schedules"). A value goes in once and never
comes back: no answer, log line or error carries it (``apps/_secrets.py``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, with_config
from quart import Response
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, catalog, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._openapi import JSON_BODY_ERRORS, Param, Reply, json_reply, operation
from ._blueprint import blueprint, developed_app, iso_time

NAME = Param(
    "name",
    "path",
    "The secret's name: an upper-case letter, then up to 63 upper-case letters, digits or _",
    {"type": "string", "pattern": catalog.SECRET_NAME_PATTERN},
)


class SecretIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    value: str = Field(
        min_length=1,
        max_length=catalog.SECRET_VALUE_MAX_BYTES,
        description=f"The value: at most {catalog.SECRET_VALUE_MAX_BYTES} bytes of UTF-8."
        " Kept encrypted, never answered again",
    )


@with_config(ConfigDict(extra="forbid"))
class Secret(TypedDict):
    """A secret as it is shown: its name and when it was written, never its value."""

    name: str
    createdAt: str
    updatedAt: str


@with_config(ConfigDict(extra="forbid"))
class SecretPage(TypedDict):
    """Every secret of the app (at most 50), by name: ``next`` is null."""

    data: list[Secret]
    next: str | None


def _secret(secret: apps.AppSecret) -> Secret:
    return {
        "name": secret.name,
        "createdAt": iso_time(secret.created_at),
        "updatedAt": iso_time(secret.updated_at),
    }


def _name(name: str) -> str:
    problem = apps.secret_name_problem(name)
    if problem is not None:
        raise InvalidInput([problem])
    return name


@blueprint.put("/apps/<app_id>/secrets/<name>")
@validate_request(SecretIn)
@operation(
    json_reply(200, Secret, "The secret, without its value"),
    raises=(*JSON_BODY_ERRORS, InvalidInput, storage.BadValue),
    params=(NAME,),
)
async def put_secret(app_id: str, name: str, data: SecretIn) -> Secret:
    """Write the app's secret ``name`` (creating it, or replacing its value). Its value is never
    answered again; a hosted function of the app sends it only in a header value of a
    ``context.fetch`` to a host it allows, by ``context.secret(name)``'s placeholder. Runs
    claimed from then on see the change. At most 50 secrets an app."""
    p = platform()
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        secret = await apps.put_secret(
            tx, p.keyring, now=p.now(), app_id=app_id, name=_name(name), value=data.value
        )
    return _secret(secret)


@blueprint.get("/apps/<app_id>/secrets")
@operation(json_reply(200, SecretPage, "The app's secrets"), raises=(storage.BadValue,))
async def list_secrets(app_id: str) -> SecretPage:
    """The app's secrets by name, without their values."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        secrets = await apps.list_secrets(tx, app_id)
    return {"data": [_secret(secret) for secret in secrets], "next": None}


@blueprint.delete("/apps/<app_id>/secrets/<name>")
@operation(
    Reply(204, "The secret is deleted"),
    raises=(InvalidInput, storage.BadValue, apps.SecretNotFound),
    params=(NAME,),
)
async def delete_secret(app_id: str, name: str) -> Response:
    """Delete the app's secret: runs claimed from then on no longer have it
    (``context.secret`` throws for its name)."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.delete_secret(tx, app_id=app_id, name=_name(name))
    return Response("", status=204)
