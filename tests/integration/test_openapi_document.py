"""The OpenAPI document itself: every operation says what it accepts and every answer it gives.

Two kinds of checks, in-process through the quart test client. The document's structure: each
operation has a success (or redirect) answer and its error answers, each JSON error refers to the
envelope of the blueprint that answers it (the OAuth envelope for the OAuth endpoints, the
standard one elsewhere) and the pages' errors are HTML, the OAuth endpoints document their form
(and JSON) bodies, limits and outages say when to retry. And the answers themselves: the flows an
operator, an app and a browser go through, each answer held against what the document says of its
operation and status (media type, schema, required headers). The end-to-end schemathesis run
(``tests/e2e/test_openapi_contract.py``) generates requests; these flows reach the successes that
generated requests rarely reach (token grants, registration, the consent pages).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import jsonschema_rs
import pytest
import trio

from ledgerport.http import NUL_FREE, prepare_document

from .data_api import owner_api
from .oauth_helpers import (
    REDIRECT_URI,
    basic,
    device_authorize,
    exchange,
    install,
    login,
    make_world,
    session_token,
    token_request,
)
from .webhook_world import console_for

OAUTH_ENVELOPE = {"$ref": "#/components/schemas/OAuthErrorEnvelope"}
STANDARD_ENVELOPE = {"$ref": "#/components/schemas/ErrorEnvelope"}
PAGE_BLUEPRINTS = {
    "pages",
    "authorize",
    "device",
    "bridge",
    "console_pages",
    "console_debug_pages",
    "marketplace",
}
"""Blueprints whose errors are the problem page (``http/_app.py``)."""
FORM = "application/x-www-form-urlencoded"


def _openapi_path(rule: str) -> str:
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


async def _document(client: Any) -> dict[str, Any]:
    response = await client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = await response.get_json()
    return document


def _operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def _blueprints(app: Any) -> dict[tuple[str, str], str]:
    """(METHOD, path) -> the blueprint answering it."""
    return {
        (method, _openapi_path(rule.rule)): rule.endpoint.rpartition(".")[0]
        for rule in app.url_map.iter_rules()
        for method in rule.methods or ()
    }


# --- the document's structure --------------------------------------------------------------------


async def test_every_operation_documents_a_success_and_its_errors(client: Any) -> None:
    document = await _document(client)

    for method, path, operation in _operations(document):
        statuses = {int(status) for status in operation["responses"]}
        assert any(200 <= s < 400 for s in statuses), (method, path, statuses)
        assert 500 in statuses, (method, path)  # any handler can fail
        for status, response in operation["responses"].items():
            assert response["description"], (method, path, status)


async def test_every_operation_has_an_id_of_its_own(client: Any) -> None:
    """OpenAPI requires it, and a link names its target by it."""
    ids = [operation["operationId"] for _, _, operation in _operations(await _document(client))]

    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)


async def test_every_operation_states_the_nul_refusal(client: Any) -> None:
    """Any request's text may hold a NUL, which every route refuses with a 400; every text
    parameter without a rule of its own says so in its pattern."""
    document = await _document(client)

    for method, path, operation in _operations(document):
        refusal = operation["responses"]["400"]["description"]
        # The OAuth endpoints describe it as their invalid_request.
        assert "holds a NUL" in refusal or "invalid_request" in refusal, (method, path)
        for parameter in operation.get("parameters", ()):
            schema = parameter["schema"]
            if parameter["in"] in ("query", "path") and schema.get("type") == "string":
                assert "pattern" in schema or "enum" in schema, (method, path, parameter)


def _body_schemas(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    components = document["components"]["schemas"]
    found = []
    for method, path, operation in _operations(document):
        for media in operation.get("requestBody", {}).get("content", {}).values():
            schema = media.get("schema", {})
            for part in schema.get("oneOf", schema.get("anyOf", [schema])):
                ref = part.get("$ref")
                found.append(
                    (f"{method} {path}", components[ref.rsplit("/", 1)[-1]] if ref else part)
                )
    return found


async def test_bodies_that_ignore_unknown_members_state_them_nul_free(client: Any) -> None:
    """The operator API's bodies and the forms ignore members they do not name, but a NUL in any
    member's name or text is refused like any other: the document says so of those members."""
    document = await _document(client)
    any_value = document["components"]["schemas"]["NulFreeJson"]
    validator = jsonschema_rs.validator_for({**any_value, "components": document["components"]})
    open_bodies = [
        (where, schema)
        for where, schema in _body_schemas(document)
        if "properties" in schema and schema.get("additionalProperties") is not False
    ]

    assert len(open_bodies) > 20
    for where, schema in open_bodies:
        assert schema.get("propertyNames") == {"pattern": NUL_FREE}, (where, schema)
        assert schema["additionalProperties"] == {"$ref": "#/components/schemas/NulFreeJson"}
    assert validator.is_valid({"note": ["text", 1, None, {"nested": True}]})
    assert not validator.is_valid({"note": "a\u0000b"})
    assert not validator.is_valid({"note": [{"a\u0000": 1}]})


