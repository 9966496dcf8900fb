"""The MCP server's tools are read from the data API's routes: an area added the way every area
is (a list, a read and a create in the ``api`` blueprint, documented by ``operation``) is three
tools with no code of the MCP server's own."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from quart import Blueprint
from quart_trio import QuartTrio
from typing_extensions import TypedDict

from ledgerport.http._openapi import JSON, Body, Param, json_reply, operation
from ledgerport.http.mcp import read_tools
from ledgerport.http.mcp._tools import ToolCatalogError


class WidgetIn(BaseModel):
    name: str
    size: int = 1


class Widget(TypedDict):
    id: str
    name: str


class WidgetPage(TypedDict):
    data: list[Widget]
    next: str | None


ID = Param("record_id", "path", "A widget's id", {"type": "string", "pattern": "^wid_[0-9a-f]+$"})
LIMIT = Param("limit", "query", "Items per page", {"type": "integer"})
VERSION = Param("Service-Version", "header", "The API version")
KEY = Param("Idempotency-Key", "header", "A unique value")


def _app(body: type[BaseModel] = WidgetIn) -> QuartTrio:
    app = QuartTrio(__name__)
    api = Blueprint("api", __name__)

    @operation(json_reply(200, WidgetPage, "A page"), params=(LIMIT, VERSION))
    async def list_widget() -> Any:
        """List the business's widgets."""

    @operation(json_reply(200, Widget, "The widget"), params=(ID, VERSION))
    async def get_widget(record_id: str) -> Any:
        """One widget."""

    @operation(
        json_reply(201, Widget, "The new widget"), bodies=(Body(JSON, body),), params=(VERSION, KEY)
    )
    async def create_widget() -> Any:
        """Create a widget."""

    api.add_url_rule("/widgets", "list_widget", list_widget, methods=["GET"])
    api.add_url_rule("/widgets/<record_id>", "get_widget", get_widget, methods=["GET"])
    api.add_url_rule("/widgets", "create_widget", create_widget, methods=["POST"])
    api.add_url_rule("/widgets/<record_id>/polish", "polish", create_widget, methods=["POST"])
    app.register_blueprint(api)
    return app


def test_a_new_area_is_a_list_a_get_and_a_create_tool() -> None:
    tools = read_tools(_app())

    assert set(tools) == {"list_widgets", "get_widget", "create_widget"}
    listed, got, created = tools["list_widgets"], tools["get_widget"], tools["create_widget"]
    assert (listed.method, listed.path, listed.query) == ("GET", "/widgets", ("limit",))
    assert set(listed.input_schema["properties"]) == {"limit", "serviceVersion"}
    assert listed.output_schema["properties"]["data"]["type"] == "array"
    assert got.input_schema["required"] == ["id"]
    assert got.input_schema["properties"]["id"]["pattern"] == "^wid_[0-9a-f]+$"
    assert got.target({"id": "wid_1"}) == "/widgets/wid_1"
    assert got.output_schema["required"] == ["id", "name"]
    assert created.body
    assert set(created.input_schema["properties"]) == {
        "name",
        "size",
        "serviceVersion",
        "idempotencyKey",
    }
    assert created.input_schema["required"] == ["name"]
    assert created.headers == {
        "serviceVersion": "Service-Version",
        "idempotencyKey": "Idempotency-Key",
    }
    assert "Create a widget." in created.description


def test_a_body_field_named_like_a_tools_argument_is_refused_when_the_tools_are_read() -> None:
    class Clashing(BaseModel):
        idempotencyKey: str

    with pytest.raises(ToolCatalogError, match="idempotencyKey"):
        read_tools(_app(Clashing))
