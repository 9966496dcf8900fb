"""Pure rules of the webhook engine: the signature scheme, the retry schedule, and the addresses
a production webhook may reach (spec: Delivery, Limits)."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

import pytest
import stripe
import trio
import trio.testing

from ledgerport import apps, catalog, config
from ledgerport.engine import next_attempt_at, signature, signature_header, verify_header

SECRET = "whsec_" + "k" * 43
BODY = b'{"id":"dlv_1","type":"invoice.created"}'


def test_the_signature_is_the_hmac_of_timestamp_dot_body_under_the_whole_secret() -> None:
    expected = hmac.new(SECRET.encode(), b"1790000000." + BODY, hashlib.sha256).hexdigest()
    assert signature(SECRET, 1790000000, BODY) == expected
    assert signature_header([SECRET], 1790000000, BODY) == f"t=1790000000,v1={expected}"


def test_two_secrets_give_two_v1_values_current_first() -> None:
    header = signature_header([SECRET, "whsec_old"], 17, BODY)
    assert header == (
        f"t=17,v1={signature(SECRET, 17, BODY)},v1={signature('whsec_old', 17, BODY)}"
    )
    with pytest.raises(ValueError, match="at least one"):
        signature_header([], 17, BODY)


@pytest.mark.parametrize("secret", [SECRET, "whsec_old"])
def test_an_independent_verifier_accepts_either_value(secret: str) -> None:
    now = 1790000000
    header = signature_header([SECRET, "whsec_old"], now, BODY)
    stripe.WebhookSignature.verify_header(BODY.decode(), header, secret, tolerance=None)
    assert verify_header(header, BODY, secret, now=now, tolerance=300)


def test_verification_refuses_another_body_secret_or_an_old_timestamp() -> None:
    header = signature_header([SECRET], 1000, BODY)
    assert not verify_header(header, BODY + b" ", SECRET, now=1000, tolerance=300)
    assert not verify_header(header, BODY, "whsec_other", now=1000, tolerance=300)
    assert not verify_header(header, BODY, SECRET, now=1301, tolerance=300)
    assert not verify_header("v1=abc", BODY, SECRET, now=1000, tolerance=300)


@pytest.mark.parametrize(
    ("attempts_made", "delay"),
    [(n, catalog.WEBHOOK_RETRY_DELAYS[n]) for n in range(1, catalog.WEBHOOK_MAX_ATTEMPTS)],
)
def test_each_failure_waits_the_delay_of_the_next_attempt(attempts_made: int, delay: int) -> None:
    assert next_attempt_at(attempts_made, 1000.0, catalog.WEBHOOK_RETRY_DELAYS) == 1000.0 + delay


def test_the_spec_schedule() -> None:
    assert catalog.WEBHOOK_RETRY_DELAYS == (0, 60, 300, 1800, 7200, 21600)
    assert next_attempt_at(6, 1000.0, catalog.WEBHOOK_RETRY_DELAYS) is None
    with pytest.raises(ValueError, match="follows a failed attempt"):
        next_attempt_at(0, 1000.0, catalog.WEBHOOK_RETRY_DELAYS)


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("10.0.0.1", False),
        ("172.16.5.4", False),
        ("192.168.1.1", False),
        ("127.0.0.1", False),
        ("::1", False),
        ("169.254.169.254", False),
        ("fe80::1", False),
        ("224.0.0.1", False),
        ("ff02::1", False),
        ("240.0.0.1", False),
        ("0.0.0.0", False),
        ("100.64.0.1", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.1.2.3", False),
        ("fc00::1", False),
    ],
)
def test_production_webhooks_reach_public_addresses_only(address: str, allowed: bool) -> None:
    assert apps.address_allowed(ipaddress.ip_address(address)) is allowed


EMBEDDED = {
    "loopback": "127.0.0.1",
    "private": "10.1.2.3",
    "link-local": "169.254.169.254",
    "public": "93.184.216.34",
}
"""The IPv4 addresses each IPv6 spelling below carries."""
TEREDO_SERVER = ipaddress.IPv4Address("65.54.227.120")


def _teredo(server: ipaddress.IPv4Address, client: str) -> str:
    """RFC 4380: 2001:0::/32, the server, flags and port, then the client's inverted bits."""
    inverted = ~int(ipaddress.IPv4Address(client)) & 0xFFFF_FFFF
    return str(
        ipaddress.IPv6Address((0x2001_0000 << 96) | (int(server) << 64) | (0xFFFF << 32) | inverted)
    )


