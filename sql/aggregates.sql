-- amq_agg and amq_union_agg: exact sizing, fixed-capacity builds, NULLs,
-- many groups, parallel plans.

-- run q; return its error's SQLSTATE, message and detail
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' (' || nullif(detail, '') || ')', '');
END $$;

CREATE TABLE ev AS
SELECT g AS id, (g % 10000) AS grp, 'user_' || (g % 3000) AS name
FROM generate_series(1, 100000) g;
INSERT INTO ev VALUES (NULL, 1, NULL);
ANALYZE ev;

-- exact sizing: keys are the distinct non-NULL keys; no false negatives
SELECT amq_count(f) AS keys, amq_kind(f) AS kind,
	(SELECT count(*) FROM ev WHERE NOT f @> id) AS false_negatives
FROM (SELECT amq_agg(id) AS f FROM ev) s;
SELECT amq_count(f) AS keys, (SELECT count(*) FROM ev WHERE NOT f @> name) AS false_negatives
FROM (SELECT amq_agg(name) AS f FROM ev) s;

-- every overload
SELECT amq_kind(amq_agg(id, 0.001)) AS k1, amq_kind(amq_agg(id, 0.01, 'bloom')) AS k2,
	amq_kind(amq_agg(id, 0.01, 'blocked', 200000)) AS k3 FROM ev;
-- NULL options take the defaults
SELECT amq_info(amq_agg(id, NULL, NULL)) ->> 'target_fpr' AS fpr FROM ev;

-- the exact-sized filter is the one amq_from_array builds
SELECT (SELECT amq_agg(id) FROM ev)::bytea = amq_from_array((SELECT array_agg(id) FROM ev))::bytea AS same;
-- a lower fpr takes more bits per key
SELECT (amq_info(amq_agg(id, 0.001)) ->> 'bytes')::int > (amq_info(amq_agg(id, 0.01)) ->> 'bytes')::int AS bigger FROM ev;

-- with a capacity: fixed size whatever the input, keys counted once
SELECT amq_info(f) ->> 'payload_bytes' = amq_info(amq_new('blocked', 500000)) ->> 'payload_bytes' AS fixed,
	amq_count(f) BETWEEN 99000 AND 100000 AS keys,
	(SELECT count(*) FROM ev WHERE NOT f @> id) AS false_negatives
FROM (SELECT amq_agg(id, 0.01, 'blocked', 500000) AS f FROM ev) s;

-- rows go into a fixed-size filter in batches: the same filter, and the same
-- key count, as adding them one at a time
SELECT (SELECT amq_agg(id, 0.01, k, 500000) FROM ev)::bytea
	= amq_add(amq_new(k, 500000, 0.01), (SELECT array_agg(id) FROM ev))::bytea AS same
FROM unnest(ARRAY['blocked', 'bloom', 'twobit', 'counting']) k;
-- and fewer rows than a batch
SELECT (SELECT amq_agg(id, 0.01, 'blocked', 1000) FROM ev WHERE id <= 5)::bytea
	= amq_add(amq_new('blocked', 1000, 0.01), ARRAY[1, 2, 3, 4, 5])::bytea AS same_few;

-- NULLs: skipped; all-NULL input gives an empty filter, no rows give NULL
SELECT amq_count(amq_agg(x)) FROM (VALUES (NULL::int), (NULL)) v(x);
SELECT amq_agg(x) IS NULL AS is_null FROM (SELECT 1 AS x WHERE false) s;
SELECT amq_agg(x) @> 1 AS probe_empty FROM (VALUES (NULL::int)) v(x);

-- GROUP BY with 10,000 groups: small states, each filter answers for its group
CREATE TABLE per_group AS SELECT grp, amq_agg(id) AS f FROM ev WHERE id IS NOT NULL GROUP BY grp;
SELECT count(*) AS groups, sum(amq_count(f)) AS keys, max(octet_length(f::bytea)) < 200 AS small
FROM per_group;
SELECT count(*) AS false_negatives FROM ev JOIN per_group p USING (grp) WHERE NOT p.f @> ev.id;
SELECT count(*) AS groups_claiming_42 FROM per_group WHERE f @> 42;

