"""The developer console's pages with an app author's working data in them: each page's size,
its time to answer and its height once rendered, against the targets of the console's issue.

Usage::

    .venv/bin/python bench/console_pages.py [--backend sqlite|postgres|both] [--n N] [--check]

For each store a ``ledgerport serve`` process starts as for the other served benches
(tests/e2e/served.py: SQLite in a temporary directory, PostgreSQL in a scratch database dropped
afterwards; one function worker, every webhook retry at once), with a receiver on loopback, and
``bench/_console_seed.py`` sets an app up through the served API: 20 webhook endpoints with 100
deliveries each (some endpoints answer 500, one is a closed port: failures, retries, errors),
one delivery redelivered to 30 attempts, three functions with runs (one failed, with its stack)
and versions, one on a schedule, secrets and a listing draft; then waits until every delivery
and run has ended.

The app's owner signs in through the sign-in form in Debian's Chromium (``/usr/bin/chromium``,
driven by Playwright; nothing downloads a browser), and the console's pages are found from the
app's page by following its links (``<a href>``, within the app's pages and ``/console``,
fragments and query strings left out), one page fetched for each shape of URL (ids and names
replaced). For each shape one page is measured, the one with the most data where the shape has
several: the endpoint with the 30-attempt delivery, that delivery, the function with the most
runs and versions, the failed run. The webhook list, that endpoint and that delivery are
measured even when no link leads to them (marked so).

Measured for each page:

- ``KB``: thousands of bytes of the answer's body as received (the wire's; the HTML's own
  beside them when they differ, a compressed answer);
- ``p50``/``p95``: milliseconds from sending the request to the last byte of the answer, at the
  client on loopback over one warm keep-alive connection, ``--n`` requests a page after two
  rounds of warm-up, the pages (and ``/healthz``) taking turns in rounds so that whatever else
  the machine does falls on each alike; ``x healthz``: the p95 over ``/healthz``'s p95 measured
  in the same rounds;
- ``server``: the served process's own time for the same requests, from its
  ``ledgerport_http_request_duration_seconds`` histogram (by route template) read before and
  after the rounds: the mean, and the bucket the p95 falls in;
- ``1280 px``/``390 px``: the page's height in CSS pixels (the document's scroll height, so
  never less than the window's) rendered at 1280 px wide (a laptop's window, 900 px high) and at
  390 px wide (a phone's, 844 px high, mobile), as the browser tests size them; the page is
  loaded signed in with the same session, and is measured when it answers 200 at its own
  address (else ``-``).

The pages, the widths and /healthz are all measured in one served process, so the sizes and
heights are the same from run to run, while the times move with whatever else the machine
runs: read them against /healthz's.

Targets (issue: the console as an app author's cockpit), with this data: the webhook list
under 3,000 px tall at 1280 px wide and under 100 KB; the delivery page with 30 attempts under
2,500 px at 1280 px wide; every page's p95 under 20 ms. Each figure with a target is printed
beside it, met or missed; the exit code is 0 either way, or 1 with ``--check`` when a target is
missed. The tables are Markdown, as docs/performance.md keeps them.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import trio
from playwright.sync_api import Browser, ViewportSize, sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._console_seed import FUNCTIONS, SERVER_ENV, Policy, Seeded, seed
from bench._load import (
    client,
    load_average,
    nodes,
    percentile,
    say,
    sink,
    until_signalled,
)
from tests.e2e.served import store_env

CHROMIUM = Path("/usr/bin/chromium")
SIZES: dict[int, ViewportSize] = {
    1280: {"width": 1280, "height": 900},
    390: {"width": 390, "height": 844},
}
"""The widths measured and their viewports: tests/browser/conftest.py's laptop and phone."""
TIMEOUT = 900
PAGE_TIMEOUT_MS = 60_000
HTTP_TIMEOUT = 30.0
WARM_UP_ROUNDS = 2
MAX_CRAWL = 200
"""A bound on the pages fetched to find the console's pages (one a shape)."""
ROOT = Path(__file__).resolve().parent.parent
ID = re.compile(r"^[a-z]{2,6}_[0-9A-Za-z]{12,}$|^\d+$")
"""A path segment that is an id (``wh_…``, ``dlv_…``) or a number (a version)."""
PLACEHOLDERS = {
    "apps": "{app}",
    "webhooks": "{webhook}",
    "deliveries": "{delivery}",
    "functions": "{function}",
    "runs": "{run}",
    "versions": "{version}",
}
WEBHOOKS = "webhooks"
ENDPOINT = "webhooks/{webhook}"
DELIVERY = "webhooks/{webhook}/deliveries/{delivery}"
P95_TARGET_MS = 20.0
HEALTHZ = "/healthz"
METRIC = "ledgerport_http_request_duration_seconds"


