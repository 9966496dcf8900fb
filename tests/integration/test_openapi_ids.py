"""The document states the form of every id and cursor a request carries, and the server refuses
by form exactly what breaks it.

Every id-like parameter (``..._id``, ``...Id``, ``...Ids``, ``after``, ``cursor``) and every
id-like field of a request body has a pattern of its own (more than the NUL rule every text has),
so a route added without one fails here. Then the server against those patterns: a malformed id
in a body, in ``resourceId`` or ``resourceIds`` or an empty cursor
is a validation failure (400, array message; an extension page's malformed ``record_id`` is
in ``test_extension_page.py``), while a well-formed id that names nothing is the
route's 404.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ledgerport import catalog
from ledgerport.http import ANY_RECORD_ID, NUL_FREE, PATH_ID_KINDS, RECORD_IDS

from .data_api import owner_api

ID_LIKE = re.compile(r"(?:^id$|_id$|Id$|Ids$|_ids$|^after$|^cursor$)")
"""Names of parameters and fields that carry ids or cursors."""
WELL_FORMED_NOTHING = {
    kind: f"{id_kind.prefixes[0]}_{'0' * 24}" for kind, id_kind in RECORD_IDS.items()
}
"""A well-formed id of each record kind that names no record."""


async def _document(client: Any) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = await response.get_json()
    return document


def _own_pattern(schema: dict[str, Any], components: dict[str, Any]) -> str | None:
    """The pattern ``schema`` (or, for a list, its items) holds beyond the NUL rule."""
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    for option in schema.get("anyOf", ()):
        if option.get("type") != "null":
            return _own_pattern(option, components)
    if schema.get("type") == "array":
        return _own_pattern(schema.get("items", {}), components)
    pattern = schema.get("pattern")
    return None if pattern in (None, NUL_FREE) else str(pattern)


def _fields(
    schema: dict[str, Any], components: dict[str, Any], seen: frozenset[str] = frozenset()
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every named property of a request body's schema, nested ones included."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name not in seen:
            yield from _fields(components[name], components, seen | {name})
        return
    for name, prop in schema.get("properties", {}).items():
        yield name, prop
        yield from _fields(prop, components, seen)
    for key in ("items",):
        if isinstance(schema.get(key), dict):
            yield from _fields(schema[key], components, seen)
    for key in ("anyOf", "oneOf", "allOf"):
        for part in schema.get(key, ()):
            yield from _fields(part, components, seen)


def _id_like(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, name, schema) of every id-like parameter and request body field."""
    components = document["components"]["schemas"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", ()):
                if ID_LIKE.search(parameter["name"]):
                    yield f"{where} {parameter['in']}", parameter["name"], parameter["schema"]
            for media_type, media in operation.get("requestBody", {}).get("content", {}).items():
                for name, schema in _fields(media.get("schema", {}), components):
                    if ID_LIKE.search(name):
                        yield f"{where} {media_type}", name, schema


async def test_every_id_like_parameter_and_field_has_a_pattern(client: Any) -> None:
    document = await _document(client)
    components = document["components"]["schemas"]
    found = list(_id_like(document))

    missing = [
        f"{where}: {name}" for where, name, schema in found if not _own_pattern(schema, components)
    ]

    assert len(found) > 100, "the walk found too few id-like names to be looking at the document"
    assert missing == []


async def test_path_ids_take_the_form_of_their_kind(client: Any) -> None:
    document = await _document(client)

    for path, item in document["paths"].items():
        for operation in item.values():
            for parameter in operation.get("parameters", ()):
                kind = PATH_ID_KINDS.get(parameter["name"])
                if parameter["in"] == "path" and kind is not None:
                    assert parameter["schema"]["pattern"] == kind.pattern, (path, parameter)


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/customers/{record_id}", "customer"),
        ("/invoices/{record_id}/send", "invoice"),
        ("/payments/{record_id}/refund", "payment"),
        ("/purchase-returns/{record_id}", "purchase_return"),
        ("/journal-entries/{record_id}/reverse", "journal_entry"),
        ("/accounts/{record_id}/archive", "account"),
        ("/quotes/{record_id}/convert", "quote"),
    ],
)
async def test_a_record_route_takes_ids_of_its_own_kind(client: Any, path: str, kind: str) -> None:
    document = await _document(client)

    for operation in document["paths"][path].values():
        (record_id,) = [p for p in operation["parameters"] if p["name"] == "record_id"]
        assert record_id["schema"]["pattern"] == RECORD_IDS[kind].pattern


