"""The document states the form of every id and cursor a request carries, and the server refuses
by form exactly what breaks it, but where the spec's code answers an id that names nothing.

Every id-like parameter (``..._id``, ``...Id``, ``...Ids``, ``after``, ``cursor``) and every
id-like field of a request body has a pattern of its own (more than the NUL rule every text has),
so a route added without one fails here; but for the ids ``LOOKED_UP`` names, which the route
looks up whatever their form because the spec answers one that names nothing with a code of its
own (``test_spec_codes.py`` holds the server to those codes): they have no pattern, and their
operation documents that answer. Then the server against the patterns: a malformed id in a body
or an empty cursor is a validation failure (400, array message; an extension page's malformed
``record_id`` is in ``test_extension_page.py``), while a well-formed id that names nothing is the
route's 404; app data reads look their ids up whatever their form.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ledgerport.http import NUL_FREE, PATH_ID_KINDS, RECORD_IDS

from .data_api import owner_api

ID_LIKE = re.compile(r"(?:^id$|_id$|Id$|Ids$|_ids$|^after$|^cursor$)")
"""Names of parameters and fields that carry ids or cursors."""
LOOKED_UP = {
    ("POST /app-data", "application/json", "resourceId"): "RECORD_NOT_FOUND",
    ("GET /app-data", "query", "resourceId"): None,
    ("GET /app-data", "query", "resourceIds"): None,
    ("DELETE /app-data/{value_id}", "path", "value_id"): "APP_DATA_VALUE_NOT_FOUND",
    ("GET /events", "query", "after"): "UNKNOWN_CURSOR",
    ("GET /events/{event_id}", "path", "event_id"): "EVENT_NOT_FOUND",
    ("POST /oauth/token", "application/x-www-form-urlencoded", "client_id"): "invalid_client",
    ("POST /oauth/token", "application/json", "client_id"): "invalid_client",
    ("POST /oauth/revoke", "application/x-www-form-urlencoded", "client_id"): "invalid_client",
    ("POST /oauth/device/authorize", "application/x-www-form-urlencoded", "client_id"): (
        "invalid_client"
    ),
    ("GET /oauth/authorize", "query", "client_id"): None,
    ("POST /oauth/par", "application/x-www-form-urlencoded", "client_id"): "invalid_client",
    ("GET /oauth/register/{client_id}", "path", "client_id"): "invalid_token",
    ("PUT /oauth/register/{client_id}", "path", "client_id"): "invalid_token",
    ("DELETE /oauth/register/{client_id}", "path", "client_id"): "invalid_token",
    ("PUT /oauth/register/{client_id}", "application/json", "client_id"): (
        "invalid_client_metadata"
    ),
}
"""The ids a route looks up whatever their form, by (operation, where, name), with the spec's code
that answers one naming nothing, as the operation's answers state it (None: none of them does;
an app data read's id that names no record has no value, and the consent page says "Invalid
client_id", as its parameter says)."""
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


def _id_like(document: dict[str, Any]) -> Iterator[tuple[tuple[str, str, str], dict[str, Any]]]:
    """((operation, where, name), schema) of every id-like parameter and request body field."""
    components = document["components"]["schemas"]
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            for parameter in operation.get("parameters", ()):
                if ID_LIKE.search(parameter["name"]):
                    yield (where, parameter["in"], parameter["name"]), parameter["schema"]
            for media_type, media in operation.get("requestBody", {}).get("content", {}).items():
                for name, schema in _fields(media.get("schema", {}), components):
                    if ID_LIKE.search(name):
                        yield (where, media_type, name), schema


async def test_every_id_like_parameter_and_field_has_a_pattern(client: Any) -> None:
    document = await _document(client)
    components = document["components"]["schemas"]
    found = list(_id_like(document))

    missing = [
        " ".join(named)
        for named, schema in found
        if named not in LOOKED_UP and not _own_pattern(schema, components)
    ]
    patterned = [
        " ".join(named)
        for named, schema in found
        if named in LOOKED_UP and _own_pattern(schema, components)
    ]

    assert len(found) > 100, "the walk found too few id-like names to be looking at the document"
    assert missing == []
    assert patterned == [], "looked up whatever its form: no pattern may refuse one first"
    assert {named for named, _ in found} >= LOOKED_UP.keys()


@pytest.mark.parametrize(
    ("named", "code"), list(LOOKED_UP.items()), ids=[" ".join(named) for named in LOOKED_UP]
)
async def test_an_id_looked_up_whatever_its_form_says_so_and_its_answer(
    client: Any, named: tuple[str, str, str], code: str | None
) -> None:
    document = await _document(client)
    method, path = named[0].split(" ")
    operation = document["paths"][path][method.lower()]
    schema = dict(_id_like(document))[named]
    described = " ".join(response["description"] for response in operation["responses"].values())

    assert "Looked up whatever" in schema["description"]
    assert code is None or code in described, described


async def test_path_ids_take_the_form_of_their_kind(client: Any) -> None:
    document = await _document(client)

    for path, item in document["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", ()):
                kind = PATH_ID_KINDS.get(parameter["name"])
                named = (f"{method.upper()} {path}", "path", parameter["name"])
                if parameter["in"] == "path" and kind is not None and named not in LOOKED_UP:
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
    ],
    ids=["free-text", "another-kind", "a-number", "upper-case", "prefix-only"],
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
        {"resourceIds": f"{WELL_FORMED_NOTHING['invoice']}, {WELL_FORMED_NOTHING['customer']}"},
        {"resourceIds": f"{WELL_FORMED_NOTHING['invoice']},INV_1,é"},
        {"resourceId": "x" * 2000},
    ],
    ids=["short", "space", "mixed", "long"],
)
async def test_app_data_reads_look_ids_up_whatever_their_form(
    client: Any, admin_headers: dict[str, str], query: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)

    response = await api.call("GET", "/app-data", query=query)

    assert response.status_code == 200, await response.get_json()
    assert (await response.get_json())["data"] == []


async def test_app_data_reads_take_well_formed_ids_of_any_record_kind(
    client: Any, admin_headers: dict[str, str]
) -> None:
    api = await owner_api(client, admin_headers)
    ids = ",".join(WELL_FORMED_NOTHING.values())

    response = await api.call("GET", "/app-data", query={"resourceIds": ids})

    assert response.status_code == 200, await response.get_json()
    assert (await response.get_json())["data"] == []


async def test_an_empty_cursor_is_no_cursor(client: Any, admin_headers: dict[str, str]) -> None:
    api = await owner_api(client, admin_headers)

    empty = await api.call("GET", "/customers", query={"cursor": ""})
    absent = await api.call("GET", "/customers")

    assert empty.status_code == 400
    assert _validation_failure(await empty.get_json()) == [
        "cursor is not a cursor this list returned"
    ]
    assert absent.status_code == 200
