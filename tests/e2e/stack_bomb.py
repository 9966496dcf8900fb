"""A stack bomb against a served instance: a function whose source is one line of about
256 KiB throws from deep recursion into that line, and its run's page is asked for while another
client asks for ``/healthz``.

What a developer needs and nothing more: a user, an app they develop (no business, no
installation), the function uploaded through the developer API and one test run of it; then the
console's run page, signed in. Used by ``test_stack_bomb.py`` and ``bench/stack_bomb.py``.
"""

from __future__ import annotations

import re
import secrets
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

HTTP_TIMEOUT = 60.0
RUN_TIMEOUT = 60.0
PASSWORD = "pw-stack-bomb-12345678"
DEPTH = 240
"""Frames the handler's recursion goes down before it throws."""
PADDING = 250 * 1024
"""Characters of the string before the recursion on the source's one line."""


def bomb_source(depth: int = DEPTH, padding: int = PADDING) -> str:
    """A function on one line of about ``padding`` characters: a string that long, then a
    function that calls itself ``depth`` times and throws, every frame of its stack naming a
    column past the string (the stack as long as V8 writes it)."""
    return (
        f'const pad = "{"x" * padding}"; function down(n) {{ if (n > 0) return down(n - 1);'
        ' throw new Error("deep: " + pad.length); }'
        " export function handler() { Error.stackTraceLimit = Infinity; down("
        f"{depth}); }}"
    )


@dataclass(frozen=True)
class Developer:
    """A developer signed in to the console (``cookies``) with a token for the developer API,
    and the app they develop."""

    app_id: str
    token: str
    cookies: httpx.Cookies


def _answer(response: httpx.Response) -> Any:
    assert response.status_code in (200, 201, 202), (response.status_code, response.text[:500])
    return response.json()


def developer(base: str, admin_token: str) -> Developer:
    """A user who develops an app (no business, no installation), signed in to the console."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    email = f"{secrets.token_hex(4)}@example.com"
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False, headers=admin) as http:
        user = _answer(http.post("/admin/users", json={"email": email, "password": PASSWORD}))
        app = _answer(
            http.post(
                "/admin/apps",
                json={
                    "name": "Stack bomb",
                    "type": "CONFIDENTIAL",
                    "redirectUris": ["https://app.example/callback"],
                    "scopes": ["customers:read"],
                    "developerUserId": user["id"],
                    "reviewed": True,
                },
            )
        )
        token = _answer(http.post("/admin/developer-tokens", json={"userId": user["id"]}))
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False) as browser:
        form = browser.get("/login").text
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
        assert csrf is not None, form
        signed_in = browser.post(
            "/login",
            data={"email": email, "password": PASSWORD, "csrf_token": csrf[1], "next": "/"},
        )
        assert signed_in.status_code == 303, signed_in.text
        cookies = httpx.Cookies(browser.cookies)
    return Developer(app["id"], token["token"], cookies)


def bomb_run(
    base: str, dev: Developer, source: str | None = None, name: str = "bomb"
) -> dict[str, Any]:
    """Upload ``source`` (the bomb when None) as function ``name``, queue a test run, wait for
    it to end; answers the run as the developer API's run answer has it."""
    headers = {"Authorization": f"Bearer {dev.token}"}
    prefix = f"/developer/apps/{dev.app_id}/functions/{name}"
    body = {"source": source or bomb_source(), "events": ["customer.created"]}
    with httpx.Client(
        base_url=base, timeout=HTTP_TIMEOUT, trust_env=False, headers=headers
    ) as console:
        _answer(console.put(prefix, json=body))
        run_id = _answer(console.post(f"{prefix}/test"))["runId"]
        deadline = time.monotonic() + RUN_TIMEOUT
        while True:
            run: dict[str, Any] = _answer(console.get(f"{prefix}/runs/{run_id}"))
            if run["status"] in ("succeeded", "failed"):
                return run
            assert time.monotonic() < deadline, f"the run did not end in {RUN_TIMEOUT} s: {run}"
            time.sleep(0.1)


def run_page_path(dev: Developer, run_id: str, name: str = "bomb") -> str:
    return f"/console/apps/{dev.app_id}/functions/{name}/runs/{run_id}"


@dataclass
class Pages:
    """What the page fetchers saw."""

    seconds: list[float] = field(default_factory=list)
    largest: int = 0
    errors: list[str] = field(default_factory=list)


@contextmanager
def fetching(base: str, dev: Developer, path: str, fetchers: int) -> Iterator[Pages]:
    """``fetchers`` threads asking for the page at ``path`` one after another, each on a
    connection of its own, for the block's length."""
    pages = Pages()
    done = threading.Event()

    def fetch() -> None:
        with httpx.Client(
            base_url=base, timeout=HTTP_TIMEOUT, trust_env=False, cookies=dev.cookies
        ) as browser:
            while not done.is_set():
                began = time.perf_counter()
                try:
                    response = browser.get(path)
                except httpx.HTTPError as error:
                    pages.errors.append(repr(error))
                    continue
                pages.seconds.append(time.perf_counter() - began)
                pages.largest = max(pages.largest, len(response.content))
                if response.status_code != 200:
                    pages.errors.append(f"{response.status_code}: {response.text[:200]}")

    threads = [threading.Thread(target=fetch, daemon=True) for _ in range(fetchers)]
    for thread in threads:
        thread.start()
    try:
        yield pages
    finally:
        done.set()
        for thread in threads:
            thread.join(HTTP_TIMEOUT + 5)


def healthz_latencies(base: str, count: int, interval: float) -> list[float]:
    """``count`` answers of ``GET /healthz``, one every ``interval`` seconds on one keep-alive
    connection, each one's time in seconds."""
    seconds = []
    with httpx.Client(base_url=base, timeout=HTTP_TIMEOUT, trust_env=False) as probe:
        probe.get("/healthz")
        for _ in range(count):
            began = time.perf_counter()
            assert probe.get("/healthz").status_code == 200
            took = time.perf_counter() - began
            seconds.append(took)
            time.sleep(max(0.0, interval - took))
    return seconds


def p50_p99_max(values: list[float]) -> tuple[float, float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values), cuts[98], max(values)
