/*-------------------------------------------------------------------------
 *
 * amq_parquet.h
 *	  Parquet split block filters in the SQL layer (see amq_parquet.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef AMQ_PARQUET_H
#define AMQ_PARQUET_H

#include "amq_hashing.h"
#include "core.h"

/* the largest split block filter that Parquet readers take */
#define AMQ_PARQUET_MAX_BYTES		((uint64) 128 * 1024 * 1024)

extern void AmqPlanParquet(AmqFilter *f);
extern void AmqHasherSetParquet(AmqKeyHasher *h, uint32 width);
extern void AmqCheckParquetType(Oid typid);
extern const char *AmqParquetTypeName(const AmqFilter *f);

/* Parquet's hashers, the key types' Parquet column (amq_hashing.c) */
extern uint64 AmqParquetHashInt(Datum d, AmqKeyHasher *h);
extern uint64 AmqParquetHashFloat(Datum d, AmqKeyHasher *h);
extern int	AmqParquetFloatAlternates(Datum d, const AmqKeyHasher *h,
									  uint64 *alts);
extern uint64 AmqParquetHashVarlena(Datum d, AmqKeyHasher *h);
extern uint64 AmqParquetHashName(Datum d, AmqKeyHasher *h);
extern uint64 AmqParquetHashUuid(Datum d, AmqKeyHasher *h);
extern uint64 AmqParquetHashDate(Datum d, AmqKeyHasher *h);
extern uint64 AmqParquetHashTimestamp(Datum d, AmqKeyHasher *h);

#endif							/* AMQ_PARQUET_H */
