"""Operational endpoints: health, Prometheus metrics and the served OpenAPI document."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

import ledgerport
from ledgerport import catalog
from ledgerport.http import create_app
from ledgerport.platform import Platform
from ledgerport.storage import StorageUnavailable, StoreStatistics

from .oauth_helpers import (
    device_authorize,
    device_decide,
    install,
    login,
    make_world,
    session_token,
)

REQUESTS_TOTAL = "ledgerport_http_requests_total"
IN_FLIGHT = "ledgerport_http_requests_in_flight"
NOT_DOCUMENTED = {
    "static",  # Quart's static files route
    "openapi",  # the document itself: contract.md fixes GET /openapi.json
    # The product's own routes, outside the partner API: always 403 ENDPOINT_NOT_EXPOSED.
    "api.not_exposed",
    "api.not_exposed_below",
}


async def _samples(client: Any) -> list[tuple[str, dict[str, str], float]]:
    response = await client.get("/metrics")
    assert response.status_code == 200
    text = await response.get_data(as_text=True)
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def _requests_total(
    samples: list[tuple[str, dict[str, str], float]], **labels: str
) -> float | None:
    for name, sample_labels, value in samples:
        if name == REQUESTS_TOTAL and sample_labels == labels:
            return value
    return None


# --- Health --------------------------------------------------------------------------------------


async def test_healthz_answers_ok(client: Any) -> None:
    response = await client.get("/healthz")

    assert response.status_code == 200
    assert await response.get_json() == {"status": "ok"}


class _UnreachableStore:
    """A store whose database does not answer."""

    kind = "sqlite"

    @asynccontextmanager
    async def transaction(
        self, *, background: bool = False, reads: bool = False
    ) -> AsyncIterator[Any]:
        raise StorageUnavailable("database is down")
        yield  # pragma: no cover

    async def ping(self) -> None:
        raise StorageUnavailable("database is down")

    @property
    def autocommit(self) -> Any:
        return self

    def statistics(self) -> StoreStatistics:
        return StoreStatistics()

    async def fetch(self, sql: str, *args: Any) -> Any:
        raise StorageUnavailable("database is down")

    fetchrow = fetchval = fetch


def _unreachable(platform: Platform) -> Any:
    broken = replace(platform, store=_UnreachableStore())  # type: ignore[arg-type]
    return create_app(broken).test_client()


async def test_readyz_answers_ok_when_every_part_runs(client: Any, platform: Platform) -> None:
    platform.services.expect("delivery-engine")
    platform.services.up("delivery-engine")

    response = await client.get("/readyz")

    assert response.status_code == 200
    assert await response.get_json() == {"status": "ok", "failing": []}


async def test_readyz_names_a_service_that_does_not_run_and_recovers(
    client: Any, platform: Platform
) -> None:
    for name in ("scheduler", "delivery-engine"):
        platform.services.expect(name)
    platform.services.up("scheduler")

    down = await client.get("/readyz")
    platform.services.up("delivery-engine")
    up = await client.get("/readyz")

    assert down.status_code == 503
    assert down.headers["Retry-After"] == "5"
    body = await down.get_json()
    assert (body["statusCode"], body["code"]) == (503, "NOT_READY")
    assert body["message"] == "Not ready: delivery-engine"
    assert up.status_code == 200


async def test_readyz_names_the_store_when_the_database_does_not_answer(
    platform: Platform,
) -> None:
    response = await _unreachable(platform).get("/readyz")

    assert response.status_code == 503
    assert (await response.get_json())["message"] == "Not ready: store"


async def test_healthz_fails_when_the_database_does_not_answer(platform: Platform) -> None:
    response = await _unreachable(platform).get("/healthz")

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    body = await response.get_json()
    assert (body["statusCode"], body["code"]) == (503, "SERVICE_UNAVAILABLE")


async def test_an_unreachable_database_answers_each_blueprint_in_its_shape(
    platform: Platform,
) -> None:
    client = _unreachable(platform)

    token = await client.post(
        "/oauth/token",
        form={"grant_type": "refresh_token", "refresh_token": "x", "client_id": "cid_x"},
    )
    consent = await client.get("/oauth/authorize?client_id=cid_x")
    admin = await client.post(
        "/admin/businesses", json={"name": "Acme"}, headers={"Authorization": "Bearer x"}
    )

    assert token.status_code == 503
    assert token.headers["Retry-After"] == "5"
    assert token.headers["Cache-Control"] == "no-store"
    assert (await token.get_json())["error"] == "server_error"
    assert consent.status_code == 503
    assert consent.mimetype == "text/html"
    assert "The service is briefly unavailable" in await consent.get_data(as_text=True)
    # The admin token check needs no database: 401 before any storage is touched.
    assert admin.status_code == 401


# --- Metrics -------------------------------------------------------------------------------------


async def test_metrics_is_prometheus_text(client: Any) -> None:
    response = await client.get("/metrics")

    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    text = await response.get_data(as_text=True)
    assert re.search(r"^# TYPE ledgerport_http_requests(_total)? counter$", text, re.MULTILINE)
    assert re.search(rf"^# TYPE {IN_FLIGHT} gauge$", text, re.MULTILINE)
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    assert any(sample.name == IN_FLIGHT for sample in samples)


async def test_metrics_tell_the_stores_work(
    client: Any, platform: Platform, admin_headers: dict[str, str]
) -> None:
    before = platform.store.statistics()
    await client.post("/admin/businesses", json={"name": "Counted"}, headers=admin_headers)

    text = await (await client.get("/metrics")).get_data(as_text=True)

    families = list(text_string_to_metric_families(text))
    samples = {s.name: s.value for family in families for s in family.samples}
    histogram = "ledgerport_store_transaction_duration_seconds"
    (timed,) = [family for family in families if family.name == histogram]
    assert timed.type == "histogram"
    buckets = [(s.labels["le"], s.value) for s in timed.samples if s.name == f"{histogram}_bucket"]
    assert [le for le, _ in buckets] == [
        *(str(bound) for bound in StoreStatistics.TRANSACTION_BOUNDS),
        "+Inf",
    ]
    counts = [count for _, count in buckets]
    assert counts == sorted(counts)  # cumulative
    assert samples[f"{histogram}_count"] == counts[-1] > before.transactions
    assert samples[f"{histogram}_sum"] > 0
    assert samples["ledgerport_store_unavailable_total"] == 0
    assert samples["ledgerport_store_listens_lost_total"] == 0
    assert samples["ledgerport_store_connections"] >= 1
    assert samples["ledgerport_store_connections_max"] >= samples["ledgerport_store_connections"]
    assert "ledgerport_store_writer_waits_total" in samples


async def test_metrics_tell_the_process_the_interpreter_and_the_version(client: Any) -> None:
    text = await (await client.get("/metrics")).get_data(as_text=True)

    samples = {s.name: s for family in text_string_to_metric_families(text) for s in family.samples}
    for name in (
        "process_resident_memory_bytes",
        "process_cpu_seconds_total",
        "process_open_fds",
        "process_start_time_seconds",
        "python_info",
        "python_gc_collections_total",
    ):
        assert name in samples, name
    assert samples["process_resident_memory_bytes"].value > 0
    assert samples["ledgerport_build_info"].labels == {"version": ledgerport.__version__}


@pytest.mark.parametrize(
    ("method", "path", "body", "route", "status"),
    [
        ("POST", "/admin/businesses", {"name": "Acme"}, "/admin/businesses", "201"),
        ("POST", "/admin/businesses", {"name": 5}, "/admin/businesses", "400"),
        ("GET", "/healthz", None, "/healthz", "200"),
        (
            "PUT",
            "/admin/businesses/bus_concrete-1/members/usr_concrete-2",
            {"role": "owner"},
            "/admin/businesses/<business_id>/members/<user_id>",
            "404",
        ),
        (
            "DELETE",
            "/admin/installations/ins_concrete-3",
            None,
            "/admin/installations/<installation_id>",
            "404",
        ),
    ],
    ids=["created", "invalid", "health", "two-ids", "one-id"],
)
async def test_requests_are_counted_by_route_rule_method_and_status(
    client: Any,
    admin_headers: dict[str, str],
    method: str,
    path: str,
    body: dict[str, Any] | None,
    route: str,
    status: str,
) -> None:
    for expected in (1.0, 2.0):
        response = await client.open(path, method=method, json=body, headers=admin_headers)
        assert str(response.status_code) == status

        samples = await _samples(client)

        assert _requests_total(samples, route=route, method=method, status=status) == expected
    assert all("concrete" not in value for _, labels, _ in samples for value in labels.values())


async def test_unmatched_paths_do_not_become_route_labels(client: Any) -> None:
    for i in range(3):
        assert (await client.get(f"/no/such/page-{i}")).status_code == 404

    samples = await _samples(client)

    routes = {labels.get("route") for name, labels, _ in samples if name == REQUESTS_TOTAL}
    assert not any(route and "no/such" in route for route in routes)
    unmatched = [
        value
        for name, labels, value in samples
        if name == REQUESTS_TOTAL and labels.get("status") == "404"
    ]
    assert sum(unmatched) == 3


async def test_in_flight_gauge_returns_to_rest_after_errors(fresh_app: Any) -> None:
    app = fresh_app

    async def crash() -> str:
        raise RuntimeError("boom")

    app.add_url_rule("/test-only/crash", "test_crash", crash)
    client = app.test_client()
    await client.get("/test-only/crash")  # 500
    await client.get("/no/such/page")  # 404
    await client.delete("/healthz")  # 405
    await client.post("/admin/businesses", json={"name": "Acme"})  # 401
    await client.get("/healthz")  # 200

    samples = await _samples(client)

    in_flight = [value for name, _, value in samples if name == IN_FLIGHT]
    assert in_flight == [1.0]  # only the /metrics request being answered


# --- OpenAPI -------------------------------------------------------------------------------------


def _openapi_path(rule: str) -> str:
    """``/a/<b>/<int:c>`` as OpenAPI writes it: ``/a/{b}/{c}``."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


