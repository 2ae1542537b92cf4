/*-------------------------------------------------------------------------
 *
 * amqidx_insert.c
 *	  Inserting into an amq index.
 *
 * Keys wait in a backend-local batch per index while the rows go to one
 * range (a bulk insert fills the heap's pages in order), and go in
 * together: WAL-logging a page costs a comparison of the whole page, so a
 * batch logs each page it changes once instead of once per key.  A batch
 * is written when a row goes to another range, when it is full, before
 * this backend scans or checks the index, and before the transaction
 * commits or prepares; it is dropped when the transaction aborts.  Other
 * sessions see the rows only after the commit, so they never miss a key,
 * and a VACUUM reseal reads the rows of a batch from the heap (it takes
 * in-progress inserts too), so it does not either.
 *
 * A key the range's filters already answer true for needs nothing (a
 * duplicate, or a false positive that already covers it): no page changes
 * and no WAL.  Otherwise its bits go into the range's newest dynamic
 * segment in place, under the directory page's share lock.  When the range
 * has no segment with room (or no record, or lies past the directory), the
 * metapage and the directory page are locked exclusively, an empty
 * segment and a new range record are appended (into free space when the
 * index has some), and the entry is switched to it; then the key goes in
 * as before.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/parallel.h"
#include "access/relation.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "amqfilter.h"
#include "amqidx.h"
#include "kind_blocked.h"

/*
 * Segment sizes, in keys, then doubling: the first of a sealed range's
 * overflow; the first of a range of an index with no sealed range to size
 * it by is 64 keys a page, but at most AMQIDX_GROWING_FIRST_MAX, so that a
 * first row under a large pages_per_range does not write megabytes.
 */
#define AMQIDX_OVERFLOW_FIRST	64
#define AMQIDX_GROWING_FIRST_MAX	65536

typedef struct AmqIdxInsertCache
{
	int			ppr;
	AmqIdxHasher hashers[INDEX_MAX_KEYS];
} AmqIdxInsertCache;

/* The state inserts keep in the IndexInfo, made on the first insert. */
static AmqIdxInsertCache *
insert_cache(Relation index, IndexInfo *indexInfo)
{
	AmqIdxInsertCache *c = (AmqIdxInsertCache *) indexInfo->ii_AmCache;

	if (c == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(indexInfo->ii_Context);
		int			natts = IndexRelationGetNumberOfKeyAttributes(index);

		c = palloc0(sizeof(AmqIdxInsertCache));
		c->ppr = AmqIdxMetaPagesPerRange(index);
		for (int i = 0; i < natts; i++)
			AmqIdxHasherInit(&c->hashers[i], index, i,
							 TupleDescAttr(RelationGetDescr(index), i)->atttypid);
		indexInfo->ii_AmCache = c;
		MemoryContextSwitchTo(old);
	}
	return c;
}

/*
 * The page of a dynamic segment's header, exclusively locked, and the
 * header decoded into *f (payload NULL), checked before anything is set.
 */
static Buffer
lock_segment(Relation index, AmqIdxSeg seg, AmqFilter *f)
{
	Buffer		hbuf = ReadBuffer(index, seg.addr.blk);
	uint8	   *hdr;

	LockBuffer(hbuf, BUFFER_LOCK_EXCLUSIVE);
	AmqIdxCheckPage(index, BufferGetPage(hbuf), seg.addr.blk, AMQIDX_PAGE_DATA);
	if (seg.addr.off + AMQ_HEADER_SIZE > AMQIDX_CONTENT)
		AmqIdxCorrupted(index, seg.addr.blk, "a dynamic segment header is malformed");
	hdr = (uint8 *) AmqIdxPageContent(BufferGetPage(hbuf)) + seg.addr.off;
	amq_parse_trusted(hdr, AMQ_HEADER_SIZE, f);
	f->payload = NULL;
	if (amq_load32(hdr) != AMQ_MAGIC || f->kind != AMQ_KIND_BLOCKED ||
		amq_blocked_ops.check(f) != AMQ_OK)
		AmqIdxCorrupted(index, seg.addr.blk, "a dynamic segment header is malformed");
	return hbuf;
}

