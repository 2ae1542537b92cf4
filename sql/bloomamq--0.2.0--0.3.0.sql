-- bloomamq 0.2.0 -> 0.3.0: the amq index access method, selectivity
-- estimators for the containment operators, and automatic join pre-filters.

\echo Use "ALTER EXTENSION bloomamq UPDATE TO '0.3.0'" to load this file. \quit

--------------------------------------------------------------------------------
-- Selectivity of the containment operators
--------------------------------------------------------------------------------

CREATE FUNCTION amq_contains_sel(internal, oid, internal, integer) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_contains_sel(internal, oid, internal, integer) IS 'restriction selectivity of filter @> key and key <@ filter';

ALTER OPERATOR @> (amqfilter, anyelement) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR @> (amqfilter, text) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR @> (amqfilter, bigint) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR @> (amqfilter, integer) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR @> (amqfilter, smallint) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR @> (amqfilter, uuid) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR @> (amqfilter, bytea) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR <@ (anyelement, amqfilter) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR <@ (text, amqfilter) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR <@ (bigint, amqfilter) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR <@ (integer, amqfilter) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR <@ (smallint, amqfilter) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR <@ (uuid, amqfilter) SET (RESTRICT = amq_contains_sel);
ALTER OPERATOR <@ (bytea, amqfilter) SET (RESTRICT = amq_contains_sel);

--------------------------------------------------------------------------------
-- Join pre-filtering
--------------------------------------------------------------------------------

--------------------------------------------------------------------------------
-- The amq index access method
--------------------------------------------------------------------------------
