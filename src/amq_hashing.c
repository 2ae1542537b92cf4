/*-------------------------------------------------------------------------
 *
 * amq_hashing.c
 *	  Canonical 64-bit key hashes.
 *
 * A filter stores hashes, not values, so the hash of a value must depend on
 * the value alone: equal values (under the type's "=") hash equally, across
 * the types of one family, on every machine.  Each family hashes a canonical
 * byte form with XXH3-64 (seed 0):
 *
 *	integer   int2, int4, int8 as a little-endian int64, so a filter built
 *			  from int4 answers an int8 probe
 *	float	  float4, float8 as a little-endian float8, -0 folded to 0 and
 *			  every NaN to one NaN
 *	numeric   the normalized decimal text (no trailing fraction zeros), so
 *			  1.0 and 1.00 hash equally
 *	text	  text, varchar, name, bpchar: the bytes (bpchar without trailing
 *			  spaces, as its "=" ignores them); deterministic collations only
 *	bytea, uuid, date, timestamp, timestamptz, bool: their bytes,
 *			  little-endian where numeric
 *
 * Any other type with a default hash operator class uses its extended hash
 * support function with seed 0; such filters record the type and are
 * marked not portable, since those functions may differ by architecture.
 *
 * Filters exchanged with Parquet (amq_to_parquet, amq_from_parquet) hash as
 * Parquet does instead: XXH64, seed 0, of the value's PLAIN encoding for the
 * column's physical type (amq_parquet.c).
 *
 * Each type's choices (its family, canonical hash, Parquet hash and column
 * width, collation rule) are one row of one table, AmqKeyTypes.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/date.h"
#include "utils/typcache.h"
#include "utils/uuid.h"

#include "amq_hashing.h"
#include "amq_parquet.h"

/* The canonical hash of a canonical byte form: XXH3-64, seed 0. */
static inline uint64
hash_bytes64(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}

/* int2 keys: as an int64. */
static uint64
amq_hash_int2(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetInt16(d));
}

/* int4 keys: as an int64. */
static uint64
amq_hash_int4(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetInt32(d));
}

/* int8 keys: the integer family's hash. */
static uint64
amq_hash_int8(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetInt64(d));
}

/* The float family's hash: a float8's bits, -0 and every NaN folded. */
static inline uint64
hash_float(double v)
{
	uint64		bits;

	if (isnan(v))
		bits = UINT64CONST(0x7ff8000000000000);
	else
	{
		if (v == 0.0)
			v = 0.0;			/* fold -0 */
		memcpy(&bits, &v, 8);
	}
	return AmqHashInt64((int64) bits);
}

/* float4 keys: widened to float8, which is exact. */
static uint64
amq_hash_float4(Datum d, AmqKeyHasher *h)
{
	return hash_float((double) DatumGetFloat4(d));
}

/* float8 keys: the float family's hash. */
static uint64
amq_hash_float8(Datum d, AmqKeyHasher *h)
{
	return hash_float(DatumGetFloat8(d));
}

/* numeric keys: the normalized decimal text. */
static uint64
amq_hash_numeric(Datum d, AmqKeyHasher *h)
{
	char	   *s = numeric_normalize(DatumGetNumeric(d));
	uint64		r = hash_bytes64(s, strlen(s));

	pfree(s);
	return r;
}

/* text, varchar and bytea keys: their bytes. */
static uint64
amq_hash_varlena(Datum d, AmqKeyHasher *h)
{
	struct varlena *v = PG_DETOAST_DATUM_PACKED(d);
	uint64		r = hash_bytes64(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));

	if ((Pointer) v != DatumGetPointer(d))
		pfree(v);
	return r;
}

/* bpchar keys: their bytes without trailing spaces, as its "=" has it. */
static uint64
amq_hash_bpchar(Datum d, AmqKeyHasher *h)
{
	struct varlena *v = PG_DETOAST_DATUM_PACKED(d);
	uint64		r;

	r = hash_bytes64(VARDATA_ANY(v),
					 bpchartruelen(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v)));
	if ((Pointer) v != DatumGetPointer(d))
		pfree(v);
	return r;
}

/* name keys: the bytes up to the terminating NUL. */
static uint64
amq_hash_name(Datum d, AmqKeyHasher *h)
{
	const char *s = NameStr(*DatumGetName(d));

	return hash_bytes64(s, strlen(s));
}

/* uuid keys: the 16 bytes. */
static uint64
amq_hash_uuid(Datum d, AmqKeyHasher *h)
{
	return hash_bytes64(DatumGetUUIDP(d)->data, UUID_LEN);
}

/* date keys: the day number as an int64. */
static uint64
amq_hash_date(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetDateADT(d));
}

/* timestamp and timestamptz keys: the microseconds as an int64. */
static uint64
amq_hash_timestamp(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetInt64(d));
}

