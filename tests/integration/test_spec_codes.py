"""Every code of the spec's error tables answers its cause whatever form the input takes.

One row per code of the API error codes, the developer console codes and the OAuth errors whose
cause an input can give, on both stores: the row brings the cause about with inputs of several
forms (well-formed, of another form, too long, of another JSON type, unicode, empty) and each
must answer the row's code and status. A rule of form the document states (a pattern, a length,
a type) never answers first where the spec gives the cause a code: an id of another form is a
record that is not there, 51 ids are too many whatever they look like, a key nobody declared is
unknown however it is spelled (``_ids.IdKind.looked_up``). Then the answers the General API
statuses and contract.md fix for any input: a bearer token of any form that is no live token is
401, a call the token's scope or the user's role does not allow is 403 whatever it sends, and
another developer's app is 404 whatever the request sends.

Spec: Errors (API error codes, Developer console codes, OAuth endpoint errors, General API
statuses); contract.md (Developer console API: "others get 404").
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio

from ledgerport import auth, catalog
from ledgerport.platform import Platform

from .data_api import ALL_SCOPES, Api, member_api, owner_api
from .oauth_helpers import (
    DEVICE_CODE,
    JWT_TYPE,
    REDIRECT_URI,
    TOKEN_EXCHANGE,
    basic,
    full_grant,
    make_world,
)
from .webhook_world import Console, console_for

TIMEOUT = 120
LONG = "x" * 3000
"""Longer than any id, key, name or URI the service keeps."""
NOTHING = "0" * 24
"""The random part of a well-formed id that names nothing."""
APP_URL = "https://app.example.com/base/"
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


# --- The scene: what a row needs, made when it first asks -----------------------------------------


@dataclass
class Scene:
    """A business whose app holds every area scope, the app's developer and the records to keep
    app data on; anything else a row needs is made on demand."""

    client: Any
    admin_headers: dict[str, str]
    platform: Platform
    api: Api
    console: Console
    invoice_id: str
    customer_id: str
    made: dict[str, Any] = field(default_factory=dict)

    @property
    def app_id(self) -> str:
        return self.api.world.app_id

    async def created(self, path: str, body: Any) -> dict[str, Any]:
        response = await self.client.post(path, json=body, headers=self.admin_headers)
        assert response.status_code == 201, await response.get_data(as_text=True)
        answer: dict[str, Any] = await response.get_json()
        return answer

    async def data(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        raw: bytes | None = None,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        api: Api | None = None,
        bearer: bool = True,
    ) -> Any:
        """A data API call with the app's token (another's with ``api``; none, only the
        browser's session cookie, when not ``bearer``)."""
        sent = {"Content-Type": "application/json", **(headers or {})}
        if bearer:
            sent["Authorization"] = f"Bearer {(api or self.api).token}"
        return await self.client.open(
            path,
            method=method,
            data=raw if raw is not None else None if body is None else json.dumps(body).encode(),
            headers=sent,
            query_string=dict(query or {}),
        )

    async def write(self, *values: dict[str, Any], api: Api | None = None) -> Any:
        return await self.data("POST", "/app-data", body={"values": list(values)}, api=api)

    def value(self, **changes: Any) -> dict[str, Any]:
        """A value on the scene's invoice under its TEXT field, changed by ``changes``."""
        return {
            "resourceType": "invoice",
            "resourceId": self.invoice_id,
            "key": "note",
            "value": "exported",
            **changes,
        }

    async def narrow_api(self) -> Api:
        """The same app in a business of its own, installed without invoices:read."""
        if "narrow" not in self.made:
            world = await make_world(self.client, self.admin_headers, scopes=ALL_SCOPES)
            token = await self.created("/admin/developer-tokens", {"userId": world.user_id})
            headers = {"Authorization": f"Bearer {token['token']}"}
            fields = f"/developer/apps/{world.app_id}/app-data-fields"
            declared = await self.client.post(fields, json=NOTE, headers=headers)
            assert declared.status_code == 201
            scopes = [s for s in ALL_SCOPES if s != "invoices:read"]
            tokens = await full_grant(self.client, world, scope=" ".join(scopes))
            self.made["narrow"] = Api(self.client, tokens["access_token"], world)
        narrow: Api = self.made["narrow"]
        return narrow

    async def extender(self, scopes: list[str]) -> Console:
        """The console of a new app with an App URL, registering ``scopes`` only."""
        user = await self.created(
            "/admin/users", {"email": f"ext{len(self.made)}@example.com", "password": "pw pw pw"}
        )
        app = await self.created(
            "/admin/apps",
            {
                "name": "Extender",
                "type": "CONFIDENTIAL",
                "redirectUris": [REDIRECT_URI],
                "scopes": scopes,
                "developerUserId": user["id"],
                "reviewed": True,
                "appUrl": APP_URL,
            },
        )
        token = await self.created("/admin/developer-tokens", {"userId": user["id"]})
        self.made[f"extender{len(self.made)}"] = app
        return Console(self.client, token["token"], app["id"])

    async def other_console(self) -> Console:
        """The console of another app of another developer, with every scope."""
        return await console_for(
            self.client, self.admin_headers, await owner_api(self.client, self.admin_headers)
        )

    async def oauth(
        self,
        path: str,
        form: Mapping[str, str] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> Any:
        if json_body is not None:
            return await self.client.post(path, json=json_body, headers=dict(headers or {}))
        return await self.client.post(path, form=dict(form or {}), headers=dict(headers or {}))

    @property
    def client_basic(self) -> dict[str, str]:
        world = self.api.world
        assert world.client_secret is not None
        return basic(world.client_id, world.client_secret)


NOTE = {"resourceType": "invoice", "key": "note", "type": "TEXT"}
SYNC_STATUS = {
    "resourceType": "invoice",
    "key": "syncStatus",
    "type": "CHOICE",
    "choices": ["exported", "pending"],
}


async def scene(client: Any, admin_headers: dict[str, str], platform: Platform) -> Scene:
    api = await owner_api(client, admin_headers)
    console = await console_for(client, admin_headers, api)
    for declared in (NOTE, SYNC_STATUS):
        await console.ok("POST", "/app-data-fields", declared, 201)
    customer = await api.customer()
    invoice = await api.invoice(customer["id"])
    return Scene(client, admin_headers, platform, api, console, invoice["id"], customer["id"])


# --- The rows ------------------------------------------------------------------------------------

Provoke = Callable[[Scene, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Row:
    """A code of a spec table, its status, and its cause brought about with each input of
    ``shapes`` (by the name of its form) by ``provoke``. ``oauth``: the code is an OAuth
    ``error``; else the standard envelope's ``code``."""

    code: str
    status: int
    shapes: Mapping[str, Any]
    provoke: Provoke
    oauth: bool = False


ROWS: list[Row] = []


def row(code: str, status: int, shapes: Mapping[str, Any], *, oauth: bool = False) -> Any:
    def register(provoke: Provoke) -> Provoke:
        ROWS.append(Row(code, status, shapes, provoke, oauth))
        return provoke

    return register


# API error codes ---------------------------------------------------------------------------------

ANY_REQUEST = {
    "a cursor of another form": ("GET", "/events", {"after": "evt_1"}, None),
    "51 ids of no form": ("GET", "/app-data", {"resourceIds": ",".join(["x"] * 51)}, None),
    "a body that is no JSON": ("POST", "/app-data", {}, b"{values: ["),
    "a body of another type": ("POST", "/app-data", {}, b'{"values": "all"}'),
    "an id of another form": ("DELETE", "/app-data/apd_1", {}, None),
    "unicode types": ("GET", "/events", {"types": "facture.créée"}, None),
}
"""Requests of every form; one answer for all of them when the call itself is refused."""


@row("APP_RATE_LIMITED", 429, ANY_REQUEST)
async def _rate_limited(scene: Scene, request: Any) -> Any:
    budget = auth.Budget(
        catalog.RATE_LIMIT_APP_PER_BUSINESS, (scene.app_id, scene.api.world.business_id)
    )
    while (await scene.platform.limiter.take(budget)).allowed:
        pass
    method, path, query, raw = request
    response = await scene.data(method, path, query=query, raw=raw)
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    return response


@row(
    "UNSUPPORTED_API_VERSION",
    400,
    {
        "well-formed, no such version": "2020-01-01",
        "another form": "v2",
        "no such date": "2026-13-45",
        "too long": "2026-09-22" * 30,
        "unicode": "2026-09-22é",
        "empty": "",
        "two versions": "2026-09-22, 2026-09-22",
    },
)
async def _unsupported_version(scene: Scene, version: str) -> Any:
    # Before any look at what the call sends: a read and a write of malformed requests.
    read = await scene.data(
        "GET", "/app-data", query={"resourceIds": "x"}, headers={"Service-Version": version}
    )
    assert (await read.get_json()).get("code") == "UNSUPPORTED_API_VERSION"
    return await scene.data("POST", "/app-data", raw=b"{", headers={"Service-Version": version})


@row(
    "UNKNOWN_APP_DATA_FIELD",
    400,
    {
        "well-formed, not declared": "weight",
        "another form": "1st-note",
        "too long": "n" * 200,
        "another type": 42,
        "null": None,
        "unicode": "clé",
        "empty": "",
        "declared for another type": "note ",
    },
)
async def _unknown_field(scene: Scene, key: Any) -> Any:
    return await scene.write(scene.value(key=key))


@row(
    "INVALID_APP_DATA_VALUE",
    400,
    {
        "well-formed, not a choice": ("syncStatus", "failed"),
        "another form of a choice": ("syncStatus", "Exported"),
        "too long": ("note", "x" * 501),
        "an object": ("note", {"text": "exported"}),
        "an array": ("note", ["exported"]),
        "null": ("note", None),
        "a number for text": ("note", 12.5),
        "unicode, not a choice": ("syncStatus", "exporté"),
        "empty choice": ("syncStatus", ""),
    },
)
async def _invalid_value(scene: Scene, shape: tuple[str, Any]) -> Any:
    key, value = shape
    response = await scene.write(scene.value(key=key, value=value))
    body = await response.get_json()
    assert [problem["key"] for problem in body.get("details", [])] == [key], body
    return response


@row(
    "PROVIDE_RESOURCEID_RESOURCEIDS",
    400,
    {
        "neither": {},
        "the type alone": {"resourceType": "invoice"},
        "an empty resourceId": {"resourceId": ""},
        "an empty resourceIds": {"resourceIds": ""},
        "commas only": {"resourceIds": ",,,"},
        "blank entries": {"resourceIds": " , ,\u00a0"},
        "both empty": {"resourceId": "", "resourceIds": ""},
    },
)
async def _no_ids(scene: Scene, query: dict[str, str]) -> Any:
    return await scene.data("GET", "/app-data", query=query)


def _ids(count: int, make: Callable[[int], str]) -> str:
    return ",".join(make(n) for n in range(count))


@row(
    "RESOURCEIDS_ACCEPTS_MOST_50_IDS",
    400,
    {
        "51 well-formed": {"resourceIds": _ids(51, lambda n: f"inv_{n:024x}")},
        "51 of another form": {"resourceIds": _ids(51, lambda n: f"inv_{n}")},
        "51 long ones": {"resourceIds": _ids(51, lambda n: f"{n}{LONG[:200]}")},
        "51 unicode": {"resourceIds": _ids(51, lambda n: f"facture-{n}-é")},
        "the same one 51 times": {"resourceIds": _ids(51, lambda n: "inv_1")},
        "50 and one more in resourceId": {
            "resourceIds": _ids(50, lambda n: f"cus_{n:024x}"),
            "resourceId": "x",
        },
        "51 between empty entries": {"resourceIds": "," + _ids(51, lambda n: f"{n}") + ",,"},
    },
)
async def _too_many_ids(scene: Scene, query: dict[str, str]) -> Any:
    return await scene.data("GET", "/app-data", query=query)


RECORD_REFERENCES = {
    "well-formed, no record": f"inv_{NOTHING}",
    "another form": "inv_1",
    "too long": LONG,
    "another type": 42,
    "unicode": "inv_é",
    "empty": "",
}
"""References to a record in an app data write, of every form."""


@row("APP_CANNOT_ACCESS_TYPE_RECORD", 403, {**RECORD_REFERENCES, "the scene's invoice": None})
async def _cannot_access(scene: Scene, reference: Any) -> Any:
    narrow = await scene.narrow_api()
    record = scene.invoice_id if reference is None else reference
    if isinstance(record, str) and record:
        read = await scene.data(
            "GET", "/app-data", query={"resourceId": record, "resourceType": "invoice"}, api=narrow
        )
        assert (await read.get_json()).get("code") == "APP_CANNOT_ACCESS_TYPE_RECORD"
    # Refused for the type before the key or the record is looked at.
    return await scene.write(scene.value(resourceId=record, key="undeclared"), api=narrow)


@row(
    "APP_DATA_API_AVAILABLE_CONNECTED_APPS_ONLY",
    403,
    {
        "a read": ("GET", "/app-data", {"resourceId": f"inv_{NOTHING}"}, None),
        "a read of 51 ids": ANY_REQUEST["51 ids of no form"],
        "a read of none": ("GET", "/app-data", {}, None),
        "a write that is no JSON": ANY_REQUEST["a body that is no JSON"],
        "a deletion of an id of another form": ANY_REQUEST["an id of another form"],
    },
)
async def _app_data_cookie(scene: Scene, request: Any) -> Any:
    method, path, query, raw = request
    return await scene.data(method, path, query=query, raw=raw, bearer=False)


@row("RECORD_NOT_FOUND", 404, {**RECORD_REFERENCES, "null": None, "a customer's id": "customer"})
async def _record_not_found(scene: Scene, reference: Any) -> Any:
    record = scene.customer_id if reference == "customer" else reference
    return await scene.write(scene.value(resourceId=record))


@row(
    "APP_DATA_VALUE_NOT_FOUND",
    404,
    {
        "well-formed, no value": f"apd_{NOTHING}",
        "another form": "apd_1",
        "too long": LONG,
        "unicode": "valeur-é",
        "an encoded space": "%20",
        "a value deleted": "deleted",
        "another kind's id": "invoice",
    },
)
async def _value_not_found(scene: Scene, value_id: str) -> Any:
    if value_id == "deleted":
        written = await (await scene.write(scene.value())).get_json()
        value_id = written["data"][0]["id"]
        gone = await scene.data("DELETE", f"/app-data/{value_id}")
        assert gone.status_code == 204
    elif value_id == "invoice":
        value_id = scene.invoice_id
    return await scene.data("DELETE", f"/app-data/{value_id}")


@row(
    "UNKNOWN_CURSOR",
    400,
    {
        "well-formed, no event": f"evt_{NOTHING}",
        "another kind's id": "invoice",
        "another form": "evt_1",
        "too long": LONG,
        "unicode": "évènement",
        "empty": "",
    },
)
async def _unknown_cursor(scene: Scene, after: str) -> Any:
    cursor = scene.invoice_id if after == "invoice" else after
    return await scene.data("GET", "/events", query={"after": cursor})


@row(
    "UNKNOWN_EVENT_TYPE_TYPES",
    400,
    {
        "well-formed, no such type": "invoice.archived",
        "another case": "Invoice.Created",
        "one of several": "invoice.created,invoice.archived",
        "a trailing comma": "invoice.created,",
        "space-separated": "invoice.created invoice.paid",
        "too long": LONG,
        "unicode": "facture.créée",
        "empty": "",
    },
)
async def _unknown_types(scene: Scene, types: str) -> Any:
    return await scene.data("GET", "/events", query={"types": types})


@row(
    "EVENT_LOG_AVAILABLE_CONNECTED_APPS_ONLY",
    403,
    {
        "the feed": ("GET", "/events", {}, None),
        "a cursor of another form": ANY_REQUEST["a cursor of another form"],
        "unknown types": ANY_REQUEST["unicode types"],
        "an event of another form": ("GET", "/events/evt_1", {}, None),
    },
)
async def _events_cookie(scene: Scene, request: Any) -> Any:
    method, path, query, raw = request
    return await scene.data(method, path, query=query, raw=raw, bearer=False)


@row(
    "EVENT_NOT_FOUND",
    404,
    {
        "well-formed, no event": f"evt_{NOTHING}",
        "another kind's id": "invoice",
        "another form": "evt_1",
        "too long": LONG,
        "unicode": "évènement",
        "an encoded space": "%20",
    },
)
async def _event_not_found(scene: Scene, event_id: str) -> Any:
    named = scene.invoice_id if event_id == "invoice" else event_id
    return await scene.data("GET", f"/events/{named}")


# Developer console codes -------------------------------------------------------------------------


def _listing(slug: str, **changes: Any) -> dict[str, Any]:
    return {
        "slug": slug,
        "name": "Books Sync",
        "tagline": "Your invoices, everywhere",
        "description": "Keeps your invoices in step with the tools you use.",
        "category": "invoicing",
        **changes,
    }


@row(
    "LISTING_EXISTS",
    409,
    {
        "plain": {},
        "unicode": {"name": "Bücher Sync", "tagline": "Vos factures, partout"},
        "longest": {"description": "d" * 5000, "tagline": "t" * 120},
    },
)
async def _listing_exists(scene: Scene, changes: dict[str, Any]) -> Any:
    # Only a race of first saves: a console of its own, its first saves at once.
    console = await scene.other_console()
    answers: list[Any] = []

    async def save(n: int) -> None:
        slug = f"race-{console.app_id[-8:]}-{n}"
        answers.append(await console.call("PUT", "/listing", _listing(slug, **changes)))

    async with trio.open_nursery() as nursery:
        for n in range(4):
            nursery.start_soon(save, n)
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [201, 409, 409, 409], statuses
    return next(answer for answer in answers if answer.status_code == 409)


@row(
    "SLUG_TAKEN",
    400,
    {
        "a first save": ("first", {}),
        "an edit": ("edit", {}),
        "unicode around it": ("first", {"name": "Bücher Sync"}),
        "longest around it": ("edit", {"description": "d" * 5000}),
    },
)
async def _slug_taken(scene: Scene, shape: tuple[str, dict[str, Any]]) -> Any:
    # Only a slug of the listings' own form is ever taken.
    when, changes = shape
    if "taken" not in scene.made:
        await scene.console.ok("PUT", "/listing", _listing("taken-slug"), 201)
        scene.made["taken"] = True
    other = await scene.other_console()
    if when == "edit":
        await other.ok("PUT", "/listing", _listing(f"own-slug-{len(scene.made)}"), 201)
        scene.made[f"edited{len(scene.made)}"] = True
    return await other.call("PUT", "/listing", _listing("taken-slug", **changes))


@row(
    "ASSET_IN_USE",
    400,
    {"the draft's icon": "iconAssetId", "a screenshot of the draft": "screenshotAssetIds"},
)
async def _asset_in_use(scene: Scene, used_as: str) -> Any:
    # Only an asset of the app can be in use: its id is of the assets' form.
    uploaded = await scene.client.post(
        f"/developer/apps/{scene.app_id}/assets",
        data=PNG,
        headers={"Authorization": f"Bearer {scene.console.token}", "Content-Type": "image/png"},
    )
    asset = (await uploaded.get_json())["id"]
    reference = asset if used_as == "iconAssetId" else [asset]
    saved = await scene.console.call(
        "PUT", "/listing", _listing("with-assets", **{used_as: reference})
    )
    assert saved.status_code in (200, 201), await saved.get_json()
    return await scene.console.call("DELETE", f"/assets/{asset}")


@row(
    "EXTENSION_SCOPE_REQUIRED",
    400,
    {
        "an invoice's page": ("invoice.details", {"path": "/ext/invoice"}),
        "a purchase return's page": ("purchase_return.details", {"path": "/ext"}),
        "a journal entry's page": ("journal_entry.details", {"path": "/"}),
        "unicode label": ("account.details", {"path": "/ext?q=é", "label": "Compte détaillé"}),
        "longest path": ("quote.list.action", {"path": "/" + "p" * 511}),
    },
)
async def _scope_required(scene: Scene, shape: tuple[str, dict[str, Any]]) -> Any:
    # Only a target of the catalog needs a scope: the targets are the catalog's fifteen.
    target, body = shape
    console = await scene.extender(["profile:read"])
    return await console.call("PUT", f"/extensions/{target}", body)


@row(
    "EXTENSION_PATH_INVALID",
    400,
    {
        "a backslash": "/ext\\page",
        "another host": "//evil.example/x",
        "a dot segment": "/ext/../../admin",
        "too long": "/" + "p" * 600,
        "too long with a space": "/ext page" + "p" * 600,
        "another type": 42,
        "null": None,
        "an array": ["/ext"],
        "unicode white space": "/ext\u3000page",
        "empty": "",
    },
)
async def _path_invalid(scene: Scene, path: Any) -> Any:
    if "path console" not in scene.made:
        scene.made["path console"] = await scene.extender(["invoices:read"])
    console: Console = scene.made["path console"]
    return await console.call("PUT", "/extensions/invoice.details", {"path": path})


@row(
    "INVALID_CHOICES",
    400,
    {
        "repeated after trimming": ["gold", " gold "],
        "none": [],
        "51 options": [f"option {n}" for n in range(51)],
        "an option too long": ["x" * 61],
        "a string": "gold,silver",
        "numbers": [1, 2],
        "an object": {"gold": 1},
        "unicode too long": ["é" * 61],
        "an empty option": [""],
        "null": None,
    },
)
async def _invalid_choices(scene: Scene, choices: Any) -> Any:
    declared = await scene.console.call(
        "POST",
        "/app-data-fields",
        {"resourceType": "quote", "key": "tier", "type": "CHOICE", "choices": choices},
    )
    assert (await declared.get_json()).get("code") == "INVALID_CHOICES"
    fields = await scene.console.ok("GET", "/app-data-fields")
    (field_id,) = [f["id"] for f in fields["data"] if f["key"] == "syncStatus"]
    return await scene.console.call("PATCH", f"/app-data-fields/{field_id}", {"choices": choices})


@row(
    "FUNCTION_SOURCE_NO_HANDLER",
    400,
    {
        "a module without a handler": "export const notHandler = 1",
        "not a module": "function handler( {",
        "long, without a handler": "// " + "x" * 200_000 + "\nexport const x = 1",
        "another type": 42,
        "null": None,
        "unicode": "export const été = 'chaud'",
        "empty": "",
    },
)
async def _no_handler(scene: Scene, source: Any) -> Any:
    return await scene.console.call(
        "PUT", "/functions/sync", {"source": source, "events": ["invoice.created"]}
    )


# OAuth endpoint errors ---------------------------------------------------------------------------


@row(
    "invalid_request",
    400,
    {
        "no grant_type": {"grant_type": ""},
        "an empty code": {"grant_type": "authorization_code", "code": "", "redirect_uri": "x"},
        "an empty refresh token": {"grant_type": "refresh_token", "refresh_token": ""},
        "an empty device code": {"grant_type": DEVICE_CODE, "device_code": ""},
        "an empty subject token": {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": "",
            "subject_token_type": JWT_TYPE,
        },
        "an unsupported subject token type": {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": "x",
            "subject_token_type": "urn:ietf:params:oauth:token-type:saml2",
        },
        "an unsupported requested token type": {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": "x",
            "subject_token_type": JWT_TYPE,
            "requested_token_type": "urn:ietf:params:oauth:token-type:refresh_token",
        },
    },
    oauth=True,
)
async def _invalid_request(scene: Scene, form: dict[str, str]) -> Any:
    return await scene.oauth("/oauth/token", form, headers=scene.client_basic)


CLIENT_IDS = {
    "well-formed, no client": f"cid_{NOTHING}",
    "another form": "books-sync",
    "too long": LONG,
    "unicode": "client-é",
}


@row(
    "invalid_client",
    401,
    {
        **{f"{name}, in the body": ("body", value) for name, value in CLIENT_IDS.items()},
        **{f"{name}, by Basic": ("basic", value) for name, value in CLIENT_IDS.items()},
        "an empty client_id with a secret": ("body", ""),
        "the client with an empty secret": ("secret", ""),
        "the client with a secret too long": ("secret", LONG),
    },
    oauth=True,
)
async def _invalid_client(scene: Scene, shape: tuple[str, str]) -> Any:
    how, value = shape
    grant = {"grant_type": "refresh_token", "refresh_token": "x"}
    world = scene.api.world
    if how == "body":
        form = {**grant, "client_id": value, "client_secret": "s3cret"}
        return await scene.oauth("/oauth/token", form)
    if how == "basic":
        return await scene.oauth("/oauth/token", grant, headers=basic(value, "s3cret"))
    form = {**grant, "client_id": world.client_id, "client_secret": value}
    return await scene.oauth("/oauth/token", form)


@row(
    "invalid_grant",
    400,
    {
        "a well-formed code": ("authorization_code", "code", "lp_code_" + "A" * 43),
        "a code of another form": ("authorization_code", "code", "1234"),
        "a long refresh token": ("refresh_token", "refresh_token", LONG),
        "a unicode refresh token": ("refresh_token", "refresh_token", "jeton-é"),
        "a device code of another form": (DEVICE_CODE, "device_code", "device"),
        "a session token of another form": (TOKEN_EXCHANGE, "subject_token", "a.b.c"),
        "a long session token": (TOKEN_EXCHANGE, "subject_token", LONG),
    },
    oauth=True,
)
async def _invalid_grant(scene: Scene, shape: tuple[str, str, str]) -> Any:
    grant_type, name, value = shape
    form = {"grant_type": grant_type, name: value}
    if grant_type == "authorization_code":
        form["redirect_uri"] = REDIRECT_URI
    if grant_type == TOKEN_EXCHANGE:
        form["subject_token_type"] = JWT_TYPE
    return await scene.oauth("/oauth/token", form, headers=scene.client_basic)


@row(
    "unsupported_grant_type",
    400,
    {
        "well-formed, not offered": "password",
        "another case": "AUTHORIZATION_CODE",
        "another URN": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "too long": LONG,
        "unicode": "autorisation",
    },
    oauth=True,
)
async def _unsupported_grant(scene: Scene, grant_type: str) -> Any:
    return await scene.oauth("/oauth/token", {"grant_type": grant_type}, headers=scene.client_basic)


RESOURCES = {
    "another origin": ["https://evil.example/"],
    "relative": ["/invoices"],
    "with a fragment": ["http://api.ledgerport.test/#x"],
    "too long": ["http://api.ledgerport.test/" + "r" * 600],
    "unicode": ["ressource-é"],
    "empty": [""],
    "two of them": ["http://api.ledgerport.test/", "http://api.ledgerport.test/invoices"],
}


@row(
    "invalid_target",
    400,
    {**RESOURCES, "at device authorization": ["https://evil.example/"]},
    oauth=True,
)
async def _invalid_target(scene: Scene, resources: list[str]) -> Any:
    # A form can carry a parameter twice: built by hand, as the test client takes one each.
    pairs = [("grant_type", "refresh_token"), ("refresh_token", "x")]
    path = "/oauth/token"
    if resources == ["https://evil.example/"] and "device target" not in scene.made:
        scene.made["device target"] = True
        pairs, path = [("scope", "invoices:read")], "/oauth/device/authorize"
    body = "&".join(
        f"{name}={value}" for name, value in [*pairs, *(("resource", r) for r in resources)]
    )
    return await scene.client.post(
        path,
        data=body.encode(),
        headers={**scene.client_basic, "Content-Type": "application/x-www-form-urlencoded"},
    )


@row(
    "invalid_scope",
    400,
    {
        "well-formed, not registered": "suppliers:admin",
        "another case": "INVOICES:READ",
        "one of several": "invoices:read nope:read",
        "too long": LONG,
        "unicode": "factures:lire",
        "empty": "",
    },
    oauth=True,
)
async def _invalid_scope(scene: Scene, scope: str) -> Any:
    return await scene.oauth(
        "/oauth/device/authorize", {"scope": scope}, headers=scene.client_basic
    )


@row(
    "invalid_redirect_uri",
    400,
    {
        "none": [],
        "six": [f"https://app.example/{n}" for n in range(6)],
        "a string": "https://app.example/cb",
        "a number": [42],
        "too long": ["https://app.example/" + "c" * 600],
        "unicode, with a query": ["https://app.example/cb?état=1"],
        "empty": [""],
        "http off loopback": ["http://app.example/cb"],
        "a wildcard": ["https://*.app.example/cb"],
    },
    oauth=True,
)
async def _invalid_redirect_uri(scene: Scene, uris: Any) -> Any:
    return await scene.oauth("/oauth/register", json_body={"redirect_uris": uris})


@row(
    "invalid_client_metadata",
    400,
    {
        "a number for a name": {"client_name": 42},
        "an empty name": {"client_name": ""},
        "a name too long": {"client_name": LONG},
        "an unknown method": {"token_endpoint_auth_method": "private_key_jwt"},
        "unicode scope": {"scope": "factures:lire"},
        "a string of grant types": {"grant_types": "authorization_code"},
        "a logo URI too long": {"logo_uri": "https://app.example/" + "l" * 600},
    },
    oauth=True,
)
async def _invalid_metadata(scene: Scene, metadata: dict[str, Any]) -> Any:
    body = {"redirect_uris": ["https://app.example/cb"], **metadata}
    return await scene.oauth("/oauth/register", json_body=body)


@row(
    "invalid_token",
    401,
    {
        "no token": None,
        "an unknown token": "Bearer lp_reg_unknown",
        "another scheme": "Basic dXNlcjpwYXNz",
        "another client's token": "theirs",
    },
    oauth=True,
)
async def _invalid_registration_token(scene: Scene, authorization: str | None) -> Any:
    """RFC 7592, beyond the specification's table: a client's configuration address without
    the token that configures it."""
    mine = await scene.oauth(
        "/oauth/register", json_body={"redirect_uris": ["https://a.example/cb"]}
    )
    address = (await mine.get_json())["registration_client_uri"].split("/oauth/", 1)[1]
    if authorization == "theirs":
        theirs = await scene.oauth(
            "/oauth/register", json_body={"redirect_uris": ["https://a.example/cb"]}
        )
        authorization = f"Bearer {(await theirs.get_json())['registration_access_token']}"
    headers = {} if authorization is None else {"Authorization": authorization}
    return await scene.client.get(f"/oauth/{address}", headers=headers)


@row(
    "invalid_dpop_proof",
    400,
    {
        "not a JWT": "proof",
        "too long": LONG * 3,
        "unicode": "preuve-é",
        "an unsigned JWT": "eyJhbGciOiJub25lIiwidHlwIjoiZHBvcCtqd3QifQ.e30.",
        "empty": "",
    },
    oauth=True,
)
async def _invalid_dpop_proof(scene: Scene, proof: str) -> Any:
    """RFC 9449, beyond the specification's table: a token request whose DPoP proof is
    refused (test_dpop.py has a row for each cause)."""
    form = {"grant_type": "refresh_token", "refresh_token": "x"}
    headers = {**scene.client_basic, "DPoP": proof}
    return await scene.oauth("/oauth/token", form, headers=headers)


@row(
    "temporarily_unavailable",
    429,
    {
        "a good request": {"grant_type": "refresh_token", "refresh_token": "x"},
        "no grant_type": {"grant_type": ""},
        "an unsupported grant": {"grant_type": "password"},
        "a resource off the origin": {
            "grant_type": "refresh_token",
            "refresh_token": "x",
            "resource": "https://evil.example/",
        },
    },
    oauth=True,
)
async def _temporarily_unavailable(scene: Scene, form: dict[str, str]) -> Any:
    # The client's pair locked out: refused whatever it asks, its right secret too.
    if "locked" not in scene.made:
        wrong = basic(scene.api.world.client_id, "wrong")
        for _ in range(catalog.LOCKOUT_FAILURES):
            await scene.oauth("/oauth/token", form, headers=wrong)
        scene.made["locked"] = True
    response = await scene.oauth("/oauth/token", form, headers=scene.client_basic)
    assert 1 <= int(response.headers["Retry-After"]) <= catalog.LOCKOUT_DURATION
    return response


# General API statuses and contract.md ------------------------------------------------------------


@row(
    "INVALID_TOKEN",
    401,
    {
        "well-formed, no token": "lp_at_" + "A" * 43,
        "another form": "token",
        "too long": LONG,
        "unicode": "jeton-é",
        "a JWT": "eyJhbGciOiJub25lIn0.e30.",
    },
)
async def _invalid_token(scene: Scene, token: str) -> Any:
    # Whatever the call sends: the token is looked at first.
    return await scene.client.open(
        "/app-data",
        method="POST",
        data=b"{",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )


BODIES = {
    "no JSON": b"{values: [",
    "another type": b'{"values": "all"}',
    "26 values": json.dumps({"values": [{"key": str(n)} for n in range(26)]}).encode(),
    "empty": b"",
    "unicode": '{"valeurs": ["é"]}'.encode(),
}
"""Bodies of a write of every form; the call is refused before its body is read."""


@row("INSUFFICIENT_SCOPE", 403, BODIES)
async def _insufficient_scope(scene: Scene, raw: bytes) -> Any:
    if "reader" not in scene.made:
        world = await make_world(scene.client, scene.admin_headers, scopes=ALL_SCOPES)
        tokens = await full_grant(scene.client, world, scope="invoices:read")
        scene.made["reader"] = Api(scene.client, tokens["access_token"], world)
    response = await scene.data("POST", "/app-data", raw=raw, api=scene.made["reader"])
    assert (await response.get_json())["message"].startswith("Insufficient scope")
    return response


@row("PERMISSION_DENIED", 403, BODIES)
async def _permission_denied(scene: Scene, raw: bytes) -> Any:
    if "viewer" not in scene.made:
        scene.made["viewer"] = await member_api(
            scene.client, scene.admin_headers, scene.api, "viewer"
        )
    response = await scene.data("POST", "/customers", raw=raw, api=scene.made["viewer"])
    assert not (await response.get_json())["message"].startswith("Insufficient scope")
    return response


@row(
    "APP_NOT_FOUND",
    404,
    {
        "another developer's app": "other",
        "well-formed, no app": f"app_{NOTHING}",
        "another form": "app_1",
        "too long": LONG[:500],
        "unicode": "appli-é",
    },
)
async def _not_your_app(scene: Scene, app_id: str) -> Any:
    if app_id == "other":
        app_id = (await scene.other_console()).app_id
    # Whatever the request sends: a body of another form, for a field, an extension, a function.
    for path, method in (("/extensions/invoice.details", "PUT"), ("/functions/sync", "PUT")):
        answer = await scene.console.client.open(
            f"/developer/apps/{app_id}{path}",
            method=method,
            data=b'{"path": 42, "source": null}',
            headers={
                "Authorization": f"Bearer {scene.console.token}",
                "Content-Type": "application/json",
            },
        )
        assert (await answer.get_json()).get("code") == "APP_NOT_FOUND", path
    return await scene.console.client.open(
        f"/developer/apps/{app_id}/app-data-fields",
        method="POST",
        data=b'{"choices": "none"}',
        headers={
            "Authorization": f"Bearer {scene.console.token}",
            "Content-Type": "application/json",
        },
    )


# --- The tables are covered, and every row holds --------------------------------------------------

NOT_BY_INPUT = {
    "authorization_pending": "the device code's state: not yet approved",
    "slow_down": "the time between two polls",
    "access_denied": "the user's decision on the device page",
    "expired_token": "the device code's age",
    "server_error": "a failure of the service",
    "use_dpop_nonce": "the service's configuration (LEDGERPORT_DPOP_NONCE=on, test_dpop.py)",
}
"""OAuth errors whose cause no input gives: the state of a device flow, or the service's."""
GENERAL = {
    "INVALID_TOKEN": 401,
    "INSUFFICIENT_SCOPE": 403,
    "PERMISSION_DENIED": 403,
    "APP_NOT_FOUND": 404,
}
"""The answers the General API statuses (401, the two 403s) and contract.md (others' apps: 404)
fix for any input."""


def test_every_code_of_the_spec_tables_has_a_row() -> None:
    envelope = {r.code: r.status for r in ROWS if not r.oauth}
    oauth = {r.code: r.status for r in ROWS if r.oauth}
    spec = {**catalog.API_ERROR_CODES, **catalog.CONSOLE_ERROR_CODES}

    assert envelope == {code: entry.status for code, entry in spec.items()} | GENERAL
    assert oauth == {
        error: entry.status
        for error, entry in catalog.OAUTH_ERRORS.items()
        if error not in NOT_BY_INPUT
    }
    assert all(len(r.shapes) >= 2 for r in ROWS if r.code not in ("ASSET_IN_USE",))


def _answered(body: Any, oauth: bool) -> Any:
    if not isinstance(body, dict):
        return body
    return body.get("error") if oauth else body.get("code")


@pytest.mark.parametrize("spec_row", ROWS, ids=[r.code for r in ROWS])
async def test_the_cause_answers_its_code_whatever_the_form(
    client: Any, admin_headers: dict[str, str], platform: Platform, spec_row: Row
) -> None:
    seen = {}
    with trio.fail_after(TIMEOUT):
        made = await scene(client, admin_headers, platform)
        for shape, value in spec_row.shapes.items():
            response = await spec_row.provoke(made, value)
            body = await response.get_json()
            seen[shape] = (response.status_code, _answered(body, spec_row.oauth))

    expected = (spec_row.status, spec_row.code)
    assert {shape: answer for shape, answer in seen.items() if answer != expected} == {}
