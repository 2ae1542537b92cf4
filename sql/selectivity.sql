-- The planner's row estimates for filter @> key and key <@ filter.
--
-- The tables have at most 30,000 rows, which ANALYZE samples whole, so the
-- statistics (and so the estimates) are the same on every run.

-- the estimated rows of a query's top plan node
CREATE FUNCTION pg_temp.est(q text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	plan json;
BEGIN
	EXECUTE 'EXPLAIN (FORMAT JSON) ' || q INTO plan;
	RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::bigint;
END $$;

-- 30,000 distinct ids; "skew": half the rows 0, the rest distinct; "t": text
CREATE TABLE sel_t AS
SELECT i::bigint AS id, i::int4 AS id4,
	CASE WHEN i % 2 = 0 THEN 0 ELSE i END::bigint AS skew,
	'user_' || i AS k
FROM generate_series(1, 30000) i;
ANALYZE sel_t;

-- filters over keys of the column, held in a table so that the queries
-- below can inline them as constants
CREATE TABLE sel_f AS
SELECT (SELECT amq_agg(i::bigint) FROM generate_series(1, 10) i) AS f10,
	(SELECT amq_agg(i::bigint) FROM generate_series(1, 1000) i) AS f1k,
	(SELECT amq_agg(i::bigint) FROM generate_series(1, 10000) i) AS f10k,
	(SELECT amq_agg(i::bigint) FROM generate_series(1, 29000) i) AS f29k,
	(SELECT amq_agg(i::bigint, 0.2) FROM generate_series(1, 1000) i) AS f1k_loose,
	(SELECT amq_agg('user_' || i) FROM generate_series(1, 10000) i) AS t10k,
	amq_new('blocked', 1000) AS empty;

-- the query text with $F replaced by a filter of sel_f, as a constant
CREATE FUNCTION pg_temp.q(col text, pred text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	lit text;
BEGIN
	EXECUTE format('SELECT quote_literal(%I::text) FROM sel_f', col) INTO lit;
	RETURN replace(pred, '$F', lit || '::amqfilter');
END $$;

-- a filter's keys and its false-positive rate as filled now
CREATE FUNCTION pg_temp.keys_fpr(col text, OUT keys bigint, OUT fpr float8)
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('SELECT amq_count(%1$I), amq_fpr(%1$I) FROM sel_f', col) INTO keys, fpr;
END $$;

-- The estimate follows the filter: its keys, plus its false-positive rate
-- of the other rows (a blocked filter of 10 keys has one block, whose rate
-- is far below the 1% it was sized for); a filter with more false
-- positives passes more; an empty filter nothing.
SELECT f, keys, round(fpr::numeric, 4) AS fpr,
	round(keys + (30000 - keys) * fpr) AS expected,
	pg_temp.est(pg_temp.q(f, 'SELECT * FROM sel_t WHERE $F @> id')) AS estimate
FROM unnest(ARRAY['f10', 'f1k', 'f10k', 'f29k', 'f1k_loose', 'empty']) f,
	pg_temp.keys_fpr(f);

-- the same for key <@ filter, every integer width, and text keys
SELECT pg_temp.est(pg_temp.q('f10k', 'SELECT * FROM sel_t WHERE $F @> id')) AS f_contains_id,
	pg_temp.est(pg_temp.q('f10k', 'SELECT * FROM sel_t WHERE id <@ $F')) AS id_in_f,
	pg_temp.est(pg_temp.q('f10k', 'SELECT * FROM sel_t WHERE id4 <@ $F')) AS id4_in_f,
	pg_temp.est(pg_temp.q('f10k', 'SELECT * FROM sel_t WHERE $F @> id4')) AS f_contains_id4,
	pg_temp.est(pg_temp.q('t10k', 'SELECT * FROM sel_t WHERE k <@ $F')) AS k_in_t,
	pg_temp.est(pg_temp.q('t10k', 'SELECT * FROM sel_t WHERE $F @> k')) AS t_contains_k;

-- The most common value is probed: 0 holds half the rows.  A filter that
-- holds 0 passes that half plus its other keys' share of the rest; one
-- that does not, only its keys' share of the rest.
SELECT pg_temp.est('SELECT * FROM sel_t WHERE amq_from_array(ARRAY[0, 1, 3]::bigint[]) @> skew') AS with_mcv,
	pg_temp.est('SELECT * FROM sel_t WHERE amq_from_array(ARRAY[1, 3, 5]::bigint[]) @> skew') AS without_mcv;

-- a key without statistics (an expression) is taken as distinct over the
-- table's 30,000 rows
SELECT pg_temp.est(pg_temp.q('f10k', 'SELECT * FROM sel_t WHERE $F @> (id + 0)')) AS expr_key;

-- A filter unknown at plan time gets the default, 5%: an InitPlan, a
-- generic plan's parameter, a filter of the same row, a column of filters.
SELECT pg_temp.est('SELECT * FROM sel_t WHERE id <@ (SELECT amq_agg(id) FROM sel_t WHERE id < 100)') AS initplan;
PREPARE sel_p(amqfilter) AS SELECT * FROM sel_t WHERE $1 @> id;
SET plan_cache_mode = force_generic_plan;
SELECT pg_temp.est('EXECUTE sel_p(NULL)') AS generic_param;
-- a custom plan sees the parameter's value
SET plan_cache_mode = force_custom_plan;
SELECT pg_temp.est(pg_temp.q('f10', 'EXECUTE sel_p($F)')) AS custom_param;
RESET plan_cache_mode;
DEALLOCATE sel_p;
CREATE TABLE sel_days AS
SELECT d, amq_from_array(ARRAY[d, d + 1]::bigint[]) AS ids, d::bigint AS id
FROM generate_series(1, 1000) d;
ANALYZE sel_days;
SELECT pg_temp.est('SELECT * FROM sel_days WHERE ids @> 42') AS filter_column,
	pg_temp.est('SELECT * FROM sel_days WHERE id <@ ids') AS same_row;

-- a NULL filter passes nothing (a stable expression, evaluated for the
-- estimate; a scan's estimate is at least one row)
CREATE FUNCTION pg_temp.no_filter() RETURNS amqfilter STABLE LANGUAGE plpgsql
	AS 'BEGIN RETURN NULL; END';
SELECT pg_temp.est('SELECT * FROM sel_t WHERE pg_temp.no_filter() @> id') AS null_filter;

-- a filter of another key family: an estimate, no error from the planner
SELECT pg_temp.est(pg_temp.q('t10k', 'SELECT * FROM sel_t WHERE $F @> id')) AS other_family;

-- every @> and <@ of the extension has the estimator
SELECT oprname, count(*) AS operators,
	count(*) FILTER (WHERE oprrest = 'amq_contains_sel'::regproc) AS with_estimator
FROM pg_operator
WHERE oprname IN ('@>', '<@')
	AND 'amqfilter'::regtype IN (oprleft, oprright)
GROUP BY oprname ORDER BY oprname;

DROP TABLE sel_t, sel_f, sel_days;