/* bool keys: one byte, 0 or 1. */
static uint64
amq_hash_bool(Datum d, AmqKeyHasher *h)
{
	uint8		b = DatumGetBool(d) ? 1 : 0;

	return hash_bytes64(&b, 1);
}

/* Keys of any other type: its extended hash function, seed 0. */
static uint64
amq_hash_other(Datum d, AmqKeyHasher *h)
{
	return DatumGetUInt64(FunctionCall2Coll(&h->ext_hash, h->collation, d,
											Int64GetDatum(0)));
}

/* An ERROR for a nondeterministic collation: equal values, other bytes. */
static void
check_collation(Oid collation)
{
	if (OidIsValid(collation) && !get_collation_isdeterministic(collation))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("amqfilter keys cannot use nondeterministic collation \"%s\"",
						get_collation_name(collation)),
				 errdetail("Values equal under a nondeterministic collation have different bytes, so their hashes would differ."),
				 errhint("Apply a deterministic collation to the key, for example COLLATE \"C\", or normalize it (lower(), normalize()) first.")));
}

/*
 * The key types hashed by family, one row each: the key family, the
 * canonical hash, Parquet's hash (amq_parquet.c) and the width of its
 * column, and whether keys need a deterministic collation.  The one list of
 * them: AmqHasherInit, the Parquet hashers and their type check, and the
 * planner's question whether a type can be hashed all read it.  Parquet's
 * error hint lists the Parquet types in this order.
 */
const AmqKeyType AmqKeyTypes[] = {
	{INT2OID, "int2", AMQ_FAMILY_INT, amq_hash_int2,
	AmqParquetHashInt, NULL, 4, false},
	{INT4OID, "int4", AMQ_FAMILY_INT, amq_hash_int4,
	AmqParquetHashInt, NULL, 4, false},
	{INT8OID, "int8", AMQ_FAMILY_INT, amq_hash_int8,
	AmqParquetHashInt, NULL, 8, false},
	{FLOAT4OID, "float4", AMQ_FAMILY_FLOAT, amq_hash_float4,
	AmqParquetHashFloat, AmqParquetFloatAlternates, 4, false},
	{FLOAT8OID, "float8", AMQ_FAMILY_FLOAT, amq_hash_float8,
	AmqParquetHashFloat, AmqParquetFloatAlternates, 8, false},
	{NUMERICOID, "numeric", AMQ_FAMILY_NUMERIC, amq_hash_numeric,
	NULL, NULL, 0, false},
	{TEXTOID, "text", AMQ_FAMILY_TEXT, amq_hash_varlena,
	AmqParquetHashVarlena, NULL, 0, true},
	{VARCHAROID, "varchar", AMQ_FAMILY_TEXT, amq_hash_varlena,
	AmqParquetHashVarlena, NULL, 0, true},
	{BPCHAROID, "bpchar", AMQ_FAMILY_TEXT, amq_hash_bpchar,
	AmqParquetHashVarlena, NULL, 0, true},
	{NAMEOID, "name", AMQ_FAMILY_TEXT, amq_hash_name,
	AmqParquetHashName, NULL, 0, true},
	{BYTEAOID, "bytea", AMQ_FAMILY_BYTEA, amq_hash_varlena,
	AmqParquetHashVarlena, NULL, 0, false},
	{UUIDOID, "uuid", AMQ_FAMILY_UUID, amq_hash_uuid,
	AmqParquetHashUuid, NULL, 0, false},
	{DATEOID, "date", AMQ_FAMILY_DATE, amq_hash_date,
	AmqParquetHashDate, NULL, 0, false},
	{TIMESTAMPOID, "timestamp", AMQ_FAMILY_TIMESTAMP, amq_hash_timestamp,
	AmqParquetHashTimestamp, NULL, 0, false},
	{TIMESTAMPTZOID, "timestamptz", AMQ_FAMILY_TIMESTAMPTZ, amq_hash_timestamp,
	AmqParquetHashTimestamp, NULL, 0, false},
	{BOOLOID, "bool", AMQ_FAMILY_BOOL, amq_hash_bool,
	NULL, NULL, 0, false},
};

const int	AmqNumKeyTypes = lengthof(AmqKeyTypes);

/* The row of basetype in the table of key types; NULL: hashed as "other". */
const AmqKeyType *
AmqKeyTypeOf(Oid basetype)
{
	for (int i = 0; i < lengthof(AmqKeyTypes); i++)
		if (AmqKeyTypes[i].type == basetype)
			return &AmqKeyTypes[i];
	return NULL;
}

/*
 * Can the values of typid be hashed under collation without an error?
 * (What AmqHasherInit would refuse: a nondeterministic collation on text,
 * a type without an extended hash function.)
 */