@dataclass(frozen=True)
class Target:
    """A figure's bound: the page's ``what`` (``kb``, ``h1280``, ``p95``) under ``below``."""

    what: str
    below: float


TARGETS: dict[str, list[Target]] = {
    WEBHOOKS: [Target("h1280", 3000), Target("kb", 100)],
    DELIVERY: [Target("h1280", 2500)],
}
"""Targets by page, besides every page's p95 under P95_TARGET_MS."""


@dataclass
class Page:
    """A console page measured, and its figures."""

    label: str
    url: str
    linked: bool = True
    status: int = 0
    wire_bytes: int = 0
    html_bytes: int = 0
    times: list[float] = field(default_factory=list)
    """Seconds, at the client."""
    server_mean: float = math.nan
    server_p95_bucket: float = math.nan
    """The upper bound of the histogram's bucket the server's p95 falls in (seconds)."""
    heights: dict[int, int] = field(default_factory=dict)

    def figure(self, what: str) -> float:
        if what == "kb":
            return self.wire_bytes / 1000
        if what == "p95":
            return percentile(self.times, 0.95) * 1000
        return float(self.heights.get(int(what[1:]), math.nan))

    def targets(self) -> list[Target]:
        return [*TARGETS.get(self.label, []), Target("p95", P95_TARGET_MS)]

    def missed(self) -> list[Target]:
        return [t for t in self.targets() if not self.figure(t.what) < t.below]


# -- finding the pages ------------------------------------------------------------------------


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def links(html: str, at: str) -> list[str]:
    """The targets of the page's ``<a href>``, absolute paths, without fragment or query."""
    parser = _Links()
    parser.feed(html)
    return [urlsplit(urljoin(at, href)).path for href in parser.hrefs]


def shape(path: str, app_id: str) -> str:
    """The page's label: its path from the app's page on (``/console`` alone as it is), each id
    or name replaced by a placeholder named after the segment before it."""
    if path == "/console":
        return path
    segments = path.removeprefix(f"/console/apps/{app_id}").strip("/").split("/")
    named = []
    for index, segment in enumerate(segments):
        before = segments[index - 1] if index else ""
        is_value = ID.match(segment) or (before == "functions" and segment in FUNCTIONS)
        named.append(PLACEHOLDERS.get(before, "{id}") if is_value else segment)
    return "/".join(named) or "(app)"


def preference(seeded: Seeded) -> Callable[[str], int]:
    """Among the pages of one shape, the one with the most data first: the endpoint with the
    30-attempt delivery, that delivery, the failed run, the function with most runs."""
    webhook, delivery = seeded.target
    prefix = f"/console/apps/{seeded.tenant.app_id}"
    order = [
        f"{prefix}/webhooks/{webhook}/deliveries/{delivery}",
        f"{prefix}/webhooks/{webhook}",
        f"{prefix}/functions/no-room/runs/",
        f"{prefix}/functions/on-invoice",
    ]

    def rank(path: str) -> int:
        return next((i for i, start in enumerate(order) if path.startswith(start)), len(order))

    return rank


