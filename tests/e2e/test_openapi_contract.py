"""The served OpenAPI document is the service's contract: schemathesis holds a real server to it.

``ledgerport serve`` runs as in the other end-to-end tests (``served.py``: development mode, a
SQLite file in a temporary directory, a free loopback port, a known admin token), with the cheap
password hashing, since the run creates users and signs in by the dozen. The operator API then
provisions what the run needs credentials for: a business with an owner who is signed in on the
application host, a reviewed confidential app installed there, and an access token from exchanging
a session token. A second business, user, app and installation are the ids the run may change or
delete (the first ones must stay as they are, or the credentials stop working halfway).

schemathesis (``st run``) then runs every phase on every operation: the examples the document
gives (ids, decimals and dates have one), the coverage phase (each parameter's boundaries and
each way to break its schema: empty and missing values, wrong types, the edges of patterns,
lengths and enums), the fuzzing phase (``EXAMPLES_PER_OPERATION`` generated requests, valid and
invalid) and the stateful phase (sequences that feed one answer's ids into the next request),
with ``--checks all``: no 5xx, every status, content type and header documented, every body as
its schema says, valid data accepted, invalid data refused, authentication enforced. That is what
found an empty Service-Version header accepted, ids refused by a form the document did not state,
money and dates refused by rules it did not state, and members with NUL in their names refused
where the document allowed any; and, once every valid Idempotency-Key it sends was one no other
request used (``schemathesis_hooks.py``), PATCH bodies the server takes left out but the document
required. The run is derandomized (a fixed seed), so it sends the same requests every time.

The operations are split into ``GROUPS`` by path, one test case each, so pytest-xdist spreads
them over its workers; the last group takes every operation the others do not name, so an
endpoint added later is in the run without a change here. ``EXAMPLES_PER_OPERATION`` is what fits
the time of continuous integration: measured on a loaded two-core machine, every phase at 30
examples took about 4 minutes for the 142 operations, the six cases 40 seconds to a minute
and a half each (fuzzing is most of it, the coverage phase about a fifth), which the suite's four
workers share: about 2 minutes of its time. At 60 examples a run took 8 minutes and, once the
document said what the server takes, found nothing more. Any failure fails the case with
schemathesis's report, which holds a curl command per failure.

This test is the gate of the document in continuous integration (``.ci/run`` runs the suite).
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledgerport import catalog

from .served import Server, served

ADMIN_TOKEN = "lp_admin_e2e-contract-token-0123456789abcdef"
PASSWORD = "contract password 1"
HTTP_TIMEOUT = 10.0
DOCUMENT_TIMEOUT = 120.0
"""The bound of the wait for the document: the server builds it in a worker thread as it starts,
a fifth of a second of CPU alone and seconds beside the rest of the suite on two cores."""
RUN_TIMEOUT = 600.0
"""The bound of one group's run: a minute or two alone, about twice that beside the rest of the
suite on two cores."""
EXAMPLES_PER_OPERATION = 30
SEED = 20261123
REDIRECT_URI = "http://127.0.0.1:9/callback"
SCOPES = tuple(catalog.SCOPES)
"""What both apps register."""
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"

POSITIVE_DATA_ACCEPTED = ("2xx", "3xx", "401", "403", "404", "409", "429", "5xx")
"""What schemathesis expects of a request that matches the document: success, a redirect, or a
refusal that depends on state, not on the request's form: credentials missing or refused
(401, 403), an id that names nothing (404, every generated id), a state that forbids it (409), a
rate limit (429). A 5xx fails the run all the same, through the server error check."""

REFUSED_WHEN_VALID: Mapping[tuple[str, str], str] = {
    ("POST", "/oauth/token"): (
        "OAuth answers every refusal but a failed client authentication with 400 (RFC 6749 5.2):"
        " a well-formed code, refresh token, device code or session token that is not a live"
        " one is invalid_grant, and a client sent both in Basic and in the body invalid_request"
    ),
    ("POST", "/oauth/revoke"): (
        "a client sent both in Basic and in the body (both are documented ways) is"
        " invalid_request, which OAuth answers with 400"
    ),
    ("POST", "/oauth/device/authorize"): (
        "a scope the app did not register is invalid_scope, a resource off the API's origin"
        " invalid_target, a client sent two ways invalid_request: OAuth answers them with 400"
    ),
    ("POST", "/oauth/register"): (
        "RFC 7591 metadata rules no schema states (https only, http on loopback hosts, no"
        " wildcard, query or fragment, known scopes) are invalid_redirect_uri or"
        " invalid_client_metadata, which OAuth answers with 400"
    ),
    ("GET", "/oauth/authorize"): (
        "the consent page checks the request against the client's registration (an unknown"
        " client_id, a redirect_uri it did not register) and shows the problem with 400; it"
        " never redirects to an unchecked URI"
    ),
    ("POST", "/oauth/authorize"): (
        "a request_id names a held authorization request only when the consent page issued"
        " it; any other is refused on the page with 400"
    ),
    ("POST", "/device"): (
        "a user code is valid only while its device request is pending; a generated one is"
        " refused on the page with 400"
    ),
    ("POST", "/device/decision"): (
        "a decision names a pending user code; a generated one is refused on the page with 400"
    ),
    ("POST", "/admin/apps"): (
        "redirect URI and App URL rules beyond the schema (https, http on loopback hosts only,"
        " no wildcard, query or fragment) are validation failures (400)"
    ),
    ("POST", "/admin/installations"): (
        "the scopes must be ones the app registered, and an unreviewed app installs only in"
        " sandbox businesses: both depend on the stored app and answer 400"
    ),
    ("GET", "/app-data"): (
        "resourceId and resourceIds are each optional but one of them is required, and both"
        " together name at most 50 ids (PROVIDE_RESOURCEID_RESOURCEIDS,"
        " RESOURCEIDS_ACCEPTS_MOST_50_IDS): no schema of query parameters states either"
    ),
    ("POST", "/app-data"): (
        "a value's key must be a field the app declared for the resource type, looked up"
        " whatever its form, and the value must follow the field's type and choices: both are"
        " stored state (UNKNOWN_APP_DATA_FIELD, INVALID_APP_DATA_VALUE)"
    ),
    ("GET", "/events"): (
        "after names an event of the business within the 30-day retention and types names"
        " events of the catalog, looked up whatever their form: any other after is"
        " UNKNOWN_CURSOR and any other type UNKNOWN_EVENT_TYPE_TYPES, 400s by the spec's error"
        " table"
    ),
    ("PUT", "/developer/apps/{app_id}/extensions/{target}"): (
        "the path is refused (EXTENSION_PATH_INVALID) for a dot segment or a barred character"
        " once percent-decoded, or when it does not resolve on the App URL's origin, and a record"
        " target needs its read scope among the app's (EXTENSION_SCOPE_REQUIRED): decoding and"
        " stored state that no pattern states"
    ),
    **{
        operation: (
            "a document's lines must total at most 9999999999999.99 (each quantity times its"
            " unitPrice, summed): a rule across fields and lines, which the document states in"
            " words (the largest quantity times the largest price is about 10^26)"
        )
        for operation in (
            ("POST", "/invoices"),
            ("POST", "/invoices/bulk-import"),
            ("PATCH", "/invoices/{record_id}"),
            ("POST", "/quotes"),
            ("PATCH", "/quotes/{record_id}"),
            ("POST", "/purchases"),
            ("PATCH", "/purchases/{record_id}"),
            ("POST", "/purchase-returns"),
            ("PATCH", "/purchase-returns/{record_id}"),
        )
    },
    ("POST", "/journal-entries"): (
        "an entry's lines must each be a debit or a credit, balance, and name accounts of the"
        " business: rules across fields and stored accounts that no schema states"
    ),
}
"""Operations where a request that matches the document is refused with 400 for a reason only
the stored state or a rule beyond JSON Schema knows; every other operation accepts valid data."""

NOTICE_FORMS: Mapping[tuple[str, str], str] = {
    operation: (
        "a form of the console or the marketplace answers every refusal (an expired form, a"
        " value the action refuses) with the redirect back to its page, whose notice says why:"
        " post/redirect/get, so an invalid form is a 303"
    )
    for operation in (
        ("POST", "/console/apps/{app_id}/webhooks/{webhook_id}/test"),
        ("POST", "/console/apps/{app_id}/webhooks/{webhook_id}/deliveries/{delivery_id}/resend"),
        ("POST", "/console/apps/{app_id}/listing/submit"),
        ("POST", "/marketplace/{slug}/rating"),
    )
}
"""Operations that refuse invalid data with a 303 to a page that says why, not a 4xx."""
NEGATIVE_DATA_REJECTED = (
    *("400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429"),
    "5xx",
)
"""schemathesis's statuses of a refusal (its default; a 5xx fails the run all the same, through
the server error check), to which NOTICE_FORMS add 303."""


# --- the served instance and what it holds -------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    workdir = tmp_path_factory.mktemp("openapi-contract")
    # The run sends thousands of requests from one address with one token: a hundred times the
    # spec's rate limits keep it from being throttled (development instances only).
    env = {"LEDGERPORT_PASSWORD_HASHING": "fast", "LEDGERPORT_RATE_LIMIT_FACTOR": "100"}
    with served(workdir, ADMIN_TOKEN, env) as running:
        # Asked once here, so no test's own bound includes the build.
        document = httpx.get(
            f"{running.base}/openapi.json", timeout=DOCUMENT_TIMEOUT, trust_env=False
        )
        document.raise_for_status()
        yield running


@dataclass(frozen=True)
class Tenant:
    """The ids of one business with its owner, an app and the app's installation there."""

    business_id: str
    user_id: str
    email: str
    app_id: str
    client_id: str
    client_secret: str
    installation_id: str


