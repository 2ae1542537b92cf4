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
 * reading, it marks the range's record in place: the flag
 * AMQIDX_RANGE_RESEALING and, per column, the number of segments it has
 * (reseal_from).  Inserts from then on add keys only to segments from that
 * mark on, appending one when there is none yet; inserts whose rows the
 * heap scan may not see come later than the mark.  The new record keeps
 * the segments from the mark on (those that took keys) beside the new
 * sealed filters.  Meanwhile an insert adds its key even when a filter
 * before the mark answers true for it (a deleted row's key, or a false
 * positive), since the swap drops those filters and the heap scan may have
 * passed the new row's page.  A reseal that fails midway leaves the mark:
 * inserts add keys they could have skipped until the next reseal clears
 * it.
 * Inserts hold the directory page's share lock while they set bits, and
 * the swap takes it exclusively, so no insert is half done at the swap.
 *
 * Space.  Before resealing, a sweep (under the metapage's lock) counts the
 * blobs in use on every page, from every range's record, sealed filters
 * and segments, puts the pages with none on the free list, and moves the
 * stream's end off the page it was on.  From then on new blobs go only to
 * pages that held no blob in use: free pages, or new ones.  So when a
 * reseal's swap drops the blobs of the record that was in use at the
 * sweep, a page whose count falls to zero holds nothing in use, and is
 * freed by the swap's WAL record.  Records and segments written after the
 * sweep and dropped before the next one (a segment that took no key
 * during a reseal, a record replaced by an insert) are not counted: the
 * next sweep finds their pages.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/storage.h"
#include "commands/vacuum.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "amqfilter.h"
#include "amqidx.h"

static void truncate_free_tail(Relation index);

/*
 * A VACUUM with parallel workers runs in parallel mode, where it cannot
 * truncate: the AccessExclusiveLock is logged for standbys with the
 * transaction's ID, which parallel mode cannot assign.  Parallel mode ends
 * before the table's VACUUM commits (the heap is truncated after it too),
 * so the leader truncates the amq indexes it cleaned up in the commit's
 * pre-commit step, while VACUUM still holds its locks.  It cleans up every
 * one: the access method gives workers none (VACUUM_OPTION_NO_PARALLEL), as
 * a worker could not tell the leader.  The OIDs wait in
 * TopTransactionContext; any other end of the transaction forgets them.
 */
static List *pending_truncations = NIL;

static void
truncate_pending(XactEvent event, void *arg)
{
	List	   *oids = pending_truncations;
	ListCell   *lc;

	pending_truncations = NIL;
	if (event != XACT_EVENT_PRE_COMMIT || oids == NIL || IsInParallelMode())
		return;
	foreach(lc, oids)
	{
		Relation	index = index_open(lfirst_oid(lc), RowExclusiveLock);

		truncate_free_tail(index);
		index_close(index, NoLock);
	}
}

/* Have the commit truncate index. */
static void
defer_truncation(Relation index)
{
	static bool registered = false;
	MemoryContext old;

	if (!registered)
	{
		RegisterXactCallback(truncate_pending, NULL);
		registered = true;
	}
	old = MemoryContextSwitchTo(TopTransactionContext);
	pending_truncations = list_append_unique_oid(pending_truncations,
												 RelationGetRelid(index));
	MemoryContextSwitchTo(old);
}

/* ambulkdelete: nothing to remove; a deleted row's key is a false positive. */
IndexBulkDeleteResult *
amqidxbulkdelete(IndexVacuumInfo *info, IndexBulkDeleteResult *stats,
				 IndexBulkDeleteCallback callback, void *callback_state)
{
	if (stats == NULL)
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));
	return stats;
}

/*
 * What the sweep found: per block, the blobs in use on it (1 for the
 * metapage and directory pages, which are never freed); per range, its
 * record at the sweep, whose blobs the range's reseal drops.
 */
typedef struct AmqIdxSweep
{
	BlockNumber nblocks;
	uint16	   *nblobs;
	uint32		nranges;
	AmqIdxAddr *rec;
	BlockNumber *top;			/* per range: the last page of its blobs */
} AmqIdxSweep;