/* Set a key's bits in a dynamic segment, in place, WAL-logged. */
static void
add_in_place(Relation index, AmqIdxSeg seg, uint64 hash)
{
	Buffer		hbuf;
	Buffer		bbuf = InvalidBuffer;
	AmqFilter	f;
	AmqIdxAddr	block;
	uint64		off;
	uint32		len;
	GenericXLogState *state;
	Page		hpage;
	Page		bpage;
	uint64		nkeys;

	hbuf = lock_segment(index, seg, &f);
	amq_blocked_ops.probe_span(&f, hash, &off, &len);
	block = AmqIdxAddrAdd(seg.addr, AMQ_HEADER_SIZE + off);
	if (block.blk != seg.addr.blk)
	{
		bbuf = ReadBuffer(index, block.blk);
		LockBuffer(bbuf, BUFFER_LOCK_EXCLUSIVE);
		AmqIdxCheckPage(index, BufferGetPage(bbuf), block.blk, AMQIDX_PAGE_DATA);
	}

	/*
	 * Generic WAL compares whole pages, so a page less per insert matters.
	 * The key count only decides when a segment is full, so when the block
	 * lies on another page than the header it is counted one time in
	 * eight, by eight; an empty segment's first key is always counted, as
	 * a count of 0 means empty to the probes.
	 */
	state = GenericXLogStart(index);
	if (!BufferIsValid(bbuf))
	{
		hpage = bpage = GenericXLogRegisterBuffer(state, hbuf, 0);
		nkeys = f.nkeys + 1;
	}
	else if (f.nkeys == 0 || (hash >> 61) == 0)
	{
		hpage = GenericXLogRegisterBuffer(state, hbuf, 0);
		bpage = GenericXLogRegisterBuffer(state, bbuf, 0);
		nkeys = f.nkeys + (f.nkeys == 0 ? 1 : 8);
	}
	else
	{
		hpage = NULL;
		bpage = GenericXLogRegisterBuffer(state, bbuf, 0);
		nkeys = f.nkeys;
	}
	amq_blocked_insert((uint8 *) AmqIdxPageContent(bpage) + block.off,
					   (uint32) amq_seeded(&f, hash));
	if (hpage != NULL)
		amq_store64((uint8 *) AmqIdxPageContent(hpage) + seg.addr.off + AMQ_OFF_NKEYS,
					nkeys);
	GenericXLogFinish(state);

	if (BufferIsValid(bbuf))
		UnlockReleaseBuffer(bbuf);
	UnlockReleaseBuffer(hbuf);
}

/* a key of a batch and the page its block lies on */
typedef struct BatchKey
{
	uint64		hash;
	AmqIdxAddr	block;
} BatchKey;

static int
batch_key_cmp(const void *a, const void *b)
{
	const BatchKey *x = a;
	const BatchKey *y = b;

	if (x->block.blk != y->block.blk)
		return x->block.blk < y->block.blk ? -1 : 1;
	return 0;
}

/*
 * Set the bits of up to n keys in a dynamic segment, in place, as few WAL
 * records as pages allow (the header's page and up to three block pages
 * each); as many as the segment has room for.  Returns how many of the
 * first keys went in.  The segment's header page stays locked throughout,
 * so no other insert changes the segment meanwhile; pages are locked in
 * ascending order.
 */
static int
add_batch(Relation index, AmqIdxSeg seg, const uint64 *hashes, int n)
{
	Buffer		hbuf;
	AmqFilter	f;
	uint64		room;
	int			m;
	BatchKey   *keys;
	int			k = 0;

	hbuf = lock_segment(index, seg, &f);
	room = f.nkeys < seg.capacity ? seg.capacity - f.nkeys : 0;
	m = (int) Min((uint64) n, room);
	if (m == 0)
	{
		UnlockReleaseBuffer(hbuf);
		return 0;
	}

	keys = palloc(sizeof(BatchKey) * m);
	for (int i = 0; i < m; i++)
	{
		uint64		off;
		uint32		len;

		amq_blocked_ops.probe_span(&f, hashes[i], &off, &len);
		keys[i].hash = hashes[i];
		keys[i].block = AmqIdxAddrAdd(seg.addr, AMQ_HEADER_SIZE + off);
	}
	qsort(keys, m, sizeof(BatchKey), batch_key_cmp);

	while (k < m)
	{
		GenericXLogState *state = GenericXLogStart(index);
		Page		hpage = GenericXLogRegisterBuffer(state, hbuf, 0);
		Buffer		bufs[3];
		Page		pages[3];
		int			nbufs = 0;

		while (k < m)
		{
			BlockNumber blk = keys[k].block.blk;
			Page		page;

			if (blk == seg.addr.blk)
				page = hpage;
			else if (nbufs > 0 && BufferGetBlockNumber(bufs[nbufs - 1]) == blk)
				page = pages[nbufs - 1];
			else if (nbufs == lengthof(bufs))
				break;
			else
			{
				bufs[nbufs] = ReadBuffer(index, blk);
				LockBuffer(bufs[nbufs], BUFFER_LOCK_EXCLUSIVE);
				AmqIdxCheckPage(index, BufferGetPage(bufs[nbufs]), blk, AMQIDX_PAGE_DATA);
				pages[nbufs] = GenericXLogRegisterBuffer(state, bufs[nbufs], 0);
				page = pages[nbufs++];
			}
			amq_blocked_insert((uint8 *) AmqIdxPageContent(page) + keys[k].block.off,
							   (uint32) amq_seeded(&f, keys[k].hash));
			k++;
		}
		amq_store64((uint8 *) AmqIdxPageContent(hpage) + seg.addr.off + AMQ_OFF_NKEYS,
					f.nkeys + k);
		GenericXLogFinish(state);
		for (int i = 0; i < nbufs; i++)
			UnlockReleaseBuffer(bufs[i]);
	}
	UnlockReleaseBuffer(hbuf);
	pfree(keys);
	return m;
}