OAUTH_BLUEPRINTS = {"oauth", "oauth_clients", "cli_login"}
"""The OAuth endpoints, and the command line's device flow, which answers as RFC 8628's."""
JSON_RPC_REFUSALS = {("POST", "/mcp"): {"400", "406", "415"}}
"""What the MCP server's transport refuses before any tool runs (a body that is no message of
the protocol, an Accept or Content-Type without JSON): the protocol's JSON-RPC error object,
as its clients read it. Its token's refusals (401, 429, 503) are the envelope."""


async def test_errors_answer_in_the_shape_of_their_blueprint(app: Any, client: Any) -> None:
    """JSON errors refer to the envelope of the blueprint answering them; the OAuth endpoints
    answer nothing else, the pages answer HTML (the sign-in page's own refusals are pages too)."""
    document = await _document(client)
    blueprints = _blueprints(app)

    for method, path, operation in _operations(document):
        blueprint = blueprints[method, path]
        oauth_shaped = blueprint in OAUTH_BLUEPRINTS
        envelope = OAUTH_ENVELOPE if oauth_shaped else STANDARD_ENVELOPE
        for status, response in operation["responses"].items():
            if int(status) < 400:
                continue
            where = (method, path, status)
            content = response["content"]
            if status in JSON_RPC_REFUSALS.get((method, path), ()):
                assert content["application/json"] != {"schema": envelope}, where
            elif "application/json" in content:
                assert content["application/json"] == {"schema": envelope}, where
            if oauth_shaped:
                assert set(content) == {"application/json"}, where
                assert response["headers"]["Cache-Control"]["required"], where
            if blueprint in PAGE_BLUEPRINTS:
                assert "text/html" in content, where


@pytest.mark.parametrize(
    ("path", "media_types"),
    [
        ("/oauth/token", {FORM, "application/json"}),
        ("/oauth/revoke", {FORM}),
        ("/oauth/introspect", {FORM}),
        ("/oauth/device/authorize", {FORM}),
        ("/oauth/register", {"application/json"}),
    ],
)
async def test_oauth_endpoints_document_their_bodies(
    client: Any, path: str, media_types: set[str]
) -> None:
    body = (await _document(client))["paths"][path]["post"]["requestBody"]

    assert body["required"]
    assert set(body["content"]) == media_types


