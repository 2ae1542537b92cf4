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

#endif							/* AMQ_PARQUET_H */
