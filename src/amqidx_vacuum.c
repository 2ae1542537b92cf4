/*-------------------------------------------------------------------------
 *
 * amqidx_vacuum.c
 *	  VACUUM of an amq index: resealing ranges from the heap.
 *
 * The index stores no heap TIDs, so bulk delete has nothing to remove: a
 * deleted row's key stays in its range's filter as a false positive.  The
 * cleanup pass reseals every range that has dynamic segments (overflow of
 * a sealed range, or a range that grew by inserts), except the range at
 * the end of the heap, which is still growing: it builds the range's
 * sealed filters from the heap's rows, which also drops deleted keys.
 *
 * A reseal must not lose a key inserted while it reads the heap.  Before
 * reading, it appends an empty "marker" segment to every column, so that
 * inserts from then on go there; inserts whose rows the heap scan may not
 * see come later than the marker.  The new record keeps the segments from
 * the marker on (those that took keys) beside the new sealed filters.
 * Meanwhile the record is flagged AMQIDX_RANGE_RESEALING: an insert then
 * adds its key even when a filter before the marker answers true for it
 * (a deleted row's key, or a false positive), since the swap drops those
 * filters and the heap scan may have passed the new row's page.  A reseal
 * that fails midway leaves the flag: inserts add keys they could have
 * skipped until the next reseal clears it.
 * Inserts hold the directory page's share lock while they set bits, and
 * the swap takes it exclusively, so no insert is half done at the swap.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/table.h"
#include "catalog/index.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "amqfilter.h"
#include "amqidx.h"

/* ambulkdelete: nothing to remove; a deleted row's key is a false positive. */
IndexBulkDeleteResult *
amqidxbulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				 IndexBulkDeleteCallback callback, void *callback_state)
{
	if (stats == NULL)
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));
	return stats;
}

/* The metapage (exclusive), the range's directory page (exclusive) and its record. */
typedef struct AmqIdxLocked
{
	Buffer		metabuf;
	Buffer		dirbuf;
	AmqIdxMetaPage meta;
	AmqIdxAddr	entry;
} AmqIdxLocked;

/* Lock the metapage and range's directory page; false: no range record. */
static bool
lock_range(Relation index, uint32 range, AmqIdxLocked *lk)
{
	BlockNumber dirblk;

	lk->metabuf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(lk->metabuf, BUFFER_LOCK_EXCLUSIVE);
	lk->meta = AmqIdxCheckMetaPage(index, BufferGetPage(lk->metabuf));
	dirblk = lk->meta->dirpages[range / AMQIDX_DIR_PER_PAGE];
	lk->dirbuf = ReadBuffer(index, dirblk);
	LockBuffer(lk->dirbuf, BUFFER_LOCK_EXCLUSIVE);
	AmqIdxCheckPage(index, BufferGetPage(lk->dirbuf), dirblk, AMQIDX_PAGE_DIR);
	lk->entry = AmqIdxPageGetDir(BufferGetPage(lk->dirbuf))[range % AMQIDX_DIR_PER_PAGE];
	return lk->entry.blk != InvalidBlockNumber;
}

/* Release the locks of lock_range. */
static void
unlock_range(AmqIdxLocked *lk)
{
	UnlockReleaseBuffer(lk->dirbuf);
	UnlockReleaseBuffer(lk->metabuf);
}

/* Would a reseal help: has the range segments, or no sealed filter? */
static bool
needs_reseal(const AmqIdxRange *rg)
{
	if (!(rg->flags & AMQIDX_RANGE_SEALED))
		return true;
	for (int i = 0; i < rg->natts; i++)
		if (rg->nsegs[i] > 0)
			return true;
	return false;
}