/*
 * Must the key be added to column att of the range: does none of its
 * filters answer true?  If so, *room says whether the newest segment can
 * take it (from the header the probe just read).
 */
static bool
needs_key(AmqIdxReader *r, const AmqIdxRange *rg, int att, uint64 hash,
		  bool *room)
{
	AmqIdxFilter f;
	bool		resealing = (rg->flags & AMQIDX_RANGE_RESEALING) != 0;

	*room = false;
	if (!resealing && rg->sealed[att].addr.blk != InvalidBlockNumber)
	{
		AmqIdxSealedFilter(r, rg, att, &f);
		if (AmqIdxFilterContains(r, &f, hash))
			return false;
	}

	/*
	 * During a reseal only the segments from its mark on survive (see
	 * amqidx_vacuum.c): of the filters, only the newest segment, if it is
	 * one of them, may say the key is already there; if none is, the key
	 * needs one.
	 */
	if (resealing && rg->nsegs[att] <= rg->reseal_from[att])
		return true;
	for (int s = resealing ? rg->nsegs[att] - 1 : 0; s < rg->nsegs[att]; s++)
	{
		AmqIdxReadFilter(r, rg->segs[att][s].addr, &f);
		if (AmqIdxFilterContains(r, &f, hash))
			return false;
		*room = f.f.nkeys < rg->segs[att][s].capacity;
	}
	return true;
}

/*
 * The slow path: with the metapage and the directory page locked
 * exclusively, give the range a record and each column that needs one a
 * segment with room, then add.
 */
