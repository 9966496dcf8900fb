-- The processes serving this database (nodes), each under the id its claims hold their lease
-- by. A node's row lives as long as the node: on PostgreSQL it holds a session advisory lock
-- on 'node:' || id, which the server drops the moment the process dies; another node that can
-- take that lock takes over the dead node's claims and deletes its row. On SQLite one process
-- owns the file: at start it takes over every claim not its own.
CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL
);
