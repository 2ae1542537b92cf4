-- bloomamq 0.4.0 -> 0.5.0: an aggregate state type that Citus pushes down.
--
-- Citus splits a custom aggregate into partial aggregates on its workers
-- only when its state type is not internal and its declared argument types
-- are the call's own.  This adds the type amqaggstate, an amq_agg for each
-- built-in key type with that state, and amq_union_agg with that state.
-- amq_agg(anyelement ...) stays as it was, for other key types.  A state
-- type cannot be altered, so amq_union_agg is dropped and created again: a
-- view or function that uses it stops the upgrade with an error naming it
-- (drop it, upgrade, create it again).  The filters are the same bytes as
-- before.  It also adds amq operator classes for inet, macaddr, macaddr8,
-- interval, time, timetz, oid, jsonb, enums, arrays and ranges.

\echo Use "ALTER EXTENSION bloomamq UPDATE TO '0.5.0'" to load this file. \quit

DROP AGGREGATE amq_union_agg(amqfilter);
DROP FUNCTION amq_union_agg_trans(internal, amqfilter);
COMMENT ON FUNCTION amq_agg_final(internal) IS 'amq_agg final function';
COMMENT ON FUNCTION amq_agg_combine(internal, internal) IS 'amq_agg combine function';
COMMENT ON FUNCTION amq_agg_serialize(internal) IS 'amq_agg state serialization';
COMMENT ON FUNCTION amq_agg_deserialize(bytea, internal) IS 'amq_agg state deserialization (validated)';

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

-- amq operator classes for types hashed by their own extended hash
-- function (family "other" in Hashing): = of inet also serves cidr columns;
-- the polymorphic classes serve every enum, array and range type whose
-- values hash.
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