static void
insert_slow(Relation index, uint32 range, int ppr, uint64 *hashes, bool *need,
			AmqIdxHasher *hashers)
{
	Buffer		metabuf;
	Buffer		dirbuf;
	Page		metapage;
	AmqIdxMetaPage meta;
	BlockNumber dirblk;
	AmqIdxAddr	entry;
	AmqIdxRange rg;
	AmqIdxReader r;
	AmqIdxWriter w;
	GenericXLogState *state;
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	bool		add[INDEX_MAX_KEYS];
	bool		changed = false;
	double		fpr;

	AmqIdxLockSpace(index, ExclusiveLock);
	metabuf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_EXCLUSIVE);
	metapage = BufferGetPage(metabuf);
	meta = AmqIdxCheckMetaPage(index, metapage);

	/* directory pages up to the range */
	while (range / AMQIDX_DIR_PER_PAGE >= meta->ndirpages)
	{
		Buffer		buf;
		BlockNumber blk;
		Page		page;
		AmqIdxMetaPage m;

		if (meta->ndirpages >= AMQIDX_MAX_DIRPAGES)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("table has too many page ranges for amq index \"%s\"",
							RelationGetRelationName(index)),
					 errdetail("An amq index holds at most %zu ranges.",
							   (size_t) (AMQIDX_MAX_DIRPAGES * AMQIDX_DIR_PER_PAGE)),
					 errhint("Recreate the index with a larger pages_per_range.")));
		blk = AmqIdxNewBuffer(index, MAIN_FORKNUM, &buf);
		state = GenericXLogStart(index);
		page = GenericXLogRegisterBuffer(state, buf, GENERIC_XLOG_FULL_IMAGE);
		AmqIdxInitDirPage(page);
		m = AmqIdxPageGetMeta(GenericXLogRegisterBuffer(state, metabuf, 0));
		m->dirpages[m->ndirpages++] = blk;
		GenericXLogFinish(state);
		UnlockReleaseBuffer(buf);
	}

	dirblk = meta->dirpages[range / AMQIDX_DIR_PER_PAGE];
	dirbuf = ReadBuffer(index, dirblk);
	LockBuffer(dirbuf, BUFFER_LOCK_EXCLUSIVE);
	AmqIdxCheckPage(index, BufferGetPage(dirbuf), dirblk, AMQIDX_PAGE_DIR);
	entry = (range < meta->nranges) ?
		AmqIdxPageGetDir(BufferGetPage(dirbuf))[range % AMQIDX_DIR_PER_PAGE] :
		(AmqIdxAddr) {InvalidBlockNumber, 0};

	AmqIdxReaderInit(&r, index);
	if (entry.blk != InvalidBlockNumber)
		AmqIdxReadRange(&r, entry, &rg);
	else
	{
		AmqIdxRangeInit(&rg, range, natts, 0);
		changed = true;
	}

	fpr = AmqIdxEffectiveFpr(meta->fpr_option, Max(meta->nranges, range + 1));
	AmqIdxWriterInit(&w, index, true, metapage, MAIN_FORKNUM);
	for (int i = 0; i < natts; i++)
	{
		bool		room;

		add[i] = need[i] && needs_key(&r, &rg, i, hashes[i], &room);
		if (add[i] && !room)
		{
			uint64		cap;

			if (rg.flags & AMQIDX_RANGE_SEALED)
				cap = AMQIDX_OVERFLOW_FIRST;
			else if (meta->sealed_ranges > 0)
				cap = Max(meta->sealed_keys / meta->sealed_ranges, AMQIDX_OVERFLOW_FIRST);
			else
				cap = Min((uint64) ppr * 64, AMQIDX_GROWING_FIRST_MAX);
			/* a reseal keeps only its own segments: they start small */
			cap <<= Min(rg.nsegs[i] - ((rg.flags & AMQIDX_RANGE_RESEALING) ?
									   rg.reseal_from[i] : 0), 16);
			cap = Min(cap, (uint64) PG_INT32_MAX);

			/* the writer locks the stream's tail page */
			AmqIdxReaderRelease(&r);
			AmqIdxAppendSegment(&w, &rg, i, (uint32) cap, fpr, &hashers[i]);
			changed = true;
		}
	}
	AmqIdxReaderRelease(&r);

	if (changed)
		AmqIdxSwitchRecord(index, metabuf, dirbuf, &w, &rg, 0, 0);

	for (int i = 0; i < natts; i++)
		if (add[i])
			add_in_place(index, rg.segs[i][rg.nsegs[i] - 1], hashes[i]);

	UnlockReleaseBuffer(dirbuf);
	UnlockReleaseBuffer(metabuf);
	AmqIdxUnlockSpace(index, ExclusiveLock);
}

/*
 * A batch of rows of one range: under the directory page's share lock,
 * each column's keys that its filters do not answer true for go into its
 * newest segment, as many as it has room for.  need[row * natts + att] is
 * cleared for each key that went in or was there.  Returns whether some
 * remain: a column without a segment with room, or a range without a
 * record, which the slow path gives them.
 */
static bool
insert_batch(Relation index, uint32 range, int nrows, const uint64 *hashes,
			 bool *need)
{
	Buffer		metabuf;
	Buffer		dirbuf;
	AmqIdxMetaPage meta;
	BlockNumber dirblk;
	AmqIdxAddr	entry;
	AmqIdxRange rg;
	AmqIdxReader r;
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	uint64	   *add = palloc(sizeof(uint64) * nrows);
	int		   *rows = palloc(sizeof(int) * nrows);
	bool		remain = false;

	metabuf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_SHARE);
	meta = AmqIdxCheckMetaPage(index, BufferGetPage(metabuf));
	if (range >= meta->nranges)
	{
		UnlockReleaseBuffer(metabuf);
		return true;
	}
	dirblk = meta->dirpages[range / AMQIDX_DIR_PER_PAGE];
	UnlockReleaseBuffer(metabuf);

	dirbuf = ReadBuffer(index, dirblk);
	LockBuffer(dirbuf, BUFFER_LOCK_SHARE);
	AmqIdxCheckPage(index, BufferGetPage(dirbuf), dirblk, AMQIDX_PAGE_DIR);
	entry = AmqIdxPageGetDir(BufferGetPage(dirbuf))[range % AMQIDX_DIR_PER_PAGE];
	if (entry.blk == InvalidBlockNumber)
	{
		UnlockReleaseBuffer(dirbuf);
		return true;
	}

	AmqIdxReaderInit(&r, index);
	AmqIdxReadRange(&r, entry, &rg);
	for (int att = 0; att < natts; att++)
	{
		int			n = 0;
		int			nsegs = rg.nsegs[att];
		int			added = 0;

		for (int row = 0; row < nrows; row++)
		{
			bool		room;

			if (!need[row * natts + att])
				continue;
			if (needs_key(&r, &rg, att, hashes[row * natts + att], &room))
			{
				add[n] = hashes[row * natts + att];
				rows[n++] = row;
			}
			else
				need[row * natts + att] = false;
		}
		/* add_batch locks pages exclusively: no page of the reader's stays locked */
		AmqIdxReaderRelease(&r);
		if (n > 0 && nsegs > 0 &&
			!((rg.flags & AMQIDX_RANGE_RESEALING) && nsegs <= rg.reseal_from[att]))
			added = add_batch(index, rg.segs[att][nsegs - 1], add, n);
		for (int i = 0; i < added; i++)
			need[rows[i] * natts + att] = false;
		remain |= (added < n);
	}
	UnlockReleaseBuffer(dirbuf);
	return remain;
}

