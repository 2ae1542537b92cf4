-- Canonical hashing: equal values hash equally across the types of one
-- family; families stay apart; the hash values are fixed.

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

-- fixed values: these lock the portable hash down
SELECT amq_hash(1::int4) AS i4, amq_hash(1::int8) AS i8, amq_hash(1::int2) AS i2;
SELECT amq_hash(-1::int8) AS neg, amq_hash(0::int8) AS zero;
SELECT amq_hash('alice'::text) AS t, amq_hash('alice'::varchar) AS vc,
	amq_hash('alice  '::char(7)) AS bp, amq_hash('alice'::name) AS nm;
SELECT amq_hash(''::text) AS empty_text, amq_hash('\x'::bytea) AS empty_bytea;
SELECT amq_hash(1.5::float8) AS f8, amq_hash(1.5::float4) AS f4;
SELECT amq_hash(0.0::float8) = amq_hash('-0'::float8) AS zero_folded,
	amq_hash('NaN'::float8) = amq_hash('NaN'::float4) AS nan_folded;
SELECT amq_hash(1.0::numeric) = amq_hash(1.00::numeric) AS scale_free,
	amq_hash(1.0::numeric) = amq_hash(1.01::numeric) AS distinct_values,
	amq_hash(1.0::numeric) AS num1;
SELECT amq_hash('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid) AS uuid,
	amq_hash('2024-01-02'::date) AS date,
	amq_hash('2024-01-02 03:04:05'::timestamp) AS ts,
	amq_hash(true) AS t, amq_hash(false) AS f;
SELECT amq_hash('2024-01-02 03:04:05+00'::timestamptz) AS tstz;

-- an int4 filter answers int8 and int2 probes; float4 vs float8
SELECT f @> 3000000000::int8 AS big_absent, f @> 7::int8 AS i8, f @> 7::int2 AS i2
FROM (SELECT amq_agg(g) AS f FROM generate_series(1, 100) g) s;
SELECT f @> 0.5::float8 AS half, f @> '-0'::float8 AS negzero, f @> 'NaN'::float8 AS nan
FROM (SELECT amq_agg(x) AS f FROM (VALUES (0.5::float4), (0::float4), ('NaN'::float4)) v(x)) s;
SELECT f @> 2.50::numeric AS scale, f @> 2.5000::numeric AS scale2, f @> 2.51::numeric AS other
FROM (SELECT amq_agg(2.5::numeric) AS f) s;
SELECT f @> 'abc'::text AS text_probe, f @> 'abc   '::char(6) AS bpchar_probe
FROM (SELECT amq_agg('abc '::char(4)) AS f) s;
SELECT f @> '2024-01-02'::date AS d, f @> '2024-01-03'::date AS d2
FROM (SELECT amq_agg('2024-01-02'::date) AS f) s;
SELECT f @> true AS t, f @> false AS f
FROM (SELECT amq_agg(true) AS f) s;

-- other hashable types use their extended hash function, not portable
SELECT amq_info(f) ->> 'key_family' AS family, amq_info(f) ->> 'key_type' AS type,
	(amq_info(f) ->> 'portable')::bool AS portable, f @> '10.0.0.1'::inet AS hit,
	f @> '10.0.0.2'::inet AS miss
FROM (SELECT amq_agg('10.0.0.1'::inet) AS f) s;
SELECT f @> ARRAY[1, 2] AS hit, f @> ARRAY[2, 1] AS miss
FROM (SELECT amq_agg(ARRAY[1, 2]) AS f) s;
SELECT pg_temp.err($$SELECT amq_agg('10.0.0.1'::inet) @> '10.0.0.1'::cidr$$);

-- domains hash as their base type
CREATE DOMAIN posint AS int CHECK (VALUE > 0);
SELECT amq_hash(5::posint) = amq_hash(5) AS same, amq_agg(5::posint) @> 5 AS hit;
DROP DOMAIN posint;

-- nondeterministic collations are refused
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT pg_temp.err($$SELECT amq_hash('a'::text COLLATE ci)$$);
SELECT pg_temp.err($$SELECT amq_agg(x COLLATE ci) FROM (VALUES ('a')) v(x)$$);
SELECT amq_hash('a'::text COLLATE "C") = amq_hash('a'::text) AS c_collation_ok;
DROP COLLATION ci;

-- cross-family probes are errors naming the family
SELECT pg_temp.err($$SELECT amq_agg(1) @> 1::float8$$);
SELECT pg_temp.err($$SELECT amq_agg('2024-01-02'::date) @> '2024-01-02'::timestamp$$);
SELECT pg_temp.err($$SELECT amq_agg(true) @> 1$$);
