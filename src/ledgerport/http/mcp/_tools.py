"""The MCP server's tools, read from the data API as the application routes it.

One tool per operation, named ``<verb>_<area>`` (contract.md, "Agents as partner apps"):

- ``list_<collection>``: ``GET /<collection>``, a page of the business's records or events;
- ``get_<kind>``: ``GET /<collection>/<id>``, one of them;
- ``create_<kind>``: ``POST /<collection>``, a new one.

A collection is any path of the data API blueprint answered by a GET whose one-id path below
it is answered by a GET too (``api.get_<kind>`` names the kind): every business area and the
Events API, and whatever area or version is added the same way, with no list to keep here.
Each tool's input and output schemas are the JSON Schemas of what the operation declares for
the OpenAPI document (``_openapi.operation``): its query and path parameters, its body model and
its answer's type. The data API checks the arguments as it checks a request: the schemas
describe, the data API refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import TypeAdapter
from quart import Quart
from werkzeug.routing import Rule

from .._openapi import OPERATION_ATTRIBUTE, Operation, Param
from ..api import blueprint as api_blueprint

Verb = Literal["list", "get", "create"]

ID_ARGUMENT: Final = "id"
"""The argument of a ``get_`` tool naming the record or event (the route's one path part)."""
VERSION_ARGUMENT: Final = "serviceVersion"
"""The argument sent as the Service-Version header."""
IDEMPOTENCY_ARGUMENT: Final = "idempotencyKey"
"""The argument of a ``create_`` tool sent as the Idempotency-Key header."""
HEADER_ARGUMENTS: Final[Mapping[str, str]] = {
    "Service-Version": VERSION_ARGUMENT,
    "Idempotency-Key": IDEMPOTENCY_ARGUMENT,
}
"""The data API's request headers a tool takes as arguments, by header name."""

_SUMMARIES: Final[Mapping[Verb, str]] = {
    "list": "A page of the business's {plural}, oldest first ({{data, next}}): GET {path}.",
    "get": "One {singular} of the business by its id: GET {path}/{{id}}.",
    "create": "Create one {singular} in the business: POST {path}.",
}


class ToolCatalogError(Exception):
    """The data API declares an operation no tool can be made of (a body field named like a
    tool's own argument, say): raised when the tools are read, never at a call."""


@dataclass(frozen=True)
class DataTool:
    """One tool: the data API operation it calls and what it takes and answers."""

    name: str
    verb: Verb
    method: str
    path: str
    """The route's rule, such as ``/customers/<record:record_id>``."""
    path_argument: str | None
    """The rule's variable filled with the ``id`` argument (``get_`` tools)."""
    query: tuple[str, ...]
    """The arguments sent as query parameters."""
    headers: Mapping[str, str]
    """Header name by argument name."""
    body: bool
    """Whether the other arguments are the JSON body."""
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]

    def target(self, arguments: Mapping[str, Any]) -> str:
        """The path the call goes to (the ``id`` argument, already checked, in place)."""
        if self.path_argument is None:
            return self.path
        head, _, _ = self.path.partition("<")
        return head + str(arguments[ID_ARGUMENT])


def _object(
    properties: Mapping[str, Any], required: Iterable[str], *, extra: bool = False
) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": dict(properties)}
    names = sorted(required)
    if names:
        schema["required"] = names
    schema["additionalProperties"] = extra
    return schema


def _param_schema(param: Param) -> dict[str, Any]:
    schema = dict(param.schema)
    schema.setdefault("description", param.description)
    return schema


