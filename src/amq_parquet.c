/*-------------------------------------------------------------------------
 *
 * amq_parquet.c
 *	  Parquet split block filters in the SQL layer: amq_to_parquet and
 *	  amq_from_parquet, the Parquet geometry of a blocked filter, and
 *	  Parquet's hashing of SQL values.
 *
 * A Parquet filter is a blocked filter (kind_blocked.c) whose keys are
 * hashed as Parquet hashes them, so a filter built here probes a Parquet
 * file's column chunk and one read from a file probes SQL values.
 *
 * Parquet lives in two files, one per layer.  What reads untrusted bytes
 * (the Thrift BloomFilterHeader, the bitset's checks, the filter a bitset
 * describes) is pure C, in core_parquet.c, so the unit tests and a
 * libFuzzer harness run it without a server.  What needs PostgreSQL (SQL
 * functions, ereports, the values of SQL types) is here.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "common/int.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#include "amqfilter.h"

PG_FUNCTION_INFO_V1(amq_to_parquet);
PG_FUNCTION_INFO_V1(amq_from_parquet);

/* amq_to_parquet(f): the bitset of a Parquet split block filter. */
Datum
amq_to_parquet(PG_FUNCTION_ARGS)
{
	AmqFilter	f;
	bytea	   *result;

	AmqFilterGetArg(fcinfo, 0, &f, false);
	if (f.kind != AMQ_KIND_BLOCKED || f.hash_scheme != AMQ_HASH_PARQUET)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("amqfilter of kind %s is not a Parquet split block filter",
						AmqKindOpsOf(&f)->name),
				 errdetail("Parquet hashes values with XXH64 of their Parquet encoding, so a filter built with other hashes cannot be converted."),
				 errhint("Build the filter with kind 'parquet', for example amq_agg(col, 0.01, 'parquet').")));
	result = (bytea *) palloc(VARHDRSZ + f.payload_len);
	SET_VARSIZE(result, VARHDRSZ + f.payload_len);
	memcpy(VARDATA(result), f.payload, f.payload_len);
	PG_RETURN_BYTEA_P(result);
}

/*
 * amq_from_parquet(bytes, column_type): a Parquet split block filter from
 * its bitset, or from the whole filter as a Parquet file stores it (its
 * BloomFilterHeader, then the bitset; see amq_parquet_input for how the two
 * are told apart).  column_type, the SQL type of the column it was written
 * for, fixes the Parquet physical type; NULL leaves it to each probe's key
 * type.
 */
Datum
amq_from_parquet(PG_FUNCTION_ARGS)
{
	bytea	   *bytes;
	Size		len;
	AmqParquetInput in;
	AmqStatus	st;
	AmqFilter	f;
	struct varlena *v;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	bytes = PG_GETARG_BYTEA_PP(0);
	len = VARSIZE_ANY_EXHDR(bytes);

	st = amq_parquet_input((const uint8 *) VARDATA_ANY(bytes), len, &in);
	if (st == AMQ_ERR_UNSUPPORTED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("unsupported Parquet bloom filter"),
				 errdetail("%s", in.detail),
				 errhint("amq_from_parquet reads split block filters (BLOCK) hashed with XXH64 (XXHASH) and stored UNCOMPRESSED, the one kind the Parquet format defines.")));
	if (st != AMQ_OK && !in.header_like)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid Parquet split block filter bitset of %zu bytes", len),
				 errdetail("%s", in.detail)));
	if (st != AMQ_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("invalid Parquet bloom filter header"),
				 errdetail("%s", in.detail),
				 errhint("Pass the bitset alone, or the whole bloom filter as the Parquet file stores it: the BloomFilterHeader and the numBytes bytes of bitset that follow it.")));

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_BLOCKED;
	f.payload_len = in.bitset_len;
	if (!PG_ARGISNULL(1))
	{
		Oid			typid = PG_GETARG_OID(1);
		AmqKeyHasher h;

		/*
		 * Before the hasher, whose error for a type without a hash function
		 * would not name the types a Parquet column can have.
		 */
		AmqCheckParquetType(typid);
		AmqHasherInit(&h, typid, InvalidOid, CurrentMemoryContext);
		AmqHasherSetParquet(&h, 0);
		f.key_family = h.family;
		f.key_type = h.key_type;
	}
	v = AmqFilterAlloc(&f);
	memcpy(f.payload, in.bitset, in.bitset_len);
	/* geometry from the length, rate and key count from the bits */
	amq_parquet_describe(&f);
	return AmqFilterFinish(v, &f);
}

/*
 * Make f a Parquet split block filter: the blocked geometry planned for it,
 * with the number of blocks rounded up to a power of two, and Parquet's
 * hashing.  The Parquet format allows any number of blocks, but Arrow's
 * reader (and those sharing its code) takes only powers of two from 32
 * bytes to 128 MB, as every writer makes them.
 */
