-- Building, changing, probing, combining and inspecting filters.

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

-- amq_new: an empty filter answers false for everything
SELECT amq_kind(f), amq_count(f), f @> 1 AS has1, f @> 'x' AS hasx
FROM (SELECT amq_new('bloom', 1000) AS f) s;
SELECT amq_kind(amq_new('blocked', 1000, 0.001));
SELECT amq_info(amq_new('bloom', 1000, 0.01)) - 'bytes' - 'payload_bytes';

-- amq_add: a key, an array
SELECT f @> 42 AS has42, f @> 43 AS has43, amq_count(f)
FROM (SELECT amq_add(amq_new('blocked', 100), 42) AS f) s;
SELECT f @> 1 AS a, f @> 2 AS b, f @> 3 AS c, amq_count(f)
FROM (SELECT amq_add(amq_new('bloom', 100), ARRAY[1, 2, NULL]) AS f) s;
-- adding a key again does not count it twice
SELECT amq_count(amq_add(amq_add(amq_new('blocked', 100), 'x'::text), 'x'::text));

-- amq_from_array: exact sizing over distinct non-NULL elements
SELECT amq_count(amq_from_array(ARRAY[1, 1, 2, NULL, 3]));
SELECT amq_kind(amq_from_array(ARRAY[1, 2], 0.01, 'bloom'));
SELECT amq_count(amq_from_array('{}'::int[]));

-- probes: operator both ways, the function, overloads resolving without casts
CREATE TABLE t AS SELECT amq_from_array(ARRAY['alice', 'bob']) AS names,
	amq_from_array(ARRAY[1, 2, 3]) AS nums,
	amq_from_array(ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid]) AS uuids,
	amq_from_array(ARRAY['\xdeadbeef'::bytea]) AS bytes;
SELECT names @> 'alice' AS a, names @> 'carol' AS c, 'bob' <@ names AS b,
	amq_contains(names, 'alice'::text) AS fn FROM t;
SELECT nums @> 1 AS i4, nums @> 2::bigint AS i8, nums @> 3::smallint AS i2,
	4 <@ nums AS no4, 1::bigint <@ nums AS rev8 FROM t;
SELECT uuids @> 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS yes,
	uuids @> 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid AS no FROM t;
SELECT bytes @> '\xdeadbeef'::bytea AS yes, bytes @> '\xbeef'::bytea AS no FROM t;
-- varchar, bpchar and name probe a text filter
SELECT names @> 'alice'::varchar AS vc, names @> 'bob  '::char(5) AS bp,
	names @> 'alice'::name AS nm FROM t;

-- NULL key: NULL result
SELECT names @> NULL::text AS n1, amq_contains(nums, NULL::int) AS n2 FROM t;

-- contains_any / contains_all, with NULL elements like = ANY / = ALL
SELECT amq_contains_any(nums, ARRAY[7, 8, 3]) AS any_yes,
	amq_contains_any(nums, ARRAY[7, 8]) AS any_no,
	amq_contains_any(nums, ARRAY[7, NULL]) AS any_null,
	amq_contains_all(nums, ARRAY[1, 2, 3]) AS all_yes,
	amq_contains_all(nums, ARRAY[1, 9]) AS all_no,
	amq_contains_all(nums, ARRAY[1, NULL]) AS all_null,
	amq_contains_any(nums, '{}'::int[]) AS any_empty,
	amq_contains_all(nums, '{}'::int[]) AS all_empty FROM t;

-- union and intersection need one kind and geometry
SELECT f @> 1 AS a, f @> 3 AS c, f @> 5 AS e, amq_count(f), (amq_info(f)->>'keys_estimated')::bool AS est
FROM (SELECT amq_add(amq_new('bloom', 100), ARRAY[1, 2]) | amq_add(amq_new('bloom', 100), ARRAY[3, 4]) AS f) s;
SELECT f @> 2 AS common, f @> 1 AS only_left, amq_count(f) <= 1 AS bounded
FROM (SELECT amq_intersect(amq_add(amq_new('blocked', 100), ARRAY[1, 2]),
	amq_add(amq_new('blocked', 100), ARRAY[2, 3])) AS f) s;
