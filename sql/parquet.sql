-- Parquet interchange, against split block filters that a Parquet writer
-- (DuckDB, see test/vectors/parquet/README.md) wrote over known values:
-- imported bitsets find every value and answer absent values exactly as the
-- writer's own check does, and the same values added here give the
-- writer's bitset byte for byte.

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

CREATE TABLE vec (name text PRIMARY KEY, typ regtype, bits bytea);
CREATE TABLE vals (name text, v text);
CREATE TABLE absent (name text, v text, writer_says bool);
CREATE TABLE load_vals (v text);
CREATE TABLE load_absent (v text, writer_says bool);
\set hex `cat test/vectors/parquet/int4.bitset.hex`
INSERT INTO vec VALUES ('int4', 'int4', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/int4.values'
\copy load_absent FROM 'test/vectors/parquet/int4.absent'
INSERT INTO vals SELECT 'int4', v FROM load_vals;
INSERT INTO absent SELECT 'int4', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/int4_32b.bitset.hex`
INSERT INTO vec VALUES ('int4_32b', 'int4', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/int4_32b.values'
\copy load_absent FROM 'test/vectors/parquet/int4_32b.absent'
INSERT INTO vals SELECT 'int4_32b', v FROM load_vals;
INSERT INTO absent SELECT 'int4_32b', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/int8.bitset.hex`
INSERT INTO vec VALUES ('int8', 'int8', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/int8.values'
\copy load_absent FROM 'test/vectors/parquet/int8.absent'
INSERT INTO vals SELECT 'int8', v FROM load_vals;
INSERT INTO absent SELECT 'int8', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/int8_8k.bitset.hex`
INSERT INTO vec VALUES ('int8_8k', 'int8', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/int8_8k.values'
\copy load_absent FROM 'test/vectors/parquet/int8_8k.absent'
INSERT INTO vals SELECT 'int8_8k', v FROM load_vals;
INSERT INTO absent SELECT 'int8_8k', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/int8_32b_saturated.bitset.hex`
INSERT INTO vec VALUES ('int8_32b_saturated', 'int8', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/int8_32b_saturated.values'
\copy load_absent FROM 'test/vectors/parquet/int8_32b_saturated.absent'
INSERT INTO vals SELECT 'int8_32b_saturated', v FROM load_vals;
INSERT INTO absent SELECT 'int8_32b_saturated', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/float4.bitset.hex`
INSERT INTO vec VALUES ('float4', 'float4', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/float4.values'
\copy load_absent FROM 'test/vectors/parquet/float4.absent'
INSERT INTO vals SELECT 'float4', v FROM load_vals;
INSERT INTO absent SELECT 'float4', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/float8.bitset.hex`
INSERT INTO vec VALUES ('float8', 'float8', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/float8.values'
\copy load_absent FROM 'test/vectors/parquet/float8.absent'
INSERT INTO vals SELECT 'float8', v FROM load_vals;
INSERT INTO absent SELECT 'float8', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/text.bitset.hex`
INSERT INTO vec VALUES ('text', 'text', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/text.values'
\copy load_absent FROM 'test/vectors/parquet/text.absent'
INSERT INTO vals SELECT 'text', v FROM load_vals;
INSERT INTO absent SELECT 'text', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/text_128b.bitset.hex`
INSERT INTO vec VALUES ('text_128b', 'text', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/text_128b.values'
\copy load_absent FROM 'test/vectors/parquet/text_128b.absent'
INSERT INTO vals SELECT 'text_128b', v FROM load_vals;
INSERT INTO absent SELECT 'text_128b', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/text_32b.bitset.hex`
INSERT INTO vec VALUES ('text_32b', 'text', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/text_32b.values'
\copy load_absent FROM 'test/vectors/parquet/text_32b.absent'
INSERT INTO vals SELECT 'text_32b', v FROM load_vals;
INSERT INTO absent SELECT 'text_32b', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
\set hex `cat test/vectors/parquet/uuid.bitset.hex`
INSERT INTO vec VALUES ('uuid', 'uuid', decode(:'hex', 'hex'));
\copy load_vals FROM 'test/vectors/parquet/uuid.values'
\copy load_absent FROM 'test/vectors/parquet/uuid.absent'
INSERT INTO vals SELECT 'uuid', v FROM load_vals;
INSERT INTO absent SELECT 'uuid', v, writer_says FROM load_absent;
TRUNCATE load_vals, load_absent;
SELECT name, typ, length(bits) AS bytes, (SELECT count(*) FROM vals WHERE vals.name = vec.name) AS values
FROM vec ORDER BY name;

-- one vector checked through SQL, values cast to the column's type
CREATE FUNCTION pg_temp.check_vector(vname text, vtyp regtype, bits bytea,
	OUT false_negatives bigint, OUT untyped_false_negatives bigint,
	OUT absent_disagree bigint, OUT rebuilt_same bool, OUT agg_false_negatives bigint,
	OUT agg_power_of_two bool)
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format($q$
		SELECT
			(SELECT count(*) FROM vals WHERE name = $1 AND NOT amq_from_parquet($2, %1$L) @> v::%1$s),
			(SELECT count(*) FROM vals WHERE name = $1 AND NOT amq_from_parquet($2) @> v::%1$s),
			(SELECT count(*) FROM absent WHERE name = $1
				AND (amq_from_parquet($2, %1$L) @> v::%1$s) IS DISTINCT FROM writer_says),
			(SELECT amq_to_parquet(amq_add(amq_from_parquet(decode(repeat('00', length($2)), 'hex'), %1$L),
				array_agg(v::%1$s))) = $2 FROM vals WHERE name = $1),
			(SELECT count(*) FROM vals, (SELECT amq_agg(v::%1$s, 0.01, 'parquet') AS f FROM vals WHERE name = $1) a
				WHERE name = $1 AND NOT f @> v::%1$s),
			(SELECT length(amq_to_parquet(amq_agg(v::%1$s, 0.01, 'parquet'))) & (length(amq_to_parquet(amq_agg(v::%1$s, 0.01, 'parquet'))) - 1) = 0
				FROM vals WHERE name = $1)
		$q$, vtyp)
	INTO false_negatives, untyped_false_negatives, absent_disagree, rebuilt_same,
		agg_false_negatives, agg_power_of_two
	USING vname, bits;
END $$;

SELECT name, c.* FROM vec, LATERAL pg_temp.check_vector(name, typ, bits) c ORDER BY name;

-- smaller integer types probe an INT64 column's filter by value; a value an
-- INT32 column cannot hold is never in it
SELECT f @> 0::int2 AS int2_zero, f @> 999::int4 AS int4_999, f @> 1000::int8 AS int8_1000
FROM (SELECT amq_from_parquet(bits, 'int8') AS f FROM vec WHERE name = 'int8') s;
SELECT f @> 5::int8 AS int8_5, f @> 4294967301::int8 AS beyond_int32
FROM (SELECT amq_from_parquet(bits, 'int4') AS f FROM vec WHERE name = 'int4') s;

-- SQL's 0 and -0 are one value, Parquet's two: a filter holds the one
-- given, as a Parquet writer would, and a probe of either finds it
SELECT f @> 0::float8 AS zero, f @> '-0'::float8 AS minus_zero, amq_count(f) AS hashes,
	amq_to_parquet(f) <> amq_to_parquet(amq_from_array(ARRAY[0::float8], 0.01, 'parquet')) AS bits_of_minus_zero
FROM amq_from_array(ARRAY['-0'::float8], 0.01, 'parquet') f;
SELECT f @> '-0'::float4 AS minus_zero
FROM amq_add(amq_new('parquet', 10), 0::float4) f;

-- what amq_info says
SELECT amq_info(amq_from_parquet(bits, 'int8')) - 'estimated_fpr' - 'estimated_distinct' - 'fill_ratio' - 'keys' - 'target_fpr'
FROM vec WHERE name = 'int8';
SELECT amq_info(amq_from_parquet(bits)) ->> 'parquet_type' AS untyped FROM vec WHERE name = 'int8';
-- the key estimate of an imported bitset is near the writer's count
SELECT name, amq_count(amq_from_parquet(bits, typ))::float8 / (SELECT count(*) FROM vals WHERE vals.name = vec.name) BETWEEN 0.8 AND 1.2 AS estimate_near
FROM vec WHERE length(bits) >= 1024 ORDER BY name;

-- a round trip keeps the bytes
SELECT bool_and(amq_to_parquet(amq_from_parquet(bits, typ)) = bits) AS round_trip FROM vec;

-- errors
SELECT pg_temp.err($$SELECT amq_to_parquet(amq_from_array(ARRAY[1]))$$);
SELECT pg_temp.err($$SELECT amq_to_parquet(amq_from_array(ARRAY[1], 0.01, 'bloom'))$$);
SELECT pg_temp.err($$SELECT amq_from_parquet('\x00'::bytea)$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(''::bytea)$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(decode(repeat('00', 32), 'hex'), 'numeric')$$);
SELECT pg_temp.err($$SELECT amq_agg(x, 0.01, 'parquet') FROM (VALUES (true)) v(x)$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(bits, 'int8') @> 'x'::text FROM vec WHERE name = 'int8'$$);
SELECT pg_temp.err($$SELECT amq_add(amq_from_parquet(bits, 'int8'), 1.5::float8) FROM vec WHERE name = 'int8'$$);
SELECT pg_temp.err($$SELECT amq_new('parquet', 10) | amq_new('blocked', 10)$$);
SELECT amq_from_parquet(NULL) IS NULL AS null_in_null_out;
