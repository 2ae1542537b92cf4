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
-- the same, with the hint instead of the detail
CREATE FUNCTION pg_temp.err_hint(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	hint text;
BEGIN
	EXECUTE q;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
	RETURN SQLSTATE || ': ' || SQLERRM || coalesce(' (hint: ' || nullif(hint, '') || ')', '');
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

-- NaN is one value to SQL and many bit patterns to Parquet, which hashes a
-- float's bits.  A NaN probe finds the quiet NaNs writers produce, in both
-- signs (0x7fc00000 and 0xffc00000 in a FLOAT column, 0x7ff8000000000000
-- and 0xfff8000000000000 in a DOUBLE one), whatever the probe's own bits,
-- and a NaN of any other bits when probed with those bits.  A filter
-- holding exactly one encoding is made from its bytes (little-endian, as
-- bytea, which Parquet hashes alike); 8 KB bitsets are stored out of line,
-- so probes of the table read TOAST slices, and probes of the filters made
-- in the query read them whole.
CREATE TABLE nan_enc (col regtype, bits text, f amqfilter);
INSERT INTO nan_enc
SELECT col::regtype, bits, amq_from_parquet(amq_to_parquet(amq_add(
		amq_from_parquet(decode(repeat('00', 8192), 'hex')), decode(le, 'hex'))), col::regtype)
FROM (VALUES ('float4', '7fc00000', '0000c07f'), ('float4', 'ffc00000', '0000c0ff'),
	('float4', '7fc00001', '0100c07f'), ('float4', '7f800001', '0100807f'),
	('float4', 'ffc12345', '4523c1ff'),
	('float8', '7ff8000000000000', '000000000000f87f'), ('float8', 'fff8000000000000', '000000000000f8ff'),
	('float8', '7ff8000000000001', '010000000000f87f'), ('float8', '7ff0000000000001', '010000000000f07f'),
	('float8', 'fff8000000012345', '452301000000f8ff')) v(col, bits, le);
-- probes SQL makes: its NaN, negated, and inf - inf (the platform's own)
CREATE TABLE nan_probe (probe text, f4 float4, f8 float8);
INSERT INTO nan_probe VALUES
	('NaN', 'NaN', 'NaN'), ('-NaN', -'NaN'::float4, -'NaN'::float8),
	('inf - inf', 'inf'::float4 - 'inf'::float4, 'inf'::float8 - 'inf'::float8);
-- probes of other bits, which SQL does not make: a binary COPY of
-- (name, float4 bits, float8 bits) = (payload, 7fc00001, 7ff8000000000001),
-- (signaling, 7f800001, 7ff0000000000001) and
-- (negative payload, ffc12345, fff8000000012345)
\copy nan_probe FROM PROGRAM 'printf ''PGCOPY\012\377\015\012\000\000\000\000\000\000\000\000\000\000\003\000\000\000\007payload\000\000\000\004\177\300\000\001\000\000\000\010\177\370\000\000\000\000\000\001\000\003\000\000\000\011signaling\000\000\000\004\177\200\000\001\000\000\000\010\177\360\000\000\000\000\000\001\000\003\000\000\000\020negative\040payload\000\000\000\004\377\301\043E\000\000\000\010\377\370\000\000\000\001\043E\377\377''' WITH (FORMAT binary)
SELECT probe, encode(float4send(f4), 'hex') AS f4, encode(float8send(f8), 'hex') AS f8
FROM nan_probe WHERE probe NOT IN ('-NaN', 'inf - inf') ORDER BY probe;
-- every canonical encoding is found by every probe, of either type, by
-- TOAST slices and in memory alike
SELECT e.col, e.bits, bool_and(e.f @> p.f4 AND e.f @> p.f8) AS every_probe_finds,
	bool_and((SELECT f FROM nan_enc x WHERE x.bits = e.bits OFFSET 0) @> p.f4 AND
		(SELECT f FROM nan_enc x WHERE x.bits = e.bits OFFSET 0) @> p.f8) AS in_memory
FROM nan_enc e, nan_probe p
WHERE e.bits IN ('7fc00000', 'ffc00000', '7ff8000000000000', 'fff8000000000000')
GROUP BY e.col, e.bits ORDER BY e.col, e.bits;
-- every encoding is found by a probe of its own bits
SELECT e.col, e.bits, bool_and(CASE e.col WHEN 'float4'::regtype THEN e.f @> p.f4 ELSE e.f @> p.f8 END) AS by_slices,
	bool_and(CASE e.col WHEN 'float4'::regtype
		THEN (SELECT f FROM nan_enc x WHERE x.bits = e.bits OFFSET 0) @> p.f4
		ELSE (SELECT f FROM nan_enc x WHERE x.bits = e.bits OFFSET 0) @> p.f8 END) AS in_memory
FROM nan_enc e JOIN nan_probe p
	ON e.bits = CASE e.col WHEN 'float4'::regtype THEN encode(float4send(p.f4), 'hex')
		ELSE encode(float8send(p.f8), 'hex') END
GROUP BY e.col, e.bits ORDER BY e.col, e.bits;
-- a filter holds the NaN given, as a writer would, and a probe of any NaN
-- finds it; no other float finds a NaN
SELECT f @> 'NaN'::float8 AS nan, f @> -'NaN'::float8 AS minus_nan,
	f @> 'NaN'::float4 AS nan4, amq_contains_any(f, ARRAY[1, -'NaN'::float8]) AS any_nan,
	f @> 'Infinity'::float8 AS infinity, f @> 0::float8 AS zero, amq_count(f) AS hashes
FROM amq_from_array(ARRAY['NaN'::float8], 0.01, 'parquet') f;
SELECT f @> 'NaN'::float4 AS nan FROM amq_add(amq_new('parquet', 10), -'NaN'::float4) f;

-- what amq_info says
SELECT amq_info(amq_from_parquet(bits, 'int8')) - 'estimated_fpr' - 'estimated_distinct' - 'fill_ratio' - 'keys' - 'target_fpr'
FROM vec WHERE name = 'int8';
SELECT amq_info(amq_from_parquet(bits)) ->> 'parquet_type' AS untyped FROM vec WHERE name = 'int8';
-- a filter with Parquet's hashing is of kind parquet, however it was made
SELECT amq_kind(amq_from_parquet(bits, 'int8')) AS from_parquet, amq_kind(amq_new('parquet', 10)) AS new,
	amq_kind(amq_from_array(ARRAY[1], 0.01, 'parquet')) AS from_array,
	(SELECT amq_kind(amq_agg(v::int8, 0.01, 'parquet')) FROM vals WHERE name = 'int8') AS agg,
	amq_info(amq_new('parquet', 10)) ->> 'kind' AS info, amq_kind(amq_new('blocked', 10)) AS blocked
FROM vec WHERE name = 'int8';
-- the key estimate of an imported bitset is near the writer's count
SELECT name, amq_count(amq_from_parquet(bits, typ))::float8 / (SELECT count(*) FROM vals WHERE vals.name = vec.name) BETWEEN 0.8 AND 1.2 AS estimate_near
FROM vec WHERE length(bits) >= 1024 ORDER BY name;

-- a round trip keeps the bytes
SELECT bool_and(amq_to_parquet(amq_from_parquet(bits, typ)) = bits) AS round_trip FROM vec;

-- A whole Parquet bloom filter, as a Parquet file stores it: a Thrift
-- compact-protocol BloomFilterHeader (numBytes, then BLOCK, XXHASH and
-- UNCOMPRESSED, each an empty struct in its union), then the bitset.  The
-- headers DuckDB wrote are in MANIFEST.tsv; pq_header writes the same
-- bytes for any length and any union members.
CREATE TABLE manifest (name text, pg_type text, parquet_physical_type text,
	parquet_logical_type text, n_values int, num_bytes int, n_blocks int, n_absent int,
	n_absent_maybe int, absent_answered_by text, duckdb_fpr_option float8,
	rows_per_value int, header_hex text, bitset_sha256 text);
\copy manifest FROM PROGRAM 'sed 1d test/vectors/parquet/MANIFEST.tsv' WITH (FORMAT csv, HEADER, DELIMITER E'\t')
CREATE FUNCTION pg_temp.varint(v bigint) RETURNS bytea LANGUAGE plpgsql AS $$
DECLARE
	r bytea := '';
BEGIN
	WHILE v >= 128 LOOP
		r := r || set_byte('\x00', 0, (v % 128 + 128)::int);
		v := v / 128;
	END LOOP;
	RETURN r || set_byte('\x00', 0, v::int);
END $$;
CREATE FUNCTION pg_temp.pq_header(num_bytes bigint, algorithm int = 1, hash int = 1,
	compression int = 1) RETURNS bytea LANGUAGE sql AS $$
	SELECT '\x15'::bytea || pg_temp.varint(2 * num_bytes)
		|| '\x1c'::bytea || set_byte('\x00', 0, algorithm * 16 + 12) || '\x0000'::bytea
		|| '\x1c'::bytea || set_byte('\x00', 0, hash * 16 + 12) || '\x0000'::bytea
		|| '\x1c'::bytea || set_byte('\x00', 0, compression * 16 + 12) || '\x0000'::bytea
		|| '\x00'::bytea
$$;
-- DuckDB's whole filters give the same filter as their bitsets, and its
-- headers are what pq_header writes
SELECT count(*) AS vectors, bool_and(amq_from_parquet(decode(m.header_hex, 'hex') || t.bits, t.typ)::bytea
		= amq_from_parquet(t.bits, t.typ)::bytea) AS same_filter,
	bool_and(pg_temp.pq_header(length(t.bits)) = decode(m.header_hex, 'hex')) AS headers_as_written
FROM vec t JOIN manifest m USING (name);
SELECT t.name, (SELECT count(*) FROM vals WHERE vals.name = t.name
		AND NOT amq_from_parquet(decode(m.header_hex, 'hex') || t.bits, 'int8') @> vals.v::int8) AS false_negatives
FROM vec t JOIN manifest m USING (name) WHERE t.typ = 'int8'::regtype ORDER BY t.name;
-- a filter built here, exported as a whole filter and read back
CREATE TABLE whole AS
SELECT bits, pg_temp.pq_header(length(bits)) || bits AS whole
FROM (SELECT amq_to_parquet(amq_agg(g, 0.01, 'parquet')) AS bits FROM generate_series(1, 3000) g) s;
SELECT length(whole) - length(bits) AS header_bytes,
	amq_to_parquet(amq_from_parquet(whole, 'int4')) = bits AS round_trip,
	(SELECT count(*) FROM generate_series(1, 3000) g WHERE NOT amq_from_parquet(whole, 'int4') @> g) AS false_negatives,
	amq_kind(amq_from_parquet(whole)) AS kind
FROM whole;
-- refused: another algorithm, hash or compression; numBytes not the bytes
-- that follow (a truncated or overlong filter); a truncated header; the
-- pre-release drafts' header (hash 1 was Murmur3 then), which has no
-- compression field
SELECT pg_temp.err($$SELECT amq_from_parquet(pg_temp.pq_header(length(bits), hash => 2) || bits) FROM whole$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(pg_temp.pq_header(length(bits), algorithm => 2) || bits) FROM whole$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(pg_temp.pq_header(length(bits), compression => 2) || bits) FROM whole$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(substr(whole, 1, length(whole) - 1)) FROM whole$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(whole || '\x00'::bytea) FROM whole$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(substr(whole, 1, 10)) FROM whole$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(substr(whole, 1, 11) || '\x00'::bytea || bits) FROM whole$$);
SELECT pg_temp.err($$SELECT amq_from_parquet(pg_temp.pq_header(48) || decode(repeat('00', 48), 'hex'))$$);
SELECT pg_temp.err_hint($$SELECT amq_from_parquet(pg_temp.pq_header(length(bits), hash => 2) || bits) FROM whole$$);
SELECT pg_temp.err_hint($$SELECT amq_from_parquet(substr(whole, 1, length(whole) - 1)) FROM whole$$);

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

-- a type without a Parquet physical type: the hint names those there are
SELECT pg_temp.err_hint($$SELECT amq_from_parquet(decode(repeat('00', 32), 'hex'), 'numeric')$$);
SELECT pg_temp.err_hint($$SELECT amq_from_parquet(decode(repeat('00', 32), 'hex'), 'point')$$);
SELECT pg_temp.err_hint($$SELECT amq_from_parquet(decode(repeat('00', 32), 'hex'), 'int4[]')$$);
SELECT pg_temp.err_hint($$SELECT amq_add(amq_new('parquet', 10), true)$$);
-- a domain over an accepted type is accepted
CREATE DOMAIN pq_id AS int8 CHECK (VALUE > 0);
SELECT f @> 5::pq_id AS five, amq_info(f) ->> 'parquet_type' AS parquet_type
FROM (SELECT amq_from_parquet(bits, 'pq_id') AS f FROM vec WHERE name = 'int8') s;
