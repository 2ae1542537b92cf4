-- bloomamq: approximate membership query filters (the Bloom family)
-- Install script source; the build copies it to bloomamq--<version>.sql.

\echo Use "CREATE EXTENSION bloomamq" to load this file. \quit

-------------------------------------------------------------------------------
-- The amqfilter type
-------------------------------------------------------------------------------

CREATE TYPE amqfilter;

CREATE FUNCTION amqfilter_in(cstring) RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amqfilter_out(amqfilter) RETURNS cstring
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amqfilter_recv(internal) RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amqfilter_send(amqfilter) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- EXTERNAL storage: out of line but uncompressed, so a probe of a large
-- blocked filter can fetch one block as a TOAST slice.
CREATE TYPE amqfilter (
	INPUT = amqfilter_in,
	OUTPUT = amqfilter_out,
	RECEIVE = amqfilter_recv,
	SEND = amqfilter_send,
	INTERNALLENGTH = VARIABLE,
	ALIGNMENT = int4,
	STORAGE = external
);

COMMENT ON TYPE amqfilter IS 'approximate membership query filter (Bloom family): may contain a key, or surely does not';
COMMENT ON FUNCTION amqfilter_in(cstring) IS 'amqfilter text input (base64 of its bytes, validated)';
COMMENT ON FUNCTION amqfilter_out(amqfilter) IS 'amqfilter text output (base64 of its bytes)';
COMMENT ON FUNCTION amqfilter_recv(internal) IS 'amqfilter binary input (validated)';
COMMENT ON FUNCTION amqfilter_send(amqfilter) IS 'amqfilter binary output';

CREATE FUNCTION amq_from_bytea(bytea) RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_from_bytea(bytea) IS 'validate bytes as an amqfilter (the bytea to amqfilter cast)';

CREATE CAST (bytea AS amqfilter) WITH FUNCTION amq_from_bytea(bytea);
CREATE CAST (amqfilter AS bytea) WITHOUT FUNCTION;

-------------------------------------------------------------------------------
-- Hashing
-------------------------------------------------------------------------------

CREATE FUNCTION amq_hash(anyelement) RETURNS bigint
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_hash(anyelement) IS 'canonical 64-bit hash of a key, as amqfilters store it';

-------------------------------------------------------------------------------
-- Build and change
-------------------------------------------------------------------------------

CREATE FUNCTION amq_new(kind text, capacity bigint, fpr float8 DEFAULT 0.01) RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_new(text, bigint, float8) IS 'empty filter of a kind, sized for capacity distinct keys at false-positive rate fpr';

CREATE FUNCTION amq_from_array(keys anyarray, fpr float8 DEFAULT 0.01, kind text DEFAULT 'blocked') RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_from_array(anyarray, float8, text) IS 'filter sized exactly for the distinct non-NULL elements of an array';

-- anynonarray, so that an array argument picks the array form unambiguously
CREATE FUNCTION amq_add(amqfilter, anynonarray) RETURNS amqfilter
	AS 'MODULE_PATHNAME', 'amq_add' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_add(amqfilter, anynonarray) IS 'the filter with a key added';

CREATE FUNCTION amq_add(amqfilter, anyarray) RETURNS amqfilter
	AS 'MODULE_PATHNAME', 'amq_add_array' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_add(amqfilter, anyarray) IS 'the filter with every non-NULL array element added';

CREATE FUNCTION amq_remove(amqfilter, anynonarray) RETURNS amqfilter
	AS 'MODULE_PATHNAME', 'amq_remove' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_remove(amqfilter, anynonarray) IS 'the filter with one occurrence of a key removed (kinds counting and cuckoo)';

CREATE FUNCTION amq_remove(amqfilter, anyarray) RETURNS amqfilter
	AS 'MODULE_PATHNAME', 'amq_remove_array' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_remove(amqfilter, anyarray) IS 'the filter with one occurrence of every non-NULL array element removed (kinds counting and cuckoo)';

--------------------------------------------------------------------------------
-- Parquet interchange
--------------------------------------------------------------------------------

