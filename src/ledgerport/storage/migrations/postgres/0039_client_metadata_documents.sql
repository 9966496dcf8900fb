-- Client ID metadata documents: a client_id that is an https:// URL names a client whose metadata
-- the server fetches from that URL. The document fetched last is kept here, by its URL, until
-- the time its HTTP caching headers allow (expires_at); an authorization request before then
-- uses it without fetching. A document answered with no-store is not kept.
CREATE TABLE client_metadata_documents (
    client_id TEXT PRIMARY KEY,
    document TEXT NOT NULL,
    fetched_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX client_metadata_documents_expiry ON client_metadata_documents (expires_at);
