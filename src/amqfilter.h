/*-------------------------------------------------------------------------
 *
 * amqfilter.h
 *	  The amqfilter SQL type: a varlena holding one serialized filter
 *	  (header and payload, see core.h), and the helpers the SQL functions
 *	  share.  The type's I/O is in amqfilter.c; the helpers, the SQL
 *	  layer's bridge to the filter core, are in amq_bridge.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef AMQFILTER_H
#define AMQFILTER_H

#include "compat.h"

#include "fmgr.h"

#include "core.h"
#include "amq_hashing.h"
#include "amq_parquet.h"

/* bytes of a varlena holding a filter with this payload */
#define AMQ_VARSIZE(payload_len)	(VARHDRSZ + AMQ_HEADER_SIZE + (Size) (payload_len))

/* allocations from twice this size up ask for transparent huge pages */
#define AMQ_HUGE_PAGE_BYTES		((Size) 2 * 1024 * 1024)

extern void *AmqAllocBig(MemoryContext mcxt, Size bytes, int flags);
extern Size AmqShmFreeBytes(void);
extern void AmqAdviseBig(void *p, Size bytes);
extern struct varlena *AmqFilterAlloc(AmqFilter *f);
extern Datum AmqFilterFinish(struct varlena *v, AmqFilter *f);
pg_noreturn extern void AmqFilterParseError(AmqStatus st, const uint8 *bytes,
											Size len, int errcode_malformed);
extern uint8 *AmqBase64Input(const char *str, const char *typname, size_t *n);
extern struct varlena *AmqFilterFromBytes(const uint8 *bytes, Size len,
										  int errcode_malformed);
extern struct varlena *AmqFilterCopyBytes(const uint8 *bytes, Size len);
extern void AmqFilterDecode(struct varlena *v, AmqFilter *f);
extern struct varlena *AmqFilterGetArg(FunctionCallInfo fcinfo, int argno,
									   AmqFilter *f, bool copy);

extern const AmqKindOps *AmqKindOpsByName(const char *name);
extern const AmqKindOps *AmqKindOpsOf(const AmqFilter *f);
extern const char *AmqFilterKindName(const AmqFilter *f);
extern void AmqPlanOrError(AmqFilter *f, int kind, int64 capacity, double fpr,
						   uint32 flags);

/*
 * The plan flags of a filter built from a set of keys, with the capacity
 * the caller asked for (0: none).  Without one, the keys are all there
 * will be, and a scalable filter gives its first stage most of the rate.
 */
static inline uint32
AmqBuildPlanFlags(int kind, int64 capacity)
{
	return capacity == 0 && kind == AMQ_KIND_SCALABLE ?
		AMQ_FLAG_SCALABLE_SIZED : 0;
}
extern const char *AmqSizeString(double bytes);
extern void AmqCheckFpr(double fpr);
extern void AmqSetFamily(AmqFilter *f, const AmqKeyHasher *h);
extern void AmqMergeFamily(AmqFilter *dst, const AmqFilter *src);
extern const AmqKindOps *AmqResolveKind(const char *name, bool keyset,
										double fpr, bool *parquet);
extern void AmqAddHash(struct varlena **v, AmqFilter *f,
					   const AmqKindOps *ops, uint64 hash);
extern void AmqRemoveHash(AmqFilter *f, const AmqKindOps *ops, uint64 hash);
extern Datum AmqBuildFromHashes(int kind, double fpr, const AmqFilter *keyinfo,
								const uint64 *hashes, Size n, uint64 min_capacity);
extern bool AmqBuildTakesRuns(int kind);
extern Datum AmqBuildFromRuns(int kind, double fpr, const AmqFilter *keyinfo,
							  const uint64 *const *runs, const Size *lens,
							  int nruns, uint64 min_capacity);
extern void AmqMergeOrError(AmqFilter *f, const AmqFilter *g, AmqMergeOp op);
extern void AmqRequireCap(const AmqKindOps *ops, uint32 cap, const char *what);

#endif							/* AMQFILTER_H */
