-- Every kind through every SQL entry point that makes sense for it, and
-- every request a kind cannot serve.

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

-- bloomamq_test.scale (a fraction, default 1; tools/valgrind-check sets it)
-- shrinks the absent keys probed for false positives, to no fewer than
-- 20,000, and the table of the parallel aggregates, to no fewer than
-- 40,000 rows: the output is the same at any scale.
SELECT coalesce(nullif(current_setting('bloomamq_test.scale', true), '')::float8, 1) AS scale \gset
SELECT greatest(20000, round(100000 * :scale))::int AS nprobes,
	greatest(40000, round(200000 * :scale))::int AS nbig \gset

CREATE TABLE keys AS SELECT g AS id, 'key-' || g AS name FROM generate_series(1, 20000) g;
CREATE TABLE kinds (kind text PRIMARY KEY, dynamic bool, removes bool, unions bool);
INSERT INTO kinds VALUES
	('bloom', true, false, true), ('blocked', true, false, true),
	('twobit', true, false, true), ('counting', true, true, true),
	('cuckoo', true, true, false), ('scalable', true, false, false),
	('xor', false, false, false), ('fuse', false, false, false),
	('ribbon', false, false, false);

-- the aggregate builds every kind: no false negatives, and the measured
-- false-positive rate (100,000 absent keys) is near what the filter states
-- (fingerprint kinds state the rate of their fingerprint width) and never
-- far above the 1% asked for
CREATE TABLE built AS
SELECT kind, (SELECT amq_agg(id, 0.01, kind) FROM keys) AS f,
	(SELECT amq_agg(name, 0.01, kind) FROM keys) AS fn
FROM kinds;
SELECT kind, amq_kind(f) = kind AS named, amq_count(f) AS keys,
	(SELECT count(*) FROM keys WHERE NOT f @> id) AS false_negatives,
	(SELECT count(*) FROM keys WHERE NOT fn @> name) AS text_false_negatives,
	fp.n BETWEEN 0.6 * :nprobes * amq_fpr(f) AND 1.4 * :nprobes * amq_fpr(f) AS fpr_as_stated,
	fp.n <= 0.013 * :nprobes AS fpr_within_target
FROM built,
	LATERAL (SELECT count(*) AS n FROM generate_series(1000001, 1000000 + :nprobes) g WHERE f @> g) fp
ORDER BY kind;

-- what amq_info says of each
SELECT kind, i ->> 'keys' AS keys, i ? 'k' AS has_k,
	(i ->> 'fingerprint_bits')::int AS fingerprint_bits,
	round((i ->> 'bits_per_key')::numeric, 0) AS bits_per_key
FROM built, LATERAL amq_info(f) i ORDER BY kind;

-- amq_from_array: each kind, duplicates and NULLs dropped, and the same
-- bytes as the aggregate
SELECT kind, amq_count(a) AS keys, a @> 2 AS has2, a @> 4 AS has4,
	a::bytea = (SELECT amq_agg(x, 0.01, kind) FROM unnest(ARRAY[1, 2, 2, NULL, 3]) x)::bytea AS same_as_agg
FROM kinds, LATERAL amq_from_array(ARRAY[1, 2, 2, NULL, 3], 0.01, kind) a ORDER BY kind;
-- no keys and one key
SELECT kind, amq_count(e) AS keys, e @> 1 AS has1, o @> 7 AS one_has7
FROM kinds, LATERAL amq_from_array('{}'::int[], 0.01, kind) e,
	LATERAL amq_from_array(ARRAY[7], 0.01, kind) o ORDER BY kind;
-- an aggregate over no rows is NULL; over NULL keys only, an empty filter
SELECT kind, (SELECT amq_agg(id, 0.01, kind) FROM keys WHERE false) IS NULL AS null_over_none,
	amq_count((SELECT amq_agg(CASE WHEN id < 0 THEN id END, 0.01, kind) FROM keys WHERE id < 5)) AS keys_over_nulls
FROM kinds ORDER BY kind;

-- dynamic kinds: amq_new, then amq_add of values and arrays
SELECT kind, amq_count(f) AS keys,
	(SELECT count(*) FROM generate_series(1, 2000) g WHERE NOT f @> g) AS false_negatives
FROM kinds,
	LATERAL amq_add(amq_add(amq_new(kind, 2000), ARRAY(SELECT generate_series(1, 1999))), 2000) f
