/*-------------------------------------------------------------------------
 *
 * amqidx_utils.c
 *	  The amq index's pages and blobs: page and metapage layout, reading
 *	  and appending blobs in the stream of data pages, range records, key
 *	  hashing and the filters the index stores (see amqidx.h).
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/genam.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "amqfilter.h"
#include "amqidx.h"
#include "kind_blocked.h"

/* ---- pages ---- */

/* A page of the index: all content, no free space hole. */
void
AmqIdxInitPage(Page page, uint16 type)
{
	AmqIdxPageOpaque opaque;

	PageInit(page, BLCKSZ, sizeof(AmqIdxPageOpaqueData));
	((PageHeader) page)->pd_lower = ((PageHeader) page)->pd_upper;
	opaque = AmqIdxPageGetOpaque(page);
	opaque->type = type;
	opaque->flags = 0;
	opaque->unused = 0;
	opaque->page_id = AMQIDX_PAGE_ID;
}

/* Initialize the metapage of an empty index. */
void
AmqIdxInitMetaPage(Page page, int pages_per_range, double fpr, int natts)
{
	AmqIdxMetaPage meta;

	AmqIdxInitPage(page, AMQIDX_PAGE_META);
	meta = AmqIdxPageGetMeta(page);
	meta->magic = AMQIDX_MAGIC;
	meta->version = AMQIDX_VERSION;
	meta->pages_per_range = pages_per_range;
	meta->natts = natts;
	meta->flags = 0;
	meta->fpr_option = fpr;
	meta->nranges = 0;
	meta->ndirpages = 0;
	meta->stream_end.blk = InvalidBlockNumber;
	meta->stream_end.off = 0;
	meta->sealed_keys = 0;
	meta->sealed_ranges = 0;
}

/* Report a corrupted index page. */
void
AmqIdxCorrupted(Relation index, BlockNumber blk, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("amq index \"%s\" is corrupted", RelationGetRelationName(index)),
			 errdetail("Block %u: %s.", blk, what),
			 errhint("REINDEX it.")));
}

/* An ERROR unless page blk is an initialized amq index page of the type. */
void
AmqIdxCheckPage(Relation index, Page page, BlockNumber blk, uint16 type)
{
	AmqIdxPageOpaque opaque;

	if (PageIsNew(page))
		AmqIdxCorrupted(index, blk, "the page is uninitialized");
	if (((PageHeader) page)->pd_special != AMQIDX_CONTENT_END)
		AmqIdxCorrupted(index, blk, "the page has a foreign layout");
	opaque = AmqIdxPageGetOpaque(page);
	if (opaque->page_id != AMQIDX_PAGE_ID)
		AmqIdxCorrupted(index, blk, "the page is not an amq index page");
	if (opaque->type != type)
		AmqIdxCorrupted(index, blk, "the page has an unexpected type");
}

/* A directory page whose entries all say "no record". */
void
AmqIdxInitDirPage(Page page)
{
	AmqIdxAddr *entries;

	AmqIdxInitPage(page, AMQIDX_PAGE_DIR);
	entries = AmqIdxPageGetDir(page);
	for (uint32 i = 0; i < AMQIDX_DIR_PER_PAGE; i++)
	{
		entries[i].blk = InvalidBlockNumber;
		entries[i].off = 0;
	}
}

/* Check the metapage (magic, version) and return it. */
AmqIdxMetaPage
AmqIdxCheckMetaPage(Relation index, Page page)
{
	AmqIdxMetaPage meta;

	AmqIdxCheckPage(index, page, AMQIDX_METAPAGE_BLKNO, AMQIDX_PAGE_META);
	meta = AmqIdxPageGetMeta(page);
	if (meta->magic != AMQIDX_MAGIC)
		AmqIdxCorrupted(index, AMQIDX_METAPAGE_BLKNO, "bad magic number");
	if (meta->version != AMQIDX_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("amq index \"%s\" has version %u, this bloomamq reads version %d",
						RelationGetRelationName(index), meta->version,
						AMQIDX_VERSION),
				 errhint("REINDEX it.")));
	if (meta->ndirpages > AMQIDX_MAX_DIRPAGES ||
		meta->nranges > meta->ndirpages * AMQIDX_DIR_PER_PAGE ||
		meta->natts != IndexRelationGetNumberOfKeyAttributes(index) ||
		meta->pages_per_range < 1 ||
		meta->pages_per_range > AMQIDX_MAX_PAGES_PER_RANGE)
		AmqIdxCorrupted(index, AMQIDX_METAPAGE_BLKNO, "inconsistent metapage");
	return meta;
}

/*
 * The range size the index was built with.  ALTER INDEX ... SET
 * (pages_per_range) changes only the reloption, which takes effect at
 * REINDEX: inserts and scans must both cut the heap as the build did.
 */
int
AmqIdxMetaPagesPerRange(Relation index)
{
	Buffer		buf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	int			ppr;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	ppr = AmqIdxCheckMetaPage(index, BufferGetPage(buf))->pages_per_range;
	UnlockReleaseBuffer(buf);
	return ppr;
}