@dataclass(frozen=True)
class Credentials:
    """What the run authenticates with, and the ids it may change or delete."""

    gate: Tenant
    target: Tenant
    access_token: str
    refresh_token: str
    """Of a token family of its own: the run may burn it by replaying it."""
    session: str
    csrf_seed: str
    csrf_token: str


def _created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _tenant(admin: httpx.Client, name: str) -> Tenant:
    business = _created(admin.post("/admin/businesses", json={"name": name, "sandbox": True}))
    email = f"{name.lower().replace(' ', '-')}@example.com"
    user = _created(admin.post("/admin/users", json={"email": email, "password": PASSWORD}))
    member = admin.put(
        f"/admin/businesses/{business['id']}/members/{user['id']}", json={"role": "owner"}
    )
    assert member.status_code == 200, member.text
    app = _created(
        admin.post(
            "/admin/apps",
            json={
                "name": f"{name} App",
                "type": "CONFIDENTIAL",
                "redirectUris": [REDIRECT_URI],
                "scopes": list(SCOPES),
                "developerUserId": user["id"],
                "reviewed": True,
                "appUrl": "http://127.0.0.1:9/app",
            },
        )
    )
    installation = _created(
        admin.post(
            "/admin/installations",
            json={
                "appId": app["id"],
                "businessId": business["id"],
                "userId": user["id"],
                "scopes": list(SCOPES),
            },
        )
    )
    return Tenant(
        business["id"],
        user["id"],
        email,
        app["id"],
        app["clientId"],
        app["clientSecret"],
        installation["id"],
    )


