-- amq_index_check(): healthy amq indexes pass the structural check and,
-- with heapallindexed, the check that every row's keys are in its range's
-- filters, through every way an index changes.  (test/t/005_index_check.pl
-- damages index files and shows each damage reported.)

-- Check every amq index of a table both ways; the first corruption found
-- would be raised instead of 'ok'.
CREATE FUNCTION pg_temp.check_indexes(tab regclass)
RETURNS TABLE (index text, structure text, heapallindexed text)
LANGUAGE plpgsql AS $$
DECLARE
	i regclass;
BEGIN
	FOR i IN
		SELECT c.oid FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
			JOIN pg_am a ON a.oid = c.relam
		WHERE x.indrelid = tab AND a.amname = 'amq' ORDER BY c.relname
	LOOP
		index := i::text;
		PERFORM amq_index_check(i);
		structure := 'ok';
		PERFORM amq_index_check(i, heapallindexed => true);
		heapallindexed := 'ok';
		RETURN NEXT;
	END LOOP;
END
$$;

-- Columns of several types, every 7th value NULL, and indexes of several
-- pages_per_range: one page, a few, more than the table has.
-- bloomamq_test.scale (a fraction, default 1; tools/valgrind-check sets it)
-- shrinks the table, to no fewer than 8,000 rows (123 pages): the output
-- is the same at any scale.
SELECT greatest(8000, round(20000 * coalesce(nullif(current_setting('bloomamq_test.scale', true), '')::float8, 1)))::int
	AS nchk \gset
CREATE TABLE chk AS
SELECT g AS id,
	CASE WHEN g % 7 <> 0 THEN (g % 30000)::int2 END AS i2,
	CASE WHEN g % 7 <> 1 THEN g * 3 END AS i4,
	CASE WHEN g % 7 <> 2 THEN g::int8 * 1000003 END AS i8,
	CASE WHEN g % 7 <> 3 THEN g / 8.0::float8 END AS f8,
	CASE WHEN g % 7 <> 4 THEN (g / 100.0)::numeric(12, 2) END AS n,
	CASE WHEN g % 7 <> 5 THEN 'text ' || g END AS t,
	CASE WHEN g % 7 <> 6 THEN ('c' || (g % 5000))::char(8) END AS bp,
	CASE WHEN g % 7 <> 0 THEN decode(lpad(to_hex(g), 8, '0'), 'hex') END AS by,
	CASE WHEN g % 7 <> 1 THEN md5(g::text)::uuid END AS u,
	CASE WHEN g % 7 <> 2 THEN date '2000-01-01' + g END AS d,
	CASE WHEN g % 7 <> 3 THEN timestamptz '2020-01-01 00:00+00' + g * interval '1 second' END AS tz,
	CASE WHEN g % 7 <> 4 THEN g % 3 = 0 END AS b
FROM generate_series(1, :nchk) g;

CREATE INDEX chk_i2_amq ON chk USING amq (i2) WITH (pages_per_range = 1);
CREATE INDEX chk_i4_amq ON chk USING amq (i4) WITH (pages_per_range = 4);
CREATE INDEX chk_i8_amq ON chk USING amq (i8) WITH (pages_per_range = 16, fpr = 0.001);
CREATE INDEX chk_f8_amq ON chk USING amq (f8) WITH (pages_per_range = 2);
CREATE INDEX chk_n_amq ON chk USING amq (n);
CREATE INDEX chk_t_amq ON chk USING amq (t) WITH (pages_per_range = 8);
CREATE INDEX chk_bp_amq ON chk USING amq (bp) WITH (pages_per_range = 3);
CREATE INDEX chk_by_amq ON chk USING amq (by) WITH (pages_per_range = 5);
CREATE INDEX chk_u_amq ON chk USING amq (u) WITH (pages_per_range = 1000);
CREATE INDEX chk_d_amq ON chk USING amq (d) WITH (pages_per_range = 4);
CREATE INDEX chk_tz_amq ON chk USING amq (tz) WITH (pages_per_range = 4);
CREATE INDEX chk_b_amq ON chk USING amq (b) WITH (pages_per_range = 4);
-- several columns, an expression, a partial index
CREATE INDEX chk_multi_amq ON chk USING amq (i8, t, d) WITH (pages_per_range = 8);
CREATE INDEX chk_expr_amq ON chk USING amq (lower(t), (i4 % 1000)) WITH (pages_per_range = 4);
CREATE INDEX chk_part_amq ON chk USING amq (u) WITH (pages_per_range = 2) WHERE i4 % 2 = 0;

SELECT * FROM pg_temp.check_indexes('chk');

