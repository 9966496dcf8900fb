"""One attempt's pure parts (``engine/_attempt.py``): the request's headers, the words of its
failure, and its outcome, delivered, retrying on the schedule or failed past its last delay
(spec: Delivery, Limits). No receiver, no store, no clock but the one handed in."""

from __future__ import annotations

from email.utils import formatdate

import httpcore
import pytest

from ledgerport import apps, catalog, queues
from ledgerport.engine import (
    attempt_error,
    attempt_outcome,
    logged_headers,
    request_headers,
    signature_header,
    verify_header,
    verify_standard,
)

SECRET = "whsec_" + "k" * 43
BODY = b'{"id":"dlv_1","type":"invoice.created"}'
NOW = 1_790_000_000.0
DELAYS = catalog.WEBHOOK_RETRY_DELAYS


def _delivery(attempts: int = 0, event_id: str | None = "evt_1") -> queues.ClaimedDelivery:
    return queues.ClaimedDelivery(
        id="dlv_1",
        webhook_id="wh_1",
        app_id="app_1",
        event_id=event_id,
        business_id="biz_1",
        type="invoice.created",
        body=BODY,
        attempts=attempts,
        lease="node_1",
        created_at=NOW - 60,
    )


def _plan(*secrets: str) -> queues.SendPlan:
    return queues.SendPlan("https://hooks.example.com/in", secrets or (SECRET,), {})


def _made() -> queues.AttemptMade:
    return queues.AttemptMade(
        started_at=NOW - 1.5,
        duration_ms=1500.0,
        response_body=b"ok",
        response_truncated=False,
        request_headers={"X-Webhook-Id": "dlv_1"},
    )


# --- the headers -------------------------------------------------------------------------------


def test_the_headers_name_the_delivery_and_sign_its_body_in_the_order_sent() -> None:
    url = httpcore.URL("https://hooks.example.com/in")

    headers = request_headers(_delivery(), _plan(), url=url, timestamp=1_790_000_000)

    assert headers == [
        (b"Host", b"hooks.example.com"),
        (b"User-Agent", b"ledgerport-webhooks/1"),
        (b"Accept-Encoding", b"identity"),
        (b"Content-Type", b"application/json"),
        (b"Content-Length", str(len(BODY)).encode()),
        (b"X-Webhook-Id", b"dlv_1"),
        (b"X-Webhook-Event", b"invoice.created"),
        (b"X-Webhook-Signature", signature_header([SECRET], 1_790_000_000, BODY).encode()),
        (b"X-Webhook-Event-Id", b"evt_1"),
        (b"X-Webhook-Event-Cursor", b"evt_1"),
    ]
    signed = dict(headers)[b"X-Webhook-Signature"].decode()
    assert verify_header(signed, BODY, SECRET, now=1_790_000_000, tolerance=300)


def test_a_rotation_signs_with_both_secrets_and_a_test_delivery_names_no_event() -> None:
    url = httpcore.URL("https://hooks.example.com/in")

    headers = dict(
        request_headers(_delivery(event_id=None), _plan(SECRET, "whsec_old"), url=url, timestamp=7)
    )

    assert (
        headers[b"X-Webhook-Signature"] == signature_header([SECRET, "whsec_old"], 7, BODY).encode()
    )
    assert b"X-Webhook-Event-Id" not in headers
    assert b"X-Webhook-Event-Cursor" not in headers


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://hooks.example.com/in", b"hooks.example.com"),
        ("https://hooks.example.com:443/in", b"hooks.example.com"),
        ("http://hooks.example.com:80/in", b"hooks.example.com"),
        ("https://hooks.example.com:8443/in", b"hooks.example.com:8443"),
        ("http://127.0.0.1:8080/in", b"127.0.0.1:8080"),
        ("http://hooks.example.com:443/in", b"hooks.example.com:443"),
    ],
)
def test_the_host_header_names_the_port_unless_it_is_the_schemes(url: str, host: bytes) -> None:
    headers = request_headers(_delivery(), _plan(), url=httpcore.URL(url), timestamp=7)

    assert headers[0] == (b"Host", host)


