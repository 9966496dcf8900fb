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

from ledgerport import apps, queues
from ledgerport.platform import Platform
from ledgerport.storage import Store

from .data_api import owner_api
from .oauth_helpers import login
from .webhook_world import console_for, hooked

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


def _text(fragment: str) -> str:
    """What a fragment of a page reads as: its text, tags left out, spaces made one."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


# --- The list: health first -----------------------------------------------------------------


async def test_the_list_shows_each_function_in_one_row_health_first(
    client: Any, admin_headers: dict[str, str], store: Store, platform: Platform
) -> None:
    now = platform.now()
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": HANDLER, "events": ["customer.created"]}
            busy = await hook.console.ok(
                "PUT", "/functions/on-invoice", {**body, "schedule": "*/15 * * * *"}
            )
            await hook.console.ok(
                "PUT", "/functions/on-invoice", {**body, "schedule": "*/15 * * * *"}
            )
            await hook.console.ok("POST", "/functions/on-invoice/versions/1/activate")
            await hook.console.ok("PUT", "/functions/quiet", body)
            async with store.transaction() as tx:
                await tx.execute(
                    "INSERT INTO function_health (function_id, last_run_id, last_run_at,"
                    " last_run_status, last_error, last_error_at, last_error_run_id)"
                    " VALUES ($1, 'run_last', $2, 'failed', $3, $2, 'run_last')",
                    busy["id"],
                    now - 120,
                    "TypeError: <b>boom</b>",
                )
                await tx.execute(
                    "INSERT INTO function_health_hours (function_id, hour, succeeded, failed)"
                    " VALUES ($1, $2, 5, 2), ($1, $3, 40, 40)",
                    busy["id"],
                    apps.hour_of(now),
                    apps.hour_of(now) - 30,  # out of the last 24 hours
                )
            await login(client, world)
            base = f"/console/apps/{world.app_id}/functions"
            page = await _page(client, base)
    busy_row, quiet_row = _row(page, "fn-on-invoice"), _row(page, "fn-quiet")
    # One row each (made at the same frozen moment: in the order of their ids).
    assert sorted(re.findall(r'<tr id="fn-([a-z-]+)"', page)) == ["on-invoice", "quiet"]
    assert f'<a href="{base}/on-invoice">on-invoice</a>' in busy_row
    assert "Version 1" in _text(busy_row)
    assert "rolled back from version 2" in _text(busy_row)
    assert "Next tick in" in _text(busy_row)
    assert "7 runs 2 failed" in _text(busy_row)
    assert f'href="{base}/on-invoice/runs/run_last"' in busy_row
    assert "badge-failed" in busy_row
    assert "TypeError: &lt;b&gt;boom&lt;/b&gt;" in busy_row
    assert "<b>boom" not in page
    assert "none" in _text(quiet_row)
    assert "No run yet" in _text(quiet_row)
    assert "Next tick" not in quiet_row
    assert "<caption>" in page
    assert '<th scope="row"' in busy_row


async def test_the_list_of_twenty_functions_stays_one_short_row_each(
    client: Any, admin_headers: dict[str, str], store: Store, platform: Platform
) -> None:
    """Whatever their errors: a row keeps an error's first 300 characters (the health keeps
    no more), so twenty functions make a page of tens of kilobytes."""
    now = platform.now()
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            for n in range(20):
                made = await hook.console.ok(
                    "PUT", f"/functions/f{n:02d}", {"source": HANDLER, "events": []}
                )
                async with store.transaction() as tx:
                    await tx.execute(
                        "INSERT INTO function_health (function_id, last_run_id, last_run_at,"
                        " last_run_status, last_error, last_error_at, last_error_run_id)"
                        " VALUES ($1, $2, $3, 'failed', $4, $3, $2)",
                        made["id"],
                        f"run_{n:02d}",
                        now - n,
                        "<" * 300 + "\u2026",
                    )
            await login(client, world)
            page = await _page(client, f"/console/apps/{world.app_id}/functions")
    assert len(re.findall(r'<tr id="fn-f\d\d"', page)) == 20
    assert len(page.encode()) <= 64 * 1024


# --- A function's page: every action, a short table of runs --------------------------------


async def test_the_functions_page_has_every_action_and_its_runs_with_their_error(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": HANDLER, "events": ["customer.created"]}
            function = await hook.console.ok("PUT", "/functions/f", body)
            await hook.console.ok(
                "PUT", "/functions/f", {**body, "source": "export const handler = () => 2;\n"}
            )
            for n in range(30):
                await _run_row(
                    store,
                    function["id"],
                    world.app_id,
                    f"run_{n:02d}",
                    "failed" if n % 2 else "succeeded",
                    created_at=float(n + 1),
                    error="Error: <odd>" if n % 2 else None,
                )
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/f"
            page = await _page(client, path)
            tested = await client.post(f"{path}/test", form={"csrf_token": _csrf(page)})
    actions = re.search(r'<ul class="fn-actions"[^>]*>(.*?)</ul>', page, re.S)
    assert actions is not None
    assert f'href="{path}/edit"' in actions[1]
    assert f'action="{path}/test"' in actions[1]
    assert f'href="{path}/edit#schedule"' in actions[1]
    assert f'href="/console/apps/{world.app_id}/secrets"' in actions[1]
    assert f'href="{path}/delete"' in actions[1]
    assert re.findall(r'<tr id="(run_\d+)">', page) == [f"run_{n:02d}" for n in range(29, 4, -1)]
    assert "Error: &lt;odd&gt;" in _row(page, "run_29")
    assert f'href="{path}/versions/1/activate"' in _row(page, "version-1")
    assert tested.status_code == 303
    assert tested.headers["Location"] == path


# --- Rollback, confirmed with the diff -------------------------------------------------------

OLD = "export function handler(event) {\n  const total = 1;\n  return total;\n}\n"
NEW = "export function handler(event) {\n  const total = 2;\n  log('<i>');\n  return total;\n}\n"


async def test_a_rollback_shows_the_diff_and_its_counts_before_it_asks(
    client: Any, admin_headers: dict[str, str]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            await hook.console.ok("PUT", "/functions/f", {"source": OLD, "events": []})
            await hook.console.ok("PUT", "/functions/f", {"source": NEW, "events": []})
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/f"
            confirming = await _page(client, f"{path}/versions/1/activate")
            missing = await client.get(f"{path}/versions/9/activate")
            not_a_version = await client.get(f"{path}/versions/x/activate")
            unconfirmed = await client.post(
                f"{path}/versions/1/activate", form={"csrf_token": _csrf(confirming)}
            )
            still = await _page(client, path)
            forged = await client.post(
                f"{path}/versions/1/activate", form={"csrf_token": "x", "confirm": "yes"}
            )
            confirmed = await client.post(
                f"{path}/versions/1/activate",
                form={"csrf_token": _csrf(confirming), "confirm": "yes"},
            )
            after = await hook.console.ok("GET", "/functions/f")
            forward = await _page(client, f"{path}/versions/2/activate")
    assert "<h1>Roll back f to version 1?</h1>" in confirming
    assert "Version 2 runs now. Version 1 differs from it by 1 line added and 2 lines removed" in (
        _text(confirming)
    )
    diff = re.search(r'<pre class="source fn-diff"[^>]*><code>(.*?)</code></pre>', confirming, re.S)
    assert diff is not None
    lines = [
        _text(line)
        for line in re.findall(
            r'<span class="fn-line[^"]*">(.*?)</span>(?=<span class="fn-line|$)', diff[1]
        )
    ]
    assert lines[0] == "@@ -1,6 +1,5 @@"
    assert "2 - const total = 2;" in lines
    assert "3 - log('<i>');" in lines
    assert "2 + const total = 1;" in lines
    assert "&lt;i&gt;" in diff[1]
    assert '<input type="hidden" name="confirm" value="yes">' in confirming
    assert missing.status_code == 404
    assert not_a_version.status_code == 404
    assert unconfirmed.status_code == 303
    assert unconfirmed.headers["Location"] == f"{path}/versions/1/activate"
    assert "Version 2 active" in still
    assert forged.status_code == 303
    assert forged.headers["Location"] == f"{path}/versions/1/activate"
    assert confirmed.status_code == 303
    assert confirmed.headers["Location"] == path
    assert (after["version"], after["latestVersion"]) == (1, 2)
    assert "<h1>Activate version 2 of f?</h1>" in forward


async def test_a_rollback_across_a_long_source_shows_the_start_of_its_diff_and_counts_it_all(
    client: Any, admin_headers: dict[str, str]
) -> None:
    """A diff of thousands of lines is shown in part, within the page's bounds, and its lines
    added and removed are counted whole."""
    old = "".join(f"const a{n} = {n};\n" for n in range(3000)) + "export const handler = () => 1;\n"
    new = "".join(f"const b{n} = {n};\n" for n in range(3000)) + "export const handler = () => 1;\n"
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            for source in (old, new):
                await hook.console.ok("PUT", "/functions/f", {"source": source, "events": []})
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/f"
            confirming = await _page(client, f"{path}/versions/1/activate")
    assert "by 3000 lines added and 3000 lines removed" in _text(confirming)
    assert "Only the start of the diff is shown" in confirming
    assert "too long to compare line by line" in confirming
    assert confirming.count('<span class="fn-line fn-') <= apps.DIFF_LINES_SHOWN + 1
    assert len(confirming.encode()) <= 256 * 1024


# --- A run's page: a timeline, replays marked both ways -------------------------------------


async def test_a_runs_page_is_a_timeline_with_fetches_and_replays_marked_both_ways(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    logs = [
        "checking <Globex>",
        "[ledgerport] fetch GET api.stripe.com: 200 (12 ms)",
        "[ledgerport] fetch POST evil.example: host not allowed (0 ms)",
        "first of two\nsecond of two",
        "x" * 500,
    ]
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            function = await hook.console.ok(
                "PUT", "/functions/f", {"source": HANDLER, "events": []}
            )
            await _run_row(
                store,
                function["id"],
                world.app_id,
                "run_first",
                "failed",
                started_at=1000.0,
                logs=json.dumps(logs),
                log_times=json.dumps([1, 15, 16, 20, 21]),
                error="Error: no room",
            )
            for n, status in enumerate(("succeeded", "failed")):
                await _run_row(
                    store,
                    function["id"],
                    world.app_id,
                    f"run_again{n}",
                    status,
                    created_at=5.0 + n,
                    replay_of="run_first",
                )
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/f/runs"
            first = await _page(client, f"{path}/run_first")
            again = await _page(client, f"{path}/run_again0")
    timeline = re.search(r'<ol class="fn-timeline"[^>]*>(.*?)</ol>\s*</section>', first, re.S)
    assert timeline is not None
    items = re.findall(r"<li[^>]*>(.*?)</li>\n", timeline[1], re.S)
    assert _text(items[0]).endswith("queued on customer.created evt_" + "1" * 24)
    assert _text(items[1]) == "+0 ms started the handler was called, version 1"
    assert _text(items[2]) == "+1 ms checking <Globex>"
    assert "&lt;Globex&gt;" in items[2]
    assert "<details>" in items[3]
    assert _text(re.search(r"<summary>(.*?)</summary>", items[3], re.S)[1]) == (  # type: ignore[index]
        "fetch GET api.stripe.com: 200"
    )
    assert "<dt>Host</dt><dd>api.stripe.com</dd>" in items[3]
    assert "<dt>Took</dt><dd>12 ms</dd>" in items[3]
    assert "fetch failed" in items[4]
    assert "<dt>Outcome</dt><dd>host not allowed</dd>" in items[4]
    assert "<details>" in items[5]
    assert "first of two\nsecond of two</pre>" in items[5]
    assert "x" * 160 + "\u2026" in items[6]
    assert "x" * 500 in items[6]
    assert 'class="fn-end-failed"' in timeline[1]
    assert "Error: no room" in _text(timeline[1])
    # Replayed twice: the run says so, newest first, and each replay names the run it replays.
    replayed = re.search(r'<p class="fn-replayed"[^>]*>(.*?)</p>', first, re.S)
    assert replayed is not None
    assert html.unescape(re.sub(r"<[^>]+>", "", replayed[1])).startswith(
        "Replayed 2 times: the newest, run_again1, failed"
    )
    assert re.findall(rf'href="{path}/(run_again\d)"', first)[-2:] == ["run_again1", "run_again0"]
    replay_of = re.search(r'<p class="fn-replay-of"[^>]*>(.*?)</p>', again, re.S)
    assert replay_of is not None
    assert f'href="{path}/run_first"' in replay_of[1]
    assert "fn-replayed" not in again


async def test_a_runs_replays_are_read_newest_first_and_counted_past_those_shown(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            made = await hook.console.ok("PUT", "/functions/f", {"source": HANDLER, "events": []})
            other = await hook.console.ok("PUT", "/functions/g", {"source": HANDLER, "events": []})
            await _run_row(store, made["id"], world.app_id, "run_first", "failed")
            for n in range(3):
                await _run_row(
                    store,
                    made["id"],
                    world.app_id,
                    f"run_r{n}",
                    "queued",
                    created_at=2.0 + n,
                    replay_of="run_first",
                )
            # Another function's run naming the same id is not one of its replays.
            await _run_row(
                store, other["id"], world.app_id, "run_elsewhere", "queued", replay_of="run_first"
            )
            async with store.transaction() as tx:
                function = await apps.get_function(tx, world.app_id, "f")
                two = await queues.replays_of(tx, function, "run_first", shown=2)
                every = await queues.replays_of(tx, function, "run_first")
                none = await queues.replays_of(tx, function, "run_r0")
    assert [replay.id for replay in two.shown] == ["run_r2", "run_r1"]
    assert two.total == 3
    assert [(r.id, r.status, r.created_at) for r in every.shown] == [
        ("run_r2", "queued", 4.0),
        ("run_r1", "queued", 3.0),
        ("run_r0", "queued", 2.0),
    ]
    assert none == queues.Replays((), 0)


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
