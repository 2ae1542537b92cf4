-- Space reuse of the amq index: under steady deletes, inserts and VACUUM
-- the index reuses the pages of replaced filters and records and stays
-- near the size of a fresh build, while every row stays found and
-- amq_index_check() passes after every VACUUM.

-- bloomamq_test.scale (a fraction, default 1; tools/valgrind-check sets
-- it) shrinks the table, to no fewer than 10,000 rows: the output is the
-- same at any scale.
SELECT greatest(10000, round(40000 * coalesce(nullif(current_setting('bloomamq_test.scale', true), '')::float8, 1)))::int
	AS nrows \gset

-- Keys scattered over the table (a multiplicative hash of the id), so
-- that deletes and inserts touch every range.
CREATE TABLE spc (id int8, k int8, pad text);
ALTER TABLE spc SET (autovacuum_enabled = off);
INSERT INTO spc SELECT g, (g * 2654435761) % 1000000007, 'x' FROM generate_series(1, :nrows) g;
CREATE INDEX spc_amq ON spc USING amq (k) WITH (pages_per_range = 16);
-- a two-column index, whose ranges hold two filters each
CREATE INDEX spc_two_amq ON spc USING amq (k, id) WITH (pages_per_range = 8);
VACUUM spc;

CREATE TEMP TABLE sizes (cycle int, idx text, pages int8);
-- After each VACUUM: both checks of both indexes (an error would show
-- instead of the row), and the sizes.
CREATE FUNCTION pg_temp.after_vacuum(c int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	PERFORM amq_index_check('spc_amq', true);
	PERFORM amq_index_check('spc_two_amq', true);
	INSERT INTO sizes
	SELECT c, i, pg_relation_size(i) / current_setting('block_size')::int
	FROM unnest(ARRAY['spc_amq', 'spc_two_amq']) i;
	RETURN format('cycle %s: checked', c);
END
$$;
SELECT pg_temp.after_vacuum(0);

-- Each cycle replaces a tenth of the rows by rows of new keys (which go to
-- the space the deletes left, in every range), then VACUUM reseals the
-- ranges and reuses the pages the old filters held.
SELECT s FROM generate_series(1, 12) c, LATERAL (VALUES
	(1, format('WITH d AS (DELETE FROM spc WHERE id %% 10 = %s RETURNING id) '
			   'INSERT INTO spc SELECT id, ((id + %s) * 2654435761) %% 1000000007, ''x'' FROM d',
			   c % 10, 1000000 * c)),
	(2, 'VACUUM spc'),
	(3, format('SELECT pg_temp.after_vacuum(%s)', c))) v(o, s)
ORDER BY c, o \gexec

-- Rows are found through the indexes: a sample of keys, each looked up
-- by a bitmap scan (amq_index_check(..., true) has probed every row).
SET enable_seqscan = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT count(*) > 0 AS sampled,
	count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM spc s2 WHERE s2.k = s1.k)) AS missed_k,
	count(*) FILTER (WHERE NOT EXISTS (
		SELECT 1 FROM spc s2 WHERE s2.k = s1.k AND s2.id = s1.id)) AS missed_k_id
FROM spc s1 WHERE s1.id % 97 = 0;
SELECT count(*) = :nrows AS same_rows FROM spc;
RESET enable_seqscan;
RESET enable_hashjoin;
RESET enable_mergejoin;

-- Bounded: the size levels off (the last cycles no larger than the
-- largest of the first ones, give or take a few pages) and stays within
-- twice a fresh build's.  These indexes have 10 to 30 pages, where the
-- range that grows at the heap's end (VACUUM does not reseal it) and the
-- space between small filters weigh more than in a large index;
-- test/bench/bench_space.py measures a million rows.
SELECT idx,
	max(pages) FILTER (WHERE cycle BETWEEN 7 AND 12) <=
		max(pages) FILTER (WHERE cycle BETWEEN 1 AND 6) + 8 AS levels_off