SPELLINGS = {
    "ipv4-mapped": lambda v4: f"::ffff:{v4}",
    "6to4": lambda v4: str(
        ipaddress.IPv6Address(b"\x20\x02" + ipaddress.IPv4Address(v4).packed + bytes(10))
    ),
    "teredo": lambda v4: _teredo(TEREDO_SERVER, v4),
    "nat64": lambda v4: f"64:ff9b::{v4}",
    "nat64-local-use": lambda v4: f"64:ff9b:1::{v4}",
    "ipv4-compatible": lambda v4: f"::{v4}",
}
"""IPv6 spellings of an IPv4 address, by name."""
REFUSED_WHOLE = {"nat64-local-use", "ipv4-compatible"}
"""Spellings refused whatever they carry: the local-use prefix is not globally reachable, and
IPv4-compatible addresses are deprecated (reserved)."""
EMBEDDING_CASES = [
    pytest.param(
        SPELLINGS[spelling](v4),
        kind == "public" and spelling not in REFUSED_WHOLE,
        id=f"{spelling}-{kind}",
    )
    for spelling in SPELLINGS
    for kind, v4 in EMBEDDED.items()
]


@pytest.mark.parametrize(("address", "allowed"), EMBEDDING_CASES)
def test_an_embedded_ipv4_address_is_judged(address: str, allowed: bool) -> None:
    assert apps.address_allowed(ipaddress.ip_address(address)) is allowed


@pytest.mark.parametrize(("address", "allowed"), EMBEDDING_CASES)
def test_a_webhook_url_at_an_embedded_address_is_judged_likewise(
    address: str, allowed: bool
) -> None:
    found = apps.webhook_url_problem(f"https://[{address}]/hook", development=False)
    if allowed:
        assert found is None
    else:
        assert found is not None
        assert "private, loopback" in found


@pytest.mark.parametrize(
    "address",
    [
        pytest.param("2002:7f00:1::", id="6to4-of-127.0.0.1"),
        pytest.param("2002:a9fe:a9fe::1", id="6to4-of-169.254.169.254"),
        # RFC 4380's layout as Python's documentation shows it: client 127.0.0.1.
        pytest.param("2001:0:4136:e378:8000:63bf:80ff:fffe", id="teredo-of-127.0.0.1"),
        pytest.param("64:ff9b::a9fe:a9fe", id="nat64-of-169.254.169.254"),
        pytest.param("::ffff:7f00:1", id="mapped-of-127.0.0.1"),
    ],
)
def test_written_out_spellings_are_refused(address: str) -> None:
    """Spelled by hand, so the table above is not only checked against its own construction."""
    assert not apps.address_allowed(ipaddress.ip_address(address))


def test_the_table_spells_as_the_rfcs_do() -> None:
    loopback = ipaddress.IPv4Address("127.0.0.1")
    assert SPELLINGS["6to4"]("127.0.0.1") == "2002:7f00:1::"
    assert ipaddress.IPv6Address(SPELLINGS["teredo"]("127.0.0.1")).teredo == (
        TEREDO_SERVER,
        loopback,
    )
    assert ipaddress.IPv6Address(SPELLINGS["nat64"]("127.0.0.1")) == ipaddress.IPv6Address(
        "64:ff9b::7f00:1"
    )