/* ---- batches ---- */

#define AMQIDX_BATCH_ROWS		8192
#define AMQIDX_MAX_BATCHES		8

/* The keys of rows not yet in one index: all of one range. */
typedef struct AmqIdxBatch
{
	Oid			indexid;		/* InvalidOid: a free slot */
	uint32		range;
	int			natts;
	int			ppr;
	int			nrows;
	uint64	   *hashes;			/* nrows * natts */
	bool	   *need;			/* nrows * natts: key not NULL, not in yet */
	MemoryContext cxt;			/* of the arrays and the hashers */
	MemoryContext tmpcxt;		/* reset after each write */
	bool		have_hashers;
	AmqIdxHasher hashers[INDEX_MAX_KEYS];
} AmqIdxBatch;

static AmqIdxBatch batches[AMQIDX_MAX_BATCHES];
static int	batched_rows;		/* in all batches */
static ExecutorStart_hook_type prev_executor_start = NULL;

/* Write a batch into its index, then empty it. */
static void
batch_write(Relation index, AmqIdxBatch *b)
{
	MemoryContext old = MemoryContextSwitchTo(b->tmpcxt);
	int			natts = b->natts;

	while (b->nrows > 0 && insert_batch(index, b->range, b->nrows, b->hashes, b->need))
	{
		/* the first row with a key left takes the slow path */
		for (int row = 0; row < b->nrows; row++)
		{
			bool		left = false;

			for (int i = 0; i < natts; i++)
				left |= b->need[row * natts + i];
			if (!left)
				continue;
			if (!b->have_hashers)
			{
				MemoryContextSwitchTo(b->cxt);
				for (int i = 0; i < natts; i++)
					AmqIdxHasherInit(&b->hashers[i], index, i,
									 TupleDescAttr(RelationGetDescr(index), i)->atttypid);
				b->have_hashers = true;
				MemoryContextSwitchTo(b->tmpcxt);
			}
			insert_slow(index, b->range, b->ppr, &b->hashes[row * natts],
						&b->need[row * natts], b->hashers);
			memset(&b->need[row * natts], 0, sizeof(bool) * natts);
			break;
		}
		MemoryContextReset(b->tmpcxt);
	}
	batched_rows -= b->nrows;
	b->nrows = 0;
	MemoryContextSwitchTo(old);
	MemoryContextReset(b->tmpcxt);
}

/* Forget a batch (its transaction ended). */
static void
batch_free(AmqIdxBatch *b)
{
	batched_rows -= b->nrows;
	if (b->cxt != NULL)
		MemoryContextDelete(b->cxt);
	memset(b, 0, sizeof(*b));
}

/* Write the batch of another index than the one at hand, opened by OID. */
static void
batch_write_by_oid(AmqIdxBatch *b)
{
	Relation	index;

	if (b->nrows == 0)
		return;
	/* gone in this transaction (dropped, or created in an aborted subtransaction) */
	index = try_relation_open(b->indexid, RowExclusiveLock);
	if (index != NULL && index->rd_rel->relkind == RELKIND_INDEX &&
		index->rd_indam != NULL && index->rd_indam->ambuild == amqidxbuild)
		batch_write(index, b);
	batched_rows -= b->nrows;
	b->nrows = 0;
	if (index != NULL)
		relation_close(index, NoLock);
}