def find_pages(http: httpx.Client, seeded: Seeded) -> list[Page]:
    """The console's pages reachable by links from the app's page (images left out), one for
    each shape: the one :func:`preference` ranks first among those found when the shape's turn
    comes, fetched to follow its links. The webhook list, the endpoint with the 30-attempt
    delivery and that delivery are measured in any case (marked when no link led to them)."""
    app_id = seeded.tenant.app_id
    start = f"/console/apps/{app_id}"
    rank = preference(seeded)
    candidates: dict[str, list[str]] = {"(app)": [start]}
    chosen: dict[str, str] = {}
    queue = ["(app)"]
    for _ in range(MAX_CRAWL):
        if not queue:
            break
        label = queue.pop(0)
        known = candidates[label]
        path = chosen[label] = min(known, key=lambda p: (rank(p), known.index(p)))
        response = http.get(path)
        if response.status_code != 200:
            continue  # measured all the same: the table tells what it answers
        if "text/html" not in response.headers.get("content-type", ""):
            del chosen[label]  # an image, not a page
            continue
        for found in links(response.text, path):
            if found not in ("/console", start) and not found.startswith(f"{start}/"):
                continue
            shaped = shape(found, app_id)
            if shaped not in candidates:
                candidates[shaped] = []
                queue.append(shaped)
            if found not in candidates[shaped]:
                candidates[shaped].append(found)
    pages = [Page(label, path) for label, path in chosen.items()]
    webhook, delivery = seeded.target
    required = {
        WEBHOOKS: f"{start}/webhooks",
        ENDPOINT: f"{start}/webhooks/{webhook}",
        DELIVERY: f"{start}/webhooks/{webhook}/deliveries/{delivery}",
    }
    for label, path in required.items():
        if chosen.get(label) != path:
            pages = [page for page in pages if page.label != label]
            pages.append(Page(label, path, linked=False))
    return pages


# -- the browser --------------------------------------------------------------------------------


