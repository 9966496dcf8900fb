"""Who may read ``/metrics``: they tell an outsider the service's traffic, its apps' failing
webhooks and its version. In production the main listener answers them only to a scrape that
presents ``LEDGERPORT_METRICS_TOKEN`` as its bearer token; without that variable they are
answered on the management listener only (404 on the main one). Development is unchanged,
unless a token is set: then every scrape presents it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import trio

from ledgerport.config import ConfigError, load
from ledgerport.http import create_app
from ledgerport.platform import Platform
from ledgerport.server import MANAGEMENT

TIMEOUT = 30
TOKEN = "metrics-token-0123456789abcdef"
MANAGEMENT_BIND = ("127.0.0.1", 9090)

# (environment, management listener set, token set, listener, credentials, status)
TABLE = [
    # Production, neither: nowhere to read them from the network (set one of the two).
    ("production", False, False, "main", None, 404),
    ("production", False, False, "main", TOKEN, 404),
    # Production with a token: only a scrape that presents it.
    ("production", False, True, "main", None, 401),
    ("production", False, True, "main", "wrong-token-0123456789", 401),
    ("production", False, True, "main", TOKEN[:-1], 401),
    ("production", False, True, "main", TOKEN + "x", 401),
    ("production", False, True, "main", "bäd-tøken-0123456789", 401),
    ("production", False, True, "main", TOKEN, 200),
    # Production with a management listener: there only, and with the token when one is set.
    ("production", True, False, "main", None, 404),
    ("production", True, False, "management", None, 200),
    ("production", True, True, "main", TOKEN, 404),
    ("production", True, True, "management", None, 401),
    ("production", True, True, "management", TOKEN, 200),
    # Development: as before, unless a token is set.
    ("development", False, False, "main", None, 200),
    ("development", True, False, "management", None, 200),
    ("development", False, True, "main", None, 401),
    ("development", False, True, "main", TOKEN, 200),
]


@pytest.mark.parametrize(("env", "management", "token", "listener", "credentials", "status"), TABLE)
async def test_who_may_read_the_metrics(
    platform: Platform,
    env: str,
    management: bool,
    token: bool,
    listener: str,
    credentials: str | None,
    status: int,
) -> None:
    config = replace(
        platform.config,
        env=env,
        management=MANAGEMENT_BIND if management else None,
        metrics_token=TOKEN if token else None,
    )
    client = create_app(replace(platform, config=config)).test_client()
    headers = {} if credentials is None else {"Authorization": f"Bearer {credentials}"}
    scope: dict[str, Any] = {MANAGEMENT: True} if listener == "management" else {}
    with trio.fail_after(TIMEOUT):
        response = await client.get("/metrics", headers=headers, scope_base=scope)
        body = await response.get_data(as_text=True)

    assert response.status_code == status, body
    if status == 200:
        assert "ledgerport_http_requests_total" in body
    elif status == 401:
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="ledgerport metrics"'
        assert '"code":"INVALID_METRICS_TOKEN"' in body.replace(" ", "")
        assert TOKEN not in body
    else:
        assert "ledgerport_" not in body


@pytest.mark.parametrize("value", ["short", "has space in it 0123", "ünïcode-token-0123456789"])
def test_a_metrics_token_that_cannot_be_a_bearer_token_is_refused(value: str) -> None:
    with pytest.raises(ConfigError, match="LEDGERPORT_METRICS_TOKEN"):
        load({"LEDGERPORT_METRICS_TOKEN": value})
