/*-------------------------------------------------------------------------
 *
 * amqidx_build.c
 *	  Building an amq index: one pass over the heap in block order that
 *	  seals each range as soon as the scan leaves it.
 *
 * The heap is read with the usual index build scan (no synchronized scan,
 * so blocks come in order).  A range's key hashes are collected per
 * column; when the scan moves on, the range's sealed filters are built and
 * appended to the stream with the range record.  The last range, if the
 * heap does not fill it, keeps dynamic segments instead, as it will grow.
 * Then the directory pages and the metapage are written, and every page
 * is WAL-logged once.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/tableam.h"
#include "access/xloginsert.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "amqfilter.h"
#include "amqidx.h"

/* Key hashes of one range, per column. */
typedef struct AmqIdxCollect
{
	int			natts;
	AmqIdxHasher *hashers;
	uint64	   *hashes[INDEX_MAX_KEYS];
	Size		n[INDEX_MAX_KEYS];
	Size		cap[INDEX_MAX_KEYS];
	MemoryContext cxt;			/* of the arrays */
} AmqIdxCollect;

#define AMQIDX_PENDING_MAX		8192

typedef struct AmqIdxBuildState
{
	Relation	index;
	int			ppr;
	double		fpr;
	BlockNumber heap_nblocks;
	AmqIdxHasher hashers[INDEX_MAX_KEYS];
	AmqIdxCollect keys;
	uint32		cur_range;		/* the range being collected */
	bool		have_range;
	double		heap_tuples;
	double		index_tuples;
	AmqIdxWriter writer;
	AmqIdxAddr *dir;			/* range -> record */
	uint32		ndir;
	uint32		dircap;
	uint64		sealed_keys;
	uint64		sealed_ranges;
	/* range records waiting to be written */
	uint8	   *pending;
	Size		pending_len;
	int			npending;
	uint32		pending_range[AMQIDX_PENDING_MAX];
	Size		pending_off[AMQIDX_PENDING_MAX];
} AmqIdxBuildState;

/* Set up the collection of one range's key hashes, per column. */
static void
collect_init(AmqIdxCollect *c, int natts, AmqIdxHasher *hashers)
{
	c->natts = natts;
	c->hashers = hashers;
	c->cxt = AllocSetContextCreate(CurrentMemoryContext, "amq index range keys",
								   ALLOCSET_DEFAULT_SIZES);
	for (int i = 0; i < natts; i++)
	{
		c->hashes[i] = NULL;
		c->n[i] = 0;
		c->cap[i] = 0;
	}
}

/* Forget the hashes collected for a range. */
static void
collect_reset(AmqIdxCollect *c)
{
	MemoryContextReset(c->cxt);
	for (int i = 0; i < c->natts; i++)
	{
		c->hashes[i] = NULL;
		c->n[i] = 0;
		c->cap[i] = 0;
	}
}

/* Collect the hashes of one heap tuple's non-NULL keys. */
static void
collect_values(AmqIdxCollect *c, Datum *values, bool *isnull)
{
	for (int i = 0; i < c->natts; i++)
	{
		if (isnull[i])
			continue;
		if (c->n[i] == c->cap[i])
		{
			Size		cap = Max(c->cap[i] * 2, 1024);

			if (c->hashes[i] == NULL)
				c->hashes[i] = MemoryContextAllocExtended(c->cxt, cap * sizeof(uint64),
														  MCXT_ALLOC_HUGE);
			else
				c->hashes[i] = repalloc_huge(c->hashes[i], cap * sizeof(uint64));
			c->cap[i] = cap;
		}
		c->hashes[i][c->n[i]++] = AmqIdxHash(&c->hashers[i], values[i]);
	}
}

/* ---- sealing and writing a range ---- */

/* Record range's range record address for the directory. */
static void
dir_set(AmqIdxBuildState *st, uint32 range, AmqIdxAddr a)
{
	while (st->ndir <= range)
	{
		if (st->ndir == st->dircap)
		{
			st->dircap = Max(st->dircap * 2, 1024);
			st->dir = repalloc_huge(st->dir, st->dircap * sizeof(AmqIdxAddr));
		}
		st->dir[st->ndir].blk = InvalidBlockNumber;
		st->dir[st->ndir].off = 0;
		st->ndir++;
	}
	st->dir[range] = a;
}

