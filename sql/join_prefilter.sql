-- Automatic hash-join pre-filters (bloomamq.join_prefilter): where the
-- pre-filter sits, where it must not, what EXPLAIN ANALYZE shows, and a
-- randomized differential test: many generated joins give exactly the same
-- rows with the setting on and off.

-- the planner hook lives in the library: load it in this session
LOAD 'bloomamq';
SHOW bloomamq.join_prefilter;
-- small tables, and every pre-filter placed where it is correct, whatever
-- the planner expects it to remove (the cost rule has its own section)
SET bloomamq.join_prefilter_min_rows = 0;
SET bloomamq.join_prefilter_min_remove = 0;

-- Deterministic data (hashint4 as a portable pseudo-random source).
-- fact: NULL keys, a skewed key, keys of many types; dim: about a third of
-- its keys occur in fact, w selects a fraction of it.
CREATE TABLE jp_fact AS
SELECT i AS id,
	CASE WHEN i % 17 = 0 THEN NULL ELSE abs(hashint4(i)) % 3000 END::int4 AS a,
	(abs(hashint4(i + 1)) % 6000)::int8 AS b,
	CASE WHEN i % 19 = 0 THEN NULL ELSE 'k' || abs(hashint4(i + 2)) % 3000 END AS t,
	CASE WHEN i % 5 <> 0 THEN 1 ELSE abs(hashint4(i + 3)) % 500 END::int4 AS s,
	(abs(hashint4(i + 4)) % 3000)::numeric(10, 1) AS num,
	((abs(hashint4(i + 5)) % 3000) / 4.0)::float8 AS fl,
	('p' || abs(hashint4(i + 6)) % 3000)::char(8) AS bp
FROM generate_series(1, 10000) i;

CREATE TABLE jp_dim AS
SELECT i AS id,
	CASE WHEN i % 23 = 0 THEN NULL ELSE abs(hashint4(i * 7)) % 9000 END::int8 AS a8,
	CASE WHEN i % 29 = 0 THEN NULL ELSE 'k' || abs(hashint4(i * 7)) % 9000 END AS t,
	(abs(hashint4(i * 11)) % 500)::int4 AS n,
	(abs(hashint4(i * 7)) % 9000)::numeric(10, 2) AS num,
	((abs(hashint4(i * 7)) % 9000) / 4.0)::float4 AS fl4,
	('p' || abs(hashint4(i * 7)) % 9000)::char(12) AS bp,
	i % 100 AS w
FROM generate_series(1, 3000) i;

ANALYZE jp_fact;
ANALYZE jp_dim;

SET enable_mergejoin = off;
SET enable_nestloop = off;
SET max_parallel_workers_per_gather = 0;
SET bloomamq.join_prefilter = on;

-- inner join: prefilter above the outer scan, collector under the Hash
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w < 10;

-- semi join, two keys of two types
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f
WHERE EXISTS (SELECT 1 FROM jp_dim d WHERE d.a8 = f.b AND d.t = f.t AND d.w < 10);

-- right join: the preserved side is hashed, the outer side is filtered
EXPLAIN (COSTS OFF)
SELECT count(*) FROM (SELECT * FROM jp_dim WHERE w < 10) d LEFT JOIN jp_fact f ON f.a = d.a8;

-- the preserved side of a LEFT join keeps its rows: no prefilter
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f LEFT JOIN (SELECT * FROM jp_dim WHERE w < 10) d ON f.a = d.a8;

-- FULL join: both sides preserved
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f FULL JOIN (SELECT * FROM jp_dim WHERE w < 10) d ON f.a = d.a8;

-- anti join: rows that do not match are the result
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f
WHERE NOT EXISTS (SELECT 1 FROM jp_dim d WHERE d.a8 = f.a AND d.w < 10);

-- off: the plan is PostgreSQL's own
SET bloomamq.join_prefilter = off;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w < 10;
SET bloomamq.join_prefilter = on;

-- too few outer rows to pay
SET bloomamq.join_prefilter_min_rows = 100000;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w < 10;
SET bloomamq.join_prefilter_min_rows = 0;

-- The cost rule: a pre-filter only where the planner expects it to remove
-- at least bloomamq.join_prefilter_min_remove of the outer rows.  jp_cust
-- has a primary key and every value of jp_fact.a, as a foreign key would.
CREATE TABLE jp_cust AS SELECT i AS c_id, i % 10 AS seg FROM generate_series(0, 2999) i;
ALTER TABLE jp_cust ADD PRIMARY KEY (c_id);
ANALYZE jp_cust;
RESET bloomamq.join_prefilter_min_remove;
SHOW bloomamq.join_prefilter_min_remove;

-- EXPLAIN VERBOSE's pre-filter lines, estimates masked (they vary between
-- majors): placed, or skipped and why.
CREATE FUNCTION pg_temp.explain_prefilter(q text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
		CONTINUE WHEN line !~ '(Amq|Prefilter:)';
		RETURN NEXT regexp_replace(regexp_replace(line, '\d+(\.\d+)?%', 'N%', 'g'),
								   '\d+ outer rows', 'N outer rows');
	END LOOP;
END $$;

-- every fact row meets one customer: no pre-filter, and VERBOSE says why
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM jp_fact f JOIN jp_cust c ON f.a = c.c_id$$);
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f JOIN jp_cust c ON f.a = c.c_id;
-- a tenth of the customers: most fact rows cannot join
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM jp_fact f JOIN jp_cust c ON f.a = c.c_id WHERE c.seg = 3$$);
-- a semi join: the planner's own count of matching outer rows
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM jp_fact f WHERE f.a IN (SELECT c_id FROM jp_cust WHERE seg = 3)$$);
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM jp_fact f WHERE EXISTS (SELECT 1 FROM jp_cust c WHERE c.c_id = f.a)$$);
-- a filter of over a million inner keys misses the cache on most probes,
-- as the join's own lookups do: it must be expected to remove twice
-- min_remove.  Function scans give the estimates with no rows to read.
SET enable_hashagg = off;
SET enable_sort = off;
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM generate_series(1, 4000000) a WHERE a IN (SELECT g FROM generate_series(1, 2000000) g)$$);
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM generate_series(1, 4000000) a WHERE a IN (SELECT g FROM generate_series(1, 500000) g)$$);
RESET enable_hashagg;
RESET enable_sort;
-- the threshold is a setting: 0 places every pre-filter that is correct
SET bloomamq.join_prefilter_min_remove = 0;
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM jp_fact f JOIN jp_cust c ON f.a = c.c_id$$);
SET bloomamq.join_prefilter_min_remove = 1;
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM jp_fact f JOIN jp_cust c ON f.a = c.c_id WHERE c.seg = 3$$);
SET bloomamq.join_prefilter_min_remove = 0;
-- too few outer rows, in VERBOSE
SET bloomamq.join_prefilter_min_rows = 100000;
SELECT * FROM pg_temp.explain_prefilter($$
SELECT count(*) FROM jp_fact f JOIN jp_cust c ON f.a = c.c_id WHERE c.seg = 3$$);
SET bloomamq.join_prefilter_min_rows = 0;
-- results are the same either way
SELECT count(*) FROM jp_fact f JOIN jp_cust c ON f.a = c.c_id WHERE c.seg = 3;
SET bloomamq.join_prefilter = off;
SELECT count(*) FROM jp_fact f JOIN jp_cust c ON f.a = c.c_id WHERE c.seg = 3;
SET bloomamq.join_prefilter = on;

-- a nondeterministic collation: equal strings of other bytes, refused
CREATE COLLATION jp_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.t = d.t COLLATE jp_ci WHERE d.w < 10;
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON upper(f.t) = d.t COLLATE jp_ci WHERE d.w < 10;

-- Each query with the setting off and on: the same rows?  And was there a
-- shared pre-filter (only asked where every major plans a Parallel Hash)?
CREATE FUNCTION jp_parallel(q text, OUT same boolean, OUT shared_prefilter boolean)
LANGUAGE plpgsql AS $$
DECLARE
	r_off text;
	r_on text;
	plan text;
