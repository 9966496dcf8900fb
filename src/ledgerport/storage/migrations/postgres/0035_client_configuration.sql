-- RFC 7592: a registered client reads, replaces and deletes its registration with the
-- registration access token it was given at registration, kept as its keyed hash (as every
-- token is) and looked up by it. NULL: the app was not registered at /oauth/register, its
-- token was revoked (presented at another client's address), or the client deleted itself.
ALTER TABLE apps ADD COLUMN registration_token_hash TEXT;
CREATE UNIQUE INDEX apps_registration_token ON apps (registration_token_hash)
    WHERE registration_token_hash IS NOT NULL;
