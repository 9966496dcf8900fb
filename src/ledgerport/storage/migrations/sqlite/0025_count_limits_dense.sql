-- As PostgreSQL's 0025: a shared count's hits kept dense in a column of their own, ``hits``,
-- the text ``[first bucket, its hits, the next bucket's hits, ...]`` where ``state`` held
-- ``[[bucket, hits], ...]``. SQLite's platform counts a process's limits in memory; this
-- table holds counts only where a database limiter was opened over SQLite, and those are
-- made dense here as on PostgreSQL.
ALTER TABLE rate_limits ADD COLUMN hits TEXT NOT NULL DEFAULT '';

UPDATE rate_limits SET hits = (
    WITH RECURSIVE
        pairs(b, n) AS (
            SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
              FROM json_each(rate_limits.state)
        ),
        walk(b, text) AS (
            SELECT min(b), '[' || min(b) || ',' || (SELECT sum(n) FROM pairs
                                                     WHERE b = (SELECT min(b) FROM pairs))
              FROM pairs
            UNION ALL
            SELECT walk.b + 1, walk.text || ',' || coalesce((SELECT sum(n) FROM pairs
                                                             WHERE pairs.b = walk.b + 1), 0)
              FROM walk WHERE walk.b < (SELECT max(b) FROM pairs)
        )
    SELECT text || ']' FROM walk ORDER BY b DESC LIMIT 1
), state = ''
WHERE state LIKE '[[%';
