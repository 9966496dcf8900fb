"""The receivers of docs/webhooks.md's "Signature schemes", run as the page shows them against
attempts signed by ``engine._schemes.signature_headers``: a block whose first line is
``# receiver: <scheme>`` is the example of that scheme, so the page cannot drift from what the
engine sends.

The examples judge the timestamp by the wall clock, as receivers do, so the attempts here are
signed at the wall clock's second; nothing waits.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import standardwebhooks
import stripe
from werkzeug.datastructures import Headers

from ledgerport.apps import SCHEMES, Scheme, new_signing_key, public_key
from ledgerport.engine import signature_headers

DOC = Path(__file__).resolve().parents[2] / "docs" / "webhooks.md"
RECEIVER = re.compile(
    r"^```python\n# receiver: (?P<scheme>[\w-]+)\n(?P<code>.*?)^```$", re.M | re.S
)
DELIVERY_ID = "dlv_5b0f0c0e6f3a1d2e3f4a5b6c"
BODY = (
    b'{"id":"dlv_5b0f0c0e6f3a1d2e3f4a5b6c","eventId":"evt_0c6b3f1e2d4a5b6c7d8e9f00",'
    b'"type":"invoice.created","data":{"id":"inv_1","total":"301.00","memo":"caf\xc3\xa9"}}'
)

REFUSAL: dict[Scheme, type[Exception]] = {
    "stripe": stripe.SignatureVerificationError,
    "standard": standardwebhooks.WebhookVerificationError,
    "standard-asymmetric": ValueError,
}
"""What each example raises when it refuses a delivery, as its docstring says."""


def _examples() -> dict[str, str]:
    found = [(m["scheme"], m["code"]) for m in RECEIVER.finditer(DOC.read_text())]
    examples = dict(found)
    assert len(examples) == len(found), "a scheme has two examples"
    return examples


def _receive(scheme: Scheme) -> Callable[..., Any]:
    namespace: dict[str, Any] = {"__name__": f"docs_webhooks_{scheme.replace('-', '_')}"}
    code = compile(_examples()[scheme], f"docs/webhooks.md (receiver: {scheme})", "exec")
    exec(code, namespace)  # the document's own example
    receive = namespace["receive"]
    assert callable(receive)
    return receive  # type: ignore[no-any-return]


def _request_headers(pairs: Sequence[tuple[bytes, bytes]]) -> Headers:
    """The headers of an attempt as a framework hands them over (Flask's ``request.headers``)."""
    headers = Headers(
        [
            ("Content-Type", "application/json"),
            ("X-Webhook-Id", DELIVERY_ID),
            ("X-Webhook-Event", "invoice.created"),
        ]
    )
    for name, value in pairs:
        headers.add(name.decode("latin-1"), value.decode("latin-1"))
    return headers


def _receiver_key(scheme: Scheme, key: str) -> str:
    return public_key(key) if scheme == "standard-asymmetric" else key


def test_the_page_has_one_example_per_scheme() -> None:
    assert sorted(_examples()) == sorted(SCHEMES)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("verifying_with", ["current", "previous"])
def test_the_example_accepts_a_delivery_signed_with_its_key(
    scheme: Scheme, verifying_with: str
) -> None:
    current, previous = new_signing_key(scheme), new_signing_key(scheme)
    pairs = signature_headers(
        scheme,
        [current, previous],
        delivery_id=DELIVERY_ID,
        timestamp=int(time.time()),
        body=BODY,
    )
    key = current if verifying_with == "current" else previous
    delivery = _receive(scheme)(BODY, _request_headers(pairs), _receiver_key(scheme, key))
    assert delivery == json.loads(BODY)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("what", ["body", "key", "timestamp", "stale"])
def test_the_example_refuses_a_changed_or_old_delivery(scheme: Scheme, what: str) -> None:
    key = new_signing_key(scheme)
    now = int(time.time())
    pairs = signature_headers(
        scheme,
        [key],
        delivery_id=DELIVERY_ID,
        timestamp=now - 3600 if what == "stale" else now,
        body=BODY,
    )
    headers = _request_headers(pairs)
    if what == "timestamp" and scheme == "stripe":
        headers["X-Webhook-Signature"] = headers["X-Webhook-Signature"].replace(
            f"t={now},", f"t={now + 1},"
        )
    elif what == "timestamp":
        headers["webhook-timestamp"] = str(now + 1)
    body = BODY.replace(b"301.00", b"391.00") if what == "body" else BODY
    verifying_key = new_signing_key(scheme) if what == "key" else key
    receive = _receive(scheme)
    with pytest.raises(REFUSAL[scheme]):
        receive(body, headers, _receiver_key(scheme, verifying_key))


def test_the_standard_example_refuses_a_changed_message_id() -> None:
    key = new_signing_key("standard")
    pairs = signature_headers(
        "standard", [key], delivery_id=DELIVERY_ID, timestamp=int(time.time()), body=BODY
    )
    headers = _request_headers(pairs)
    headers["webhook-id"] = "dlv_other"
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        _receive("standard")(BODY, headers, key)


def test_the_asymmetric_example_refuses_a_changed_message_id_and_a_v1_signature() -> None:
    key = new_signing_key("standard-asymmetric")
    now = int(time.time())
    pairs = signature_headers(
        "standard-asymmetric", [key], delivery_id=DELIVERY_ID, timestamp=now, body=BODY
    )
    receive = _receive("standard-asymmetric")
    changed_id = _request_headers(pairs)
    changed_id["webhook-id"] = "dlv_other"
    with pytest.raises(ValueError, match="no v1a signature verifies"):
        receive(BODY, changed_id, public_key(key))
    # The same Ed25519 signature sent as v1 is not an asymmetric signature.
    as_v1 = _request_headers(pairs)
    as_v1["webhook-signature"] = as_v1["webhook-signature"].replace("v1a,", "v1,")
    with pytest.raises(ValueError, match="no v1a signature verifies"):
        receive(BODY, as_v1, public_key(key))