/*
 * The options the index was built with, for the planner: from the
 * metapage, or from the reloptions when it is not a sound one (a damaged
 * index is reported by the scan, not by planning).
 */
void
AmqIdxBuiltOptions(Relation index, int *ppr, double *fpr_option)
{
	Buffer		buf;
	Page		page;
	AmqIdxMetaPage meta;

	*ppr = AmqIdxPagesPerRange(index);
	*fpr_option = AmqIdxFprOption(index);
	if (RelationGetNumberOfBlocks(index) == 0)
		return;
	buf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	page = BufferGetPage(buf);
	meta = AmqIdxPageGetMeta(page);
	if (!PageIsNew(page) &&
		((PageHeader) page)->pd_special == AMQIDX_CONTENT_END &&
		AmqIdxPageGetOpaque(page)->type == AMQIDX_PAGE_META &&
		meta->magic == AMQIDX_MAGIC && meta->version == AMQIDX_VERSION &&
		meta->pages_per_range >= 1 && meta->pages_per_range <= AMQIDX_MAX_PAGES_PER_RANGE &&
		(meta->fpr_option == 0.0 || amq_check_fpr(meta->fpr_option) == AMQ_OK))
	{
		*ppr = (int) meta->pages_per_range;
		*fpr_option = meta->fpr_option;
	}
	UnlockReleaseBuffer(buf);
}

/* A new, exclusively locked page at the end of the fork. */
BlockNumber
AmqIdxNewBuffer(Relation index, ForkNumber fork, Buffer *buf)
{
	LockRelationForExtension(index, ExclusiveLock);
	*buf = ReadBufferExtended(index, fork, P_NEW, RBM_NORMAL, NULL);
	UnlockRelationForExtension(index, ExclusiveLock);
	LockBuffer(*buf, BUFFER_LOCK_EXCLUSIVE);
	return BufferGetBlockNumber(*buf);
}

/* The address delta bytes further on in the stream. */
AmqIdxAddr
AmqIdxAddrAdd(AmqIdxAddr a, uint64 delta)
{
	uint64		pos = (uint64) a.off + delta;

	a.blk += (uint32) (pos / AMQIDX_CONTENT);
	a.off = (uint32) (pos % AMQIDX_CONTENT);
	return a;
}

/* ---- reading ---- */

/* Set up a reader of the index's byte stream, holding no page. */
void
AmqIdxReaderInit(AmqIdxReader *r, Relation index)
{
	r->index = index;
	r->buf = InvalidBuffer;
	r->blk = InvalidBlockNumber;
	r->locked = false;
	r->scratch = NULL;
	r->scratch_len = 0;
	r->mcxt = CurrentMemoryContext;
	r->nblocks = 0;
}

/* Unlock the reader's current page, keeping its pin. */
void
AmqIdxReaderUnlock(AmqIdxReader *r)
{
	if (r->locked)
	{
		LockBuffer(r->buf, BUFFER_LOCK_UNLOCK);
		r->locked = false;
	}
}

/* Release the reader's current page. */
void
AmqIdxReaderRelease(AmqIdxReader *r)
{
	AmqIdxReaderUnlock(r);
	if (BufferIsValid(r->buf))
		ReleaseBuffer(r->buf);
	r->buf = InvalidBuffer;
	r->blk = InvalidBlockNumber;
}

/* The content of data page blk, share-locked. */
static const char *
reader_page(AmqIdxReader *r, BlockNumber blk)
{
	if (blk != r->blk)
	{
		AmqIdxReaderRelease(r);
		/* the size is asked for (a system call) only past the last known */
		if (blk >= r->nblocks)
			r->nblocks = RelationGetNumberOfBlocks(r->index);
		if (blk == InvalidBlockNumber || blk == AMQIDX_METAPAGE_BLKNO ||
			blk >= r->nblocks)
			AmqIdxCorrupted(r->index, blk, "a blob address points outside the index");
		r->buf = ReadBuffer(r->index, blk);
		r->blk = blk;
		LockBuffer(r->buf, BUFFER_LOCK_SHARE);
		r->locked = true;
		AmqIdxCheckPage(r->index, BufferGetPage(r->buf), blk, AMQIDX_PAGE_DATA);
	}
	else if (!r->locked)
	{
		LockBuffer(r->buf, BUFFER_LOCK_SHARE);
		r->locked = true;
	}
	return AmqIdxPageContent(BufferGetPage(r->buf));
}

/*
 * len bytes at a + delta: a pointer into the page when they lie in one,
 * else a copy in the reader's scratch.  Good until the next read.
 */
