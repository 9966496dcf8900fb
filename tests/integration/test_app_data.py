"""App data on both stores: fields declared in the developer console, values written, read and
deleted through the data API.

Spec: What the service does (4: typed app-owned data fields on records), Resources (app data
field: CHOICE options; the envelope's details), Endpoints (GET /app-data, DELETE /app-data/:id),
Errors (API error codes of app data, INVALID_CHOICES, body validation), Limits (25 values, 50
ids, CHOICE options); contract.md (the app-data-fields rows, resource types, POST /app-data's
shape, resourceIds comma-separated). Every code of the API error table that app data answers is
provoked here, and every answer is held against the OpenAPI document.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
import pytest
import trio

from ledgerport import catalog

from .data_api import ALL_SCOPES, Api, member_api, owner_api
from .oauth_helpers import (
    REDIRECT_URI,
    World,
    add_member,
    exchange,
    full_grant,
    install,
    installation_id,
    login,
    make_world,
    session_token,
)

TIMEOUT = 60
APP_DATA_CODES = {
    "UNKNOWN_APP_DATA_FIELD",
    "INVALID_APP_DATA_VALUE",
    "RECORD_NOT_FOUND",
    "APP_CANNOT_ACCESS_TYPE_RECORD",
    "PROVIDE_RESOURCEID_RESOURCEIDS",
    "RESOURCEIDS_ACCEPTS_MOST_50_IDS",
    "APP_DATA_VALUE_NOT_FOUND",
    "APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY",
}
"""The API error table's codes that app data answers."""
STATUSES = ["exported", "pending", "failed"]
FIELDS = [
    {
        "resourceType": "invoice",
        "key": "syncStatus",
        "type": "CHOICE",
        "choices": STATUSES,
        "name": "Sync status",
    },
    {"resourceType": "invoice", "key": "note", "type": "TEXT"},
    {"resourceType": "invoice", "key": "weight", "type": "NUMBER"},
    {"resourceType": "invoice", "key": "flagged", "type": "BOOLEAN"},
    {"resourceType": "invoice", "key": "shipOn", "type": "DATE"},
    {"resourceType": "customer", "key": "note", "type": "TEXT"},
]
"""The fields every test's app declares."""


# --- Steps ---------------------------------------------------------------------------------------


async def developer_headers(client: Any, admin_headers: dict[str, str], user_id: str) -> dict:
    response = await client.post(
        "/admin/developer-tokens", json={"userId": user_id}, headers=admin_headers
    )
    assert response.status_code == 201
    return {"Authorization": f"Bearer {(await response.get_json())['token']}"}