def _input_schema(
    tool: str, operation: Operation, path_argument: str | None
) -> tuple[dict[str, Any], tuple[str, ...], dict[str, str], bool]:
    """The tool's input schema, its query arguments, its header arguments and whether it has
    a body, from what the operation declares."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    query: list[str] = []
    headers: dict[str, str] = {}
    defs: dict[str, Any] = {}
    for param in operation.params:
        if param.location == "path":
            if param.name == path_argument:
                properties[ID_ARGUMENT] = _param_schema(param)
                required.append(ID_ARGUMENT)
        elif param.location == "query":
            properties[param.name] = _param_schema(param)
            query.append(param.name)
        elif param.location == "header" and param.name in HEADER_ARGUMENTS:
            name = HEADER_ARGUMENTS[param.name]
            properties[name] = _param_schema(param)
            headers[name] = param.name
    body = next((b for b in operation.bodies if b.media_type == "application/json"), None)
    if body is not None:
        schema = TypeAdapter(body.schema).json_schema()
        defs = schema.pop("$defs", {})
        for name, prop in schema.get("properties", {}).items():
            if name in properties:
                raise ToolCatalogError(f"{tool}: the body's field {name} is a tool argument")
            properties[name] = prop
        required.extend(schema.get("required", ()))
    schema = _object(properties, required)
    if defs:
        schema["$defs"] = defs
    return schema, tuple(query), headers, body is not None


def _output_schema(operation: Operation) -> dict[str, Any]:
    """The JSON Schema of the operation's successful JSON answer."""
    for reply in operation.replies:
        if 200 <= reply.status < 300 and reply.schema is not None:
            schema: dict[str, Any] = TypeAdapter(reply.schema).json_schema()
            return schema
    raise ToolCatalogError("an operation answers no JSON body")


def _rules(app: Quart) -> dict[tuple[str, str], Rule]:
    """The data API's rules by (method, rule), its own routes only."""
    found = {}
    prefix = f"{api_blueprint.name}."
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith(prefix):
            for method in rule.methods or ():
                found[(method, rule.rule)] = rule
    return found


def _tool(app: Quart, name: str, verb: Verb, rule: Rule, words: Mapping[str, str]) -> DataTool:
    view = app.view_functions[rule.endpoint]
    operation: Operation = getattr(view, OPERATION_ATTRIBUTE)
    path_argument = next(iter(rule.arguments), None) if verb == "get" else None
    input_schema, query, headers, body = _input_schema(name, operation, path_argument)
    summary = _SUMMARIES[verb].format(path=words["collection"], **words)
    first = (view.__doc__ or "").strip().split("\n\n")[0]
    description = " ".join(f"{summary} {first}".split())
    return DataTool(
        name=name,
        verb=verb,
        method="POST" if verb == "create" else "GET",
        path=rule.rule,
        path_argument=path_argument,
        query=query,
        headers=headers,
        body=body,
        description=description,
        input_schema=input_schema,
        output_schema=_output_schema(operation),
    )


def read_tools(app: Quart) -> dict[str, DataTool]:
    """Every tool of the data API ``app`` routes, by name, in the order of the URL map."""
    rules = _rules(app)
    tools: dict[str, DataTool] = {}
    for (method, path), one in rules.items():
        if method != "GET" or len(one.arguments) != 1 or not path.endswith(">"):
            continue
        collection = path[: path.rindex("/")]
        listed = rules.get(("GET", collection))
        prefix = f"{api_blueprint.name}.get_"
        if listed is None or listed.arguments or not one.endpoint.startswith(prefix):
            continue
        singular = one.endpoint.removeprefix(prefix)
        plural = collection.rsplit("/", 1)[-1].replace("-", "_")
        words = {
            "singular": singular.replace("_", " "),
            "plural": plural.replace("_", " "),
            "collection": collection,
        }
        found: list[tuple[Verb, str, Rule]] = [
            ("list", f"list_{plural}", listed),
            ("get", f"get_{singular}", one),
        ]
        created = rules.get(("POST", collection))
        if created is not None:
            found.append(("create", f"create_{singular}", created))
        for verb, name, rule in found:
            if name in tools:
                raise ToolCatalogError(f"two operations make the tool {name}")
            tools[name] = _tool(app, name, verb, rule, words)
    return tools