const uint8 *
AmqIdxRead(AmqIdxReader *r, AmqIdxAddr a, uint64 delta, uint32 len)
{
	AmqIdxAddr	p = AmqIdxAddrAdd(a, delta);
	uint32		done = 0;

	if (p.off + len <= AMQIDX_CONTENT)
		return (const uint8 *) reader_page(r, p.blk) + p.off;

	if (r->scratch_len < len)
	{
		MemoryContext old = MemoryContextSwitchTo(r->mcxt);

		if (r->scratch)
			pfree(r->scratch);
		r->scratch = palloc(Max(len, 1024));
		r->scratch_len = Max(len, 1024);
		MemoryContextSwitchTo(old);
	}
	while (done < len)
	{
		uint32		n = Min(len - done, AMQIDX_CONTENT - p.off);

		memcpy(r->scratch + done, reader_page(r, p.blk) + p.off, n);
		done += n;
		p.blk++;
		p.off = 0;
	}
	return r->scratch;
}

/* Read a range record. */
void
AmqIdxReadRange(AmqIdxReader *r, AmqIdxAddr a, AmqIdxRange *rg)
{
	AmqIdxRangeDisk hdr;
	AmqIdxColumnDisk cols[INDEX_MAX_KEYS];
	int			natts = IndexRelationGetNumberOfKeyAttributes(r->index);
	uint64		pos;

	memcpy(&hdr, AmqIdxRead(r, a, 0, sizeof(hdr)), sizeof(hdr));
	if (hdr.natts != natts || (hdr.flags & ~AMQIDX_RANGE_FLAGS) != 0)
		AmqIdxCorrupted(r->index, a.blk, "a range record is malformed");
	memcpy(cols, AmqIdxRead(r, a, sizeof(hdr), natts * sizeof(AmqIdxColumnDisk)),
		   natts * sizeof(AmqIdxColumnDisk));
	pos = sizeof(hdr) + natts * sizeof(AmqIdxColumnDisk);

	rg->range = hdr.range;
	rg->natts = hdr.natts;
	rg->flags = hdr.flags;
	for (int i = 0; i < natts; i++)
	{
		if (cols[i].nsegs > AMQIDX_MAX_SEGS)
			AmqIdxCorrupted(r->index, a.blk, "a range record is malformed");
		rg->sealed[i] = cols[i].sealed;
		memcpy(rg->sealed_header[i], cols[i].sealed_header, AMQ_HEADER_SIZE);
		rg->nsegs[i] = cols[i].nsegs;
		rg->reseal_from[i] = (hdr.flags & AMQIDX_RANGE_RESEALING) ?
			Min(cols[i].reseal_from, cols[i].nsegs) : 0;
		rg->segs[i] = palloc(sizeof(AmqIdxSeg) * Max(cols[i].nsegs, 1));
		if (cols[i].nsegs > 0)
			memcpy(rg->segs[i],
				   AmqIdxRead(r, a, pos, cols[i].nsegs * sizeof(AmqIdxSeg)),
				   cols[i].nsegs * sizeof(AmqIdxSeg));
		pos += cols[i].nsegs * sizeof(AmqIdxSeg);
	}
}

/*
 * Read and check a filter's header.  Pages are trusted as far as
 * PostgreSQL trusts them, but a bad header would send a probe outside the
 * filter, so its geometry is checked as any stored filter's is.
 */
static void
decode_filter(AmqIdxReader *r, AmqIdxAddr a, const uint8 *hdr, AmqIdxFilter *f)
{
	if (amq_load32(hdr) != AMQ_MAGIC)
		AmqIdxCorrupted(r->index, a.blk, "a filter header is malformed");
	amq_parse_trusted(hdr, AMQ_HEADER_SIZE, &f->f);
	f->f.payload = NULL;
	f->ops = amq_kind_ops(f->f.kind);
	if (!amq_check_version(&f->f, hdr[AMQ_OFF_VERSION]) ||
		f->ops == NULL || f->ops->probe_span == NULL ||
		f->f.payload_len > AMQ_MAX_PAYLOAD || f->ops->check(&f->f) != AMQ_OK)
		AmqIdxCorrupted(r->index, a.blk, "a filter header is malformed");
	f->payload = AmqIdxAddrAdd(a, AMQ_HEADER_SIZE);
}

/* Read the filter blob at a, decoding its header. */
void
AmqIdxReadFilter(AmqIdxReader *r, AmqIdxAddr a, AmqIdxFilter *f)
{
	uint8		hdr[AMQ_HEADER_SIZE];

	memcpy(hdr, AmqIdxRead(r, a, 0, AMQ_HEADER_SIZE), AMQ_HEADER_SIZE);
	decode_filter(r, a, hdr, f);
}

/* A sealed filter, from the header copy in its range record. */
void
AmqIdxSealedFilter(AmqIdxReader *r, const AmqIdxRange *rg, int att,
				   AmqIdxFilter *f)
{
	decode_filter(r, rg->sealed[att].addr, rg->sealed_header[att], f);
}

/* Probe a filter in the pages: read only the span the probe needs. */
bool
AmqIdxFilterContains(AmqIdxReader *r, const AmqIdxFilter *f, uint64 hash)
{
	uint64		off;
	uint32		len;

	if (f->f.nkeys == 0)
		return false;
	f->ops->probe_span(&f->f, hash, &off, &len);
	if (off + len > f->f.payload_len)
		AmqIdxCorrupted(r->index, f->payload.blk, "a probe falls outside its filter");
	return f->ops->contains_span(&f->f, hash, AmqIdxRead(r, f->payload, off, len));
}

