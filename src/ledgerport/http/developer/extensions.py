"""An app's UI extensions in the console: declare one at a target, list them, delete one
(contract.md: App platform surfaces)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from quart import Response
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, catalog, storage
from ledgerport.errors import InvalidInput

from .._context import platform, unit_of_work
from .._forms import WHITE_SPACE
from .._openapi import JSON_BODY_ERRORS, Param, Reply, json_reply, one_of, operation
from ._blueprint import blueprint, developed_app, iso_time

TargetName = Annotated[str, WithJsonSchema(one_of(catalog.EXTENSION_TARGETS))]
TARGET = Param(
    "target",
    "path",
    "The extension target, one of: " + ", ".join(catalog.EXTENSION_TARGETS),
    one_of(catalog.EXTENSION_TARGETS),
)


_BARRED = f"#\\\\{WHITE_SPACE}\\u0000-\\u001f\\u007f"
_PATH = f"^/(?:[^/{_BARRED}][^{_BARRED}]*)?$"
"""A single / then no fragment, backslash, white space or control character."""


# Any path the books refuse, whatever was sent (too long, empty, not text), is the spec's
# EXTENSION_PATH_INVALID: it is taken as sent and judged by the books. The document states the
# form they check first; dot segments, encoded characters and the App URL's origin are theirs
# alone to refuse.
Path = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": catalog.EXTENSION_PATH_MAX_LENGTH,
            "pattern": _PATH,
            "description": "The page, a path on the App URL's origin (`/extensions/invoice`, a"
            " query allowed): no backslash, whitespace, control character or dot segment,"
            " encoded or not; any other is EXTENSION_PATH_INVALID",
        }
    ),
]


class ExtensionIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    path: Path
    label: str | None = Field(
        default=None,
        max_length=catalog.EXTENSION_LABEL_MAX_LENGTH,
        description="What the service shows for it; the app's name when left out",
    )


@with_config(ConfigDict(extra="forbid"))
class Extension(TypedDict):
    target: TargetName
    path: str
    label: str
    url: str
    createdAt: str
    updatedAt: str


@with_config(ConfigDict(extra="forbid"))
class ExtensionPage(TypedDict):
    """Every extension of the app, in the catalog's order of targets: ``next`` is null."""

    data: list[Extension]
    next: str | None


def _extension(extension: apps.Extension) -> Extension:
    return {
        "target": extension.target,
        "path": extension.path,
        "label": extension.label,
        "url": extension.url,
        "createdAt": iso_time(extension.created_at),
        "updatedAt": iso_time(extension.updated_at),
    }


@blueprint.put("/apps/<app_id>/extensions/<target>")
@validate_request(ExtensionIn)
@operation(
    json_reply(200, Extension, "The extension as declared"),
    raises=(
        *JSON_BODY_ERRORS,
        InvalidInput,
        apps.ExtensionPathInvalid,
        apps.ExtensionScopeRequired,
        storage.BadValue,
    ),
    params=(TARGET,),
)
async def put_extension(app_id: str, target: str, data: ExtensionIn) -> Extension:
    """Declare the app's extension at ``target`` (replacing the one there). The app needs an
    App URL; an extension on a record needs that record type's read scope among the app's
    registered scopes (EXTENSION_SCOPE_REQUIRED); a path that is malformed or names anything
    but a page on the App URL's origin is EXTENSION_PATH_INVALID."""
    p = platform()
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        if not isinstance(data.path, str):
            raise apps.ExtensionPathInvalid("the path is not text")
        extension = await apps.put_extension(
            tx, now=p.now(), app=app, target=target, path=data.path, label=data.label
        )
    return _extension(extension)


@blueprint.get("/apps/<app_id>/extensions")
@operation(json_reply(200, ExtensionPage, "The app's extensions"), raises=(storage.BadValue,))
async def list_extensions(app_id: str) -> ExtensionPage:
    """The app's extensions."""
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        extensions = await apps.list_extensions(tx, app)
    return {"data": [_extension(e) for e in extensions], "next": None}


@blueprint.delete("/apps/<app_id>/extensions/<target>")
@operation(
    Reply(204, "The extension is gone"),
    raises=(storage.BadValue, apps.ExtensionNotFound),
    params=(TARGET,),
)
async def delete_extension(app_id: str, target: str) -> Response:
    """Remove the app's extension at ``target``."""
    async with unit_of_work() as tx:
        app = await developed_app(tx, app_id)
        await apps.delete_extension(tx, app=app, target=target)
    return Response("", status=204)
