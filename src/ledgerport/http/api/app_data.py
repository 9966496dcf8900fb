"""App data on the token's business's records: write values, read them by record, delete one.

App data is the app's own: the calls need the scope ``app-data:write`` or ``app-data:read`` and
no role permission (neither scope names one, so ``auth.check_call`` checks the scope alone).
Which records the app may keep data on is its installation's read scopes
(``apps.write_app_data``). The application host's session cookie is refused, as for the event
log: app data answers connected apps, which present an OAuth access token.

The spec's codes come before any rule of form: a record id, a key or a value of any form or
JSON type reaches the check that answers its code (RECORD_NOT_FOUND, UNKNOWN_APP_DATA_FIELD,
INVALID_APP_DATA_VALUE), and ids of any form are counted before they are looked up
(RESOURCEIDS_ACCEPTS_MOST_50_IDS).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Annotated, Any, ParamSpec, TypeVar

from pydantic import ConfigDict, Field, WithJsonSchema, with_config
from quart import request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.datastructures import MultiDict

from ledgerport import apps, catalog
from ledgerport.storage import Transaction

from .._ids import ANY_RECORD_ID, APP_DATA_VALUE
from .._input import parse_json
from .._openapi import JSON, Param, json_reply, one_of, operation
from .._openapi import Body as BodyDoc
from ._blueprint import blueprint
from ._endpoint import READ_RAISES, REPLAYED_HEADER, VERSION_PARAM, Call, data_route
from ._records import ANSWER_HEADERS, WRITE_PARAMS, Body, deleted, write_raises

P = ParamSpec("P")
R = TypeVar("R")

READ = "app-data:read"
WRITE = "app-data:write"

ResourceType = Annotated[str, WithJsonSchema(one_of(catalog.APP_DATA_RESOURCE_TYPES))]
# The record, the key and the value of a write are the spec's to refuse, whatever their form or
# JSON type: a record that is not the business's is RECORD_NOT_FOUND, a key the app did not
# declare UNKNOWN_APP_DATA_FIELD, a value its field's type does not take INVALID_APP_DATA_VALUE.
# So nothing here refuses them first; the document states their forms in words.
RecordReference = Annotated[
    Any,
    WithJsonSchema(
        ANY_RECORD_ID.looked_up(
            "404 RECORD_NOT_FOUND",
            "The id of a record of resourceType in the business: its kind's prefix (inv_,"
            " cus_, ...) and 24 lowercase hexadecimal digits",
        )
    ),
]
Key = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "string",
            "description": "A key the app declared for the resource type (a letter, then up to"
            f" {apps.APP_DATA_KEY_MAX_LENGTH - 1} letters, digits and underscores); any other"
            " is UNKNOWN_APP_DATA_FIELD",
            "examples": ["syncStatus"],
        }
    ),
]
InValue = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": ["string", "number", "boolean"],
            "description": "As the field's type: TEXT, DATE (2026-09-22) and CHOICE a string,"
            ' BOOLEAN true or false, NUMBER a decimal string ("12.50") or a JSON number; any'
            " other value, of any JSON type, is INVALID_APP_DATA_VALUE",
        }
    ),
]
OutValue = Annotated[
    str | bool,
    WithJsonSchema(
        {
            "type": ["string", "boolean"],
            "description": "BOOLEAN values are true or false; NUMBER values a decimal string"
            ' ("12.50"); the others a string',
        }
    ),
]

RESOURCE_ID = Param(
    "resourceId",
    "query",
    "The id of one record: its values are answered",
    ANY_RECORD_ID.looked_up("no value (an empty value is no id)"),
)
RESOURCE_IDS = Param(
    "resourceIds",
    "query",
    f"Comma-separated ids of at most {catalog.APP_DATA_RESOURCE_IDS_MAX} records (with"
    " resourceId, together; more, of any form, is RESOURCEIDS_ACCEPTS_MOST_50_IDS): their"
    " values are answered",
    {
        **ANY_RECORD_ID.looked_up("no value (an empty entry is no id)"),
        "description": "Comma-separated, without spaces: record ids (their kind's prefix and 24"
        " lowercase hexadecimal digits). Looked up whatever their form: one that names nothing"
        " has no value",
    },
)
RESOURCE_TYPE = Param(
    "resourceType",
    "query",
    "Only values on records of this type",
    one_of(catalog.APP_DATA_RESOURCE_TYPES),
)
VALUE_ID = Param(
    "value_id",
    "path",
    "The app data value's id",
    APP_DATA_VALUE.looked_up("404 APP_DATA_VALUE_NOT_FOUND"),
)


class ValueIn(Body):
    resourceType: ResourceType
    resourceId: RecordReference
    key: Key
    value: InValue


class ValuesIn(Body):
    values: list[ValueIn] = Field(min_length=1, max_length=catalog.APP_DATA_VALUES_MAX)


@with_config(ConfigDict(extra="forbid"))
class AppDataValue(TypedDict):
    """One value the app keeps on a record."""

    id: str
    resourceType: ResourceType
    resourceId: str
    key: str
    value: OutValue


@with_config(ConfigDict(extra="forbid"))
class WrittenValues(TypedDict):
    """The values written, as stored, in the order given."""

    data: list[AppDataValue]


@with_config(ConfigDict(extra="forbid"))
class AppDataPage(TypedDict):
    """The app's values on the records asked for: every one, so ``next`` is null."""

    data: list[AppDataValue]
    next: str | None