async def test_the_token_endpoint_documents_each_grant(client: Any) -> None:
    document = await _document(client)
    form = document["paths"]["/oauth/token"]["post"]["requestBody"]["content"][FORM]["schema"]
    schemas = document["components"]["schemas"]

    grants = {}
    for choice in form["anyOf"]:
        grant = schemas[choice["$ref"].rpartition("/")[2]]
        grants[grant["properties"]["grant_type"]["const"]] = set(grant["required"])

    assert grants == {
        "authorization_code": {"grant_type", "code", "redirect_uri"},
        "refresh_token": {"grant_type", "refresh_token"},
        "urn:ietf:params:oauth:grant-type:device_code": {"grant_type", "device_code"},
        "urn:ietf:params:oauth:grant-type:token-exchange": {
            "grant_type",
            "subject_token",
            "subject_token_type",
        },
    }


async def test_limits_and_outages_say_when_to_retry(client: Any) -> None:
    document = await _document(client)

    for method, path, operation in _operations(document):
        for status in ("429", "503"):
            if status in operation["responses"]:
                headers = operation["responses"][status]["headers"]
                assert headers["Retry-After"]["required"], (method, path, status)


@pytest.mark.parametrize(
    ("prefix", "security"),
    [
        ("/admin/", [{"admin": []}]),
        ("/invoices", [{"accessToken": []}]),
        ("/oauth/introspect", [{"clientBasic": []}]),
        ("/oauth/token", [{"clientBasic": []}, {}]),
        ("/oauth/revoke", [{"clientBasic": []}, {}]),
        ("/oauth/device/authorize", [{"clientBasic": []}, {}]),
    ],
)
async def test_operations_name_their_credentials(
    client: Any, prefix: str, security: list[dict[str, list[str]]]
) -> None:
    document = await _document(client)

    operations = [op for _, path, op in _operations(document) if path.startswith(prefix)]
    assert operations
    assert all(op["security"] == security for op in operations)


# --- the answers ---------------------------------------------------------------------------------


