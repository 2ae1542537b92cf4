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
COPY filters TO '/tmp/bloomamq_regress_io.bin' (FORMAT binary);
CREATE TABLE filters2 (id int, f amqfilter);
COPY filters2 FROM '/tmp/bloomamq_regress_io.bin' (FORMAT binary);
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

DROP TABLE filters, filters2;
