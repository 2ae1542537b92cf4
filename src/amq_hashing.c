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
 * column's physical type (see AmqHasherSetParquet).
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/int.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/date.h"
#include "utils/typcache.h"
#include "utils/uuid.h"

#include "amq_hashing.h"

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
 * Parquet hashing.  The physical types and their PLAIN encodings:
 *
 *	int2, int4, date		INT32, 4 bytes little-endian (date as days since
 *							1970-01-01)
 *	int8					INT64, 8 bytes little-endian
 *	timestamp, timestamptz	INT64 microseconds since 1970-01-01 00:00 UTC
 *							(Parquet TIMESTAMP(MICROS))
 *	float4 / float8			FLOAT / DOUBLE, IEEE 754 little-endian
 *	text, varchar, name, bpchar, bytea	BYTE_ARRAY, the bytes alone
 *	uuid					FIXED_LEN_BYTE_ARRAY(16), the 16 bytes
 *
 * An integer or float column is INT32 or INT64 (FLOAT or DOUBLE) whatever
 * the type of the value probed, so the hasher takes the column's width: a
 * value that the column's type cannot hold is hashed in the wider form and
 * so is never found.
 */
static inline uint64
pq_hash(const void *p, size_t len)
{
	return XXH64(p, len, 0);
}

static uint64
pq_hash_int_value(int64 v, uint32 width)
{
	uint8		buf[8];

	if (width == 4 && v >= PG_INT32_MIN && v <= PG_INT32_MAX)
	{
		amq_store32(buf, (uint32) (int32) v);
		return pq_hash(buf, 4);
	}
	amq_store64(buf, (uint64) v);
	return pq_hash(buf, 8);
}

