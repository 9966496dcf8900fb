"""A stack bomb: a function whose source is one line of about 256 KiB throws from a recursion
240 deep into that line. What is kept of its stack is bounded (frames, line length, total), and
so is every page and answer that shows it: the run's page, the function's, the version's and
the console API's answer for the run, whatever the guest threw; a source of 256 K lines is
shown a page of lines at a time, a run keeps a thousand log lines, however many it wrote, and a
delivery's page shows its hundred newest attempts, however often it was sent; the pages listing
runs show the start of what each wrote."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import trio

from ledgerport import apps, queues, runtime
from ledgerport.http.pages import EXCERPT_FRAMES, EXCERPT_LINE_CHARS, SOURCE_PAGE_LINES
from ledgerport.http.pages.console.deliveries import ATTEMPTS_SHOWN
from ledgerport.http.pages.console.functions import LISTED_EXCERPT_CHARS
from ledgerport.http.pages.console.runs import RUNS_SHOWN
from ledgerport.platform import Platform
from ledgerport.storage import Store

from ..e2e.stack_bomb import bomb_source
from .oauth_helpers import login
from .test_console_debug_pages import _page, _run_row
from .test_function_debugging import run_all, world_of
from .webhook_world import hooked

TIMEOUT = 120
PAGE_MOST = 64 * 1024
"""Bytes a run page may weigh whatever the guest threw (the bomb made one of 114 MB)."""
ANSWER_MOST = 32 * 1024
"""Bytes the console API's answer for such a run may weigh."""
LOG_PAGE_MOST = 512 * 1024
"""Bytes a run page of a thousand log lines (the most a run keeps) may weigh."""


def _frames(stack: str) -> list[str]:
    return [line.strip() for line in stack.split("\n") if line.lstrip().startswith("at ")]


