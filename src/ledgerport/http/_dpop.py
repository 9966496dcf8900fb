"""DPoP (RFC 9449) at the HTTP edge: the proofs of token requests and of data API calls.

A proof names the request it was made for by its method and URL: the URL is the service's
public one (``LEDGERPORT_BASE_URL`` and the request's path), which is what a client calls and
what discovery names, whatever address a proxy forwards to. Each proof is recorded as used
(``Platform.proofs``) once the request is known to be one the proof may be used for: at the
token endpoint once the client is authenticated, on the data API once the token is found live
and bound to the proof's key.

With server nonces on (LEDGERPORT_DPOP_NONCE=on), every answer to a request with a proof
carries the nonce to use next (``DPoP-Nonce``).
"""

from __future__ import annotations

from quart import g, request

from ledgerport import apps, auth
from ledgerport.platform import Platform

from ._context import platform, presented_request

DPOP_NONCE_KEY = "dpop_nonce"
"""The request's ``g`` attribute holding the ``DPoP-Nonce`` its answer carries (``_app``)."""


def _proof_values(p: Platform) -> list[str]:
    values: list[str] = request.headers.getlist("DPoP")
    nonces = p.dpop_nonces
    if values and nonces is not None:
        setattr(g, DPOP_NONCE_KEY, nonces.current(p.now()))
    return values


def token_request_proof() -> tuple[auth.Proof | None, auth.OAuthError | None]:
    """The token request's DPoP proof checked (not yet recorded): None when it carries none;
    the error to answer once the client is authenticated when it is refused."""
    p = platform()
    values = _proof_values(p)
    if not values:
        return None, None
    _, path, _ = presented_request()
    try:
        proof = auth.check_proof(
            values,
            method=request.method,
            url=f"{p.config.base_url}{path}",
            now=p.now(),
            nonces=p.dpop_nonces,
        )
    except auth.OAuthError as error:
        return None, error
    return proof, None


async def token_binding(app: apps.App, proof: auth.Proof | None) -> str | None:
    """The DPoP key the authenticated ``app``'s new tokens are bound to: its proof's, recorded
    as used now (a replay is refused), or None without one, unless the client was registered
    to present one (``dpop_bound_access_tokens``)."""
    if proof is None:
        if auth.requires_dpop(app):
            raise auth.InvalidDpopProof("this client must present a DPoP proof")
        return None
    proofs = platform().proofs
    assert proofs is not None
    if not await proofs.first_use(proof):
        raise auth.InvalidDpopProof("the proof was used already (its jti)")
    return proof.jkt


def call_proof(token: str) -> auth.Proof:
    """The DPoP proof of a data API call presenting ``token`` as ``Authorization: DPoP``,
    checked (with its ``ath``), not yet recorded; refused with a DPoP challenge."""
    p = platform()
    method, path, _ = presented_request()
    try:
        return auth.check_proof(
            _proof_values(p),
            method=method,
            url=f"{p.config.base_url}{path}",
            now=p.now(),
            access_token=token,
            nonces=p.dpop_nonces,
        )
    except auth.UseDpopNonce as error:
        raise auth.DpopRefused(
            "The DPoP proof must carry the nonce in the DPoP-Nonce header",
            error="use_dpop_nonce",
            nonce=error.nonce,
        ) from error
    except auth.OAuthError as error:
        raise auth.DpopRefused(
            f"The DPoP proof is refused: {error.description}", error="invalid_dpop_proof"
        ) from error


async def check_binding(grant: auth.AccessGrant, proof: auth.Proof | None) -> None:
    """Refuse a call whose token and proof do not go together: a bound token presented as
    Bearer, an unbound one as DPoP, a proof of another key, or a proof used already."""
    if grant.jkt is None:
        if proof is not None:
            raise auth.DpopRefused(
                "The access token is not bound to a DPoP key: present it as Bearer",
                error="invalid_token",
            )
        return
    if proof is None:
        raise auth.DpopRefused(
            "The access token is bound to a DPoP key: present it as Authorization: DPoP with a"
            " proof",
            error="invalid_token",
        )
    if proof.jkt != grant.jkt:
        raise auth.DpopRefused(
            "The DPoP proof's key is not the one the access token is bound to",
            error="invalid_dpop_proof",
        )
    proofs = platform().proofs
    assert proofs is not None
    if not await proofs.first_use(proof):
        raise auth.DpopRefused(
            "The DPoP proof was used already (its jti)", error="invalid_dpop_proof"
        )
