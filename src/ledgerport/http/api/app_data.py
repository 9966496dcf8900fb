"""App data on the token's business's records: write values, read them by record, delete one.

App data is the app's own: the calls need the scope ``app-data:write`` or ``app-data:read`` and
no role permission (neither scope names one, so ``auth.check_call`` checks the scope alone).
Which records the app may keep data on is its installation's read scopes
(``apps.write_app_data``). The application host's session cookie is refused, as for the event
log: app data answers connected apps, which present an OAuth access token.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Annotated, Any, ParamSpec, TypeVar

from pydantic import AfterValidator, ConfigDict, Field, WithJsonSchema, with_config
from quart import request
from typing_extensions import TypedDict  # pydantic reads typing's only from Python 3.12
from werkzeug.datastructures import MultiDict

from ledgerport import apps, catalog
from ledgerport.errors import InvalidInput
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
Key = Field(
    min_length=1,
    max_length=apps.APP_DATA_KEY_MAX_LENGTH,
    pattern=apps.APP_DATA_KEY_PATTERN,
    description="A key the app declared for the resource type",
)


def _scalar(value: object) -> object:
    """A JSON string, number or boolean; the field's type decides the rest."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("must be a finite number")
    if not isinstance(value, str | bool | int | float | Decimal):
        raise ValueError("must be a string, a number or a boolean")
    return value


InValue = Annotated[
    Any,
    AfterValidator(_scalar),
    WithJsonSchema(
        {
            "type": ["string", "number", "boolean"],
            "description": "As the field's type: TEXT, DATE (2026-09-22) and CHOICE a string,"
            ' BOOLEAN true or false, NUMBER a decimal string ("12.50") or a JSON number',
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
    "resourceId", "query", "The id of one record: its values are answered", ANY_RECORD_ID.schema
)
RESOURCE_IDS = Param(
    "resourceIds",
    "query",
    f"Comma-separated ids of at most {catalog.APP_DATA_RESOURCE_IDS_MAX} records (with"
    " resourceId, together): their values are answered",
    ANY_RECORD_ID.list_schema(catalog.APP_DATA_RESOURCE_IDS_MAX),
)
_ONE_ID = re.compile(ANY_RECORD_ID.pattern)
RESOURCE_TYPE = Param(
    "resourceType",
    "query",
    "Only values on records of this type",
    one_of(catalog.APP_DATA_RESOURCE_TYPES),
)
VALUE_ID = Param("value_id", "path", "The app data value's id", APP_DATA_VALUE.schema)


class ValueIn(Body):
    resourceType: ResourceType
    resourceId: str = ANY_RECORD_ID.field()
    key: str = Key
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
            apps.AppDataWrite(item.resourceType, item.resourceId, item.key, item.value)
            for item in exact.values
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
    """The ids ``resourceId`` and ``resourceIds`` name, as the document states their form:
    InvalidInput names each value of another form. More than 50 ids is TooManyResourceIds, so
    ``resourceIds`` is checked for its form with no bound on their count here."""
    single = args.getlist("resourceId")
    lists = args.getlist("resourceIds")
    problems = [
        *("resourceId must be the id of a record" for v in single if not _ONE_ID.fullmatch(v)),
        *(
            "resourceIds must be ids of records separated by commas"
            for v in lists
            if not all(_ONE_ID.fullmatch(part) for part in v.split(","))
        ),
    ]
    if problems:
        raise InvalidInput(list(dict.fromkeys(problems)))
    return [*single, *(part for v in lists for part in v.split(","))]


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
