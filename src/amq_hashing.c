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

static inline uint64
hash_bytes64(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}

static uint64
amq_hash_int2(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetInt16(d));
}

static uint64
amq_hash_int4(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetInt32(d));
}

static uint64
amq_hash_int8(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetInt64(d));
}

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

static uint64
amq_hash_float4(Datum d, AmqKeyHasher *h)
{
	return hash_float((double) DatumGetFloat4(d));
}

static uint64
amq_hash_float8(Datum d, AmqKeyHasher *h)
{
	return hash_float(DatumGetFloat8(d));
}

static uint64
amq_hash_numeric(Datum d, AmqKeyHasher *h)
{
	char	   *s = numeric_normalize(DatumGetNumeric(d));
	uint64		r = hash_bytes64(s, strlen(s));

	pfree(s);
	return r;
}

static uint64
amq_hash_varlena(Datum d, AmqKeyHasher *h)
{
	struct varlena *v = PG_DETOAST_DATUM_PACKED(d);
	uint64		r = hash_bytes64(VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));

	if ((Pointer) v != DatumGetPointer(d))
		pfree(v);
	return r;
}

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

static uint64
amq_hash_name(Datum d, AmqKeyHasher *h)
{
	const char *s = NameStr(*DatumGetName(d));

	return hash_bytes64(s, strlen(s));
}

static uint64
amq_hash_uuid(Datum d, AmqKeyHasher *h)
{
	return hash_bytes64(DatumGetUUIDP(d)->data, UUID_LEN);
}

static uint64
amq_hash_date(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetDateADT(d));
}

static uint64
amq_hash_timestamp(Datum d, AmqKeyHasher *h)
{
	return AmqHashInt64(DatumGetInt64(d));
}

static uint64
amq_hash_bool(Datum d, AmqKeyHasher *h)
{
	uint8		b = DatumGetBool(d) ? 1 : 0;

	return hash_bytes64(&b, 1);
}

static uint64
amq_hash_other(Datum d, AmqKeyHasher *h)
{
	return DatumGetUInt64(FunctionCall2Coll(&h->ext_hash, h->collation, d,
											Int64GetDatum(0)));
}

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
 * Set up h to hash values of typid.  mcxt holds the extended hash function's
 * FmgrInfo for "other" types.
 */
void
AmqHasherInit(AmqKeyHasher *h, Oid typid, Oid collation, MemoryContext mcxt)
{
	Oid			base;

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

	switch (base)
	{
		case INT2OID:
			h->family = AMQ_FAMILY_INT;
			h->hash = amq_hash_int2;
			break;
		case INT4OID:
			h->family = AMQ_FAMILY_INT;
			h->hash = amq_hash_int4;
			break;
		case INT8OID:
			h->family = AMQ_FAMILY_INT;
			h->hash = amq_hash_int8;
			break;
		case FLOAT4OID:
			h->family = AMQ_FAMILY_FLOAT;
			h->hash = amq_hash_float4;
			break;
		case FLOAT8OID:
			h->family = AMQ_FAMILY_FLOAT;
			h->hash = amq_hash_float8;
			break;
		case NUMERICOID:
			h->family = AMQ_FAMILY_NUMERIC;
			h->hash = amq_hash_numeric;
			break;
		case TEXTOID:
		case VARCHAROID:
			check_collation(collation);
			h->family = AMQ_FAMILY_TEXT;
			h->hash = amq_hash_varlena;
			break;
		case BPCHAROID:
			check_collation(collation);
			h->family = AMQ_FAMILY_TEXT;
			h->hash = amq_hash_bpchar;
			break;
		case NAMEOID:
			check_collation(collation);
			h->family = AMQ_FAMILY_TEXT;
			h->hash = amq_hash_name;
			break;
		case BYTEAOID:
			h->family = AMQ_FAMILY_BYTEA;
			h->hash = amq_hash_varlena;
			break;
		case UUIDOID:
			h->family = AMQ_FAMILY_UUID;
			h->hash = amq_hash_uuid;
			break;
		case DATEOID:
			h->family = AMQ_FAMILY_DATE;
			h->hash = amq_hash_date;
			break;
		case TIMESTAMPOID:
			h->family = AMQ_FAMILY_TIMESTAMP;
			h->hash = amq_hash_timestamp;
			break;
		case TIMESTAMPTZOID:
			h->family = AMQ_FAMILY_TIMESTAMPTZ;
			h->hash = amq_hash_timestamp;
			break;
		case BOOLOID:
			h->family = AMQ_FAMILY_BOOL;
			h->hash = amq_hash_bool;
			break;
		default:
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
			break;
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
