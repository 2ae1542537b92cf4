-- bloomamq 0.1.0 -> 0.2.0: the kinds twobit, counting, cuckoo, scalable, xor,
-- fuse and ribbon (no new SQL objects: kinds are names), amq_remove, and
-- Parquet interchange.

\echo Use "ALTER EXTENSION bloomamq UPDATE TO '0.2.0'" to load this file. \quit

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