BEGIN
	PERFORM set_config('bloomamq.join_prefilter', 'off', true);
	EXECUTE format('SELECT count(*) || '':'' || coalesce(sum(hashtext(r::text)::int8), 0) FROM (%s) r', q)
		INTO r_off;
	PERFORM set_config('bloomamq.join_prefilter', 'on', true);
	EXECUTE format('SELECT count(*) || '':'' || coalesce(sum(hashtext(r::text)::int8), 0) FROM (%s) r', q)
		INTO r_on;
	SELECT string_agg(p, E'\n') INTO plan FROM jp_explain(q) p;
	same := r_off = r_on;
	shared_prefilter := plan LIKE '%Parallel Custom Scan (AmqPrefilter)%';
END $$;
CREATE FUNCTION jp_explain(q text, detailed boolean DEFAULT false) RETURNS SETOF text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXECUTE format('EXPLAIN (%sCOSTS OFF) %s', CASE WHEN detailed THEN 'VERBOSE, ' END, q);
END
$$;

-- keys of types hashed by their own extended hash function (inet, interval,
-- jsonb, arrays, enums), from jp_fact's and jp_dim's keys: the same rows
-- with the pre-filter as without, and the inner joins place one.  A NULL
-- key gives a jsonb and an array that are not NULL, and join.
CREATE TYPE jp_colour AS ENUM ('red', 'green', 'blue');
CREATE FUNCTION pg_temp.jp_other_keys(k int8) RETURNS TABLE (ip inet, iv interval, j jsonb, arr int8[], c jp_colour)
LANGUAGE sql IMMUTABLE AS $$
SELECT ('10.0.' || k / 256 || '.' || k % 256)::inet, make_interval(mins => k::int), jsonb_build_object('k', k),
	ARRAY[k, 1], (ARRAY['red', 'green', 'blue']::jp_colour[])[1 + k % 3]
$$;
CREATE TABLE jp_ofact AS SELECT f.id, o.* FROM jp_fact f, pg_temp.jp_other_keys(f.a) o;
CREATE TABLE jp_odim AS SELECT d.id, d.w, o.* FROM jp_dim d, pg_temp.jp_other_keys(d.a8) o;
ANALYZE jp_ofact;
ANALYZE jp_odim;
CREATE FUNCTION pg_temp.jp_same(q text, OUT n int8, OUT same boolean, OUT placed boolean)
LANGUAGE plpgsql AS $$
BEGIN
	same := (jp_parallel(q)).same;
	EXECUTE format('SELECT count(*) FROM (%s) r', q) INTO n;
	SELECT bool_or(p ~ 'Amq(Prefilter|OuterCollect)\)') INTO placed FROM jp_explain(q) p;
END $$;
SELECT q, s.* FROM unnest(ARRAY[
	'SELECT f.id, d.id FROM jp_ofact f JOIN jp_odim d ON f.ip = d.ip WHERE d.w < 10',
	'SELECT f.id, d.id FROM jp_ofact f JOIN jp_odim d ON f.iv = d.iv WHERE d.w < 10',
	'SELECT f.id, d.id FROM jp_ofact f JOIN jp_odim d ON f.j = d.j WHERE d.w < 10',
	'SELECT f.id, d.id FROM jp_ofact f JOIN jp_odim d ON f.arr = d.arr WHERE d.w < 10',
	'SELECT f.id, d.id FROM jp_ofact f JOIN jp_odim d ON f.c = d.c AND f.ip = d.ip WHERE d.w < 10',
	'SELECT f.id FROM jp_ofact f WHERE f.arr IN (SELECT arr FROM jp_odim WHERE w < 10)'
]) q, pg_temp.jp_same(q) s;
-- the rows either way, for joins that keep rows without a match
SELECT q, s.n, s.same FROM unnest(ARRAY[
	'SELECT f.id FROM jp_ofact f WHERE NOT EXISTS (SELECT FROM jp_odim d WHERE d.iv = f.iv AND d.w < 10)',
	'SELECT f.id, d.id FROM jp_ofact f LEFT JOIN (SELECT * FROM jp_odim WHERE w < 10) d ON f.j = d.j',
	'SELECT f.id, d.id FROM jp_ofact f RIGHT JOIN (SELECT * FROM jp_odim WHERE w < 10) d ON f.ip = d.ip'
]) q, pg_temp.jp_same(q) s;
DROP TABLE jp_ofact, jp_odim;
DROP FUNCTION pg_temp.jp_other_keys(int8);
DROP TYPE jp_colour;

-- EXPLAIN ANALYZE reduced to what holds on every major: no hash table
-- sizes (Buckets, Batches, Memory Usage depend on the major's hash_mem
-- default and allocator), no buffer counts or planning lines (shown by
-- default from 18), row counts per loop rounded as before 18 (18 shows two
-- decimals), subplans numbered as before 19 (19 names them expr_N).
CREATE FUNCTION pg_temp.explain_analyze(q text) RETURNS TABLE ("QUERY PLAN" text)
LANGUAGE plpgsql AS $$
DECLARE
	line text;
	m text[];
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		CONTINUE WHEN line ~ '^\s*(Buckets|Batches|Buffers|Planning|Memory|Peak Memory|Disk Usage|Storage|Worker \d)';
		m := regexp_match(line, 'rows=(\d+\.\d+) ');
		IF m IS NOT NULL THEN
			line := replace(line, 'rows=' || m[1], 'rows=' || round(m[1]::numeric));
		END IF;
		"QUERY PLAN" := regexp_replace(line, 'SubPlan expr_(\d+)', 'SubPlan \1');
		RETURN NEXT;
	END LOOP;
END $$;

-- EXPLAIN ANALYZE: the filter's keys, size and rate, the rows it removed
SELECT * FROM pg_temp.explain_analyze($$
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w < 10$$);

-- most rows join: it stops probing after a sample and says so
SELECT * FROM pg_temp.explain_analyze($$
SELECT count(*) FROM jp_fact f JOIN (SELECT DISTINCT s FROM jp_fact) d ON f.s = d.s$$);

-- a multi-batch join: the filter is applied before rows go to batch files
SET work_mem = '64kB';
SELECT * FROM pg_temp.explain_analyze($$
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.t = d.t$$);
RESET work_mem;

-- Rescans.  The inner side depends on a parameter of the outer query: the
-- hash table and the filter are rebuilt for each value, and a filter never
-- judges rows against another value's inner side.
SELECT * FROM pg_temp.explain_analyze($$
SELECT (SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w = x.w) AS n
FROM (VALUES (1), (2), (3)) x(w)$$);
SELECT (SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w = x.w) AS n
FROM (VALUES (1), (2), (3)) x(w) ORDER BY 1;
-- only the outer side depends on it: the table and the filter are reused
SELECT (SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w < 10 AND f.b > x.b) AS n
FROM (VALUES (10), (2000), (5000)) x(b) ORDER BY 1;
SET bloomamq.join_prefilter = off;
SELECT (SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w = x.w) AS n
FROM (VALUES (1), (2), (3)) x(w) ORDER BY 1;
SELECT (SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w < 10 AND f.b > x.b) AS n
FROM (VALUES (10), (2000), (5000)) x(b) ORDER BY 1;
SET bloomamq.join_prefilter = on;