/* ---- writing ---- */

/*
 * Set up a writer appending to the byte stream where the metapage says it
 * ends, with the metapage's free space (metapage NULL: an empty index).
 */
void
AmqIdxWriterInit(AmqIdxWriter *w, Relation index, bool wal, Page metapage,
				 ForkNumber fork)
{
	w->index = index;
	w->wal = wal;
	w->fork = fork;
	w->nfreed = 0;
	w->maxfreed = 0;
	w->freed = NULL;
	if (metapage != NULL)
	{
		w->end = AmqIdxPageGetMeta(metapage)->stream_end;
		memcpy(&w->fs, AmqIdxPageGetFreeSpace(metapage), sizeof(w->fs));
	}
	else
	{
		w->end.blk = InvalidBlockNumber;
		w->end.off = 0;
		memset(&w->fs, 0, sizeof(w->fs));
	}
}

/* Free page blk when the writer's record is switched in (and not before). */
void
AmqIdxFreeLater(AmqIdxWriter *w, BlockNumber blk)
{
	if (w->nfreed == w->maxfreed)
	{
		w->maxfreed = Max(w->maxfreed * 2, 64);
		w->freed = w->freed ? repalloc(w->freed, sizeof(BlockNumber) * w->maxfreed) :
			palloc(sizeof(BlockNumber) * w->maxfreed);
	}
	w->freed[w->nfreed++] = blk;
}

/* Remove run i of the list; unused slots stay zero. */
static void
free_space_remove(AmqIdxFreeSpace *fs, uint32 i)
{
	memmove(&fs->runs[i], &fs->runs[i + 1], sizeof(AmqIdxFreeRun) * (fs->nruns - i - 1));
	fs->nruns--;
	fs->runs[fs->nruns].start = 0;
	fs->runs[fs->nruns].npages = 0;
}

/*
 * Add a run of free pages to the list, merged with its neighbours.  When
 * the list is full the smallest run is forgotten: its pages stay unused
 * until VACUUM's next sweep finds them.
 */
void
AmqIdxFreeSpaceAdd(AmqIdxFreeSpace *fs, BlockNumber start, uint32 npages)
{
	uint32		i = 0;
	uint32		smallest = 0;

	if (npages == 0 || fs->nruns > AMQIDX_MAX_FREE_RUNS)
		return;
	while (i < fs->nruns && fs->runs[i].start < start)
		i++;
	/* after the run before, before the run after: join them */
	if (i > 0 && fs->runs[i - 1].start + fs->runs[i - 1].npages == start)
	{
		fs->runs[i - 1].npages += npages;
		if (i < fs->nruns && start + npages == fs->runs[i].start)
		{
			fs->runs[i - 1].npages += fs->runs[i].npages;
			free_space_remove(fs, i);
		}
		return;
	}
	if (i < fs->nruns && start + npages == fs->runs[i].start)
	{
		fs->runs[i].start = start;
		fs->runs[i].npages += npages;
		return;
	}
	if (fs->nruns == AMQIDX_MAX_FREE_RUNS)
	{
		for (uint32 j = 1; j < fs->nruns; j++)
			if (fs->runs[j].npages < fs->runs[smallest].npages)
				smallest = j;
		if (fs->runs[smallest].npages >= npages)
			return;
		free_space_remove(fs, smallest);
		if (smallest < i)
			i--;
	}
	memmove(&fs->runs[i + 1], &fs->runs[i], sizeof(AmqIdxFreeRun) * (fs->nruns - i));
	fs->runs[i].start = start;
	fs->runs[i].npages = npages;
	fs->nruns++;
}

/* Where a blob starts on a fresh page. */
static inline uint32
fresh_offset(bool block_aligned)
{
	return block_aligned ? (uint32) ((32 - AMQ_HEADER_SIZE % 32) % 32) : 0;
}

/* The pages a blob of len bytes needs from a fresh page. */
static uint32
fresh_pages(Size len, bool block_aligned)
{
	return (uint32) ((fresh_offset(block_aligned) + len + AMQIDX_CONTENT - 1) /
					 AMQIDX_CONTENT);
}

/* Does a free run hold npages? */
static bool
free_run_fits(const AmqIdxFreeSpace *fs, uint32 npages)
{
	for (uint32 i = 0; i < fs->nruns; i++)
		if (fs->runs[i].npages >= npages)
			return true;
	return false;
}

/*
 * Free a page: the stream's run grows by it when it is the page after the
 * run (and by the list's run after that), else it goes to the list.
 */
static void
free_page(AmqIdxFreeSpace *fs, BlockNumber blk)
{
	if (fs->run_end == 0 || blk != fs->run_end)
	{
		AmqIdxFreeSpaceAdd(fs, blk, 1);
		return;
	}
	fs->run_end++;
	for (uint32 i = 0; i < fs->nruns; i++)
		if (fs->runs[i].start == fs->run_end)
		{
			fs->run_end += fs->runs[i].npages;
			free_space_remove(fs, i);
			break;
		}
}

