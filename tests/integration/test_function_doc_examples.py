"""docs/functions.md's examples, run as the page shows them: the block after ``<!-- example:
NAME -->`` is uploaded as written (only the provider's address swapped for a local receiver
standing for it) and run on a real event, so the page cannot drift from what the engine does."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import trio

from ledgerport.platform import Platform

from ..receiver import Answer, receiving
from .test_function_runs import functions_world, run_queued, runs

TIMEOUT = 60
DOC = Path(__file__).resolve().parents[2] / "docs" / "functions.md"
EXAMPLE = re.compile(r"^<!-- example: (?P<name>[\w-]+) -->\n```js\n(?P<code>.*?)^```$", re.M | re.S)
KEY = "sk_test_51HdocExampleKey"


def example(name: str) -> str:
    found = {m["name"]: m["code"] for m in EXAMPLE.finditer(DOC.read_text())}
    return found[name]


async def test_the_charge_example_sends_the_key_in_its_header_and_notes_the_intent(
    client: Any, admin_headers: dict[str, str], app: Any, platform: Platform
) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            receiving() as provider,
            functions_world(client, admin_headers, app, platform) as world,
        ):
            provider.default = Answer(200, body=b'{"id":"pi_3Nexample","status":"succeeded"}')
            source = example("charge").replace(
                "https://api.stripe.com", f"http://127.0.0.1:{provider.port}"
            )
            await world.console.ok("PUT", "/secrets/STRIPE_KEY", {"value": KEY})
            await world.console.ok(
                "POST",
                "/app-data-fields",
                {"resourceType": "invoice", "key": "payment_intent", "type": "TEXT"},
                201,
            )
            await world.console.ok(
                "PUT",
                "/functions/charge",
                {"source": source, "events": ["invoice.created"], "allowedHosts": ["127.0.0.1"]},
            )
            customer = await world.api.customer()
            invoice = await world.api.invoice(customer["id"])
            await run_queued(platform, world)
            (run,) = await runs(world, "charge")
            detail = await world.console.ok("GET", f"/functions/charge/runs/{run['id']}")
            noted = await world.api.ok(
                "GET", f"/app-data?resourceType=invoice&resourceId={invoice['id']}"
            )
            (got,) = provider.received
    assert run["status"] == "succeeded", run
    assert run["result"] == {"paymentIntent": "pi_3Nexample"}
    assert got.path == "/v1/payment_intents"
    assert got.headers["authorization"] == f"Bearer {KEY}"
    assert got.headers["idempotency-key"] == detail["event"]["id"]
    cents = round(float(invoice["total"]) * 100)
    assert got.body == f"amount={cents}&currency=eur".encode()
    assert [(v["key"], v["value"]) for v in noted["data"]] == [("payment_intent", "pi_3Nexample")]
    (line,) = [entry["message"] for entry in detail["logs"]]
    assert re.fullmatch(r"\[ledgerport\] fetch POST 127\.0\.0\.1: 200 \(\d+ ms\)", line)
    assert KEY not in json.dumps(detail)