-- Parallel.  A parallel-oblivious Hash is built whole in each process: each
-- builds its own filter.  Under Parallel Hash each participant hashes part
-- of the inner side: one filter in shared memory, filled by all of them,
-- applied by each to its own outer rows below the Gather ("Parallel Custom
-- Scan": the nodes get shared memory).
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SET enable_parallel_hash = off;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w < 10;
SET enable_parallel_hash = on;
EXPLAIN (COSTS OFF)
SELECT count(*) FROM jp_fact f JOIN jp_dim d ON f.a = d.a8 WHERE d.w < 10;

-- Larger tables, so that the workers share the scans.  jp_bdim's keys are
-- 0 .. 29999; jp_big.a has about a third of them, and NULLs.  200,000 rows,
-- fewer under bloomamq_test.scale (see the end): the output is the same.
CREATE TABLE jp_big AS
SELECT i AS id,
	CASE WHEN i % 13 = 0 THEN NULL ELSE abs(hashint4(i)) % 90000 END AS a,
	'k' || abs(hashint4(i)) % 90000 AS t
FROM generate_series(1, greatest(40000, round(200000 *
	coalesce(nullif(current_setting('bloomamq_test.scale', true), '')::float8, 1)))::int) i;
CREATE TABLE jp_bdim AS
SELECT i AS id, 'k' || i AS t, i % 100 AS w FROM generate_series(0, 29999) i;
ANALYZE jp_big;
ANALYZE jp_bdim;

-- the rows removed, summed over the plan's prefilters, from EXPLAIN ANALYZE
CREATE FUNCTION jp_removed(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	line text;
	n bigint := 0;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ' || q LOOP
		IF line ~ 'Rows Removed by Prefilter' THEN
			n := n + substring(line FROM '(\d+)$')::bigint;
		END IF;
	END LOOP;
	RETURN n;
END $$;

-- inner, semi (two ways) and two-key joins: Parallel Hash on every major
SELECT * FROM jp_parallel('SELECT b.id, d.id FROM jp_big b JOIN jp_bdim d ON b.a = d.id WHERE d.w < 10');
SELECT * FROM jp_parallel('SELECT b.id FROM jp_big b WHERE b.a IN (SELECT id FROM jp_bdim WHERE w < 5)');
SELECT * FROM jp_parallel('SELECT b.id FROM jp_big b WHERE EXISTS (SELECT 1 FROM jp_bdim d WHERE d.id = b.a AND d.t = b.t AND d.w < 20)');
-- every join type: the rows are the same (plans differ between majors:
-- parallel right and full hash joins arrived in 16)
SELECT same FROM jp_parallel('SELECT b.id, d.id FROM jp_big b RIGHT JOIN (SELECT * FROM jp_bdim WHERE w < 10) d ON b.a = d.id');
SELECT same FROM jp_parallel('SELECT b.id, d.id FROM jp_big b LEFT JOIN (SELECT * FROM jp_bdim WHERE w < 10) d ON b.a = d.id');
SELECT same FROM jp_parallel('SELECT b.id, d.id FROM jp_big b FULL JOIN (SELECT * FROM jp_bdim WHERE w < 10) d ON b.a = d.id');
SELECT same FROM jp_parallel('SELECT b.id FROM jp_big b WHERE NOT EXISTS (SELECT 1 FROM jp_bdim d WHERE d.id = b.a AND d.w < 10)');
SELECT same FROM jp_parallel('SELECT d.id FROM jp_bdim d WHERE d.w < 50 AND d.id IN (SELECT b.a FROM jp_big b WHERE b.id % 7 = 0)');
-- Right semi and right anti joins (16 and 18 plan them) hash the side whose
-- rows they return, here the few jp_bdim rows, and probe with jp_big's rows:
-- those that match no jp_bdim row do nothing, and the pre-filter drops
-- them.  On every major: the same rows, and where the plan has such a join,
-- a pre-filter that removed rows (13 and 15 plan other joins).
CREATE FUNCTION jp_right(q text, OUT same boolean, OUT right_join_prefiltered boolean)
LANGUAGE plpgsql AS $$
DECLARE
	plan text;
BEGIN
	same := (jp_parallel(q)).same;
	SELECT string_agg(p, E'\n') INTO plan FROM jp_explain(q) p;
	right_join_prefiltered := plan !~ 'Right (Semi|Anti) Join' OR
		(plan ~ 'AmqPrefilter\)' AND jp_removed(q) > 0);
END $$;
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.a = d.id)');
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND EXISTS (SELECT 1 FROM jp_big b WHERE b.a = d.id)');
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.t = d.t AND b.a = d.id)');
SET max_parallel_workers_per_gather = 0;
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.a = d.id)');
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND EXISTS (SELECT 1 FROM jp_big b WHERE b.a = d.id)');
-- The cost rule weighs the distinct inner keys (600) against the distinct
-- outer keys (about 79,000): placed, also where the outer side is a Gather.
RESET bloomamq.join_prefilter_min_remove;
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.a = d.id)');
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND EXISTS (SELECT 1 FROM jp_big b WHERE b.a = d.id)');
SET max_parallel_workers_per_gather = 2;
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.a = d.id)');
SELECT * FROM jp_right('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND EXISTS (SELECT 1 FROM jp_big b WHERE b.a = d.id)');
-- an outer key without statistics: the rule cannot tell, places none, and
-- EXPLAIN VERBOSE says so
SELECT plan !~ 'Right (Semi|Anti) Join' OR
	vplan ~ 'Prefilter: skipped, no statistics estimate how many of N outer rows match' AS skipped
FROM (SELECT string_agg(p, E'\n') AS plan
	  FROM jp_explain('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.id % 30000 = d.id)') p) s,
	 (SELECT string_agg(p, E'\n') AS vplan
	  FROM pg_temp.explain_prefilter('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.id % 30000 = d.id)') p) v;
