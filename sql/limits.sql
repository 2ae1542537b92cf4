-- Memory bounds: more keys than a filter was planned for, filters larger
-- than a PostgreSQL value can hold, and GROUP BY with a million groups.
-- Each either succeeds within bounded memory or is an ERROR with its
-- SQLSTATE, saying how large the filter would be and what to change.

SET max_parallel_workers_per_gather = 0;

-- bloomamq_test.scale (a fraction, default 1; tools/valgrind-check sets it)
-- shrinks the million keys and the million groups (to no fewer than
-- 100,000): the output is the same at any scale.
SELECT greatest(100000, round(1000000 * coalesce(nullif(current_setting('bloomamq_test.scale', true), '')::float8, 1)))::int
	AS million \gset

-- run q; return its error's SQLSTATE, message, detail and hint
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
	hint text;
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
	RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' (' || nullif(detail, '') || ')', '')
		|| coalesce(' Hint: ' || nullif(hint, ''), '');
END $$;

-- the hash aggregation node of q's plan, run: batches, peak memory, disk
CREATE FUNCTION pg_temp.hashagg(q text, OUT batches int, OUT peak_kb bigint, OUT disk_kb bigint)
LANGUAGE plpgsql AS $$
DECLARE
	plan jsonb;
	node jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, FORMAT JSON, COSTS OFF, TIMING OFF) ' || q INTO plan;
	node := jsonb_path_query_first(plan, '$.** ? (@."Node Type" == "Aggregate" && @."Strategy" == "Hashed")');
	batches := (node ->> 'HashAgg Batches')::int;
	peak_kb := (node ->> 'Peak Memory Usage')::bigint;
	disk_kb := (node ->> 'Disk Usage')::bigint;
END $$;

-- The session's memory: its memory contexts' total from 14 on; on 13,
-- which has no view of them, the backend's private resident memory.
CREATE FUNCTION pg_temp.session_bytes() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
	IF to_regclass('pg_catalog.pg_backend_memory_contexts') IS NOT NULL THEN
		RETURN (SELECT sum(total_bytes) FROM pg_backend_memory_contexts);
	END IF;
	RETURN substring(pg_read_file('/proc/' || pg_backend_pid() || '/status')
					 FROM 'RssAnon:\s+(\d+) kB')::bigint * 1024;
END $$;

CREATE TABLE lkeys AS SELECT i FROM generate_series(1, 100000) i;
ANALYZE lkeys;

--
-- More keys than the capacity: fixed memory, the rate rises, no key lost
--
SELECT kind, octet_length(f::bytea) AS bytes, amq_count(f) <= 100000 AS counted,
	round(amq_fpr(f)::numeric, 2) AS fpr_now,
	(SELECT count(*) FROM lkeys WHERE NOT f @> i) AS false_negatives
FROM unnest(ARRAY['bloom', 'blocked', 'twobit', 'counting']) kind,
	LATERAL (SELECT amq_agg(i, 0.01, kind, 100) AS f FROM lkeys) a
ORDER BY kind;
-- counting: counters saturate at 15 and are never decremented, so removing
-- keys after an overfill loses none of the others
SELECT count(*) FILTER (WHERE NOT g @> i) AS false_negatives_after_removals
FROM lkeys, (SELECT amq_remove(f, ARRAY(SELECT i FROM lkeys WHERE i <= 1000)) AS g
			FROM (SELECT amq_agg(i, 0.01, 'counting', 100) AS f FROM lkeys) a OFFSET 0) r
WHERE i > 1000;
-- cuckoo and scalable aggregates keep hashes (their partial states cannot
-- be combined by union): a capacity too small sizes the result for the keys
SELECT kind, amq_count(f) AS keys, amq_fpr(f) <= 0.01 AS fpr_within_target,
	(SELECT count(*) FROM lkeys WHERE NOT f @> i) AS false_negatives
FROM unnest(ARRAY['cuckoo', 'scalable']) kind,
	LATERAL (SELECT amq_agg(i, 0.01, kind, 100) AS f FROM lkeys) a
ORDER BY kind;
-- added one by one, a full cuckoo filter refuses the key: no key is lost
SELECT pg_temp.err($$SELECT amq_add(amq_new('cuckoo', 100), ARRAY(SELECT i FROM lkeys))$$);
-- a scalable filter grows stage by stage instead, within its target
SELECT amq_count(f) AS keys, amq_info(f) ->> 'kind' AS kind, amq_fpr(f) <= 0.01 AS fpr_within_target,
	octet_length(f::bytea) > 100000 AS grew,
	(SELECT count(*) FROM lkeys WHERE NOT f @> i) AS false_negatives
FROM (SELECT amq_add(amq_new('scalable', 100), ARRAY(SELECT i FROM lkeys)) AS f OFFSET 0) a;
-- static kinds take no capacity and are built from every key
SELECT pg_temp.err($$SELECT amq_agg(i, 0.01, 'xor', 100) FROM lkeys$$);
SELECT pg_temp.err($$SELECT amq_add(amq_from_array(ARRAY[1, 2], 0.01, 'fuse'), 3)$$);
SELECT kind, amq_count(f) = :million AS every_key, (SELECT count(*) FROM lkeys WHERE NOT f @> i) AS false_negatives,
	octet_length(f::bytea) * 8.0 / :million < 12 AS under_12_bits_per_key