# --- the words of a failure --------------------------------------------------------------------

ERRORS = {
    # name: (status code, the connection's error, timed out, the attempt log's words)
    "a 2xx answer": (204, None, False, None),
    "a 299 answer": (299, None, False, None),
    "a redirect": (301, None, False, "HTTP 301"),
    "a server error": (500, None, False, "HTTP 500"),
    "no answer": (None, "connection error: refused", False, "connection error: refused"),
    "a 2xx whose body broke off": (
        200,
        "connection error: reset",
        False,
        "connection error: reset",
    ),
    "an error answer whose body broke off": (503, "connection error: reset", False, "HTTP 503"),
    "no answer in time": (None, None, True, "timeout: no answer within 10 s"),
    "a body that did not end in time": (
        200,
        None,
        True,
        "timeout: the answer's body did not end within 10 s",
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_what_an_attempts_failure_says(name: str) -> None:
    code, error, timed_out, said = ERRORS[name]

    assert attempt_error(code, error, timed_out=timed_out, timeout=10.0) == said


# --- the outcome -------------------------------------------------------------------------------


@pytest.mark.parametrize("attempts", [0, 3])
def test_an_answer_without_error_delivers(attempts: int) -> None:
    made = _made()

    outcome = attempt_outcome(_delivery(attempts), 200, None, made, now=NOW, delays=DELAYS)

    assert outcome == queues.AttemptOutcome(
        delivery_id="dlv_1",
        lease="node_1",
        status="delivered",
        attempts=attempts + 1,
        response_code=200,
        error=None,
        finished_at=NOW,
        next_attempt_at=None,
        first_attempt_at=made.started_at,
        made=made,
    )


@pytest.mark.parametrize("attempts", range(len(DELAYS) - 1))
def test_a_failure_retries_after_the_next_delay_of_the_schedule(attempts: int) -> None:
    outcome = attempt_outcome(
        _delivery(attempts), 500, "HTTP 500", _made(), now=NOW, delays=DELAYS, spread=None
    )

    assert outcome.status == "retrying"
    assert outcome.attempts == attempts + 1
    assert outcome.next_attempt_at == NOW + DELAYS[attempts + 1]
    assert (outcome.response_code, outcome.error) == (500, "HTTP 500")


def test_a_failure_of_the_last_attempt_fails_for_good() -> None:
    last = len(DELAYS) - 1

    outcome = attempt_outcome(_delivery(last), None, "timeout", _made(), now=NOW, delays=DELAYS)

    assert outcome.status == "failed"
    assert outcome.attempts == len(DELAYS) == catalog.WEBHOOK_MAX_ATTEMPTS
    assert outcome.next_attempt_at is None
    assert outcome.response_code is None


def test_the_delays_handed_in_are_the_schedule() -> None:
    delays = (0.0, 2.0)

    first = attempt_outcome(
        _delivery(0), 500, "HTTP 500", _made(), now=NOW, delays=delays, spread=None
    )
    second = attempt_outcome(
        _delivery(1), 500, "HTTP 500", _made(), now=NOW, delays=delays, spread=None
    )

    assert (first.status, first.next_attempt_at) == ("retrying", NOW + 2.0)
    assert (second.status, second.next_attempt_at) == ("failed", None)


# --- contract.md, third round: schemes, the endpoint's headers, 410, Retry-After, jitter --------


def test_a_standard_endpoint_signs_with_the_standard_webhooks_headers_and_sends_its_own_last() -> (
    None
):
    secret = apps.new_signing_key("standard")
    plan = queues.SendPlan(
        "https://hooks.example.com/in",
        (secret,),
        {},
        scheme="standard",
        headers=(("X-Api-Key", "k-1"), ("Authorization", "Bearer gw")),
    )

    headers = request_headers(
        _delivery(), plan, url=httpcore.URL(plan.url), timestamp=1_790_000_000
    )

    names = [name for name, _ in headers]
    assert b"X-Webhook-Signature" not in names
    assert names[-5:] == [
        b"webhook-signature",
        b"X-Webhook-Event-Id",
        b"X-Webhook-Event-Cursor",
        b"X-Api-Key",
        b"Authorization",
    ]
    sent = {name.decode().lower(): value.decode() for name, value in headers}
    assert sent["webhook-id"] == "dlv_1"
    assert sent["webhook-timestamp"] == "1790000000"
    assert sent["webhook-signature"].startswith("v1,")
    assert verify_standard(sent, BODY, secret, now=1_790_000_000, tolerance=300)


def test_a_410_fails_the_delivery_for_good_whatever_attempts_are_left() -> None:
    outcome = attempt_outcome(_delivery(0), 410, "HTTP 410", _made(), now=NOW, delays=DELAYS)

    assert (outcome.status, outcome.next_attempt_at, outcome.response_code) == ("failed", None, 410)


@pytest.mark.parametrize(
    ("code", "retry_after", "due"),
    [
        (429, "3600", NOW + 3600),
        (503, "120", NOW + 120),
        (429, "30", NOW + 60),  # sooner than the schedule: the schedule stands
        (429, "999999", NOW + catalog.RETRY_AFTER_MAX),  # capped at six hours
        (503, "Thu, 01 Jan 2026 00:00:00 GMT", NOW + 60),  # a date passed: the schedule
        (429, "soon", NOW + 60),  # unreadable: the schedule
        (500, "3600", NOW + 60),  # only 429 and 503 are heard
    ],
)
def test_retry_after_moves_the_next_attempt_no_earlier_than_it_names(
    code: int, retry_after: str, due: float
) -> None:
    outcome = attempt_outcome(
        _delivery(0),
        code,
        f"HTTP {code}",
        _made(),
        now=NOW,
        delays=DELAYS,
        retry_after=retry_after,
        spread=None,
    )

    assert (outcome.status, outcome.attempts, outcome.next_attempt_at) == ("retrying", 1, due)


def test_retry_after_as_an_http_date_is_read_as_one() -> None:
    date = formatdate(NOW + 7200, usegmt=True)

    outcome = attempt_outcome(
        _delivery(0),
        503,
        "HTTP 503",
        _made(),
        now=NOW,
        delays=DELAYS,
        retry_after=date,
        spread=None,
    )

    assert outcome.next_attempt_at == NOW + 7200


def test_jitter_lengthens_a_delay_by_at_most_a_tenth_and_never_shortens_it() -> None:
    dues = [
        attempt_outcome(
            _delivery(2), 500, "HTTP 500", _made(), now=NOW, delays=DELAYS
        ).next_attempt_at
        for _ in range(200)
    ]

    delay = DELAYS[3]
    assert all(due is not None and NOW + delay <= due <= NOW + 1.1 * delay for due in dues)
    assert len(set(dues)) > 100  # spread, not one second for all


def test_an_outcome_of_an_ordered_delivery_says_so() -> None:
    ordered = queues.ClaimedDelivery(
        "dlv_1",
        "wh_1",
        "app_1",
        "evt_1",
        "biz_1",
        "invoice.paid",
        BODY,
        0,
        "node_1",
        NOW,
        order_key="inv_1",
    )

    made = attempt_outcome(ordered, 200, None, _made(), now=NOW, delays=DELAYS)
    unordered = attempt_outcome(_delivery(), 200, None, _made(), now=NOW, delays=DELAYS)

    assert made.ordered
    assert not unordered.ordered


def test_the_attempt_log_keeps_the_endpoints_own_header_values_out() -> None:
    plan = queues.SendPlan(
        "https://hooks.example.com/in", (SECRET,), {}, headers=(("X-Api-Key", "gateway-key"),)
    )
    headers = request_headers(_delivery(), plan, url=httpcore.URL(plan.url), timestamp=7)

    logged = logged_headers(headers, plan)

    assert logged["X-Api-Key"] == "[the endpoint's value]"
    assert "gateway-key" not in repr(logged)
    assert logged["X-Webhook-Signature"] == dict(headers)[b"X-Webhook-Signature"].decode()