SET bloomamq.join_prefilter_min_remove = 0;
DROP FUNCTION jp_right(text);
-- multi-batch: the inner side is loaded into batches, the outer side is
-- partitioned into batch files after the filter is complete
SET work_mem = '64kB';
SELECT * FROM jp_parallel('SELECT b.id, d.id FROM jp_big b JOIN jp_bdim d ON b.t = d.t WHERE d.w < 30');
RESET work_mem;
-- the leader does not take part: the workers build and probe
SET parallel_leader_participation = off;
SELECT * FROM jp_parallel('SELECT b.id, d.id FROM jp_big b JOIN jp_bdim d ON b.a = d.id WHERE d.w < 10');
RESET parallel_leader_participation;
-- rescans: a Gather on the inner side of a nested loop runs once per outer
-- row (random() keeps the outer side in the leader); each time the shared
-- filter is cleared and built again
SET enable_nestloop = on;
SET enable_material = off;
SELECT * FROM jp_parallel('SELECT x, count(*) FROM (SELECT x FROM generate_series(1, 3) x WHERE random() >= 0) x,
	(SELECT b.id FROM jp_big b JOIN jp_bdim d ON b.a = d.id WHERE d.w < 10) s GROUP BY x');
-- ... and under a Limit, which shuts the Gather down each time (its shared
-- memory goes), so the next run sets up new shared memory
SELECT same FROM jp_parallel('SELECT count(*) FROM (SELECT x FROM generate_series(1, 3) x WHERE random() >= 0) x,
	(SELECT b.id FROM jp_big b JOIN jp_bdim d ON b.a = d.id WHERE d.w < 10 LIMIT 5) s');
SELECT jp_removed('SELECT count(*) FROM (SELECT x FROM generate_series(1, 3) x WHERE random() >= 0) x,
	(SELECT b.id FROM jp_big b JOIN jp_bdim d ON b.a = d.id WHERE d.w < 10 LIMIT 5) s') >= 0 AS explained;
RESET enable_material;
SET enable_nestloop = off;

-- EXPLAIN ANALYZE counts the rows removed by all participants: at least
-- nine in ten of the outer rows that match no inner row.  Under a Parallel
-- Hash the filter is shared; under a parallel-oblivious Hash each process
-- builds its own filter and counts its own rows; also when the leader takes
-- no part (it would have counted none).
CREATE FUNCTION jp_counted(OUT hash text, OUT counted_over_workers boolean)
LANGUAGE plpgsql AS $$
DECLARE
	q text := 'SELECT count(*) FROM jp_big b JOIN jp_bdim d ON b.a = d.id WHERE d.w < 10';
	plan text;
	removed bigint;
	unmatched bigint;
BEGIN
	SELECT string_agg(p, E'\n') INTO plan FROM jp_explain(q) p;
	hash := CASE
		WHEN plan NOT LIKE '%Gather%' THEN 'not parallel'
		WHEN plan LIKE '%Parallel Hash%' AND plan LIKE '%Parallel Custom Scan (AmqPrefilter)%'
			THEN 'parallel, shared filter'
		-- (the join in each worker, or in the leader above the Gather, with
		-- a copy below it that the workers probe: which is the planner's
		-- choice, by the size of the tables)
		WHEN plan NOT LIKE '%Parallel Hash%' AND plan LIKE '%Custom Scan (AmqPrefilter)%'
			THEN 'parallel-oblivious'
		ELSE 'other' END;
	removed := jp_removed(q);
	SELECT count(*) INTO unmatched FROM jp_big b WHERE b.a IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM jp_bdim d WHERE d.id = b.a AND d.w < 10);
	counted_over_workers := removed <= unmatched AND removed >= 0.9 * unmatched;
END $$;
SELECT * FROM jp_counted();
SET enable_parallel_hash = off;
SELECT * FROM jp_counted();
SET parallel_leader_participation = off;
SELECT * FROM jp_counted();
RESET parallel_leader_participation;
RESET enable_parallel_hash;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;

-- Push-down: where the outer join key is a column of a node further down
-- (through inner joins, the preserved side of outer joins, sorts), the
-- filter is applied there too, before the lower joins see the rows.  Each
-- query with the setting off and on: the same rows?  Was a copy pushed
-- down (EXPLAIN VERBOSE says so)?  The join order is the query's.
CREATE FUNCTION jp_pushed(q text, OUT same boolean, OUT pushed boolean)
LANGUAGE plpgsql AS $$
DECLARE
	plan text;
BEGIN
	same := (jp_parallel(q)).same;
	SELECT string_agg(p, E'\n') INTO plan FROM jp_explain(q, true) p;
	pushed := plan LIKE '%pushed down from a hash join above%';
END $$;
SET join_collapse_limit = 1;
SET from_collapse_limit = 1;
-- below an inner join, to jp_big's scan
SELECT * FROM jp_pushed('SELECT b.id, f.id FROM (jp_big b JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id WHERE d.w < 50');
EXPLAIN (COSTS OFF)
SELECT count(*) FROM (jp_big b JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id WHERE d.w < 50;
-- below the preserved side of a LEFT join
SELECT * FROM jp_pushed('SELECT b.id, d.id, f.id FROM (jp_big b LEFT JOIN jp_bdim d ON b.a = d.id AND d.w < 50) JOIN jp_fact f ON f.id = b.id');
-- a FULL join that the key makes a LEFT join, semi and anti joins below
SELECT same FROM jp_pushed('SELECT b.id, d.id, f.id FROM (jp_big b FULL JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id');
SELECT same FROM jp_pushed('SELECT b.id, d.id FROM (jp_fact f FULL JOIN jp_big b ON f.id = b.id) JOIN jp_bdim d ON d.id = b.a WHERE d.w < 10');
SELECT same FROM jp_pushed('SELECT b.id FROM jp_big b WHERE b.a IN (SELECT id FROM jp_bdim WHERE w < 50) AND b.id IN (SELECT id FROM jp_fact)');
SELECT same FROM jp_pushed('SELECT b.id, f.id FROM (SELECT * FROM jp_big b WHERE NOT EXISTS (SELECT 1 FROM jp_bdim d WHERE d.id = b.a AND d.w < 50)) b JOIN jp_fact f ON f.id = b.id');
SELECT same FROM jp_pushed('SELECT b.id, f.id FROM (jp_big b RIGHT JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id WHERE d.w < 50');
-- the inner side may read other rows when read again: not pushed
SELECT * FROM jp_pushed('SELECT b.id, f.id FROM (jp_big b JOIN jp_bdim d ON b.a = d.id) JOIN (SELECT * FROM jp_fact WHERE random() >= 0) f ON f.id = b.id WHERE d.w < 50');
-- multi-batch
SET work_mem = '64kB';
SELECT * FROM jp_pushed('SELECT b.id, f.id FROM (jp_big b JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id WHERE d.w < 50');
RESET work_mem;
-- rescans: the outer side depends on a parameter, the filter stays
SELECT same FROM jp_pushed('SELECT x, (SELECT count(*) FROM (jp_big b JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id WHERE d.w < 50 AND b.id > x) FROM generate_series(0, 150000, 50000) x');
-- never into a merge join's inner input, which must mark and restore
-- positions (here an index scan with duplicate keys): a custom scan
-- there fails with "does not support MarkPos")
CREATE INDEX jp_fact_a ON jp_fact (a);
SET enable_mergejoin = on;
SET enable_sort = off;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET work_mem = '64kB';
SELECT same FROM jp_pushed('SELECT f.id, c.c_id, d.id FROM (jp_cust c JOIN jp_fact f ON f.a = c.c_id) JOIN (SELECT * FROM jp_dim WHERE w < 10) d ON d.n = f.s');
RESET work_mem;
RESET enable_bitmapscan;
RESET enable_seqscan;
RESET enable_sort;
SET enable_mergejoin = off;
DROP INDEX jp_fact_a;
-- through an aggregate, a GROUP BY, a DISTINCT whose groups share the key:
-- a group's rows are dropped together or kept together, so the groups that
-- stay have the same aggregates (and HAVING sees the same rows)
SELECT * FROM jp_pushed('SELECT s.a, s.n, s.ids, d.id FROM (SELECT a, count(*) AS n, sum(id) AS ids FROM jp_big GROUP BY a) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 5');
SELECT * FROM jp_pushed('SELECT s.a, s.n, d.id FROM (SELECT a, count(*) AS n FROM jp_big GROUP BY a HAVING count(*) > 2) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 5');
SELECT * FROM jp_pushed('SELECT s.t, s.a, s.n, d.id FROM (SELECT t, a, count(*) AS n FROM jp_big GROUP BY t, a) s JOIN jp_bdim d ON s.t = d.t AND s.a = d.id WHERE d.w < 50');
-- (whether the planner unique-ifies jp_big here varies between majors)
SELECT same FROM jp_pushed('SELECT d.id FROM jp_bdim d WHERE d.w < 50 AND d.id IN (SELECT a FROM jp_big)');
SET enable_hashagg = off;
SELECT * FROM jp_pushed('SELECT s.a, s.n, d.id FROM (SELECT a, count(*) AS n FROM jp_big GROUP BY a) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 50');
SELECT * FROM jp_pushed('SELECT s.a, d.id FROM (SELECT a FROM jp_big GROUP BY a) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 10');
SELECT * FROM jp_pushed('SELECT s.a, s.t, d.id FROM (SELECT DISTINCT a, t FROM jp_big) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 50');
RESET enable_hashagg;
-- grouped by an expression: above the node that computes it
SELECT * FROM jp_pushed('SELECT s.k, s.n, d.id FROM (SELECT id % 30000 AS k, count(*) AS n FROM jp_big GROUP BY id % 30000) s JOIN jp_bdim d ON s.k = d.id WHERE d.w < 50');
-- through a subquery scan (OFFSET 0 keeps the subquery, its qual stays there)
SELECT * FROM jp_pushed('SELECT b.id, b.a2, d.id FROM (SELECT id, a, a * 2 AS a2 FROM jp_big OFFSET 0) b JOIN jp_bdim d ON b.a = d.id WHERE d.w < 5 AND b.id % 3 <> 0');
-- not where a group's rows may carry other keys: grouping sets, whose
-- rolled-up rows aggregate many keys; a nondeterministic collation, whose
-- groups hold strings of other bytes ('k7' and 'K7') that hash apart; nor
-- through a window function, a LIMIT, or an aggregate to the input of
-- an aggregate (the key is max(a))
SELECT * FROM jp_pushed('SELECT s.a, s.n, d.id FROM (SELECT a, count(*) AS n FROM jp_big GROUP BY ROLLUP (a)) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 50');
SELECT * FROM jp_pushed('SELECT s.t, s.n, d.id FROM (SELECT t COLLATE jp_ci AS t, count(*) AS n FROM (SELECT t FROM jp_big UNION ALL SELECT upper(t) FROM jp_big) u GROUP BY 1) s JOIN jp_bdim d ON s.t COLLATE "C" = d.t WHERE d.w < 50');
SELECT * FROM jp_pushed('SELECT s.a, s.n, d.id FROM (SELECT a, count(*) OVER (PARTITION BY a) AS n FROM jp_big) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 50');
SELECT * FROM jp_pushed('SELECT s.a, d.id FROM (SELECT a FROM jp_big ORDER BY id LIMIT 5000) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 50');
SELECT * FROM jp_pushed('SELECT s.k, d.id FROM (SELECT max(a) AS k FROM jp_big GROUP BY id % 30000) s JOIN jp_bdim d ON s.k = d.id WHERE d.w < 50');
-- switched off
SET bloomamq.join_prefilter_push_down = off;
SELECT * FROM jp_pushed('SELECT b.id, f.id FROM (jp_big b JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id WHERE d.w < 50');
RESET bloomamq.join_prefilter_push_down;
-- under Parallel Hash, the shared filter at a Parallel Seq Scan
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT * FROM jp_pushed('SELECT b.id, f.id FROM (jp_big b JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id WHERE d.w < 50');
SET work_mem = '64kB';
SELECT same FROM jp_pushed('SELECT b.id, f.id FROM (jp_big b JOIN jp_bdim d ON b.a = d.id) JOIN jp_fact f ON f.id = b.id WHERE d.w < 50');
RESET work_mem;
-- A hash join in the leader, above a Gather: its copy below the Gather
-- probes the leader's filter, which the leader publishes to the workers in
-- shared memory when the Gather starts or, if the Gather starts first, as
-- soon as it is built.  Each query with the setting off and on: the same
-- rows?  Published (EXPLAIN VERBOSE)?  Did the workers remove rows with it
-- (EXPLAIN ANALYZE without the leader taking part)?
CREATE FUNCTION jp_published(q text, OUT same boolean, OUT published boolean,
							 OUT workers_removed boolean)
LANGUAGE plpgsql AS $$
DECLARE
	line text;
	after_published boolean := false;
BEGIN
	same := (jp_parallel(q)).same;
	SELECT string_agg(p, E'\n') LIKE '%its filter published to the workers%'
		INTO published FROM jp_explain(q, true) p;
	workers_removed := false;
	PERFORM set_config('parallel_leader_participation', 'off', true);
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) ' || q LOOP
		IF line ~ 'Filter Published: true' THEN
			after_published := true;
		ELSIF after_published AND line ~ 'Rows Removed by Prefilter' THEN
			workers_removed := workers_removed OR
				substring(line FROM ': (\d+)')::bigint > 0;
			after_published := false;
		END IF;
	END LOOP;
	PERFORM set_config('parallel_leader_participation', 'on', true);
END $$;
-- an IMMUTABLE but PARALLEL RESTRICTED function keeps a scan in the leader
CREATE FUNCTION jp_restricted(i int) RETURNS int LANGUAGE plpgsql
	IMMUTABLE PARALLEL RESTRICTED AS $$ BEGIN RETURN i; END $$;
SET enable_parallel_hash = off;
-- an aggregate finished in the leader: the Gather starts after the join
-- has built its filter
SELECT * FROM jp_published('SELECT s.a, s.n, d.id FROM (SELECT a, count(*) AS n FROM jp_big GROUP BY a) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 50');
SET enable_hashagg = off;
SELECT same, published FROM jp_published('SELECT s.a, s.n, d.id FROM (SELECT a, count(*) AS n FROM jp_big GROUP BY a) s JOIN jp_bdim d ON s.a = d.id WHERE d.w < 50');
RESET enable_hashagg;
-- the join's inner side only in the leader: the Gather starts first
SELECT * FROM jp_published('SELECT b.id, d.id FROM jp_big b JOIN jp_bdim d ON b.a = d.id WHERE jp_restricted(d.w) < 50');
-- the join rescanned in a subplan (its join filter takes the parameter):
-- the hash table and the filter stay, the Gather starts its workers again
SELECT * FROM jp_published('SELECT x, (SELECT count(*) FROM jp_big b JOIN jp_bdim d ON b.a = d.id AND b.id + d.id > x WHERE jp_restricted(d.w) < 50) FROM generate_series(0, 150000, 50000) x');
-- more inner keys (150,000) than the room reserved from the planner's
-- estimate (10 rows: room for 131,072 keys): not published, the workers
-- pass their rows and the join's own prefilter filters them in the leader
CREATE FUNCTION jp_keys(n int) RETURNS SETOF int LANGUAGE plpgsql
	IMMUTABLE PARALLEL RESTRICTED ROWS 10 AS
	$$ BEGIN RETURN QUERY SELECT i FROM generate_series(1, n) i WHERE i % 4 <> 0; END $$;
SELECT * FROM jp_published('SELECT b.id, g.i FROM jp_big b JOIN jp_keys(200000) g(i) ON b.id = g.i');
RESET enable_parallel_hash;
DROP FUNCTION jp_published(text);
DROP FUNCTION jp_restricted(int);
DROP FUNCTION jp_keys(int);
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;
RESET join_collapse_limit;
RESET from_collapse_limit;

-- The larger side inside: a semi or anti join of a few rows against a big
-- subquery, which the planner runs by hashing the big side (before 16 and
-- 18, whose right anti and right semi joins hash the few rows instead).
-- The outer side is read first, and its keys filter the inner rows before
-- they are hashed (AmqOuterCollect, and an AmqPrefilter under the Hash).
-- Each query off and on: the same rows?  Did a pre-filter remove rows
-- (every jp_bdim row here has a match, so only one that filters jp_big
-- can)?  Was the outer side collected first (asked where it must not be)?
-- Where the rule says no, EXPLAIN VERBOSE says why (why: a LIKE pattern),
-- if the big side is hashed (not in the right semi and right anti joins of
-- 16 and 18, which hash the few rows).
CREATE FUNCTION jp_inner_why(q text, why text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	plan text;
BEGIN
	SELECT string_agg(p, E'\n') INTO plan FROM jp_explain(q, true) p;
	RETURN plan ~ 'Hash Right (Semi|Anti) Join' OR
		plan LIKE '%Inner Prefilter: skipped, ' || why || '%';
END $$;
CREATE FUNCTION jp_inner(q text, OUT same boolean, OUT filtered boolean,
						 OUT collected boolean, OUT parallel_hash_shared boolean,
						 OUT explained boolean)
LANGUAGE plpgsql AS $$
DECLARE
	plan text;
BEGIN
	same := (jp_parallel(q)).same;
	filtered := jp_removed(q) > 0;
	SELECT string_agg(p, E'\n') INTO plan FROM jp_explain(q) p;
	collected := plan LIKE '%AmqOuterCollect%';
	-- an outer collector under Parallel Hash must be shared
	parallel_hash_shared := plan NOT LIKE '%Parallel Hash%' OR NOT collected OR
		plan LIKE '%Parallel Custom Scan (AmqOuterCollect)%';
	explained := collected OR
		jp_inner_why(q, 'the outer side may read other rows when read again');
END $$;
SELECT same, filtered FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big)');
SELECT same, filtered FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.id = d.id)');
SELECT same, filtered FROM jp_inner('SELECT d.id, b.id FROM jp_bdim d JOIN jp_big b ON b.id = d.id WHERE d.w < 2 AND d.id > 0');
SELECT same, filtered FROM jp_inner('SELECT d.id, b.id FROM jp_bdim d LEFT JOIN jp_big b ON b.id = d.id WHERE d.w < 2 AND d.id > 0');
-- grouped inner rows: the filter goes below the aggregate
SELECT same, filtered FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big GROUP BY id HAVING count(*) > 0)');
-- grouped into fewer groups (333 expected) than the outer rows (5,000), of
-- many rows (40,000 of 1,000 keys, of which the outer side has 100): the
-- rows below the aggregate count, and are filtered
CREATE TABLE jp_many AS SELECT i % 1000 AS k FROM generate_series(1, 40000) i;
CREATE TABLE jp_few AS SELECT i % 100 AS k FROM generate_series(1, 5000) i;
ANALYZE jp_many;
ANALYZE jp_few;
SELECT same, filtered, collected FROM jp_inner('SELECT f.k FROM jp_few f WHERE f.k IN (SELECT k FROM jp_many GROUP BY k HAVING count(*) > 0)');
-- where that filter is skipped (90% expected removed, 95% asked), the reason
-- counts the rows below the aggregate, not its groups
SET bloomamq.join_prefilter_min_remove = 0.95;
SELECT bool_or(p LIKE '%Inner Prefilter: skipped, expected to remove % of 40000 inner rows,%') AS counts_rows_below
FROM jp_explain('SELECT f.k FROM jp_few f WHERE f.k IN (SELECT k FROM jp_many GROUP BY k HAVING count(*) > 0)', true) p;
SET bloomamq.join_prefilter_min_remove = 0;
DROP TABLE jp_many, jp_few;
-- outer keys that come through a lower join: estimated from the statistics
-- of the column scanned below it, for the join's rows (before 18 the plan
-- hashes jp_big and filters it; 18 may hash the few rows instead)
WITH q(q) AS (VALUES ('SELECT d.id FROM jp_bdim d JOIN jp_cust c ON c.c_id = d.w WHERE c.seg < 2 AND d.id IN (SELECT id FROM jp_big)'))
SELECT s.same, s.filtered, s.collected OR e.plan ~ 'Hash Right Semi Join' AS inner_filtered
FROM q, jp_inner(q.q) s, LATERAL (SELECT string_agg(p, E'\n') AS plan FROM jp_explain(q.q) p) e;
-- no outer row, many batches
SELECT same FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 0 AND d.id IN (SELECT id FROM jp_big)');
SET work_mem = '64kB';
SELECT same, filtered FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big)');
RESET work_mem;
-- rescans: the inner side depends on a parameter and is read again, the
-- outer rows are replayed
SELECT same, filtered FROM jp_inner('SELECT x, (SELECT count(*) FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big WHERE id > x)) FROM generate_series(0, 20000, 10000) x');
-- an outer side far larger than estimated ((id % 1) = (w % 1): 150 rows
-- expected, 30,000 read) that outgrows work_mem: the collector gives up
-- there, builds no filter, and passes the rest of its rows on; also when
-- read again
SET work_mem = '64kB';
SELECT same FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE (d.id % 1) = (d.w % 1) AND d.id IN (SELECT id FROM jp_big)');
SELECT same FROM jp_inner('SELECT x, (SELECT count(*) FROM jp_bdim d WHERE (d.id % 1) = (d.w % 1) AND d.id IN (SELECT id FROM jp_big WHERE id > x)) FROM generate_series(0, 20000, 10000) x');
RESET work_mem;
-- within work_mem, it keeps them all, and filters
SELECT same, filtered FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE (d.id % 1) = (d.w % 1) AND d.id IN (SELECT a FROM jp_big)');
-- an uncorrelated scalar subquery on the outer side: computed once
SELECT same, filtered FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > (SELECT min(id) FROM jp_big) AND d.id IN (SELECT id FROM jp_big)');
-- not where the outer side depends on a parameter, or may read other rows
-- when read again
SELECT same, collected, explained FROM jp_inner('SELECT x, (SELECT count(*) FROM jp_bdim d WHERE d.w < 2 AND d.id > x AND d.id IN (SELECT id FROM jp_big)) FROM generate_series(0, 20000, 10000) x');
SELECT same, collected, explained FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND random() >= 0 AND d.id IN (SELECT id FROM jp_big)');
SELECT same, collected, explained FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND random() >= 0 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.id = d.id)');
-- nor where it would remove fewer than three inner rows per outer row
-- (4,500 outer keys, 10,000 inner)
SELECT jp_inner_why('SELECT d.id FROM jp_bdim d WHERE d.w < 15 AND d.id IN (SELECT id FROM jp_fact)',
					'expected to remove %% of % inner rows, fewer than three for each outer row');