/*
 * Where a blob that needs npages whole pages from a fresh page starts: the
 * first free run that holds it, which becomes the stream's run, else the
 * index's end.  Filling the lowest free pages first leaves the free space
 * at the end of the index, where VACUUM can truncate it.  The rest of the run the stream was in goes back to the
 * list.
 */
static BlockNumber
fresh_start(AmqIdxWriter *w, uint32 npages)
{
	AmqIdxFreeSpace *fs = &w->fs;
	int			best = -1;			/* the first that fits */
	BlockNumber start;

	if (fs->run_end != 0)
	{
		BlockNumber next = (w->end.blk == InvalidBlockNumber) ? InvalidBlockNumber :
			w->end.blk + 1;

		if (next != InvalidBlockNumber && next < fs->run_end)
			AmqIdxFreeSpaceAdd(fs, next, fs->run_end - next);
		fs->run_end = 0;
	}
	for (uint32 i = 0; i < fs->nruns && best < 0; i++)
		if (fs->runs[i].npages >= npages)
			best = (int) i;
	if (best < 0)
		return InvalidBlockNumber;
	start = fs->runs[best].start;
	fs->run_end = start + fs->runs[best].npages;
	free_space_remove(fs, (uint32) best);
	return start;
}

/* The heavyweight lock that amq_index_check() shares and writers exclude. */
void
AmqIdxLockSpace(Relation index, LOCKMODE mode)
{
	LockPage(index, AMQIDX_METAPAGE_BLKNO, mode);
}

void
AmqIdxUnlockSpace(Relation index, LOCKMODE mode)
{
	UnlockPage(index, AMQIDX_METAPAGE_BLKNO, mode);
}

/* The bytes of the filter blob whose header this is (header and payload). */
uint64
AmqIdxFilterBlobLen(const uint8 *header)
{
	return AMQ_HEADER_SIZE + amq_load64(header + AMQ_OFF_PAYLEN);
}

/* Copy n bytes into a page of the stream, logged or not. */
static void
write_page(AmqIdxWriter *w, Buffer buf, bool is_new, uint32 off,
		   const uint8 *data, uint32 n)
{
	if (w->wal)
	{
		GenericXLogState *state = GenericXLogStart(w->index);
		Page		page = GenericXLogRegisterBuffer(state, buf,
													 is_new ? GENERIC_XLOG_FULL_IMAGE : 0);

		if (is_new)
			AmqIdxInitPage(page, AMQIDX_PAGE_DATA);
		memcpy(AmqIdxPageContent(page) + off, data, n);
		GenericXLogFinish(state);
	}
	else
	{
		Page		page = BufferGetPage(buf);

		START_CRIT_SECTION();
		if (is_new)
			AmqIdxInitPage(page, AMQIDX_PAGE_DATA);
		memcpy(AmqIdxPageContent(page) + off, data, n);
		MarkBufferDirty(buf);
		END_CRIT_SECTION();
	}
}

/*
 * An exclusively locked free page of the stream's run, to be written anew:
 * a data page whose blobs are no longer used, or a page an aborted
 * extension left new.
 */
static Buffer
reuse_buffer(AmqIdxWriter *w, BlockNumber blk)
{
	Buffer		buf = ReadBufferExtended(w->index, w->fork, blk, RBM_NORMAL, NULL);
	Page		page;

	LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
	page = BufferGetPage(buf);
	if (!PageIsNew(page))
		AmqIdxCheckPage(w->index, page, blk, AMQIDX_PAGE_DATA);
	return buf;
}

/*
 * Append a blob at the stream's end and return its address.  A blob
 * continues on the next block, so it only goes on past the current page
 * if the pages it needs are the rest of the stream's free run or, at the
 * index's end, new ones when no free run holds it; otherwise it starts on
 * a fresh page: of the first free run that holds it, else a new one.  A block-aligned blob
 * is a filter whose header stays in one page and whose payload starts at a
 * multiple of 32 bytes, so a split block Bloom filter's 32-byte blocks
 * never straddle two pages (inserts set them in place).
 */