/* Reseal one range; false if it did not need it (any more). */
static bool
reseal_range(Relation heap, Relation index, IndexInfo *indexInfo, uint32 range,
			 int ppr, AmqIdxHasher *hashers)
{
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	AmqIdxLocked lk;
	AmqIdxReader r;
	AmqIdxWriter w;
	AmqIdxRange rg;
	int			marker[INDEX_MAX_KEYS];
	uint64	   *hashes[INDEX_MAX_KEYS];
	Size		nhashes[INDEX_MAX_KEYS];
	struct varlena *sealed[INDEX_MAX_KEYS];
	uint64		sealed_keys = 0;
	uint64		sealed_ranges = 0;
	double		fpr;

	/* 1. markers: inserts from now on go to fresh segments */
	if (!lock_range(index, range, &lk))
	{
		unlock_range(&lk);
		return false;
	}
	AmqIdxReaderInit(&r, index);
	AmqIdxReadRange(&r, lk.entry, &rg);
	AmqIdxReaderRelease(&r);
	if (!needs_reseal(&rg))
	{
		unlock_range(&lk);
		return false;
	}
	fpr = AmqIdxEffectiveFpr(lk.meta->fpr_option, lk.meta->nranges);
	AmqIdxWriterInit(&w, index, true, lk.meta->stream_end, MAIN_FORKNUM);
	for (int i = 0; i < natts; i++)
	{
		marker[i] = rg.nsegs[i];
		AmqIdxAppendSegment(&w, &rg, i, 64, fpr, &hashers[i]);
	}
	rg.flags |= AMQIDX_RANGE_RESEALING;
	AmqIdxSwitchRecord(index, lk.metabuf, lk.dirbuf, &w, &rg, 0, 0);
	unlock_range(&lk);

	/* 2. the range's keys from the heap, and its sealed filters */
	AmqIdxCollectRange(heap, index, indexInfo, range, ppr, hashers, hashes, nhashes);
	for (int i = 0; i < natts; i++)
		sealed[i] = nhashes[i] > 0 ?
			AmqIdxBuildSealed(hashes[i], nhashes[i], fpr, &hashers[i]) : NULL;

	/* 3. the swap: sealed filters, and the segments from the marker on */
	if (!lock_range(index, range, &lk))
		elog(ERROR, "amq index range %u lost its record during a reseal", range);
	AmqIdxReaderInit(&r, index);
	AmqIdxReadRange(&r, lk.entry, &rg);
	AmqIdxWriterInit(&w, index, true, lk.meta->stream_end, MAIN_FORKNUM);
	for (int i = 0; i < natts; i++)
	{
		int			keep = 0;

		for (int s = marker[i]; s < rg.nsegs[i]; s++)
		{
			AmqIdxFilter f;

			AmqIdxReadFilter(&r, rg.segs[i][s].addr, &f);
			if (f.f.nkeys > 0)
				rg.segs[i][keep++] = rg.segs[i][s];
		}
		rg.nsegs[i] = keep;
		AmqIdxReaderRelease(&r);

		rg.sealed[i].addr.blk = InvalidBlockNumber;
		rg.sealed[i].addr.off = 0;
		rg.sealed[i].capacity = 0;
		if (sealed[i] != NULL)
		{
			AmqIdxSetSealed(&rg, i, AmqIdxAppend(&w, (uint8 *) VARDATA(sealed[i]),
												 VARSIZE(sealed[i]) - VARHDRSZ, false),
							sealed[i]);
			sealed_keys += rg.sealed[i].capacity;
			sealed_ranges++;
		}
	}
	rg.flags = (rg.flags & ~AMQIDX_RANGE_RESEALING) | AMQIDX_RANGE_SEALED;
	AmqIdxSwitchRecord(index, lk.metabuf, lk.dirbuf, &w, &rg, sealed_keys, sealed_ranges);
	unlock_range(&lk);
	return true;
}

/* amvacuumcleanup: reseal the ranges that inserts changed. */
IndexBulkDeleteResult *
amqidxvacuumcleanup(IndexVacuumInfo *info, IndexBulkDeleteResult *stats)
{
	Relation	index = info->index;
	Relation	heap;
	IndexInfo  *indexInfo;
	AmqIdxHasher hashers[INDEX_MAX_KEYS];
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	Buffer		buf;
	AmqIdxMetaPage meta;
	uint32		nranges;
	int			ppr;
	BlockNumber heap_nblocks;
	uint32		last;
	MemoryContext cxt;
	MemoryContext old;

	if (info->analyze_only)
		return stats;
	if (stats == NULL)
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));

	buf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	meta = AmqIdxCheckMetaPage(index, BufferGetPage(buf));
	nranges = meta->nranges;
	ppr = meta->pages_per_range;
	UnlockReleaseBuffer(buf);

	heap = table_open(IndexGetRelation(RelationGetRelid(index), false),
					  AccessShareLock);
	heap_nblocks = RelationGetNumberOfBlocks(heap);
	/* the range that holds the heap's last page grows on */
	last = heap_nblocks > 0 ? (heap_nblocks - 1) / ppr : 0;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "amq index reseal",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	indexInfo = BuildIndexInfo(index);
	for (int i = 0; i < natts; i++)
		AmqIdxHasherInit(&hashers[i], index, i,
						 TupleDescAttr(RelationGetDescr(index), i)->atttypid);
	MemoryContextSwitchTo(old);

	for (uint32 range = 0; range < nranges && range < last; range++)
	{
		MemoryContext rcxt = AllocSetContextCreate(cxt, "amq index reseal range",
												   ALLOCSET_DEFAULT_SIZES);

		AMQ_VACUUM_DELAY_POINT();
		old = MemoryContextSwitchTo(rcxt);
		reseal_range(heap, index, indexInfo, range, ppr, hashers);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(rcxt);
	}
	MemoryContextDelete(cxt);
	table_close(heap, AccessShareLock);

	stats->num_pages = RelationGetNumberOfBlocks(index);
	stats->num_index_tuples = info->num_heap_tuples;
	stats->estimated_count = info->estimated_count;
	return stats;
}