/*
 * Write what this backend holds back for the index: before it reads the
 * index, so that it finds the rows it inserted.
 */
void
AmqIdxFlushBatch(Relation index)
{
	for (int i = 0; i < AMQIDX_MAX_BATCHES; i++)
		if (batches[i].indexid == RelationGetRelid(index) && batches[i].nrows > 0)
			batch_write(index, &batches[i]);
}

/* Before commit (or prepare) every batch is written; at abort dropped. */
static void
batch_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			for (int i = 0; i < AMQIDX_MAX_BATCHES; i++)
				if (batches[i].indexid != InvalidOid)
					batch_write_by_oid(&batches[i]);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			for (int i = 0; i < AMQIDX_MAX_BATCHES; i++)
				if (batches[i].indexid != InvalidOid)
					batch_free(&batches[i]);
			break;
	}
}

/*
 * Every query this backend starts sees the rows it inserted before: a
 * parallel worker, which may build the bitmap of a scan, has no batch of
 * its own, and a query of a trigger runs while its statement inserts.
 */
static void
batch_executor_start(QueryDesc *queryDesc, int eflags)
{
	if (batched_rows > 0 && !IsParallelWorker())
		for (int i = 0; i < AMQIDX_MAX_BATCHES; i++)
			if (batches[i].indexid != InvalidOid)
				batch_write_by_oid(&batches[i]);
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Called once, when the library loads. */
void
AmqIdxInsertInit(void)
{
	RegisterXactCallback(batch_xact_callback, NULL);
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = batch_executor_start;
}

/* The batch of the index, made (or a slot freed for it) if it has none. */
static AmqIdxBatch *
batch_for(Relation index, int ppr)
{
	Oid			relid = RelationGetRelid(index);
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	AmqIdxBatch *b = NULL;

	for (int i = 0; i < AMQIDX_MAX_BATCHES; i++)
	{
		if (batches[i].indexid == relid)
			return &batches[i];
		if (b == NULL && batches[i].indexid == InvalidOid)
			b = &batches[i];
	}
	if (b == NULL)
	{
		/* every slot taken: the last one's index gets its rows now */
		b = &batches[AMQIDX_MAX_BATCHES - 1];
		batch_write_by_oid(b);
		batch_free(b);
	}
	b->indexid = relid;
	b->natts = natts;
	b->ppr = ppr;
	b->nrows = 0;
	b->have_hashers = false;
	b->cxt = AllocSetContextCreate(TopMemoryContext, "amq index insert batch",
								   ALLOCSET_DEFAULT_SIZES);
	b->tmpcxt = AllocSetContextCreate(b->cxt, "amq index insert batch write",
									  ALLOCSET_DEFAULT_SIZES);
	b->hashes = MemoryContextAlloc(b->cxt, sizeof(uint64) * AMQIDX_BATCH_ROWS * natts);
	b->need = MemoryContextAlloc(b->cxt, sizeof(bool) * AMQIDX_BATCH_ROWS * natts);
	return b;
}

/*
 * aminsert: hold a new heap tuple's keys back in the index's batch, written
 * when the next row goes to another range or the batch is full (and before
 * a scan by this backend or the commit).
 */
bool
amqidxinsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
			 Relation heapRel, IndexUniqueCheck checkUnique,
			 AMQ_AMINSERT_UNCHANGED_PARAM IndexInfo *indexInfo)
{
	AmqIdxInsertCache *c = insert_cache(index, indexInfo);
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	uint64		hashes[INDEX_MAX_KEYS];
	bool		any = false;
	uint32		range = ItemPointerGetBlockNumber(ht_ctid) / c->ppr;
	AmqIdxBatch *b;

	/*
	 * Hash first: a support function in SQL runs a query, whose start
	 * writes the batches (batch_executor_start).
	 */
	for (int i = 0; i < natts; i++)
	{
		hashes[i] = isnull[i] ? 0 : AmqIdxHash(&c->hashers[i], values[i]);
		any |= !isnull[i];
	}
	if (!any)
		return false;

	b = batch_for(index, c->ppr);
	if (b->nrows > 0 && (b->range != range || b->nrows == AMQIDX_BATCH_ROWS))
		batch_write(index, b);
	b->range = range;
	for (int i = 0; i < natts; i++)
	{
		b->need[b->nrows * natts + i] = !isnull[i];
		b->hashes[b->nrows * natts + i] = hashes[i];
	}
	b->nrows++;
	batched_rows++;
	return false;
}