/*
 * Range records are written in batches after their ranges' filters, so
 * that a scan finds many records on one page: it reads the record and the
 * span of the filter a probe needs, and nothing else.
 */
#define AMQIDX_PENDING_BYTES	(1024 * 1024)

/* Write the buffered range records, and note their addresses. */
static void
pending_flush(AmqIdxBuildState *st)
{
	AmqIdxAddr	a;

	if (st->pending_len == 0)
		return;
	a = AmqIdxAppend(&st->writer, st->pending, st->pending_len, false);
	for (int i = 0; i < st->npending; i++)
		dir_set(st, st->pending_range[i], AmqIdxAddrAdd(a, st->pending_off[i]));
	st->pending_len = 0;
	st->npending = 0;
}

/* Buffer a range record, to be written in a batch after its filters. */
static void
pending_add(AmqIdxBuildState *st, const AmqIdxRange *rg)
{
	Size		size = AmqIdxRangeSize(rg);

	if (st->pending_len + size > AMQIDX_PENDING_BYTES ||
		st->npending == AMQIDX_PENDING_MAX)
		pending_flush(st);
	AmqIdxRangeSerialize(rg, st->pending + st->pending_len);
	st->pending_range[st->npending] = rg->range;
	st->pending_off[st->npending] = st->pending_len;
	st->npending++;
	st->pending_len += size;
}

/* A dynamic segment holding the given hashes, appended to the stream. */
static AmqIdxSeg
write_segment(AmqIdxWriter *w, uint64 *hashes, Size n, uint32 capacity,
			  double fpr, const AmqIdxHasher *h)
{
	struct varlena *v = AmqIdxNewSegment(capacity, fpr, h);
	AmqFilter	f;
	AmqIdxSeg	seg;

	AmqFilterDecode(v, &f);
	for (Size i = 0; i < n; i++)
		amq_blocked_ops.add(&f, hashes[i]);
	f.nkeys = n;
	AmqFilterFinish(v, &f);
	seg.addr = AmqIdxAppend(w, (uint8 *) VARDATA(v), VARSIZE(v) - VARHDRSZ, true);
	seg.capacity = capacity;
	pfree(v);
	return seg;
}

/*
 * Write the collected range: sealed filters, or (the growing last range)
 * one dynamic segment per column with keys.
 */
static void
flush_range(AmqIdxBuildState *st, bool seal)
{
	AmqIdxCollect *c = &st->keys;
	AmqIdxRange rg;
	AmqIdxSeg	segs[INDEX_MAX_KEYS];

	AmqIdxRangeInit(&rg, st->cur_range, c->natts, seal ? AMQIDX_RANGE_SEALED : 0);
	for (int i = 0; i < c->natts; i++)
	{
		rg.segs[i] = &segs[i];
		if (c->n[i] == 0)
			continue;
		if (seal)
		{
			struct varlena *v = AmqIdxBuildSealed(c->hashes[i], c->n[i],
												  st->fpr, &st->hashers[i]);

			AmqIdxSetSealed(&rg, i, AmqIdxAppend(&st->writer, (uint8 *) VARDATA(v),
												 VARSIZE(v) - VARHDRSZ, false),
							v);
			st->sealed_keys += rg.sealed[i].capacity;
			st->sealed_ranges++;
			pfree(v);
		}
		else
		{
			uint64		avg = st->sealed_ranges ? st->sealed_keys / st->sealed_ranges : 0;
			uint32		cap = (uint32) Min(Max(Max(2 * c->n[i], avg), 64),
										   (uint64) PG_INT32_MAX);

			segs[i] = write_segment(&st->writer, c->hashes[i], c->n[i], cap,
									st->fpr, &st->hashers[i]);
			rg.nsegs[i] = 1;
		}
	}
	pending_add(st, &rg);
	collect_reset(c);
}