AmqIdxAddr
AmqIdxAppend(AmqIdxWriter *w, const uint8 *data, Size len, bool block_aligned)
{
	AmqIdxAddr	start = w->end;
	BlockNumber nblocks = RelationGetNumberOfBlocksInFork(w->index, w->fork);
	Size		done = 0;
	bool		fresh;
	bool		extend;

	Assert(len > 0);
	if (start.blk != InvalidBlockNumber && block_aligned)
	{
		/* (off + header) % 32 == 0, header in the page */
		uint32		pad = (uint32) ((32 - (start.off + AMQ_HEADER_SIZE) % 32) % 32);

		start.off += pad;
		if (start.off + AMQ_HEADER_SIZE > AMQIDX_CONTENT)
			start.blk = InvalidBlockNumber;
	}
	/* may the blob go on from here? */
	if (start.blk != InvalidBlockNumber)
	{
		if (start.off >= AMQIDX_CONTENT)
			start.blk = InvalidBlockNumber;
		else if (start.off + len > AMQIDX_CONTENT &&
				 (w->fs.run_end != 0 ?
				  AmqIdxAddrAdd(start, len - 1).blk >= w->fs.run_end :
				  (start.blk + 1 != nblocks ||
				   free_run_fits(&w->fs, fresh_pages(len, block_aligned)))))
			start.blk = InvalidBlockNumber;
	}

	fresh = (start.blk == InvalidBlockNumber);
	if (fresh)
	{
		start.off = fresh_offset(block_aligned);
		start.blk = fresh_start(w, fresh_pages(len, block_aligned));
	}
	/* pages past the first are new ones at the end, or pages of the run */
	extend = (w->fs.run_end == 0);

	{
		AmqIdxAddr	p = start;
		bool		is_new = fresh;

		while (done < len)
		{
			Buffer		buf;
			uint32		n = (uint32) Min(len - done, (Size) (AMQIDX_CONTENT - p.off));

			if (is_new && extend)
			{
				BlockNumber blk = AmqIdxNewBuffer(w->index, w->fork, &buf);

				if (p.blk == InvalidBlockNumber)
				{
					p.blk = blk;
					start.blk = blk;
				}
				else if (blk != p.blk)
					elog(ERROR, "amq index \"%s\" was extended concurrently",
						 RelationGetRelationName(w->index));
			}
			else if (is_new)
			{
				Assert(p.blk < w->fs.run_end);
				buf = reuse_buffer(w, p.blk);
			}
			else
			{
				buf = ReadBufferExtended(w->index, w->fork, p.blk, RBM_NORMAL, NULL);
				LockBuffer(buf, BUFFER_LOCK_EXCLUSIVE);
				AmqIdxCheckPage(w->index, BufferGetPage(buf), p.blk, AMQIDX_PAGE_DATA);
			}
			write_page(w, buf, is_new, p.off, data + done, n);
			UnlockReleaseBuffer(buf);
			done += n;
			if (p.off + n == AMQIDX_CONTENT)
			{
				p.blk++;
				p.off = 0;
				is_new = true;
			}
			else
				p.off += n;
		}
		w->end = p;
		/* the next blob may only continue this page if it is not full */
		if (p.off == 0)
			w->end.blk = p.blk - 1, w->end.off = AMQIDX_CONTENT;
	}
	return start;
}

/* ---- range records ---- */

/* A record of a range with no filter yet; segs[] is the caller's to set. */
void
AmqIdxRangeInit(AmqIdxRange *rg, uint32 range, int natts, uint16 flags)
{
	memset(rg, 0, sizeof(*rg));
	rg->range = range;
	rg->natts = natts;
	rg->flags = flags;
	for (int i = 0; i < natts; i++)
		rg->sealed[i].addr.blk = InvalidBlockNumber;
}

/*
 * Append an empty dynamic segment for capacity keys and add it to column
 * att of the record (whose segs[att] is copied into a new palloc'd array).
 */
void
AmqIdxAppendSegment(AmqIdxWriter *w, AmqIdxRange *rg, int att, uint32 capacity,
					double fpr, const AmqIdxHasher *h)
{
	struct varlena *v;
	AmqIdxSeg  *segs;

	if (rg->nsegs[att] >= AMQIDX_MAX_SEGS)
		elog(ERROR, "amq index range %u has too many segments", rg->range);
	v = AmqIdxNewSegment(capacity, fpr, h);
	segs = palloc(sizeof(AmqIdxSeg) * (rg->nsegs[att] + 1));
	if (rg->nsegs[att] > 0)
		memcpy(segs, rg->segs[att], sizeof(AmqIdxSeg) * rg->nsegs[att]);
	segs[rg->nsegs[att]].addr = AmqIdxAppend(w, (uint8 *) VARDATA(v),
											 VARSIZE(v) - VARHDRSZ, true);
	segs[rg->nsegs[att]].capacity = capacity;
	rg->segs[att] = segs;
	rg->nsegs[att]++;
	pfree(v);
}

/*
 * Append the record and, in one WAL record, point the range's directory
 * entry at it and move the metapage's stream end and free space (with the
 * pages freed by AmqIdxFreeLater, and its count of ranges and of sealed
 * keys).  The caller holds both pages exclusively.
 */
void
AmqIdxSwitchRecord(Relation index, Buffer metabuf, Buffer dirbuf,
				   AmqIdxWriter *w, const AmqIdxRange *rg,
				   uint64 sealed_keys, uint64 sealed_ranges)
{
	AmqIdxAddr	rec = AmqIdxAppendRange(w, rg);
	GenericXLogState *state;
	Page		metapage;
	AmqIdxMetaPage m;

	/* pages the old record's blobs leave free: from this WAL record on */
	for (int i = 0; i < w->nfreed; i++)
		free_page(&w->fs, w->freed[i]);
	w->nfreed = 0;

	state = GenericXLogStart(index);
	AmqIdxPageGetDir(GenericXLogRegisterBuffer(state, dirbuf, 0))[rg->range % AMQIDX_DIR_PER_PAGE] = rec;
	metapage = GenericXLogRegisterBuffer(state, metabuf, 0);
	m = AmqIdxPageGetMeta(metapage);
	memcpy(AmqIdxPageGetFreeSpace(metapage), &w->fs, sizeof(w->fs));
	m->stream_end = w->end;
	m->nranges = Max(m->nranges, rg->range + 1);
	m->sealed_keys += sealed_keys;
	m->sealed_ranges += sealed_ranges;
	GenericXLogFinish(state);
}

