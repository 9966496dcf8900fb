-- ledgerport_count_limits, as 0023 counts, writing each row once a call instead of twice.
--
-- 0023 locked the rows with an upsert whose conflict branch made a dummy update: a row that
-- exists (every busy key's, at a steady load) got a new row version to lock it, then another
-- with its new state. Here a row that exists is locked by a read (SELECT ... FOR UPDATE), which
-- makes no row version, and only a missing one is made by the upsert. Half the dead versions
-- a call leaves, and less pruning of the pages the busy keys' rows live on. Counted by four
-- clients against one local PostgreSQL, two budgets a call over 4,096 and 256 keys whose
-- states fill their windows (docs/performance.md): about a tenth more calls a second.
--
-- The rows are still locked in (budget, key) order (one at a time here, in a loop), so two
-- calls never wait on each other in a cycle; the answer and the states written do not change.
-- A row deleted by the sweep while this waited for its lock reads as missing and is made again.
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
    state_read TEXT;
    j INTEGER;
    -- The budgets' positions in (budget, key) order, without a query for the usual one or two.
    ordered INTEGER[] := CASE
        WHEN n = 1 THEN ARRAY[1]
        WHEN n = 2 AND (budgets[1], keys[1]) <= (budgets[2], keys[2]) THEN ARRAY[1, 2]
        WHEN n = 2 THEN ARRAY[2, 1]
        ELSE (SELECT array_agg(u.j ORDER BY u.b, u.k)
                FROM unnest(budgets, keys) WITH ORDINALITY AS u(b, k, j))
    END;
    hits BIGINT[];
    kept BIGINT[];
    states TEXT[] := '{}';
    totals BIGINT[] := '{}';
    newest BIGINT[] := '{}';
    width DOUBLE PRECISION;
    start INTEGER;
    m INTEGER;
    total BIGINT;
    excess BIGINT;
    gone BIGINT;
    at BIGINT;
    refused INTEGER := 0;
    wait DOUBLE PRECISION := 0;
    answer DOUBLE PRECISION[];
BEGIN
    -- Every row locked in (budget, key) order and its state read: one that exists locked by
    -- a read (FOR UPDATE), one that is missing made and locked by the insert.
    FOREACH j IN ARRAY ordered LOOP
        SELECT state INTO state_read FROM rate_limits
         WHERE budget = budgets[j] AND key = keys[j] FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO rate_limits (budget, key, state, expires_at)
            VALUES (budgets[j], keys[j], '', 0)
            ON CONFLICT (budget, key) DO UPDATE SET budget = excluded.budget
            RETURNING state INTO state_read;
        END IF;
        stored[j] := state_read;
    END LOOP;
    FOR j IN 1 .. n LOOP
        width := windows[j] / buckets;
        -- The state, [[bucket, hits], ...] oldest first, read as a two-dimensional array.
        IF stored[j] IN ('', '[]') THEN
            hits := '{}';
        ELSE
            hits := translate(stored[j], '[]', '{}')::BIGINT[];
        END IF;
        m := coalesce(array_length(hits, 1), 0);
        -- The buckets still in the window (from ``start``) and their hits, in one pass.
        start := m + 1;
        total := 0;
        FOR i IN REVERSE m .. 1 LOOP
            EXIT WHEN hits[i][1] * width <= now - windows[j];
            start := i;
            total := total + hits[i][2];
        END LOOP;
        totals[j] := total;
        newest[j] := CASE WHEN start <= m THEN hits[m][1] END;
        excess := total - limits[j] + 1;
        IF mode = 'take' AND excess > 0 THEN
            gone := 0;
            FOR i IN start .. m LOOP
                gone := gone + hits[i][2];
                IF gone >= excess THEN
                    wait := greatest(wait, greatest(1, ceil(hits[i][1] * width + windows[j] - now)));
                    EXIT;
                END IF;
            END LOOP;
            IF refused = 0 THEN
                refused := j;
            END IF;
        END IF;
        IF refused = 0 OR mode = 'hit' THEN
            -- The hit added in its bucket, the buckets kept in order.
            at := ceil(now / width)::BIGINT;
            IF start > m THEN
                kept := ARRAY[[at, 1]];
            ELSIF at > hits[m][1] THEN
                kept := hits[start:m][1:2] || ARRAY[[at, 1]];
            ELSIF at = hits[m][1] THEN
                kept := hits[start:m][1:2];
                kept[m - start + 1][2] := kept[m - start + 1][2] + 1;
            ELSE
                -- A clock behind another process's: the hit goes in an older bucket.
                kept := '{}';
                FOR i IN start .. m LOOP
                    IF at IS NOT NULL AND at < hits[i][1] THEN
                        kept := kept || ARRAY[[at, 1]];
                        at := NULL;
                    END IF;
                    IF at IS NOT NULL AND at = hits[i][1] THEN
                        kept := kept || ARRAY[[at, hits[i][2] + 1]];
                        at := NULL;
                    ELSE
                        kept := kept || ARRAY[[hits[i][1], hits[i][2]]];
                    END IF;
                END LOOP;
            END IF;
            states[j] := translate(kept::TEXT, '{}', '[]');
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
        UPDATE rate_limits SET state = states[j], expires_at = at * width + windows[j]
         WHERE budget = budgets[j] AND key = keys[j];
        answer := answer || greatest(0, limits[j] - totals[j] - 1)::DOUBLE PRECISION;
        answer := answer || greatest(1, ceil(at * width + windows[j] - now));
    END LOOP;
    RETURN answer;
END;
$$;