-- Rows appended to the growing last range and past it, a row of NULL keys
INSERT INTO chk (id, i4, i8, t, d)
SELECT 100000 + g, 100000 + g, -g, 'new ' || g, date '1990-01-01' + g
FROM generate_series(1, 3000) g;
INSERT INTO chk (id) VALUES (-1);
SELECT * FROM pg_temp.check_indexes('chk');

-- Inserts into sealed ranges: free space in the middle of the heap, then
-- rows with new keys land there and go to overflow segments.
DELETE FROM chk WHERE id % 10 = 0;
VACUUM chk;
INSERT INTO chk (id, i2, i4, i8, t, u, d)
SELECT 200000 + g, (g % 100)::int2, 200000 + g, -100000 - g, 'newer ' || g,
	md5('newer' || g)::uuid, date '1980-01-01' + g
FROM generate_series(1, 3000) g;
SELECT count(*) > 0 AS some_rows_in_old_pages
FROM chk WHERE id > 200000 AND (ctid::text::point)[0] < 100;
SELECT * FROM pg_temp.check_indexes('chk');

-- Deletes and VACUUM's reseal of every range with segments
DELETE FROM chk WHERE id % 10 = 1;
VACUUM chk;
SELECT * FROM pg_temp.check_indexes('chk');

-- Updates: new row versions with new keys, then another reseal
UPDATE chk SET i4 = -i4, t = t || ' updated' WHERE id % 10 = 3;
SELECT * FROM pg_temp.check_indexes('chk');
VACUUM chk;
SELECT * FROM pg_temp.check_indexes('chk');

-- Rows of this transaction, not yet committed, are in the index too
BEGIN;
INSERT INTO chk (id, i4, t) SELECT 300000 + g, 300000 + g, 'uncommitted' FROM generate_series(1, 500) g;
SELECT * FROM pg_temp.check_indexes('chk') WHERE index = 'chk_i4_amq';
ROLLBACK;

-- and in a REPEATABLE READ transaction's snapshot
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM pg_temp.check_indexes('chk') WHERE index IN ('chk_t_amq', 'chk_multi_amq');
COMMIT;

-- The end of the heap deleted and truncated by VACUUM: the index keeps
-- records of ranges past the heap's end, which lose no row.
CREATE TABLE chk_trunc (k int8, pad text);
INSERT INTO chk_trunc SELECT g, repeat('x', 200) FROM generate_series(1, 5000) g;
CREATE INDEX chk_trunc_amq ON chk_trunc USING amq (k) WITH (pages_per_range = 4);
CREATE TEMP TABLE size_before AS SELECT pg_relation_size('chk_trunc') AS bytes;
DELETE FROM chk_trunc WHERE k > 1000;
VACUUM chk_trunc;
SELECT pg_relation_size('chk_trunc') < (SELECT bytes FROM size_before) AS heap_truncated;
SELECT * FROM pg_temp.check_indexes('chk_trunc');
INSERT INTO chk_trunc SELECT g, 'y' FROM generate_series(6001, 7000) g;
SELECT * FROM pg_temp.check_indexes('chk_trunc');

-- An empty table: an index with a metapage only, then filled by inserts
CREATE TABLE chk_empty (k int8, s text);
CREATE INDEX chk_empty_amq ON chk_empty USING amq (k, s) WITH (pages_per_range = 2);
SELECT * FROM pg_temp.check_indexes('chk_empty');
INSERT INTO chk_empty SELECT g, repeat('x', 100) FROM generate_series(1, 5000) g;
SELECT * FROM pg_temp.check_indexes('chk_empty');
VACUUM chk_empty;
SELECT * FROM pg_temp.check_indexes('chk_empty');
-- all rows gone and truncated away
DELETE FROM chk_empty;
VACUUM chk_empty;
SELECT * FROM pg_temp.check_indexes('chk_empty');

-- An unlogged table
CREATE UNLOGGED TABLE chk_ul AS SELECT g AS k, md5(g::text) AS s FROM generate_series(1, 10000) g;
CREATE INDEX chk_ul_amq ON chk_ul USING amq (k, s);
INSERT INTO chk_ul SELECT g, md5(g::text) FROM generate_series(10001, 11000) g;
SELECT * FROM pg_temp.check_indexes('chk_ul');

-- A temporary table
CREATE TEMP TABLE chk_temp AS SELECT g AS k, 'v' || g AS s FROM generate_series(1, 5000) g;
CREATE INDEX chk_temp_amq ON chk_temp USING amq (s) WITH (pages_per_range = 2);
INSERT INTO chk_temp SELECT g, 'v' || g FROM generate_series(5001, 6000) g;
SELECT * FROM pg_temp.check_indexes('chk_temp');