class Contract:
    """The document's word on each operation's answers."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document

    async def check(self, method: str, path: str, response: Any) -> Any:
        """Assert ``response`` is an answer the document gives for ``method path``; answers it."""
        operation = self.document["paths"][path][method.lower()]
        status = str(response.status_code)
        assert status in operation["responses"], (method, path, status)
        documented = operation["responses"][status]
        for name, header in documented.get("headers", {}).items():
            if header["required"]:
                assert name in response.headers, (method, path, status, name)
        content = documented.get("content")
        if not content:
            return response
        assert response.mimetype in content, (method, path, status, response.mimetype)
        schema = content[response.mimetype].get("schema")
        if schema is not None:
            validator = jsonschema_rs.validator_for(
                {**schema, "components": self.document["components"]}
            )
            body = await response.get_json()
            errors = [error.message for error in validator.iter_errors(body)]
            assert not errors, (method, path, status, body, errors)
        return response


@pytest.fixture
async def contract(client: Any) -> Contract:
    return Contract(await _document(client))


async def test_operator_answers_match_the_document(
    client: Any, admin_headers: dict[str, str], contract: Contract
) -> None:
    async def admin(method: str, template: str, body: Any = None, **ids: str) -> Any:
        """Call ``template`` with its ``{id}`` parts filled in; answers the checked JSON body."""
        response = await client.open(
            template.format(**ids), method=method, json=body, headers=admin_headers
        )
        return await (await contract.check(method, template, response)).get_json()

    business = await admin("POST", "/admin/businesses", {"name": "Acme"})
    await admin("POST", "/admin/businesses", {"name": 5})
    person = {"email": "owner@example.com", "password": "p" * 8}
    user = await admin("POST", "/admin/users", person)
    await admin("POST", "/admin/users", person)  # the email is taken
    members = "/admin/businesses/{business_id}/members/{user_id}"
    await admin("PUT", members, {"role": "owner"}, business_id=business["id"], user_id=user["id"])
    await admin("PUT", members, {"role": "owner"}, business_id="bus_none", user_id=user["id"])
    await admin(
        "PUT",
        "/admin/businesses/{business_id}/roles/{role}",
        {"permissions": ["invoices:read"]},
        business_id=business["id"],
        role="viewer",
    )
    app_body = {
        "name": "Books",
        "redirectUris": [REDIRECT_URI],
        "scopes": ["invoices:read"],
        "developerUserId": user["id"],
        "reviewed": True,
    }
    app = await admin("POST", "/admin/apps", {**app_body, "type": "CONFIDENTIAL"})
    await admin("POST", "/admin/apps", {**app_body, "type": "PUBLIC"})
    await admin("POST", "/admin/apps/{app_id}/status", {"status": "ACTIVE"}, app_id=app["id"])
    await admin("PUT", "/admin/apps/{app_id}/review", {"reviewed": True}, app_id=app["id"])
    ids = {"appId": app["id"], "businessId": business["id"], "userId": user["id"]}
    installation = await admin("POST", "/admin/installations", {**ids, "scopes": ["invoices:read"]})
    await admin("POST", "/admin/session-tokens", ids)
    await admin("POST", "/admin/developer-tokens", {"userId": user["id"]})
    uninstall = "/admin/installations/{installation_id}"
    await admin("DELETE", uninstall, installation_id=installation["id"])
    await admin("DELETE", uninstall, installation_id=installation["id"])  # gone already
    await admin("POST", "/admin/installations", {**ids, "scopes": ["invoices:read"]})
    access = "/admin/businesses/{business_id}/apps/{app_id}/access"
    for _ in range(2):  # revoked, then there is nothing left to revoke
        await admin("DELETE", access, business_id=business["id"], app_id=app["id"])
    await contract.check(
        "POST", "/admin/businesses", await client.post("/admin/businesses", json={"name": "A"})
    )


async def test_oauth_answers_match_the_document(
    client: Any, admin_headers: dict[str, str], contract: Contract
) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world)
    assert world.client_secret is not None
    credentials = basic(world.client_id, world.client_secret)

    await contract.check(
        "GET",
        "/.well-known/oauth-authorization-server",
        await client.get("/.well-known/oauth-authorization-server"),
    )
    await contract.check(
        "GET", "/.well-known/jwks.json", await client.get("/.well-known/jwks.json")
    )
    exchanged = await contract.check(
        "POST",
        "/oauth/token",
        await exchange(client, world, await session_token(client, admin_headers, world)),
    )
    tokens = await exchanged.get_json()
    await contract.check(
        "POST",
        "/oauth/token",
        await exchange(
            client, world, await session_token(client, admin_headers, world), as_json=True
        ),
    )
    refreshed = await contract.check(
        "POST",
        "/oauth/token",
        await token_request(
            client, world, {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
        ),
    )
    access_token = (await refreshed.get_json())["access_token"]
    await contract.check(
        "POST",
        "/oauth/token",
        await token_request(client, world, {"grant_type": "refresh_token", "refresh_token": "x"}),
    )
    wrong_secret = basic(world.client_id, "wrong")
    await contract.check(
        "POST",
        "/oauth/token",
        await client.post(
            "/oauth/token", form={"grant_type": "refresh_token"}, headers=wrong_secret
        ),
    )
    for token in (access_token, "not-a-token"):
        await contract.check(
            "POST",
            "/oauth/introspect",
            await client.post("/oauth/introspect", form={"token": token}, headers=credentials),
        )
    await contract.check("POST", "/oauth/device/authorize", await device_authorize(client, world))
    await contract.check(
        "GET",
        "/invoices",
        await client.get("/invoices", headers={"Authorization": f"Bearer {access_token}"}),
    )
    await contract.check(
        "GET",
        "/invoices",
        await client.get("/invoices?limit=0", headers={"Authorization": f"Bearer {access_token}"}),
    )
    await contract.check("GET", "/invoices", await client.get("/invoices"))
    await contract.check(
        "POST",
        "/oauth/revoke",
        await client.post("/oauth/revoke", form={"token": access_token}, headers=credentials),
    )
    for method in ("client_secret_basic", "none"):
        metadata = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": method}
        await contract.check(
            "POST", "/oauth/register", await client.post("/oauth/register", json=metadata)
        )
    await contract.check(
        "POST", "/oauth/register", await client.post("/oauth/register", json={"redirect_uris": []})
    )


async def test_pages_answers_match_the_document(
    client: Any, admin_headers: dict[str, str], contract: Contract
) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world)

    await contract.check("GET", "/healthz", await client.get("/healthz"))
    await contract.check("GET", "/metrics", await client.get("/metrics"))
    await contract.check("GET", "/", await client.get("/"))
    await contract.check("GET", "/login", await client.get("/login"))
    await contract.check("GET", "/device", await client.get("/device"))
    await login(client, world)
    await contract.check("GET", "/", await client.get("/"))
    await contract.check("GET", "/device", await client.get("/device"))
    await contract.check(
        "GET",
        "/oauth/authorize",
        await client.get(
            "/oauth/authorize",
            query_string={
                "response_type": "code",
                "client_id": world.client_id,
                "redirect_uri": REDIRECT_URI,
                "scope": "invoices:read",
            },
        ),
    )
    await contract.check(
        "GET", "/oauth/authorize", await client.get("/oauth/authorize?client_id=unknown")
    )
    await contract.check(
        "GET",
        "/bridge/session-token",
        await client.get(
            "/bridge/session-token",
            query_string={"app_id": world.app_id, "business_id": world.business_id},
        ),
    )
    await contract.check("GET", "/bridge/session-token", await client.get("/bridge/session-token"))
    await contract.check(
        "GET",
        "/apps/{app_id}",
        await client.get(f"/apps/{world.app_id}", query_string={"business_id": world.business_id}),
    )
    await contract.check(
        "GET", "/bridge/static/{filename}", await client.get("/bridge/static/bridge.js")
    )
    await contract.check(
        "GET", "/bridge/static/{filename}", await client.get("/bridge/static/nothing.js")
    )


async def test_the_consoles_management_forms_answer_as_the_document_says(
    client: Any, admin_headers: dict[str, str], contract: Contract
) -> None:
    """Every page and form that manages webhooks and functions, through its successes, its
    refusals (the form again, 400) and its not-found, against the document."""
    world = await make_world(client, admin_headers)
    await login(client, world)
    base = "/console/apps/{app_id}"
    ids = {"app_id": world.app_id}
    form_page = await client.get(f"/console/apps/{world.app_id}/webhooks/new")
    token = re.search(r'name="csrf_token" value="([^"]+)"', await form_page.get_data(as_text=True))
    assert token is not None

    async def check(method: str, template: str, form: str | None = None, **more: str) -> Any:
        path = template.format(**ids, **more)
        if form is None:
            response = await client.open(path, method=method)
        else:
            response = await client.open(
                path,
                method=method,
                data=f"csrf_token={token[1]}&{form}",
                headers={"Content-Type": FORM},
            )
        return await contract.check(method, template, response)

    hook = "url=http%3A%2F%2F127.0.0.1%3A9%2Fhook&events=invoice.created&enabled=true"
    await check("GET", f"{base}/webhooks/new")
    await check("POST", f"{base}/webhooks/new", "url=ftp%3A%2F%2Fx&events=invoice.created")
    added = await check("POST", f"{base}/webhooks/new", hook)
    webhook_id = added.headers["Location"].split("/")[-2]
    webhook = f"{base}/webhooks/{{webhook_id}}"
    ids["webhook_id"] = webhook_id
    await check("GET", f"{webhook}/secret")
    await check("GET", f"{webhook}/secret")  # shown once: the page says so
    await check("GET", f"{webhook}/edit")
    await check("POST", f"{webhook}/edit", "url=&events=invoice.created")
    await check("POST", f"{webhook}/edit", hook)
    await check("POST", f"{webhook}/enabled", "enabled=false")
    for step in ("rotate", "delete"):
        await check("GET", f"{webhook}/{step}")
        await check("POST", f"{webhook}/{step}", "confirm=no")
        await check("POST", f"{webhook}/{step}", "confirm=yes")
    await check("GET", f"{webhook}/edit")  # deleted: not found
    function = f"{base}/functions/{{name}}"
    source = "source=export+const+handler+%3D+%28%29+%3D%3E+1%3B&events=invoice.created"
    await check("GET", f"{base}/functions/new")
    await check("POST", f"{base}/functions/new", "name=tells&source=export+const+x+%3D+1%3B")
    await check("POST", f"{base}/functions/new", f"name=tells&{source}")
    await check("GET", f"{function}/edit", name="tells")
    await check("POST", f"{function}/edit", "source=export+const+handler+%3D+%28", name="tells")
    await check("POST", f"{function}/edit", source, name="tells")
    await check("POST", f"{function}/test", "", name="tells")
    await check("GET", f"{function}/delete", name="tells")
    await check("POST", f"{function}/delete", "confirm=yes", name="tells")
    await check("GET", f"{function}/edit", name="tells")  # deleted: not found
    await check("POST", f"{function}/test", "", name="tells")


BUILD_TAKES = 2.0
"""What the build is made to take in the test of where it runs: a build on the loop would stall
it that long, which is above what the loop's scheduling beside the whole suite on a slow day's
two cores has been seen to cost (0.54 s)."""


async def test_an_uploads_syntax_error_is_answered_as_the_document_says(
    client: Any, admin_headers: dict[str, str], contract: Contract
) -> None:
    """The upload's 400 says what a syntax error's params hold, and the answer is the
    envelope it documents."""
    path = "/developer/apps/{app_id}/functions/{name}"
    console = await console_for(client, admin_headers, await owner_api(client, admin_headers))
    response = await console.call("PUT", "/functions/totals", {"source": "let x = ;", "events": []})
    await contract.check("PUT", path, response)
    body = await response.get_json()
    description = contract.document["paths"][path]["put"]["responses"]["400"]["description"]
    assert body["params"] == {"p0": 1, "p1": 9, "p2": "Unexpected token ';'"}
    assert (
        "FUNCTION_SOURCE_NO_HANDLER: function source is not an ES module with a handler (a syntax"
        " error's message reads 'syntax error at line {0}, column {1}: {2}': params p0 is the"
        " line (from 1; a line ends at LF, CR, CR LF, U+2028 or U+2029), p1 the column (from 1,"
        " in UTF-16 code units, as a browser's text counts) and p2 the parser's words (V8's,"
        " such as 'missing ) after argument list'); otherwise p0 is the one reason)"
    ) in description


async def test_the_document_is_built_off_the_event_loop(app: Any, client: Any) -> None:
    """Building the document takes CPU (tenths of a second alone, seconds on a loaded machine):
    it happens in a worker thread, once, while the event loop goes on serving, and later
    requests answer the same bytes at once. The build is made to take ``BUILD_TAKES`` more of
    the thread's own, so a build on the loop would show as a stall of that length."""
    provider = app.extensions["QUART_SCHEMA"].openapi_provider
    provider._built = None  # as a new process has it
    build = provider.document_bytes
    threads: list[int] = []

    def slow_build() -> bytes:
        if provider._built is None:  # the build, not the bytes it kept
            threads.append(threading.get_ident())
            time.sleep(BUILD_TAKES)
        document: bytes = build()
        return document

    provider.document_bytes = slow_build
    gaps: list[float] = []
    built = trio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while not built.is_set():
            await trio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    try:
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tick)
                await prepare_document(app)
                built.set()
            first = await client.get("/openapi.json")
            again = await client.get("/openapi.json")
    finally:
        del provider.document_bytes
    assert first.status_code == again.status_code == 200
    assert await first.get_data() == await again.get_data()
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()
    assert len(gaps) >= 10, gaps
    assert max(gaps) < BUILD_TAKES, max(gaps)