/* Count a blob of the range in use on each page it lies on. */
static void
sweep_count(Relation index, AmqIdxSweep *sw, uint32 range, AmqIdxAddr a,
			uint64 len)
{
	BlockNumber last = AmqIdxAddrAdd(a, len - 1).blk;

	sw->top[range] = Max(sw->top[range], last);

	if (a.blk == AMQIDX_METAPAGE_BLKNO || last >= sw->nblocks || last < a.blk)
		AmqIdxCorrupted(index, a.blk, "a blob lies outside the index");
	for (BlockNumber b = a.blk; b <= last; b++)
	{
		if (sw->nblobs[b] == PG_UINT16_MAX)
			AmqIdxCorrupted(index, b, "a page holds more blobs than it can");
		sw->nblobs[b]++;
	}
}

/*
 * The sweep: count the blobs in use on each page, and make the pages with
 * none the free space.
 */
static void
sweep(Relation index, AmqIdxSweep *sw)
{
	Buffer		metabuf;
	Page		metapage;
	AmqIdxMetaPage meta;
	AmqIdxFreeSpace fs;
	AmqIdxReader r;
	GenericXLogState *state;

	AmqIdxLockSpace(index, ExclusiveLock);
	metabuf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	metapage = BufferGetPage(metabuf);
	meta = AmqIdxCheckMetaPage(index, metapage);

	sw->nblocks = RelationGetNumberOfBlocks(index);
	sw->nblobs = palloc_extended(sizeof(uint16) * sw->nblocks,
								 MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	sw->nblobs[AMQIDX_METAPAGE_BLKNO] = 1;
	sw->nranges = meta->nranges;
	sw->rec = palloc_extended(sizeof(AmqIdxAddr) * Max(sw->nranges, 1), MCXT_ALLOC_HUGE);
	sw->top = palloc_extended(sizeof(BlockNumber) * Max(sw->nranges, 1),
							  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);

	AmqIdxReaderInit(&r, index);
	for (uint32 p = 0; p < meta->ndirpages; p++)
	{
		BlockNumber dirblk = meta->dirpages[p];
		Buffer		dirbuf;
		uint32		n;

		if (dirblk == AMQIDX_METAPAGE_BLKNO || dirblk >= sw->nblocks)
			AmqIdxCorrupted(index, AMQIDX_METAPAGE_BLKNO, "a directory page lies outside the index");
		sw->nblobs[dirblk] = 1;
		if ((uint64) p * AMQIDX_DIR_PER_PAGE >= sw->nranges)
			continue;
		n = Min(sw->nranges - p * (uint32) AMQIDX_DIR_PER_PAGE, (uint32) AMQIDX_DIR_PER_PAGE);
		dirbuf = ReadBuffer(index, dirblk);
		LockBuffer(dirbuf, BUFFER_LOCK_SHARE);
		AmqIdxCheckPage(index, BufferGetPage(dirbuf), dirblk, AMQIDX_PAGE_DIR);
		memcpy(sw->rec + p * AMQIDX_DIR_PER_PAGE, AmqIdxPageGetDir(BufferGetPage(dirbuf)),
			   sizeof(AmqIdxAddr) * n);
		UnlockReleaseBuffer(dirbuf);
	}
	for (uint32 range = 0; range < sw->nranges; range++)
	{
		AmqIdxRange rg;

		CHECK_FOR_INTERRUPTS();
		if (sw->rec[range].blk == InvalidBlockNumber)
			continue;
		AmqIdxReadRange(&r, sw->rec[range], &rg);
		sweep_count(index, sw, range, sw->rec[range], AmqIdxRangeSize(&rg));
		for (int i = 0; i < rg.natts; i++)
		{
			if (rg.sealed[i].addr.blk != InvalidBlockNumber)
				sweep_count(index, sw, range, rg.sealed[i].addr,
							AmqIdxFilterBlobLen(rg.sealed_header[i]));
			for (int s = 0; s < rg.nsegs[i]; s++)
			{
				AmqIdxFilter f;

				AmqIdxReadFilter(&r, rg.segs[i][s].addr, &f);
				sweep_count(index, sw, range, rg.segs[i][s].addr,
							AMQ_HEADER_SIZE + f.f.payload_len);
			}
			pfree(rg.segs[i]);
		}
	}
	AmqIdxReaderRelease(&r);

	memset(&fs, 0, sizeof(fs));
	for (BlockNumber b = 1; b < sw->nblocks; b++)
		if (sw->nblobs[b] == 0)
			AmqIdxFreeSpaceAdd(&fs, b, 1);

	state = GenericXLogStart(index);
	metapage = GenericXLogRegisterBuffer(state, metabuf, 0);
	memcpy(AmqIdxPageGetFreeSpace(metapage), &fs, sizeof(fs));
	/* no new blob on a page with blobs in use: the next starts afresh */
	AmqIdxPageGetMeta(metapage)->stream_end.blk = InvalidBlockNumber;
	AmqIdxPageGetMeta(metapage)->stream_end.off = 0;
	GenericXLogFinish(state);
	UnlockReleaseBuffer(metabuf);
	AmqIdxUnlockSpace(index, ExclusiveLock);
}

/*
 * A blob of the range's record at the sweep is dropped by the swap: free
 * the pages on which it was the last blob in use.
 */
static void
sweep_drop(Relation index, AmqIdxSweep *sw, AmqIdxWriter *w, AmqIdxAddr a,
		   uint64 len)
{
	BlockNumber last = AmqIdxAddrAdd(a, len - 1).blk;

	for (BlockNumber b = a.blk; b <= last; b++)
	{
		if (b >= sw->nblocks || sw->nblobs[b] == 0)
			elog(ERROR, "amq index \"%s\": block %u has no blob left to drop",
				 RelationGetRelationName(index), b);
		if (--sw->nblobs[b] == 0)
			AmqIdxFreeLater(w, b);
	}
}

/* The blobs of the range's record at the sweep, which the swap drops. */
static void
drop_swept_record(Relation index, AmqIdxSweep *sw, AmqIdxReader *r,
				  AmqIdxWriter *w, uint32 range)
{
	AmqIdxRange old;

	if (range >= sw->nranges || sw->rec[range].blk == InvalidBlockNumber)
		return;
	AmqIdxReadRange(r, sw->rec[range], &old);
	sweep_drop(index, sw, w, sw->rec[range], AmqIdxRangeSize(&old));
	for (int i = 0; i < old.natts; i++)
	{
		if (old.sealed[i].addr.blk != InvalidBlockNumber)
			sweep_drop(index, sw, w, old.sealed[i].addr,
					   AmqIdxFilterBlobLen(old.sealed_header[i]));
		for (int s = 0; s < old.nsegs[i]; s++)
		{
			AmqIdxFilter f;

			AmqIdxReadFilter(r, old.segs[i][s].addr, &f);
			sweep_drop(index, sw, w, old.segs[i][s].addr,
					   AMQ_HEADER_SIZE + f.f.payload_len);
		}
	}
	AmqIdxReaderRelease(r);
	sw->rec[range].blk = InvalidBlockNumber;
}

/* The metapage (exclusive), the range's directory page (exclusive) and its record. */
typedef struct AmqIdxLocked
{
	Relation	index;
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

	lk->index = index;
	AmqIdxLockSpace(index, ExclusiveLock);
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
	AmqIdxUnlockSpace(lk->index, ExclusiveLock);
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
			 int ppr, AmqIdxHasher *hashers, AmqIdxSweep *sw)
{
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	AmqIdxLocked lk;
	AmqIdxReader r;
	AmqIdxWriter w;
	AmqIdxRange rg;
	uint64	   *hashes[INDEX_MAX_KEYS];
	Size		nhashes[INDEX_MAX_KEYS];
	struct varlena *sealed[INDEX_MAX_KEYS];
	uint64		sealed_keys = 0;
	uint64		sealed_ranges = 0;
	double		fpr;

	/* 1. the mark: inserts from now on go to fresh segments */
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
	for (int i = 0; i < natts; i++)
		rg.reseal_from[i] = rg.nsegs[i];
	rg.flags |= AMQIDX_RANGE_RESEALING;
	AmqIdxRewriteRangeHeader(index, lk.entry, &rg);
	unlock_range(&lk);

	/* 2. the range's keys from the heap, and its sealed filters */
	AmqIdxCollectRange(heap, index, indexInfo, range, ppr, hashers, hashes, nhashes);
	for (int i = 0; i < natts; i++)
		sealed[i] = nhashes[i] > 0 ?
			AmqIdxBuildSealed(hashes[i], nhashes[i], fpr, &hashers[i]) : NULL;

	/* 3. the swap: sealed filters, and the segments from the mark on */
	if (!lock_range(index, range, &lk))
		elog(ERROR, "amq index range %u lost its record during a reseal", range);
	AmqIdxReaderInit(&r, index);
	AmqIdxReadRange(&r, lk.entry, &rg);
	AmqIdxWriterInit(&w, index, true, BufferGetPage(lk.metabuf), MAIN_FORKNUM);
	for (int i = 0; i < natts; i++)
	{
		int			keep = 0;

		for (int s = rg.reseal_from[i]; s < rg.nsegs[i]; s++)
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
	drop_swept_record(index, sw, &r, &w, range);
	AmqIdxSwitchRecord(index, lk.metabuf, lk.dirbuf, &w, &rg, sealed_keys, sealed_ranges);
	unlock_range(&lk);
	return true;
}

/* A copy of a blob, read with no page left locked. */
static uint8 *
copy_blob(AmqIdxReader *r, AmqIdxAddr a, uint64 len)
{
	uint8	   *copy = palloc_extended(len, MCXT_ALLOC_HUGE);

	memcpy(copy, AmqIdxRead(r, a, 0, (uint32) len), len);
	AmqIdxReaderRelease(r);
	return copy;
}

/*
 * Move a range whose blobs lie past the pages in use to free pages: a
 * reseal without the heap.  Its blobs are copied as they are (inserts,
 * which set segment bits under the directory page's share lock, wait), a
 * record pointing at the copies is switched in, and the old pages freed.
 * Not when the range's record changed since the sweep, or when the first
 * free run that holds its largest blob does not start below its last page.
 */
static void
move_range(Relation index, AmqIdxSweep *sw, uint32 range)
{
	AmqIdxLocked lk;
	AmqIdxReader r;
	AmqIdxWriter w;
	AmqIdxRange rg;
	uint64		largest = 0;
	bool		room = false;

	if (!lock_range(index, range, &lk) ||
		lk.entry.blk != sw->rec[range].blk || lk.entry.off != sw->rec[range].off)
	{
		unlock_range(&lk);
		return;
	}
	AmqIdxReaderInit(&r, index);
	AmqIdxReadRange(&r, lk.entry, &rg);
	AmqIdxWriterInit(&w, index, true, BufferGetPage(lk.metabuf), MAIN_FORKNUM);
	for (int i = 0; i < rg.natts; i++)
		if (rg.sealed[i].addr.blk != InvalidBlockNumber)
			largest = Max(largest, AmqIdxFilterBlobLen(rg.sealed_header[i]));
	for (uint32 i = 0; i < w.fs.nruns; i++)
		if ((uint64) w.fs.runs[i].npages * AMQIDX_CONTENT >= largest + 32)
		{
			room = w.fs.runs[i].start < sw->top[range];
			break;
		}
	if (!room)
	{
		AmqIdxReaderRelease(&r);
		unlock_range(&lk);
		return;
	}

	for (int i = 0; i < rg.natts; i++)
	{
		if (rg.sealed[i].addr.blk != InvalidBlockNumber)
		{
			uint64		len = AmqIdxFilterBlobLen(rg.sealed_header[i]);
			uint8	   *copy = copy_blob(&r, rg.sealed[i].addr, len);

			rg.sealed[i].addr = AmqIdxAppend(&w, copy, len, false);
			pfree(copy);
		}
		for (int s = 0; s < rg.nsegs[i]; s++)
		{
			AmqIdxFilter f;
			uint64		len;
			uint8	   *copy;

			AmqIdxReadFilter(&r, rg.segs[i][s].addr, &f);
			len = AMQ_HEADER_SIZE + f.f.payload_len;
			copy = copy_blob(&r, rg.segs[i][s].addr, len);
			rg.segs[i][s].addr = AmqIdxAppend(&w, copy, len, true);
			pfree(copy);
		}
	}
	drop_swept_record(index, sw, &r, &w, range);
	AmqIdxSwitchRecord(index, lk.metabuf, lk.dirbuf, &w, &rg, 0, 0);
	unlock_range(&lk);
}

static AmqIdxSweep *sort_sweep;

/* ranges by their last page, highest first */
static int
top_cmp(const void *a, const void *b)
{
	BlockNumber x = sort_sweep->top[*(const uint32 *) a];
	BlockNumber y = sort_sweep->top[*(const uint32 *) b];

	return (x < y) - (x > y);
}

/*
 * After the reseals, move the ranges with blobs past the pages in use,
 * highest first, so that the free space gathers at the index's end.
 */
static void
compact(Relation index, MemoryContext cxt)
{
	AmqIdxSweep sw;
	BlockNumber nused = 0;
	uint32	   *order;
	MemoryContext old = MemoryContextSwitchTo(cxt);

	sweep(index, &sw);
	for (BlockNumber b = 0; b < sw.nblocks; b++)
		nused += (sw.nblobs[b] > 0);
	order = palloc_extended(sizeof(uint32) * Max(sw.nranges, 1), MCXT_ALLOC_HUGE);
	for (uint32 i = 0; i < sw.nranges; i++)
		order[i] = i;
	sort_sweep = &sw;
	qsort(order, sw.nranges, sizeof(uint32), top_cmp);
	for (uint32 i = 0; i < sw.nranges; i++)
	{
		uint32		range = order[i];
		MemoryContext rcxt;

		if (sw.top[range] < nused)
			break;
		if (sw.rec[range].blk == InvalidBlockNumber)
			continue;
		AMQ_VACUUM_DELAY_POINT();
		rcxt = AllocSetContextCreate(cxt, "amq index move range", ALLOCSET_DEFAULT_SIZES);
		MemoryContextSwitchTo(rcxt);
		move_range(index, &sw, range);
		MemoryContextSwitchTo(cxt);
		MemoryContextDelete(rcxt);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Give the free pages at the end of the index back to the file system, as
 * VACUUM truncates a heap (the caller does not where the table's
 * vacuum_truncate is off: on standbys the lock conflicts with queries):
 * only when nothing else has the index open, so with an AccessExclusiveLock
 * that VACUUM never waits for.  The stream stays where it is; a run of the
 * list that ends at the index's end, or the rest of the run the stream is
 * in, goes.  Not in parallel mode: see pending_truncations.
 */
static void
truncate_free_tail(Relation index)
{
	Buffer		metabuf;
	Page		metapage;
	AmqIdxMetaPage meta;
	AmqIdxFreeSpace fs;
	BlockNumber nblocks;
	BlockNumber keep;
	GenericXLogState *state;

	Assert(!IsInParallelMode());
	if (!ConditionalLockRelation(index, AccessExclusiveLock))
		return;
	metabuf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	metapage = BufferGetPage(metabuf);
	meta = AmqIdxCheckMetaPage(index, metapage);
	memcpy(&fs, AmqIdxPageGetFreeSpace(metapage), sizeof(fs));
	nblocks = RelationGetNumberOfBlocks(index);
	keep = nblocks;
	if (fs.run_end == nblocks && meta->stream_end.blk != InvalidBlockNumber)
		keep = fs.run_end = meta->stream_end.blk + 1;
	while (fs.nruns > 0 &&
		   fs.runs[fs.nruns - 1].start + fs.runs[fs.nruns - 1].npages == keep)
	{
		fs.nruns--;
		keep = fs.runs[fs.nruns].start;
		fs.runs[fs.nruns].start = 0;
		fs.runs[fs.nruns].npages = 0;
	}
	if (keep < nblocks)
	{
		state = GenericXLogStart(index);
		metapage = GenericXLogRegisterBuffer(state, metabuf, 0);
		memcpy(AmqIdxPageGetFreeSpace(metapage), &fs, sizeof(fs));
		GenericXLogFinish(state);
	}
	UnlockReleaseBuffer(metabuf);
	if (keep < nblocks)
		RelationTruncate(index, keep);
	UnlockRelation(index, AccessExclusiveLock);
}

/* The pages the free list of a (locked) metapage holds. */
static BlockNumber
free_pages(Page metapage)
{
	AmqIdxFreeSpace *fs = AmqIdxPageGetFreeSpace(metapage);
	BlockNumber n = 0;

	for (uint32 i = 0; i < fs->nruns && i < AMQIDX_MAX_FREE_RUNS; i++)
		n += fs->runs[i].npages;
	return n;
}

/*
 * Would this VACUUM change the index: does a range before the one that
 * grows need a reseal, or does the free list hold pages that compaction
 * and truncation could give back?  If not, VACUUM writes nothing: the
 * sweep would only restart the stream on a fresh page, and a VACUUM of a
 * table whose index is as built would leave its pages as they were.
 * Each range is read under its directory page's share lock, as scans do.
 */
static bool
vacuum_has_work(Relation index, uint32 last, MemoryContext cxt)
{
	Buffer		buf;
	AmqIdxMetaPage meta;
	uint32		nranges;
	uint32		ndirpages;
	BlockNumber *dirpages;
	AmqIdxReader r;
	bool		work;
	MemoryContext rcxt = AllocSetContextCreate(cxt, "amq index vacuum check",
											   ALLOCSET_DEFAULT_SIZES);

	/*
	 * The directory's page numbers and the reader (its scratch) outlive the
	 * ranges: in cxt, not in rcxt, which is reset after each range.
	 */
	MemoryContext old = MemoryContextSwitchTo(cxt);

	buf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	meta = AmqIdxCheckMetaPage(index, BufferGetPage(buf));
	work = free_pages(BufferGetPage(buf)) > 0;
	nranges = Min(meta->nranges, last);
	ndirpages = meta->ndirpages;
	dirpages = palloc(sizeof(BlockNumber) * Max(ndirpages, 1));
	memcpy(dirpages, meta->dirpages, sizeof(BlockNumber) * ndirpages);
	UnlockReleaseBuffer(buf);

	AmqIdxReaderInit(&r, index);
	for (uint32 p = 0; !work && p * AMQIDX_DIR_PER_PAGE < nranges && p < ndirpages; p++)
	{
		uint32		first = p * (uint32) AMQIDX_DIR_PER_PAGE;
		uint32		end = Min(nranges, first + (uint32) AMQIDX_DIR_PER_PAGE);

		buf = ReadBuffer(index, dirpages[p]);
		LockBuffer(buf, BUFFER_LOCK_SHARE);
		AmqIdxCheckPage(index, BufferGetPage(buf), dirpages[p], AMQIDX_PAGE_DIR);
		for (uint32 range = first; !work && range < end; range++)
		{
			AmqIdxAddr	entry = AmqIdxPageGetDir(BufferGetPage(buf))[range - first];
			AmqIdxRange rg;

			CHECK_FOR_INTERRUPTS();
			if (entry.blk == InvalidBlockNumber)
				continue;
			MemoryContextSwitchTo(rcxt);
			AmqIdxReadRange(&r, entry, &rg);
			AmqIdxReaderUnlock(&r);
			work = needs_reseal(&rg);
			MemoryContextSwitchTo(cxt);
			MemoryContextReset(rcxt);
		}
		UnlockReleaseBuffer(buf);
	}
	AmqIdxReaderRelease(&r);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(rcxt);
	pfree(dirpages);
	return work;
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
	AmqIdxSweep sw;
	bool		truncate;

	if (info->analyze_only)
		return stats;
	if (stats == NULL)
		stats = (IndexBulkDeleteResult *) palloc0(sizeof(IndexBulkDeleteResult));
	cxt = AllocSetContextCreate(CurrentMemoryContext, "amq index reseal",
								ALLOCSET_DEFAULT_SIZES);

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
	/* a table whose vacuum_truncate is off keeps its indexes' length too */
	truncate = AMQ_VACUUM_TRUNCATE((StdRdOptions *) heap->rd_options);
	if (truncate && IsInParallelMode())
	{
		defer_truncation(index);
		truncate = false;
	}

	if (!vacuum_has_work(index, last, cxt))
	{
		table_close(heap, AccessShareLock);
		MemoryContextDelete(cxt);
		goto done;
	}
	old = MemoryContextSwitchTo(cxt);
	sweep(index, &sw);
	MemoryContextSwitchTo(old);

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
		reseal_range(heap, index, indexInfo, range, ppr, hashers, &sw);
		MemoryContextSwitchTo(old);
		MemoryContextDelete(rcxt);
	}
	table_close(heap, AccessShareLock);
	compact(index, cxt);
	MemoryContextDelete(cxt);
	if (truncate)
		truncate_free_tail(index);

done:
	stats->num_pages = RelationGetNumberOfBlocks(index);
	buf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	stats->pages_free = free_pages(BufferGetPage(buf));
	UnlockReleaseBuffer(buf);
	stats->num_index_tuples = info->num_heap_tuples;
	stats->estimated_count = info->estimated_count;
	return stats;
}
