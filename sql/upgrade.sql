-- Upgrading from the first release, through every release, gives exactly the objects of a fresh
-- install of the current one.  In a database of its own, so that no other
-- test's tables depend on the extension.

\set origdb :DBNAME
CREATE DATABASE bloomamq_upgrade;
\c bloomamq_upgrade
CREATE EXTENSION bloomamq;

CREATE TEMP TABLE fresh AS
SELECT pg_describe_object(classid, objid, 0) AS object
FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
	AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bloomamq') AND deptype = 'e';

DROP EXTENSION bloomamq;
CREATE EXTENSION bloomamq VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'bloomamq';
ALTER EXTENSION bloomamq UPDATE TO '0.2.0';
SELECT extversion FROM pg_extension WHERE extname = 'bloomamq';
ALTER EXTENSION bloomamq UPDATE TO '0.3.0';
SELECT extversion FROM pg_extension WHERE extname = 'bloomamq';
ALTER EXTENSION bloomamq UPDATE TO '0.4.0';
SELECT extversion FROM pg_extension WHERE extname = 'bloomamq';
-- 0.5.0 creates amq_union_agg again (a new state type): a view that uses
-- it stops the upgrade, which names it; a view of amq_agg(anyelement) stays
CREATE TABLE keys AS SELECT g AS id FROM generate_series(1, 1000) g;
CREATE VIEW keys_filter AS SELECT amq_agg(id) AS f FROM keys;
CREATE VIEW keys_union AS
	SELECT amq_union_agg(f) AS u FROM (SELECT amq_agg(id, 0.01, 'blocked', 1000) AS f FROM keys) s;
CREATE TABLE before AS SELECT f::bytea AS b FROM keys_filter;
DO $$
DECLARE
	detail text;
BEGIN
	ALTER EXTENSION bloomamq UPDATE;
	RAISE NOTICE 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RAISE NOTICE '%: % (%)', SQLSTATE, SQLERRM, detail;
END $$;
SELECT extversion FROM pg_extension WHERE extname = 'bloomamq';
DROP VIEW keys_union;
ALTER EXTENSION bloomamq UPDATE;
-- the view still works, and the overload for its key type gives the same filter
SELECT (SELECT f FROM keys_filter)::bytea = b AS view_same,
	(SELECT amq_agg(id) FROM keys)::bytea = b AS overload_same FROM before;
SELECT pg_get_viewdef('keys_filter') LIKE '%amq_agg(id)%' AS view_kept;
DROP VIEW keys_filter;
DROP TABLE keys, before;
SELECT extversion FROM pg_extension WHERE extname = 'bloomamq';

CREATE TEMP TABLE upgraded AS
SELECT pg_describe_object(classid, objid, 0) AS object
FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
	AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bloomamq') AND deptype = 'e';

SELECT count(*) > 50 AS many_objects FROM fresh;
-- missing after the upgrade, or extra
(SELECT 'missing' AS what, object FROM fresh EXCEPT SELECT 'missing', object FROM upgraded)
UNION ALL
(SELECT 'extra', object FROM upgraded EXCEPT SELECT 'extra', object FROM fresh)
ORDER BY 1, 2;

-- comments came along too
SELECT count(*) AS functions_without_comment
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
	AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'bloomamq')
WHERE obj_description(p.oid, 'pg_proc') IS NULL
	AND p.proname NOT LIKE 'amqfilter\_%' AND p.proname NOT LIKE 'amq\_agg\_%'
	AND p.proname <> 'amq_union_agg_trans';

-- and the upgraded extension works
SELECT amq_remove(amq_add(amq_new('counting', 100), 1), 1) @> 1 AS removed;

-- the upgrade gave every @> and <@ the estimator
SELECT oprname, count(*) AS operators,
	count(*) FILTER (WHERE oprrest = 'amq_contains_sel'::regproc) AS with_estimator
FROM pg_operator
WHERE oprname IN ('@>', '<@')
	AND 'amqfilter'::regtype IN (oprleft, oprright)
GROUP BY oprname ORDER BY oprname;

\c :origdb
DROP DATABASE bloomamq_upgrade;