def _rendered(value: apps.AppDataValue) -> AppDataValue:
    return {
        "id": value.id,
        "resourceType": value.resource_type,
        "resourceId": value.resource_id,
        "key": value.key,
        "value": value.value,
    }


async def _exact(data: ValuesIn) -> ValuesIn:
    """The body with every JSON number as the decimal it was written as: parsing made floats of
    them, which keep about 16 significant digits. Read again from the request's cached body."""
    if not any(isinstance(item.value, float) for item in data.values):
        return data
    raw = await request.get_data(as_text=False)
    return ValuesIn.model_validate(parse_json(raw, parse_float=Decimal))


@blueprint.post("/app-data")
@operation(
    json_reply(200, WrittenValues, "The values, as stored", *ANSWER_HEADERS, REPLAYED_HEADER),
    raises=write_raises(
        apps.AppDataForConnectedAppsOnly,
        apps.AppCannotAccessType,
        apps.UnknownAppDataField,
        apps.InvalidAppDataValue,
    ),
    bodies=(BodyDoc(JSON, ValuesIn),),
    params=WRITE_PARAMS,
)
@data_route(WRITE, body=ValuesIn, connected_apps_only=apps.AppDataForConnectedAppsOnly)
async def write_app_data(tx: Transaction, call: Call, data: ValuesIn) -> WrittenValues:
    """Write 1 to 25 values on records of the business, all or none; a value replaces the
    record's value of the same key. Emits ``app_data.updated`` for each changed value."""
    exact = await _exact(data)
    written = await apps.write_app_data(
        tx,
        now=call.now,
        app_id=call.grant.app_id,
        business_id=call.business_id,
        values=[
            apps.AppDataWrite(
                item.resourceType, _named(item.resourceId), _named(item.key), exact_item.value
            )
            for item, exact_item in zip(data.values, exact.values, strict=True)
        ],
    )
    return {"data": [_rendered(value) for value in written]}


@blueprint.get("/app-data")
@operation(
    json_reply(200, AppDataPage, "The app's values on those records", *ANSWER_HEADERS),
    raises=(
        *READ_RAISES,
        apps.AppDataForConnectedAppsOnly,
        apps.ResourceIdsMissing,
        apps.TooManyResourceIds,
        apps.AppCannotAccessType,
    ),
    params=(RESOURCE_ID, RESOURCE_IDS, RESOURCE_TYPE, VERSION_PARAM),
)
@data_route(READ, connected_apps_only=apps.AppDataForConnectedAppsOnly)
async def read_app_data(tx: Transaction, call: Call) -> AppDataPage:
    """The app's values in this business on the records ``resourceId`` and ``resourceIds``
    name (one of them is required; at most 50 ids), in the order of the ids. Values on types
    the installation cannot read are left out."""
    ids = _resource_ids(request.args)
    values = await apps.read_app_data(
        tx,
        app_id=call.grant.app_id,
        business_id=call.business_id,
        resource_ids=ids,
        resource_type=request.args.get("resourceType"),
    )
    return {"data": [_rendered(value) for value in values], "next": None}


def _resource_ids(args: MultiDict[str, str]) -> list[str]:
    """The ids ``resourceId`` and ``resourceIds`` name, whatever their form: the books count
    them (more than 50 is RESOURCEIDS_ACCEPTS_MOST_50_IDS, none PROVIDE_RESOURCEID_RESOURCEIDS)
    and look them up (one that names no record has no value)."""
    single = args.getlist("resourceId")
    lists = args.getlist("resourceIds")
    return [*single, *(part for v in lists for part in v.split(","))]


def _named(reference: object) -> str:
    """What a reference of the body names: a string as given, any other JSON value its JSON
    text (which names nothing: no record's id or declared key is one)."""
    if isinstance(reference, str):
        return reference
    return json.dumps(reference)


@blueprint.delete("/app-data/<value_id>")
@operation(
    deleted("app data value"),
    raises=write_raises(apps.AppDataForConnectedAppsOnly, apps.AppDataValueNotFound),
    params=(VALUE_ID, *WRITE_PARAMS),
)
@data_route(WRITE, status=204, connected_apps_only=apps.AppDataForConnectedAppsOnly)
async def delete_app_data_value(tx: Transaction, call: Call, value_id: str) -> None:
    """Delete one of the app's values in this business; emits ``app_data.updated`` with a null
    value."""
    await apps.delete_app_data_value(
        tx, now=call.now, app_id=call.grant.app_id, business_id=call.business_id, value_id=value_id
    )