FROM sizes GROUP BY idx ORDER BY idx;
CREATE INDEX spc_fresh ON spc USING amq (k) WITH (pages_per_range = 16);
CREATE INDEX spc_two_fresh ON spc USING amq (k, id) WITH (pages_per_range = 8);
SELECT s.idx, max(s.pages) <= 2 * pg_relation_size(v.f) / current_setting('block_size')::int
	AS within_2x_of_fresh
FROM sizes s JOIN (VALUES ('spc_amq', 'spc_fresh'::regclass), ('spc_two_amq', 'spc_two_fresh'))
	v(idx, f) ON v.idx = s.idx
GROUP BY s.idx, v.f ORDER BY s.idx;

-- The free space is reused by inserts too: a table emptied and refilled
-- keeps its index's size.
DELETE FROM spc;
VACUUM spc;
INSERT INTO spc SELECT g, (g * 2654435761) % 1000000007, 'x' FROM generate_series(1, :nrows) g;
VACUUM spc;
SELECT amq_index_check('spc_amq', true);
SELECT pg_relation_size('spc_amq') <= pg_relation_size('spc_fresh') * 2 AS refilled_within_2x;
DROP TABLE spc;

-- An index whose directory takes more than one page (over 1,020 ranges),
-- the second added by inserts: VACUUM, with nothing to reseal in the first
-- page's ranges, goes on to the second page, and after deletes reseals
-- ranges of both.
CREATE TABLE dirs (id int8, pad text);
ALTER TABLE dirs SET (autovacuum_enabled = off);
INSERT INTO dirs SELECT g, repeat('x', 1000) FROM generate_series(1, 6000) g;
CREATE INDEX dirs_amq ON dirs USING amq (id) WITH (pages_per_range = 1);
SELECT pg_relation_size('dirs') / current_setting('block_size')::int < 1000 AS under_1000_ranges;
INSERT INTO dirs SELECT g, repeat('x', 1000) FROM generate_series(6001, 8000) g;
SELECT pg_relation_size('dirs') / current_setting('block_size')::int > 1100 AS over_1100_ranges;
SELECT amq_index_check('dirs_amq', true);
VACUUM dirs;
SELECT amq_index_check('dirs_amq', true);
-- nothing left to reseal: it reads every range of both pages
VACUUM dirs;
DELETE FROM dirs WHERE id % 3 = 0;
VACUUM dirs;
SELECT amq_index_check('dirs_amq', true);
SET enable_seqscan = off;
SELECT count(*) FROM unnest(ARRAY[1, 2, 4000, 7999, 8000]::int8[]) p
WHERE EXISTS (SELECT 1 FROM dirs WHERE id = p);
RESET enable_seqscan;
DROP TABLE dirs;

