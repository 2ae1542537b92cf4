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

-- 100,000 keys; bloomamq_test.scale (a fraction, default 1;
-- tools/valgrind-check sets it) makes them fewer, no fewer than 50,000:
-- the output is the same at any scale.
SELECT greatest(50000, round(100000 * coalesce(nullif(current_setting('bloomamq_test.scale', true), '')::float8, 1)))::int
	AS nev \gset
CREATE TABLE ev AS
SELECT g AS id, (g % 10000) AS grp, 'user_' || (g % 3000) AS name
FROM generate_series(1, :nev) g;
INSERT INTO ev VALUES (NULL, 1, NULL);
ANALYZE ev;

-- exact sizing: keys are the distinct non-NULL keys; no false negatives
SELECT amq_count(f) = :nev AS every_key, amq_kind(f) AS kind,
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
	amq_count(f) BETWEEN 0.99 * :nev AND :nev AS keys,
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
SELECT count(*) AS groups, sum(amq_count(f)) = :nev AS every_key, max(octet_length(f::bytea)) < 200 AS small
FROM per_group;
SELECT count(*) AS false_negatives FROM ev JOIN per_group p USING (grp) WHERE NOT p.f @> ev.id;
-- key 42 is in group 42; the others claim it at their false-positive rate
-- (1% of 9,999 groups)
SELECT count(*) FILTER (WHERE grp = 42) AS own_group_claims_42,
	count(*) FILTER (WHERE grp <> 42) <= 100 AS others_within_fpr
FROM per_group WHERE f @> 42;