void
AmqPlanParquet(AmqFilter *f)
{
	uint64		nblocks = 1;

	Assert(f->kind == AMQ_KIND_BLOCKED);
	while (nblocks < f->param[0])
		nblocks <<= 1;
	if (nblocks * 32 > AMQ_PARQUET_MAX_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("Parquet amqfilter of " UINT64_FORMAT " bytes is too large",
						nblocks * 32),
				 errdetail("Parquet readers take split block filters of at most 128 MB."),
				 errhint("Use a larger false-positive rate or fewer keys per filter, for example one per row group.")));
	f->param[0] = nblocks;
	f->payload_len = nblocks * 32;
	f->hash_scheme = AMQ_HASH_PARQUET;
}

/* The Parquet physical type of a Parquet filter's keys. */
const char *
AmqParquetTypeName(const AmqFilter *f)
{
	switch (f->key_family)
	{
		case AMQ_FAMILY_INT:
			return f->key_type == 4 ? "INT32" : "INT64";
		case AMQ_FAMILY_FLOAT:
			return f->key_type == 4 ? "FLOAT" : "DOUBLE";
		case AMQ_FAMILY_TEXT:
		case AMQ_FAMILY_BYTEA:
			return "BYTE_ARRAY";
		case AMQ_FAMILY_UUID:
			return "FIXED_LEN_BYTE_ARRAY";
		case AMQ_FAMILY_DATE:
			return "INT32";
		case AMQ_FAMILY_TIMESTAMP:
		case AMQ_FAMILY_TIMESTAMPTZ:
			return "INT64";
		default:
			return "as probed";
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
 * so is never found.  Which hasher and width each type has is a column of
 * the table of key types in amq_hashing.c.
 */
static inline uint64
pq_hash(const void *p, size_t len)
{
	return XXH64(p, len, 0);
}

/* Parquet's hash of an integer in a column of the given width (4 or 8). */
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

/* An integer key of h's type as an int64. */
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

/* Parquet hasher of int2, int4 and int8 keys: INT32 or INT64. */
uint64
AmqParquetHashInt(Datum d, AmqKeyHasher *h)
{
	return pq_hash_int_value(pq_int_datum(h, d), h->key_type);
}

/* A float key of h's type as a float8. */
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

/* Parquet hasher of float4 and float8 keys: FLOAT or DOUBLE. */
uint64
AmqParquetHashFloat(Datum d, AmqKeyHasher *h)
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
int
AmqParquetFloatAlternates(Datum d, const AmqKeyHasher *h, uint64 *alts)
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

/* Parquet hasher of text, varchar, bpchar and bytea keys: BYTE_ARRAY. */
uint64
AmqParquetHashVarlena(Datum d, AmqKeyHasher *h)
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

/* Parquet hasher of name keys: BYTE_ARRAY. */
uint64
AmqParquetHashName(Datum d, AmqKeyHasher *h)
{
	const char *s = NameStr(*DatumGetName(d));

	return pq_hash(s, strlen(s));
}

/* Parquet hasher of uuid keys: FIXED_LEN_BYTE_ARRAY(16). */
uint64
AmqParquetHashUuid(Datum d, AmqKeyHasher *h)
{
	return pq_hash(DatumGetUUIDP(d)->data, UUID_LEN);
}

/* Parquet hasher of date keys: INT32 days since 1970-01-01. */
uint64
AmqParquetHashDate(Datum d, AmqKeyHasher *h)
{
	/* days 1970-01-01 .. 2000-01-01; infinities fall outside INT32 */
	return pq_hash_int_value((int64) DatumGetDateADT(d) +
							 (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE), 4);
}

/* Parquet hasher of timestamp(tz) keys: INT64 microseconds since 1970. */
uint64
AmqParquetHashTimestamp(Datum d, AmqKeyHasher *h)
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
 * The Parquet key type of typid, whose base type (typid, or the type a
 * domain is over) is base, or an ERROR naming the types there are.
 */
static const AmqKeyType *
pq_key_type(Oid typid, Oid base)
{
	const AmqKeyType *t = AmqKeyTypeOf(base);
	StringInfoData names;

	if (t != NULL && t->pq_hash != NULL)
		return t;

	initStringInfo(&names);
	for (int i = 0; i < AmqNumKeyTypes; i++)
		if (AmqKeyTypes[i].pq_hash != NULL)
			appendStringInfo(&names, "%s%s", names.len > 0 ? ", " : "",
							 AmqKeyTypes[i].name);
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
	const AmqKeyType *t = pq_key_type(h->typid, h->basetype);

	if (t->pq_width == 0 && width != 0)
		elog(ERROR, "Parquet width %u given for a key type without one", width);
	h->hash = t->pq_hash;
	h->alternates = t->pq_alternates;
	h->key_type = t->pq_width ? (width ? width : t->pq_width) : 0;
	h->scheme = AMQ_HASH_PARQUET;
	h->fast_type = InvalidOid;
}
