-- bloomamq demo: approximate membership filters in SQL.
-- Run by tools/demo against a throwaway cluster; every statement is echoed.
\pset pager off
-- serial plans keep the EXPLAIN output short and readable
SET max_parallel_workers_per_gather = 0;
SET jit = off;

CREATE EXTENSION bloomamq;

-------------------------------------------------------------------------------
-- 1. The data: a month of events, 1M rows, 30 days, 200,000 users.
-------------------------------------------------------------------------------
CREATE TABLE events AS
SELECT date '2024-01-01' + (i % 30)             AS day,
       (i::bigint * 2654435761) % 200000 + 1     AS user_id,
       'user_' || ((i::bigint * 2654435761) % 200000 + 1) AS user_name
FROM generate_series(1, 1000000) i;
ANALYZE events;

-------------------------------------------------------------------------------
-- 2. Build one filter per day with the aggregate (default kind 'blocked',
--    1% false-positive rate).
-------------------------------------------------------------------------------
CREATE TABLE day_filters AS
SELECT day, amq_agg(user_id) AS ids, amq_agg(user_name) AS names
FROM events
GROUP BY day;

-- A few kB per day for the 20,000 users active that day.
SELECT day, amq_kind(ids), amq_count(ids), octet_length(ids::bytea) AS bytes,
       round((octet_length(ids::bytea) * 8.0 / amq_count(ids))::numeric, 2) AS bits_per_key
FROM day_filters
ORDER BY day
LIMIT 5;

SELECT jsonb_pretty(amq_info(ids)) FROM day_filters WHERE day = '2024-01-01';

-------------------------------------------------------------------------------
-- 3. Probe: on which days can user 42 have been active?
--    A filter never answers false for a key it holds; it may answer true for
--    about 1% of keys it does not.
-------------------------------------------------------------------------------
SELECT day FROM day_filters WHERE ids @> 42 ORDER BY day;

-- the exact answer, for comparison
SELECT DISTINCT day FROM events WHERE user_id = 42 ORDER BY day;

-- text keys resolve without a cast
SELECT day FROM day_filters WHERE names @> 'user_42' ORDER BY day;

-- a user that never appears: (almost) no day
SELECT count(*) AS days_maybe FROM day_filters WHERE ids @> 4242424242;

-- false-positive rate measured over 100,000 keys that no day holds
SELECT amq_fpr(ids) AS estimated_fpr,
       (SELECT avg((ids @> k)::int) FROM generate_series(1000001, 1100000) k) AS measured_fpr
FROM day_filters
WHERE day = '2024-01-01';

-------------------------------------------------------------------------------
-- 4. Filters made by hand: from an array, and one that grows key by key
--    (dedup of incoming items).
-------------------------------------------------------------------------------
SELECT f @> 'alice' AS alice, f @> 'mallory' AS mallory
FROM (SELECT amq_from_array(ARRAY['alice', 'bob', 'carol']) AS f) s;

SELECT amq_contains(f, 'bob'::text) AS bob, 'dave' <@ f AS dave, amq_count(f)
FROM (SELECT amq_add(amq_add(amq_new('bloom', 1000), 'bob'::text), 'dave'::text) AS f) s;

-------------------------------------------------------------------------------
-- 5. A pre-filtered join: 1,000 VIP users, half of them active this month.
--    The filter of the small side is an InitPlan built once; rows of the big
--    side that cannot join are dropped by a cheap probe before the join.
-------------------------------------------------------------------------------
CREATE TABLE vip AS
SELECT i * 97 AS id FROM generate_series(1, 500) i         -- active users
UNION ALL
SELECT 1000000 + i FROM generate_series(1, 500) i;         -- never seen
ANALYZE vip;

-- PostgreSQL's own plan
EXPLAIN (ANALYZE, COSTS OFF)
SELECT count(*) FROM events b JOIN vip s ON b.user_id = s.id;

-- the same join, pre-filtered: "Rows Removed by Filter" on the scan of events
EXPLAIN (ANALYZE, COSTS OFF)
SELECT count(*) FROM events b JOIN vip s ON b.user_id = s.id
WHERE b.user_id <@ (SELECT amq_agg(id) FROM vip);

-- same answer
SELECT (SELECT count(*) FROM events b JOIN vip s ON b.user_id = s.id) AS plain,
       (SELECT count(*) FROM events b JOIN vip s ON b.user_id = s.id
        WHERE b.user_id <@ (SELECT amq_agg(id) FROM vip)) AS prefiltered;


-------------------------------------------------------------------------------
-- 6. An indexed lookup: an amq index keeps one exact-sized filter per range
--    of 64 heap pages; a lookup probes them all and reads the heap pages of
--    the ranges that may hold the key (here: one range).
-------------------------------------------------------------------------------
CREATE TABLE traces AS
SELECT md5(i::text)::uuid AS trace_id, i % 1000 AS service, repeat('x', 40) AS payload
FROM generate_series(1, 200000) i;
CREATE INDEX traces_amq ON traces USING amq (trace_id);
ANALYZE traces;

SELECT pg_size_pretty(pg_relation_size('traces')) AS table_size,
       pg_size_pretty(pg_relation_size('traces_amq')) AS amq_index_size;

EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF)
SELECT * FROM traces WHERE trace_id = md5('4242')::uuid;