/* The bytes of a range record. */
Size
AmqIdxRangeSize(const AmqIdxRange *rg)
{
	Size		size = sizeof(AmqIdxRangeDisk) + rg->natts * sizeof(AmqIdxColumnDisk);

	for (int i = 0; i < rg->natts; i++)
		size += rg->nsegs[i] * sizeof(AmqIdxSeg);
	return size;
}

/* Write a range record into out (AmqIdxRangeSize bytes). */
void
AmqIdxRangeSerialize(const AmqIdxRange *rg, uint8 *out)
{
	AmqIdxRangeDisk hdr;
	Size		pos;

	memset(&hdr, 0, sizeof(hdr));
	hdr.range = rg->range;
	hdr.natts = rg->natts;
	hdr.flags = rg->flags;
	memcpy(out, &hdr, sizeof(hdr));
	pos = sizeof(hdr);
	for (int i = 0; i < rg->natts; i++)
	{
		AmqIdxColumnDisk col;

		if (rg->nsegs[i] > AMQIDX_MAX_SEGS)
			elog(ERROR, "amq index range %u has too many segments", rg->range);
		memset(&col, 0, sizeof(col));
		col.sealed = rg->sealed[i];
		col.nsegs = (uint16) rg->nsegs[i];
		if (rg->flags & AMQIDX_RANGE_RESEALING)
			col.reseal_from = (uint16) rg->reseal_from[i];
		if (rg->sealed[i].addr.blk != InvalidBlockNumber)
			memcpy(col.sealed_header, rg->sealed_header[i], AMQ_HEADER_SIZE);
		memcpy(out + pos, &col, sizeof(col));
		pos += sizeof(col);
	}
	for (int i = 0; i < rg->natts; i++)
	{
		if (rg->nsegs[i] > 0)
			memcpy(out + pos, rg->segs[i], rg->nsegs[i] * sizeof(AmqIdxSeg));
		pos += rg->nsegs[i] * sizeof(AmqIdxSeg);
	}
}

/* Append a range record as a blob; its address. */
AmqIdxAddr
AmqIdxAppendRange(AmqIdxWriter *w, const AmqIdxRange *rg)
{
	Size		size = AmqIdxRangeSize(rg);
	uint8	   *buf = palloc(size);
	AmqIdxAddr	a;

	AmqIdxRangeSerialize(rg, buf);
	a = AmqIdxAppend(w, buf, size, false);
	pfree(buf);
	return a;
}

/*
 * Rewrite, in place, the header and column entries of the range record at
 * a (its flags and where a reseal starts; its size and segment lists stay
 * as they are).  The caller holds the range's directory page exclusively,
 * which keeps every reader of the record away.
 */
void
AmqIdxRewriteRangeHeader(Relation index, AmqIdxAddr a, const AmqIdxRange *rg)
{
	Size		len = sizeof(AmqIdxRangeDisk) + rg->natts * sizeof(AmqIdxColumnDisk);
	uint8	   *buf = palloc(AmqIdxRangeSize(rg));
	GenericXLogState *state;
	Buffer		bufs[2];
	int			nbufs = 0;
	Size		done = 0;

	AmqIdxRangeSerialize(rg, buf);
	state = GenericXLogStart(index);
	while (done < len)
	{
		AmqIdxAddr	p = AmqIdxAddrAdd(a, done);
		uint32		n = (uint32) Min(len - done, (Size) (AMQIDX_CONTENT - p.off));
		Page		page;

		if (nbufs == lengthof(bufs))
			elog(ERROR, "amq index range record header spans more than two pages");
		bufs[nbufs] = ReadBuffer(index, p.blk);
		LockBuffer(bufs[nbufs], BUFFER_LOCK_EXCLUSIVE);
		AmqIdxCheckPage(index, BufferGetPage(bufs[nbufs]), p.blk, AMQIDX_PAGE_DATA);
		page = GenericXLogRegisterBuffer(state, bufs[nbufs], 0);
		nbufs++;
		memcpy(AmqIdxPageContent(page) + p.off, buf + done, n);
		done += n;
	}
	GenericXLogFinish(state);
	for (int i = 0; i < nbufs; i++)
		UnlockReleaseBuffer(bufs[i]);
	pfree(buf);
}

