"""DPoP proofs (RFC 9449 section 4.3) checked without a store: every cause of refusal the RFC
lists, one row each, and the keys and algorithms accepted."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from ledgerport import auth, catalog
from ledgerport.keys import Keyring

from ..dpop_keys import DROP, DpopKey

NOW = 1_790_000_000.0
URL = "https://api.example.com/invoices"
TOKEN = "lp_at_example"
KEY = DpopKey("ES256")
OTHER = DpopKey("ES256")


def check(proof: str | list[str], **kwargs: Any) -> auth.Proof:
    values = proof if isinstance(proof, list) else [proof]
    options: dict[str, Any] = {"method": "GET", "url": URL, "now": NOW, "access_token": TOKEN}
    return auth.check_proof(values, **(options | kwargs))


def good(**kwargs: Any) -> str:
    return KEY.proof("GET", URL, iat=NOW, token=TOKEN, **kwargs)


FAULTS: list[tuple[str, Callable[[], str | list[str]], str]] = [
    ("signed by another key", lambda: good(signer=OTHER.private), "signature does not verify"),
    ("typ missing", lambda: good(header={"typ": DROP}), "typ must be dpop+jwt"),
    ("typ of a plain JWT", lambda: good(header={"typ": "JWT"}), "typ must be dpop+jwt"),
    ("alg none", lambda: good(header={"alg": "none"}, signer=None), "alg must be one of"),
    ("alg HS256", lambda: good(header={"alg": "HS256"}, signer=b"k" * 32), "alg must be one of"),
    (
        "alg ES384",
        lambda: good(header={"alg": "ES384"}, signer=ec.generate_private_key(ec.SECP384R1())),
        "alg must be one of",
    ),
    (
        "alg RS256 with an EC key",
        lambda: good(header={"alg": "RS256"}, signer=DpopKey("RS256").private),
        "is not a key for RS256",
    ),
    ("no jwk", lambda: good(header={"jwk": DROP}), "must carry its public key as jwk"),
    ("jwk not an object", lambda: good(header={"jwk": "key"}), "must carry its public key"),
    (
        "private key in the jwk",
        lambda: good(header={"jwk": KEY.private_jwk}),
        "must hold no private key material",
    ),
    (
        "jwk of another curve",
        lambda: good(header={"jwk": {**KEY.public_jwk, "crv": "P-384"}}),
        "is not a key for ES256",
    ),
    (
        "jwk with a bad point",
        lambda: good(header={"jwk": {**KEY.public_jwk, "x": "AAAA"}}),
        "not a valid public key",
    ),
    (
        "RSA key too short",
        lambda: DpopKey("RS256", rsa_bits=1024).proof("GET", URL, iat=NOW, token=TOKEN),
        "at least 2048 bits",
    ),
    ("no htm", lambda: good(claims={"htm": DROP}), "must carry htm"),
    ("htm of another method", lambda: good(claims={"htm": "POST"}), "htm is not"),
    ("htm in lower case", lambda: good(claims={"htm": "get"}), "htm is not"),
    ("no htu", lambda: good(claims={"htu": DROP}), "must carry htu"),
    ("htu of another path", lambda: good(claims={"htu": f"{URL}/x"}), "htu is not"),
    (
        "htu of another host",
        lambda: good(claims={"htu": "https://evil.example.com/invoices"}),
        "htu is not",
    ),
    (
        "htu of another scheme",
        lambda: good(claims={"htu": "http://api.example.com/invoices"}),
        "htu is not",
    ),
    ("htu not a string", lambda: good(claims={"htu": 7}), "htu is not"),
    ("no ath", lambda: good(claims={"ath": DROP}), "ath does not match"),
    ("ath of another token", lambda: good(claims={"ath": "x" * 43}), "ath does not match"),
    ("no iat", lambda: good(claims={"iat": DROP}), "must carry iat"),
    ("stale iat", lambda: good(claims={"iat": int(NOW - 61)}), "iat is not recent"),
    ("iat in the future", lambda: good(claims={"iat": int(NOW + 6)}), "iat is not recent"),
    ("iat not a number", lambda: good(claims={"iat": "now"}), "iat must be a number"),
    ("no jti", lambda: good(claims={"jti": DROP}), "must carry jti"),
    ("jti empty", lambda: good(claims={"jti": ""}), "jti must be a string"),
    ("jti too long", lambda: good(claims={"jti": "j" * 257}), "jti must be a string"),
    ("not a JWT", lambda: "not-a-jwt", "is not a JWT"),
    ("two parts only", lambda: good().rsplit(".", 1)[0], "is not a JWT"),
    ("garbage header", lambda: "e30x." + good().split(".", 1)[1], "is not a JWT"),
    ("payload not JSON", lambda: ".".join([good().split(".")[0], "bm90IGpzb24", "sig"]), "not"),
    ("empty", lambda: "", "is not a JWT"),
    ("too long", lambda: "a." * 5000 + "b", "is not a JWT"),
    ("no proof", lambda: [], "a DPoP proof is required"),
    ("two proofs", lambda: [good(), good()], "send one DPoP header only"),
]


@pytest.mark.parametrize(
    ("proof", "words"), [(f, w) for _, f, w in FAULTS], ids=[n for n, _, _ in FAULTS]
)
def test_a_faulty_proof_is_refused_saying_why(
    proof: Callable[[], str | list[str]], words: str
) -> None:
    with pytest.raises(auth.InvalidDpopProof, match=re.escape(words)):
        check(proof())


@pytest.mark.parametrize("algorithm", catalog.DPOP_SIGNING_ALGS)
def test_each_accepted_algorithm_proves_its_key(algorithm: str) -> None:
    key = DpopKey(algorithm)
    proof = check(key.proof("GET", URL, iat=NOW, token=TOKEN))
    assert proof.jkt == key.thumbprint
    assert proof.fresh_until == NOW + catalog.DPOP_PROOF_MAX_AGE


@pytest.mark.parametrize(
    "htu",
    [
        f"{URL}?page=2",
        f"{URL}#top",
        "HTTPS://API.example.com/invoices",
        "https://api.example.com:443/invoices",
    ],
)
def test_htu_is_compared_without_query_fragment_case_or_default_port(htu: str) -> None:
    assert check(good(claims={"htu": htu})).jkt == KEY.thumbprint


@pytest.mark.parametrize("offset", [-catalog.DPOP_PROOF_MAX_AGE, 0, catalog.DPOP_PROOF_MAX_SKEW])
def test_iat_is_accepted_within_its_window(offset: float) -> None:
    assert check(good(claims={"iat": int(NOW + offset)})).jti


def test_a_token_request_proof_needs_no_ath() -> None:
    proof = KEY.proof("POST", "https://api.example.com/oauth/token", iat=NOW)
    checked = auth.check_proof(
        [proof], method="POST", url="https://api.example.com/oauth/token", now=NOW
    )
    assert checked.jkt == KEY.thumbprint


def test_the_thumbprint_is_rfc_7638s() -> None:
    # RFC 7638 section 3.1's example key and thumbprint.
    jwk = {
        "kty": "RSA",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6"
        "tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YG"
        "jQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bF"
        "TWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw",
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }
    assert auth.jwk_thumbprint(jwk) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


NONCES = auth.DpopNonces(Keyring("k" * 32))


def test_a_proof_without_the_nonce_is_answered_with_the_nonce_to_use() -> None:
    with pytest.raises(auth.UseDpopNonce) as refused:
        check(good(), nonces=NONCES)
    assert refused.value.nonce == NONCES.current(NOW)
    assert check(good(nonce=refused.value.nonce), nonces=NONCES).jkt == KEY.thumbprint


@pytest.mark.parametrize(
    ("made_at", "accepted"),
    [
        (NOW, True),
        (NOW - catalog.DPOP_NONCE_WINDOW, True),
        (NOW - 2 * catalog.DPOP_NONCE_WINDOW, False),
        (NOW + catalog.DPOP_NONCE_WINDOW, False),
    ],
)
def test_a_nonce_is_accepted_in_its_window_and_the_next(made_at: float, accepted: bool) -> None:
    assert NONCES.accepts(NONCES.current(made_at), NOW) is accepted


@pytest.mark.parametrize("nonce", ["", "zz.abc", "1.", "forged", f"{NONCES.current(NOW)[:-1]}0"])
def test_a_forged_or_malformed_nonce_is_refused(nonce: str) -> None:
    with pytest.raises(auth.UseDpopNonce):
        check(good(nonce=nonce), nonces=NONCES)


def test_another_services_nonce_is_refused() -> None:
    theirs = auth.DpopNonces(Keyring("o" * 32)).current(NOW)
    assert not NONCES.accepts(theirs, NOW)


def test_the_signature_is_checked_also_for_a_key_seen_before() -> None:
    check(good())  # the key is kept now
    forged = good(signer=OTHER.private)
    with pytest.raises(auth.InvalidDpopProof, match="signature"):
        check(forged)
    # A proof whose header decodes to the same key but whose body was altered.
    header, body, signature = good().split(".")
    other_body = good(claims={"htm": "POST"}).split(".")[1]
    with pytest.raises(auth.InvalidDpopProof, match="signature"):
        check(".".join([header, other_body, signature]))
    assert body != other_body


def test_pyjwt_is_what_signs_here() -> None:
    assert jwt.get_unverified_header(good())["typ"] == "dpop+jwt"


@pytest.mark.parametrize(
    "proof",
    [
        lambda: good().split(".")[0] + ".é." + good().split(".")[2],
        lambda: good().split(".")[0] + ".e30=." + good().split(".")[2],
        lambda: good().split(".")[0] + ".W10." + good().split(".")[2],
        lambda: good(header={"crit": ["exp"]}),
        lambda: good()[:-4],
    ],
    ids=["non-ASCII claims", "padded claims", "claims not an object", "crit", "cut signature"],
)
def test_a_proof_of_no_form_is_refused(proof: Callable[[], str]) -> None:
    with pytest.raises(auth.InvalidDpopProof):
        check(proof())
