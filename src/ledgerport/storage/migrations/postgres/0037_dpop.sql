-- DPoP (RFC 9449): an access token (and a public client's refresh token) bound to the key of the
-- proof it was issued with, kept as that key's JWK SHA-256 thumbprint (RFC 7638), NULL for a
-- bearer token; and each accepted proof's jti, under its keyed hash, kept until the proof could
-- no longer be fresh so that no process accepts it twice. The cleanup purges them by expires_at.
ALTER TABLE access_tokens ADD COLUMN jkt TEXT;
ALTER TABLE refresh_tokens ADD COLUMN jkt TEXT;
CREATE TABLE dpop_proofs (
    proof_hash TEXT PRIMARY KEY,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX dpop_proofs_expiry ON dpop_proofs (expires_at);
