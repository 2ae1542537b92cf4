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

CREATE FUNCTION amq_index_handler(internal) RETURNS index_am_handler
	AS 'MODULE_PATHNAME', 'amqidxhandler' LANGUAGE C;
COMMENT ON FUNCTION amq_index_handler(internal) IS 'handler of the amq index access method';

CREATE ACCESS METHOD amq TYPE INDEX HANDLER amq_index_handler;
COMMENT ON ACCESS METHOD amq IS 'block-range skip index with an exact-sized approximate membership filter per range of heap pages, for = and = ANY';

-- One operator class per key type, grouped in families whose types compare
-- (and hash) alike: an int4 column is probed with an int8 value directly.
CREATE OPERATOR FAMILY integer_ops USING amq;
CREATE OPERATOR CLASS int2_ops DEFAULT FOR TYPE int2 USING amq FAMILY integer_ops AS
	OPERATOR 1 = (int2, int2), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS int4_ops DEFAULT FOR TYPE int4 USING amq FAMILY integer_ops AS
	OPERATOR 1 = (int4, int4), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS int8_ops DEFAULT FOR TYPE int8 USING amq FAMILY integer_ops AS
	OPERATOR 1 = (int8, int8), FUNCTION 1 amq_hash(anyelement);
ALTER OPERATOR FAMILY integer_ops USING amq ADD
	OPERATOR 1 = (int2, int4), OPERATOR 1 = (int2, int8),
	OPERATOR 1 = (int4, int2), OPERATOR 1 = (int4, int8),
	OPERATOR 1 = (int8, int2), OPERATOR 1 = (int8, int4);

CREATE OPERATOR FAMILY float_ops USING amq;
CREATE OPERATOR CLASS float4_ops DEFAULT FOR TYPE float4 USING amq FAMILY float_ops AS
	OPERATOR 1 = (float4, float4), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS float8_ops DEFAULT FOR TYPE float8 USING amq FAMILY float_ops AS
	OPERATOR 1 = (float8, float8), FUNCTION 1 amq_hash(anyelement);
ALTER OPERATOR FAMILY float_ops USING amq ADD
	OPERATOR 1 = (float4, float8), OPERATOR 1 = (float8, float4);

CREATE OPERATOR CLASS numeric_ops DEFAULT FOR TYPE numeric USING amq AS
	OPERATOR 1 = (numeric, numeric), FUNCTION 1 amq_hash(anyelement);

CREATE OPERATOR FAMILY text_ops USING amq;
CREATE OPERATOR CLASS text_ops DEFAULT FOR TYPE text USING amq FAMILY text_ops AS
	OPERATOR 1 = (text, text), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS name_ops DEFAULT FOR TYPE name USING amq FAMILY text_ops AS
	OPERATOR 1 = (name, name), FUNCTION 1 amq_hash(anyelement);
ALTER OPERATOR FAMILY text_ops USING amq ADD
	OPERATOR 1 = (name, text), OPERATOR 1 = (text, name);

-- bpchar's = ignores trailing spaces, and so does its hash
CREATE OPERATOR CLASS bpchar_ops DEFAULT FOR TYPE bpchar USING amq AS
	OPERATOR 1 = (bpchar, bpchar), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS bytea_ops DEFAULT FOR TYPE bytea USING amq AS
	OPERATOR 1 = (bytea, bytea), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS uuid_ops DEFAULT FOR TYPE uuid USING amq AS
	OPERATOR 1 = (uuid, uuid), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS date_ops DEFAULT FOR TYPE date USING amq AS
	OPERATOR 1 = (date, date), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS timestamp_ops DEFAULT FOR TYPE timestamp USING amq AS
	OPERATOR 1 = (timestamp, timestamp), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS timestamptz_ops DEFAULT FOR TYPE timestamptz USING amq AS
	OPERATOR 1 = (timestamptz, timestamptz), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS bool_ops DEFAULT FOR TYPE bool USING amq AS
	OPERATOR 1 = (bool, bool), FUNCTION 1 amq_hash(anyelement);