WHERE dynamic ORDER BY kind;
-- static kinds cannot be created empty nor take keys later
SELECT kind, pg_temp.err(format('SELECT amq_new(%L, 100)', kind)) FROM kinds WHERE NOT dynamic ORDER BY kind;
SELECT kind, pg_temp.err(format('SELECT amq_add(amq_from_array(ARRAY[1], 0.01, %L), 2)', kind))
FROM kinds WHERE NOT dynamic ORDER BY kind;
-- nor be built in fixed memory
SELECT pg_temp.err($$SELECT amq_agg(id, 0.01, 'fuse', 1000) FROM keys$$);

-- amq_remove: counting and cuckoo
SELECT kind,
	(SELECT count(*) FROM generate_series(501, 1000) g WHERE NOT f @> g) AS kept_false_negatives,
	(SELECT count(*) FROM generate_series(1, 500) g WHERE f @> g) < 50 AS removed_mostly_gone,
	amq_count(f) AS keys
FROM kinds,
	LATERAL amq_remove(amq_from_array(ARRAY(SELECT generate_series(1, 1000)), 0.01, kind),
					   ARRAY(SELECT generate_series(1, 500))) f
WHERE removes ORDER BY kind;
-- added twice, removed once: still there; removed twice: gone
SELECT kind, amq_remove(f, 42) @> 42 AS after_one, amq_remove(amq_remove(f, 42), 42) @> 42 AS after_two
FROM kinds, LATERAL amq_add(amq_add(amq_new(kind, 100), 42), 42) f
WHERE removes ORDER BY kind;
-- removing a key that is not there changes nothing
SELECT kind, amq_remove(f, 99)::bytea = f::bytea AS unchanged
FROM kinds, LATERAL amq_add(amq_new(kind, 100), 42) f WHERE removes ORDER BY kind;
-- the other kinds cannot remove
SELECT kind, pg_temp.err(format('SELECT amq_remove(amq_from_array(ARRAY[1], 0.01, %L), 1)', kind))
FROM kinds WHERE NOT removes ORDER BY kind;

-- a full cuckoo filter is an error that loses nothing; scalable grows
SELECT pg_temp.err($$SELECT amq_add(amq_new('cuckoo', 10), ARRAY(SELECT generate_series(1, 10000)))$$);
SELECT (SELECT count(*) FROM generate_series(1, 20000) g WHERE NOT f @> g) AS false_negatives,
	(amq_info(f) ->> 'bytes')::int > (amq_info(amq_new('scalable', 100)) ->> 'bytes')::int * 50 AS grew,
	(SELECT count(*) FROM generate_series(1000001, 1000000 + :nprobes) g WHERE f @> g) <= 0.013 * :nprobes AS fpr_within_target,
	amq_count(f) AS keys
FROM amq_add(amq_new('scalable', 100), ARRAY(SELECT generate_series(1, 20000))) f;
-- an aggregate with a capacity grows a scalable filter too
SELECT (SELECT count(*) FROM keys WHERE NOT f @> id) AS false_negatives, amq_count(f) AS keys
FROM (SELECT amq_agg(id, 0.01, 'scalable', 100) AS f FROM keys) s;

-- union and intersection where the kind allows them
SELECT kind,
	(SELECT count(*) FROM generate_series(1, 1500) g WHERE NOT (a | b) @> g) AS union_false_negatives,
	(SELECT count(*) FROM generate_series(501, 1000) g WHERE NOT (a & b) @> g) AS intersection_false_negatives
FROM kinds,
	LATERAL amq_add(amq_new(kind, 2000), ARRAY(SELECT generate_series(1, 1000))) a,
	LATERAL amq_add(amq_new(kind, 2000), ARRAY(SELECT generate_series(501, 1500))) b
WHERE unions ORDER BY kind;
SELECT kind, pg_temp.err(format('SELECT amq_from_array(ARRAY[1], 0.01, %1$L) | amq_from_array(ARRAY[2], 0.01, %1$L)', kind))
FROM kinds WHERE NOT unions ORDER BY kind;
SELECT pg_temp.err($$SELECT amq_new('twobit', 100) | amq_new('counting', 100)$$);
SELECT pg_temp.err($$SELECT amq_new('counting', 100) | amq_new('counting', 1000)$$);
SELECT pg_temp.err($$SELECT amq_union_agg(f) FROM (VALUES (amq_new('cuckoo', 10)), (amq_new('cuckoo', 10))) v(f)$$);