def test_a_teredo_address_with_a_private_server_is_refused() -> None:
    address = _teredo(ipaddress.IPv4Address("10.0.0.1"), EMBEDDED["public"])
    assert not apps.address_allowed(ipaddress.ip_address(address))


def _assert_problem(found: str | None, problem: str | None) -> None:
    """``found`` is no problem when ``problem`` is None, else a problem that says ``problem``."""
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert problem in found


@pytest.mark.parametrize(
    ("url", "development", "problem"),
    [
        ("https://hooks.example.com/in", False, None),
        ("http://hooks.example.com/in", False, "must use https"),
        ("http://127.0.0.1:8000/in", False, "must use https"),
        ("http://127.0.0.1:8000/in", True, None),
        ("http://localhost:8000/in", True, None),
        ("http://hooks.example.com/in", True, "must use https"),
        ("https://127.0.0.1/in", False, "private, loopback"),
        ("https://10.0.0.8/in", False, "private, loopback"),
        ("https://[::1]/in", False, "private, loopback"),
        ("https://localhost/in", False, "must not point at this machine"),
        ("https://user:pw@hooks.example.com/in", False, "credentials"),
        ("ftp://hooks.example.com/in", False, "https"),
        ("https://hooks.example.com:99999/in", False, "valid absolute URI"),
    ],
)
def test_webhook_url_rules(url: str, development: bool, problem: str | None) -> None:
    found = apps.webhook_url_problem(url, development=development)
    _assert_problem(found, problem)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:9001/in", None),
        ("http://127.8.9.10:9001/in", None),
        ("http://[::1]:9001/in", None),
        ("http://localhost:9001/in", None),
        ("https://127.0.0.1/in", None),
        ("https://localhost/in", None),
        ("https://hooks.example.com/in", None),
        ("http://hooks.example.com/in", "must use https"),
        ("http://10.0.0.8/in", "must use https"),
        ("http://192.168.1.1/in", "must use https"),
        ("https://10.0.0.8/in", "private, loopback"),
        ("https://169.254.169.254/in", "private, loopback"),
        ("https://[fe80::1]/in", "private, loopback"),
        ("https://[2002:a9fe:a9fe::1]/in", "private, loopback"),
        ("https://[::ffff:7f00:1]/in", None),
    ],
)
def test_a_service_reached_on_a_loopback_address_may_deliver_to_this_machine_only(
    url: str, problem: str | None
) -> None:
    found = apps.webhook_url_problem(url, development=False, loopback=True)
    _assert_problem(found, problem)


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("2002:7f00:1::", False),
        ("10.0.0.1", False),
        ("169.254.169.254", False),
        ("2002:a9fe:a9fe::1", False),
        ("0.0.0.0", False),
        ("93.184.216.34", True),
    ],
)
def test_a_loopback_service_connects_to_this_machine_and_public_addresses_only(
    address: str, allowed: bool
) -> None:
    assert apps.address_allowed(ipaddress.ip_address(address), loopback=True) is allowed


async def test_a_loopback_service_refuses_a_name_that_resolves_to_a_private_address() -> None:
    async def private(host: str, port: int) -> list[str]:
        return ["127.0.0.1", "10.1.2.3"]

    found = await apps.webhook_target_problem(
        "https://hooks.example.com/in", development=False, loopback=True, resolver=private
    )
    assert found is not None
    assert "10.1.2.3" in found


@pytest.mark.parametrize(
    ("env", "loopback"),
    [
        ({}, True),
        ({"LEDGERPORT_BIND": "[::1]:8080"}, True),
        ({"LEDGERPORT_BASE_URL": "http://localhost:8080"}, True),
        ({"LEDGERPORT_BIND": "0.0.0.0:8080"}, False),
        ({"LEDGERPORT_BASE_URL": "https://api.example.com"}, False),
        ({"LEDGERPORT_AUTH_URL": "https://app.example.com"}, False),
        ({"LEDGERPORT_BIND": "192.168.1.5:8080"}, False),
    ],
)
def test_loopback_webhooks_only_when_both_hosts_are_loopback(
    env: dict[str, str], loopback: bool
) -> None:
    assert config.load(env).loopback_webhooks is loopback


