-- The amq index access method: every query returns the same rows by a
-- sequential scan and through the index (a bitmap scan with recheck).

SELECT amname, amtype FROM pg_am WHERE amname = 'amq';

-- amvalidate of every operator class
SELECT opf.opfname AS family, opc.opcname AS class, opc.opcintype::regtype AS type,
	amvalidate(opc.oid) AS valid
FROM pg_opclass opc JOIN pg_am am ON am.oid = opc.opcmethod
	JOIN pg_opfamily opf ON opf.oid = opc.opcfamily
WHERE am.amname = 'amq' ORDER BY 1, 2;

-- Run q by sequential scan and by bitmap scan; say whether the rows are the
-- same (as a multiset) and whether the second plan used an amq index.
CREATE FUNCTION pg_temp.same(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	a text[];
	b text[];
	line text;
	used boolean := false;
BEGIN
	PERFORM set_config('enable_seqscan', 'on', true);
	PERFORM set_config('enable_bitmapscan', 'off', true);
	PERFORM set_config('enable_indexscan', 'off', true);
	EXECUTE format('SELECT array_agg(x ORDER BY x) FROM (SELECT r::text AS x FROM (%s) r) s', q) INTO a;
	PERFORM set_config('enable_seqscan', 'off', true);
	PERFORM set_config('enable_bitmapscan', 'on', true);
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		IF line ~ 'Bitmap Index Scan on \w+_amq' THEN
			used := true;
		END IF;
	END LOOP;
	EXECUTE format('SELECT array_agg(x ORDER BY x) FROM (SELECT r::text AS x FROM (%s) r) s', q) INTO b;
	RETURN format('%s rows, %s, %s', coalesce(cardinality(a), 0),
		CASE WHEN a IS NOT DISTINCT FROM b THEN 'same' ELSE 'DIFFERENT' END,
		CASE WHEN used THEN 'index' ELSE 'NO INDEX' END);
END
$$;

-- A column of every type with an operator class; every 7th value NULL.
CREATE TABLE keys AS
SELECT g AS id,
	CASE WHEN g % 7 <> 0 THEN (g % 30000)::int2 END AS i2,
	CASE WHEN g % 7 <> 1 THEN g * 3 END AS i4,
	CASE WHEN g % 7 <> 2 THEN g::int8 * 1000003 END AS i8,
	CASE WHEN g % 7 <> 3 THEN (g / 4.0)::float4 END AS f4,
	CASE WHEN g % 7 <> 4 THEN g / 8.0::float8 END AS f8,
	CASE WHEN g % 7 <> 5 THEN (g / 100.0)::numeric(12, 2) END AS n,
	CASE WHEN g % 7 <> 6 THEN 'text ' || g END AS t,
	CASE WHEN g % 7 <> 0 THEN ('name ' || g)::name END AS nm,
	CASE WHEN g % 7 <> 1 THEN ('c' || (g % 5000))::char(8) END AS bp,
	CASE WHEN g % 7 <> 2 THEN ('v' || g)::varchar(20) END AS vc,
	CASE WHEN g % 7 <> 3 THEN decode(lpad(to_hex(g), 8, '0'), 'hex') END AS by,
	CASE WHEN g % 7 <> 4 THEN md5(g::text)::uuid END AS u,
	CASE WHEN g % 7 <> 5 THEN date '2000-01-01' + g END AS d,
	CASE WHEN g % 7 <> 6 THEN timestamp '2020-01-01' + g * interval '1 minute' END AS ts,
	CASE WHEN g % 7 <> 0 THEN timestamptz '2020-01-01 00:00+00' + g * interval '1 second' END AS tz,
	CASE WHEN g % 7 <> 1 THEN g % 3 = 0 END AS b
FROM generate_series(1, 20000) g;

DO $$
DECLARE
	c text;
BEGIN
	FOREACH c IN ARRAY ARRAY['i2', 'i4', 'i8', 'f4', 'f8', 'n', 't', 'nm', 'bp', 'vc',
							  'by', 'u', 'd', 'ts', 'tz', 'b'] LOOP
		EXECUTE format('CREATE INDEX keys_%s_amq ON keys USING amq (%I) WITH (pages_per_range = 4)', c, c);
	END LOOP;
END
$$;
CREATE INDEX keys_multi_amq ON keys USING amq (i8, t, d) WITH (pages_per_range = 8);
ANALYZE keys;

-- equality on every operator class: a present value, an absent one
SELECT q, pg_temp.same(q) FROM unnest(ARRAY[
	'SELECT id FROM keys WHERE i2 = 1234',
	'SELECT id FROM keys WHERE i2 = -5',
	'SELECT id FROM keys WHERE i4 = 3000',
	'SELECT id FROM keys WHERE i4 = 3001',
	'SELECT id FROM keys WHERE i8 = 1000003 * 777',
	'SELECT id FROM keys WHERE i8 = 1000004',
	'SELECT id FROM keys WHERE f4 = 2.25',
	'SELECT id FROM keys WHERE f4 = 2.3',
	'SELECT id FROM keys WHERE f8 = 12.5',
	'SELECT id FROM keys WHERE f8 = 12.51',
	'SELECT id FROM keys WHERE n = 12.34',
	'SELECT id FROM keys WHERE n = 12.340',
	'SELECT id FROM keys WHERE n = 12.345',
	'SELECT id FROM keys WHERE t = ''text 4321''',
	'SELECT id FROM keys WHERE t = ''text 43210''',
	'SELECT id FROM keys WHERE nm = ''name 99''',
	'SELECT id FROM keys WHERE bp = ''c77''',
	'SELECT id FROM keys WHERE bp = ''c77     ''',
	'SELECT id FROM keys WHERE bp = ''c77x''',
	'SELECT id FROM keys WHERE vc = ''v999''',
	'SELECT id FROM keys WHERE by = ''\x000003e8''',
	'SELECT id FROM keys WHERE by = ''\x0003e8''',
	'SELECT id FROM keys WHERE u = md5(''5'')::uuid',
	'SELECT id FROM keys WHERE u = md5(''50000'')::uuid',
	'SELECT id FROM keys WHERE d = date ''2010-01-01''',
	'SELECT id FROM keys WHERE ts = timestamp ''2020-01-02 00:00''',
	'SELECT id FROM keys WHERE ts = timestamp ''2020-01-02 00:00:01''',
	'SELECT id FROM keys WHERE tz = timestamptz ''2020-01-01 01:00+00''',
	'SELECT id FROM keys WHERE tz = timestamptz ''2020-01-01 01:00+01''',
	'SELECT id FROM keys WHERE b = ANY (ARRAY[true])',
	'SELECT id FROM keys WHERE b = ANY (ARRAY[false])'
]) q;
-- The planner turns b = true into b, which before 17 only btree and hash
-- indexes match; from 17 it uses the amq index.  Either plan, the same rows.
SELECT pg_temp.same('SELECT id FROM keys WHERE b = true') LIKE '5714 rows, same, %'
	AS same_rows_either_plan;

-- Two keys that contradict each other: before 17 the planner probes the
-- index for both, from 17 it proves the result empty without a scan.
SELECT pg_temp.same('SELECT id FROM keys WHERE i8 = (1000003 * 777)::int8 AND i8 = 777000231::int4')
	LIKE '0 rows, same, %' AS no_rows_either_plan;

-- cross-type equality inside a family, = ANY, NULLs, several columns
SELECT q, pg_temp.same(q) FROM unnest(ARRAY[
	'SELECT id FROM keys WHERE i2 = 1234::int8',
	'SELECT id FROM keys WHERE i2 = 1234::int4',
	'SELECT id FROM keys WHERE i4 = 3000::int2',
	'SELECT id FROM keys WHERE i4 = 3000::int8',
	'SELECT id FROM keys WHERE i8 = (1000003 * 777)::int8 AND i8 = 777002331::int4',
	'SELECT id FROM keys WHERE i8 = 1000003::int4',
	'SELECT id FROM keys WHERE f4 = 2.25::float8',
	'SELECT id FROM keys WHERE f8 = 12.5::float4',
	'SELECT id FROM keys WHERE nm = ''name 99''::text',
	'SELECT id FROM keys WHERE i4 = ANY (ARRAY[3, 6, 9, 10, 60000])',
	'SELECT id FROM keys WHERE i4 = ANY (ARRAY[3, NULL, 60000])',
	'SELECT id FROM keys WHERE i8 = ANY (ARRAY[1000003, 2000006]::int4[])',
	'SELECT id FROM keys WHERE t = ANY (ARRAY[''text 1'', ''text 19999'', ''nope''])',
	'SELECT id FROM keys WHERE u = ANY (ARRAY[md5(''1'')::uuid, md5(''2'')::uuid])',
	'SELECT id FROM keys WHERE i4 = ANY (ARRAY[]::int4[])',
	'SELECT id FROM keys WHERE i4 = ANY (NULL::int4[])',
	'SELECT id FROM keys WHERE i4 = NULL',
	'SELECT id FROM keys WHERE i8 = 1000003 * 70 AND t = ''text 70''',
	'SELECT id FROM keys WHERE i8 = 1000003 * 71 AND t = ''text 70''',
	'SELECT id FROM keys WHERE t = ''text 1234'' AND d = date ''2000-01-01'' + 1234',
	'SELECT id FROM keys WHERE i8 = 1000003 * 9 AND t = ANY (ARRAY[''text 8'', ''text 9''])'
]) q;

-- the rows of a NULL key are not indexed but stay in the table
SELECT count(*) FILTER (WHERE i4 IS NULL) AS null_i4 FROM keys;

-- Inserts into sealed ranges: free space in the middle of the heap,
-- then rows with new keys land there and go to overflow segments.
DELETE FROM keys WHERE id % 10 = 0;
VACUUM keys;
INSERT INTO keys (id, i4, i8, t, d)
SELECT 100000 + g, 100000 + g, -g, 'new ' || g, date '1990-01-01' + g
FROM generate_series(1, 3000) g;
SELECT count(*) > 0 AS some_rows_in_old_pages
FROM keys WHERE id > 100000 AND (ctid::text::point)[0] < 100;

SELECT q, pg_temp.same(q) FROM unnest(ARRAY[
	'SELECT id FROM keys WHERE i4 = 100007',
	'SELECT id FROM keys WHERE i4 = ANY (ARRAY[100001, 101500, 103000, 103001])',
	'SELECT id FROM keys WHERE i8 = -2999',
	'SELECT id FROM keys WHERE t = ''new 17''',
	'SELECT id FROM keys WHERE i8 = -17 AND t = ''new 17''',
	'SELECT id FROM keys WHERE d = date ''1990-01-01'' + 2000',
	'SELECT id FROM keys WHERE i4 = 3000',
	'SELECT id FROM keys WHERE i4 = 30'
]) q;

-- VACUUM reseals the ranges with overflow; the answers stay the same
DELETE FROM keys WHERE id % 10 = 1;
VACUUM keys;
SELECT q, pg_temp.same(q) FROM unnest(ARRAY[
	'SELECT id FROM keys WHERE i4 = 100007',
	'SELECT id FROM keys WHERE i4 = ANY (ARRAY[100001, 101500, 103000, 103001])',
	'SELECT id FROM keys WHERE i8 = -2999',
	'SELECT id FROM keys WHERE t = ''new 17''',
	'SELECT id FROM keys WHERE i4 = 33',
	'SELECT id FROM keys WHERE i4 = 36',
	'SELECT id FROM keys WHERE u = md5(''11'')::uuid',
	'SELECT id FROM keys WHERE u = md5(''12'')::uuid'
]) q;

-- UPDATE (a new row version) and its key
UPDATE keys SET i4 = 777777 WHERE id = 5;
SELECT pg_temp.same('SELECT id FROM keys WHERE i4 = 777777');
SELECT pg_temp.same('SELECT id FROM keys WHERE i4 = 15');

-- an index built on an empty table, filled by inserts only
CREATE TABLE grow (k int8, s text);
CREATE INDEX grow_k_amq ON grow USING amq (k) WITH (pages_per_range = 2);
INSERT INTO grow SELECT g, repeat('x', 100) FROM generate_series(1, 5000) g;
SELECT pg_temp.same('SELECT k FROM grow WHERE k = 4321');
SELECT pg_temp.same('SELECT k FROM grow WHERE k = ANY (ARRAY[1, 2500, 5000, 5001])');
VACUUM grow;
INSERT INTO grow SELECT g, 'y' FROM generate_series(5001, 6000) g;
SELECT pg_temp.same('SELECT k FROM grow WHERE k = ANY (ARRAY[1, 2500, 5000, 5001, 6000, 6001])');

-- an unlogged table
CREATE UNLOGGED TABLE ul AS SELECT g AS k, md5(g::text) AS s FROM generate_series(1, 10000) g;
CREATE INDEX ul_amq ON ul USING amq (k, s);
INSERT INTO ul SELECT g, md5(g::text) FROM generate_series(10001, 11000) g;
SELECT pg_temp.same('SELECT k FROM ul WHERE k = 10500');
SELECT pg_temp.same('SELECT k FROM ul WHERE s = md5(''77'')');
SELECT relpersistence FROM pg_class WHERE relname = 'ul_amq';

-- Types hashed by their own extended hash function: inet (which serves
-- cidr too), macaddr, macaddr8, interval, time, timetz, oid, jsonb, and
-- through the polymorphic classes every enum, array and range type.
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE others (id int4, m mood, a inet, cd cidr, ma macaddr, m8 macaddr8,
	iv interval, tm time, ttz timetz, oi oid, j jsonb, arr int4[], tarr text[],
	r int4range) WITH (autovacuum_enabled = off);
CREATE FUNCTION pg_temp.fill_others(lo int, hi int) RETURNS void LANGUAGE sql AS $$
INSERT INTO others SELECT g,
	CASE WHEN g % 7 <> 0 THEN (ARRAY['sad', 'ok', 'happy']::mood[])[1 + g % 3] END,
	CASE WHEN g % 7 <> 1 THEN ('10.' || (g / 65536) % 256 || '.' || (g / 256) % 256 || '.' || g % 256)::inet END,
	CASE WHEN g % 7 <> 2 THEN ('10.' || (g / 256) % 256 || '.' || g % 256 || '.0/24')::cidr END,
	CASE WHEN g % 7 <> 3 THEN lpad(to_hex(g), 12, '0')::macaddr END,
	CASE WHEN g % 7 <> 4 THEN lpad(to_hex(g), 16, '0')::macaddr8 END,
	CASE WHEN g % 7 <> 5 THEN make_interval(hours => g) END,
	CASE WHEN g % 7 <> 6 THEN time '00:00' + g * interval '1 s' END,
	CASE WHEN g % 7 <> 0 THEN ((time '00:00' + g * interval '1 s')::text || '+02')::timetz END,
	CASE WHEN g % 7 <> 1 THEN g::oid END,
	CASE WHEN g % 7 <> 2 THEN jsonb_build_object('k', g, 'v', ARRAY[g % 5]) END,
	CASE WHEN g % 7 <> 3 THEN ARRAY[g, g % 100] END,
	CASE WHEN g % 7 <> 4 THEN ARRAY['x' || g, NULL] END,
	CASE WHEN g % 7 <> 5 THEN int4range(g, g + 10) END
FROM generate_series(lo, hi) g
$$;
SELECT pg_temp.fill_others(1, 8000);
DO $$
DECLARE
	c text;
BEGIN
	FOREACH c IN ARRAY ARRAY['m', 'a', 'cd', 'ma', 'm8', 'iv', 'tm', 'ttz', 'oi', 'j',
							  'arr', 'tarr', 'r'] LOOP
		EXECUTE format('CREATE INDEX others_%s_amq ON others USING amq (%I) WITH (pages_per_range = 4)', c, c);
	END LOOP;
END
$$;
SELECT pg_temp.fill_others(8001, 9500);
ANALYZE others;
-- a present value and an absent one of each (interval '1 day' equals the
-- row's 24 hours), = ANY, two columns
SELECT q, pg_temp.same(q) FROM unnest(ARRAY[
	'SELECT id FROM others WHERE m = ''ok''',
	'SELECT id FROM others WHERE a = ''10.0.3.7''',
	'SELECT id FROM others WHERE a = ''10.0.3.7/31''',
	'SELECT id FROM others WHERE cd = ''10.3.7.0/24''',
	'SELECT id FROM others WHERE cd = ''10.3.7.0/25''',
	'SELECT id FROM others WHERE ma = ''00:00:00:00:03:09''',
	'SELECT id FROM others WHERE ma = ''00:00:00:10:03:09''',
	'SELECT id FROM others WHERE m8 = ''00:00:00:00:00:00:03:0c''',
	'SELECT id FROM others WHERE iv = interval ''1 day''',
	'SELECT id FROM others WHERE iv = interval ''777 hours''',
	'SELECT id FROM others WHERE iv = interval ''777 hours 1 second''',
	'SELECT id FROM others WHERE tm = time ''00:12:57''',
	'SELECT id FROM others WHERE ttz = timetz ''00:12:58+02''',
	'SELECT id FROM others WHERE ttz = timetz ''22:12:58+00''',
	'SELECT id FROM others WHERE oi = 777',
	'SELECT id FROM others WHERE oi = 10501',
	'SELECT id FROM others WHERE j = ''{"v": [2], "k": 777}''',
	'SELECT id FROM others WHERE j = ''{"k": 777}''',
	'SELECT id FROM others WHERE arr = ARRAY[777, 77]',
	'SELECT id FROM others WHERE arr = ARRAY[77, 777]',
	'SELECT id FROM others WHERE tarr = ARRAY[''x99'', NULL]',
	'SELECT id FROM others WHERE tarr = ARRAY[''x99'']',
	'SELECT id FROM others WHERE r = int4range(777, 787)',
	'SELECT id FROM others WHERE r = ''[777,786]''::int4range',
	'SELECT id FROM others WHERE r = int4range(777, 788)',
	'SELECT id FROM others WHERE oi = ANY (ARRAY[5, 6, 8999, 30000]::oid[])',
	'SELECT id FROM others WHERE m = ANY (ARRAY[''sad'', ''happy'']::mood[]) AND id < 50',
	'SELECT id FROM others WHERE a = ''10.0.3.7'' AND oi = 775'
]) q;
-- after deletes, a VACUUM that reseals, and inserts into the freed space:
-- each index checked, and one row in 97 of every column found by its key
DELETE FROM others WHERE id % 10 = 0;
VACUUM others;
SELECT pg_temp.fill_others(9501, 10500);
SELECT count(*) AS checked
FROM pg_index x, LATERAL (SELECT amq_index_check(x.indexrelid, true)) c
WHERE x.indrelid = 'others'::regclass;
-- Each sampled row, looked up alone by its key (a nested loop into the
-- index), is found: the count of rows missed, and whether the plan was that.
CREATE FUNCTION pg_temp.missed(c text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	q text := format('SELECT count(*) FROM others o WHERE id %% 97 = 0 AND %1$I IS NOT NULL
		AND NOT EXISTS (SELECT FROM others o2 WHERE o2.%1$I = o.%1$I AND o2.id = o.id)', c);
	line text;
	plan text := '';
	n int8;
BEGIN
	PERFORM set_config('enable_seqscan', 'off', true);
	PERFORM set_config('enable_hashjoin', 'off', true);
	PERFORM set_config('enable_mergejoin', 'off', true);
	PERFORM set_config('enable_material', 'off', true);
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || q LOOP
		plan := plan || line || E'\n';
	END LOOP;
	EXECUTE q INTO n;
	RETURN format('%s missed, %s', n,
		CASE WHEN plan ~ 'Nested Loop' AND plan ~ ('Bitmap Index Scan on others_' || c || '_amq')
			THEN 'nested loop into the index' ELSE 'OTHER PLAN' END);
END
$$;
SELECT c, pg_temp.missed(c) FROM unnest(ARRAY['m', 'a', 'cd', 'ma', 'm8', 'iv', 'tm', 'ttz',
	'oi', 'j', 'arr', 'tarr', 'r']) c;
DROP TABLE others;
DROP TYPE mood;

-- options
CREATE INDEX bad_amq ON keys USING amq (i4) WITH (pages_per_range = 0);
CREATE INDEX bad_amq ON keys USING amq (i4) WITH (fpr = 0.6);
CREATE INDEX bad_amq ON keys USING amq (i4) WITH (colour = 1);
CREATE INDEX fpr_amq ON keys USING amq (i4) WITH (fpr = 0.001, pages_per_range = 16);
SELECT reloptions FROM pg_class WHERE relname = 'fpr_amq';
-- A rate below 2^-32, which the sealed filters cannot reach, is taken as
-- 2^-32, with a warning: VACUUM reseals ranges, and the index checks and
-- finds its rows.
CREATE TABLE low (k int4) WITH (autovacuum_enabled = off);
INSERT INTO low SELECT generate_series(1, 20000);
CREATE INDEX low_amq ON low USING amq (k) WITH (fpr = 1e-12, pages_per_range = 8);
INSERT INTO low SELECT generate_series(20001, 30000);
UPDATE low SET k = -k WHERE k % 1000 = 0;
VACUUM low;
ALTER INDEX low_amq SET (fpr = 1e-11);
UPDATE low SET k = -k WHERE k % 1000 = 1;
VACUUM low;
SELECT amq_index_check('low_amq', true);
SET enable_seqscan = off;
SELECT k FROM low WHERE k IN (-1000, -20001, 5, 29999) ORDER BY k;
RESET enable_seqscan;
DROP TABLE low;
-- types without an operator class, and ordering, are refused
CREATE INDEX bad_amq ON keys USING amq ((point(i4, i4)));
CREATE INDEX bad_amq ON keys USING amq ((ARRAY[point(i4, i4)]));
SELECT amname, pg_indexam_has_property(oid, 'can_order') AS can_order,
	pg_indexam_has_property(oid, 'can_unique') AS can_unique,
	pg_indexam_has_property(oid, 'can_multi_col') AS can_multi_col
FROM pg_am WHERE amname = 'amq';

-- the planner picks the index for a selective equality on its own
RESET enable_seqscan;
EXPLAIN (COSTS OFF) SELECT id FROM keys WHERE i8 = 42;

DROP TABLE keys, grow, ul;

-- A lookup counts as a scan of the index: in pg_stat_user_indexes, which a
-- DBA's query for unused indexes reads (the count reaches the view once
-- the session that scanned has ended, so \c, then wait for it), and from
-- 18 in EXPLAIN ANALYZE's "Index Searches" (earlier majors print none).
CREATE TABLE scanned (id int4);
INSERT INTO scanned SELECT g FROM generate_series(1, 1000) g;
CREATE INDEX scanned_amq ON scanned USING amq (id);
SET enable_seqscan = off;
SELECT count(*) FROM scanned WHERE id = 5;
CREATE FUNCTION pg_temp.index_searches(query text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	plan jsonb;
BEGIN
	EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, FORMAT JSON) ' || query INTO plan;
	RETURN coalesce(jsonb_path_query_first(plan, '$.**."Index Searches"')::int, 1);
END
$$;
SELECT pg_temp.index_searches('SELECT count(*) FROM scanned WHERE id = 7') AS index_searches;
\c
DO $$
BEGIN
	FOR i IN 1 .. 600 LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'scanned_amq') >= 2;
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT idx_scan >= 2 AS scans_counted FROM pg_stat_user_indexes WHERE indexrelname = 'scanned_amq';
DROP TABLE scanned;

-- An update of an indexed column that stays on its page can be HOT from 16
-- on (an amq index summarizes pages, as BRIN does, and gets the new version
-- of the row): the rows are found by their new keys and the check passes.
CREATE TABLE hot (id int4, k int4) WITH (fillfactor = 50, autovacuum_enabled = off);
INSERT INTO hot SELECT g, g FROM generate_series(1, 10000) g;
CREATE INDEX hot_amq ON hot USING amq (k) WITH (pages_per_range = 4);
BEGIN;
UPDATE hot SET k = -k WHERE id % 3 = 0;
SELECT pg_stat_get_xact_tuples_hot_updated('hot'::regclass) > 3000
	OR current_setting('server_version_num')::int < 160000 AS hot_from_16;
COMMIT;
SELECT amq_index_check('hot_amq', true);
SET enable_seqscan = off;
SELECT k FROM hot WHERE k IN (-3, -9999, 1, 3, 9999) ORDER BY k;
RESET enable_seqscan;
DROP TABLE hot;
