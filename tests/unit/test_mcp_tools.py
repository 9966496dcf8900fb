"""The MCP server's tools are read from the data API's routes: an area added the way every area
is (a list, a read and a create in the ``api`` blueprint, documented for the OpenAPI document)
is three tools with no code of the MCP server's own."""

from __future__ import annotations

from types import SimpleNamespace

from quart import Blueprint
from quart_trio import QuartTrio

from ledgerport.http import create_app
from ledgerport.http.mcp import read_tools


def test_a_new_area_is_a_list_a_get_and_a_create_tool() -> None:
    # The customers' views, as a new area would declare its own, routed at /widgets.
    served = create_app(SimpleNamespace(config=SimpleNamespace(management=None)))  # type: ignore[arg-type]
    views = served.view_functions
    app = QuartTrio(__name__)
    api = Blueprint("api", __name__)
    api.add_url_rule("/widgets", "list_widget", views["api.list_customer"], methods=["GET"])
    api.add_url_rule(
        "/widgets/<record_id>", "get_widget", views["api.get_customer"], methods=["GET"]
    )
    api.add_url_rule("/widgets", "create_widget", views["api.create_customer"], methods=["POST"])
    api.add_url_rule(
        "/widgets/<record_id>/send", "send", views["api.send_invoice"], methods=["POST"]
    )
    app.register_blueprint(api)

    tools = read_tools(app)

    assert set(tools) == {"list_widgets", "get_widget", "create_widget"}
    listed, got, created = tools["list_widgets"], tools["get_widget"], tools["create_widget"]
    assert (listed.method, listed.path, listed.query) == ("GET", "/widgets", ("limit", "cursor"))
    assert set(listed.input_schema["properties"]) == {"limit", "cursor", "serviceVersion"}
    assert listed.output_schema["properties"]["data"]["type"] == "array"
    assert got.input_schema["required"] == ["id"]
    assert got.input_schema["properties"]["id"]["pattern"] == "^cus_[0-9a-f]{24}$"
    assert got.target({"id": "cus_1"}) == "/widgets/cus_1"
    assert got.output_schema["required"] == ["id"]
    assert created.body
    assert set(created.input_schema["properties"]) == {
        "name",
        "email",
        "serviceVersion",
        "idempotencyKey",
    }
    assert created.input_schema["required"] == ["name"]
    assert created.headers == {
        "serviceVersion": "Service-Version",
        "idempotencyKey": "Idempotency-Key",
    }
    assert created.description.startswith("Create one widget in the business: POST /widgets.")
