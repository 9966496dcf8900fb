"""The three signature schemes of a webhook (contract.md: Webhook endpoints beyond the spec, the
``signature`` row) and their keys, verified as receivers verify them: ``stripe`` by stripe-python,
``standard`` by the ``standardwebhooks`` and ``svix`` libraries as they are, and
``standard-asymmetric`` by an Ed25519 check written here with ``cryptography`` from the public key
alone (no released Standard Webhooks library verifies ``v1a`` yet).

The libraries read the wall clock to judge a timestamp (5 minutes either way), so the attempts
here are signed at the wall clock's second; nothing waits.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from collections.abc import Callable, Sequence

import pytest
import standardwebhooks
import stripe
import svix.webhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ledgerport import catalog
from ledgerport.apps import (
    SCHEMES,
    Scheme,
    new_signing_key,
    public_key,
    signing_key_problem,
)
from ledgerport.engine import (
    hmac_key_cached,
    signature_header,
    signature_headers,
    signing_key_cached,
    verify_asymmetric,
    verify_header,
    verify_standard,
)

DELIVERY_ID = "dlv_5b0f0c0e6f3a1d2e3f4a5b6c"
BODY = (
    b'{"id":"dlv_5b0f0c0e6f3a1d2e3f4a5b6c","eventId":"evt_0c6b3f1e2d4a5b6c7d8e9f00",'
    b'"type":"invoice.created","apiVersion":"2026-09-22","created":1790000000,'
    b'"data":{"id":"inv_1","total":"301.00","memo":"caf\xc3\xa9"}}'
)
TOLERANCE = 300


def _headers(pairs: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """Headers as a receiver's framework hands them over."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in pairs}


def _receiver_key(scheme: Scheme, key: str) -> str:
    """What the developer is given to verify with: the secret, or the public key."""
    return public_key(key) if scheme == "standard-asymmetric" else key


# Each verifier answers whether the receiver, holding ``key``, accepts the attempt.
Verifier = Callable[[str, bytes, dict[str, str]], bool]


