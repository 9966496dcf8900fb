-- The shared counts' hits kept dense, in a column of their own: ``hits``, the text
-- ``[first bucket, its hits, the next bucket's hits, ...]``, where 0023 and 0024 kept
-- ``[[bucket, hits], ...]`` in ``state``.
--
-- A busy key's count holds a bucket for every second of its minute, and each call parsed and
-- printed all of them with their ten-digit numbers, about a kilobyte per budget: a call cost
-- about half as much again once busy keys' windows had filled. Dense, the same count is about
-- 130 bytes. Counted by four clients against one local PostgreSQL, two budgets a call over
-- 4,096 and 256 keys, 90 s runs alternated (windows full after the first minute): 8,484 and
-- 8,752 calls a second with pairs, 10,801 and 9,451 dense (docs/performance.md).
--
-- A column of its own, so that a process of the previous version still serving while it
-- drains reads no pairs it cannot parse: its ``retry_after`` finds ``state`` empty for the
-- counts this function writes (and counts nothing waiting, until it stops); its takes and hits
-- call this function and count as the new processes do. Lockouts keep their JSON in ``state``.
--
-- Buckets between the first and the newest with no hits are kept as zeros (the first and the
-- newest always have hits), so a count holds at most the window's buckets and one, and more only
-- while another process's clock runs ahead of this one's by more than a bucket.
ALTER TABLE rate_limits ADD COLUMN hits TEXT NOT NULL DEFAULT '';

-- Counts kept as pairs by the previous version, made dense.
UPDATE rate_limits AS r SET state = '', hits = (
    SELECT '[' || bounds.lo || ',' || string_agg(coalesce(found.n, 0)::TEXT, ',' ORDER BY b) || ']'
      FROM (SELECT min((e ->> 0)::BIGINT) AS lo, max((e ->> 0)::BIGINT) AS hi
              FROM jsonb_array_elements(r.state::jsonb) AS e) AS bounds
     CROSS JOIN generate_series(bounds.lo, bounds.hi) AS b
      LEFT JOIN LATERAL (SELECT sum((e ->> 1)::BIGINT) AS n
                           FROM jsonb_array_elements(r.state::jsonb) AS e
                          WHERE (e ->> 0)::BIGINT = b) AS found ON true
     GROUP BY bounds.lo
)
WHERE r.state LIKE '[[%';

-- ledgerport_count_limits, as 0024 counts, over the dense hits.
CREATE OR REPLACE FUNCTION ledgerport_count_limits(
    mode TEXT,
    now DOUBLE PRECISION,
    buckets INTEGER,
    budgets TEXT[],
    keys TEXT[],
    limits INTEGER[],
    windows DOUBLE PRECISION[]
) RETURNS DOUBLE PRECISION[] LANGUAGE plpgsql AS $$
DECLARE
    n INTEGER := cardinality(budgets);
    stored TEXT[] := '{}';
    hits_read TEXT;
    j INTEGER;
    -- The budgets' positions in (budget, key) order, without a query for the usual one or two.
    ordered INTEGER[] := CASE
        WHEN n = 1 THEN ARRAY[1]
        WHEN n = 2 AND (budgets[1], keys[1]) <= (budgets[2], keys[2]) THEN ARRAY[1, 2]
        WHEN n = 2 THEN ARRAY[2, 1]
        ELSE (SELECT array_agg(u.j ORDER BY u.b, u.k)
                FROM unnest(budgets, keys) WITH ORDINALITY AS u(b, k, j))
    END;
    -- A count as read: its first bucket, then the hits of that bucket and of each one after.
    dense BIGINT[];
    first BIGINT;
    m INTEGER;
    states TEXT[] := '{}';
    totals BIGINT[] := '{}';
    newest BIGINT[] := '{}';
    width DOUBLE PRECISION;
    start INTEGER;
    total BIGINT;
    excess BIGINT;
    gone BIGINT;
    at BIGINT;
    refused INTEGER := 0;
    wait DOUBLE PRECISION := 0;
    answer DOUBLE PRECISION[];
BEGIN
    -- Every row locked in (budget, key) order and its hits read, as in 0024.
    FOREACH j IN ARRAY ordered LOOP
        SELECT hits INTO hits_read FROM rate_limits
         WHERE budget = budgets[j] AND key = keys[j] FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO rate_limits (budget, key, state, hits, expires_at)
            VALUES (budgets[j], keys[j], '', '', 0)
            ON CONFLICT (budget, key) DO UPDATE SET budget = excluded.budget
            RETURNING hits INTO hits_read;
        END IF;
        stored[j] := hits_read;
    END LOOP;
    FOR j IN 1 .. n LOOP
        width := windows[j] / buckets;
        IF stored[j] IN ('', '[]') THEN
            dense := '{0}';
        ELSE
            dense := translate(stored[j], '[]', '{}')::BIGINT[];
        END IF;
        -- Bucket first + i - 1 has dense[i + 1] hits, for i from 1 to m.
        first := dense[1];
        m := cardinality(dense) - 1;
        -- The buckets still in the window with hits start at ``start`` (none when past m).
        start := 1;
        WHILE start <= m
              AND ((first + start - 1) * width <= now - windows[j] OR dense[start + 1] = 0) LOOP
            start := start + 1;
        END LOOP;
        total := 0;
        FOR i IN start .. m LOOP
            total := total + dense[i + 1];
        END LOOP;
        totals[j] := total;
        newest[j] := CASE WHEN start <= m THEN first + m - 1 END;
        excess := total - limits[j] + 1;
        IF mode = 'take' AND excess > 0 THEN
            gone := 0;
            FOR i IN start .. m LOOP
                gone := gone + dense[i + 1];
                IF gone >= excess THEN
                    wait := greatest(
                        wait, greatest(1, ceil((first + i - 1) * width + windows[j] - now)));
                    EXIT;
                END IF;
            END LOOP;
            IF refused = 0 THEN
                refused := j;
            END IF;
        END IF;
        IF refused = 0 OR mode = 'hit' THEN
            -- The hit added in its bucket; the buckets before ``start`` dropped.
            at := ceil(now / width)::BIGINT;
            IF start > m THEN
                dense := ARRAY[at, 1];
            ELSE
                IF start > 1 THEN
                    dense := (first + start - 1) || dense[start + 1 : m + 1];
                    first := first + start - 1;
                    m := m - start + 1;
                END IF;
                IF at > first + m - 1 THEN
                    -- A newer bucket, after the empty ones between.
                    dense := dense || array_fill(0::BIGINT, ARRAY[(at - first - m)::INTEGER])
                        || 1::BIGINT;
                ELSIF at >= first THEN
                    dense[at - first + 2] := dense[at - first + 2] + 1;
                ELSE
                    -- A clock behind another process's: the hit goes before the first bucket.
                    dense := ARRAY[at, 1] || array_fill(0::BIGINT, ARRAY[(first - at - 1)::INTEGER])
                        || dense[2 : m + 1];
                END IF;
            END IF;
            states[j] := translate(dense::TEXT, '{}', '[]');
        END IF;
    END LOOP;
    IF refused <> 0 AND mode = 'take' THEN
        answer := ARRAY[refused, wait]::DOUBLE PRECISION[];
        FOR j IN 1 .. n LOOP
            width := windows[j] / buckets;
            answer := answer || greatest(0, limits[j] - totals[j])::DOUBLE PRECISION;
            answer := answer || CASE WHEN newest[j] IS NULL THEN 0
                ELSE greatest(1, ceil(newest[j] * width + windows[j] - now)) END;
        END LOOP;
        RETURN answer;
    END IF;
    answer := ARRAY[0, 0]::DOUBLE PRECISION[];
    FOR j IN 1 .. n LOOP
        width := windows[j] / buckets;
        at := greatest(coalesce(newest[j], 0), ceil(now / width)::BIGINT);
        UPDATE rate_limits SET hits = states[j], expires_at = at * width + windows[j]
         WHERE budget = budgets[j] AND key = keys[j];
        answer := answer || greatest(0, limits[j] - totals[j] - 1)::DOUBLE PRECISION;
        answer := answer || greatest(1, ceil(at * width + windows[j] - now));
    END LOOP;
    RETURN answer;
END;
$$;