# --- the server refuses by form what the document refuses ----------------------------------------


def _validation_failure(body: dict[str, Any]) -> list[str]:
    assert "code" not in body, body
    assert isinstance(body["message"], list), body
    return [str(message) for message in body["message"]]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/invoices", {"customerId": "customer-1", "lines": []}),
        ("/invoices", {"customerId": WELL_FORMED_NOTHING["supplier"], "lines": []}),
        ("/payments", {"invoiceId": "INV-0001", "amount": "1.00"}),
        ("/purchases", {"supplierId": "sup_XYZ", "lines": []}),
        ("/purchase-returns", {"purchaseId": "pur_", "lines": []}),
        (
            "/app-data",
            {
                "values": [
                    {"resourceType": "invoice", "resourceId": "inv_1", "key": "k", "value": 1}
                ]
            },
        ),
    ],
    ids=["free-text", "another-kind", "a-number", "upper-case", "prefix-only", "app-data"],
)
async def test_a_malformed_id_in_a_body_is_a_validation_failure(
    client: Any, admin_headers: dict[str, str], path: str, body: dict[str, Any]
) -> None:
    api = await owner_api(client, admin_headers)

    response = await api.call("POST", path, body)

    assert response.status_code == 400
    _validation_failure(await response.get_json())


async def test_a_well_formed_id_that_names_nothing_is_not_found(
    client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    lines = [{"description": "x", "quantity": "1", "unitPrice": "1.00"}]

    body_reference = await api.call(
        "POST", "/invoices", {"customerId": WELL_FORMED_NOTHING["customer"], "lines": lines}
    )
    path_reference = await api.call("GET", f"/invoices/{WELL_FORMED_NOTHING['invoice']}")

    assert body_reference.status_code == 404
    assert (await body_reference.get_json())["code"] == "RECORD_NOT_FOUND"
    assert path_reference.status_code == 404


@pytest.mark.parametrize(
    "query",
    [
        {"resourceId": "inv_1"},
        {"resourceId": ""},
        {"resourceIds": f"{WELL_FORMED_NOTHING['invoice']},"},
        {"resourceIds": f"{WELL_FORMED_NOTHING['invoice']}, {WELL_FORMED_NOTHING['customer']}"},
        {"resourceIds": " , ,"},
    ],
    ids=["short", "empty", "trailing-comma", "space", "blank-entries"],
)
async def test_app_data_reads_refuse_ids_of_another_form(
    client: Any, admin_headers: dict[str, str], query: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)

    response = await api.call("GET", "/app-data", query=query)

    assert response.status_code == 400
    messages = _validation_failure(await response.get_json())
    assert any(next(iter(query)) in message for message in messages), messages


async def test_app_data_reads_take_well_formed_ids_of_any_record_kind(
    client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    ids = ",".join(WELL_FORMED_NOTHING.values())

    response = await api.call("GET", "/app-data", query={"resourceIds": ids})

    assert response.status_code == 200, await response.get_json()
    assert (await response.get_json())["data"] == []
    assert re.fullmatch(
        ANY_RECORD_ID.list_schema(catalog.APP_DATA_RESOURCE_IDS_MAX)["pattern"], ids
    )


async def test_an_empty_cursor_is_no_cursor(client: Any, admin_headers: dict[str, str]) -> None:
    api = await owner_api(client, admin_headers)

    empty = await api.call("GET", "/customers", query={"cursor": ""})
    absent = await api.call("GET", "/customers")

    assert empty.status_code == 400
    assert _validation_failure(await empty.get_json()) == [
        "cursor is not a cursor this list returned"
    ]
    assert absent.status_code == 200