def _exchange(server: Server, admin: httpx.Client, tenant: Tenant) -> dict[str, Any]:
    """Tokens of the tenant's app in its business, through a session token (a family each)."""
    issued = _created(
        admin.post(
            "/admin/session-tokens",
            json={
                "appId": tenant.app_id,
                "businessId": tenant.business_id,
                "userId": tenant.user_id,
            },
        )
    )
    exchanged = httpx.post(
        f"{server.base}/oauth/token",
        data={
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": issued["sessionToken"],
            "subject_token_type": JWT_TYPE,
        },
        auth=(tenant.client_id, tenant.client_secret),
        timeout=HTTP_TIMEOUT,
        trust_env=False,
    )
    assert exchanged.status_code == 200, exchanged.text
    tokens: dict[str, Any] = exchanged.json()
    return tokens


def _form_field(page: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]+)"', page)
    assert match is not None, page
    return html.unescape(match[1])


def _sign_in(server: Server, tenant: Tenant) -> tuple[str, str, str]:
    """The tenant owner's session cookie, and a CSRF cookie with the form token bound to it."""
    with httpx.Client(base_url=server.base, timeout=HTTP_TIMEOUT, trust_env=False) as browser:
        form = browser.get("/login")
        csrf_token = _form_field(form.text, "csrf_token")
        signed_in = browser.post(
            "/login",
            data={
                "email": tenant.email,
                "password": PASSWORD,
                "next": "/",
                "csrf_token": csrf_token,
            },
        )
        assert signed_in.status_code == 303, signed_in.text
        return browser.cookies["lp_session"], browser.cookies["lp_csrf"], csrf_token


@pytest.fixture(scope="module")
def credentials(server: Server) -> Credentials:
    with httpx.Client(
        base_url=server.base,
        timeout=HTTP_TIMEOUT,
        trust_env=False,
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ) as admin:
        gate, target = _tenant(admin, "Gate Ltd"), _tenant(admin, "Target Ltd")
        access_token = _exchange(server, admin, gate)["access_token"]
        refresh_token = _exchange(server, admin, gate)["refresh_token"]
    session, csrf_seed, csrf_token = _sign_in(server, gate)
    return Credentials(gate, target, access_token, refresh_token, session, csrf_seed, csrf_token)