CREATE FUNCTION amq_to_parquet(amqfilter) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_to_parquet(amqfilter) IS 'the Parquet split block Bloom filter bitset of a filter built with kind ''parquet''';

CREATE FUNCTION amq_from_parquet(bitset bytea, column_type regtype DEFAULT NULL) RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION amq_from_parquet(bytea, regtype) IS 'filter from a Parquet split block Bloom filter bitset; column_type fixes the Parquet physical type, NULL takes each probe''s key type';

-------------------------------------------------------------------------------
-- Probe
-------------------------------------------------------------------------------

CREATE FUNCTION amq_contains(amqfilter, anyelement) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contains' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contains(amqfilter, text) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contains' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contains(amqfilter, bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contains' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contains(amqfilter, integer) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contains' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contains(amqfilter, smallint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contains' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contains(amqfilter, uuid) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contains' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contains(amqfilter, bytea) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contains' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION amq_contained(anyelement, amqfilter) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contained' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contained(text, amqfilter) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contained' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contained(bigint, amqfilter) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contained' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contained(integer, amqfilter) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contained' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contained(smallint, amqfilter) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contained' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contained(uuid, amqfilter) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contained' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_contained(bytea, amqfilter) RETURNS boolean
	AS 'MODULE_PATHNAME', 'amq_contained' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION amq_contains(amqfilter, anyelement) IS 'may the filter contain the key? (false: surely not)';
COMMENT ON FUNCTION amq_contains(amqfilter, text) IS 'may the filter contain the text key? (false: surely not)';
COMMENT ON FUNCTION amq_contains(amqfilter, bigint) IS 'may the filter contain the integer key? (false: surely not)';
COMMENT ON FUNCTION amq_contains(amqfilter, integer) IS 'may the filter contain the integer key? (false: surely not)';
COMMENT ON FUNCTION amq_contains(amqfilter, smallint) IS 'may the filter contain the integer key? (false: surely not)';
COMMENT ON FUNCTION amq_contains(amqfilter, uuid) IS 'may the filter contain the uuid key? (false: surely not)';
COMMENT ON FUNCTION amq_contains(amqfilter, bytea) IS 'may the filter contain the bytea key? (false: surely not)';
COMMENT ON FUNCTION amq_contained(anyelement, amqfilter) IS 'may the key be in the filter? (false: surely not)';
COMMENT ON FUNCTION amq_contained(text, amqfilter) IS 'may the text key be in the filter? (false: surely not)';
COMMENT ON FUNCTION amq_contained(bigint, amqfilter) IS 'may the integer key be in the filter? (false: surely not)';
COMMENT ON FUNCTION amq_contained(integer, amqfilter) IS 'may the integer key be in the filter? (false: surely not)';
COMMENT ON FUNCTION amq_contained(smallint, amqfilter) IS 'may the integer key be in the filter? (false: surely not)';
COMMENT ON FUNCTION amq_contained(uuid, amqfilter) IS 'may the uuid key be in the filter? (false: surely not)';
COMMENT ON FUNCTION amq_contained(bytea, amqfilter) IS 'may the bytea key be in the filter? (false: surely not)';

-- The estimator of @> and <@: a constant filter's keys and false-positive
-- rate against the key column's statistics (see src/amq_selfuncs.c).
CREATE FUNCTION amq_contains_sel(internal, oid, internal, integer) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_contains_sel(internal, oid, internal, integer) IS 'restriction selectivity of filter @> key and key <@ filter';

CREATE OPERATOR @> (LEFTARG = amqfilter, RIGHTARG = anyelement, FUNCTION = amq_contains, COMMUTATOR = <@, RESTRICT = amq_contains_sel);
CREATE OPERATOR @> (LEFTARG = amqfilter, RIGHTARG = text, FUNCTION = amq_contains, COMMUTATOR = <@, RESTRICT = amq_contains_sel);
CREATE OPERATOR @> (LEFTARG = amqfilter, RIGHTARG = bigint, FUNCTION = amq_contains, COMMUTATOR = <@, RESTRICT = amq_contains_sel);
CREATE OPERATOR @> (LEFTARG = amqfilter, RIGHTARG = integer, FUNCTION = amq_contains, COMMUTATOR = <@, RESTRICT = amq_contains_sel);
CREATE OPERATOR @> (LEFTARG = amqfilter, RIGHTARG = smallint, FUNCTION = amq_contains, COMMUTATOR = <@, RESTRICT = amq_contains_sel);
CREATE OPERATOR @> (LEFTARG = amqfilter, RIGHTARG = uuid, FUNCTION = amq_contains, COMMUTATOR = <@, RESTRICT = amq_contains_sel);
CREATE OPERATOR @> (LEFTARG = amqfilter, RIGHTARG = bytea, FUNCTION = amq_contains, COMMUTATOR = <@, RESTRICT = amq_contains_sel);
CREATE OPERATOR <@ (LEFTARG = anyelement, RIGHTARG = amqfilter, FUNCTION = amq_contained, COMMUTATOR = @>, RESTRICT = amq_contains_sel);
CREATE OPERATOR <@ (LEFTARG = text, RIGHTARG = amqfilter, FUNCTION = amq_contained, COMMUTATOR = @>, RESTRICT = amq_contains_sel);
CREATE OPERATOR <@ (LEFTARG = bigint, RIGHTARG = amqfilter, FUNCTION = amq_contained, COMMUTATOR = @>, RESTRICT = amq_contains_sel);
CREATE OPERATOR <@ (LEFTARG = integer, RIGHTARG = amqfilter, FUNCTION = amq_contained, COMMUTATOR = @>, RESTRICT = amq_contains_sel);
CREATE OPERATOR <@ (LEFTARG = smallint, RIGHTARG = amqfilter, FUNCTION = amq_contained, COMMUTATOR = @>, RESTRICT = amq_contains_sel);
CREATE OPERATOR <@ (LEFTARG = uuid, RIGHTARG = amqfilter, FUNCTION = amq_contained, COMMUTATOR = @>, RESTRICT = amq_contains_sel);
CREATE OPERATOR <@ (LEFTARG = bytea, RIGHTARG = amqfilter, FUNCTION = amq_contained, COMMUTATOR = @>, RESTRICT = amq_contains_sel);

COMMENT ON OPERATOR @> (amqfilter, anyelement) IS 'may the filter contain the key?';
COMMENT ON OPERATOR @> (amqfilter, text) IS 'may the filter contain the key?';
COMMENT ON OPERATOR @> (amqfilter, bigint) IS 'may the filter contain the key?';
COMMENT ON OPERATOR @> (amqfilter, integer) IS 'may the filter contain the key?';
COMMENT ON OPERATOR @> (amqfilter, smallint) IS 'may the filter contain the key?';
COMMENT ON OPERATOR @> (amqfilter, uuid) IS 'may the filter contain the key?';
COMMENT ON OPERATOR @> (amqfilter, bytea) IS 'may the filter contain the key?';
COMMENT ON OPERATOR <@ (anyelement, amqfilter) IS 'may the key be in the filter?';
COMMENT ON OPERATOR <@ (text, amqfilter) IS 'may the key be in the filter?';
COMMENT ON OPERATOR <@ (bigint, amqfilter) IS 'may the key be in the filter?';
COMMENT ON OPERATOR <@ (integer, amqfilter) IS 'may the key be in the filter?';
COMMENT ON OPERATOR <@ (smallint, amqfilter) IS 'may the key be in the filter?';
COMMENT ON OPERATOR <@ (uuid, amqfilter) IS 'may the key be in the filter?';
COMMENT ON OPERATOR <@ (bytea, amqfilter) IS 'may the key be in the filter?';

CREATE FUNCTION amq_contains_any(amqfilter, anyarray) RETURNS boolean
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_contains_any(amqfilter, anyarray) IS 'may the filter contain some element of the array?';

CREATE FUNCTION amq_contains_all(amqfilter, anyarray) RETURNS boolean
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_contains_all(amqfilter, anyarray) IS 'may the filter contain every element of the array?';

-------------------------------------------------------------------------------
-- Combine
-------------------------------------------------------------------------------

CREATE FUNCTION amq_union(amqfilter, amqfilter) RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_union(amqfilter, amqfilter) IS 'union of two filters of one kind and geometry';

CREATE FUNCTION amq_intersect(amqfilter, amqfilter) RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_intersect(amqfilter, amqfilter) IS 'intersection of two Bloom-family filters of one kind and geometry';

CREATE OPERATOR | (LEFTARG = amqfilter, RIGHTARG = amqfilter, FUNCTION = amq_union, COMMUTATOR = |);
CREATE OPERATOR & (LEFTARG = amqfilter, RIGHTARG = amqfilter, FUNCTION = amq_intersect, COMMUTATOR = &);
COMMENT ON OPERATOR | (amqfilter, amqfilter) IS 'union of two filters';
COMMENT ON OPERATOR & (amqfilter, amqfilter) IS 'intersection of two filters';

-------------------------------------------------------------------------------
-- Inspect
-------------------------------------------------------------------------------

CREATE FUNCTION amq_info(amqfilter) RETURNS jsonb
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_info(amqfilter) IS 'kind, size, keys, bits per key, fill, estimated fpr and distinct keys, hashing of a filter';

CREATE FUNCTION amq_kind(amqfilter) RETURNS text
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_kind(amqfilter) IS 'kind of a filter';

CREATE FUNCTION amq_count(amqfilter) RETURNS bigint
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_count(amqfilter) IS 'number of distinct keys added (estimated after union or intersection)';

CREATE FUNCTION amq_fpr(amqfilter) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_fpr(amqfilter) IS 'false-positive rate of a filter as filled now, estimated from its payload';

CREATE FUNCTION amq_estimate_distinct(amqfilter) RETURNS float8
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION amq_estimate_distinct(amqfilter) IS 'distinct keys in a filter, estimated from its payload';

-------------------------------------------------------------------------------
-- Aggregates
-------------------------------------------------------------------------------

-- amq_agg for keys of any hashable type: its state is internal (Citus runs
-- it on the coordinator).  The overloads below, one per built-in key type,
-- have the state type amqaggstate, which Citus pushes down; both build the
-- same filters.
CREATE FUNCTION amq_agg_trans(internal, anyelement) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_trans(internal, anyelement, float8) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_trans(internal, anyelement, float8, text) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_trans(internal, anyelement, float8, text, bigint) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_final(internal) RETURNS amqfilter
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_combine(internal, internal) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_serialize(internal) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amq_agg_deserialize(bytea, internal) RETURNS internal
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION amq_agg_trans(internal, anyelement) IS 'amq_agg transition function';
COMMENT ON FUNCTION amq_agg_trans(internal, anyelement, float8) IS 'amq_agg transition function';
COMMENT ON FUNCTION amq_agg_trans(internal, anyelement, float8, text) IS 'amq_agg transition function';
COMMENT ON FUNCTION amq_agg_trans(internal, anyelement, float8, text, bigint) IS 'amq_agg transition function';
COMMENT ON FUNCTION amq_agg_final(internal) IS 'amq_agg final function';
COMMENT ON FUNCTION amq_agg_combine(internal, internal) IS 'amq_agg combine function';
COMMENT ON FUNCTION amq_agg_serialize(internal) IS 'amq_agg state serialization';
COMMENT ON FUNCTION amq_agg_deserialize(bytea, internal) IS 'amq_agg state deserialization (validated)';

CREATE AGGREGATE amq_agg(anyelement) (
	SFUNC = amq_agg_trans, STYPE = internal, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, SERIALFUNC = amq_agg_serialize,
	DESERIALFUNC = amq_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(anyelement, float8) (
	SFUNC = amq_agg_trans, STYPE = internal, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, SERIALFUNC = amq_agg_serialize,
	DESERIALFUNC = amq_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(anyelement, float8, text) (
	SFUNC = amq_agg_trans, STYPE = internal, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, SERIALFUNC = amq_agg_serialize,
	DESERIALFUNC = amq_agg_deserialize, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(anyelement, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = internal, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, SERIALFUNC = amq_agg_serialize,
	DESERIALFUNC = amq_agg_deserialize, PARALLEL = SAFE);

COMMENT ON AGGREGATE amq_agg(anyelement) IS 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly';
COMMENT ON AGGREGATE amq_agg(anyelement, float8) IS 'filter of the non-NULL keys at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(anyelement, float8, text) IS 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(anyelement, float8, text, bigint) IS 'filter of the non-NULL keys, of fixed size for capacity keys';

-- The aggregates' own state type, so that Citus can split them into partial
-- aggregates on the workers and a combine on the coordinator (it moves
-- states in their text form, and pushes down only aggregates whose state
-- is not internal and whose declared argument types are the call's own).
-- In memory it is changed in place per row (an expanded object); its bytes
-- are the serialized state, validated on every way in.
CREATE TYPE amqaggstate;

CREATE FUNCTION amqaggstate_in(cstring) RETURNS amqaggstate
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
-- output and send are amqfilter's: a value's bytes in base64, or as they are
CREATE FUNCTION amqaggstate_out(amqaggstate) RETURNS cstring
	AS 'MODULE_PATHNAME', 'amqfilter_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amqaggstate_recv(internal) RETURNS amqaggstate
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amqaggstate_send(amqaggstate) RETURNS bytea
	AS 'MODULE_PATHNAME', 'amqfilter_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE amqaggstate (
	INPUT = amqaggstate_in,
	OUTPUT = amqaggstate_out,
	RECEIVE = amqaggstate_recv,
	SEND = amqaggstate_send,
	INTERNALLENGTH = VARIABLE,
	ALIGNMENT = int4,
	STORAGE = external
);

COMMENT ON TYPE amqaggstate IS 'partial state of amq_agg and amq_union_agg (hashes of the keys so far, or a filter)';
COMMENT ON FUNCTION amqaggstate_in(cstring) IS 'amqaggstate text input (base64 of its bytes, validated)';
COMMENT ON FUNCTION amqaggstate_out(amqaggstate) IS 'amqaggstate text output (base64 of its bytes)';
COMMENT ON FUNCTION amqaggstate_recv(internal) IS 'amqaggstate binary input (validated)';
COMMENT ON FUNCTION amqaggstate_send(amqaggstate) IS 'amqaggstate binary output';

CREATE FUNCTION amq_agg_trans(amqaggstate, anyelement) RETURNS amqaggstate
	AS 'MODULE_PATHNAME', 'amq_agg_transfn' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_trans(amqaggstate, anyelement, float8) RETURNS amqaggstate
	AS 'MODULE_PATHNAME', 'amq_agg_transfn' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_trans(amqaggstate, anyelement, float8, text) RETURNS amqaggstate
	AS 'MODULE_PATHNAME', 'amq_agg_transfn' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_trans(amqaggstate, anyelement, float8, text, bigint) RETURNS amqaggstate
	AS 'MODULE_PATHNAME', 'amq_agg_transfn' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_union_agg_trans(amqaggstate, amqfilter) RETURNS amqaggstate
	AS 'MODULE_PATHNAME', 'amq_union_agg_transfn' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_final(amqaggstate) RETURNS amqfilter
	AS 'MODULE_PATHNAME', 'amq_agg_finalfn' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION amq_agg_combine(amqaggstate, amqaggstate) RETURNS amqaggstate
	AS 'MODULE_PATHNAME', 'amq_agg_combinefn' LANGUAGE C IMMUTABLE PARALLEL SAFE;

COMMENT ON FUNCTION amq_agg_trans(amqaggstate, anyelement) IS 'amq_agg transition function';
COMMENT ON FUNCTION amq_agg_trans(amqaggstate, anyelement, float8) IS 'amq_agg transition function';
COMMENT ON FUNCTION amq_agg_trans(amqaggstate, anyelement, float8, text) IS 'amq_agg transition function';
COMMENT ON FUNCTION amq_agg_trans(amqaggstate, anyelement, float8, text, bigint) IS 'amq_agg transition function';
COMMENT ON FUNCTION amq_union_agg_trans(amqaggstate, amqfilter) IS 'amq_union_agg transition function';
COMMENT ON FUNCTION amq_agg_final(amqaggstate) IS 'amq_agg and amq_union_agg final function: the filter of a state';
COMMENT ON FUNCTION amq_agg_combine(amqaggstate, amqaggstate) IS 'amq_agg and amq_union_agg combine function';

-- amq_agg for each built-in key type, with state amqaggstate: a call on
-- keys of one of these types (or a domain over one) resolves to its own.
DO $$
DECLARE
	t text;
	args text;
	what text;
BEGIN
	FOREACH t IN ARRAY ARRAY['smallint', 'integer', 'bigint', 'real', 'double precision',
		'numeric', 'text', 'character varying', 'character', 'name', 'bytea', 'uuid', 'date',
		'timestamp without time zone', 'timestamp with time zone', 'boolean']
	LOOP
		FOREACH args IN ARRAY ARRAY['', ', float8', ', float8, text', ', float8, text, bigint']
		LOOP
			EXECUTE format('CREATE AGGREGATE amq_agg(%s%s) (SFUNC = amq_agg_trans, '
						   'STYPE = amqaggstate, FINALFUNC = amq_agg_final, '
						   'COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE)', t, args);
			what := CASE args
				WHEN '' THEN 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly'
				WHEN ', float8' THEN 'filter of the non-NULL keys at false-positive rate fpr, sized exactly'
				WHEN ', float8, text' THEN 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly'
				ELSE 'filter of the non-NULL keys, of fixed size for capacity keys' END;
			EXECUTE format('COMMENT ON AGGREGATE amq_agg(%s%s) IS %L', t, args, what);
		END LOOP;
	END LOOP;
END $$;

CREATE AGGREGATE amq_union_agg(amqfilter) (
	SFUNC = amq_union_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
COMMENT ON AGGREGATE amq_union_agg(amqfilter) IS 'union of filters of one kind and geometry';

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

-- Types hashed by their own extended hash function (family "other" in
-- Hashing): = of inet also serves cidr columns; the polymorphic classes
-- serve every enum, array and range type whose values hash.
CREATE OPERATOR CLASS inet_ops DEFAULT FOR TYPE inet USING amq AS
	OPERATOR 1 = (inet, inet), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS macaddr_ops DEFAULT FOR TYPE macaddr USING amq AS
	OPERATOR 1 = (macaddr, macaddr), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS macaddr8_ops DEFAULT FOR TYPE macaddr8 USING amq AS
	OPERATOR 1 = (macaddr8, macaddr8), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS interval_ops DEFAULT FOR TYPE interval USING amq AS
	OPERATOR 1 = (interval, interval), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS time_ops DEFAULT FOR TYPE time USING amq AS
	OPERATOR 1 = (time, time), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS timetz_ops DEFAULT FOR TYPE timetz USING amq AS
	OPERATOR 1 = (timetz, timetz), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS oid_ops DEFAULT FOR TYPE oid USING amq AS
	OPERATOR 1 = (oid, oid), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS jsonb_ops DEFAULT FOR TYPE jsonb USING amq AS
	OPERATOR 1 = (jsonb, jsonb), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS enum_ops DEFAULT FOR TYPE anyenum USING amq AS
	OPERATOR 1 = (anyenum, anyenum), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS array_ops DEFAULT FOR TYPE anyarray USING amq AS
	OPERATOR 1 = (anyarray, anyarray), FUNCTION 1 amq_hash(anyelement);
CREATE OPERATOR CLASS range_ops DEFAULT FOR TYPE anyrange USING amq AS
	OPERATOR 1 = (anyrange, anyrange), FUNCTION 1 amq_hash(anyelement);

-- Verifying an amq index, in the spirit of amcheck's bt_index_check: an
-- error (SQLSTATE XX002) at the first corruption found.  It locks the table
-- and the index as a query does and registers a snapshot, hence PARALLEL
-- RESTRICTED; it reads the heap as the table's owner, and only an owner of
-- the index may run it.
CREATE FUNCTION amq_index_check(index regclass, heapallindexed boolean DEFAULT false)
	RETURNS void
	AS 'MODULE_PATHNAME', 'amq_index_check' LANGUAGE C STRICT VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION amq_index_check(regclass, boolean) IS 'verify an amq index: every page, range record and filter, and with heapallindexed that every row''s keys are in its range''s filters; raises an error on corruption';