@dataclass
class Ctx:
    """A business whose app holds every area scope, the app's developer, its declared fields,
    and a customer with an invoice to keep data on."""

    client: Any
    admin_headers: dict[str, str]
    api: Api
    developer: dict[str, str]
    fields: dict[tuple[str, str], dict[str, Any]]
    customer: dict[str, Any]
    invoice: dict[str, Any]

    @property
    def fields_path(self) -> str:
        return f"/developer/apps/{self.api.world.app_id}/app-data-fields"

    def value(self, key: str, value: Any, *, record: str = "invoice") -> dict[str, Any]:
        target = self.invoice if record == "invoice" else self.customer
        return {"resourceType": record, "resourceId": target["id"], "key": key, "value": value}

    async def write(self, *values: dict[str, Any], api: Api | None = None) -> Any:
        return await (api or self.api).call("POST", "/app-data", {"values": list(values)})

    async def read(self, query: dict[str, str], api: Api | None = None) -> Any:
        return await (api or self.api).call("GET", "/app-data", query=query)

    async def written(self, *values: dict[str, Any]) -> list[dict[str, Any]]:
        response = await self.write(*values)
        body = await response.get_json()
        assert response.status_code == 200, body
        data: list[dict[str, Any]] = body["data"]
        return data

    async def values_of(self, *resource_ids: str) -> list[dict[str, Any]]:
        response = await self.read({"resourceIds": ",".join(resource_ids)})
        body = await response.get_json()
        assert response.status_code == 200, body
        assert body["next"] is None
        data: list[dict[str, Any]] = body["data"]
        return data

    async def declare(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        return await self.client.post(
            self.fields_path, json=body, headers=headers or self.developer
        )


async def declare_fields(client: Any, headers: dict[str, str], app_id: str) -> dict:
    declared = {}
    for body in FIELDS:
        response = await client.post(
            f"/developer/apps/{app_id}/app-data-fields", json=body, headers=headers
        )
        assert response.status_code == 201, await response.get_data(as_text=True)
        field = await response.get_json()
        declared[field["resourceType"], field["key"]] = field
    return declared


async def context(client: Any, admin_headers: dict[str, str]) -> Ctx:
    api = await owner_api(client, admin_headers)
    developer = await developer_headers(client, admin_headers, api.world.user_id)
    fields = await declare_fields(client, developer, api.world.app_id)
    customer = await api.customer()
    invoice = await api.invoice(customer["id"])
    return Ctx(client, admin_headers, api, developer, fields, customer, invoice)


async def other_app(ctx: Ctx) -> Api:
    """A second app of the same developer, installed in the same business with every area
    scope and declaring the same fields."""
    world = ctx.api.world
    response = await ctx.client.post(
        "/admin/apps",
        json={
            "name": "Other Sync",
            "type": "CONFIDENTIAL",
            "redirectUris": [REDIRECT_URI],
            "scopes": list(ALL_SCOPES),
            "developerUserId": world.user_id,
            "reviewed": True,
        },
        headers=ctx.admin_headers,
    )
    app = await response.get_json()
    other = World(
        world.business_id,
        world.user_id,
        world.email,
        world.password,
        app["id"],
        app["clientId"],
        app["clientSecret"],
    )
    await install(ctx.client, ctx.admin_headers, other, ALL_SCOPES)
    await declare_fields(ctx.client, ctx.developer, other.app_id)
    exchanged = await exchange(
        ctx.client, other, await session_token(ctx.client, ctx.admin_headers, other)
    )
    return Api(ctx.client, (await exchanged.get_json())["access_token"], other)


async def narrow_api(ctx: Ctx, scopes: tuple[str, ...]) -> Api:
    """A new business whose app (the same fields declared) is installed with ``scopes`` only."""
    world = await make_world(ctx.client, ctx.admin_headers, scopes=ALL_SCOPES)
    developer = await developer_headers(ctx.client, ctx.admin_headers, world.user_id)
    await declare_fields(ctx.client, developer, world.app_id)
    tokens = await full_grant(ctx.client, world, scope=" ".join(scopes))
    return Api(ctx.client, tokens["access_token"], world)


async def assert_coded(response: Any, status: int, code: str) -> dict[str, Any]:
    body: dict[str, Any] = await response.get_json()
    assert response.status_code == status, body
    assert body["statusCode"] == status
    assert body["code"] == code, body
    assert isinstance(body["message"], str)
    return body


async def assert_validation(response: Any) -> list[str]:
    """A validation failure: 400, an array of sentences, no code."""
    body = await response.get_json()
    assert response.status_code == 400, body
    assert "code" not in body, body
    assert isinstance(body["message"], list)
    messages: list[str] = body["message"]
    return messages


async def app_data_events(platform: Any, app_id: str) -> list[tuple[str, dict[str, Any]]]:
    async with platform.store.transaction() as tx:
        rows = await tx.fetch(
            "SELECT business_id, data FROM events WHERE app_id = $1 AND type = $2 ORDER BY seq",
            app_id,
            "app_data.updated",
        )
    return [(row["business_id"], json.loads(row["data"])) for row in rows]


async def stored_values(platform: Any) -> int:
    async with platform.store.transaction() as tx:
        count: int = await tx.fetchval("SELECT COUNT(*) FROM app_data_values")
    return count


# --- Fields --------------------------------------------------------------------------------------


async def test_the_developer_declares_lists_changes_and_deletes_fields(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        choice = ctx.fields["invoice", "syncStatus"]
        listed = await (await client.get(ctx.fields_path, headers=ctx.developer)).get_json()
        renamed = await client.patch(
            f"{ctx.fields_path}/{choice['id']}",
            json={"choices": [" exported ", "pending", "failed", "retrying"], "name": None},
            headers=ctx.developer,
        )
        note = ctx.fields["invoice", "note"]
        named = await client.patch(
            f"{ctx.fields_path}/{note['id']}", json={"name": "Note"}, headers=ctx.developer
        )
        deleted = await client.delete(f"{ctx.fields_path}/{note['id']}", headers=ctx.developer)
        again = await client.delete(f"{ctx.fields_path}/{note['id']}", headers=ctx.developer)
        after = await (await client.get(ctx.fields_path, headers=ctx.developer)).get_json()

    assert choice == {
        "id": choice["id"],
        "resourceType": "invoice",
        "key": "syncStatus",
        "type": "CHOICE",
        "choices": STATUSES,
        "name": "Sync status",
    }
    assert ctx.fields["invoice", "note"]["choices"] is None
    assert ctx.fields["invoice", "note"]["name"] is None
    assert listed["next"] is None
    assert [(f["resourceType"], f["key"]) for f in listed["data"]] == sorted(ctx.fields)
    assert renamed.status_code == 200
    assert (await renamed.get_json())["choices"] == [*STATUSES, "retrying"]
    assert (await renamed.get_json())["name"] is None
    assert (await named.get_json())["name"] == "Note"
    assert deleted.status_code == 204
    assert again.status_code == 404
    assert ("invoice", "note") not in {(f["resourceType"], f["key"]) for f in after["data"]}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"resourceType": "ledger", "key": "a", "type": "TEXT"}, "resourceType"),
        ({"resourceType": "invoice", "key": "1st", "type": "TEXT"}, "key"),
        ({"resourceType": "invoice", "key": "a" * 65, "type": "TEXT"}, "key"),
        ({"resourceType": "invoice", "key": "a", "type": "JSON"}, "type"),
        ({"resourceType": "invoice", "key": "a", "type": "TEXT", "choices": ["x"]}, "choices"),
        ({"resourceType": "invoice", "key": "a", "type": "TEXT", "name": "  "}, "name"),
        ({"resourceType": "invoice", "key": "a", "type": "TEXT", "extra": 1}, "extra"),
    ],
)
async def test_a_malformed_field_is_a_validation_failure(
    client: Any, admin_headers: dict[str, str], body: dict[str, Any], problem: str
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        response = await ctx.declare(body)

    messages = await assert_validation(response)
    assert any(problem in message for message in messages), messages


async def test_a_key_is_declared_once_per_resource_type(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        twice = await ctx.declare({"resourceType": "invoice", "key": "note", "type": "NUMBER"})
        elsewhere = await ctx.declare({"resourceType": "quote", "key": "note", "type": "NUMBER"})

    assert twice.status_code == 409
    assert elsewhere.status_code == 201


CHOICES_REFUSED = {
    "no options": {"choices": []},
    "51 options": {"choices": [f"option {n}" for n in range(51)]},
    "duplicates after trimming": {"choices": ["gold", " gold "]},
    "empty after trimming": {"choices": ["gold", "   "]},
    "61 characters": {"choices": ["x" * 61]},
    "null": {"choices": None},
    "missing": {},
    "not strings": {"choices": [1, 2]},
}


@pytest.mark.parametrize("body", CHOICES_REFUSED.values(), ids=CHOICES_REFUSED.keys())
async def test_invalid_choices_are_refused_at_declaration(
    client: Any, admin_headers: dict[str, str], body: dict[str, Any]
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        response = await ctx.declare(
            {"resourceType": "quote", "key": "tier", "type": "CHOICE", **body}
        )

    await assert_coded(response, 400, "INVALID_CHOICES")


@pytest.mark.parametrize(
    "choices",
    [CHOICES_REFUSED[name]["choices"] for name in list(CHOICES_REFUSED)[:6]],
    ids=list(CHOICES_REFUSED)[:6],
)
async def test_invalid_choices_are_refused_on_edit(
    client: Any, admin_headers: dict[str, str], choices: Any, platform: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        field = ctx.fields["invoice", "syncStatus"]
        response = await client.patch(
            f"{ctx.fields_path}/{field['id']}", json={"choices": choices}, headers=ctx.developer
        )
        listed = await (await client.get(ctx.fields_path, headers=ctx.developer)).get_json()

    await assert_coded(response, 400, "INVALID_CHOICES")
    kept = next(f for f in listed["data"] if f["id"] == field["id"])
    assert kept["choices"] == STATUSES


async def test_choices_are_trimmed_and_at_most_60_characters_after_trimming(
    client, admin_headers
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        widest = "y" * catalog.CHOICE_OPTION_MAX_LENGTH
        fifty = [f"option {n}" for n in range(catalog.CHOICE_OPTIONS_MAX)]
        padded = await ctx.declare(
            {"resourceType": "quote", "key": "tier", "type": "CHOICE", "choices": [f"  {widest} "]}
        )
        most = await ctx.declare(
            {"resourceType": "quote", "key": "many", "type": "CHOICE", "choices": fifty}
        )
        on_text = await client.patch(
            f"{ctx.fields_path}/{ctx.fields['invoice', 'note']['id']}",
            json={"choices": ["a"]},
            headers=ctx.developer,
        )

    assert padded.status_code == 201
    assert (await padded.get_json())["choices"] == [widest]
    assert most.status_code == 201
    await assert_validation(on_text)  # choices belong to CHOICE fields only


async def test_another_developers_app_is_not_found(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        stranger_id, _, _ = await add_member(client, admin_headers, ctx.api.world, "owner")
        stranger = await developer_headers(client, admin_headers, stranger_id)
        field = f"{ctx.fields_path}/{ctx.fields['invoice', 'note']['id']}"
        answers = [
            await ctx.declare({"resourceType": "quote", "key": "a", "type": "TEXT"}, stranger),
            await client.get(ctx.fields_path, headers=stranger),
            await client.patch(field, json={"name": "Mine"}, headers=stranger),
            await client.delete(field, headers=stranger),
        ]
        own_fields = await (await client.get(ctx.fields_path, headers=ctx.developer)).get_json()

    for response in answers:
        await assert_coded(response, 404, "APP_NOT_FOUND")
    assert len(own_fields["data"]) == len(FIELDS)


# --- Writing and reading values ------------------------------------------------------------------


async def test_values_of_every_type_are_written_and_read(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        written = await ctx.written(
            ctx.value("syncStatus", "exported"),
            ctx.value("note", "Sent to the warehouse"),
            ctx.value("weight", 12.5),
            ctx.value("flagged", True),
            ctx.value("shipOn", "2026-09-22"),
            ctx.value("note", "", record="customer"),
        )
        read = await ctx.values_of(ctx.invoice["id"], ctx.customer["id"])

    assert [(v["key"], v["value"]) for v in written] == [
        ("syncStatus", "exported"),
        ("note", "Sent to the warehouse"),
        ("weight", "12.5"),
        ("flagged", True),
        ("shipOn", "2026-09-22"),
        ("note", ""),
    ]
    assert all(v["id"].startswith("apd_") for v in written)
    assert written[0]["resourceType"] == "invoice"
    assert written[0]["resourceId"] == ctx.invoice["id"]
    # The invoice's values by key, then the customer's: the order of the ids asked for.
    assert read == [*sorted(written[:5], key=lambda v: v["key"]), written[5]]


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("123456789012.12345678", "123456789012.12345678"),
        ('"123456789012.12345678"', "123456789012.12345678"),
        ('"0012.50"', "12.50"),
        ("1e3", "1000"),
        ("-0.0", "0.0"),
        ("999999999999999", "999999999999999"),
        ('"-7"', "-7"),
    ],
)
async def test_numbers_are_kept_as_the_decimals_sent(
    client: Any, admin_headers: dict[str, str], raw: str, stored: str
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        value = json.dumps(ctx.value("weight", "PLACEHOLDER")).replace('"PLACEHOLDER"', raw)
        response = await client.post(
            "/app-data",
            data=f'{{"values": [{value}]}}'.encode(),
            headers=ctx.api.headers({"Content-Type": "application/json"}),
        )
        read = await ctx.values_of(ctx.invoice["id"])

    body = await response.get_json()
    assert response.status_code == 200, body
    assert body["data"][0]["value"] == stored
    assert read[0]["value"] == stored


async def test_a_write_replaces_the_value_of_the_same_resource_and_key(
    client, admin_headers, platform
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        (first,) = await ctx.written(ctx.value("syncStatus", "pending"))
        (second,) = await ctx.written(ctx.value("syncStatus", "exported"))
        (unchanged,) = await ctx.written(ctx.value("syncStatus", "exported"))
        read = await ctx.values_of(ctx.invoice["id"])
        events = await app_data_events(platform, ctx.api.world.app_id)

    assert first["id"] == second["id"] == unchanged["id"]
    assert read == [second]
    assert second["value"] == "exported"
    # Two changes, two events; writing the stored value again changes nothing.
    assert [data["value"] for _, data in events] == ["pending", "exported"]


async def test_writes_record_app_data_updated_for_the_app_and_business(
    client, admin_headers, platform
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        written = await ctx.written(ctx.value("flagged", False), ctx.value("weight", "3.25"))
        feed = await ctx.api.call("GET", "/events", query={"types": "app_data.updated"})
        events = await app_data_events(platform, ctx.api.world.app_id)

    assert events == [(ctx.api.world.business_id, value) for value in written]
    assert [event["data"] for event in (await feed.get_json())["data"]] == written


async def test_values_are_written_all_or_none(client, admin_headers, platform) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        missing = {**ctx.value("note", "x"), "resourceId": "inv_000000000000000000000000"}
        response = await ctx.write(ctx.value("flagged", True), missing)
        events = await app_data_events(platform, ctx.api.world.app_id)
        count = await stored_values(platform)

    body = await assert_coded(response, 404, "RECORD_NOT_FOUND")
    assert body["params"]["p1"] == missing["resourceId"]
    assert (events, count) == ([], 0)


async def test_invalid_values_are_all_named_in_details(client, admin_headers, platform) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        bad = [
            ctx.value("syncStatus", "lost"),
            ctx.value("note", "x" * 501),
            ctx.value("weight", "12,50"),
            ctx.value("flagged", "true"),
            ctx.value("shipOn", "2026-02-30"),
            ctx.value("note", 5, record="customer"),
        ]
        another = await ctx.api.invoice(ctx.customer["id"])
        fine = {**ctx.value("shipOn", "2026-09-22"), "resourceId": another["id"]}
        response = await ctx.write(fine, *bad)
        events = await app_data_events(platform, ctx.api.world.app_id)
        count = await stored_values(platform)

    body = await assert_coded(response, 400, "INVALID_APP_DATA_VALUE")
    named = [(d["resourceType"], d["resourceId"], d["key"]) for d in body["details"]]
    assert named == [(v["resourceType"], v["resourceId"], v["key"]) for v in bad]
    assert all(d["reason"].startswith(f"{d['key']} must be") for d in body["details"])
    assert body["params"]["p0"] == len(bad)
    assert (events, count) == ([], 0)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("weight", "1e3"),
        ("weight", 1000000000000000),
        ("weight", "0.123456789"),
        ("weight", True),
        ("flagged", 1),
        ("shipOn", "20260922"),
        ("shipOn", "2026-09-22T10:00:00Z"),
        ("syncStatus", " exported"),
        ("note", "é" * 501),
    ],
)
async def test_each_type_refuses_what_does_not_fit(
    client: Any, admin_headers: dict[str, str], key: str, value: Any
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        response = await ctx.write(ctx.value(key, value))

    body = await assert_coded(response, 400, "INVALID_APP_DATA_VALUE")
    assert [d["key"] for d in body["details"]] == [key]


FITTING = {
    "syncStatus": "failed",
    "note": "x",
    "weight": "1",
    "flagged": True,
    "shipOn": "2026-01-01",
}
"""A value that fits each invoice field."""


async def test_at_most_25_values_are_written_at_once(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        invoices = [ctx.invoice] + [await ctx.api.invoice(ctx.customer["id"]) for _ in range(4)]
        values = [
            {"resourceType": "invoice", "resourceId": invoice["id"], "key": key, "value": value}
            for invoice in invoices
            for key, value in FITTING.items()
        ]
        most = await ctx.write(*values)
        too_many = await ctx.write(*values, values[0])
        none = await ctx.write()

    assert len(values) == catalog.APP_DATA_VALUES_MAX
    assert most.status_code == 200, await most.get_json()
    assert len((await most.get_json())["data"]) == catalog.APP_DATA_VALUES_MAX
    assert any("25" in message for message in await assert_validation(too_many))
    await assert_validation(none)


async def test_one_request_names_a_resource_and_key_once(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        response = await ctx.write(ctx.value("note", "a"), ctx.value("note", "b"))

    messages = await assert_validation(response)
    assert messages == ["values.1 repeats the resource and key of values.0"]


async def test_reads_take_resource_id_or_comma_separated_ids(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        await ctx.written(
            ctx.value("note", "on invoice"), ctx.value("note", "on customer", record="customer")
        )
        one = await (await ctx.read({"resourceId": ctx.customer["id"]})).get_json()
        both = await ctx.values_of(
            ctx.customer["id"], "cus_00000000000000000000000f", ctx.invoice["id"]
        )
        typed = await (
            await ctx.read(
                {
                    "resourceIds": f"{ctx.invoice['id']},{ctx.customer['id']}",
                    "resourceType": "invoice",
                }
            )
        ).get_json()
        ids = [f"inv_{n:024x}" for n in range(catalog.APP_DATA_RESOURCE_IDS_MAX - 1)]
        fifty = await ctx.values_of(*ids, ctx.invoice["id"])

    assert [v["value"] for v in one["data"]] == ["on customer"]
    assert [v["value"] for v in both] == ["on customer", "on invoice"]
    assert [v["value"] for v in typed["data"]] == ["on invoice"]
    assert [v["value"] for v in fifty] == ["on invoice"]


async def test_a_value_is_deleted_once(client, admin_headers, platform) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        (value,) = await ctx.written(ctx.value("note", "temporary"))
        deleted = await ctx.api.call("DELETE", f"/app-data/{value['id']}")
        again = await ctx.api.call("DELETE", f"/app-data/{value['id']}")
        read = await ctx.values_of(ctx.invoice["id"])
        events = await app_data_events(platform, ctx.api.world.app_id)

    assert deleted.status_code == 204
    await assert_coded(again, 404, "APP_DATA_VALUE_NOT_FOUND")
    assert read == []
    assert [data for _, data in events] == [value, {**value, "value": None}]


async def test_deleting_a_field_deletes_its_values(client, admin_headers, platform) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        await ctx.written(ctx.value("note", "goes"), ctx.value("flagged", True))
        field = ctx.fields["invoice", "note"]
        await client.delete(f"{ctx.fields_path}/{field['id']}", headers=ctx.developer)
        read = await ctx.values_of(ctx.invoice["id"])
        written_again = await ctx.write(ctx.value("note", "back"))

    assert [v["key"] for v in read] == ["flagged"]
    await assert_coded(written_again, 400, "UNKNOWN_APP_DATA_FIELD")


async def test_values_need_no_role_permission(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        viewer = await member_api(client, admin_headers, ctx.api, "viewer")
        written = await ctx.write(ctx.value("note", "by a viewer"), api=viewer)
        read = await ctx.read({"resourceId": ctx.invoice["id"]}, api=viewer)

    assert written.status_code == 200, await written.get_json()
    assert [v["value"] for v in (await read.get_json())["data"]] == ["by a viewer"]


async def test_values_need_the_app_data_scopes(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        reader = await full_grant(client, ctx.api.world, scope="app-data:read invoices:read")
        api = Api(client, reader["access_token"], ctx.api.world)
        write = await ctx.write(ctx.value("note", "x"), api=api)
        read = await ctx.read({"resourceId": ctx.invoice["id"]}, api=api)

    body = await assert_coded(write, 403, "INSUFFICIENT_SCOPE")
    assert body["message"].startswith("Insufficient scope")
    assert read.status_code == 200


async def test_types_the_installation_no_longer_reads_are_left_out(
    client, admin_headers, platform
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        await ctx.written(ctx.value("note", "i"), ctx.value("note", "c", record="customer"))
        # Installed again with fewer scopes: the values stay, the invoice's are out of reach.
        installation = await installation_id(platform, ctx.api.world)
        await client.delete(f"/admin/installations/{installation}", headers=admin_headers)
        await install(client, admin_headers, ctx.api.world, ("app-data:read", "customers:read"))
        exchanged = await exchange(
            client, ctx.api.world, await session_token(client, admin_headers, ctx.api.world)
        )
        narrow = Api(client, (await exchanged.get_json())["access_token"], ctx.api.world)
        both = await ctx.read({"resourceIds": f"{ctx.invoice['id']},{ctx.customer['id']}"}, narrow)
        invoices = await ctx.read(
            {"resourceId": ctx.invoice["id"], "resourceType": "invoice"}, narrow
        )

    assert [v["value"] for v in (await both.get_json())["data"]] == ["c"]
    await assert_coded(invoices, 403, "APP_CANNOT_ACCESS_TYPE_RECORD")


# --- Every error code ----------------------------------------------------------------------------

Case = Callable[[Ctx], Awaitable[Any]]


async def _unknown_key(ctx: Ctx) -> Any:
    return await ctx.write(ctx.value("undeclared", "x"))


async def _key_of_another_type(ctx: Ctx) -> Any:
    # syncStatus is declared for invoices, not customers.
    return await ctx.write(ctx.value("syncStatus", "exported", record="customer"))


async def _invalid_value(ctx: Ctx) -> Any:
    return await ctx.write(ctx.value("flagged", "yes"))


async def _unknown_record(ctx: Ctx) -> Any:
    return await ctx.write({**ctx.value("note", "x"), "resourceId": "inv_00000000000000000000000f"})


async def _record_of_another_type(ctx: Ctx) -> Any:
    return await ctx.write({**ctx.value("note", "x"), "resourceId": ctx.customer["id"]})


async def _record_of_another_business(ctx: Ctx) -> Any:
    elsewhere = await owner_api(ctx.client, ctx.admin_headers)
    customer = await elsewhere.customer()
    invoice = await elsewhere.invoice(customer["id"])
    return await ctx.write({**ctx.value("note", "x"), "resourceId": invoice["id"]})


async def _type_without_read_scope(ctx: Ctx) -> Any:
    narrow = await narrow_api(ctx, ("app-data:read", "app-data:write", "customers:read"))
    return await ctx.write(ctx.value("note", "x"), api=narrow)


async def _read_type_without_read_scope(ctx: Ctx) -> Any:
    narrow = await narrow_api(ctx, ("app-data:read", "app-data:write", "customers:read"))
    return await ctx.read(
        {"resourceId": "inv_00000000000000000000000f", "resourceType": "invoice"}, api=narrow
    )


async def _no_resource_ids(ctx: Ctx) -> Any:
    return await ctx.read({})


async def _51_resource_ids(ctx: Ctx) -> Any:
    ids = [f"inv_{n:024x}" for n in range(catalog.APP_DATA_RESOURCE_IDS_MAX + 1)]
    return await ctx.read({"resourceIds": ",".join(ids)})


async def _50_ids_and_one_more(ctx: Ctx) -> Any:
    ids = [f"inv_{n:024x}" for n in range(catalog.APP_DATA_RESOURCE_IDS_MAX)]
    return await ctx.read({"resourceIds": ",".join(ids), "resourceId": ctx.invoice["id"]})


async def _unknown_value(ctx: Ctx) -> Any:
    return await ctx.api.call("DELETE", "/app-data/apd_unknown")


async def _another_apps_value(ctx: Ctx) -> Any:
    other = await other_app(ctx)
    (value,) = await ctx.written(ctx.value("note", "mine"))
    return await other.call("DELETE", f"/app-data/{value['id']}")


async def _value_in_another_business(ctx: Ctx) -> Any:
    (value,) = await ctx.written(ctx.value("note", "here"))
    # The same app, installed in a second business of the same owner.
    business = await (
        await ctx.client.post(
            "/admin/businesses", json={"name": "Second"}, headers=ctx.admin_headers
        )
    ).get_json()
    await ctx.client.put(
        f"/admin/businesses/{business['id']}/members/{ctx.api.world.user_id}",
        json={"role": "owner"},
        headers=ctx.admin_headers,
    )
    second = World(**{**vars(ctx.api.world), "business_id": business["id"]})
    await install(ctx.client, ctx.admin_headers, second, ALL_SCOPES)
    exchanged = await exchange(
        ctx.client, second, await session_token(ctx.client, ctx.admin_headers, second)
    )
    api = Api(ctx.client, (await exchanged.get_json())["access_token"], second)
    return await api.call("DELETE", f"/app-data/{value['id']}")


async def _cookie_write(ctx: Ctx) -> Any:
    await login(ctx.client, ctx.api.world)
    return await ctx.client.post("/app-data", json={"values": [ctx.value("note", "x")]})


async def _cookie_read(ctx: Ctx) -> Any:
    await login(ctx.client, ctx.api.world)
    return await ctx.client.get(f"/app-data?resourceId={ctx.invoice['id']}")


async def _cookie_delete(ctx: Ctx) -> Any:
    (value,) = await ctx.written(ctx.value("note", "x"))
    await login(ctx.client, ctx.api.world)
    return await ctx.client.delete(f"/app-data/{value['id']}")


async def _any_cookie_without_token(ctx: Ctx) -> Any:
    return await ctx.client.get(
        "/app-data?resourceId=inv_1", headers={"Cookie": "lp_session=anything"}
    )


ERROR_CASES: dict[str, tuple[str, Case]] = {
    "undeclared key": ("UNKNOWN_APP_DATA_FIELD", _unknown_key),
    "key of another type": ("UNKNOWN_APP_DATA_FIELD", _key_of_another_type),
    "value of the wrong type": ("INVALID_APP_DATA_VALUE", _invalid_value),
    "unknown record": ("RECORD_NOT_FOUND", _unknown_record),
    "record of another type": ("RECORD_NOT_FOUND", _record_of_another_type),
    "record of another business": ("RECORD_NOT_FOUND", _record_of_another_business),
    "write without the type's read scope": (
        "APP_CANNOT_ACCESS_TYPE_RECORD",
        _type_without_read_scope,
    ),
    "read of a type without its read scope": (
        "APP_CANNOT_ACCESS_TYPE_RECORD",
        _read_type_without_read_scope,
    ),
    "no resource ids": ("PROVIDE_RESOURCEID_RESOURCEIDS", _no_resource_ids),
    "51 resource ids": ("RESOURCEIDS_ACCEPTS_MOST_50_IDS", _51_resource_ids),
    "50 resource ids and a resource id": (
        "RESOURCEIDS_ACCEPTS_MOST_50_IDS",
        _50_ids_and_one_more,
    ),
    "unknown value": ("APP_DATA_VALUE_NOT_FOUND", _unknown_value),
    "another app's value": ("APP_DATA_VALUE_NOT_FOUND", _another_apps_value),
    "value in another business": ("APP_DATA_VALUE_NOT_FOUND", _value_in_another_business),
    "write with the session cookie": ("APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY", _cookie_write),
    "read with the session cookie": ("APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY", _cookie_read),
    "delete with the session cookie": (
        "APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY",
        _cookie_delete,
    ),
    "any session cookie": ("APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY", _any_cookie_without_token),
}


@pytest.mark.parametrize(("code", "case"), ERROR_CASES.values(), ids=ERROR_CASES.keys())
async def test_every_app_data_error_code(
    client: Any, admin_headers: dict[str, str], code: str, case: Case
) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        response = await case(ctx)

    await assert_coded(response, catalog.ERROR_CODES[code].status, code)


def test_every_app_data_code_is_provoked() -> None:
    assert {code for code, _ in ERROR_CASES.values()} == APP_DATA_CODES


async def test_the_session_cookie_with_a_token_is_served(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        ctx = await context(client, admin_headers)
        await login(client, ctx.api.world)
        response = await ctx.write(ctx.value("note", "both"))

    assert response.status_code == 200


# --- The document --------------------------------------------------------------------------------


async def _checked(document: dict[str, Any], method: str, path: str, response: Any) -> None:
    """Assert ``response`` is an answer the OpenAPI document gives for ``method path``."""
    operation = document["paths"][path][method.lower()]
    status = str(response.status_code)
    assert status in operation["responses"], (method, path, status)
    documented = operation["responses"][status]
    for name, header in documented.get("headers", {}).items():
        if header["required"]:
            assert name in response.headers, (method, path, status, name)
    schema = documented.get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return
    validator = jsonschema_rs.validator_for({**schema, "components": document["components"]})
    body = await response.get_json()
    errors = [error.message for error in validator.iter_errors(body)]
    assert not errors, (method, path, status, body, errors)


async def test_answers_match_the_openapi_document(client, admin_headers) -> None:
    with trio.fail_after(TIMEOUT):
        document = await (await client.get("/openapi.json")).get_json()
        ctx = await context(client, admin_headers)
        fields = "/developer/apps/{app_id}/app-data-fields"
        field = fields + "/{field_id}"
        field_path = f"{ctx.fields_path}/{ctx.fields['invoice', 'syncStatus']['id']}"
        answers = [
            (
                "POST",
                fields,
                await ctx.declare({"resourceType": "quote", "key": "k", "type": "DATE"}),
            ),
            (
                "POST",
                fields,
                await ctx.declare({"resourceType": "quote", "key": "k", "type": "DATE"}),
            ),
            (
                "POST",
                fields,
                await ctx.declare({"resourceType": "quote", "key": "c", "type": "CHOICE"}),
            ),
            ("GET", fields, await client.get(ctx.fields_path, headers=ctx.developer)),
            (
                "PATCH",
                field,
                await client.patch(field_path, json={"name": "S"}, headers=ctx.developer),
            ),
            (
                "PATCH",
                field,
                await client.patch(field_path, json={"choices": None}, headers=ctx.developer),
            ),
            (
                "POST",
                "/app-data",
                await ctx.write(ctx.value("syncStatus", "failed"), ctx.value("weight", 2)),
            ),
            ("POST", "/app-data", await ctx.write(ctx.value("syncStatus", "lost"))),
            ("POST", "/app-data", await ctx.write(ctx.value("nope", 1))),
            ("GET", "/app-data", await ctx.read({"resourceId": ctx.invoice["id"]})),
            ("GET", "/app-data", await ctx.read({})),
            ("DELETE", "/app-data/{value_id}", await ctx.api.call("DELETE", "/app-data/apd_x")),
            ("DELETE", field, await client.delete(field_path, headers=ctx.developer)),
        ]
        await login(client, ctx.api.world)
        answers.append(("GET", "/app-data", await client.get("/app-data?resourceId=x")))
        (value,) = await ctx.written(ctx.value("note", "x"))
        answers.append(
            (
                "DELETE",
                "/app-data/{value_id}",
                await ctx.api.call("DELETE", f"/app-data/{value['id']}"),
            )
        )
        for method, path, response in answers:
            await _checked(document, method, path, response)

    assert [r.status_code for _, _, r in answers] == [
        201,
        409,
        400,
        200,
        200,
        400,
        200,
        400,
        400,
        200,
        400,
        404,
        204,
        403,
        204,
    ]
