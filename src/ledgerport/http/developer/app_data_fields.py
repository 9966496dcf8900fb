"""An app's app data fields: the typed keys it may write on records of each resource type.

Declared, changed and deleted by the app's developer; the data API's ``/app-data`` writes values
only under keys declared here (``apps.write_app_data``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, with_config
from quart import Response
from quart_schema import validate_request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12

from ledgerport import apps, catalog, storage

from .._context import platform, unit_of_work
from .._ids import APP_DATA_FIELD
from .._openapi import JSON_BODY_ERRORS, Param, Reply, json_reply, one_of, operation
from ._blueprint import blueprint, developed_app

ResourceType = Annotated[str, WithJsonSchema(one_of(catalog.APP_DATA_RESOURCE_TYPES))]
FieldType = Annotated[str, WithJsonSchema(one_of(apps.APP_DATA_FIELD_TYPES))]
CHOICES_DESCRIPTION = (
    f"The options of a CHOICE field (only): {catalog.CHOICE_OPTIONS_MIN} to"
    f" {catalog.CHOICE_OPTIONS_MAX} distinct non-empty strings of at most"
    f" {catalog.CHOICE_OPTION_MAX_LENGTH} characters after trimming (INVALID_CHOICES otherwise,"
    " whatever was sent)"
)
# The options are the spec's to refuse whatever their JSON type (INVALID_CHOICES), so they are
# taken as sent and checked by the books; the document states their form.
Choices = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
            "description": CHOICES_DESCRIPTION,
        }
    ),
]
Name = Field(
    default=None,
    min_length=1,
    max_length=apps.APP_DATA_NAME_MAX_LENGTH,
    description="The display name (trimmed)",
)
FIELD_ID = Param("field_id", "path", "The app data field's id", APP_DATA_FIELD.schema)
FIELD_RAISES = (
    *JSON_BODY_ERRORS,
    apps.InvalidChoices,
    storage.BadValue,
)


class FieldIn(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    resourceType: ResourceType
    key: str = Field(
        min_length=1,
        max_length=apps.APP_DATA_KEY_MAX_LENGTH,
        pattern=apps.APP_DATA_KEY_PATTERN,
        description="Unique per resource type: a letter, then letters, digits and underscores",
    )
    type: FieldType
    choices: Choices = None
    name: str | None = Name


class FieldChanges(BaseModel):
    """Fields left out stay as they are; ``name: null`` clears the display name, ``choices:
    null`` is INVALID_CHOICES."""

    model_config = ConfigDict(strict=True, extra="forbid")

    choices: Choices = None
    name: str | None = Name


@with_config(ConfigDict(extra="forbid"))
class AppDataField(TypedDict):
    """A key the app may write on records of ``resourceType``, and the type of its values."""

    id: str
    resourceType: ResourceType
    key: str
    type: FieldType
    choices: list[str] | None
    name: str | None


@with_config(ConfigDict(extra="forbid"))
class AppDataFieldPage(TypedDict):
    """Every field of the app, by resource type and key: ``next`` is null."""

    data: list[AppDataField]
    next: str | None


def _rendered(field: apps.AppDataField) -> AppDataField:
    return {
        "id": field.id,
        "resourceType": field.resource_type,
        "key": field.key,
        "type": field.type,
        "choices": list(field.choices) if field.choices is not None else None,
        "name": field.name,
    }


@blueprint.post("/apps/<app_id>/app-data-fields")
@validate_request(FieldIn)
@operation(
    json_reply(201, AppDataField, "The field"),
    raises=(*FIELD_RAISES, apps.AppDataFieldExists, storage.Conflict),
)
async def declare(app_id: str, data: FieldIn) -> tuple[AppDataField, int]:
    """Declare a field: a key the app may write on records of a resource type, with the type
    of its values (TEXT, NUMBER, BOOLEAN, DATE, CHOICE with its options)."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        field = await apps.declare_app_data_field(
            tx,
            now=platform().now(),
            app_id=app_id,
            resource_type=data.resourceType,
            key=data.key,
            type=data.type,
            choices=data.choices,
            name=data.name,
        )
    return _rendered(field), 201


@blueprint.get("/apps/<app_id>/app-data-fields")
@operation(json_reply(200, AppDataFieldPage, "The app's fields"), raises=(storage.BadValue,))
async def list_fields(app_id: str) -> AppDataFieldPage:
    """Every field the app declared: ``{data, next}``."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        fields = await apps.app_data_fields(tx, app_id)
    return {"data": [_rendered(field) for field in fields], "next": None}


@blueprint.patch("/apps/<app_id>/app-data-fields/<field_id>")
@validate_request(FieldChanges)
@operation(
    json_reply(200, AppDataField, "The field as it is now"),
    raises=(*FIELD_RAISES, apps.AppDataFieldNotFound),
    params=(FIELD_ID,),
)
async def change(app_id: str, field_id: str, data: FieldChanges) -> AppDataField:
    """Change a CHOICE field's options or a field's display name. Values written before keep
    their value; a write must fit the field as it is then."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        field = await apps.change_app_data_field(
            tx,
            now=platform().now(),
            app_id=app_id,
            field_id=field_id,
            changes=data.model_dump(include=data.model_fields_set),
        )
    return _rendered(field)


@blueprint.delete("/apps/<app_id>/app-data-fields/<field_id>")
@operation(
    Reply(204, "The field and its values in every business are deleted"),
    raises=(storage.BadValue, apps.AppDataFieldNotFound),
    params=(FIELD_ID,),
)
async def delete(app_id: str, field_id: str) -> Response:
    """Delete a field, and the values the app keeps under it in every business."""
    async with unit_of_work() as tx:
        await developed_app(tx, app_id)
        await apps.delete_app_data_field(tx, app_id=app_id, field_id=field_id)
    return Response("", status=204)