-- parallel plans: the join in the leader (jp_leader keeps the outer scan
-- there) and a Gather on its inner side, whose workers probe the filter of
-- the outer keys, published to them
CREATE FUNCTION jp_leader(i int) RETURNS int LANGUAGE plpgsql
	IMMUTABLE PARALLEL RESTRICTED AS $$ BEGIN RETURN i; END $$;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
SELECT same, filtered FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND jp_leader(d.id) > 0 AND d.id IN (SELECT id FROM jp_big)');
SELECT same, filtered FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND jp_leader(d.id) > 0 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.id = d.id)');
-- Parallel Hash: each participant reads a part of the outer side and hashes
-- a part of the inner side.  Their collectors put the outer rows into one
-- shared store and their keys into one filter in shared memory, and wait
-- for each other before any inner row is filtered; then the stored rows
-- are read back by whichever participants ask.  The same rows, filtered,
-- and where the plan is a Parallel Hash join with the larger side inside
-- (before 16 and 18, which hash the few rows in right anti and right semi
-- joins instead), one filter of all participants' outer keys.
SELECT same, filtered, parallel_hash_shared FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big)');
SELECT same, filtered, parallel_hash_shared FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND NOT EXISTS (SELECT 1 FROM jp_big b WHERE b.id = d.id)');
SELECT same, filtered, parallel_hash_shared FROM jp_inner('SELECT d.id, b.id FROM jp_bdim d JOIN jp_big b ON b.id = d.id WHERE d.w < 2 AND d.id > 0');
SELECT same, filtered, parallel_hash_shared FROM jp_inner('SELECT d.id, b.id FROM jp_bdim d LEFT JOIN jp_big b ON b.id = d.id WHERE d.w < 2 AND d.id > 0');
-- many batches: the outer rows are partitioned into batch files from the
-- shared store
SET work_mem = '64kB';
SELECT same, filtered, parallel_hash_shared FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big)');
-- an outer side 200 times its estimate: a participant gives up past
-- work_mem, the others stop too, no filter, every row joined
SELECT same, parallel_hash_shared FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE (d.id % 1) = (d.w % 1) AND d.id IN (SELECT id FROM jp_big)');
RESET work_mem;
-- the leader takes no part
SET parallel_leader_participation = off;
SELECT same, filtered, parallel_hash_shared FROM jp_inner('SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big)');
RESET parallel_leader_participation;
-- rescans: the Gather runs once per row of a nested loop's outer side, and
-- the collectors start over each time; under a Limit, which shuts the
-- Gather down, in new shared memory each time
SET enable_nestloop = on;
SET enable_material = off;
SELECT same, parallel_hash_shared FROM jp_inner('SELECT x, count(*) FROM (SELECT x FROM generate_series(1, 3) x WHERE random() >= 0) x,
	(SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big)) s GROUP BY x');