FROM unnest(ARRAY['xor', 'fuse', 'ribbon']) kind,
	LATERAL (SELECT amq_agg(i, 0.01, kind) AS f FROM generate_series(1, :million) i) a
ORDER BY kind;

--
-- Larger than a PostgreSQL value (1 GB): an error saying how large
--
SELECT pg_temp.err($$SELECT amq_new('bloom', 10000000000, 0.01)$$);
SELECT pg_temp.err($$SELECT amq_new('blocked', 9223372036854775807, 0.01)$$);
SELECT pg_temp.err($$SELECT amq_new('counting', 1000000000, 0.01)$$);
SELECT pg_temp.err($$SELECT amq_new('cuckoo', 4294967296, 0.01)$$);
SELECT pg_temp.err($$SELECT amq_new('scalable', 2147483648, 0.01)$$);
SELECT pg_temp.err($$SELECT amq_new('twobit', 1000, 1e-10)$$);
-- a rate that even one key cannot reach in 1 GB, or that a fingerprint
-- kind cannot reach at all
SELECT pg_temp.err($$SELECT amq_new('blocked', 1, 1e-300)$$);
SELECT pg_temp.err($$SELECT amq_new('cuckoo', 4294967296, 1e-10)$$);
-- Parquet readers take at most 128 MB
SELECT pg_temp.err($$SELECT amq_new('parquet', 2147483648, 0.5)$$);
-- aggregates with a capacity fail on their first row, before any work
SELECT pg_temp.err($$SELECT amq_agg(i, 0.01, 'blocked', 10000000000) FROM lkeys$$);
SELECT pg_temp.err($$SELECT amq_agg(i, 0.0001, 'counting', 1000000000) FROM lkeys$$);
-- aggregates and arrays sized from their keys
SELECT pg_temp.err($$SELECT amq_from_array(ARRAY(SELECT i FROM lkeys), 1e-10, 'twobit')$$);
SELECT pg_temp.err($$SELECT amq_agg(i, 1e-300, 'blocked') FROM lkeys$$);
SELECT pg_temp.err($$SELECT amq_from_array(ARRAY[1, 2, 3], 1e-300, 'scalable')$$);
-- the largest rates and tiniest ones that fit still work
SELECT octet_length(amq_new('bloom', 1, 1e-300)::bytea) AS bloom_one_key_1e300,
	amq_new('counting', 1, 4.9e-324) @> 1 AS counting_empty_probe;

--
-- GROUP BY with many groups: a state starts small
--
-- 100,000 groups held in memory at once: well under 1 kB each
SET work_mem = '1GB';
SELECT batches, peak_kb * 1024 / 100000 < 1024 AS under_1kb_per_group
FROM pg_temp.hashagg($$SELECT count(*), sum(octet_length(f::bytea))
	FROM (SELECT amq_agg(i) AS f FROM lkeys GROUP BY i) s$$);
SELECT count(*) AS groups, bool_and(f @> i) AS each_holds_its_key,
	bool_and(NOT f @> i + 1) AS none_holds_the_next, min(amq_count(f)) AS min_keys,
	max(amq_count(f)) AS max_keys, max(octet_length(f::bytea)) AS max_bytes
FROM (SELECT i, amq_agg(i) AS f FROM lkeys GROUP BY i) s;
-- a million groups with little work_mem: hash aggregation spills to disk
-- and stays near work_mem (times hash_mem_multiplier); nothing accumulates
-- in the session's memory afterwards
SET work_mem = '4MB';
-- hash_mem_multiplier's default from 15 (13 has 1): the same plans on every major
SET hash_mem_multiplier = 2;
SELECT pg_temp.session_bytes() AS mem_before \gset
SELECT batches > 1 AS spilled, disk_kb > 0 AS used_disk, peak_kb < 16 * 1024 AS peak_under_16mb
FROM pg_temp.hashagg(format($$SELECT count(*), sum(octet_length(f::bytea)), bool_and(f @> g)
	FROM (SELECT g, amq_agg(g) AS f FROM generate_series(1, %s) g GROUP BY g) s$$, :million));
SELECT pg_temp.session_bytes() - :mem_before < 8 * 1024 * 1024 AS session_memory_steady;
-- groups with a large capacity each: hash aggregation spills instead of
-- holding every group's filter
SELECT batches > 1 AS spilled, peak_kb < 32 * 1024 AS peak_under_32mb
FROM pg_temp.hashagg($$SELECT count(*), sum(octet_length(f::bytea))
	FROM (SELECT amq_agg(i, 0.01, 'blocked', 1000000) AS f FROM lkeys GROUP BY i % 200) s$$);
RESET work_mem;
RESET hash_mem_multiplier;
