"""The Grafana dashboard and the Prometheus rules in ``ops/``: every metric they name is one the
service serves, and the rules pass promtool's checks and their unit tests.

promtool comes with Debian's ``prometheus`` package (``.ci/run`` installs it). Without it the
promtool tests skip with the reason, and fail when LEDGERPORT_REQUIRE_PROMETHEUS is set.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from ..prometheus import prometheus_command

OPS = Path(__file__).resolve().parents[2] / "ops"
DASHBOARD = OPS / "grafana" / "ledgerport.json"
RULES = OPS / "prometheus" / "ledgerport.rules.yml"
RULE_TESTS = OPS / "prometheus" / "ledgerport.rules.test.yml"
METRIC = re.compile(r"\b((?:ledgerport|process|python)_[a-z0-9_]+)")
SUFFIXES = ("_total", "_bucket", "_sum", "_count", "_created")
# Recorded series are named level:metric:operations; their metric part is not a served metric.
RECORDED = re.compile(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b")


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", ())
    ]
    for variable in dashboard["templating"]["list"]:
        if isinstance(variable.get("query"), dict):
            queries.append(variable["query"]["query"])
    return queries


def rule_expressions() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [str(rule["expr"]) for group in groups for rule in group["rules"]]


def _family(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def named_metrics(queries: list[str]) -> set[str]:
    return {_family(name) for query in queries for name in METRIC.findall(RECORDED.sub(" ", query))}


async def test_every_metric_the_dashboard_and_the_rules_name_is_served(client: Any) -> None:
    text = await (await client.get("/metrics")).get_data(as_text=True)
    served = {family.name for family in text_string_to_metric_families(text)}

    dashboard, rules = named_metrics(dashboard_queries()), named_metrics(rule_expressions())

    assert len(dashboard) >= 30
    assert dashboard - served == set()
    assert rules - served == set()


def test_the_dashboard_has_a_row_for_each_part_and_panels_in_place() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    rows = [panel["title"] for panel in dashboard["panels"] if panel["type"] == "row"]
    assert rows == [
        "HTTP",
        "OAuth",
        "Event log",
        "Webhook deliveries",
        "Hosted functions",
        "Store",
        "Process and nodes",
    ]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        place = panel["gridPos"]
        assert place["x"] + place["w"] <= 24, panel["title"]
        for target in panel.get("targets", ()):
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]


@pytest.mark.parametrize(
    "args",
    [("check", "rules", RULES.name), ("test", "rules", RULE_TESTS.name)],
    ids=["check", "unit-tests"],
)
def test_promtool_passes_the_rules(args: tuple[str, ...]) -> None:
    result = subprocess.run(
        [prometheus_command("promtool"), *args],
        cwd=RULES.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    """Where systemd-analyze exists; the unit's commands point at this checkout's install."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is missing (systemd is not installed here)")
    installed = Path(sys.executable).parent / "ledgerport"
    unit = (OPS / "systemd" / "ledgerport.service").read_text()
    assert "/opt/ledgerport/.venv/bin/ledgerport serve" in unit
    (tmp_path / "ledgerport.service").write_text(
        unit.replace("/opt/ledgerport/.venv/bin/ledgerport", str(installed))
    )

    result = subprocess.run(
        [analyze, "verify", "ledgerport.service"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == ""  # not even a warning
