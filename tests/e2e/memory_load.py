"""The traffic of ``test_memory_flat``, sent from a process of its own.

Run as ``python memory_load.py`` with a :class:`Plan` as JSON on standard input; writes the
:class:`Progress` it ends with as JSON on standard output. Five kinds of request go out at once,
each on keep-alive connections of its own: ``GET /healthz``, a data API list read
(``GET /customers``), a data API write (``POST /customers``), a refresh token grant (each
answer's refresh token is the next request's) and a read of the Events API feed (each page after
the last event read). An answer other than a success stops the process with a non-zero status
and the answer on standard error.

A process apart keeps the clients' objects out of the served process's counts, and lets the
clients run on the other core.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

import httpx
import trio

HTTP_TIMEOUT = 30.0
KINDS = ("healthz", "read", "write", "refresh", "events")
SPREAD = frozenset({"healthz", "read", "write"})
"""The kinds whose requests do not depend on each other; each of the others continues from its
last answer (the refresh token, the feed's position), so it is sent on one connection."""
READ_PAGE = 10
EVENTS_PAGE = 20


@dataclass
class Progress:
    """Where the traffic stands: what the next requests continue from."""

    refresh_token: str
    after: str | None = None
    """The id of the last event read from the feed."""
    writes: int = 0
    """Customers created so far."""


@dataclass
class Plan:
    base: str
    access_token: str
    basic_auth: str
    """The ``Authorization`` header of the app's client (HTTP Basic)."""
    counts: dict[str, int]
    """Requests of each kind in :data:`KINDS`."""
    progress: Progress
    connections: int = 1
    """Connections each kind in :data:`SPREAD` is sent on at once."""


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.status_code not in (200, 201):
        request = response.request
        raise SystemExit(
            f"{request.method} {request.url.path}: {response.status_code} {response.text}"
        )
    answer: dict[str, Any] = response.json()
    return answer


async def send(plan: Plan) -> Progress:
    """Send ``plan.counts`` requests of each kind; answers where the traffic then stands."""
    progress = plan.progress
    bearer = {"Authorization": f"Bearer {plan.access_token}"}

    async def healthz(http: httpx.AsyncClient) -> None:
        _answer(await http.get("/healthz"))

    async def read(http: httpx.AsyncClient) -> None:
        _answer(await http.get("/customers", params={"limit": str(READ_PAGE)}))

    async def write(http: httpx.AsyncClient) -> None:
        _answer(await http.post("/customers", json={"name": f"Customer {progress.writes}"}))
        progress.writes += 1

    async def refresh(http: httpx.AsyncClient) -> None:
        form = {"grant_type": "refresh_token", "refresh_token": progress.refresh_token}
        progress.refresh_token = _answer(await http.post("/oauth/token", data=form))[
            "refresh_token"
        ]

    async def events(http: httpx.AsyncClient) -> None:
        params = {"limit": str(EVENTS_PAGE)}
        if progress.after is not None:
            params["after"] = progress.after
        page = _answer(await http.get("/events", params=params))
        if page["data"]:
            progress.after = page["data"][-1]["id"]

    kinds: dict[str, tuple[Callable[[httpx.AsyncClient], Awaitable[None]], dict[str, str]]] = {
        "healthz": (healthz, {}),
        "read": (read, bearer),
        "write": (write, bearer),
        "refresh": (refresh, {"Authorization": plan.basic_auth}),
        "events": (events, bearer),
    }

    async def repeat(kind: str, count: int) -> None:
        one, headers = kinds[kind]
        async with httpx.AsyncClient(
            base_url=plan.base,
            timeout=HTTP_TIMEOUT,
            trust_env=False,
            headers=headers,
            limits=httpx.Limits(max_connections=1),
        ) as http:
            for _ in range(count):
                await one(http)

    async with trio.open_nursery() as nursery:
        for kind in KINDS:
            total = plan.counts.get(kind, 0)
            connections = plan.connections if kind in SPREAD else 1
            for index in range(connections):
                share = total // connections + (index < total % connections)
                nursery.start_soon(repeat, kind, share)
    return progress


def main() -> None:
    given = json.load(sys.stdin)
    plan = Plan(**{**given, "progress": Progress(**given["progress"])})
    progress = trio.run(send, plan)
    json.dump(asdict(progress), sys.stdout)


if __name__ == "__main__":
    main()