async def test_openapi_document_is_3_1(client: Any) -> None:
    response = await client.get("/openapi.json")

    assert response.status_code == 200
    document = await response.get_json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"]
    assert document["info"]["version"]


async def test_openapi_lists_every_route_and_method(app: Any, client: Any) -> None:
    document = await (await client.get("/openapi.json")).get_json()
    paths = document["paths"]

    expected = {
        (_openapi_path(rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if rule.endpoint not in NOT_DOCUMENTED
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}
    }
    documented = {(path, method) for path, item in paths.items() for method in item}

    assert expected, "no routes found"
    assert expected - documented == set()


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/admin/businesses", "post"),
        ("/admin/businesses/{business_id}/members/{user_id}", "put"),
        ("/admin/installations/{installation_id}", "delete"),
        ("/healthz", "get"),
        ("/metrics", "get"),
        ("/login", "get"),
        ("/login", "post"),
    ],
)
async def test_openapi_names_known_operations(client: Any, path: str, method: str) -> None:
    document = await (await client.get("/openapi.json")).get_json()

    assert method in document["paths"][path]


async def test_grant_counters_count_issuance_registration_and_device_decisions(
    client: Any, admin_headers: dict[str, str]
) -> None:
    world = await make_world(client, admin_headers)
    await install(client, admin_headers, world)
    await session_token(client, admin_headers, world)
    registered = await client.post(
        "/oauth/register", json={"redirect_uris": ["https://reg.example/cb"]}
    )
    assert registered.status_code == 201
    device = await (await device_authorize(client, world)).get_json()
    await login(client, world)
    decided = await device_decide(client, world, device["user_code"], decision="deny")
    assert decided.status_code == 200

    samples = await _samples(client)

    def value(name: str, labels: dict[str, str]) -> float | None:
        return next((v for n, lab, v in samples if n == name and lab == labels), None)

    assert value("ledgerport_session_tokens_issued_total", {"source": "admin"}) == 1.0
    assert value("ledgerport_client_registrations_total", {"type": "CONFIDENTIAL"}) == 1.0
    assert value("ledgerport_device_decisions_total", {"decision": "deny"}) == 1.0


def _series(platform: Platform) -> int:
    return sum(len(family.samples) for family in platform.metrics.registry.collect())


async def test_junk_requests_add_no_metric_series(client: Any, platform: Platform) -> None:
    """Label values come from closed sets: random grant types, methods and paths, answered or
    refused with 429, add no series (each series is memory kept for the process's life)."""

    async def junk(count: int) -> None:
        for n in range(count):
            await client.post("/oauth/token", form={"grant_type": f"urn:junk:{n}"})
            await client.open(f"/nowhere/{n}", method=f"JUNK{n}")
            await client.open(f"/oauth/token?{n}", method=f"X{n}")

    limit = catalog.RATE_LIMIT_TOKEN_UNAUTHENTICATED_PER_IP.limit
    with trio.fail_after(120):
        await junk(limit + 1)  # every answer there is, refusals included, has its series now
        before = _series(platform)
        await junk(700)  # 2,100 junk values

    assert _series(platform) == before