# --- the run's configuration ---------------------------------------------------------------------


def _toml(value: object) -> str:
    """A TOML value: strings, numbers, lists and inline tables (JSON's escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return json.dumps(value)
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {value!r}")


def _table(name: str, values: Mapping[str, object]) -> str:
    return "\n".join([f"[{name}]", *(f"{json.dumps(k)} = {_toml(v)}" for k, v in values.items())])


def _binding(dictionary: str) -> dict[str, object]:
    """Half the values of a parameter come from ``dictionary``, half are generated."""
    return {"dictionary": dictionary, "probability": 0.5}


def _dictionaries(held: Credentials) -> dict[str, list[str]]:
    """Values that lead generated requests past "not found" to the operations' other answers.
    Ids the run may change or delete are the target tenant's; the gate tenant's appear only where
    nothing changes (viewing its app), so the run's credentials keep working."""
    gate, target = held.gate, held.target
    return {
        "businesses": [target.business_id],
        "users": [target.user_id],
        "apps": [target.app_id],
        "installations": [target.installation_id],
        "viewable_apps": [gate.app_id],
        "viewable_businesses": [gate.business_id],
        "client_ids": [gate.client_id],
        "redirect_uris": [REDIRECT_URI],
        "web_pages": ["https://app.example/"],
        "scopes": list(SCOPES),
        "refresh_tokens": [held.refresh_token],
        "emails": [gate.email],
        "passwords": [PASSWORD],
        "files": ["bridge.js"],
    }


PARAMETERS = {
    "path.business_id": "businesses",
    "path.user_id": "users",
    "path.app_id": "apps",
    "path.installation_id": "installations",
    "path.filename": "files",
    "body.businessId": "businesses",
    "body.userId": "users",
    "body.appId": "apps",
    "body.developerUserId": "users",
    "body.redirectUris[*]": "redirect_uris",
    "body.redirect_uris[*]": "redirect_uris",
    "body.appUrl": "web_pages",
    "body.scopes[*]": "scopes",
    "body.scope": "scopes",
    "body.refresh_token": "refresh_tokens",
    "body.client_id": "client_ids",
    "query.app_id": "viewable_apps",
    "query.business_id": "viewable_businesses",
    "query.client_id": "client_ids",
    "query.redirect_uri": "redirect_uris",
    "query.scope": "scopes",
}
"""Which dictionary a parameter draws half its values from, wherever it appears."""

OPERATION_PARAMETERS: Mapping[tuple[str, str], Mapping[str, str]] = {
    # Viewing an app: the signed-in owner's own app.
    ("GET", "/apps/{app_id}"): {"path.app_id": "viewable_apps"},
    # Signing in as the owner (a new session; the run's stays valid).
    ("POST", "/login"): {"body.email": "emails", "body.password": "passwords"},
}


def schemathesis_config(server: Server, held: Credentials) -> str:
    """The run's schemathesis.toml: credentials for each security scheme of the document, the
    CSRF pair every form of the application host needs, likely values of ids and other
    parameters, and by operation the refusals of valid data that are correct."""
    refused_when_valid = REFUSED_WHEN_VALID
    gate = held.gate
    parameters: dict[str, object] = {
        # The double-submit CSRF pair: without it every form is refused before anything else.
        "cookie.lp_csrf": held.csrf_seed,
        "body.csrf_token": held.csrf_token,
        **{name: _binding(dictionary) for name, dictionary in PARAMETERS.items()},
    }
    sections = [
        "\n".join(
            [
                f"base-url = {_toml(server.base)}",
                f"seed = {SEED}",
                "workers = 1",
                "request-timeout = 10",
            ]
        ),
        _table("generation", {"max-examples": EXAMPLES_PER_OPERATION, "deterministic": True}),
        # The examples phase also sends operations whose examples cover only some parameters,
        # generating the rest.
        _table("phases.examples", {"fill-missing": True}),
        _table("auth.openapi.admin", {"bearer": ADMIN_TOKEN}),
        _table("auth.openapi.accessToken", {"bearer": held.access_token}),
        _table(
            "auth.openapi.clientBasic", {"username": gate.client_id, "password": gate.client_secret}
        ),
        _table("auth.openapi.session", {"api_key": held.session}),
        _table("parameters", parameters),
        *(
            _table(f"dictionaries.{name}", {"values": values})
            for name, values in _dictionaries(held).items()
        ),
    ]
    operations = {*refused_when_valid, *OPERATION_PARAMETERS, *NOTICE_FORMS}
    for method, path in sorted(operations):
        lines = [
            "[[operations]]",
            f"include-method = {_toml(method)}",
            f"include-path = {_toml(path)}",
        ]
        if (method, path) in refused_when_valid:
            expected = [*POSITIVE_DATA_ACCEPTED, "400"]
            lines.append(f"# 400: {refused_when_valid[method, path]}")
            lines.append(f"checks.positive_data_acceptance.expected-statuses = {_toml(expected)}")
        if (method, path) in NOTICE_FORMS:
            refused = [*NEGATIVE_DATA_REJECTED, "303"]
            lines.append(f"# 303: {NOTICE_FORMS[method, path]}")
            lines.append(f"checks.negative_data_rejection.expected-statuses = {_toml(refused)}")
        if (method, path) in OPERATION_PARAMETERS:
            bound = {k: _binding(v) for k, v in OPERATION_PARAMETERS[method, path].items()}
            lines.append(f"parameters = {_toml(bound)}")
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


