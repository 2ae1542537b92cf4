/*-------------------------------------------------------------------------
 *
 * amq_hashing.h
 *	  Canonical 64-bit hashes of SQL values (see amq_hashing.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef AMQ_HASHING_H
#define AMQ_HASHING_H

#include "compat.h"

#include "catalog/pg_type.h"
#include "fmgr.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core.h"

struct AmqKeyHasher;
typedef uint64 (*AmqHashFn) (Datum value, struct AmqKeyHasher *h);

/* a key's other hashes, at most AMQ_MAX_ALT_HASHES (see AmqAltHashes) */
#define AMQ_MAX_ALT_HASHES	2
typedef int (*AmqAltHashFn) (Datum value, const struct AmqKeyHasher *h,
							 uint64 *alts);

/* How to hash the values of one SQL type; set up once per call site. */
typedef struct AmqKeyHasher
{
	Oid			typid;			/* the type as given */
	Oid			basetype;		/* domains resolved */
	Oid			collation;
	uint8		family;			/* AmqKeyFamily */
	uint8		scheme;			/* AmqHashScheme */
	uint32		key_type;		/* basetype for AMQ_FAMILY_OTHER; Parquet
								 * width of integers and floats; else 0 */
	Oid			fast_type;		/* INT8OID or INT4OID: hashed inline */
	AmqHashFn	hash;
	AmqAltHashFn alternates;	/* NULL: a key has its hash alone */
	FmgrInfo	ext_hash;		/* AMQ_FAMILY_OTHER: extended hash proc */
} AmqKeyHasher;

/*
 * A call site's hashers for one key type: the canonical one, and a Parquet
 * one for the column width a Parquet filter last asked for.
 */
typedef struct AmqHashers
{
	AmqKeyHasher canon;
	AmqKeyHasher parquet;
	bool		have_parquet;
	uint32		parquet_width;
} AmqHashers;

/*
 * How the values of one SQL type are hashed: a row of the one table of key
 * types (amq_hashing.c).  A type not in it is hashed by its extended hash
 * function (family "other") and has no Parquet physical type.
 */
typedef struct AmqKeyType
{
	Oid			type;
	const char *name;			/* as error hints name it */
	uint8		family;			/* AmqKeyFamily */
	AmqHashFn	hash;			/* the canonical hash */
	AmqHashFn	pq_hash;		/* Parquet's; NULL: no Parquet physical type */
	AmqAltHashFn pq_alternates; /* see AmqAltHashes */
	uint32		pq_width;		/* the Parquet column's width (INT32 or INT64,
								 * FLOAT or DOUBLE) of integers and floats;
								 * else 0 */
	bool		deterministic;	/* keys need a deterministic collation */
} AmqKeyType;

extern const AmqKeyType AmqKeyTypes[];
extern const int AmqNumKeyTypes;

extern const AmqKeyType *AmqKeyTypeOf(Oid basetype);
extern bool AmqTypeHashable(Oid typid, Oid collation);
extern void AmqHasherInit(AmqKeyHasher *h, Oid typid, Oid collation,
						  MemoryContext mcxt);
extern AmqKeyHasher *AmqHasherFor(AmqHashers *hs, const AmqFilter *f);
extern const char *AmqFamilyName(int family, uint32 key_type);
extern void AmqCheckFamily(const AmqFilter *f, const AmqKeyHasher *h);

/* The integer family's canonical hash, inline for the probe hot path. */
static inline uint64
AmqHashInt64(int64 v)
{
	uint8		buf[8];

	amq_store64(buf, (uint64) v);
	return XXH3_64bits(buf, 8);
}

static inline uint64
AmqHashDatum(AmqKeyHasher *h, Datum value)
{
	/* the common key types without an indirect call */
	if (h->fast_type == INT8OID)
		return AmqHashInt64(DatumGetInt64(value));
	if (h->fast_type == INT4OID)
		return AmqHashInt64(DatumGetInt32(value));
	return h->hash(value, h);
}

/*
 * The hashes other than AmqHashDatum's under which a filter may hold a
 * value equal to the key (under the type's "="), into
 * alts[AMQ_MAX_ALT_HASHES]; returns how many.  A probe that misses the key's
 * own hash tries these.  Only Parquet's float hashing has any: it hashes a
 * float's bits, and SQL's one zero and one NaN have several (see
 * amq_hashing.c).  Every other hasher returns 0 without a call.
 */
static inline int
AmqAltHashes(const AmqKeyHasher *h, Datum value, uint64 *alts)
{
	if (likely(h->alternates == NULL))
		return 0;
	return h->alternates(value, h, alts);
}

#endif							/* AMQ_HASHING_H */
