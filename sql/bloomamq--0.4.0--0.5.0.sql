-- bloomamq 0.4.0 -> 0.5.0: the aggregates get a state type of their own.
--
-- amq_agg and amq_union_agg kept their state as internal, which Citus does
-- not push down to its workers.  Their transition type cannot be altered,
-- so they are dropped and created again with the type amqaggstate: a view
-- or function that uses them stops the upgrade with an error naming it
-- (drop it, upgrade, create it again).  The filters they build are the
-- same bytes as before.

\echo Use "ALTER EXTENSION bloomamq UPDATE TO '0.5.0'" to load this file. \quit

DROP AGGREGATE amq_agg(anyelement);
DROP AGGREGATE amq_agg(anyelement, float8);
DROP AGGREGATE amq_agg(anyelement, float8, text);
DROP AGGREGATE amq_agg(anyelement, float8, text, bigint);
DROP AGGREGATE amq_union_agg(amqfilter);
DROP FUNCTION amq_agg_trans(internal, anyelement);
DROP FUNCTION amq_agg_trans(internal, anyelement, float8);
DROP FUNCTION amq_agg_trans(internal, anyelement, float8, text);
DROP FUNCTION amq_agg_trans(internal, anyelement, float8, text, bigint);
DROP FUNCTION amq_union_agg_trans(internal, amqfilter);
DROP FUNCTION amq_agg_final(internal);
DROP FUNCTION amq_agg_combine(internal, internal);
DROP FUNCTION amq_agg_serialize(internal);
DROP FUNCTION amq_agg_deserialize(bytea, internal);

-- The aggregates' state: a type of its own rather than internal, so that
-- Citus can split the aggregates into partial aggregates on the workers
-- and a combine on the coordinator (it moves states in their text form).
-- In memory it is changed in place per row (an expanded object); its bytes
-- are the serialized state, validated on every way in.
CREATE TYPE amqaggstate;

CREATE FUNCTION amqaggstate_in(cstring) RETURNS amqaggstate
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amqaggstate_out(amqaggstate) RETURNS cstring
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amqaggstate_recv(internal) RETURNS amqaggstate
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION amqaggstate_send(amqaggstate) RETURNS bytea
	AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

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

CREATE AGGREGATE amq_agg(anyelement) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(anyelement, float8) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(anyelement, float8, text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(anyelement, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_union_agg(amqfilter) (
	SFUNC = amq_union_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);

COMMENT ON AGGREGATE amq_agg(anyelement) IS 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly';
COMMENT ON AGGREGATE amq_agg(anyelement, float8) IS 'filter of the non-NULL keys at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(anyelement, float8, text) IS 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(anyelement, float8, text, bigint) IS 'filter of the non-NULL keys, of fixed size for capacity keys';
COMMENT ON AGGREGATE amq_union_agg(amqfilter) IS 'union of filters of one kind and geometry';

-- The same aggregates for the key types that @> and <@ also take without a
-- cast.  Citus pushes an aggregate down only after checking that its
-- declared argument types are the call's own: a polymorphic one
-- (anyelement) fails that check on the workers, so keys of these types
-- resolve to an aggregate of their own type.  The same transition
-- function: the filters are the same bytes.
CREATE AGGREGATE amq_agg(text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(text, float8) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(text, float8, text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(text, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(bigint, float8) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(bigint, float8, text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(bigint, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(integer) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(integer, float8) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(integer, float8, text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(integer, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(smallint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(smallint, float8) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(smallint, float8, text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(smallint, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(uuid) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(uuid, float8) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(uuid, float8, text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(uuid, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(bytea) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(bytea, float8) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(bytea, float8, text) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);
CREATE AGGREGATE amq_agg(bytea, float8, text, bigint) (
	SFUNC = amq_agg_trans, STYPE = amqaggstate, FINALFUNC = amq_agg_final,
	COMBINEFUNC = amq_agg_combine, PARALLEL = SAFE);

COMMENT ON AGGREGATE amq_agg(text) IS 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly';
COMMENT ON AGGREGATE amq_agg(text, float8) IS 'filter of the non-NULL keys at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(text, float8, text) IS 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(text, float8, text, bigint) IS 'filter of the non-NULL keys, of fixed size for capacity keys';
COMMENT ON AGGREGATE amq_agg(bigint) IS 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly';
COMMENT ON AGGREGATE amq_agg(bigint, float8) IS 'filter of the non-NULL keys at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(bigint, float8, text) IS 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(bigint, float8, text, bigint) IS 'filter of the non-NULL keys, of fixed size for capacity keys';
COMMENT ON AGGREGATE amq_agg(integer) IS 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly';
COMMENT ON AGGREGATE amq_agg(integer, float8) IS 'filter of the non-NULL keys at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(integer, float8, text) IS 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(integer, float8, text, bigint) IS 'filter of the non-NULL keys, of fixed size for capacity keys';
COMMENT ON AGGREGATE amq_agg(smallint) IS 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly';
COMMENT ON AGGREGATE amq_agg(smallint, float8) IS 'filter of the non-NULL keys at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(smallint, float8, text) IS 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(smallint, float8, text, bigint) IS 'filter of the non-NULL keys, of fixed size for capacity keys';
COMMENT ON AGGREGATE amq_agg(uuid) IS 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly';
COMMENT ON AGGREGATE amq_agg(uuid, float8) IS 'filter of the non-NULL keys at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(uuid, float8, text) IS 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(uuid, float8, text, bigint) IS 'filter of the non-NULL keys, of fixed size for capacity keys';
COMMENT ON AGGREGATE amq_agg(bytea) IS 'filter of the non-NULL keys (kind blocked, fpr 0.01), sized exactly';
COMMENT ON AGGREGATE amq_agg(bytea, float8) IS 'filter of the non-NULL keys at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(bytea, float8, text) IS 'filter of the non-NULL keys of a kind at false-positive rate fpr, sized exactly';
COMMENT ON AGGREGATE amq_agg(bytea, float8, text, bigint) IS 'filter of the non-NULL keys, of fixed size for capacity keys';