static int64
pq_int_datum(const AmqKeyHasher *h, Datum d)
{
	switch (h->basetype)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

static uint64
pq_hash_int(Datum d, AmqKeyHasher *h)
{
	return pq_hash_int_value(pq_int_datum(h, d), h->key_type);
}

static double
pq_float_datum(const AmqKeyHasher *h, Datum d)
{
	return h->basetype == FLOAT4OID ? (double) DatumGetFloat4(d) : DatumGetFloat8(d);
}

/*
 * The PLAIN bytes of float key d in a column of h's width (4: FLOAT, 8:
 * DOUBLE) into buf; returns their length.  A float4 key in a FLOAT column
 * is its own 4 bytes, bit for bit (a signaling NaN stays signaling).  A
 * float8 key that a FLOAT column cannot hold exactly keeps its 8 bytes,
 * and so is never found in one.
 */
static int
pq_float_encode(const AmqKeyHasher *h, Datum d, uint8 *buf)
{
	double		v;
	uint64		bits;

	if (h->key_type == 4)
	{
		float		f = h->basetype == FLOAT4OID ? DatumGetFloat4(d) :
			(float) DatumGetFloat8(d);
		uint32		fbits;

		if (h->basetype == FLOAT4OID || (double) f == DatumGetFloat8(d) ||
			isnan(f))
		{
			memcpy(&fbits, &f, 4);
			amq_store32(buf, fbits);
			return 4;
		}
	}
	v = pq_float_datum(h, d);
	memcpy(&bits, &v, 8);
	amq_store64(buf, bits);
	return 8;
}

static uint64
pq_hash_float(Datum d, AmqKeyHasher *h)
{
	uint8		buf[8];
	int			len = pq_float_encode(h, d, buf);

	return pq_hash(buf, len);
}

/*
 * Parquet hashes a float's bits, so values that are one value to SQL's "="
 * are several to it, and a filter holds the one a writer was given:
 *
 *	zero	0 and -0: a probe of either tries the other;
 *	NaN		one NaN to SQL, 2^24 (FLOAT) or 2^53 (DOUBLE) bit patterns to
 *			Parquet.  A probe tries its own bits (its hash proper) and the
 *			quiet NaNs writers produce: the canonical one of Java's
 *			floatToIntBits / doubleToLongBits and C's NAN, and its negation,
 *			x86's default NaN (0/0, inf - inf).  A NaN of another payload is
 *			found only by a probe of the same bits.
 *
 * Every other float has one encoding: no alternates, and this function
 * returns after one test.
 */
static int
pq_float_alternates(Datum d, const AmqKeyHasher *h, uint64 *alts)
{
	static const uint32 quiet_nan4[2] = {0x7fc00000, 0xffc00000};
	static const uint64 quiet_nan8[2] = {
		UINT64CONST(0x7ff8000000000000), UINT64CONST(0xfff8000000000000)
	};
	double		v = pq_float_datum(h, d);
	uint8		own[8];
	int			len;
	int			n = 0;

	if (likely(v != 0.0 && !isnan(v)))
		return 0;
	len = pq_float_encode(h, d, own);
	if (v == 0.0)
	{
		/* the other zero: the sign bit is the top bit of the last byte */
		own[len - 1] ^= 0x80;
		alts[n++] = pq_hash(own, len);
		return n;
	}
	for (int i = 0; i < 2; i++)
	{
		uint8		buf[8];

		if (len == 4)
			amq_store32(buf, quiet_nan4[i]);
		else
			amq_store64(buf, quiet_nan8[i]);
		if (memcmp(buf, own, len) != 0)
			alts[n++] = pq_hash(buf, len);
	}
	return n;
}

static uint64
pq_hash_varlena(Datum d, AmqKeyHasher *h)
{
	struct varlena *v = PG_DETOAST_DATUM_PACKED(d);
	Size		len = VARSIZE_ANY_EXHDR(v);
	uint64		r;

	if (h->basetype == BPCHAROID)
		len = bpchartruelen(VARDATA_ANY(v), len);
	r = pq_hash(VARDATA_ANY(v), len);
	if ((Pointer) v != DatumGetPointer(d))
		pfree(v);
	return r;
}

static uint64
pq_hash_name(Datum d, AmqKeyHasher *h)
{
	const char *s = NameStr(*DatumGetName(d));

	return pq_hash(s, strlen(s));
}

static uint64
pq_hash_uuid(Datum d, AmqKeyHasher *h)
{
	return pq_hash(DatumGetUUIDP(d)->data, UUID_LEN);
}

static uint64
pq_hash_date(Datum d, AmqKeyHasher *h)
{
	/* days 1970-01-01 .. 2000-01-01; infinities fall outside INT32 */
	return pq_hash_int_value((int64) DatumGetDateADT(d) +
							 (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE), 4);
}

static uint64
pq_hash_timestamp(Datum d, AmqKeyHasher *h)
{
	int64		ts = DatumGetInt64(d);
	int64		unix_us;
	uint8		buf[9];

	if (pg_add_s64_overflow(ts, (int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) *
							USECS_PER_DAY, &unix_us))
	{
		/* +infinity: no Parquet value; 9 bytes match no INT64 */
		memset(buf, 0xff, sizeof(buf));
		return pq_hash(buf, sizeof(buf));
	}
	return pq_hash_int_value(unix_us, 8);
}

/*
 * The key types Parquet filters take: how each is hashed, and the width of
 * its column (INT32 or INT64, FLOAT or DOUBLE) for integers and floats.
 * The one list of them: hashing, the type check and its error's hint all
 * read it.
 */
typedef struct PqKeyType
{
	Oid			type;
	const char *name;			/* as the hint names it */
	AmqHashFn	hash;
	AmqAltHashFn alternates;
	uint32		width;			/* 0: not an integer or float */
} PqKeyType;

static const PqKeyType pq_key_types[] = {
	{INT2OID, "int2", pq_hash_int, NULL, 4},
	{INT4OID, "int4", pq_hash_int, NULL, 4},
	{INT8OID, "int8", pq_hash_int, NULL, 8},
	{FLOAT4OID, "float4", pq_hash_float, pq_float_alternates, 4},
	{FLOAT8OID, "float8", pq_hash_float, pq_float_alternates, 8},
	{TEXTOID, "text", pq_hash_varlena, NULL, 0},
	{VARCHAROID, "varchar", pq_hash_varlena, NULL, 0},
	{BPCHAROID, "bpchar", pq_hash_varlena, NULL, 0},
	{NAMEOID, "name", pq_hash_name, NULL, 0},
	{BYTEAOID, "bytea", pq_hash_varlena, NULL, 0},
	{UUIDOID, "uuid", pq_hash_uuid, NULL, 0},
	{DATEOID, "date", pq_hash_date, NULL, 0},
	{TIMESTAMPOID, "timestamp", pq_hash_timestamp, NULL, 0},
	{TIMESTAMPTZOID, "timestamptz", pq_hash_timestamp, NULL, 0},
};

/*
 * The Parquet key type of typid, whose base type (typid, or the type a
 * domain is over) is base, or an ERROR naming the types there are.
 */
static const PqKeyType *
pq_key_type(Oid typid, Oid base)
{
	StringInfoData names;

	for (int i = 0; i < lengthof(pq_key_types); i++)
		if (pq_key_types[i].type == base)
			return &pq_key_types[i];

	initStringInfo(&names);
	for (int i = 0; i < lengthof(pq_key_types); i++)
		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "", pq_key_types[i].name);
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("type %s has no Parquet physical type for amqfilter",
					format_type_be(typid)),
			 errhint("Accepted types: %s, and domains over them.", names.data)));
	return NULL;				/* keep compiler quiet */
}

/*
 * An ERROR, naming the types there are, unless typid (a column_type of
 * amq_from_parquet, say) is a type Parquet filters take.
 */
void
AmqCheckParquetType(Oid typid)
{
	(void) pq_key_type(typid, getBaseType(typid));
}

/*
 * Switch h to Parquet hashing for a column of the given width (4 or 8 for
 * integers and floats; 0: the width of h's own type).  An ERROR if h's type
 * has no Parquet physical type here.
 */
void
AmqHasherSetParquet(AmqKeyHasher *h, uint32 width)
{
	const PqKeyType *t = pq_key_type(h->typid, h->basetype);

	if (t->width == 0 && width != 0)
		elog(ERROR, "Parquet width %u given for a key type without one", width);
	h->hash = t->hash;
	h->alternates = t->alternates;
	h->key_type = t->width ? (width ? width : t->width) : 0;
	h->scheme = AMQ_HASH_PARQUET;
	h->fast_type = InvalidOid;
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