SET enable_hashagg = off;
SELECT same, parallel_hash_shared FROM jp_inner('SELECT count(*) FROM (SELECT x FROM generate_series(1, 3) x WHERE random() >= 0) x,
	(SELECT d.id FROM jp_bdim d WHERE d.w < 2 AND d.id > 0 AND d.id IN (SELECT id FROM jp_big) LIMIT 5) s');
RESET enable_hashagg;
RESET enable_material;
SET enable_nestloop = off;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
SET max_parallel_workers_per_gather = 0;
DROP FUNCTION jp_leader(int);
DROP FUNCTION jp_inner(text);
DROP FUNCTION jp_inner_why(text, text);

-- statistics that fall short of a clustered column's distinct values, as
-- ANALYZE's of the first column of TPC-H lineitem's primary key do:
-- n_distinct set to 50 of jp_lines' 5,000 keys of 2 rows each.  A unique
-- index on (k, n) bounds them below by 10,000 rows / 2 values of n.  The
-- planner hashes the 40,000 rows of jp_probe, of which the 5,000 keys of
-- jp_lines meet 12.5%: 87.5% can be removed before they are hashed, which
-- the cost rule sees (the inner side's filter placed at min_remove 80%, not
-- at 95%) with the index, and not without it or with a partial one (the
-- estimate then 99.9%).
CREATE TABLE jp_lines AS SELECT k, n FROM generate_series(1, 5000) k, generate_series(1, 2) n;
ALTER TABLE jp_lines ALTER COLUMN k SET (n_distinct = 50);
ALTER TABLE jp_lines ADD PRIMARY KEY (k, n);
ANALYZE jp_lines;
CREATE TABLE jp_probe AS SELECT k FROM generate_series(1, 40000) k;
ANALYZE jp_probe;
-- (is a filter of the rows of jp_probe, on either side, placed at min_remove?)
CREATE FUNCTION pg_temp.jp_placed(q text, min_remove float8) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	line text;
	placed boolean := false;
BEGIN
	PERFORM set_config('bloomamq.join_prefilter_min_remove', min_remove::text, true);
	FOR line IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP
		placed := placed OR line ~ 'Prefilter: (placed|on the inner side)';
	END LOOP;
	RETURN placed;
END $$;
CREATE VIEW jp_lines_q(q) AS VALUES ('SELECT count(*) FROM jp_probe p JOIN jp_lines l ON l.k = p.k');
SELECT pg_temp.jp_placed(q, 0.80) AS placed_at_80, pg_temp.jp_placed(q, 0.95) AS placed_at_95 FROM jp_lines_q;
ALTER TABLE jp_lines DROP CONSTRAINT jp_lines_pkey;
SELECT pg_temp.jp_placed(q, 0.80) AS placed_at_80, pg_temp.jp_placed(q, 0.95) AS placed_at_95 FROM jp_lines_q;
CREATE UNIQUE INDEX ON jp_lines (k) WHERE n = 1;
SELECT pg_temp.jp_placed(q, 0.80) AS placed_at_80, pg_temp.jp_placed(q, 0.95) AS placed_at_95 FROM jp_lines_q;
DROP INDEX jp_lines_k_idx;
-- two keys: the product of their distinct values (50 * 2, at most the
-- rows), at least the rows where they cover a unique index.  jp_probe2 has
-- 60,000 pairs (in no order: stored in key order, the rows that match would
-- come first and the filter would pause itself), of which jp_lines has
-- 10,000.  Without the index the planner hashes jp_probe2, and the filter
-- of jp_lines' pairs (two keys had no estimate, and got none) removes
-- rows; with it, the planner hashes jp_lines, and the estimate of the rows
-- a filter of its pairs removes from jp_probe2 is the real 83.3%.  The same
-- rows with the filter as without.
CREATE TABLE jp_probe2 AS SELECT k, n FROM generate_series(1, 30000) k, generate_series(1, 2) n ORDER BY hashint4(2 * k + n);
ANALYZE jp_probe2;
CREATE OR REPLACE VIEW jp_lines_q(q) AS VALUES ('SELECT count(*) FROM jp_probe2 p JOIN jp_lines l ON l.k = p.k AND l.n = p.n');
SET bloomamq.join_prefilter_min_remove = 0.8;
SELECT count(*) AS joined, jp_removed('SELECT count(*) FROM jp_probe2 p JOIN jp_lines l ON l.k = p.k AND l.n = p.n') > 40000 AS removed
FROM jp_probe2 p JOIN jp_lines l ON l.k = p.k AND l.n = p.n;
SET bloomamq.join_prefilter_min_remove = 0;
ALTER TABLE jp_lines ADD PRIMARY KEY (k, n);
SELECT pg_temp.jp_placed(q, 0.80) AS placed_at_80, pg_temp.jp_placed(q, 0.95) AS placed_at_95 FROM jp_lines_q;
DROP VIEW jp_lines_q;
DROP TABLE jp_lines, jp_probe, jp_probe2;

DROP FUNCTION jp_pushed(text);
DROP FUNCTION jp_removed(text);

-- Read-ahead (bloomamq.join_prefilter_read_ahead; by default for filters
-- larger than the cache, 'on' for any): the pre-filter reads 16 rows of its
-- child ahead and probes them together.  Shown by a Limit that needs one
-- row: the scan below reads 16 rows, where without read-ahead it stops at
-- the first that joins, its 7th; the rows after a rescan are the new
-- scan's (the first key above x that joins, a multiple of 7), never rows
-- read ahead in the scan before.  (The differential test below reads ahead
-- in half its queries.)
CREATE TABLE jp_ra_outer AS SELECT k FROM generate_series(1, 1000) k;
CREATE TABLE jp_ra_inner AS SELECT k FROM generate_series(7, 1000, 7) k;
ANALYZE jp_ra_outer;
ANALYZE jp_ra_inner;
-- the number pattern captures in the first line of q's EXPLAIN ANALYZE that
-- it matches (the rows read by the scan, the rows a pre-filter read ahead)
CREATE FUNCTION jp_plan_number(q text, pattern text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || q LOOP
		IF line ~ pattern THEN
			RETURN (regexp_match(line, pattern))[1]::int;
		END IF;
	END LOOP;
	RETURN NULL;
END $$;
SET bloomamq.join_prefilter_read_ahead = off;
SELECT jp_plan_number('SELECT * FROM jp_ra_outer o JOIN jp_ra_inner i ON o.k = i.k LIMIT 1', 'Seq Scan on jp_ra_outer.*rows=(\d+)') AS rows_read_without;
SELECT coalesce(jp_plan_number('SELECT * FROM jp_ra_outer o JOIN jp_ra_inner i ON o.k = i.k', 'Rows Read Ahead: (\d+)'), 0) AS read_ahead_shown_without;
-- (17 where the hash join fetches its first outer row before the filter is
-- built, which passes that row unprobed)
SET bloomamq.join_prefilter_read_ahead = on;
SELECT jp_plan_number('SELECT * FROM jp_ra_outer o JOIN jp_ra_inner i ON o.k = i.k LIMIT 1', 'Seq Scan on jp_ra_outer.*rows=(\d+)') IN (16, 17) AS rows_read_ahead;
-- EXPLAIN ANALYZE counts them: one batch of 16 for the LIMIT 1, all but
-- perhaps the first row unprobed for the whole join
SELECT coalesce(jp_plan_number('SELECT * FROM jp_ra_outer o JOIN jp_ra_inner i ON o.k = i.k LIMIT 1', 'Rows Read Ahead: (\d+)'), 0) AS read_ahead_shown_limit;
SELECT coalesce(jp_plan_number('SELECT * FROM jp_ra_outer o JOIN jp_ra_inner i ON o.k = i.k', 'Rows Read Ahead: (\d+)'), 0) IN (999, 1000) AS read_ahead_shown_all;
SELECT count(*) AS values, count(*) FILTER (WHERE first_joined = (x / 7 + 1) * 7) AS first_joined_right
FROM (SELECT x, (SELECT o.k FROM jp_ra_outer o JOIN jp_ra_inner i ON o.k = i.k WHERE o.k > x LIMIT 1) AS first_joined
	  FROM generate_series(0, 980, 35) x) s;
-- every row that joins
SELECT a.h = b.h AS all_joined FROM
	(SELECT md5(string_agg(o.k::text, ',' ORDER BY o.k)) AS h FROM jp_ra_outer o JOIN jp_ra_inner i ON o.k = i.k) a,
	(SELECT md5(string_agg(k::text, ',' ORDER BY k)) AS h FROM jp_ra_inner) b;
RESET bloomamq.join_prefilter_read_ahead;
DROP FUNCTION jp_plan_number(text, text);
DROP TABLE jp_ra_outer, jp_ra_inner;

-- The differential test.  Each generated query runs with the setting off
-- and on; the rows (as a sorted multiset) must be equal.  Returns the
-- number of queries, of mismatches (must be 0), and of queries whose plan
-- had a pre-filter: all, parallel ones, and ones with a small work_mem.
-- How many get one is the planner's choice, which varies between majors:
-- the test asserts that many do, in each kind of plan.
CREATE FUNCTION jp_differential(nqueries int)
RETURNS TABLE (queries int, mismatches int, prefiltered int, parallel_prefiltered int, small_work_mem_prefiltered int, pushed int, agg_pushed int, published int, collected int, shared_collected int)
LANGUAGE plpgsql AS $$
DECLARE
	conds text[] := ARRAY[
		'f.a = d.a8',                        -- int4 = int8
		'f.b = d.a8',                        -- int8 = int8
		'f.t = d.t',                         -- text
		'f.a = d.a8 AND f.t = d.t',          -- two keys
		'f.b = d.a8 AND f.s = d.n',          -- two integer keys, one skewed
		'f.s = d.n',                         -- skewed key
		'f.num = d.num',                     -- numeric of two scales
		'f.fl = d.fl4',                      -- float8 = float4
		'f.bp = d.bp',                       -- bpchar of two lengths
		'f.t = d.t COLLATE "C"',             -- an explicit deterministic collation
		'f.a + 1 = d.a8 + 1'                 -- expressions as keys
	];
	jtypes text[] := ARRAY['inner', 'left', 'right', 'full', 'semi', 'anti', 'in', 'chain', 'chain', 'rsemi', 'ranti', 'agg'];
	fcols text;
	lower_jt text;
	dfilter text;
	cond text;
	jt text;
	q text;
	plan text;
	par boolean;
	i int;
BEGIN
	queries := 0; mismatches := 0; prefiltered := 0; parallel_prefiltered := 0; small_work_mem_prefiltered := 0; pushed := 0; agg_pushed := 0; published := 0; collected := 0; shared_collected := 0;
	PERFORM setseed(0.42);
	FOR i IN 1 .. nqueries LOOP
		cond := conds[1 + floor(random() * array_length(conds, 1))::int];
		jt := jtypes[1 + floor(random() * array_length(jtypes, 1))::int];
		-- the inner side: empty, a few keys, a tenth, half
		dfilter := (ARRAY['w < 0', 'w < 2', 'w < 10', 'w < 50'])[1 + floor(random() * 4)::int];
		SELECT string_agg(DISTINCT m[1], ', ') INTO fcols FROM regexp_matches(cond, 'f\.(\w+)', 'g') m;
		q := CASE jt
			WHEN 'inner' THEN format('SELECT f.id, d.id FROM jp_fact f JOIN (SELECT * FROM jp_dim WHERE %s) d ON %s', dfilter, cond)
			WHEN 'left' THEN format('SELECT f.id, d.id FROM jp_fact f LEFT JOIN (SELECT * FROM jp_dim WHERE %s) d ON %s', dfilter, cond)
			WHEN 'right' THEN format('SELECT f.id, d.id FROM jp_fact f RIGHT JOIN (SELECT * FROM jp_dim WHERE %s) d ON %s', dfilter, cond)
			WHEN 'full' THEN format('SELECT f.id, d.id FROM jp_fact f FULL JOIN (SELECT * FROM jp_dim WHERE %s) d ON %s', dfilter, cond)
			WHEN 'semi' THEN format('SELECT f.id FROM jp_fact f WHERE EXISTS (SELECT 1 FROM jp_dim d WHERE %s AND %s)', dfilter, cond)
			WHEN 'anti' THEN format('SELECT f.id FROM jp_fact f WHERE NOT EXISTS (SELECT 1 FROM jp_dim d WHERE %s AND %s)', dfilter, cond)
			-- the few dim rows with a match, or without: right semi and right anti joins from 18 and 16
			WHEN 'rsemi' THEN format('SELECT d.id FROM (SELECT * FROM jp_dim WHERE %s) d WHERE EXISTS (SELECT 1 FROM jp_fact f WHERE %s)', dfilter, cond)
			WHEN 'ranti' THEN format('SELECT d.id FROM (SELECT * FROM jp_dim WHERE %s) d WHERE NOT EXISTS (SELECT 1 FROM jp_fact f WHERE %s)', dfilter, cond)
			-- a join below the pre-filtered one, of any type: push-down
			WHEN 'chain' THEN format('SELECT f.id, c.c_id, d.id FROM (jp_fact f %s jp_cust c ON f.id %% 3000 = c.c_id AND c.seg < 5) JOIN (SELECT * FROM jp_dim WHERE %s) d ON %s',
				(ARRAY['JOIN', 'LEFT JOIN', 'RIGHT JOIN', 'FULL JOIN'])[1 + floor(random() * 4)::int], dfilter, cond)
			-- fact rows grouped by their keys: push-down below the aggregate
			WHEN 'agg' THEN format('SELECT f.n, f.ids, d.id FROM (SELECT %s, count(*) AS n, sum(id) AS ids FROM jp_fact GROUP BY %s) f JOIN (SELECT * FROM jp_dim WHERE %s) d ON %s',
				fcols, fcols, dfilter, cond)
			ELSE format('SELECT d.id FROM jp_dim d WHERE %s AND d.a8 IN (SELECT f.b FROM jp_fact f WHERE f.s < 100)', dfilter)
		END;
		PERFORM set_config('join_collapse_limit', CASE WHEN random() < 0.5 THEN '1' ELSE '8' END, true);
		-- plans: serial or parallel, Parallel Hash or not, one batch or many
		par := random() < 0.3;
		PERFORM set_config('max_parallel_workers_per_gather', CASE WHEN par THEN '2' ELSE '0' END, true);
		PERFORM set_config('parallel_setup_cost', CASE WHEN par THEN '0' ELSE '1000' END, true);
		PERFORM set_config('parallel_tuple_cost', CASE WHEN par THEN '0' ELSE '0.1' END, true);
		PERFORM set_config('min_parallel_table_scan_size', CASE WHEN par THEN '0' ELSE '8MB' END, true);
		PERFORM set_config('enable_parallel_hash', CASE WHEN random() < 0.5 THEN 'on' ELSE 'off' END, true);
		PERFORM set_config('work_mem', CASE WHEN random() < 0.3 THEN '64kB' ELSE '4MB' END, true);
		PERFORM set_config('enable_nestloop', 'off', true);
		PERFORM set_config('enable_mergejoin', 'off', true);
		PERFORM set_config('enable_hashagg', CASE WHEN random() < 0.5 THEN 'on' ELSE 'off' END, true);
		-- rows read ahead for every filter, or (small filters) for none
		PERFORM set_config('bloomamq.join_prefilter_read_ahead', CASE WHEN random() < 0.5 THEN 'on' ELSE 'auto' END, true);

		queries := queries + 1;
		IF NOT (jp_parallel(q)).same THEN
			mismatches := mismatches + 1;
			RAISE NOTICE 'mismatch: %', q;
		END IF;
		SELECT string_agg(p, E'\n') INTO plan FROM jp_explain(q, true) p;
		IF plan LIKE '%AmqOuterCollect%' THEN
			collected := collected + 1;
		END IF;
		IF plan LIKE '%Parallel Custom Scan (AmqOuterCollect)%' THEN
			shared_collected := shared_collected + 1;
		END IF;
		IF plan LIKE '%AmqPrefilter%' THEN
			prefiltered := prefiltered + 1;
			IF plan LIKE '%Gather%' THEN
				parallel_prefiltered := parallel_prefiltered + 1;
			END IF;
			IF work_mem_is_small() THEN
				small_work_mem_prefiltered := small_work_mem_prefiltered + 1;
			END IF;
			IF plan LIKE '%pushed down from%' THEN
				pushed := pushed + 1;
				IF jt = 'agg' THEN
					agg_pushed := agg_pushed + 1;
				END IF;
				IF plan LIKE '%published to the workers%' THEN
					published := published + 1;
				END IF;
			END IF;
		END IF;
	END LOOP;
	RETURN NEXT;
END
$$;

CREATE FUNCTION work_mem_is_small() RETURNS boolean LANGUAGE sql AS
$$ SELECT current_setting('work_mem') = '64kB' $$;

-- 400 queries; bloomamq_test.scale (a fraction, default 1; tools/valgrind-check
-- sets it) runs that share of them, at least 40: the output is the same.
SELECT greatest(40, round(400 * coalesce(nullif(current_setting('bloomamq_test.scale', true), '')::float8, 1)))::int
	AS nqueries \gset
SELECT queries = :nqueries AS all_compared, mismatches, prefiltered >= queries / 4 AS many_prefiltered,
	parallel_prefiltered > 0 AS some_parallel_prefiltered,
	small_work_mem_prefiltered > 0 AS some_small_work_mem_prefiltered,
	pushed > 0 AS some_pushed_down, agg_pushed > 0 AS some_pushed_below_an_aggregate,
	published > 0 AS some_published_to_workers,
	-- the few dim rows against all of jp_fact ('rsemi', 'ranti'): before 18
	-- some plans hash jp_fact, and its rows are filtered by the outer keys
	collected > 0 OR current_setting('server_version_num')::int >= 180000
		AS some_inner_prefiltered,
	-- ... also under Parallel Hash, with one filter of all participants' keys
	shared_collected > 0 OR current_setting('server_version_num')::int >= 180000
		AS some_inner_prefiltered_under_parallel_hash
FROM jp_differential(:nqueries);

DROP FUNCTION jp_differential(int);
DROP FUNCTION jp_parallel(text);
DROP FUNCTION jp_explain(text, boolean);
DROP FUNCTION work_mem_is_small();
DROP COLLATION jp_ci;
DROP TABLE jp_fact, jp_dim, jp_cust, jp_big, jp_bdim;
