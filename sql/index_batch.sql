-- Inserts into an amq index wait in a batch of the backend while the rows
-- go to one range, and go in together (amqidx_insert.c).  Whatever reads
-- the index sees every row it may see: the session that inserted them (in
-- the same transaction, from a trigger, through a parallel scan, from an
-- SQL support function), and the others once it commits.  A batch of an
-- aborted transaction, or of an index dropped meanwhile, is dropped.

CREATE TABLE bat (id int8, k int8, t text);
CREATE INDEX bat_k ON bat USING amq (k) WITH (pages_per_range = 4);
CREATE INDEX bat_t ON bat USING amq (t) WITH (pages_per_range = 4);

-- found by a bitmap scan of the index, whatever the planner prefers
CREATE FUNCTION pg_temp.found(want int8) RETURNS int8 LANGUAGE plpgsql AS $$
DECLARE
	n int8;
BEGIN
	SET LOCAL enable_seqscan = off;
	SET LOCAL enable_indexscan = off;
	SELECT count(*) INTO n FROM bat WHERE k = want;
	RETURN n;
END
$$;

-- the same transaction: rows of one statement, then of the next
BEGIN;
INSERT INTO bat SELECT g, g * 7, 't' || g FROM generate_series(1, 8000) g;
SELECT pg_temp.found(7 * 4321) AS in_transaction;
INSERT INTO bat SELECT g, g * 7, 't' || g FROM generate_series(8001, 8100) g;
SELECT pg_temp.found(7 * 8050) AS next_statement;
COMMIT;
SELECT amq_index_check('bat_k', true), amq_index_check('bat_t', true);

-- an aborted transaction's batch never reaches the index; the next
-- inserts do
BEGIN;
INSERT INTO bat SELECT g, -g, 'aborted' FROM generate_series(1, 5000) g;
ROLLBACK;
INSERT INTO bat SELECT g, g * 7, 't' || g FROM generate_series(8101, 10000) g;
SELECT pg_temp.found(7 * 9999) AS after_rollback, pg_temp.found(-17) AS rolled_back;

-- an AFTER ROW trigger runs its queries at the statement's end, while the
-- statement's keys still wait: each finds its own row through the index
CREATE TABLE bat_seen (k int8, found int8);
CREATE FUNCTION pg_temp.bat_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO bat_seen VALUES (NEW.k, pg_temp.found(NEW.k));
	RETURN NULL;
END
$$;
CREATE TRIGGER bat_after AFTER INSERT ON bat FOR EACH ROW EXECUTE FUNCTION pg_temp.bat_trigger();
INSERT INTO bat SELECT g, g * 7, 't' || g FROM generate_series(10001, 10300) g;
SELECT count(*) AS rows_seen, count(*) FILTER (WHERE found = 0) AS not_found FROM bat_seen;
DROP TRIGGER bat_after ON bat;

-- a parallel plan in the transaction that inserted (its workers have no
-- batch of their own): the same rows as a sequential scan
BEGIN;
INSERT INTO bat SELECT g, g * 7, 'p' || g FROM generate_series(30001, 40000) g;
SET LOCAL parallel_setup_cost = 0;
SET LOCAL parallel_tuple_cost = 0;
SET LOCAL min_parallel_table_scan_size = 0;
SET LOCAL max_parallel_workers_per_gather = 2;
SET LOCAL enable_seqscan = off;
SET LOCAL enable_indexscan = off;
SELECT count(*) AS parallel_found FROM bat WHERE k = ANY (ARRAY(SELECT g * 7 FROM generate_series(30001, 40000, 997) g));
COMMIT;

-- an index created in a subtransaction that rolls back, and an index
-- dropped after inserts: the commit writes only what still exists
BEGIN;
SAVEPOINT s;
CREATE INDEX bat_gone ON bat USING amq (id);
INSERT INTO bat SELECT g, g * 7, 's' || g FROM generate_series(60001, 61000) g;
ROLLBACK TO SAVEPOINT s;
CREATE INDEX bat_dropped ON bat USING amq (id);
INSERT INTO bat SELECT g, g * 7, 'd' || g FROM generate_series(61001, 62000) g;
DROP INDEX bat_dropped;
INSERT INTO bat SELECT g, g * 7, 'e' || g FROM generate_series(62001, 63000) g;
COMMIT;
SELECT pg_temp.found(7 * 62500) AS after_commit, pg_temp.found(7 * 60500) AS rolled_back_rows;

-- more amq indexes than a backend keeps batches for (8): the oldest are
-- written to make room, every one checked
CREATE TABLE bat9 (c1 int8, c2 int8, c3 int8, c4 int8, c5 int8, c6 int8, c7 int8, c8 int8, c9 int8);
SELECT format('CREATE INDEX ON bat9 USING amq (c%s)', i) FROM generate_series(1, 9) i \gexec
INSERT INTO bat9 SELECT g, g + 1, g + 2, g + 3, g + 4, g + 5, g + 6, g + 7, g + 8
FROM generate_series(1, 8000) g;
SELECT count(*) AS checked
FROM pg_index x, LATERAL (SELECT amq_index_check(x.indexrelid, true)) c
WHERE x.indrelid = 'bat9'::regclass;

SELECT amq_index_check('bat_k', true), amq_index_check('bat_t', true);
DROP TABLE bat, bat_seen, bat9;