SELECT amq_union(amq_new('blocked', 10), amq_add(amq_new('blocked', 10), 5)) & amq_new('blocked', 10) @> 5 AS empty_and;
SELECT amq_count(amq_new('blocked', 10) | amq_add(amq_new('blocked', 10), 5)) AS exact_with_empty;

-- inspection
SELECT amq_info(f) ->> 'kind' AS kind, (amq_info(f) ->> 'keys')::int AS keys,
	(amq_info(f) ->> 'k')::int AS k, amq_info(f) ->> 'key_family' AS family,
	amq_info(f) ->> 'hash_scheme' AS scheme, (amq_info(f) ->> 'portable')::bool AS portable,
	round((amq_info(f) ->> 'bits_per_key')::numeric, 1) AS bpk,
	amq_fpr(f) BETWEEN 0.005 AND 0.02 AS fpr_ok,
	abs(amq_estimate_distinct(f) - 10000) < 500 AS distinct_ok
FROM (SELECT amq_from_array(array_agg(g), 0.01, 'bloom') AS f FROM generate_series(1, 10000) g) s;
SELECT amq_info(f) ->> 'kind' AS kind, (amq_info(f) ->> 'k')::int AS k,
	amq_fpr(f) BETWEEN 0.005 AND 0.02 AS fpr_ok,
	abs(amq_estimate_distinct(f) - 10000) < 500 AS distinct_ok
FROM (SELECT amq_from_array(array_agg(g)) AS f FROM generate_series(1, 10000) g) s;

-- measured false-positive rate follows the target
SELECT kind, fpr, round(count(*) FILTER (WHERE f @> g)::numeric / 100000 / fpr, 1) BETWEEN 0.6 AND 1.4 AS near_target
FROM (VALUES ('bloom', 0.01), ('blocked', 0.01), ('bloom', 0.001), ('blocked', 0.001)) k(kind, fpr),
	LATERAL (SELECT amq_agg(g, fpr, kind) AS f FROM generate_series(1, 20000) g) s,
	generate_series(1000001, 1100000) g
GROUP BY kind, fpr ORDER BY kind, fpr;

-- errors, with their SQLSTATE
SELECT pg_temp.err($$SELECT amq_new('nope', 10)$$);
SELECT pg_temp.err($$SELECT amq_new('bloom', 0)$$);
SELECT pg_temp.err($$SELECT amq_new('bloom', -5)$$);
SELECT pg_temp.err($$SELECT amq_new('bloom', 10, 0)$$);
SELECT pg_temp.err($$SELECT amq_new('bloom', 10, 0.51)$$);
SELECT pg_temp.err($$SELECT amq_new('bloom', 10, 'NaN')$$);
SELECT pg_temp.err($$SELECT amq_from_array(ARRAY[1], 2.0)$$);
SELECT pg_temp.err($$SELECT amq_from_array(ARRAY[1], 0.01, 'quotient')$$);
SELECT pg_temp.err($$SELECT amq_new('blocked', 100000000000, 0.0001)$$);
SELECT pg_temp.err($$SELECT nums @> 'alice'::text FROM t$$);
SELECT pg_temp.err($$SELECT names @> 1 FROM t$$);
SELECT pg_temp.err($$SELECT nums @> 1.5::numeric FROM t$$);
SELECT pg_temp.err($$SELECT amq_add(nums, 'x'::text) FROM t$$);
SELECT pg_temp.err($$SELECT names | nums FROM t$$);
SELECT pg_temp.err($$SELECT amq_new('bloom', 10) | amq_new('blocked', 10)$$);
SELECT pg_temp.err($$SELECT amq_new('bloom', 10) | amq_new('bloom', 10000)$$);
SELECT pg_temp.err($$SELECT amq_new('bloom', 10) & amq_new('bloom', 10, 0.001)$$);
SELECT pg_temp.err($$SELECT amq_from_array(ARRAY['(1,2)'::point])$$);

DROP TABLE t;