def _by_stripe(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        stripe.WebhookSignature.verify_header(
            body.decode(), headers.get("X-Webhook-Signature"), secret, tolerance=TOLERANCE
        )
    except stripe.SignatureVerificationError:
        return False
    return True


def _by_standardwebhooks(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        standardwebhooks.Webhook(secret).verify(body, headers)
    except standardwebhooks.WebhookVerificationError:
        return False
    return True


def _by_svix(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    try:
        svix.webhooks.Webhook(secret).verify(body, headers)
    except svix.webhooks.WebhookVerificationError:
        return False
    return True


def _by_ed25519(public: str, body: bytes, headers: dict[str, str]) -> bool:
    """A receiver's own check, from the ``whpk_`` key and the Standard Webhooks spec only."""
    assert public.startswith("whpk_")
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public[len("whpk_") :]))
    lowered = {name.lower(): value for name, value in headers.items()}
    timestamp = lowered["webhook-timestamp"]
    if abs(time.time() - int(timestamp)) > TOLERANCE:
        return False
    signed = f"{lowered['webhook-id']}.{timestamp}.".encode() + body
    for candidate in lowered["webhook-signature"].split(" "):
        version, _, signature = candidate.partition(",")
        if version != "v1a":
            continue
        try:
            key.verify(base64.b64decode(signature), signed)
        except (InvalidSignature, ValueError):
            continue
        return True
    return False


def _by_own_stripe_helper(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    header = headers.get("X-Webhook-Signature", "")
    return verify_header(header, body, secret, now=time.time(), tolerance=TOLERANCE)


def _by_own_standard_helper(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    return verify_standard(headers, body, secret, now=time.time(), tolerance=TOLERANCE)


def _by_own_asymmetric_helper(public: str, body: bytes, headers: dict[str, str]) -> bool:
    return verify_asymmetric(headers, body, public, now=time.time(), tolerance=TOLERANCE)


VERIFIERS: list[tuple[Scheme, Verifier]] = [
    ("stripe", _by_stripe),
    ("stripe", _by_own_stripe_helper),
    ("standard", _by_standardwebhooks),
    ("standard", _by_svix),
    ("standard", _by_own_standard_helper),
    ("standard-asymmetric", _by_ed25519),
    ("standard-asymmetric", _by_own_asymmetric_helper),
]
VERIFIER_IDS = [
    f"{scheme}-{verifier.__name__.removeprefix('_by_')}" for scheme, verifier in VERIFIERS
]


def test_every_scheme_has_an_independent_verifier() -> None:
    independent = {_by_stripe, _by_standardwebhooks, _by_svix, _by_ed25519}
    assert {scheme for scheme, verifier in VERIFIERS if verifier in independent} == set(SCHEMES)
    assert SCHEMES == ("stripe", "standard", "standard-asymmetric")


@pytest.mark.parametrize(("scheme", "verifier"), VERIFIERS, ids=VERIFIER_IDS)
def test_an_attempt_signed_with_one_key_verifies(scheme: Scheme, verifier: Verifier) -> None:
    key = new_signing_key(scheme)
    pairs = signature_headers(
        scheme, [key], delivery_id=DELIVERY_ID, timestamp=int(time.time()), body=BODY
    )
    assert verifier(_receiver_key(scheme, key), BODY, _headers(pairs))


@pytest.mark.parametrize(("scheme", "verifier"), VERIFIERS, ids=VERIFIER_IDS)
def test_during_a_rotation_each_key_verifies_alone(scheme: Scheme, verifier: Verifier) -> None:
    current, previous, other = (new_signing_key(scheme) for _ in range(3))
    headers = _headers(
        signature_headers(
            scheme,
            [current, previous],
            delivery_id=DELIVERY_ID,
            timestamp=int(time.time()),
            body=BODY,
        )
    )
    assert verifier(_receiver_key(scheme, current), BODY, headers)
    assert verifier(_receiver_key(scheme, previous), BODY, headers)
    assert not verifier(_receiver_key(scheme, other), BODY, headers)


def _tampered(scheme: Scheme, headers: dict[str, str], what: str) -> dict[str, str]:
    changed = dict(headers)
    if what == "timestamp" and scheme == "stripe":
        t, _, rest = changed["X-Webhook-Signature"].partition(",")
        changed["X-Webhook-Signature"] = f"t={int(t.removeprefix('t=')) + 1},{rest}"
    elif what == "timestamp":
        changed["webhook-timestamp"] = str(int(changed["webhook-timestamp"]) + 1)
    elif what == "id":
        changed["webhook-id"] = DELIVERY_ID[:-1] + "d"
    elif what == "signature":
        # The signature's first digit, which carries bits of it whatever the encoding (a last
        # base64 digit may differ in padding bits only), changed for another valid digit.
        name = "X-Webhook-Signature" if scheme == "stripe" else "webhook-signature"
        value = changed[name]
        at = value.index("v1=") + 3 if scheme == "stripe" else value.index(",") + 1
        changed[name] = value[:at] + ("0" if value[at] != "0" else "1") + value[at + 1 :]
    return changed


TAMPERINGS = [
    (scheme, verifier, what)
    for scheme, verifier in VERIFIERS
    for what in ("body", "timestamp", "id", "signature", "key")
    # the stripe scheme signs no id: its X-Webhook-Id is not among the headers it adds
    if not (scheme == "stripe" and what == "id")
]


@pytest.mark.parametrize(
    ("scheme", "verifier", "what"),
    TAMPERINGS,
    ids=[
        f"{scheme}-{verifier.__name__.removeprefix('_by_')}-{what}"
        for scheme, verifier, what in TAMPERINGS
    ],
)
def test_a_tampered_attempt_is_refused(scheme: Scheme, verifier: Verifier, what: str) -> None:
    key = new_signing_key(scheme)
    headers = _headers(
        signature_headers(
            scheme, [key], delivery_id=DELIVERY_ID, timestamp=int(time.time()), body=BODY
        )
    )
    assert verifier(_receiver_key(scheme, key), BODY, headers)
    body = BODY.replace(b"301.00", b"391.00") if what == "body" else BODY
    receiver_key = new_signing_key(scheme) if what == "key" else key
    assert not verifier(_receiver_key(scheme, receiver_key), body, _tampered(scheme, headers, what))


@pytest.mark.parametrize(("scheme", "verifier"), VERIFIERS, ids=VERIFIER_IDS)
def test_an_attempt_signed_long_ago_is_refused(scheme: Scheme, verifier: Verifier) -> None:
    key = new_signing_key(scheme)
    signed_at = int(time.time()) - 3600
    pairs = signature_headers(
        scheme, [key], delivery_id=DELIVERY_ID, timestamp=signed_at, body=BODY
    )
    assert not verifier(_receiver_key(scheme, key), BODY, _headers(pairs))


def test_the_stripe_scheme_is_todays_header_unchanged() -> None:
    keys = [new_signing_key("stripe"), new_signing_key("stripe")]
    pairs = signature_headers("stripe", keys, delivery_id=DELIVERY_ID, timestamp=17, body=BODY)
    assert pairs == [(b"X-Webhook-Signature", signature_header(keys, 17, BODY).encode())]


def test_the_standard_scheme_signs_id_timestamp_and_body_with_the_decoded_secret() -> None:
    keys = [new_signing_key("standard"), new_signing_key("standard")]
    pairs = signature_headers("standard", keys, delivery_id=DELIVERY_ID, timestamp=17, body=BODY)
    signed = DELIVERY_ID.encode() + b".17." + BODY
    expected = [
        "v1,"
        + base64.b64encode(
            hmac.new(base64.b64decode(k[6:]), signed, hashlib.sha256).digest()
        ).decode()
        for k in keys
    ]
    assert pairs == [
        (b"webhook-id", DELIVERY_ID.encode()),
        (b"webhook-timestamp", b"17"),
        (b"webhook-signature", " ".join(expected).encode()),
    ]


def test_the_asymmetric_scheme_signs_the_same_text_with_ed25519() -> None:
    keys = [new_signing_key("standard-asymmetric"), new_signing_key("standard-asymmetric")]
    pairs = signature_headers(
        "standard-asymmetric", keys, delivery_id=DELIVERY_ID, timestamp=17, body=BODY
    )
    signed = DELIVERY_ID.encode() + b".17." + BODY
    # Ed25519 signatures are deterministic (RFC 8032), so the expected value can be made again.
    expected = [
        "v1a,"
        + base64.b64encode(
            Ed25519PrivateKey.from_private_bytes(base64.b64decode(k[5:])).sign(signed)
        ).decode()
        for k in keys
    ]
    assert pairs == [
        (b"webhook-id", DELIVERY_ID.encode()),
        (b"webhook-timestamp", b"17"),
        (b"webhook-signature", " ".join(expected).encode()),
    ]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_an_attempt_needs_a_key(scheme: Scheme) -> None:
    with pytest.raises(ValueError, match="at least one"):
        signature_headers(scheme, [], delivery_id=DELIVERY_ID, timestamp=17, body=BODY)


def test_an_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown signature scheme 'hmac'"):
        signature_headers(
            "hmac",  # type: ignore[arg-type]
            [new_signing_key("standard")],
            delivery_id=DELIVERY_ID,
            timestamp=17,
            body=BODY,
        )
    with pytest.raises(ValueError, match="unknown signature scheme"):
        new_signing_key("hmac")  # type: ignore[arg-type]
    assert signing_key_problem("hmac", "whsec_x") == "unknown signature scheme 'hmac'"  # type: ignore[arg-type]


@pytest.mark.parametrize("scheme", ["standard", "standard-asymmetric"])
def test_a_standard_message_id_holds_no_dot(scheme: Scheme) -> None:
    with pytest.raises(ValueError, match="no dot"):
        signature_headers(
            scheme, [new_signing_key(scheme)], delivery_id="dlv_1.2", timestamp=17, body=BODY
        )


@pytest.mark.parametrize(
    ("scheme", "key_of"),
    [
        ("standard", "stripe"),
        ("standard", "standard-asymmetric"),
        ("standard-asymmetric", "stripe"),
        ("standard-asymmetric", "standard"),
    ],
)
def test_a_key_of_another_scheme_does_not_sign_and_is_not_quoted(
    scheme: Scheme, key_of: Scheme
) -> None:
    key = new_signing_key(key_of)
    with pytest.raises(ValueError, match=f"a {scheme} signing") as refused:
        signature_headers(scheme, [key], delivery_id=DELIVERY_ID, timestamp=17, body=BODY)
    assert key[6:] not in str(refused.value)


# Keys


KEY_FORMS: dict[Scheme, re.Pattern[str]] = {
    "stripe": re.compile(r"whsec_[A-Za-z0-9_-]{43}"),
    "standard": re.compile(r"whsec_[A-Za-z0-9+/]{43}="),
    "standard-asymmetric": re.compile(r"whsk_[A-Za-z0-9+/]{43}="),
}


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_new_key_has_its_schemes_form_and_is_fresh(scheme: Scheme) -> None:
    keys = {new_signing_key(scheme) for _ in range(20)}
    assert len(keys) == 20
    for key in keys:
        assert KEY_FORMS[scheme].fullmatch(key), key
    assert all(key.startswith(catalog.WEBHOOK_SECRET_PREFIX) for key in keys) == (
        scheme != "standard-asymmetric"
    )


def test_a_standard_secret_is_32_random_bytes_in_standard_base64() -> None:
    # Over enough secrets, standard base64's own digits turn up (base64url has - and _ instead).
    texts = "".join(new_signing_key("standard")[6:] for _ in range(64))
    assert "+" in texts
    assert "/" in texts
    assert len(base64.b64decode(new_signing_key("standard")[6:], validate=True)) == 32


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("key_of", SCHEMES)
def test_a_key_is_valid_for_its_own_scheme_only(scheme: Scheme, key_of: Scheme) -> None:
    key = new_signing_key(key_of)
    problem = signing_key_problem(scheme, key)
    if scheme == key_of:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(f"a {scheme} signing")
        assert key[5:] not in problem


@pytest.mark.parametrize(
    ("scheme", "key"),
    [
        ("stripe", "whsec_" + "k" * 42),
        ("stripe", "whsk_" + "k" * 43),
        ("standard", "whsec_" + base64.b64encode(bytes(23)).decode()),
        ("standard", "whsec_" + base64.b64encode(bytes(65)).decode()),
        ("standard", "whsec_" + base64.b64encode(bytes(32)).decode().rstrip("=")),
        ("standard", "whsec_" + base64.b64encode(bytes(32)).decode()[:-2] + "B="),
        ("standard", "whsec_ " + base64.b64encode(bytes(32)).decode()),
        ("standard", "whsk_" + base64.b64encode(bytes(32)).decode()),
        ("standard-asymmetric", "whsk_" + base64.b64encode(bytes(31)).decode()),
        ("standard-asymmetric", "whsk_" + base64.b64encode(bytes(64)).decode()),
        ("standard-asymmetric", "whpk_" + base64.b64encode(bytes(32)).decode()),
        ("standard-asymmetric", "whsk_" + base64.urlsafe_b64encode(b"\xff" * 32).decode()),
    ],
)
def test_malformed_keys_are_refused(scheme: Scheme, key: str) -> None:
    assert signing_key_problem(scheme, key) is not None


def test_the_public_key_is_whpk_and_the_raw_ed25519_public_key() -> None:
    # RFC 8032, section 7.1, TEST 1.
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    public = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    private_key = "whsk_" + base64.b64encode(seed).decode()
    assert signing_key_problem("standard-asymmetric", private_key) is None
    assert public_key(private_key) == "whpk_" + base64.b64encode(public).decode()


@pytest.mark.parametrize("key", ["whsec_" + base64.b64encode(bytes(32)).decode(), "whpk_"])
def test_only_a_private_key_has_a_public_key(key: str) -> None:
    with pytest.raises(ValueError, match="whsk_"):
        public_key(key)


@pytest.mark.parametrize(
    ("scheme", "cache"),
    [("standard", hmac_key_cached), ("standard-asymmetric", signing_key_cached)],
)
def test_a_key_is_derived_once_however_many_attempts_it_signs(
    scheme: Scheme, cache: Callable[[str], object]
) -> None:
    key = new_signing_key(scheme)
    before = cache.cache_info()  # type: ignore[attr-defined]
    for timestamp in range(5):
        signature_headers(scheme, [key], delivery_id=DELIVERY_ID, timestamp=timestamp, body=BODY)
    after = cache.cache_info()  # type: ignore[attr-defined]
    assert (after.misses - before.misses, after.hits - before.hits) == (1, 4)