-- amq_union_agg: union of per-group filters of one geometry
CREATE TABLE per_group_fixed AS
SELECT grp % 10 AS grp, amq_agg(id, 0.01, 'blocked', 200000) AS f FROM ev GROUP BY grp % 10;
SELECT amq_count(u) BETWEEN 95000 AND 105000 AS keys_estimated_near,
	(SELECT count(*) FROM ev WHERE NOT u @> id) AS false_negatives
FROM (SELECT amq_union_agg(f) AS u FROM per_group_fixed) s;
SELECT amq_union_agg(f) IS NULL AS none FROM per_group_fixed WHERE false;
SELECT pg_temp.err($$SELECT amq_union_agg(f) FROM (VALUES (amq_from_array(ARRAY[1])),
	(amq_from_array(ARRAY(SELECT generate_series(1, 1000))))) v(f)$$);
SELECT pg_temp.err($$SELECT amq_union_agg(f) FROM (VALUES (amq_new('bloom', 10)), (amq_new('blocked', 10))) v(f)$$);

-- parallel aggregation: partial states are serialized and combined
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT amq_agg(id) FROM ev;
CREATE TABLE par AS SELECT amq_agg(id) AS f, amq_agg(name) AS fn,
	amq_agg(id, 0.01, 'blocked', 200000) AS fc, amq_agg(id, 0.01, 'bloom') AS fb FROM ev;
-- with the leader's partial state too: three sorted partial states merged,
-- keys repeated across them, and a static kind
SET parallel_leader_participation = on;
CREATE TABLE par3 AS SELECT amq_agg(id % 7000) AS fd, amq_agg(id, 0.01, 'fuse') AS ff FROM ev;
EXPLAIN (COSTS OFF) SELECT amq_union_agg(f) FROM per_group;
CREATE TABLE par_union AS SELECT amq_union_agg(f) AS u FROM per_group_fixed;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
RESET parallel_leader_participation;
SET max_parallel_workers_per_gather = 0;
-- the parallel filters equal the serial ones where sizing is exact
SELECT p.f::bytea = (SELECT amq_agg(id) FROM ev)::bytea AS same_id,
	p.fn::bytea = (SELECT amq_agg(name) FROM ev)::bytea AS same_name,
	p.fb::bytea = (SELECT amq_agg(id, 0.01, 'bloom') FROM ev)::bytea AS same_bloom,
	(SELECT count(*) FROM ev WHERE NOT p.fc @> id) AS fixed_false_negatives,
	(SELECT count(*) FROM generate_series(200001, 300000) g WHERE p.fc @> g)
	= (SELECT count(*) FROM generate_series(200001, 300000) g
	   WHERE (SELECT amq_agg(id, 0.01, 'blocked', 200000) FROM ev) @> g) AS fixed_same_answers
FROM par p;
SELECT (SELECT count(*) FROM ev WHERE NOT u @> id) AS false_negatives,
	u::bytea = (SELECT amq_union_agg(f) FROM per_group_fixed)::bytea AS same_union
FROM par_union;
SELECT amq_count(fd) AS keys, fd::bytea = (SELECT amq_agg(id % 7000) FROM ev)::bytea AS same_repeated,
	ff::bytea = (SELECT amq_agg(id, 0.01, 'fuse') FROM ev)::bytea AS same_fuse
FROM par3;
RESET max_parallel_workers_per_gather;

-- errors
SELECT pg_temp.err($$SELECT amq_agg(id, 0.9) FROM ev$$);
SELECT pg_temp.err($$SELECT amq_agg(id, 0.01, 'nope') FROM ev$$);
SELECT pg_temp.err($$SELECT amq_agg(id, 0.01, 'blocked', 0) FROM ev$$);
SELECT pg_temp.err($$SELECT amq_agg(id, 0.0001, 'bloom', 10000000000) FROM ev$$);
SELECT pg_temp.err($$SELECT amq_agg(p) FROM (VALUES ('(1,2)'::point)) v(p)$$);

DROP TABLE ev, per_group, per_group_fixed, par, par3, par_union;
