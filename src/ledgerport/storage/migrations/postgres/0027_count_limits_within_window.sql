-- The shared counts' waits never exceed their window (contract.md: a Retry-After never exceeds
-- the window of the limit that answered).
--
-- A count keeps its hits per bucket (a second of a minute), and 0025 counted a bucket until a
-- window after its end. A hit made early in the bucket of now then counted for up to a bucket
-- more than the window, and a refused caller was told to wait that long: a per-minute limit
-- answered Retry-After: 61. Now a count also keeps the time of its newest hit, in
-- ``expires_at`` (a window after it, which is when nothing of the count counts any more, as
-- before), and a bucket counts until a window after the earlier of its end and that newest
-- hit. Every hit still counts for at least its window, so no window holds more than the limit;
-- every bucket that counts ends by the newest hit, so no wait is longer than the window. A
-- count kept by 0025 reads its newest bucket's end there, and counts as it did.
--
-- As before, ``BucketCount`` (auth/_shared_limits.py) counts the same way in Python.

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
    expires_read DOUBLE PRECISION;
    -- Each count's newest hit as its row keeps it: a window before its expires_at.
    latest DOUBLE PRECISION[] := '{}';
    t DOUBLE PRECISION;
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
    -- Every row locked in (budget, key) order and its hits and expiry read, as in 0024.
    FOREACH j IN ARRAY ordered LOOP
        SELECT hits, expires_at INTO hits_read, expires_read FROM rate_limits
         WHERE budget = budgets[j] AND key = keys[j] FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO rate_limits (budget, key, state, hits, expires_at)
            VALUES (budgets[j], keys[j], '', '', 0)
            ON CONFLICT (budget, key) DO UPDATE SET budget = excluded.budget
            RETURNING hits, expires_at INTO hits_read, expires_read;
        END IF;
        stored[j] := hits_read;
        -- The newest hit's time: a window before the count's end (newest_of).
        latest[j] := expires_read - windows[j];
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
        t := latest[j];
        -- The buckets still in the window with hits start at ``start`` (none when past m); a
        -- bucket's last hit was made at the earlier of its end and the newest hit.
        start := 1;
        WHILE start <= m
              AND (least((first + start - 1) * width, t) <= now - windows[j]
                   OR dense[start + 1] = 0) LOOP
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
                    wait := greatest(wait, least(greatest(1, ceil(windows[j])), greatest(1,
                        ceil(least((first + i - 1) * width, t) + windows[j] - now))));
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
                ELSE least(greatest(1, ceil(windows[j])), greatest(1,
                    ceil(least(newest[j] * width, latest[j]) + windows[j] - now))) END;
        END LOOP;
        RETURN answer;
    END IF;
    answer := ARRAY[0, 0]::DOUBLE PRECISION[];
    FOR j IN 1 .. n LOOP
        width := windows[j] / buckets;
        at := greatest(coalesce(newest[j], 0), ceil(now / width)::BIGINT);
        -- Counted at now: the newest hit is now, unless one from a clock ahead is newer.
        t := greatest(latest[j], now);
        UPDATE rate_limits SET hits = states[j], expires_at = least(at * width, t) + windows[j]
         WHERE budget = budgets[j] AND key = keys[j];
        answer := answer || greatest(0, limits[j] - totals[j] - 1)::DOUBLE PRECISION;
        answer := answer || least(greatest(1, ceil(windows[j])),
            greatest(1, ceil(least(at * width, t) + windows[j] - now)));
    END LOOP;
    RETURN answer;
END;
$$;