-- auto: a static kind when the aggregate or array sees every key (bloom
-- below 2^-32, which fuse's and ribbon's fingerprints cannot reach),
-- blocked when keys may come later
SELECT amq_kind(amq_new('auto', 100)) AS new,
	amq_kind((SELECT amq_agg(id, 0.01, 'auto', 1000) FROM keys)) AS agg_capacity,
	amq_kind((SELECT amq_agg(id, 0.01, 'auto') FROM keys)) AS agg_1pct,
	amq_kind((SELECT amq_agg(id, 0.004, 'auto') FROM keys)) AS agg_0_4pct,
	amq_kind(amq_from_array(ARRAY[1, 2], 0.001, 'auto')) AS array_0_1pct;
WITH f AS (SELECT p, amq_agg(id, p, 'auto') f
		   FROM keys, unnest(ARRAY[2.3283064365386963e-10, 1e-12]) p GROUP BY p)
SELECT p, amq_kind(f), (SELECT count(*) FROM keys WHERE NOT f @> id) AS missed
FROM f ORDER BY p DESC;
SELECT pg_temp.err($$SELECT amq_new('nosuchkind', 100)$$);

-- static and non-union kinds in parallel aggregates: partial states carry
-- hashes, so the result is the serial one
CREATE TABLE big AS SELECT g AS id FROM generate_series(1, :nbig) g;
ANALYZE big;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT amq_agg(id, 0.01, 'fuse') FROM big;
CREATE TABLE par AS SELECT amq_agg(id, 0.01, 'fuse') AS fuse, amq_agg(id, 0.01, 'ribbon') AS ribbon,
	amq_agg(id, 0.01, 'xor') AS xor, amq_agg(id, 0.01, 'cuckoo', 300000) AS cuckoo,
	amq_agg(id, 0.01, 'scalable', 1000) AS scalable FROM big;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;
SET max_parallel_workers_per_gather = 0;
SELECT fuse::bytea = (SELECT amq_agg(id, 0.01, 'fuse') FROM big)::bytea AS same_fuse,
	ribbon::bytea = (SELECT amq_agg(id, 0.01, 'ribbon') FROM big)::bytea AS same_ribbon,
	xor::bytea = (SELECT amq_agg(id, 0.01, 'xor') FROM big)::bytea AS same_xor,
	cuckoo::bytea = (SELECT amq_agg(id, 0.01, 'cuckoo', 300000) FROM big)::bytea AS same_cuckoo,
	(SELECT count(*) FROM big WHERE NOT (fuse @> id AND ribbon @> id AND xor @> id AND cuckoo @> id AND scalable @> id)) AS false_negatives
FROM par;
RESET max_parallel_workers_per_gather;

-- every kind survives text and binary round trips
SELECT kind, f::text::amqfilter::bytea = f::bytea AS text_round_trip,
	f::bytea::amqfilter::bytea = f::bytea AS bytea_round_trip
FROM built ORDER BY kind;

-- with JIT forced on, where the server has it (else the same plans run
-- interpreted), every kind's probes answer as they do interpreted: JIT may
-- inline bloomamq's functions from its bitcode, which holds the probe for
-- AVX2 beside the scalar one
CREATE TABLE interpreted AS
SELECT kind, (SELECT count(*) FROM generate_series(1000001, 1000000 + :nprobes) g WHERE f @> g) AS fp
FROM built;
SET jit = on;
SET jit_above_cost = 0;
SET jit_inline_above_cost = 0;
SET jit_optimize_above_cost = 0;
SELECT kind, (SELECT count(*) FROM keys WHERE NOT f @> id) AS false_negatives,
	(SELECT count(*) FROM keys WHERE NOT fn @> name) AS text_false_negatives,
	(SELECT count(*) FROM keys WHERE id <@ f) AS contained,
	(SELECT count(*) FROM generate_series(1000001, 1000000 + :nprobes) g WHERE f @> g) = i.fp
		AS same_false_positives
FROM built JOIN interpreted i USING (kind)
ORDER BY kind;
RESET jit_optimize_above_cost;
RESET jit_inline_above_cost;
RESET jit_above_cost;
RESET jit;
