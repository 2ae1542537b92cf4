-- amq_agg has an aggregate of its own for each common key type (Citus
-- pushes down only aggregates whose declared argument types are the
-- call's own).  Each gives the bytes of the polymorphic path
-- (amq_from_array takes anyarray), for the default kind, Parquet's hashing
-- and a static kind; types reached by an implicit cast (varchar, bpchar,
-- name) too.
SELECT count(*) AS amq_agg_aggregates,
	count(*) FILTER (WHERE p.proargtypes[0] = 'anyelement'::regtype) AS polymorphic
FROM pg_aggregate a JOIN pg_proc p ON p.oid = a.aggfnoid
WHERE p.proname = 'amq_agg';

CREATE TEMP TABLE k AS SELECT g FROM generate_series(1, 3000) g;
CREATE TEMP TABLE cases (name text, expr text, parquet bool);
INSERT INTO cases VALUES
	('smallint', 'g::int2', true), ('integer', 'g::int4', true), ('bigint', 'g::int8 * 7919', true),
	('text', '''k'' || g', true), ('varchar', '(''k'' || g)::varchar', true),
	('bpchar', '(''k'' || g)::char(8)', true), ('name', '(''k'' || g)::name', false),
	('uuid', 'md5(g::text)::uuid', false), ('bytea', 'int8send(g)', true),
	('numeric', 'g::numeric / 7', false), ('real', 'g::float4 / 3', true),
	('double precision', 'g / 7.0::float8', true), ('date', 'date ''2020-01-01'' + g', true),
	('timestamp', 'timestamp ''2020-01-01'' + g * interval ''1 minute''', true),
	('timestamptz', 'timestamptz ''2020-01-01 UTC'' + g * interval ''1 second''', true),
	('boolean', 'g % 3 = 0', false);

CREATE FUNCTION same_as_polymorphic(expr text, kind text) RETURNS bool
LANGUAGE plpgsql AS $$
DECLARE
	a bytea;
	b bytea;
BEGIN
	EXECUTE format('SELECT amq_agg(%s, 0.01, %L)::bytea FROM k', expr, kind) INTO a;
	EXECUTE format('SELECT amq_from_array(array_agg(%s), 0.01, %L)::bytea FROM k', expr, kind) INTO b;
	RETURN a = b;
END $$;

SELECT name, same_as_polymorphic(expr, 'blocked') AS blocked,
	same_as_polymorphic(expr, 'ribbon') AS ribbon,
	CASE WHEN parquet THEN same_as_polymorphic(expr, 'parquet') END AS parquet
FROM cases ORDER BY name;

DROP FUNCTION same_as_polymorphic(text, text);
DROP TABLE k, cases;
