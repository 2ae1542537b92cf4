-- amqfilter type I/O: text round trip, bytea casts, binary COPY, and
-- every kind of malformed input rejected with its SQLSTATE.

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

-- the text form is base64 of the bytes and is stable (little-endian format)
SELECT amq_from_array(ARRAY[1, 2, 3]);
SELECT amq_from_array(ARRAY['alice', 'bob'], 0.01, 'bloom');
SELECT amq_new('blocked', 1);

CREATE TABLE filters (id int, f amqfilter);
INSERT INTO filters VALUES
	(1, amq_from_array(ARRAY[1, 2, 3])),
	(2, amq_from_array(ARRAY['alice', 'bob'], 0.01, 'bloom')),
	(3, (SELECT amq_agg(g) FROM generate_series(1, 5000) g)),
	(4, amq_new('bloom', 100, 0.001)),
	(5, NULL);

-- text round trip is exact
SELECT id, f::text::amqfilter::bytea = f::bytea AS same FROM filters ORDER BY id;
-- bytea round trip is exact
SELECT id, f::bytea::amqfilter::text = f::text AS same FROM filters ORDER BY id;

-- binary COPY (send/recv) round trip is exact
CREATE TABLE filters2 (id int, f amqfilter);
DO $$
DECLARE
	path text := '/tmp/bloomamq_regress_io_' || pg_backend_pid() || '.bin';
BEGIN
	EXECUTE format('COPY filters TO %L (FORMAT binary)', path);
	EXECUTE format('COPY filters2 FROM %L (FORMAT binary)', path);
	-- the program reads its input to the end: one that exits before the
	-- server has written it (rm alone) fails the COPY with a broken pipe
	EXECUTE format('COPY (SELECT 1) TO PROGRAM %L', 'cat > /dev/null; rm -f ' || path);
END $$;
SELECT a.id, a.f::bytea IS NOT DISTINCT FROM b.f::bytea AS same
FROM filters a JOIN filters2 b USING (id) ORDER BY a.id;

-- stored filters answer after the round trips
SELECT f @> 2 AS has2, f @> 99 AS has99 FROM filters2 WHERE id = 1;
SELECT f @> 'alice' AS alice, f @> 'carol' AS carol FROM filters2 WHERE id = 2;
SELECT count(*) FILTER (WHERE f @> g) AS found FROM filters2, generate_series(1, 5000) g WHERE id = 3;

-- header layout: magic, version, kind, scheme, family
SELECT encode(substring(f::bytea FROM 1 FOR 8), 'hex') AS head FROM filters WHERE id IN (1, 2) ORDER BY id;

-- malformed text input
SELECT pg_temp.err($$SELECT 'not base64!'::amqfilter$$);
SELECT pg_temp.err($$SELECT 'QU1R'::amqfilter$$);
SELECT pg_temp.err($$SELECT ''::amqfilter$$);
SELECT pg_temp.err($$SELECT 'QU1RRg=='::amqfilter$$);

-- truncated and extended bytes
SELECT pg_temp.err($$SELECT '\x00'::bytea::amqfilter$$);
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter',
	substring(f::bytea FROM 1 FOR octet_length(f::bytea) - 1))) FROM filters WHERE id = 1;
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter',
	substring(f::bytea FROM 1 FOR 79))) FROM filters WHERE id = 1;
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter', f::bytea || '\x00'::bytea)) FROM filters WHERE id = 1;

-- a flipped payload bit fails the checksum
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter',
	set_byte(f::bytea, 90, get_byte(f::bytea, 90) # 1))) FROM filters WHERE id = 3;
-- so does a changed key count or fpr
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter',
	set_byte(f::bytea, 24, get_byte(f::bytea, 24) # 1))) FROM filters WHERE id = 3;
SELECT pg_temp.err(format('SELECT %L::text::amqfilter',
	translate(encode(set_byte(f::bytea, 100, get_byte(f::bytea, 100) # 128), 'base64'), E'\n', ''))) FROM filters WHERE id = 3;

-- unknown format version, bad magic, unknown kind, reserved flags
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter', set_byte(f::bytea, 4, 9))) FROM filters WHERE id = 1;
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter', set_byte(f::bytea, 0, 0))) FROM filters WHERE id = 1;
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter', set_byte(f::bytea, 5, 77))) FROM filters WHERE id = 1;
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter', set_byte(f::bytea, 8, 2))) FROM filters WHERE id = 1;
SELECT pg_temp.err(format('SELECT %L::bytea::amqfilter', set_byte(f::bytea, 7, 200))) FROM filters WHERE id = 1;

-- the type stores out of line uncompressed, for slice probes
SELECT typstorage FROM pg_type WHERE typname = 'amqfilter';

-- Large filters stored out of line: each row probes its own filter.  The
-- blocked kind reads a header slice and one block; bloom detoasts whole.
-- bloomamq_test.scale (a fraction, default 1; tools/valgrind-check sets it)
-- probes a share of the keys, spread over all of them: the output is the
-- same at any scale.
SELECT coalesce(nullif(current_setting('bloomamq_test.scale', true), '')::float8, 1) AS scale \gset
CREATE TABLE big_filters AS
SELECT b, kind, amq_agg(b * 100000 + g, 0.01, kind, 100000) AS f
FROM generate_series(1, 4) b, generate_series(1, 20000) g, (VALUES ('blocked'), ('bloom')) k(kind)
GROUP BY b, kind;
SELECT kind, min(pg_column_size(f)) > 100000 AS toasted_size FROM big_filters GROUP BY kind ORDER BY kind;
-- every row finds its own keys (no false negatives) ...
SELECT kind, b, count(*) FILTER (WHERE NOT f @> b * 100000 + g) AS false_negatives,
	count(*) >= 100 AS probes
FROM big_filters, generate_series(1, 20000, greatest(1, round(1 / :scale))::int) g
GROUP BY kind, b ORDER BY kind, b;
-- one probe per row (the slice path for blocked filters), present keys ...
SELECT kind, count(*) AS rows_found FROM big_filters WHERE f @> b * 100000 + 777
GROUP BY kind ORDER BY kind;
-- ... and absent ones, answered exactly as by the detoasted filter
SELECT count(*) AS disagreements
FROM generate_series(900001, 900000 + greatest(100, round(1000 * :scale))::int) g, LATERAL (
	SELECT (f @> g) IS DISTINCT FROM (f::bytea::amqfilter @> g) AS differ FROM big_filters) s
WHERE differ;
DROP TABLE big_filters;

DROP TABLE filters, filters2;