async def test_a_name_that_resolves_to_a_private_address_is_refused() -> None:
    async def rebinding(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.1.2.3"]

    async def public(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    async def unknown(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    url = "https://hooks.example.com/in"
    with trio.fail_after(5):
        refused = await apps.webhook_target_problem(url, development=False, resolver=rebinding)
        accepted = await apps.webhook_target_problem(url, development=False, resolver=public)
        unresolved = await apps.webhook_target_problem(url, development=False, resolver=unknown)
    assert refused is not None
    assert "10.1.2.3" in refused
    assert accepted is None
    assert unresolved == "host hooks.example.com does not resolve"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (["93.184.216.34"], None),
        (["93.184.216.34", "10.1.2.3"], "resolves to a private"),
        (OSError("Name or service not known"), "host hooks.example.com does not resolve"),
        ("slow", "host hooks.example.com did not resolve within 5 s"),
    ],
)
async def test_a_name_resolved_ahead_is_judged_as_if_resolved_in_place(
    autojump_clock: trio.testing.MockClock, answer: object, problem: str | None
) -> None:
    """Saving a webhook resolves its host before the transaction: the check inside gets the
    same outcome, and the name is looked up once."""
    asked: list[tuple[str, int]] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append((host, port))
        if answer == "slow":
            await trio.sleep(60)
        if isinstance(answer, OSError):
            raise answer
        assert isinstance(answer, list)
        return answer

    url = "https://hooks.example.com:8443/in"
    ahead = await apps.resolve_ahead(url, development=False, resolver=resolver)
    assert asked == [("hooks.example.com", 8443)]  # before any transaction
    found = await apps.webhook_target_problem(url, development=False, resolver=ahead)
    assert asked == [("hooks.example.com", 8443)]  # and not again inside
    _assert_problem(found, problem)


@pytest.mark.parametrize(
    ("url", "development"),
    [
        ("https://93.184.216.34/in", False),  # a literal address is checked as written
        ("https://hooks.example.com/in", True),  # development resolves nothing
        ("not a url", False),
        (None, False),  # a change that leaves the URL as it is
    ],
)
async def test_nothing_is_resolved_ahead_where_nothing_would_be(
    url: str | None, development: bool
) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise AssertionError(f"{host} was resolved")

    ahead = await apps.resolve_ahead(url, development=development, resolver=resolver)
    assert ahead is resolver


@pytest.mark.parametrize(
    "scopes",
    [(), ("invoices:read",), ("customers:read", "suppliers:write"), tuple(catalog.SCOPES)],
    ids=["none", "invoices", "customers-only-read", "every-scope"],
)
def test_an_app_may_receive_its_own_events_and_those_whose_read_scope_it_registers(
    scopes: tuple[str, ...],
) -> None:
    receivable = apps.receivable_events(scopes)
    assert [e.name for e in receivable] == [
        e.name for e in catalog.EVENTS if e.audience == "app" or e.scope in scopes
    ]
    assert {e.name for e in receivable if e.audience == "app"} == {
        "app.installed",
        "app.uninstalled",
        "app.scopes_updated",
        "business.redact",
        "app_data.updated",
    }
    assert all(apps.receivable(event, scopes) for event in receivable)
    if "customers:read" in scopes:
        assert {"customer.created", "customer.redact"} <= {e.name for e in receivable}
    if "suppliers:read" not in scopes:  # suppliers:write alone is not the gating scope
        assert "supplier.created" not in {e.name for e in receivable}
    if len(scopes) == len(catalog.SCOPES):
        assert len(receivable) == len(catalog.EVENTS)