# --- the run -------------------------------------------------------------------------------------

HOOKS_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")])
    ),
    "SCHEMATHESIS_HOOKS": "schemathesis_hooks",
}
"""The run loads ``schemathesis_hooks.py`` beside this file: every valid Idempotency-Key it sends
is one no other request used, so a 400 on a valid write is a failure."""

STREAMS = r"^apps/[^/]+/(?:(?:deliveries|runs)/stream|webhooks/[^/]+/stream/pull)$"
"""The live streams and a stream endpoint's pull (paths after ``/developer/``), left out of the
run: a stream answered 200 stays open, and a pull waits up to its ``wait`` (25 s by default) for
a delivery, so each request schemathesis sent would end in its timeout. Their answers, refusals
and events are tested in tests/integration/test_live_streams.py and
tests/integration/test_stream_endpoints.py."""
MCP = r"^/mcp$"
"""The MCP server, left out of the run: it answers JSON-RPC messages of the protocol, which the
document names without their grammar, so generated bodies test the transport's parser only. It
is tested through the protocol's own client in tests/e2e/test_mcp_e2e.py."""
GROUPS: Mapping[str, str | None] = {
    "sales": r"^/(?:invoices|payments|quotes|customers|app-data|events)(?:/|$)",
    "purchases-and-ledger": r"^/(?:purchases|purchase-returns|suppliers|accounts|journal-entries)"
    r"(?:/|$)",
    "developer-console": rf"^/developer/(?!{STREAMS[1:]})",
    "operator": r"^/admin/",
    "console-pages": r"^/console(?:/|$)",
    "oauth-pages-and-the-rest": None,
}
"""The operations of each test case, by a regular expression of their path; the last one takes
every operation the others do not (OAuth, sign-in, the app and marketplace pages, operations).
The console's pages have a case of their own: with the rest they made the longest case, twice
any other's, and the suite waited for it at its end."""


def _filters(group: str) -> list[str]:
    pattern = GROUPS[group]
    if pattern is not None:
        return ["--include-path-regex", pattern]
    left_out = [f"^/developer/{STREAMS[1:]}", MCP]
    named = "|".join(f"(?:{p})" for p in [*GROUPS.values(), *left_out] if p)
    return ["--exclude-path-regex", named]


def test_the_groups_hold_every_operation_once(server: Server) -> None:
    document = httpx.get(f"{server.base}/openapi.json", timeout=HTTP_TIMEOUT, trust_env=False)
    named = [re.compile(p) for p in GROUPS.values() if p is not None]

    for path in document.json()["paths"]:
        assert sum(1 for pattern in named if pattern.search(path)) <= 1, path


@pytest.mark.parametrize("group", list(GROUPS))
def test_the_service_answers_as_its_openapi_document_says(
    server: Server, credentials: Credentials, tmp_path: Path, group: str
) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(schemathesis_config(server, credentials))
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{server.base}/openapi.json",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        *_filters(group),
    ]
    try:
        run = subprocess.run(
            command,
            cwd=tmp_path,
            env=HOOKS_ENV,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout or b""
        if isinstance(output, bytes):  # the partial output is bytes, text=True or not
            output = output.decode(errors="replace")
        pytest.fail(f"schemathesis did not finish within {RUN_TIMEOUT} s\n{output}")

    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}\n--- server log ---\n{server.output()}"