bool
AmqTypeHashable(Oid typid, Oid collation)
{
	Oid			base = getBaseType(typid);
	const AmqKeyType *t = AmqKeyTypeOf(base);
	TypeCacheEntry *tce;

	if (t != NULL)
		return !t->deterministic || !OidIsValid(collation) ||
			get_collation_isdeterministic(collation);
	tce = lookup_type_cache(base, TYPECACHE_HASH_EXTENDED_PROC);
	return OidIsValid(tce->hash_extended_proc);
}

/*
 * Set up h to hash values of typid.  mcxt holds the extended hash function's
 * FmgrInfo for "other" types.
 */
void
AmqHasherInit(AmqKeyHasher *h, Oid typid, Oid collation, MemoryContext mcxt)
{
	Oid			base;
	const AmqKeyType *t;

	if (!OidIsValid(typid))
		elog(ERROR, "could not determine the key type of an amqfilter argument");

	memset(h, 0, sizeof(*h));
	base = getBaseType(typid);
	h->typid = typid;
	h->basetype = base;
	h->collation = collation;
	h->scheme = AMQ_HASH_XXH3;
	if (base == INT8OID || base == INT4OID)
		h->fast_type = base;

	t = AmqKeyTypeOf(base);
	if (t != NULL)
	{
		if (t->deterministic)
			check_collation(collation);
		h->family = t->family;
		h->hash = t->hash;
	}
	else
	{
		TypeCacheEntry *tce;

		tce = lookup_type_cache(base, TYPECACHE_HASH_EXTENDED_PROC);
		if (!OidIsValid(tce->hash_extended_proc))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("type %s cannot be a key of an amqfilter",
							format_type_be(typid)),
					 errdetail("A key type needs a default hash operator class with an extended hash function.")));
		fmgr_info_cxt(tce->hash_extended_proc, &h->ext_hash, mcxt);
		h->family = AMQ_FAMILY_OTHER;
		h->scheme = AMQ_HASH_TYPE;
		h->key_type = base;
		h->hash = amq_hash_other;
	}
}

/*
 * The hasher that filter f needs (f may be NULL: canonical): Parquet
 * filters hash keys as Parquet does, for the width of their column.
 */
AmqKeyHasher *
AmqHasherFor(AmqHashers *hs, const AmqFilter *f)
{
	if (likely(f == NULL || f->hash_scheme != AMQ_HASH_PARQUET))
		return &hs->canon;
	if (!hs->have_parquet || hs->parquet_width != f->key_type)
	{
		hs->parquet = hs->canon;
		AmqHasherSetParquet(&hs->parquet,
							(hs->canon.family == AMQ_FAMILY_INT ||
							 hs->canon.family == AMQ_FAMILY_FLOAT) ? f->key_type : 0);
		hs->have_parquet = true;
		hs->parquet_width = f->key_type;
	}
	return &hs->parquet;
}

/* A key family's name for messages (the type's name for family other). */
const char *
AmqFamilyName(int family, uint32 key_type)
{
	switch (family)
	{
		case AMQ_FAMILY_NONE:
			return "none";
		case AMQ_FAMILY_INT:
			return "integer (int2, int4, int8)";
		case AMQ_FAMILY_FLOAT:
			return "float (float4, float8)";
		case AMQ_FAMILY_NUMERIC:
			return "numeric";
		case AMQ_FAMILY_TEXT:
			return "text (text, varchar, name, bpchar)";
		case AMQ_FAMILY_BYTEA:
			return "bytea";
		case AMQ_FAMILY_UUID:
			return "uuid";
		case AMQ_FAMILY_DATE:
			return "date";
		case AMQ_FAMILY_TIMESTAMP:
			return "timestamp";
		case AMQ_FAMILY_TIMESTAMPTZ:
			return "timestamptz";
		case AMQ_FAMILY_BOOL:
			return "boolean";
		case AMQ_FAMILY_OTHER:
			return psprintf("type %s", format_type_be(key_type));
	}
	return "unknown";
}

/*
 * A filter answers only for keys of the family it holds: a probe of another
 * family is an error, never a silent "false".  An empty filter (family none)
 * answers false for every key.
 */
void
AmqCheckFamily(const AmqFilter *f, const AmqKeyHasher *h)
{
	if (f->key_family == AMQ_FAMILY_NONE)
		return;
	if (f->key_family != h->family ||
		((h->family == AMQ_FAMILY_OTHER || f->hash_scheme == AMQ_HASH_PARQUET) &&
		 f->key_type != h->key_type))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("amqfilter holds keys of family %s, not %s",
						AmqFamilyName(f->key_family, f->key_type),
						format_type_be(h->typid)),
				 errhint("Probe with a value of the family the filter was built from, casting it if needed.")));
}
