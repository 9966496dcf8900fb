-- ledgerport_count_limits: a rate-limit take (or hit) of several budgets as one statement,
-- with the counting of ledgerport.auth._shared_limits (LIMIT_BUCKETS buckets per window, a
-- bucket counted while any of it lies in the window) and of the Redis limiter's script. Run on
-- its own, the statement is its own transaction: the rows are created if missing and locked in
-- one order (budget, key), so two takes never wait on each other in a cycle; the budgets are
-- decided together (mode 'take': one without room refuses the take and uses up none of them;
-- mode 'hit': counted whatever the room) and written back before the locks go.
--
-- Times are the caller's clock (now), never the database's.
-- Answers {refused, wait, remaining_1, reset_1, remaining_2, reset_2, ...}: the position (from
-- 1) of the first budget without room, 0 when none; the seconds until every refusing budget
-- has room; then each budget's calls left and seconds until it is whole again.
CREATE FUNCTION ledgerport_count_limits(
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
    width DOUBLE PRECISION;
    stored TEXT;
    indexes BIGINT[];
    counts BIGINT[];
    totals BIGINT[] := '{}';
    newest BIGINT[] := '{}';
    refused INTEGER := 0;
    wait DOUBLE PRECISION := 0;
    excess BIGINT;
    gone BIGINT;
    at BIGINT;
    answer DOUBLE PRECISION[];
    states TEXT[] := '{}';
BEGIN
    INSERT INTO rate_limits (budget, key, state, expires_at)
    SELECT DISTINCT b, k, '', 0 FROM unnest(budgets, keys) AS u(b, k) ORDER BY b, k
    ON CONFLICT (budget, key) DO UPDATE SET budget = excluded.budget;
    FOR j IN 1 .. n LOOP
        width := windows[j] / buckets;
        SELECT state INTO stored FROM rate_limits WHERE budget = budgets[j] AND key = keys[j];
        SELECT coalesce(array_agg((e ->> 0)::BIGINT ORDER BY (e ->> 0)::BIGINT), '{}'),
               coalesce(array_agg((e ->> 1)::BIGINT ORDER BY (e ->> 0)::BIGINT), '{}')
          INTO indexes, counts
          FROM jsonb_array_elements(
                   CASE WHEN stored = '' THEN '[]'::JSONB ELSE stored::JSONB END) AS e
         WHERE (e ->> 0)::BIGINT * width > now - windows[j];
        totals[j] := coalesce((SELECT sum(c) FROM unnest(counts) AS c), 0);
        newest[j] := indexes[cardinality(indexes)];
        excess := totals[j] - limits[j] + 1;
        IF mode = 'take' AND excess > 0 THEN
            gone := 0;
            FOR i IN 1 .. cardinality(indexes) LOOP
                gone := gone + counts[i];
                IF gone >= excess THEN
                    wait := greatest(wait, greatest(1, ceil(indexes[i] * width + windows[j] - now)));
                    EXIT;
                END IF;
            END LOOP;
            IF refused = 0 THEN
                refused := j;
            END IF;
        END IF;
        IF cardinality(indexes) > 0 THEN
            states[j] := (SELECT jsonb_agg(jsonb_build_array(x, c) ORDER BY x)::TEXT
                            FROM unnest(indexes, counts) AS u(x, c));
        ELSE
            states[j] := '[]';
        END IF;
        IF refused = 0 OR mode = 'hit' THEN
            at := ceil(now / width)::BIGINT;
            states[j] := (
                SELECT jsonb_agg(jsonb_build_array(x, c) ORDER BY x)::TEXT FROM (
                    SELECT x, sum(c) AS c FROM (
                        SELECT * FROM unnest(indexes, counts) AS u(x, c)
                        UNION ALL SELECT at, 1
                    ) AS merged GROUP BY x
                ) AS added);
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