def sign_in(browser: Browser, base: str, seeded: Seeded) -> dict[str, str]:
    """Sign the app's owner in through the sign-in form; answers the session's cookies."""
    context = browser.new_context(base_url=base, viewport=SIZES[1280])
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page = context.new_page()
        page.goto(f"/console/apps/{seeded.tenant.app_id}")
        page.get_by_label("Email").fill(seeded.email)
        page.get_by_label("Password").fill(seeded.password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(re.compile(r".*/console/apps/"))
        return {cookie["name"]: cookie["value"] for cookie in context.cookies()}
    finally:
        context.close()


def measure_heights(
    browser: Browser, base: str, cookies: dict[str, str], pages: list[Page]
) -> None:
    """Each page's rendered height at each of SIZES, in a context of each size signed in with
    ``cookies``."""
    for width, viewport in SIZES.items():
        context = browser.new_context(base_url=base, viewport=viewport, is_mobile=width < 800)
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        context.add_cookies(
            [{"name": name, "value": value, "url": base} for name, value in cookies.items()]
        )
        try:
            tab = context.new_page()
            for page in pages:
                answered = tab.goto(page.url, wait_until="load")
                if answered is None or answered.status != 200 or urlsplit(tab.url).path != page.url:
                    continue  # no height: the timing's status tells what it answered
                page.heights[width] = int(
                    tab.evaluate(
                        "Math.max(document.documentElement.scrollHeight,"
                        " document.body ? document.body.scrollHeight : 0)"
                    )
                )
        finally:
            context.close()


# -- timing ---------------------------------------------------------------------------------------


def measure_times(http: httpx.Client, pages: list[Page], n: int) -> Page:
    """``n`` timed requests of every page and of /healthz, in rounds, after WARM_UP_ROUNDS:
    the pages' sizes, statuses and times, the server's own; answers /healthz's figures."""
    baseline = Page(HEALTHZ, HEALTHZ)
    before = histogram(http.get("/metrics").text)
    for round_ in range(WARM_UP_ROUNDS + n):
        for page in [*pages, baseline]:
            started = time.perf_counter()
            response = http.get(page.url)
            took = time.perf_counter() - started
            page.status = response.status_code
            page.wire_bytes = response.num_bytes_downloaded
            page.html_bytes = len(response.content)
            if round_ >= WARM_UP_ROUNDS:
                page.times.append(took)
    after = histogram(http.get("/metrics").text)
    for page in [*pages, baseline]:
        page.server_mean, page.server_p95_bucket = server_time(
            before, after, route_of(after, urlsplit(page.url).path), WARM_UP_ROUNDS + n
        )
    return baseline


Histogram = dict[str, dict[str, float]]
"""Route template to its samples: ``count``, ``sum`` and each bucket's ``le``."""

_SAMPLE = re.compile(rf"^{METRIC}_(bucket|count|sum)\{{([^}}]*)\}} (\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def histogram(text: str) -> Histogram:
    """The GET requests' duration histogram of a /metrics scrape, by route template."""
    found: Histogram = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        kind, labels, value = match.groups()
        named = dict(_LABEL.findall(labels))
        if named.get("method") != "GET":
            continue
        key = f"le={named['le']}" if kind == "bucket" else kind
        found.setdefault(named["route"], {})[key] = float(value)
    return found


def route_of(measured: Histogram, path: str) -> str | None:
    """The route template of ``path``: of those matching it, the one with fewest variables."""
    matching = [
        template
        for template in measured
        if re.fullmatch("[^/]+".join(map(re.escape, re.split(r"<[^>]+>", template))), path)
    ]
    return min(matching, key=lambda t: (t.count("<"), t), default=None)


def server_time(
    before: Histogram, after: Histogram, route: str | None, requests: int
) -> tuple[float, float]:
    """The mean and the p95's bucket bound (seconds) of the route's requests between the two
    scrapes; NaN when the route is unknown or took other requests than the ``requests``."""
    if route is None:
        return math.nan, math.nan
    then, now = before.get(route, {}), after[route]
    count = now["count"] - then.get("count", 0.0)
    if count != requests:
        return math.nan, math.nan
    mean = (now["sum"] - then.get("sum", 0.0)) / count
    bounds = sorted(
        (float(key[3:]), value - then.get(key, 0.0))
        for key, value in now.items()
        if key.startswith("le=")
    )
    bucket = next((bound for bound, seen in bounds if seen >= 0.95 * count), math.inf)
    return mean, bucket


# -- reporting ------------------------------------------------------------------------------------


def verdict(page: Page, what: str, text: str) -> str:
    """``text``, with the target of ``what`` beside it and whether it is met."""
    for target in page.targets():
        if target.what == what:
            met = page.figure(what) < target.below
            return f"{text} (< {target.below:,.0f}: {'met' if met else '**missed**'})"
    return text


def height(page: Page, width: int) -> str:
    return f"{page.heights[width]:,}" if width in page.heights else "-"


def ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


def report(backend: str, pages: list[Page], baseline: Page) -> list[str]:
    """The Markdown table of the store's pages; answers the targets missed."""
    base_p95 = percentile(baseline.times, 0.95)
    say(
        f"\n{backend}: /healthz p50 {ms(percentile(baseline.times, 0.5))} ms,"
        f" p95 {ms(base_p95)} ms over {len(baseline.times)} requests;"
        f" the server's mean {ms(baseline.server_mean)} ms\n"
    )
    say(
        "| page | KB | p50 ms | p95 ms | x healthz | server mean ms | server p95 |"
        " height at 1280 px | at 390 px |"
    )
    say("|---|---|---|---|---|---|---|---|---|")
    missed = []
    for page in pages:
        p95 = percentile(page.times, 0.95)
        size = f"{page.wire_bytes / 1000:,.1f}"
        if page.html_bytes != page.wire_bytes:
            size += f" ({page.html_bytes / 1000:,.1f} HTML)"
        bucket = page.server_p95_bucket
        bound = "-" if math.isnan(bucket) else f"≤ {bucket * 1000:g} ms"
        label = f"`{page.label}`" + ("" if page.linked else " (not linked)")
        if page.status != 200:
            label += f" (answered {page.status})"
        say(
            f"| {label} | {verdict(page, 'kb', size)}"
            f" | {ms(percentile(page.times, 0.5))}"
            f" | {verdict(page, 'p95', ms(p95))}"
            f" | {p95 / base_p95:.1f}x"
            f" | {ms(page.server_mean)} | {bound}"
            f" | {verdict(page, 'h1280', height(page, 1280))} | {height(page, 390)} |"
        )
        missed += [f"{backend} {page.label} {t.what} < {t.below:g}" for t in page.missed()]
        if page.status != 200:
            missed.append(f"{backend} {page.label} answered {page.status}")
    say("\n   the pages measured:")
    for page in pages:
        say(f"   {page.label:<42} {page.url}")
    return missed


# -- a store --------------------------------------------------------------------------------------


def measure(base: str, seeded: Seeded, n: int) -> tuple[list[Page], Page]:
    """Sign in, find the pages, render them at each width, then time them (blocking: run in a
    thread; Playwright's synchronous API runs its own asyncio loop in it)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            cookies = sign_in(browser, base, seeded)
            with _http(base, cookies) as http:
                pages = find_pages(http, seeded)
            say(f"   {len(pages)} pages found; rendering them at {', '.join(map(str, SIZES))} px")
            measure_heights(browser, base, cookies, pages)
        finally:
            browser.close()
    say(f"   timing {len(pages)} pages and /healthz, {n} requests each")
    with _http(base, cookies) as http:
        baseline = measure_times(http, pages, n)
    return pages, baseline


def _http(base: str, cookies: dict[str, str]) -> httpx.Client:
    return httpx.Client(
        base_url=base,
        cookies=cookies,
        timeout=HTTP_TIMEOUT,
        trust_env=False,
        headers={"Accept": "text/html"},
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
    )


async def run_backend(backend: str, n: int) -> list[str]:
    """Serve on ``backend``, seed, measure and report; answers the targets missed."""
    say(f"\n== {backend}: {n} requests a page; load average {load_average():.2f}")
    stack = contextlib.ExitStack()
    try:
        directory = Path(
            stack.enter_context(tempfile.TemporaryDirectory(prefix="ledgerport-console-pages-"))
        )
        # asyncio.run (the scratch PostgreSQL database) may not run in a trio task.
        store = await trio.to_thread.run_sync(stack.enter_context, store_env(backend, directory))
        with nodes(directory, store | SERVER_ENV) as served:
            node = await served.start("bench")
            async with sink(policy=Policy()) as receiver, client(node.base) as http:
                started = time.monotonic()
                seeded = await seed(http, receiver.base, say)
                say(f"   seeded in {time.monotonic() - started:.1f} s")
                pages, baseline = await trio.to_thread.run_sync(measure, node.base, seeded, n)
            problems = served.problems()
        missed = report(backend, pages, baseline)
        say(f"\n   load average {load_average():.2f} at the end")
        if problems:
            say(f"   server.log: {len(problems)} error lines, the first: {problems[0][:300]}")
        return missed
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(stack.close)


def commit() -> str:
    """The commit measured, ``+changes`` when the checkout's tracked files differ from it."""
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return (head or "unknown") + ("+changes" if changed else "")


async def main(args: argparse.Namespace) -> int:
    say(f"commit {commit()}; load average {load_average():.2f}")
    missed: list[str] = []
    for backend in ["sqlite", "postgres"] if args.backend == "both" else [args.backend]:
        with trio.fail_after(TIMEOUT):
            missed += await run_backend(backend, args.n)
    say(f"\ntargets missed: {len(missed)}")
    for line in missed:
        say(f"   {line}")
    return 1 if args.check and missed else 0


def _between(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}..{high}")
        return value

    return parse


def parse(argv: Iterable[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=" ".join((__doc__ or "").split("\n\n")[0].split()),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument(
        "--n", type=_between(5, 1000), default=50, help="timed requests of each page"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(None if argv is None else list(argv))
    if not CHROMIUM.exists():
        parser.error(f"{CHROMIUM} is missing: apt-get install -y chromium")
    return args


if __name__ == "__main__":
    arguments = parse()
    sys.exit(trio.run(until_signalled, functools.partial(main, arguments)))