-- The free list is full: the metapage lists 120 runs of free pages, and a
-- VACUUM that frees more forgets the smallest (their pages wait for the
-- next VACUUM's sweep).  Each range's sealed filter spans two to three
-- pages (fpr 1e-9); updating one row in every other range makes VACUUM
-- reseal those ranges, which frees the whole pages of each one's old
-- filter, too few for a new filter: one run per range, over 120 of them.
-- The list's count is read from the metapage (pageinspect): the last 968
-- bytes of its content, which ends 8 bytes before the block's end, are
-- the free space, the count after its first field.
CREATE EXTENSION pageinspect;
-- (The rows come in by COPY, which writes them in batches: an INSERT ...
-- SELECT writes them one at a time, which took 146 s under memcheck.)
CREATE TABLE runs (k int4) WITH (fillfactor = 95, autovacuum_enabled = off);
COPY runs FROM PROGRAM 'seq 1 900000';
CREATE INDEX runs_amq ON runs USING amq (k) WITH (pages_per_range = 16, fpr = 1e-9);
CREATE FUNCTION pg_temp.free_runs() RETURNS int LANGUAGE sql AS $$
	SELECT get_byte(p, o) + 256 * get_byte(p, o + 1)
	FROM get_raw_page('runs_amq', 0) p,
		LATERAL (SELECT current_setting('block_size')::int - 8 - 968 + 4) v(o)
$$;
CREATE FUNCTION pg_temp.update_every_other(first int) RETURNS void LANGUAGE sql AS $$
	UPDATE runs SET k = -k WHERE ctid IN (
		SELECT format('(%s,1)', b)::tid
		FROM generate_series(first, pg_relation_size('runs') / current_setting('block_size')::int - 1, 32) b)
$$;
SELECT pg_temp.free_runs() AS runs_as_built;
SELECT pg_temp.update_every_other(0);
VACUUM runs;
SELECT pg_temp.free_runs() AS runs_list_full;
SELECT pg_relation_size('runs_amq') AS full_size \gset
SELECT amq_index_check('runs_amq', true);
-- The other ranges: their reseals take the listed runs and the rest of the
-- index's free pages, which the sweep finds again; the index shrinks.
SELECT pg_temp.update_every_other(16);
VACUUM runs;
SELECT pg_temp.free_runs() < 120 AS list_not_full,
	pg_relation_size('runs_amq') < :full_size AS shrank;
SELECT amq_index_check('runs_amq', true);
SET enable_seqscan = off;
SELECT count(*) FROM unnest(ARRAY[-1, 2, 450000, 899999, 900000]) p
WHERE EXISTS (SELECT 1 FROM runs WHERE k = p);
RESET enable_seqscan;
DROP TABLE runs;
DROP EXTENSION pageinspect;

-- A first row under the largest pages_per_range writes a small segment,
-- not one for 64 keys in each of the range's 131072 pages (8 million keys,
-- 11 MB); the range's later segments double, and every row stays found.
CREATE TABLE wide (k int4);
CREATE INDEX wide_amq ON wide USING amq (k) WITH (pages_per_range = 131072);
INSERT INTO wide VALUES (1);
SELECT pg_relation_size('wide_amq') < 256 * 1024 AS first_row_small;
INSERT INTO wide SELECT g FROM generate_series(2, 70000) g;
SELECT pg_relation_size('wide_amq') < 1024 * 1024 AS two_segments_small;
SELECT amq_index_check('wide_amq', true);
SET enable_seqscan = off;
SELECT count(*) FROM unnest(ARRAY[-1, 1, 65536, 65537, 70000, 70001]) p
WHERE EXISTS (SELECT 1 FROM wide WHERE k = p);
RESET enable_seqscan;
DROP TABLE wide;

-- VACUUM with parallel workers, which PostgreSQL plans by default for a
-- table with two or more indexes over min_parallel_index_scan_size that
-- workers can vacuum, runs in parallel mode, where it cannot truncate.  Its
-- leader cleans up every amq index (the access method gives workers none)
-- and truncates them as its VACUUM commits.  The two btrees of par, over
-- min_parallel_index_scan_size, make each VACUUM of par one with workers.
-- After each part below, the amq indexes of par check clean, are as long
-- as their twins of ser (the same rows and changes, vacuumed without
-- workers), and shorter than their twins of kept, whose vacuum_truncate is
-- off.  First the amq indexes are under min_parallel_index_scan_size
-- (128kB), and the rounds alternate VACUUMs after deletes and after
-- inserts.  Then they are over it (0), where a worker could take them, and
-- each round's second VACUUM follows inserts into the space the first
-- freed and the delete of half of them; the last one truncates, so kept's
-- indexes, as long as par's before, are longer.  Every VACUUM of the twins
-- freezes: one that does not passes over a page whose cleanup lock it cannot
-- take (another process, the checkpointer or the background writer, holds
-- a pin on it) and leaves that page's deleted rows, so that later inserts
-- land elsewhere in one twin than in the other; one that freezes waits for
-- the lock.
SET min_parallel_index_scan_size = '128kB';
CREATE TABLE par (a int8, b text) WITH (autovacuum_enabled = off);
CREATE TABLE ser (a int8, b text) WITH (autovacuum_enabled = off);
CREATE TABLE kept (a int8, b text) WITH (autovacuum_enabled = off, vacuum_truncate = false);
INSERT INTO par SELECT g, 'b' || g FROM generate_series(1, 20000) g;
INSERT INTO ser SELECT * FROM par;
INSERT INTO kept SELECT * FROM par;
CREATE INDEX par_a_bt ON par (a);
CREATE INDEX par_b_bt ON par (b);
CREATE INDEX par_a ON par USING amq (a) WITH (pages_per_range = 4);
CREATE INDEX par_b ON par USING amq (b) WITH (pages_per_range = 4);
CREATE INDEX ser_a ON ser USING amq (a) WITH (pages_per_range = 4);
CREATE INDEX ser_b ON ser USING amq (b) WITH (pages_per_range = 4);
CREATE INDEX kept_a ON kept USING amq (a) WITH (pages_per_range = 4);
CREATE INDEX kept_b ON kept USING amq (b) WITH (pages_per_range = 4);
CREATE FUNCTION pg_temp.par_delete(r int) RETURNS void LANGUAGE sql
	AS 'DELETE FROM par WHERE a % 10 = r; DELETE FROM ser WHERE a % 10 = r;
	DELETE FROM kept WHERE a % 10 = r';