/* Record a sealed filter written at a in the range. */
void
AmqIdxSetSealed(AmqIdxRange *rg, int att, AmqIdxAddr a,
				const struct varlena *filter)
{
	AmqFilter	f;

	amq_parse_trusted((const uint8 *) VARDATA(filter),
					  VARSIZE(filter) - VARHDRSZ, &f);
	rg->sealed[att].addr = a;
	rg->sealed[att].capacity = (uint32) Min(f.nkeys, PG_UINT32_MAX);
	memcpy(rg->sealed_header[att], VARDATA(filter), AMQ_HEADER_SIZE);
}

/* ---- keys and filters ---- */

/*
 * Keys are hashed by the opclass's support function 1.  When that is
 * amq_hash, the canonical hash of amq_hashing.c is computed inline, for the
 * key's own type: an int4 column probed with an int8 value hashes it as
 * int8, which gives the same hash for the same number.
 */
void
AmqIdxHasherInit(AmqIdxHasher *h, Relation index, int attno, Oid keytype)
{
	Oid			coltype = TupleDescAttr(RelationGetDescr(index), attno)->atttypid;
	FmgrInfo   *proc;
	FmgrInfo	other;

	/*
	 * A polymorphic class (anyenum, anyarray, anyrange) gives its operator's
	 * pseudo-type as a probe's type: hash it as the column's own type, the
	 * type the build hashed.
	 */
	if (IsPolymorphicType(keytype))
		keytype = coltype;

	if (keytype == index->rd_opcintype[attno] || keytype == coltype)
		proc = index_getprocinfo(index, attno + 1, AMQIDX_HASH_PROC);
	else
	{
		/* a probe value of another type of the family: its own function */
		Oid			procoid = get_opfamily_proc(index->rd_opfamily[attno], keytype,
												keytype, AMQIDX_HASH_PROC);

		if (!OidIsValid(procoid))
			elog(ERROR, "missing support function %d(%u,%u) in opfamily %u",
				 AMQIDX_HASH_PROC, keytype, keytype, index->rd_opfamily[attno]);
		fmgr_info(procoid, &other);
		proc = &other;
	}

	memset(h, 0, sizeof(*h));
	h->collation = index->rd_indcollation[attno];
	h->internal = (proc->fn_addr == amq_hash);
	if (h->internal)
	{
		if (!AmqTypeHashable(keytype, InvalidOid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("data type %s cannot be a key of an amq index",
							format_type_be(keytype)),
					 errdetail("A key type needs a default hash operator class with an extended hash function.")));
		AmqHasherInit(&h->canon, keytype, h->collation, CurrentMemoryContext);
	}
	else
		fmgr_info_copy(&h->proc, proc, CurrentMemoryContext);
}

/* The hash of one key as the index stores it. */
uint64
AmqIdxHash(AmqIdxHasher *h, Datum value)
{
	if (h->internal)
		return AmqHashDatum(&h->canon, value);
	return (uint64) DatumGetInt64(FunctionCall1Coll(&h->proc, h->collation, value));
}

/* Record in f the key family, hash scheme and key type of h's keys. */
void
AmqIdxSetKeyInfo(AmqFilter *f, const AmqIdxHasher *h)
{
	if (h->internal)
	{
		f->key_family = h->canon.family;
		f->hash_scheme = h->canon.scheme;
		f->key_type = h->canon.key_type;
	}
	else
	{
		f->key_family = AMQ_FAMILY_OTHER;
		f->hash_scheme = AMQ_HASH_TYPE;
		f->key_type = 0;
	}
}

/*
 * The sealed filter of n key hashes (sorted and deduplicated here): the
 * static kind with the fewest bits per key at this fpr, which is at least
 * AMQIDX_FPR_MIN, so fuse or ribbon: kinds a probe reads by span.
 */
struct varlena *
AmqIdxBuildSealed(uint64 *hashes, Size n, double fpr, const AmqIdxHasher *h)
{
	AmqFilter	keyinfo;
	const AmqKindOps *ops;
	bool		parquet;
	uint64	   *scratch = palloc_extended(sizeof(uint64) * Max(n, 1),
										  MCXT_ALLOC_HUGE);

	n = amq_sort_unique(hashes, n, scratch);
	pfree(scratch);
	memset(&keyinfo, 0, sizeof(keyinfo));
	AmqIdxSetKeyInfo(&keyinfo, h);
	ops = AmqResolveKind("auto", true, fpr, &parquet);
	if (ops->probe_span == NULL)
		elog(ERROR, "amq index sealed filter of kind %s cannot be probed in pages", ops->name);
	return (struct varlena *) DatumGetPointer(AmqBuildFromHashes(ops->id, fpr, &keyinfo,
																 hashes, n, 0));
}

/* An empty dynamic segment for capacity keys. */
struct varlena *
AmqIdxNewSegment(uint32 capacity, double fpr, const AmqIdxHasher *h)
{
	AmqFilter	f;
	struct varlena *v;

	AmqPlanOrError(&f, AMQ_KIND_BLOCKED, capacity, fpr, 0);
	AmqIdxSetKeyInfo(&f, h);
	v = AmqFilterAlloc(&f);
	AmqFilterFinish(v, &f);
	return v;
}