async def test_a_stack_bomb_is_kept_bounded_and_its_pages_stay_small(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    source = bomb_source()
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            body = {"source": source, "events": ["customer.created"]}
            await world.console.ok("PUT", "/functions/bomb", body)
            test = await world.console.ok("POST", "/functions/bomb/test", status=202)
            await run_all(platform, world)
            answer = await world.console.call("GET", f"/functions/bomb/runs/{test['runId']}")
            body_text = await answer.get_data(as_text=True)
            run = json.loads(body_text)
            await login(client, world.api.world)
            path = f"/console/apps/{world.api.world.app_id}/functions/bomb"
            page = await _page(client, f"{path}/runs/{test['runId']}")
            function_page = await _page(client, path)
            version_page = await _page(client, f"{path}/versions/1")
    assert len(source) > 250 * 1024
    assert run["status"] == "failed"
    assert run["error"] == f"Error: deep: {250 * 1024}"
    stack = run["stack"]
    # What is kept: frames, line length and total bounded; the innermost frames first.
    assert len(stack) <= runtime.STACK_MAX
    assert len(_frames(stack)) <= runtime.STACK_FRAMES_MAX
    assert max(len(line) for line in stack.split("\n")) <= runtime.STACK_LINE_MAX
    assert re.search(r"\n    \.\.\. \d+ frames left out\n", stack)
    assert _frames(stack)[0].startswith(f"at down ({apps.SCRIPT_NAME}:1:")
    # What is shown: small pages, the marked line cut to its width around the column.
    assert len(body_text.encode()) <= ANSWER_MOST
    assert len(page.encode()) <= PAGE_MOST
    assert 1 <= page.count("<figure") <= EXCERPT_FRAMES
    marks = [html.unescape(mark) for mark in re.findall(r"<mark>(.*?)</mark>", page)]
    assert marks
    assert all(len(mark) <= EXCERPT_LINE_CHARS + 2 for mark in marks)
    assert any("throw new Error" in mark for mark in marks)
    assert len(function_page.encode()) <= PAGE_MOST
    # The version's page shows the source, as uploaded, once.
    assert len(version_page.encode()) <= len(source) + PAGE_MOST


async def test_a_run_of_sixty_thousand_empty_log_lines_keeps_a_thousand(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    # Within the 64 KiB of log lines (a byte each): 60,000 rows made a run page of 13 MB.
    source = (
        "export function handler(e, context) { for (let i = 0; i < 60000; i++) context.log(''); }"
    )
    most = runtime.LOG_LINES_MAX
    with trio.fail_after(TIMEOUT):
        async with world_of(client, admin_headers, app, platform) as world:
            body = {"source": source, "events": ["customer.created"]}
            await world.console.ok("PUT", "/functions/lines", body)
            test = await world.console.ok("POST", "/functions/lines/test", status=202)
            await run_all(platform, world)
            answer = await world.console.call("GET", f"/functions/lines/runs/{test['runId']}")
            body_text = await answer.get_data(as_text=True)
            await login(client, world.api.world)
            path = f"/console/apps/{world.api.world.app_id}/functions/lines/runs/{test['runId']}"
            page = await _page(client, path)
    run = json.loads(body_text)
    assert run["status"] == "succeeded"
    messages = [line["message"] for line in run["logs"]]
    assert messages == [""] * (most - 1) + [
        f"[ledgerport] {60_000 - most + 1} more log lines not kept: a run keeps {most} at most"
    ]
    assert all(line["at"] is not None for line in run["logs"])
    assert len(body_text.encode()) <= 64 * 1024
    # A line each on the run's timeline, and the one saying when it was queued.
    assert page.count('<li><span class="fn-at"><time') == most + 1
    assert len(page.encode()) <= LOG_PAGE_MOST


async def test_a_recorded_stack_into_a_long_line_shows_bounded_excerpts(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    line = "x" * (256 * 1024 - 64)
    stack = "Error: deep\n" + "\n".join(
        f"    at f{n} ({apps.SCRIPT_NAME}:1:{1000 * n + 7})" for n in range(240)
    )
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
            function = await hook.console.ok("PUT", "/functions/f", body)
            async with store.transaction() as tx:
                # The version's source as a bundle is: one line, here with no newline at all.
                await tx.execute(
                    "UPDATE function_versions SET source = $1 WHERE function_id = $2",
                    line + "\nexport const handler = () => 1",
                    function["id"],
                )
            await _run_row(
                store,
                function["id"],
                world.app_id,
                "run_bomb",
                "failed",
                error="Error: deep",
                error_stack=stack,
            )
            await login(client, world)
            page = await _page(client, f"/console/apps/{world.app_id}/functions/f/runs/run_bomb")
    assert len(page.encode()) <= PAGE_MOST
    # Every frame is listed, each linking to its line; the first ten have their excerpt.
    assert page.count('class="frame-link"') == 240
    assert page.count("<figure") == EXCERPT_FRAMES
    marks = [html.unescape(mark) for mark in re.findall(r"<mark>(.*?)</mark>", page)]
    assert len(marks) == EXCERPT_FRAMES
    # The 160 characters around the column, an ellipsis on each side where the line goes on.
    assert marks[0] == "x" * EXCERPT_LINE_CHARS + "\u2026"
    assert marks[1] == "\u2026" + "x" * EXCERPT_LINE_CHARS + "\u2026"
    carets = re.findall(r'<span class="source-line caret" [^>]*><span [^>]*></span>( *)\^', page)
    # Column 7 is the seventh character: the window starts at the line's start.
    assert len(carets[0]) == 6
    # Column 1007 is the 1007th: the window starts 80 before it, after the ellipsis.
    assert len(carets[1]) == 1 + EXCERPT_LINE_CHARS // 2


async def test_a_source_of_many_lines_is_shown_a_page_of_lines_at_a_time(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    # 256 KiB of line breaks: a page of every line weighed 27 MB.
    source = "export const handler = () => 1;" + "\n" * (256 * 1024 - 40)
    total = source.count("\n") + 1
    lines = SOURCE_PAGE_LINES
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": source, "events": ["customer.created"]}
            function = await hook.console.ok("PUT", "/functions/f", body)
            await _run_row(
                store,
                function["id"],
                world.app_id,
                "run_far",
                "failed",
                error="Error: far",
                error_stack=f"Error: far\n    at handler ({apps.SCRIPT_NAME}:{lines + 7}:1)",
            )
            await login(client, world)
            path = f"/console/apps/{world.app_id}/functions/f"
            first = await _page(client, f"{path}/versions/1")
            second = await _page(client, f"{path}/versions/1?from={lines + 1}")
            last = await _page(client, f"{path}/versions/1?from={total}")
            past = await _page(client, f"{path}/versions/1?from={total + 1}", 400)
            run = await _page(client, f"{path}/runs/run_far")
    for page in (first, second, last):
        assert len(page.encode()) <= 2 * 1024 * 1024
    assert re.findall(r'id="L(\d+)"', first) == [str(n) for n in range(1, lines + 1)]
    assert re.findall(r'id="L(\d+)"', second) == [str(n) for n in range(lines + 1, 2 * lines + 1)]
    assert re.findall(r'id="L(\d+)"', last) == [str(total)]
    assert f"Lines 1 to {lines} of {total}." in first
    assert f'<a href="{path}/versions/1?from={lines + 1}">Lines after {lines}</a>' in first
    assert "Lines before" not in first
    assert f'<a href="{path}/versions/1">Lines before {lines + 1}</a>' in second
    assert "Lines after" not in last
    assert f"from must be a line of the source: from 1 to {total}" in html.unescape(past)
    # A frame past the first page links to the page that shows its line.
    assert f'href="{path}/versions/1?from={lines + 1}#L{lines + 7}"' in run


async def test_a_stack_is_stored_within_its_bounds_whoever_records_it(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    stack = "Error: deep\n" + "\n".join(
        f"    at {'f' * 1000} ({apps.SCRIPT_NAME}:1:{n})" for n in range(1, 241)
    )
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
            made = await hook.console.ok("PUT", "/functions/f", body)
            await _run_row(store, made["id"], world.app_id, "run_1", "queued", lease="lease_1")
            async with store.transaction() as tx:
                await queues.record_runs(
                    tx,
                    [
                        queues.RunEnded(
                            run_id="run_1",
                            lease="lease_1",
                            status="failed",
                            attempts=1,
                            version=1,
                            duration_ms=1.0,
                            logs=[],
                            error="Error: deep",
                            result=None,
                            finished_at=2.0,
                            next_attempt_at=None,
                            stack=stack,
                        )
                    ],
                )
            async with store.transaction() as tx:
                function = await apps.get_function(tx, world.app_id, "f")
                kept = (await queues.get_run(tx, function, "run_1")).stack
    assert kept is not None
    assert kept == runtime.bounded_stack(stack)
    assert len(kept) <= runtime.STACK_MAX


async def test_a_delivery_sent_again_and_again_shows_its_newest_attempts(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    made = 150
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            async with store.transaction() as tx:
                webhook = await apps.get_webhook(tx, world.app_id, hook.webhook["id"])
                delivery_id = await queues.create_test_delivery(
                    tx, now=1.0, webhook=webhook, pinned_version=None
                )
                await tx.executemany(
                    "INSERT INTO webhook_attempts (delivery_id, attempt, started_at,"
                    " duration_ms, response_code, response_body, response_truncated,"
                    " request_headers, app_id) VALUES ($1, $2, $3, 1, 200, $4, false, '{}', $5)",
                    [
                        (delivery_id, n, float(n), b"b" * 4096, world.app_id)
                        for n in range(1, made + 1)
                    ],
                )
            detail = await hook.console.ok(
                "GET", f"/webhooks/{hook.webhook['id']}/deliveries/{delivery_id}"
            )
            await login(client, world)
            page = await _page(
                client,
                f"/console/apps/{world.app_id}/webhooks/{hook.webhook['id']}"
                f"/deliveries/{delivery_id}",
            )
    shown = [int(n) for n in re.findall(r'<li class="attempt[^"]*" id="attempt-(\d+)">', page)]
    assert shown == list(range(made - ATTEMPTS_SHOWN + 1, made + 1))
    assert f"The {ATTEMPTS_SHOWN} newest of the {made} attempts made" in page
    assert f"; {made} in all</dd>" in page
    assert len(page.encode()) <= ATTEMPTS_SHOWN * 6 * 1024
    assert [a["attempt"] for a in detail["attemptLog"]] == list(range(1, made + 1))


async def test_the_pages_listing_runs_show_the_start_of_what_each_wrote(
    client: Any, admin_headers: dict[str, str], store: Store
) -> None:
    with trio.fail_after(TIMEOUT):
        async with hooked(client, admin_headers, []) as hook:
            world = hook.api.world
            for name in ("f", "g"):
                body = {"source": "export const handler = () => 1", "events": ["customer.created"]}
                function = await hook.console.ok("PUT", f"/functions/{name}", body)
                for n in range(100):
                    await _run_row(
                        store,
                        function["id"],
                        world.app_id,
                        f"run_{name}{n}",
                        "failed",
                        created_at=float(n),
                        logs=json.dumps(["<" * 4000]),
                        error="<" * 4096,
                        result=json.dumps("<" * 4000),
                    )
            listed = (await hook.console.ok("GET", "/functions/f/runs"))["data"]
            await login(client, world)
            overview = await _page(client, f"/console/apps/{world.app_id}/functions")
            function_page = await _page(client, f"/console/apps/{world.app_id}/functions/f")
    # 100 runs of 4,096 characters of "<" each in logs, error and result: the pages list
    # their start (the run's page shows them whole), the console API its 4,096 characters.
    assert overview.count('<tr id="run_') == 0  # the list shows each function's health
    assert function_page.count('<tr id="run_') == RUNS_SHOWN
    assert len(overview.encode()) <= 512 * 1024
    assert len(function_page.encode()) <= 512 * 1024
    cut = "&lt;" * LISTED_EXCERPT_CHARS + "\u2026"
    assert function_page.count(cut) == RUNS_SHOWN
    assert [run["error"] for run in listed] == ["<" * 4096] * 100