CREATE FUNCTION pg_temp.par_insert(lo int8) RETURNS void LANGUAGE sql
	AS $$INSERT INTO par SELECT g, 'n' || g FROM generate_series(lo, lo + 1999) g;
	INSERT INTO ser SELECT g, 'n' || g FROM generate_series(lo, lo + 1999) g;
	INSERT INTO kept SELECT g, 'n' || g FROM generate_series(lo, lo + 1999) g$$;
-- half the rows inserted since lo
CREATE FUNCTION pg_temp.par_thin(lo int8) RETURNS void LANGUAGE sql
	AS 'DELETE FROM par WHERE a >= lo AND a % 2 = 0; DELETE FROM ser WHERE a >= lo AND a % 2 = 0;
	DELETE FROM kept WHERE a >= lo AND a % 2 = 0';
CREATE FUNCTION pg_temp.par_sizes(OUT a_as_serial bool, OUT b_as_serial bool,
								  OUT a_truncated bool, OUT b_truncated bool)
	LANGUAGE sql AS $$SELECT pg_relation_size('par_a') = pg_relation_size('ser_a'),
	pg_relation_size('par_b') = pg_relation_size('ser_b'),
	pg_relation_size('par_a') < pg_relation_size('kept_a'),
	pg_relation_size('par_b') < pg_relation_size('kept_b')$$;
\set vacuum_all 'VACUUM (FREEZE, PARALLEL 2) par; VACUUM (FREEZE, PARALLEL 0) ser, kept;'
SELECT pg_temp.par_delete(0);
:vacuum_all
SELECT pg_temp.par_insert(100001);
:vacuum_all
SELECT pg_temp.par_delete(1);
:vacuum_all
SELECT pg_temp.par_insert(103001);
:vacuum_all
SELECT amq_index_check('par_a', true), amq_index_check('par_b', true);
SELECT pg_relation_size('par_a') < 128 * 1024 AND pg_relation_size('par_b') < 128 * 1024
       AND pg_relation_size('par_a_bt') > 128 * 1024 AND pg_relation_size('par_b_bt') > 128 * 1024
       AS leader_cleans_amq;
