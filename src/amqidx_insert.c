/*-------------------------------------------------------------------------
 *
 * amqidx_insert.c
 *	  Inserting into an amq index.
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

#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "amqfilter.h"
#include "amqidx.h"
#include "kind_blocked.h"

/* segment sizes: the first of a sealed range's overflow, then doubling */
#define AMQIDX_OVERFLOW_FIRST	64

typedef struct AmqIdxInsertCache
{
	int			ppr;
	AmqIdxHasher hashers[INDEX_MAX_KEYS];
	MemoryContext tmpcxt;		/* reset after each insert */
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
		c->tmpcxt = AllocSetContextCreate(indexInfo->ii_Context, "amq index insert",
										  ALLOCSET_SMALL_SIZES);
		for (int i = 0; i < natts; i++)
			AmqIdxHasherInit(&c->hashers[i], index, i,
							 TupleDescAttr(RelationGetDescr(index), i)->atttypid);
		indexInfo->ii_AmCache = c;
		MemoryContextSwitchTo(old);
	}
	return c;
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
	uint8	   *hdr;
	uint64		nkeys;

	hbuf = ReadBuffer(index, seg.addr.blk);
	LockBuffer(hbuf, BUFFER_LOCK_EXCLUSIVE);
	AmqIdxCheckPage(index, BufferGetPage(hbuf), seg.addr.blk, AMQIDX_PAGE_DATA);
	hdr = (uint8 *) AmqIdxPageContent(BufferGetPage(hbuf)) + seg.addr.off;
	amq_parse_trusted(hdr, AMQ_HEADER_SIZE, &f);
	f.payload = NULL;
	if (amq_load32(hdr) != AMQ_MAGIC || f.kind != AMQ_KIND_BLOCKED ||
		amq_blocked_ops.check(&f) != AMQ_OK ||
		seg.addr.off + AMQ_HEADER_SIZE > AMQIDX_CONTENT)
		AmqIdxCorrupted(index, seg.addr.blk, "a dynamic segment header is malformed");
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
 * The fast path: under the directory page's share lock, add what needs
 * adding to segments with room.  False (nothing changed) when a column
 * needs a new segment or the range a record.
 */
static bool
insert_fast(Relation index, uint32 range, uint64 *hashes, bool *need)
{
	Buffer		metabuf;
	Buffer		dirbuf;
	AmqIdxMetaPage meta;
	BlockNumber dirblk;
	AmqIdxAddr	entry;
	AmqIdxRange rg;
	AmqIdxReader r;
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	bool		add[INDEX_MAX_KEYS];
	bool		ok = true;

	metabuf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(metabuf, BUFFER_LOCK_SHARE);
	meta = AmqIdxCheckMetaPage(index, BufferGetPage(metabuf));
	if (range >= meta->nranges)
	{
		UnlockReleaseBuffer(metabuf);
		return false;
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
		return false;
	}

	AmqIdxReaderInit(&r, index);
	AmqIdxReadRange(&r, entry, &rg);
	for (int i = 0; i < natts; i++)
	{
		bool		room;

		add[i] = need[i] && needs_key(&r, &rg, i, hashes[i], &room);
		if (add[i] && !room)
			ok = false;
	}
	AmqIdxReaderRelease(&r);

	if (ok)
	{
		for (int i = 0; i < natts; i++)
			if (add[i])
				add_in_place(index, rg.segs[i][rg.nsegs[i] - 1], hashes[i]);
	}
	UnlockReleaseBuffer(dirbuf);
	return ok;
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
				cap = (uint64) ppr * 64;
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

/* aminsert: add a new heap tuple's keys to its range's dynamic segments. */
bool
amqidxinsert(Relation index, Datum *values, bool *isnull, ItemPointer ht_ctid,
			 Relation heapRel, IndexUniqueCheck checkUnique,
			 AMQ_AMINSERT_UNCHANGED_PARAM IndexInfo *indexInfo)
{
	AmqIdxInsertCache *c = insert_cache(index, indexInfo);
	int			natts = IndexRelationGetNumberOfKeyAttributes(index);
	uint64		hashes[INDEX_MAX_KEYS];
	bool		need[INDEX_MAX_KEYS];
	bool		any = false;
	uint32		range = ItemPointerGetBlockNumber(ht_ctid) / c->ppr;
	MemoryContext old;

	for (int i = 0; i < natts; i++)
	{
		need[i] = !isnull[i];
		if (need[i])
		{
			hashes[i] = AmqIdxHash(&c->hashers[i], values[i]);
			any = true;
		}
	}
	if (!any)
		return false;

	old = MemoryContextSwitchTo(c->tmpcxt);
	if (!insert_fast(index, range, hashes, need))
		insert_slow(index, range, c->ppr, hashes, need, c->hashers);
	MemoryContextSwitchTo(old);
	MemoryContextReset(c->tmpcxt);
	return false;
}