-- amq_union_agg: union of per-group filters of one geometry
CREATE TABLE per_group_fixed AS
SELECT grp % 10 AS grp, amq_agg(id, 0.01, 'blocked', 200000) AS f FROM ev GROUP BY grp % 10;
SELECT amq_count(u) BETWEEN 0.95 * :nev AND 1.05 * :nev AS keys_estimated_near,
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
-- partial states of 8192 hashes or more go to the leader through the
-- query's shared memory (each plan has partial aggregates below a Gather):
-- grouped, and rescanned (a nested loop runs the Gather again for each
-- outer row; each run's shared memory is freed at the next)
CREATE FUNCTION pg_temp.partial_plan(q text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	plan text := '';
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		plan := plan || line || E'\n';
	END LOOP;
	RETURN plan LIKE '%Gather%' AND plan LIKE '%Partial%Aggregate%';
END $$;
CREATE TABLE ev2 AS SELECT id, id % 2 AS k FROM ev WHERE id IS NOT NULL;
ANALYZE ev2;
SELECT pg_temp.partial_plan('SELECT k, amq_agg(id) FROM ev2 GROUP BY k') AS grouped_partial;
CREATE TABLE par_grouped AS SELECT k, amq_agg(id) AS f FROM ev2 GROUP BY k;
SET enable_material = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT pg_temp.partial_plan('SELECT x, s.f FROM (SELECT x FROM generate_series(1, 3) x WHERE random() >= 0) x,
	(SELECT amq_agg(id) AS f FROM ev) s') AS rescanned_partial;
CREATE TABLE par_rescanned AS SELECT x, s.f FROM (SELECT x FROM generate_series(1, 3) x WHERE random() >= 0) x,
	(SELECT amq_agg(id) AS f FROM ev) s;
-- an aggregate of one's own whose combine function is not amq_agg_combine
-- gets partial states as tuples of their hashes, which it can read (here:
-- through their text form; it keeps the longest, which holds a third of the
-- keys at least: a process may see only the row with a NULL key)
CREATE FUNCTION pg_temp.keep_one(a amqaggstate, b amqaggstate) RETURNS amqaggstate
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
	'SELECT CASE WHEN a IS NULL OR length(b::text) > length(a::text) THEN b::text::amqaggstate ELSE a END';
CREATE AGGREGATE pg_temp.amq_one(anyelement) (SFUNC = amq_agg_trans, STYPE = amqaggstate,
	COMBINEFUNC = pg_temp.keep_one, PARALLEL = SAFE);
SELECT pg_temp.partial_plan('SELECT pg_temp.amq_one(id) FROM ev') AS own_combine_partial;
SELECT amq_count(amq_agg_final(s::text::amqaggstate)) BETWEEN (:nev + 2) / 3 AND :nev AS own_combine_read
FROM (SELECT pg_temp.amq_one(id) AS s FROM ev) t;
RESET enable_material;
RESET enable_hashjoin;
RESET enable_mergejoin;
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
SELECT k, f::bytea = (SELECT amq_agg(id) FROM ev2 e WHERE e.k = p.k)::bytea AS same_grouped
FROM par_grouped p ORDER BY k;
SELECT count(*) AS runs, bool_and(f::bytea = (SELECT amq_agg(id) FROM ev)::bytea) AS same_rescanned
FROM par_rescanned;
RESET max_parallel_workers_per_gather;

-- which amq_agg a call resolves to: the overload of its key type (state
-- amqaggstate) for the built-in key types and domains over them, the
-- anyelement one (state internal) for other types; each filter holds its
-- keys
CREATE DOMAIN pg_temp.account_id AS bigint;
CREATE TABLE typed (i2 smallint, i4 integer, i8 bigint, r4 real, r8 double precision,
	num numeric, t text, vc varchar(10), bp char(5), nm name, ba bytea, u uuid, d date,
	ts timestamp, tstz timestamptz, b boolean, dom pg_temp.account_id, ip inet);
INSERT INTO typed SELECT g, g, g, g, g, g, g::text, g::text, g::text, g::text, g::text::bytea,
	md5(g::text)::uuid, date '2026-01-01' + g, timestamp '2026-01-01' + g * interval '1 hour',
	timestamptz '2026-01-01 UTC' + g * interval '1 hour', g % 2 = 0, g,
	('10.0.' || (g / 256) || '.' || (g % 256))::inet
FROM generate_series(1, 500) g;
DO $$
DECLARE
	c record;
	agg text;
	holds boolean;
BEGIN
	FOR c IN SELECT attname FROM pg_attribute
			 WHERE attrelid = 'typed'::regclass AND attnum > 0 ORDER BY attnum
	LOOP
		EXECUTE format('CREATE TEMP VIEW v AS SELECT amq_agg(%I) AS f FROM typed', c.attname);
		SELECT d.refobjid::regprocedure::text INTO agg
		FROM pg_depend d JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
		WHERE r.ev_class = 'v'::regclass AND d.refclassid = 'pg_proc'::regclass;
		EXECUTE format('SELECT bool_and(f @> %I) FROM typed, v', c.attname) INTO holds;
		RAISE NOTICE '%: % (state %), holds its keys: %', c.attname, agg,
			(SELECT aggtranstype::regtype FROM pg_aggregate WHERE aggfnoid = agg::regprocedure),
			holds;
		DROP VIEW v;
	END LOOP;
END $$;
DROP TABLE typed;

-- the state type, amqaggstate: partial states taken out of one aggregate,
-- moved through their text form, and combined in another (as
-- Citus does across nodes) give the serial filter's bytes, for every kind
CREATE AGGREGATE pg_temp.amq_partial(anyelement, float8, text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, COMBINEFUNC = amq_agg_combine);
CREATE AGGREGATE pg_temp.amq_partial(anyelement, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, COMBINEFUNC = amq_agg_combine);
CREATE AGGREGATE pg_temp.amq_union_partial(amqfilter) (
	SFUNC = amq_union_agg_trans, STYPE = amqaggstate, COMBINEFUNC = amq_agg_combine);
CREATE AGGREGATE pg_temp.amq_combined(amqaggstate) (
	SFUNC = amq_agg_combine, STYPE = amqaggstate, FINALFUNC = amq_agg_final);
CREATE TABLE kinds_list (kind text, cap bigint);
INSERT INTO kinds_list VALUES ('bloom', NULL), ('blocked', NULL), ('twobit', NULL),
	('counting', NULL), ('cuckoo', NULL), ('scalable', NULL), ('xor', NULL), ('fuse', NULL),
	('ribbon', NULL), ('bloom', 200000), ('blocked', 200000), ('counting', 200000),
	('cuckoo', 200000), ('scalable', 200000);
CREATE TABLE states AS
SELECT k.kind, k.cap, e.grp % 7 AS part,
	CASE WHEN k.cap IS NULL THEN pg_temp.amq_partial(e.id, 0.01, k.kind)
		 ELSE pg_temp.amq_partial(e.id, 0.01, k.kind, k.cap) END AS st
FROM kinds_list k CROSS JOIN ev e WHERE e.id <= 20000 GROUP BY 1, 2, 3;
-- (with a capacity, bloom, blocked and counting fill one fixed-size filter:
-- its payload is the same whatever the rows' order or split, but the key
-- count is a count of adds that changed the filter, which is the serial
-- order's, or a union's estimate from the payload)
SELECT kind, cap,
	CASE WHEN cap IS NULL OR kind IN ('cuckoo', 'scalable') THEN combined = serial
		 ELSE substr(combined, 81) = substr(serial, 81) END AS same_via_text,
	amq_count(combined::amqfilter) BETWEEN 0.98 * amq_count(serial::amqfilter)
		AND 1.02 * amq_count(serial::amqfilter) AS count_near,
	parts
FROM (SELECT s.kind, s.cap, pg_temp.amq_combined(s.st::text::amqaggstate)::bytea AS combined,
		(SELECT CASE WHEN s.cap IS NULL THEN amq_agg(id, 0.01, s.kind)
					 ELSE amq_agg(id, 0.01, s.kind, s.cap) END FROM ev WHERE id <= 20000)::bytea AS serial,
		count(*) AS parts
	  FROM states s GROUP BY s.kind, s.cap) c
ORDER BY 1, 2;
-- (a union of filters estimates its key count from the payload, bounded
-- by the larger count and the sum of the two; the bounds of a union of
-- unions depend on how the filters were grouped, and so may the count: the
-- header's other fields and the payload are the serial union's)
SELECT substr(c, 81) = substr(s, 81) AS same_union_payload_via_text,
	substr(c, 1, 24) = substr(s, 1, 24) AND substr(c, 33, 40) = substr(s, 33, 40)
		AS same_header_but_count,
	amq_count(c::amqfilter) BETWEEN 0.99 * amq_count(s::amqfilter)
		AND 1.01 * amq_count(s::amqfilter) AS count_near
FROM (SELECT pg_temp.amq_combined(u::text::amqaggstate)::bytea AS c
	  FROM (SELECT grp % 3 AS part, pg_temp.amq_union_partial(f) AS u
			FROM per_group_fixed GROUP BY 1) p) c,
	(SELECT amq_union_agg(f)::bytea AS s FROM per_group_fixed) s;
-- three partial states of blocked, as two workers and the leader give them:
-- the filter is planned for their total length where the lowest 1/64
-- of the hash space holds no key twice, and planned again if the fill's
-- count of their union says otherwise; every case gives the serial bytes
CREATE TABLE split3 AS
SELECT c.name, p.part, g.id
FROM generate_series(1, 30000) g(id)
CROSS JOIN (VALUES ('disjoint'), ('shared'), ('shared_above_sample'),
	('one_shared_above_sample')) c(name)
CROSS JOIN LATERAL (
	SELECT g.id % 3 AS part
	UNION ALL
	SELECT (g.id + 1) % 3
	WHERE CASE c.name
		WHEN 'shared' THEN g.id % 10 = 0
		WHEN 'shared_above_sample' THEN g.id % 10 = 0
			AND amq_hash(g.id) NOT BETWEEN 0 AND 288230376151711743
		WHEN 'one_shared_above_sample' THEN g.id = (SELECT min(i)
			FROM generate_series(1, 100) i
			WHERE amq_hash(i) NOT BETWEEN 0 AND 288230376151711743)
		ELSE false END) p;
SELECT name, count(*) AS parts, sum(n) - 30000 AS repeats,
	pg_temp.amq_combined(st::text::amqaggstate)::bytea
	= (SELECT amq_agg(id, 0.01, 'blocked') FROM generate_series(1, 30000) id)::bytea
	AS same_as_serial
FROM (SELECT name, part, count(*) AS n, pg_temp.amq_partial(id, 0.01, 'blocked') AS st
	  FROM split3 GROUP BY 1, 2) s
GROUP BY name ORDER BY name;
DROP TABLE split3;
-- a state is its text form's bytes: the final function takes one read back
SELECT amq_agg_final(st::text::amqaggstate)::bytea = amq_agg_final(st)::bytea AS final_of_text
FROM states WHERE kind = 'fuse' AND part = 3;
-- as a window aggregate the running state is finalized again and again
SELECT grp, amq_count(amq_agg(id) OVER (ORDER BY id)) AS running_keys
FROM ev WHERE id <= 5 ORDER BY id;
-- grouping sets: states of several groupings at once
SELECT grp % 2 AS g2, grp % 3 AS g3, amq_count(amq_agg(id)) AS keys
FROM ev WHERE id <= 12 GROUP BY GROUPING SETS ((grp % 2), (grp % 3), ()) ORDER BY 1, 2;
-- untrusted text input is validated; the support functions work only in an
-- aggregate
SELECT pg_temp.err($$SELECT 'not base64!'::amqaggstate$$);
SELECT pg_temp.err($$SELECT 'AAAA'::amqaggstate$$);
SELECT pg_temp.err($$SELECT encode(substr(decode(st::text, 'base64'), 1, 39), 'base64')::amqaggstate
	FROM states WHERE kind = 'bloom' AND cap IS NULL AND part = 1$$);
SELECT pg_temp.err($$SELECT amq_agg_trans(NULL::amqaggstate, 1)$$);
-- the hand-over forms of a parallel plan's partial states (modes 2 and 3)
-- are refused as input
SELECT m, pg_temp.err(format($$SELECT translate(encode(set_byte(decode(st::text, 'base64'), 1, %s),
	'base64'), E'\n', '')::amqaggstate FROM states WHERE kind = 'blocked' AND cap IS NULL AND part = 1$$, m))
FROM (VALUES (2), (3)) v(m);
DROP TABLE kinds_list, states;

-- errors
SELECT pg_temp.err($$SELECT amq_agg(id, 0.9) FROM ev$$);
SELECT pg_temp.err($$SELECT amq_agg(id, 0.01, 'nope') FROM ev$$);
SELECT pg_temp.err($$SELECT amq_agg(id, 0.01, 'blocked', 0) FROM ev$$);
SELECT pg_temp.err($$SELECT amq_agg(id, 0.0001, 'bloom', 10000000000) FROM ev$$);
SELECT pg_temp.err($$SELECT amq_agg(p) FROM (VALUES ('(1,2)'::point)) v(p)$$);

DROP TABLE ev, per_group, per_group_fixed, par, par3, par_union;
