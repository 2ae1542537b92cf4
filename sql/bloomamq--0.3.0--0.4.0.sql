-- bloomamq 0.3.0 -> 0.4.0: verification of amq indexes.

\echo Use "ALTER EXTENSION bloomamq UPDATE TO '0.4.0'" to load this file. \quit

--------------------------------------------------------------------------------
-- Verifying an amq index
--------------------------------------------------------------------------------

CREATE FUNCTION amq_index_check(index regclass, heapallindexed boolean DEFAULT false)
	RETURNS void
	AS 'MODULE_PATHNAME', 'amq_index_check' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION amq_index_check(regclass, boolean) IS 'verify an amq index: every page, range record and filter, and with heapallindexed that every row''s keys are in its range''s filters; raises an error on corruption';
