"""``ledgerport functions run`` and the data API: ``context.api`` calls are refused unless
``--api-token`` gives an access token of the app, and then reach the server named by
``--server`` as that token's calls; ``context.fetch`` is refused in a local run either way."""

from __future__ import annotations

import json
from pathlib import Path

from .served import provision, served, store_env
from .test_cli_e2e import ADMIN_TOKEN, Cli

CALLS_API = """export async function handler(event, context) {
  const page = await context.api.get("/customers");
  return { customers: page.data.map((c) => c.name) };
}
"""
FETCHES = """export async function handler(event, context) {
  return await context.fetch("https://example.com/");
}
"""


def test_context_api_needs_an_api_token_and_fetch_is_refused(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    calls, fetches = tmp_path / "calls.js", tmp_path / "fetches.js"
    calls.write_text(CALLS_API)
    fetches.write_text(FETCHES)
    with store_env("sqlite", tmp_path) as env, served(tmp_path, ADMIN_TOKEN, env) as server:
        made = provision(server.base, ADMIN_TOKEN, ["customers:read", "customers:write"])
        refused = cli.run("functions", "run", str(calls), "--json")
        allowed = cli.run(
            "functions", "run", str(calls), "--json",
            "--api-token", made.access_token, "--server", server.base,
        )  # fmt: skip
        bad_token = cli.run(
            "functions", "run", str(calls), "--json",
            "--api-token", "lp_at_not-a-token", "--server", server.base,
        )  # fmt: skip
        no_server = cli.run("functions", "run", str(calls), "--api-token", made.access_token)
        fetched = cli.run(
            "functions", "run", str(fetches), "--json",
            "--api-token", made.access_token, "--server", server.base,
        )  # fmt: skip

    assert refused.returncode == 1
    outcome = json.loads(refused.stdout)
    assert outcome["ok"] is False
    assert "context.api is refused in a local run" in outcome["error"]
    assert "--api-token" in outcome["error"]
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert json.loads(allowed.stdout)["result"] == {"customers": []}
    assert bad_token.returncode == 1
    assert "401" in json.loads(bad_token.stdout)["error"]
    assert no_server.returncode == 2
    assert "--server" in no_server.stderr
    assert fetched.returncode == 1
    assert "context.fetch" in json.loads(fetched.stdout)["error"]