/* CREATE INDEX heap scan callback: collect keys, sealing each range passed. */
static void
build_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state)
{
	AmqIdxBuildState *st = (AmqIdxBuildState *) state;
	uint32		range = ItemPointerGetBlockNumber(tid) / st->ppr;

	if (st->have_range && range != st->cur_range)
	{
		if (range < st->cur_range)
			elog(ERROR, "amq index build scan went backwards");
		flush_range(st, true);
	}
	st->cur_range = range;
	st->have_range = true;
	collect_values(&st->keys, values, isnull);
	st->index_tuples += 1;
}

/* Write the directory pages and the metapage (block 0, already there). */
static void
write_directory(AmqIdxBuildState *st, int natts, double fpr_option)
{
	uint32		ndirpages = (st->ndir + AMQIDX_DIR_PER_PAGE - 1) / AMQIDX_DIR_PER_PAGE;
	BlockNumber dirblks[AMQIDX_MAX_DIRPAGES];
	Buffer		buf;
	Page		page;
	AmqIdxMetaPage meta;

	if (ndirpages > AMQIDX_MAX_DIRPAGES)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("table has too many page ranges for an amq index: %u",
						st->ndir),
				 errdetail("An amq index holds at most %zu ranges.",
						   (size_t) (AMQIDX_MAX_DIRPAGES * AMQIDX_DIR_PER_PAGE)),
				 errhint("Raise pages_per_range.")));

	for (uint32 p = 0; p < ndirpages; p++)
	{
		uint32		first = p * AMQIDX_DIR_PER_PAGE;
		uint32		n = Min(st->ndir - first, (uint32) AMQIDX_DIR_PER_PAGE);

		dirblks[p] = AmqIdxNewBuffer(st->index, MAIN_FORKNUM, &buf);
		page = BufferGetPage(buf);
		AmqIdxInitDirPage(page);
		memcpy(AmqIdxPageGetDir(page), st->dir + first, n * sizeof(AmqIdxAddr));
		MarkBufferDirty(buf);
		UnlockReleaseBuffer(buf);
	}

	buf = ReadBuffer(st->index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	AmqIdxInitMetaPage(page, st->ppr, fpr_option, natts);
	meta = AmqIdxPageGetMeta(page);
	meta->nranges = st->ndir;
	meta->ndirpages = ndirpages;
	memcpy(meta->dirpages, dirblks, ndirpages * sizeof(BlockNumber));
	meta->stream_end = st->writer.end;
	meta->sealed_keys = st->sealed_keys;
	meta->sealed_ranges = st->sealed_ranges;
	MarkBufferDirty(buf);
	UnlockReleaseBuffer(buf);
}