SELECT * FROM pg_temp.par_sizes();
SET min_parallel_index_scan_size = 0;
SELECT pg_temp.par_delete(2);
:vacuum_all
SELECT pg_temp.par_insert(110001), pg_temp.par_thin(110001);
:vacuum_all
SELECT pg_temp.par_delete(3);
:vacuum_all
SELECT pg_temp.par_insert(113001), pg_temp.par_thin(113001);
:vacuum_all
SELECT pg_temp.par_delete(4);
:vacuum_all
SELECT pg_temp.par_insert(116001), pg_temp.par_thin(116001);
:vacuum_all
SELECT pg_temp.par_delete(5);
:vacuum_all
SELECT pg_temp.par_insert(119001), pg_temp.par_thin(119001);
:vacuum_all
SELECT amq_index_check('par_a', true), amq_index_check('par_b', true);
SELECT * FROM pg_temp.par_sizes();
-- Last, VACUUMs after inserts alone, which scan no index and only clean
-- the indexes up, with the amq indexes over min_parallel_index_scan_size
-- (96kB), where workers would clean them up if they could: they truncate
-- all the same.
SET min_parallel_index_scan_size = '96kB';
SELECT pg_temp.par_delete(6);
:vacuum_all
SELECT pg_temp.par_insert(122001);
:vacuum_all
SELECT pg_temp.par_delete(7);
:vacuum_all
SELECT pg_temp.par_insert(125001);
SELECT pg_relation_size('par_a') >= 96 * 1024 AND pg_relation_size('par_b') >= 96 * 1024
       AND pg_relation_size('par_a_bt') >= 96 * 1024 AND pg_relation_size('par_b_bt') >= 96 * 1024
       AS all_over_parallel_size;
:vacuum_all
SELECT amq_index_check('par_a', true), amq_index_check('par_b', true);
SELECT * FROM pg_temp.par_sizes();
SET enable_seqscan = off;
SELECT count(*) FROM unnest(ARRAY[1, 12, 19999, 100001, 102000, 102001, 110001, 110002, 119999, 122001, 125002]) p
WHERE EXISTS (SELECT 1 FROM par WHERE a = p) AND EXISTS (SELECT 1 FROM par WHERE b IN ('b' || p, 'n' || p));
RESET enable_seqscan;
RESET min_parallel_index_scan_size;
DROP TABLE par, ser, kept;

-- A table whose vacuum_truncate is off (so that VACUUM takes no lock that
-- conflicts with queries on standbys) keeps its amq indexes' length too:
-- after the same two rounds of deletes, inserts into the space freed and
-- VACUUM, its index is longer than the one of a table VACUUM may truncate,
-- and both check clean.  These VACUUMs freeze too, as the twins' above.
CREATE TABLE tr_on (a int8, b text) WITH (autovacuum_enabled = off);
CREATE TABLE tr_off (a int8, b text) WITH (autovacuum_enabled = off, vacuum_truncate = false);
INSERT INTO tr_on SELECT g, 'b' || g FROM generate_series(1, 20000) g;
INSERT INTO tr_off SELECT g, 'b' || g FROM generate_series(1, 20000) g;
CREATE INDEX tr_on_amq ON tr_on USING amq (a, b) WITH (pages_per_range = 4);
CREATE INDEX tr_off_amq ON tr_off USING amq (a, b) WITH (pages_per_range = 4);
-- a round's writes, the same on both tables
CREATE FUNCTION pg_temp.tr_delete(r int) RETURNS void LANGUAGE sql
	AS 'DELETE FROM tr_on WHERE a % 10 = r; DELETE FROM tr_off WHERE a % 10 = r';
CREATE FUNCTION pg_temp.tr_insert(lo int8) RETURNS void LANGUAGE sql
	AS $$INSERT INTO tr_on SELECT g, 'n' || g FROM generate_series(lo, lo + 1999) g;
	INSERT INTO tr_off SELECT g, 'n' || g FROM generate_series(lo, lo + 1999) g$$;
SELECT pg_temp.tr_delete(0);
VACUUM (FREEZE) tr_on, tr_off;
SELECT pg_temp.tr_insert(100001);
VACUUM (FREEZE) tr_on, tr_off;
SELECT pg_temp.tr_delete(1);
VACUUM (FREEZE) tr_on, tr_off;
SELECT pg_temp.tr_insert(103001);
VACUUM (FREEZE) tr_on, tr_off;
SELECT pg_relation_size('tr_off_amq') > pg_relation_size('tr_on_amq') AS off_kept_length;
SELECT amq_index_check('tr_on_amq', true), amq_index_check('tr_off_amq', true);
DROP TABLE tr_on, tr_off;