-- An operator class whose support function is not amq_hash
CREATE FUNCTION chk_hash(int4) RETURNS int8
	AS 'SELECT $1::int8 * 7919' LANGUAGE sql IMMUTABLE STRICT;
CREATE OPERATOR CLASS chk_int4_ops FOR TYPE int4 USING amq AS
	OPERATOR 1 = (int4, int4), FUNCTION 1 chk_hash(int4);
CREATE TABLE chk_own (a int4);
INSERT INTO chk_own SELECT g FROM generate_series(1, 3000) g;
CREATE INDEX chk_own_amq ON chk_own USING amq (a chk_int4_ops) WITH (pages_per_range = 1);
INSERT INTO chk_own SELECT g FROM generate_series(3001, 3100) g;
SELECT * FROM pg_temp.check_indexes('chk_own');

-- heapallindexed defaults to false; NULL arguments give NULL
SELECT pg_typeof(amq_index_check('chk_i4_amq')) AS result_type;
SELECT amq_index_check(NULL) IS NULL AS null_index;
SELECT amq_index_check('chk_i4_amq', NULL) IS NULL AS null_heapallindexed;

-- ALTER INDEX ... SET (pages_per_range) takes effect at REINDEX: inserts
-- meanwhile cut the heap into the ranges the index was built with, so that
-- lookups through it find them
CREATE TABLE chk_ppr AS SELECT g::int8 AS k, repeat('p', 40) AS pad FROM generate_series(1, 20000) g;
CREATE INDEX chk_ppr_amq ON chk_ppr USING amq (k) WITH (pages_per_range = 8);
ANALYZE chk_ppr;
-- the planner costs the index as built too
CREATE FUNCTION pg_temp.index_scan_cost(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	plan json;
BEGIN
	SET LOCAL enable_seqscan = off;
	EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
	RETURN (plan -> 0 -> 'Plan' -> 'Plans' -> 0 ->> 'Total Cost')::float8;
END
$$;
SELECT pg_temp.index_scan_cost('SELECT * FROM chk_ppr WHERE k = 7') AS cost_as_built \gset
ALTER INDEX chk_ppr_amq SET (pages_per_range = 1);
SELECT pg_temp.index_scan_cost('SELECT * FROM chk_ppr WHERE k = 7') = :cost_as_built
	AS costed_as_built;
INSERT INTO chk_ppr SELECT g, 'new' FROM generate_series(100001, 102000) g;
SELECT amq_index_check('chk_ppr_amq', true) IS NOT NULL AS ppr_checked;
SET enable_seqscan = off;
SELECT count(*) AS found_through_index FROM chk_ppr WHERE k = ANY (ARRAY[101999, 100001, 5]);
RESET enable_seqscan;
REINDEX INDEX chk_ppr_amq;
SELECT amq_index_check('chk_ppr_amq', true) IS NOT NULL AS ppr_checked_after_reindex;
SELECT pg_temp.index_scan_cost('SELECT * FROM chk_ppr WHERE k = 7') <> :cost_as_built
	AS costed_as_rebuilt;
DROP TABLE chk_ppr;

-- Only an amq index can be checked
CREATE INDEX chk_btree ON chk (i4);
SELECT amq_index_check('chk_btree');
SELECT amq_index_check('chk');
SELECT amq_index_check('chk', true);
CREATE VIEW chk_view AS SELECT 1 AS one;
SELECT amq_index_check('chk_view');
CREATE TABLE chk_parted (k int8) PARTITION BY RANGE (k);
CREATE TABLE chk_parted_1 PARTITION OF chk_parted FOR VALUES FROM (0) TO (1000);
CREATE INDEX chk_parted_amq ON chk_parted USING amq (k);
INSERT INTO chk_parted SELECT g FROM generate_series(0, 999) g;
SELECT amq_index_check('chk_parted_amq');
SELECT pg_typeof(amq_index_check(i.indexrelid, true)) AS partition_checked
FROM pg_index i WHERE i.indrelid = 'chk_parted_1'::regclass;

-- and only by an owner
CREATE ROLE regress_amq_check_user;
SET ROLE regress_amq_check_user;
SELECT amq_index_check('chk_i4_amq');
RESET ROLE;
DROP ROLE regress_amq_check_user;

DROP TABLE chk, chk_trunc, chk_empty, chk_ul, chk_own, chk_parted;
DROP VIEW chk_view;
DROP OPERATOR CLASS chk_int4_ops USING amq;
DROP OPERATOR FAMILY chk_int4_ops USING amq;
DROP FUNCTION chk_hash(int4);