/* ambuild: build every range's filters from one heap scan. */
IndexBuildResult *
amqidxbuild(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *result;
	AmqIdxBuildState st;
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	double		fpr_option = AmqIdxFprOption(index);
	Buffer		metabuf;
	MemoryContext buildcxt;
	MemoryContext oldcxt;

	if (RelationGetNumberOfBlocks(index) != 0)
		elog(ERROR, "index \"%s\" already contains data",
			 RelationGetRelationName(index));

	buildcxt = AllocSetContextCreate(CurrentMemoryContext, "amq index build",
									 ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(buildcxt);

	memset(&st, 0, sizeof(st));
	st.index = index;
	st.ppr = AmqIdxPagesPerRange(index);
	st.heap_nblocks = RelationGetNumberOfBlocks(heap);
	st.fpr = AmqIdxEffectiveFpr(fpr_option,
								(st.heap_nblocks + st.ppr - 1) / st.ppr);
	for (int i = 0; i < natts; i++)
		AmqIdxHasherInit(&st.hashers[i], index, i, TupleDescAttr(RelationGetDescr(index), i)->atttypid);
	collect_init(&st.keys, natts, st.hashers);
	st.dircap = 1024;
	st.dir = palloc(st.dircap * sizeof(AmqIdxAddr));
	st.pending = palloc(AMQIDX_PENDING_BYTES);

	/* block 0 is the metapage, written last */
	if (AmqIdxNewBuffer(index, MAIN_FORKNUM, &metabuf) != AMQIDX_METAPAGE_BLKNO)
		elog(ERROR, "amq index metapage is not block 0");
	AmqIdxInitMetaPage(BufferGetPage(metabuf), st.ppr, fpr_option, natts);
	MarkBufferDirty(metabuf);
	UnlockReleaseBuffer(metabuf);

	AmqIdxWriterInit(&st.writer, index, false, NULL, MAIN_FORKNUM);
	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, AMQIDX_PHASE_BUILD);
	st.heap_tuples = table_index_build_scan(heap, index, indexInfo, false, true,
											build_callback, (void *) &st, NULL);
	if (st.have_range)
	{
		/* the last range grows on unless the heap fills it */
		BlockNumber end = (st.cur_range + 1) * (BlockNumber) st.ppr;

		flush_range(&st, st.heap_nblocks >= end);
	}
	pending_flush(&st);
	write_directory(&st, natts, fpr_option);

	pgstat_progress_update_param(PROGRESS_CREATEIDX_SUBPHASE, AMQIDX_PHASE_LOG);
	if (RelationNeedsWAL(index))
		log_newpage_range(index, MAIN_FORKNUM, 0,
						  RelationGetNumberOfBlocks(index), true);

	MemoryContextSwitchTo(oldcxt);
	result = (IndexBuildResult *) palloc(sizeof(IndexBuildResult));
	result->heap_tuples = st.heap_tuples;
	result->index_tuples = st.index_tuples;
	MemoryContextDelete(buildcxt);
	return result;
}

/* The init fork of an unlogged index: an empty metapage. */
void
amqidxbuildempty(Relation index)
{
	Buffer		buf;

	if (AmqIdxNewBuffer(index, INIT_FORKNUM, &buf) != AMQIDX_METAPAGE_BLKNO)
		elog(ERROR, "amq index metapage is not block 0");
	START_CRIT_SECTION();
	AmqIdxInitMetaPage(BufferGetPage(buf), AmqIdxPagesPerRange(index),
					   AmqIdxFprOption(index),
					   IndexRelationGetNumberOfKeyAttributes(index));
	MarkBufferDirty(buf);
	log_newpage_buffer(buf, true);
	END_CRIT_SECTION();
	UnlockReleaseBuffer(buf);
}

/* ---- collecting one range again, for VACUUM ---- */

typedef struct AmqIdxRangeScan
{
	AmqIdxCollect keys;
} AmqIdxRangeScan;

/* Heap scan callback of one range's rescan: collect its keys. */
static void
range_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			   bool tupleIsAlive, void *state)
{
	collect_values(&((AmqIdxRangeScan *) state)->keys, values, isnull);
}

/*
 * The key hashes of every row version in one range, as a build would see
 * them, including rows of transactions still in progress: a reseal must
 * lose no row that an insert put there before the scan.  The arrays live
 * in CurrentMemoryContext.
 */
void
AmqIdxCollectRange(Relation heap, Relation index, IndexInfo *indexInfo,
				   uint32 range, int pages_per_range, AmqIdxHasher *hashers,
				   uint64 **hashes, Size *nhashes)
{
	AmqIdxRangeScan rs;
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	BlockNumber start = range * (BlockNumber) pages_per_range;
	BlockNumber nblocks = RelationGetNumberOfBlocks(heap);

	collect_init(&rs.keys, natts, hashers);
	MemoryContextSetParent(rs.keys.cxt, CurrentMemoryContext);
	if (start < nblocks)
		table_index_build_range_scan(heap, index, indexInfo, false, true, false,
									 start, Min((BlockNumber) pages_per_range,
												nblocks - start),
									 range_callback, (void *) &rs, NULL);
	for (int i = 0; i < natts; i++)
	{
		hashes[i] = rs.keys.hashes[i];
		nhashes[i] = rs.keys.n[i];
	}
}
