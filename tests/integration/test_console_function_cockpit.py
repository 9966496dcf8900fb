"""The console's functions as an app author's cockpit, on both stores: the list of functions with
their health first (state, runs and failures in the last 24 hours, last run, last error, next
tick), a function's page with every action and a short table of runs with their error, a run's
page as a timeline with its replays marked both ways, the rollback that shows the diff before it
asks, and a syntax error shown at the line and column the API names, in the parser's words."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
import trio

from ledgerport.storage import Store

from .data_api import owner_api
from .oauth_helpers import login
from .webhook_world import console_for

TIMEOUT = 60
HANDLER = "export const handler = () => 1;\n"


def _csrf(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, page
    return match[1]


async def _page(client: Any, path: str, status: int = 200) -> str:
    response = await client.get(path)
    text = await response.get_data(as_text=True)
    assert response.status_code == status, (path, text)
    return text


def _row(page: str, row_id: str) -> str:
    match = re.search(rf'<tr id="{re.escape(row_id)}"[^>]*>(.*?)</tr>', page, re.S)
    assert match is not None, (row_id, page)
    return match[1]


async def _run_row(
    store: Store,
    function_id: str,
    app_id: str,
    run_id: str,
    status: str,
    *,
    created_at: float = 1.0,
    version: int | None = 1,
    **columns: Any,
) -> None:
    """A run as the runner records one, written directly."""
    values = {
        "id": run_id,
        "function_id": function_id,
        "app_id": app_id,
        "event_id": "evt_" + "1" * 24,
        "business_id": None,
        "type": "customer.created",
        "body": json.dumps({"id": run_id, "type": "customer.created", "data": {"n": 1}}),
        "status": status,
        "attempts": 1,
        "version": version,
        "duration_ms": 2.5,
        "logs": json.dumps([]),
        "error": None,
        "result": None,
        "created_at": created_at,
        "updated_at": created_at,
        **columns,
    }
    names = ", ".join(values)
    marks = ", ".join(f"${n}" for n in range(1, len(values) + 1))
    async with store.transaction() as tx:
        await tx.execute(f"INSERT INTO function_runs ({names}) VALUES ({marks})", *values.values())


# --- A syntax error where the eye is ----------------------------------------------------------

NOT_ASCII = {
    # "é" is one UTF-16 code unit and two UTF-8 bytes.
    "accented letter": (
        "export const handler = () => {\n  const s = 'h\u00e9llo'; return s s;\n};\n"
    ),
    # "😀" is two UTF-16 code units, four UTF-8 bytes and one character.
    "emoji": "export const handler = () => {\n  const s = 'hi \U0001f600'; return s s;\n};\n",
}


@pytest.mark.parametrize("name", sorted(NOT_ASCII))
async def test_the_editor_shows_a_syntax_error_where_the_api_names_it(
    client: Any, admin_headers: dict[str, str], name: str
) -> None:
    source = NOT_ASCII[name]
    with trio.fail_after(TIMEOUT):
        api = await owner_api(client, admin_headers)
        console = await console_for(client, admin_headers, api)
        answer = await console.call("PUT", "/functions/totals", {"source": source, "events": []})
        refused = await answer.get_json()
        await login(client, api.world)
        form = await _page(client, f"/console/apps/{api.world.app_id}/functions/new")
        response = await client.post(
            f"/console/apps/{api.world.app_id}/functions/new",
            form={"csrf_token": _csrf(form), "name": "totals", "source": source},
        )
        page = await response.get_data(as_text=True)
    params = refused["params"]
    line, column, words = params["p0"], params["p1"], params["p2"]
    assert (line, words) == (2, "Unexpected identifier 's'")
    assert response.status_code == 400
    problem = re.search(r'<p class="notice notice-problem">(.*?)</p>', page, re.S)
    assert problem is not None, page
    assert html.unescape(problem[1]) == (
        f"<strong>Syntax error at line {line}, column {column}:</strong> {words}"
    )
    excerpt = re.search(r'<figure class="source-excerpt">.*?<pre[^>]*>(.*?)</pre>', page, re.S)
    assert excerpt is not None
    shown = html.unescape(re.sub(r"<[^>]+>", "", excerpt[1])).split("\n")
    marked, caret = shown[-2], shown[-1]
    assert marked == f"{line:4d} " + source.split("\n")[line - 1]
    # The caret stands under the second "s", the character V8's column names.
    assert marked[caret.index("^")] == "s"
    assert marked[caret.index("^") + 1 :] == ";"
