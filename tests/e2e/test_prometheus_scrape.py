"""A real Prometheus (Debian's ``prometheus`` binary) scrapes a served ledgerport in production
mode, with the metrics token as docs/operations.md's sample configuration presents it, with the
rules of ``ops/prometheus`` loaded, and the dashboard's key queries answer data through its HTTP
API.

Without the binary the test skips with the reason, and fails when LEDGERPORT_REQUIRE_PROMETHEUS
is set (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from ..prometheus import prometheus_command
from .served import free_port, served

ADMIN_TOKEN = "lp_admin_prometheus-scrape-0123456789"
METRICS_TOKEN = "metrics-scrape-token-0123456789abcdef"
OPS = Path(__file__).resolve().parents[2] / "ops"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
STARTUP = 60.0
SCRAPES = 3
"""Samples of each series wanted before the queries: a rate needs two."""
KEY_PANELS = (
    "Requests by status",
    "Latency p50 / p99",
    "In flight",
    "Events appended",
    "Dispatcher lag (events not fanned out)",
    "Queue depth and retry backlog",
    "Apps and webhooks failing",
    "Queue depth and workers",
    "Transactions",
    "Transaction time p50 / p99",
    "CPU",
    "Resident memory",
    "Open files",
    "Version",
)


def _query(api: httpx.Client, expr: str) -> list[dict[str, Any]]:
    answer = api.get("/api/v1/query", params={"query": expr}).json()
    assert answer["status"] == "success", (expr, answer)
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _wait(condition: Any, what: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")
        try:
            if condition():
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    pytest.fail(f"{what} within {STARTUP} s:\n{log.read_text(errors='replace')[-3000:]}")


def _documented_scrape_config(target: str, token_file: Path) -> dict[str, Any]:
    """The scrape of docs/operations.md's marked block, its target and token file replaced (and
    plain http: the test's server has no TLS)."""
    text = DOCS.read_text(encoding="utf-8")
    marked = text[text.index("<!-- scrape-config:") :]
    start = marked.index("```yaml\n") + len("```yaml\n")
    block = marked[start : marked.index("\n```", start)]
    scrape = yaml.safe_load(block)["scrape_configs"][0]
    assert scrape["authorization"]["type"] == "Bearer"
    scrape["scheme"] = "http"
    scrape["authorization"]["credentials_file"] = str(token_file)
    scrape["static_configs"] = [{"targets": [target]}]
    return dict(scrape)


def test_prometheus_scrapes_ledgerport_and_the_dashboards_key_queries_answer(
    tmp_path: Path,
) -> None:
    """Production's main listener, scraped as docs/operations.md says, with the metrics token."""
    binary = prometheus_command("prometheus")
    (tmp_path / "server").mkdir()
    token_file = tmp_path / "metrics-token"
    token_file.write_text(METRICS_TOKEN + "\n")
    env = {
        "LEDGERPORT_DATABASE_URL": f"sqlite:///{tmp_path}/server/served.db",
        "LEDGERPORT_ENV": "production",
        "LEDGERPORT_METRICS_TOKEN": METRICS_TOKEN,
    }
    with served(tmp_path / "server", ADMIN_TOKEN, env) as server:
        target = server.base.removeprefix("http://")
        with httpx.Client(base_url=server.base, timeout=10, trust_env=False) as anonymous:
            assert anonymous.get("/metrics").status_code == 401
        config = tmp_path / "prometheus.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(OPS / "prometheus" / "ledgerport.rules.yml")],
                    "scrape_configs": [_documented_scrape_config(target, token_file)],
                }
            )
        )
        port = free_port()
        log = tmp_path / "prometheus.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            with (
                httpx.Client(base_url=server.base, timeout=10, trust_env=False) as ledgerport,
                httpx.Client(
                    base_url=f"http://127.0.0.1:{port}", timeout=10, trust_env=False
                ) as api,
            ):
                admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
                for index in range(20):
                    ledgerport.get("/healthz")
                    ledgerport.post("/admin/businesses", json={"name": f"B{index}"}, headers=admin)
                scraped = f'count_over_time(up{{job="ledgerport"}}[1m]) >= {SCRAPES}'
                _wait(lambda: bool(_query(api, scraped)), "three scrapes", process, log)
                rules = api.get("/api/v1/rules").json()["data"]["groups"]
                dashboard = json.loads((OPS / "grafana" / "ledgerport.json").read_text())
                panels = {panel["title"]: panel for panel in dashboard["panels"]}
                answers = {}
                for title in KEY_PANELS:
                    for target in panels[title]["targets"]:
                        expr = target["expr"].replace("$job", "ledgerport")
                        expr = expr.replace("$__rate_interval", "1m")
                        answers[(title, target["refId"])] = _query(api, expr)
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert {group["name"] for group in rules} == {"ledgerport-recording", "ledgerport-alerts"}
    assert all(rule["health"] == "ok" for group in rules for rule in group["rules"]), rules
    empty = [key for key, result in answers.items() if not result]
    assert empty == [], empty
