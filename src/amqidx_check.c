/*-------------------------------------------------------------------------
 *
 * amqidx_check.c
 *	  amq_index_check(index, heapallindexed): verification of an amq index,
 *	  in the spirit of amcheck's bt_index_check.
 *
 * The check reads every page of the index and follows every address in
 * it, trusting nothing it reads: each offset and length is checked against
 * the page or the stream before it is used, so a damaged index gives an
 * ERROR with SQLSTATE XX002 (index_corrupted) that names the block, and
 * the range where there is one, and never a crash.  It checks
 *	  - every page: its header's bounds and its special space (page id, type,
 *		reserved fields).  Block 0 is the metapage, the others directory or
 *		data pages, or new (all-zero) pages that an extension interrupted
 *		by a crash leaves behind, allowed as long as nothing points there;
 *	  - the metapage: magic, version, pages_per_range, the number of key
 *		columns, flags, the fpr option, the directory's size and pages, the
 *		stream's end, the free space (runs of data or new pages, in order,
 *		apart), and that its counts of sealed filters and their keys (which
 *		only ever grow) are at least those of the filters in use;
 *	  - the directory: every entry in use points at a range record inside
 *		the stream, the entries past the last range are empty, and every
 *		directory page is listed once;
 *	  - every range record: its range number is its directory slot, its
 *		column count, flags and reserved fields, and each column's sealed
 *		filter (only in a range that was sealed) and segments;
 *	  - every filter: it lies inside the stream, on data pages; its bytes
 *		pass amq_parse(), the gate every untrusted amqfilter passes,
 *		checksum included (but a dynamic segment's checksum goes stale as
 *		inserts set its bits in place, so only its structure is checked);
 *		its kind (static for a sealed filter, blocked for a segment); its
 *		key fields, those the column's hasher gives; a sealed filter's
 *		header equal to its copy in the record and its key count to the
 *		record's; a segment's payload 32-byte aligned and of the size its
 *		capacity plans;
 *	  - that no two blobs (records and filters) in use overlap, and that none
 *		lies in free space: a free run, or the rest of the run the stream
 *		is in.
 * A range with no record is allowed (its pages held no rows when the index
 * was built), and so is a record past the end of the heap (VACUUM truncated
 * the heap after the index summarized the range): neither loses a row.
 *
 * With heapallindexed the heap is then scanned, and every row's key of
 * every column (NULLs are not indexed) must probe true in the sealed filter
 * or a segment of its range: a miss is a false negative, which an amq
 * index must never give.  A row with a key in a range without a record is
 * one too.  Keys are hashed with the operator class's support function 1,
 * as inserts hash them, and probed in copies of the range's filters.
 *
 * Locking.  AccessShareLock on the table and the index, as bt_index_check:
 * inserts and VACUUM go on meanwhile.  Whatever appends to the stream,
 * frees pages, switches a directory entry or adds a page holds the
 * metapage's heavyweight page lock in ExclusiveLock (amqidx.h); the
 * structural check holds it in ShareLock, so it sees one consistent
 * picture of the directory, the records, the filters and the free space,
 * in which only the bits and key counts of dynamic segments change.
 * Meanwhile inserts that need no new segment go on, and the others and
 * VACUUM's reseals wait.  Blocks past the size taken with the directory
 * are not looked at.  On a standby, replay does not take that lock: what
 * looks corrupted while replay moves on is checked again
 * (check_structure_in_recovery).  No two buffer locks are held at once
 * but a directory page's and a data page's, in the order scans take them,
 * which no replayed record takes the other way round.
 *
 * heapallindexed registers an MVCC snapshot before it looks at the
 * directory, as bt_index_check does: every row the snapshot sees was
 * inserted by a transaction that had finished its index insert by then, so
 * the record of its range from then on must find its key.  The heap is
 * read with that snapshot by the index build scan, which computes
 * expressions and a partial index's predicate as inserts do.  The space
 * lock is not held meanwhile: each range's record and filters are copied
 * under its directory page's share lock, which keeps their pages from being
 * freed while they are read, and a reseal switches in a record that holds
 * every key the snapshot sees (its heap scan keeps rows any transaction
 * may still see).
 * Index expressions and the support function run as the table's owner,
 * under a restricted search_path, as they do in bt_index_check.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include AMQ_XLOGRECOVERY_H
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "amqidx.h"

PG_FUNCTION_INFO_V1(amq_index_check);

/* the "range" of an error that concerns no range */
#define NO_RANGE				PG_UINT32_MAX

/* the page type of a new (all-zero) page, beside AMQIDX_PAGE_* */
#define PAGE_NEW				0

/*
 * How many times a check on a standby tries while replay changes the index,
 * and the longest wait between two tries (ms; the waits double from 10).
 */
#define AMQIDX_CHECK_ATTEMPTS	10
#define AMQIDX_CHECK_MAX_WAIT	1000

/* the "range" of a free run in the overlap check */
#define FREE_SPACE				(PG_UINT32_MAX - 1)

/* A blob in use, for the overlap check. */
typedef struct AmqIdxBlobRef
{
	uint64		start;			/* stream position of its first byte */
	uint64		len;
	AmqIdxAddr	addr;
	uint32		range;
} AmqIdxBlobRef;

typedef struct AmqIdxCheckState
{
	Relation	index;
	Relation	heap;
	int			natts;
	BufferAccessStrategy strategy;
	MemoryContext checkcxt;		/* of everything below */
	MemoryContext rangecxt;		/* reset per range */

	/* the metapage, the directory and the size, copied under one lock */
	uint32		ppr;
	uint32		nranges;
	uint32		ndirpages;
	BlockNumber dirpages[AMQIDX_MAX_DIRPAGES];
	AmqIdxAddr	stream_end;
	AmqIdxFreeSpace fs;
	uint64		sealed_keys;
	uint64		sealed_ranges;
	AmqIdxAddr *dir;			/* ndirpages * AMQIDX_DIR_PER_PAGE entries */
	BlockNumber nblocks;
	uint8	   *pagetype;		/* per block: AMQIDX_PAGE_* or PAGE_NEW */

	AmqIdxReader reader;
	AmqIdxHasher hashers[INDEX_MAX_KEYS];
	AmqFilter	keyinfo[INDEX_MAX_KEYS];	/* key fields of each column's filters */

	/* what the records use */
	AmqIdxBlobRef *blobs;
	uint64		nblobs;
	uint64		maxblobs;
	uint64		live_sealed;
	uint64		live_sealed_keys;
	uint64		live_blobs;
	uint64		live_bytes;

	/* heapallindexed: the range whose filters are loaded */
	MemoryContext rowcxt;		/* reset per row */
	bool		have_range;
	uint32		cur_range;
	BlockNumber cur_blk;		/* of its record; InvalidBlockNumber: none */
	int			nfilters[INDEX_MAX_KEYS];
	AmqIdxFilter *filters[INDEX_MAX_KEYS];
	uint8	  **payloads[INDEX_MAX_KEYS];	/* copies of their payloads */
	int64		nrows;
} AmqIdxCheckState;

static void check_free_space(AmqIdxCheckState *st);
pg_noreturn static void corrupted(AmqIdxCheckState *st, BlockNumber blk,
								  uint32 range, const char *fmt,...) pg_attribute_printf(4, 5);

/*
 * Report corruption at a block of the index, and of a range where there is
 * one.  Every check ends here.
 */
static void
corrupted(AmqIdxCheckState *st, BlockNumber blk, uint32 range, const char *fmt,...)
{
	StringInfoData what;

	initStringInfo(&what);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&what, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&what, needed);
	}
	if (range == NO_RANGE)
		ereport(ERROR,
				(errcode(ERRCODE_INDEX_CORRUPTED),
				 errmsg("amq index \"%s\" is corrupted",
						RelationGetRelationName(st->index)),
				 errdetail("Block %u: %s.", blk, what.data),
				 errhint("REINDEX it.")));
	ereport(ERROR,
			(errcode(ERRCODE_INDEX_CORRUPTED),
			 errmsg("amq index \"%s\" is corrupted",
					RelationGetRelationName(st->index)),
			 errdetail("Block %u, range %u: %s.", blk, range, what.data),
			 errhint("REINDEX it.")));
	pg_unreachable();
}

static const char *
page_type_name(uint8 type)
{
	switch (type)
	{
		case PAGE_NEW:
			return "new, all-zero page";
		case AMQIDX_PAGE_META:
			return "metapage";
		case AMQIDX_PAGE_DIR:
			return "directory page";
		case AMQIDX_PAGE_DATA:
			return "data page";
	}
	return "page of unknown type";
}

/* A stream address as a position: the stream is every page's content. */
static inline uint64
stream_pos(AmqIdxAddr a)
{
	return (uint64) a.blk * AMQIDX_CONTENT + a.off;
}

static Buffer
read_locked(AmqIdxCheckState *st, BlockNumber blk)
{
	Buffer		buf = ReadBufferExtended(st->index, MAIN_FORKNUM, blk, RBM_NORMAL,
										 st->strategy);

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	return buf;
}

/*
 * Check a page's header and special space; return its type, PAGE_NEW for
 * a new page (which the buffer manager has seen to be all zeros).
 */
static uint8
check_page(AmqIdxCheckState *st, Page page, BlockNumber blk)
{
	PageHeader	ph = (PageHeader) page;
	AmqIdxPageOpaque opaque;

	if (PageIsNew(page))
		return PAGE_NEW;
	if (PageGetPageSize(page) != BLCKSZ ||
		PageGetPageLayoutVersion(page) != PG_PAGE_LAYOUT_VERSION)
		corrupted(st, blk, NO_RANGE,
				  "the page header gives page size %u and layout version %u, not %u and %u",
				  (unsigned) PageGetPageSize(page),
				  (unsigned) PageGetPageLayoutVersion(page),
				  (unsigned) BLCKSZ, (unsigned) PG_PAGE_LAYOUT_VERSION);
	if (ph->pd_lower != AMQIDX_CONTENT_END || ph->pd_upper != AMQIDX_CONTENT_END ||
		ph->pd_special != AMQIDX_CONTENT_END)
		corrupted(st, blk, NO_RANGE,
				  "the page header's lower, upper and special offsets are %u, %u and %u, not %u",
				  ph->pd_lower, ph->pd_upper, ph->pd_special,
				  (unsigned) AMQIDX_CONTENT_END);
	opaque = AmqIdxPageGetOpaque(page);
	if (opaque->page_id != AMQIDX_PAGE_ID)
		corrupted(st, blk, NO_RANGE,
				  "the special space's page id is 0x%04X, not the amq index's 0x%04X",
				  opaque->page_id, AMQIDX_PAGE_ID);
	if (opaque->flags != 0 || opaque->unused != 0)
		corrupted(st, blk, NO_RANGE,
				  "the special space's reserved fields are 0x%04X and 0x%04X, not zero",
				  opaque->flags, opaque->unused);
	if (opaque->type != AMQIDX_PAGE_META && opaque->type != AMQIDX_PAGE_DIR &&
		opaque->type != AMQIDX_PAGE_DATA)
		corrupted(st, blk, NO_RANGE, "the page type is %u, which is no amq index page type",
				  opaque->type);
	if (opaque->type == AMQIDX_PAGE_META && blk != AMQIDX_METAPAGE_BLKNO)
		corrupted(st, blk, NO_RANGE, "a metapage, but the metapage is block %u",
				  AMQIDX_METAPAGE_BLKNO);
	return (uint8) opaque->type;
}

/*
 * The metapage, the directory and the index's size, under the metapage's
 * share lock: nothing appends to the stream, switches an entry, adds a
 * directory page or extends the index without its exclusive lock.
 */
static void
copy_directory(AmqIdxCheckState *st)
{
	Buffer		metabuf;
	Page		page;
	AmqIdxMetaPage meta;
	uint8		type;

	if (RelationGetNumberOfBlocks(st->index) == 0)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE, "the index is empty: it has no metapage");

	metabuf = read_locked(st, AMQIDX_METAPAGE_BLKNO);
	page = BufferGetPage(metabuf);
	st->nblocks = RelationGetNumberOfBlocks(st->index);

	type = check_page(st, page, AMQIDX_METAPAGE_BLKNO);
	if (type != AMQIDX_PAGE_META)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE, "the metapage is a %s",
				  page_type_name(type));
	meta = AmqIdxPageGetMeta(page);
	if (meta->magic != AMQIDX_MAGIC)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage's magic number is 0x%08X, not 0x%08X",
				  meta->magic, AMQIDX_MAGIC);
	if (meta->version > AMQIDX_VERSION)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("amq index \"%s\" has version %u, this bloomamq reads version %d",
						RelationGetRelationName(st->index), meta->version,
						AMQIDX_VERSION),
				 errhint("REINDEX it.")));
	if (meta->version != AMQIDX_VERSION)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE, "the metapage's version is %u",
				  meta->version);
	if (meta->pages_per_range < 1 || meta->pages_per_range > AMQIDX_MAX_PAGES_PER_RANGE)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage's pages_per_range is %u, outside 1 to %d",
				  meta->pages_per_range, AMQIDX_MAX_PAGES_PER_RANGE);
	if (meta->natts != st->natts)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage gives %u key columns, the index has %d",
				  meta->natts, st->natts);
	if (meta->flags != 0)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage's reserved flags are 0x%04X, not zero", meta->flags);
	/* written so that NaN fails too */
	if (!(meta->fpr_option == 0.0 || amq_check_fpr(meta->fpr_option) == AMQ_OK))
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage's fpr option is %g, neither 0 (automatic) nor in (0, %g]",
				  meta->fpr_option, AMQ_FPR_MAX);
	if (meta->ndirpages > AMQIDX_MAX_DIRPAGES)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage lists %u directory pages, more than the %d it holds",
				  meta->ndirpages, (int) AMQIDX_MAX_DIRPAGES);
	if ((uint64) meta->nranges > (uint64) meta->ndirpages * AMQIDX_DIR_PER_PAGE)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage counts %u ranges, more than its %u directory pages hold",
				  meta->nranges, meta->ndirpages);
	for (uint32 p = 0; p < AMQIDX_MAX_DIRPAGES; p++)
	{
		BlockNumber blk = meta->dirpages[p];

		if (p >= meta->ndirpages && blk != 0)
			corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
					  "the metapage's unused directory slot %u holds %u, not zero", p, blk);
		if (p < meta->ndirpages &&
			(blk == AMQIDX_METAPAGE_BLKNO || blk == InvalidBlockNumber || blk >= st->nblocks))
			corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
					  "directory page %u is block %u, not one of the index's blocks 1 to %u",
					  p, blk, st->nblocks - 1);
	}
	if (meta->stream_end.blk == InvalidBlockNumber ?
		meta->stream_end.off != 0 :
		(meta->stream_end.blk == AMQIDX_METAPAGE_BLKNO ||
		 meta->stream_end.blk >= st->nblocks ||
		 meta->stream_end.off > AMQIDX_CONTENT))
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the stream's end (block %u, offset %u) lies outside the index's %u blocks",
				  meta->stream_end.blk, meta->stream_end.off, st->nblocks);
	st->stream_end = meta->stream_end;
	memcpy(&st->fs, AmqIdxPageGetFreeSpace(page), sizeof(st->fs));
	check_free_space(st);

	st->ppr = meta->pages_per_range;
	st->nranges = meta->nranges;
	st->ndirpages = meta->ndirpages;
	memcpy(st->dirpages, meta->dirpages, sizeof(BlockNumber) * meta->ndirpages);
	st->stream_end = meta->stream_end;
	st->sealed_keys = meta->sealed_keys;
	st->sealed_ranges = meta->sealed_ranges;

	/*
	 * Released before any directory page is locked: replay of a record that
	 * switches an entry locks the directory page first, then the metapage.
	 * The space lock keeps the two in step on a primary.
	 */
	UnlockReleaseBuffer(metabuf);

	st->pagetype = MemoryContextAllocExtended(st->checkcxt, st->nblocks,
											  MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	st->pagetype[AMQIDX_METAPAGE_BLKNO] = AMQIDX_PAGE_META;
	st->dir = MemoryContextAllocExtended(st->checkcxt,
										 sizeof(AmqIdxAddr) *
										 Max(st->ndirpages * AMQIDX_DIR_PER_PAGE, 1),
										 MCXT_ALLOC_HUGE);
	for (uint32 p = 0; p < st->ndirpages; p++)
	{
		BlockNumber blk = st->dirpages[p];
		Buffer		buf;

		CHECK_FOR_INTERRUPTS();
		if (st->pagetype[blk] == AMQIDX_PAGE_DIR)
			corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
					  "block %u is listed twice as a directory page", blk);
		buf = read_locked(st, blk);
		type = check_page(st, BufferGetPage(buf), blk);
		if (type != AMQIDX_PAGE_DIR)
			corrupted(st, blk, NO_RANGE,
					  "the metapage lists it as directory page %u, but it is a %s",
					  p, page_type_name(type));
		memcpy(st->dir + (Size) p * AMQIDX_DIR_PER_PAGE,
			   AmqIdxPageGetDir(BufferGetPage(buf)),
			   sizeof(AmqIdxAddr) * AMQIDX_DIR_PER_PAGE);
		UnlockReleaseBuffer(buf);
		st->pagetype[blk] = AMQIDX_PAGE_DIR;
	}
}

/*
 * The free space's fields: runs inside the index, in order and apart, and
 * a stream that is in a run ends before the run does.
 */
static void
check_free_space(AmqIdxCheckState *st)
{
	const AmqIdxFreeSpace *fs = &st->fs;

	if (fs->nruns > AMQIDX_MAX_FREE_RUNS)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage lists %u free runs, more than the %d it holds",
				  fs->nruns, AMQIDX_MAX_FREE_RUNS);
	for (uint32 i = 0; i < AMQIDX_MAX_FREE_RUNS; i++)
	{
		const AmqIdxFreeRun *run = &fs->runs[i];

		if (i >= fs->nruns)
		{
			if (run->start != 0 || run->npages != 0)
				corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
						  "the metapage's unused free run slot %u is not zero", i);
			continue;
		}
		if (run->start == AMQIDX_METAPAGE_BLKNO || run->npages == 0 ||
			run->start >= st->nblocks || run->npages > st->nblocks - run->start)
			corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
					  "free run %u (block %u, %u pages) is not inside the index's %u blocks",
					  i, run->start, run->npages, st->nblocks);
		if (i > 0 && run->start <= fs->runs[i - 1].start + fs->runs[i - 1].npages)
			corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
					  "free run %u (block %u) does not follow run %u (block %u, %u pages) apart",
					  i, run->start, i - 1, fs->runs[i - 1].start, fs->runs[i - 1].npages);
	}
	if (fs->run_end != 0 &&
		(st->stream_end.blk == InvalidBlockNumber || fs->run_end > st->nblocks ||
		 st->stream_end.blk >= fs->run_end))
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the stream's run ends before block %u, which the stream's end (block %u) or the index's %u blocks contradict",
				  fs->run_end, st->stream_end.blk, st->nblocks);
}

/*
 * Every other page below the size taken with the directory: a data page,
 * or a new one.  Their types do not change after: pages the stream reuses
 * stay data pages, and directory pages are only added at the end.
 */
static void
check_pages(AmqIdxCheckState *st)
{
	for (BlockNumber blk = 1; blk < st->nblocks; blk++)
	{
		Buffer		buf;
		uint8		type;

		CHECK_FOR_INTERRUPTS();
		if (st->pagetype[blk] == AMQIDX_PAGE_DIR)
			continue;
		buf = read_locked(st, blk);
		type = check_page(st, BufferGetPage(buf), blk);
		UnlockReleaseBuffer(buf);
		if (type == AMQIDX_PAGE_DIR)
			corrupted(st, blk, NO_RANGE, "a directory page that the metapage does not list");
		st->pagetype[blk] = type;
	}

	if (st->stream_end.blk != InvalidBlockNumber &&
		st->pagetype[st->stream_end.blk] != AMQIDX_PAGE_DATA)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the stream ends on block %u, a %s",
				  st->stream_end.blk, page_type_name(st->pagetype[st->stream_end.blk]));
	for (uint32 i = 0; i < st->fs.nruns; i++)
		for (uint32 b = 0; b < st->fs.runs[i].npages; b++)
		{
			BlockNumber blk = st->fs.runs[i].start + b;

			if (st->pagetype[blk] != AMQIDX_PAGE_DATA && st->pagetype[blk] != PAGE_NEW)
				corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
						  "free run %u holds block %u, a %s",
						  i, blk, page_type_name(st->pagetype[blk]));
		}
}

/*
 * Is the blob of len bytes at a inside the stream, on data pages?  "from"
 * is the block that holds the address, "what" names the blob.
 */
static void
check_blob(AmqIdxCheckState *st, uint32 range, BlockNumber from, AmqIdxAddr a,
		   uint64 len, const char *what)
{
	AmqIdxAddr	last;

	Assert(len > 0);
	if (a.blk == InvalidBlockNumber || a.blk == AMQIDX_METAPAGE_BLKNO ||
		a.blk >= st->nblocks || a.off >= AMQIDX_CONTENT)
		corrupted(st, from, range,
				  "%s is at block %u, offset %u, outside the index's %u blocks of %u bytes of content",
				  what, a.blk, a.off, st->nblocks, (unsigned) AMQIDX_CONTENT);
	if (stream_pos(a) + len > (uint64) st->nblocks * AMQIDX_CONTENT)
		corrupted(st, from, range,
				  "%s (block %u, offset %u, %llu bytes) runs past the end of the index's %u blocks",
				  what, a.blk, a.off, (unsigned long long) len, st->nblocks);
	last = AmqIdxAddrAdd(a, len - 1);
	for (BlockNumber b = a.blk; b <= last.blk; b++)
		if (st->pagetype[b] != AMQIDX_PAGE_DATA)
			corrupted(st, from, range,
					  "%s (block %u, offset %u, %llu bytes) lies on block %u, a %s",
					  what, a.blk, a.off, (unsigned long long) len, b,
					  page_type_name(st->pagetype[b]));
}

/* A copy of a blob that check_blob() accepted, read a page at a time. */
static uint8 *
read_blob(AmqIdxCheckState *st, AmqIdxAddr a, uint64 len)
{
	uint8	   *buf = palloc_extended(Max(len, 1), MCXT_ALLOC_HUGE);
	uint64		done = 0;

	while (done < len)
	{
		AmqIdxAddr	p = AmqIdxAddrAdd(a, done);
		uint32		n = (uint32) Min(len - done, (uint64) (AMQIDX_CONTENT - p.off));

		memcpy(buf + done, AmqIdxRead(&st->reader, a, done, n), n);
		done += n;
	}
	AmqIdxReaderUnlock(&st->reader);
	return buf;
}

static void
add_blob(AmqIdxCheckState *st, uint32 range, AmqIdxAddr a, uint64 len)
{
	AmqIdxBlobRef *b;

	if (st->nblobs == st->maxblobs)
	{
		st->maxblobs = Max(st->maxblobs * 2, 1024);
		if (st->blobs == NULL)
			st->blobs = MemoryContextAllocExtended(st->checkcxt,
												   sizeof(AmqIdxBlobRef) * st->maxblobs,
												   MCXT_ALLOC_HUGE);
		else
			st->blobs = repalloc_huge(st->blobs, sizeof(AmqIdxBlobRef) * st->maxblobs);
	}
	if (range != FREE_SPACE)
	{
		st->live_blobs++;
		st->live_bytes += len;
	}
	b = &st->blobs[st->nblobs++];
	b->start = stream_pos(a);
	b->len = len;
	b->addr = a;
	b->range = range;
}

/*
 * The core's gate on a stored filter (buf is the check's own copy).  The
 * filters of a column whose support function is not amq_hash carry the
 * type-hash scheme with key type 0 (the hash is the function's, not a
 * type's), which amq_parse() rejects: such a header is given a placeholder
 * key type, and its checksum again if the stored one was right, before the
 * gate sees it.
 */
static AmqStatus
parse_stored(AmqIdxCheckState *st, int att, uint8 *buf, uint64 len, AmqFilter *f)
{
	AmqStatus	status;

	if (!st->hashers[att].internal &&
		buf[AMQ_OFF_SCHEME] == AMQ_HASH_TYPE &&
		buf[AMQ_OFF_FAMILY] == AMQ_FAMILY_OTHER &&
		amq_load32(buf + AMQ_OFF_KEYTYPE) == 0)
	{
		bool		sum_ok = amq_load64(buf + AMQ_OFF_CHECKSUM) ==
			amq_checksum(buf, buf + AMQ_HEADER_SIZE, len - AMQ_HEADER_SIZE);

		amq_store32(buf + AMQ_OFF_KEYTYPE, st->index->rd_opcintype[att]);
		if (sum_ok)
			amq_store64(buf + AMQ_OFF_CHECKSUM,
						amq_checksum(buf, buf + AMQ_HEADER_SIZE, len - AMQ_HEADER_SIZE));
		status = amq_parse(buf, len, f);
		f->key_type = 0;
		return status;
	}
	return amq_parse(buf, len, f);
}

/*
 * A filter of column att of the range, sealed or a segment; "from" is the
 * block of the record that points at it.  Its decoded header goes to *f.
 */
static void
check_filter(AmqIdxCheckState *st, uint32 range, BlockNumber from, int att,
			 AmqIdxAddr a, const uint8 *header_copy, const char *what,
			 AmqFilter *f)
{
	uint8		hdr[AMQ_HEADER_SIZE];
	uint64		payload_len;
	uint64		len;
	uint8	   *buf;
	AmqStatus	status;
	const AmqKindOps *ops;
	const AmqFilter *want = &st->keyinfo[att];
	bool		sealed = (header_copy != NULL);

	check_blob(st, range, from, a, AMQ_HEADER_SIZE, what);
	buf = read_blob(st, a, AMQ_HEADER_SIZE);
	memcpy(hdr, buf, AMQ_HEADER_SIZE);
	pfree(buf);

	/*
	 * A segment's header stays in one page and its payload starts at a
	 * multiple of 32 bytes, so that inserts set a 32-byte block in place
	 * within one page.
	 */
	if (!sealed && (a.off + AMQ_HEADER_SIZE > AMQIDX_CONTENT ||
					(a.off + AMQ_HEADER_SIZE) % 32 != 0))
		corrupted(st, a.blk, range,
				  "%s at offset %u is not aligned as a dynamic segment must be", what, a.off);
	if (sealed && memcmp(hdr, header_copy, AMQ_HEADER_SIZE) != 0)
		corrupted(st, a.blk, range,
				  "%s at offset %u differs from the copy of its header in the range record",
				  what, a.off);
	if (amq_load32(hdr) != AMQ_MAGIC)
		corrupted(st, a.blk, range, "%s at offset %u has no filter magic number", what, a.off);
	payload_len = amq_load64(hdr + AMQ_OFF_PAYLEN);
	if (payload_len > AMQ_MAX_PAYLOAD)
		corrupted(st, a.blk, range,
				  "%s at offset %u claims a payload of %llu bytes, more than a filter holds",
				  what, a.off, (unsigned long long) payload_len);
	len = AMQ_HEADER_SIZE + payload_len;
	check_blob(st, range, a.blk, a, len, what);

	buf = read_blob(st, a, len);
	status = parse_stored(st, att, buf, len, f);
	f->payload = NULL;
	pfree(buf);
	/* inserts set a segment's bits and count in place: its checksum is stale */
	if (status != AMQ_OK && !(status == AMQ_ERR_CHECKSUM && !sealed))
		corrupted(st, a.blk, range, "%s at offset %u fails validation: %s",
				  what, a.off, amq_status_message(status));

	ops = amq_kind_ops(f->kind);
	if (sealed ? (!(ops->caps & AMQ_CAP_STATIC) || ops->probe_span == NULL) :
		f->kind != AMQ_KIND_BLOCKED)
		corrupted(st, a.blk, range, "%s at offset %u is of kind %s, which %s",
				  what, a.off, ops->name,
				  sealed ? "a sealed filter cannot be" : "a dynamic segment is not");
	if (f->key_family != want->key_family || f->hash_scheme != want->hash_scheme ||
		f->key_type != want->key_type)
		corrupted(st, a.blk, range,
				  "%s at offset %u has key family %u, hash scheme %u and key type %u, where the column's keys have %u, %u and %u",
				  what, a.off, f->key_family, f->hash_scheme, f->key_type,
				  want->key_family, want->hash_scheme, want->key_type);
	add_blob(st, range, a, len);
}

/* The sealed filter of column att, or the fields of its absence. */
static void
check_sealed(AmqIdxCheckState *st, uint32 range, AmqIdxAddr rec, uint16 flags,
			 int att, const AmqIdxColumnDisk *col)
{
	AmqFilter	f;
	char	   *what;

	if (col->sealed.addr.blk == InvalidBlockNumber)
	{
		bool		zero = (col->sealed.addr.off == 0 && col->sealed.capacity == 0);

		for (int i = 0; i < AMQ_HEADER_SIZE && zero; i++)
			zero = (col->sealed_header[i] == 0);
		if (!zero)
			corrupted(st, rec.blk, range,
					  "column %d has no sealed filter, but the record's fields of one are not zero",
					  att + 1);
		return;
	}
	if (!(flags & AMQIDX_RANGE_SEALED))
		corrupted(st, rec.blk, range,
				  "column %d has a sealed filter, but the range was never sealed", att + 1);

	what = psprintf("the sealed filter of column %d", att + 1);
	check_filter(st, range, rec.blk, att, col->sealed.addr, col->sealed_header, what, &f);
	if (col->sealed.capacity != (uint32) Min(f.nkeys, (uint64) PG_UINT32_MAX))
		corrupted(st, rec.blk, range,
				  "%s holds %llu keys, the record says %u",
				  what, (unsigned long long) f.nkeys, col->sealed.capacity);
	st->live_sealed++;
	st->live_sealed_keys += col->sealed.capacity;
}

/* Dynamic segment s of column att. */
static void
check_segment(AmqIdxCheckState *st, uint32 range, AmqIdxAddr rec, int att, int s,
			  AmqIdxSeg seg)
{
	AmqFilter	f;
	AmqFilter	plan;
	char	   *what = psprintf("segment %d of column %d", s + 1, att + 1);

	check_filter(st, range, rec.blk, att, seg.addr, NULL, what, &f);
	if (seg.capacity == 0)
		corrupted(st, rec.blk, range, "%s has capacity 0", what);
	/* its geometry is the plan of its capacity at its fpr (when that fits) */
	if (amq_plan(&plan, AMQ_KIND_BLOCKED, seg.capacity, f.fpr) == AMQ_OK &&
		(plan.payload_len != f.payload_len ||
		 memcmp(plan.param, f.param, sizeof(plan.param)) != 0))
		corrupted(st, seg.addr.blk, range,
				  "%s at offset %u has %llu payload bytes, where a blocked filter for its capacity of %u keys has %llu",
				  what, seg.addr.off, (unsigned long long) f.payload_len, seg.capacity,
				  (unsigned long long) plan.payload_len);
}

/* Directory entry "range" and the record and filters it points at. */
static void
check_range(AmqIdxCheckState *st, uint32 range)
{
	BlockNumber dirblk = st->dirpages[range / AMQIDX_DIR_PER_PAGE];
	AmqIdxAddr	a = st->dir[range];
	AmqIdxRangeDisk hdr;
	AmqIdxColumnDisk cols[INDEX_MAX_KEYS];
	Size		colsize;
	Size		size;
	uint8	   *rec;

	if (range >= st->nranges)
	{
		if (a.blk != InvalidBlockNumber || a.off != 0)
			corrupted(st, dirblk, range,
					  "the directory entry lies past the metapage's %u ranges but points at block %u, offset %u",
					  st->nranges, a.blk, a.off);
		return;
	}
	if (a.blk == InvalidBlockNumber)
	{
		if (a.off != 0)
			corrupted(st, dirblk, range, "the empty directory entry has offset %u, not 0", a.off);
		return;
	}

	/* the header, the columns, then all of it with the segment lists */
	check_blob(st, range, dirblk, a, sizeof(hdr), "the range record");
	rec = read_blob(st, a, sizeof(hdr));
	memcpy(&hdr, rec, sizeof(hdr));
	if (hdr.range != range)
		corrupted(st, a.blk, range, "the range record at offset %u is of range %u",
				  a.off, hdr.range);
	if (hdr.natts != st->natts)
		corrupted(st, a.blk, range, "the range record at offset %u has %u columns, the index %d",
				  a.off, hdr.natts, st->natts);
	if ((hdr.flags & ~AMQIDX_RANGE_FLAGS) != 0)
		corrupted(st, a.blk, range, "the range record at offset %u has unknown flags 0x%04X",
				  a.off, hdr.flags);

	colsize = sizeof(hdr) + st->natts * sizeof(AmqIdxColumnDisk);
	check_blob(st, range, a.blk, a, colsize, "the range record");
	rec = read_blob(st, a, colsize);
	memcpy(cols, rec + sizeof(hdr), st->natts * sizeof(AmqIdxColumnDisk));
	size = colsize;
	for (int i = 0; i < st->natts; i++)
	{
		if (cols[i].nsegs > AMQIDX_MAX_SEGS)
			corrupted(st, a.blk, range,
					  "column %d of the range record at offset %u has %u segments, more than %d",
					  i + 1, a.off, cols[i].nsegs, AMQIDX_MAX_SEGS);
		if ((hdr.flags & AMQIDX_RANGE_RESEALING) ? cols[i].reseal_from > cols[i].nsegs :
			cols[i].reseal_from != 0)
			corrupted(st, a.blk, range,
					  "column %d of the range record at offset %u has a reseal mark of %u, for %u segments%s",
					  i + 1, a.off, cols[i].reseal_from, cols[i].nsegs,
					  (hdr.flags & AMQIDX_RANGE_RESEALING) ? "" : ", but no reseal is running");
		size += cols[i].nsegs * sizeof(AmqIdxSeg);
	}
	check_blob(st, range, a.blk, a, size, "the range record");
	rec = read_blob(st, a, size);
	add_blob(st, range, a, size);

	for (int i = 0; i < st->natts; i++)
	{
		check_sealed(st, range, a, hdr.flags, i, &cols[i]);
		for (int s = 0; s < cols[i].nsegs; s++)
		{
			AmqIdxSeg	seg;

			memcpy(&seg, rec + colsize, sizeof(seg));
			colsize += sizeof(seg);
			check_segment(st, range, a, i, s, seg);
		}
	}
}

static int
blob_cmp(const void *a, const void *b)
{
	const AmqIdxBlobRef *x = a;
	const AmqIdxBlobRef *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

/*
 * No two blobs in use overlap, each byte of the stream has one owner, and
 * none lies in free space: the free runs and the rest of the stream's run.
 */
static void
check_overlaps(AmqIdxCheckState *st)
{
	for (uint32 i = 0; i < st->fs.nruns; i++)
	{
		AmqIdxAddr	a = {st->fs.runs[i].start, 0};

		add_blob(st, FREE_SPACE, a, (uint64) st->fs.runs[i].npages * AMQIDX_CONTENT);
	}
	if (st->fs.run_end != 0 && st->stream_end.off < AMQIDX_CONTENT)
		add_blob(st, FREE_SPACE, st->stream_end,
				 (uint64) st->fs.run_end * AMQIDX_CONTENT - stream_pos(st->stream_end));
	else if (st->fs.run_end != 0 && st->stream_end.blk + 1 < st->fs.run_end)
	{
		AmqIdxAddr	a = {st->stream_end.blk + 1, 0};

		add_blob(st, FREE_SPACE, a,
				 (uint64) (st->fs.run_end - a.blk) * AMQIDX_CONTENT);
	}
	if (st->nblobs < 2)
		return;
	qsort(st->blobs, st->nblobs, sizeof(AmqIdxBlobRef), blob_cmp);
	for (uint64 i = 1; i < st->nblobs; i++)
	{
		const AmqIdxBlobRef *prev = &st->blobs[i - 1];
		const AmqIdxBlobRef *cur = &st->blobs[i];

		CHECK_FOR_INTERRUPTS();
		if (cur->start >= prev->start + prev->len)
			continue;
		if (prev->range == FREE_SPACE || cur->range == FREE_SPACE)
		{
			const AmqIdxBlobRef *blob = (cur->range == FREE_SPACE) ? prev : cur;
			const AmqIdxBlobRef *space = (cur->range == FREE_SPACE) ? cur : prev;

			if (blob->range == FREE_SPACE)
				corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
						  "the free space at block %u overlaps the free space at block %u",
						  cur->addr.blk, prev->addr.blk);
			corrupted(st, blob->addr.blk, blob->range,
					  "a blob at offset %u (%llu bytes) lies in the free space from block %u, offset %u",
					  blob->addr.off, (unsigned long long) blob->len,
					  space->addr.blk, space->addr.off);
		}
		corrupted(st, cur->addr.blk, cur->range,
				  "a blob at offset %u overlaps one of range %u at block %u, offset %u (%llu bytes)",
				  cur->addr.off, prev->range, prev->addr.blk, prev->addr.off,
				  (unsigned long long) prev->len);
	}
}

/* ---- heapallindexed ---- */

/*
 * Copies of the range's filters, for the rows of its pages: read under the
 * share lock of its directory page, so that the record read is the one in
 * use and its pages are not freed meanwhile.
 */
static void
load_range(AmqIdxCheckState *st, uint32 range)
{
	MemoryContext old;
	AmqIdxRange rg;
	Buffer		dirbuf;
	BlockNumber dirblk;
	AmqIdxAddr	entry;

	MemoryContextReset(st->rangecxt);
	st->have_range = true;
	st->cur_range = range;
	st->cur_blk = InvalidBlockNumber;
	memset(st->nfilters, 0, sizeof(st->nfilters));
	if (range >= st->nranges)
		return;

	old = MemoryContextSwitchTo(st->rangecxt);
	dirblk = st->dirpages[range / AMQIDX_DIR_PER_PAGE];
	dirbuf = read_locked(st, dirblk);
	if (check_page(st, BufferGetPage(dirbuf), dirblk) != AMQIDX_PAGE_DIR)
		corrupted(st, dirblk, range, "the directory page is no longer one");
	entry = AmqIdxPageGetDir(BufferGetPage(dirbuf))[range % AMQIDX_DIR_PER_PAGE];
	if (entry.blk != InvalidBlockNumber)
	{
		st->cur_blk = entry.blk;
		AmqIdxReadRange(&st->reader, entry, &rg);
		for (int i = 0; i < st->natts; i++)
		{
			st->filters[i] = palloc(sizeof(AmqIdxFilter) * (1 + rg.nsegs[i]));
			st->payloads[i] = palloc(sizeof(uint8 *) * (1 + rg.nsegs[i]));
			if (rg.sealed[i].addr.blk != InvalidBlockNumber)
				AmqIdxSealedFilter(&st->reader, &rg, i, &st->filters[i][st->nfilters[i]++]);
			for (int s = 0; s < rg.nsegs[i]; s++)
				AmqIdxReadFilter(&st->reader, rg.segs[i][s].addr,
								 &st->filters[i][st->nfilters[i]++]);
			for (int f = 0; f < st->nfilters[i]; f++)
			{
				AmqIdxFilter *flt = &st->filters[i][f];
				uint64		len = flt->f.payload_len;

				st->payloads[i][f] = palloc_extended(Max(len, 1), MCXT_ALLOC_HUGE);
				if (len > 0)
					memcpy(st->payloads[i][f],
						   AmqIdxRead(&st->reader, flt->payload, 0, (uint32) len), len);
			}
		}
		AmqIdxReaderUnlock(&st->reader);
	}
	UnlockReleaseBuffer(dirbuf);
	MemoryContextSwitchTo(old);
}

/* Does the copy of a filter answer true for the hash? */
static bool
copy_contains(const AmqIdxFilter *flt, const uint8 *payload, uint64 hash)
{
	uint64		off;
	uint32		len;

	if (flt->f.nkeys == 0)
		return false;
	flt->ops->probe_span(&flt->f, hash, &off, &len);
	if (off + len > flt->f.payload_len)
		return false;
	return flt->ops->contains_span(&flt->f, hash, payload + off);
}

/* Each row the snapshot sees: every key in some filter of its range. */
static void
heap_callback(Relation index, ItemPointer tid, Datum *values, bool *isnull,
			  bool tupleIsAlive, void *state)
{
	AmqIdxCheckState *st = (AmqIdxCheckState *) state;
	BlockNumber hblk = ItemPointerGetBlockNumber(tid);
	uint32		range = hblk / st->ppr;
	bool		any = false;
	MemoryContext old;

	/* a row whose keys are all NULL is not indexed */
	for (int i = 0; i < st->natts; i++)
		any |= !isnull[i];
	if (!any)
		return;

	if (!st->have_range || range != st->cur_range)
		load_range(st, range);
	if (st->cur_blk == InvalidBlockNumber)
		corrupted(st,
				  range / AMQIDX_DIR_PER_PAGE < st->ndirpages ?
				  st->dirpages[range / AMQIDX_DIR_PER_PAGE] : AMQIDX_METAPAGE_BLKNO,
				  range, "heap tuple (%u,%u) has a key, but the range has no record",
				  hblk, ItemPointerGetOffsetNumber(tid));

	old = MemoryContextSwitchTo(st->rowcxt);
	for (int i = 0; i < st->natts; i++)
	{
		uint64		hash;
		bool		found = false;

		if (isnull[i])
			continue;
		hash = AmqIdxHash(&st->hashers[i], values[i]);
		for (int f = 0; f < st->nfilters[i] && !found; f++)
			found = copy_contains(&st->filters[i][f], st->payloads[i][f], hash);
		if (!found)
			corrupted(st, st->cur_blk, range,
					  "the key of heap tuple (%u,%u) in column %d is in none of the range's %d filters",
					  hblk, ItemPointerGetOffsetNumber(tid), i + 1, st->nfilters[i]);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(st->rowcxt);
	st->nrows++;
}

static void
check_heap(AmqIdxCheckState *st, Snapshot snapshot)
{
	IndexInfo  *indexInfo = BuildIndexInfo(st->index);
	TableScanDesc scan;

	st->rowcxt = AllocSetContextCreate(st->checkcxt, "amq index check row",
									   ALLOCSET_DEFAULT_SIZES);
	st->have_range = false;

	/*
	 * The rows the snapshot sees, as the first pass of CREATE INDEX
	 * CONCURRENTLY reads them (ii_Concurrent: no SnapshotAny rules).  The
	 * scan starts at block 0 (no synchronized scan), so each range's
	 * filters are loaded once; the build scan, which requires allow_sync of
	 * a scan it is given, ends it.
	 */
	indexInfo->ii_Concurrent = true;
	scan = table_beginscan_strat(st->heap, snapshot, 0, NULL, true, false);
	table_index_build_scan(st->heap, st->index, indexInfo, true, false,
						   heap_callback, (void *) st, scan);
	AmqIdxReaderRelease(&st->reader);
}

/* ---- the function ---- */

/*
 * Everything but the rows: under the space lock, one consistent picture.
 * It starts from nothing, since on a standby it may run again after a try
 * whose subtransaction took the reader's buffer with it.
 */
static void
check_structure(AmqIdxCheckState *st)
{
	AmqIdxReaderInit(&st->reader, st->index);
	if (st->pagetype)
		pfree(st->pagetype);
	if (st->dir)
		pfree(st->dir);
	st->pagetype = NULL;
	st->dir = NULL;
	st->nblobs = 0;
	st->live_sealed = st->live_sealed_keys = 0;
	st->live_blobs = st->live_bytes = 0;

	AmqIdxLockSpace(st->index, ShareLock);
	copy_directory(st);
	check_pages(st);
	for (uint32 range = 0; range < st->ndirpages * AMQIDX_DIR_PER_PAGE; range++)
	{
		CHECK_FOR_INTERRUPTS();
		MemoryContextSwitchTo(st->rangecxt);
		check_range(st, range);
		MemoryContextSwitchTo(st->checkcxt);
		MemoryContextReset(st->rangecxt);
	}
	AmqIdxReaderRelease(&st->reader);
	check_overlaps(st);
	AmqIdxUnlockSpace(st->index, ShareLock);
	if (st->sealed_ranges < st->live_sealed || st->sealed_keys < st->live_sealed_keys)
		corrupted(st, AMQIDX_METAPAGE_BLKNO, NO_RANGE,
				  "the metapage counts %llu sealed filters of %llu keys, fewer than the records hold (%llu of %llu keys)",
				  (unsigned long long) st->sealed_ranges,
				  (unsigned long long) st->sealed_keys,
				  (unsigned long long) st->live_sealed,
				  (unsigned long long) st->live_sealed_keys);
}

/*
 * On a standby.  Replay takes no heavyweight lock, so it may change the
 * index while the check reads it, and the check may see the pages of one
 * moment beside those of a later one: a reseal's new record beside the old
 * directory entry, pages freed and reused.  Each WAL record leaves the
 * index sound (a crash may stop replay after any of them), so only such a
 * mix can look corrupted.  A corruption found while replay moved on is
 * checked again, in a subtransaction that lets go of what the attempt held;
 * one found while replay stood still, or in the last attempt, is reported.
 */
static ErrorData *
try_check_structure(AmqIdxCheckState *st)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		check_structure(st);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return edata;
}

static void
check_structure_in_recovery(AmqIdxCheckState *st)
{
	for (int attempt = 1;; attempt++)
	{
		XLogRecPtr	replayed = GetXLogReplayRecPtr(NULL);
		ErrorData  *edata = try_check_structure(st);

		if (edata == NULL)
			return;
		if ((edata->sqlerrcode != ERRCODE_INDEX_CORRUPTED &&
			 edata->sqlerrcode != ERRCODE_DATA_CORRUPTED) ||
			GetXLogReplayRecPtr(NULL) == replayed)
			ReThrowError(edata);
		if (attempt == AMQIDX_CHECK_ATTEMPTS)
		{
			edata->hint = psprintf("Replay changed the index during each of %d checks: "
								   "pause it (pg_wal_replay_pause()) and check again.",
								   AMQIDX_CHECK_ATTEMPTS);
			ReThrowError(edata);
		}
		ereport(DEBUG1,
				(errmsg_internal("amq index \"%s\": replay moved on during check %d, which found: %s; checking again",
								 RelationGetRelationName(st->index), attempt,
								 edata->detail ? edata->detail : edata->message)));
		FreeErrorData(edata);

		/* a reseal or a compaction in replay may take a while: let it end */
		pg_usleep(Min(10L << Min(attempt - 1, 10), AMQIDX_CHECK_MAX_WAIT) * 1000L);
		CHECK_FOR_INTERRUPTS();
	}
}

static void
check_index(Relation index, Relation heap, bool heapallindexed)
{
	MemoryContext checkcxt;
	MemoryContext old;
	AmqIdxCheckState *st;
	Snapshot	snapshot = InvalidSnapshot;

	checkcxt = AllocSetContextCreate(CurrentMemoryContext, "amq index check",
									 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(checkcxt);
	st = palloc0(sizeof(AmqIdxCheckState));
	st->index = index;
	st->heap = heap;
	st->natts = IndexRelationGetNumberOfKeyAttributes(index);
	st->checkcxt = checkcxt;
	st->rangecxt = AllocSetContextCreate(checkcxt, "amq index check range",
										 ALLOCSET_DEFAULT_SIZES);
	st->strategy = GetAccessStrategy(BAS_BULKREAD);
	for (int i = 0; i < st->natts; i++)
	{
		AmqIdxHasherInit(&st->hashers[i], index, i,
						 TupleDescAttr(RelationGetDescr(index), i)->atttypid);
		AmqIdxSetKeyInfo(&st->keyinfo[i], &st->hashers[i]);
	}

	if (heapallindexed)
	{
		/*
		 * Before the directory is copied: every row this snapshot sees had
		 * its key inserted by then.  An older transaction snapshot (at
		 * REPEATABLE READ) may see rows that an index built since does not
		 * cover (indcheckxmin), as for any scan.
		 */
		snapshot = RegisterSnapshot(GetTransactionSnapshot());
		if (IsolationUsesXactSnapshot() && index->rd_index->indcheckxmin &&
			!TransactionIdPrecedes(HeapTupleHeaderGetXmin(index->rd_indextuple->t_data),
								   snapshot->xmin))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("amq index \"%s\" cannot be verified using the transaction snapshot",
							RelationGetRelationName(index)),
					 errhint("Run the check in a new transaction.")));
	}

	/* the rows this backend inserted and holds back (amqidx_insert.c) */
	AmqIdxFlushBatch(index);
	/* a subtransaction may not be allowed in parallel mode: one attempt */
	if (RecoveryInProgress() && !IsInParallelMode())
		check_structure_in_recovery(st);
	else
		check_structure(st);
	ereport(DEBUG1,
			(errmsg_internal("amq index \"%s\": %u blocks, %u ranges, %llu blobs of %llu bytes in use verified",
							 RelationGetRelationName(index), st->nblocks, st->nranges,
							 (unsigned long long) st->live_blobs,
							 (unsigned long long) st->live_bytes)));

	if (heapallindexed)
	{
		check_heap(st, snapshot);
		UnregisterSnapshot(snapshot);
		ereport(DEBUG1,
				(errmsg_internal("amq index \"%s\": the keys of " INT64_FORMAT " rows of \"%s\" found",
								 RelationGetRelationName(index), st->nrows,
								 RelationGetRelationName(heap))));
	}

	FreeAccessStrategy(st->strategy);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(checkcxt);
}

/* Can the relation be checked as an amq index? */
static void
check_target(Relation rel, Relation heap, Oid heapid)
{
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_INDEX)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is a partitioned index", RelationGetRelationName(rel)),
				 errdetail("A partitioned index has no storage of its own."),
				 errhint("Check the index of each partition.")));
	if (rel->rd_rel->relkind != RELKIND_INDEX)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not an amq index", RelationGetRelationName(rel)),
				 errdetail("It is not an index.")));
	if (rel->rd_indam == NULL || rel->rd_indam->ambuild != amqidxbuild)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not an amq index", RelationGetRelationName(rel)),
				 errdetail("It is an index of access method \"%s\".",
						   get_am_name(rel->rd_rel->relam))));

	/* an index dropped and made again since the table's lookup */
	if (heap == NULL || heapid != IndexGetRelation(RelationGetRelid(rel), false))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("could not open the table of index \"%s\"",
						RelationGetRelationName(rel))));

	/* the table's owner, or a role that is a member of it (a superuser) */
	if (!AMQ_RELATION_OWNERCHECK(RelationGetRelid(rel), GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_INDEX, RelationGetRelationName(rel));

	if (RELATION_IS_OTHER_TEMP(rel))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot access temporary tables of other sessions"),
				 errdetail("Index \"%s\" is of a temporary table.",
						   RelationGetRelationName(rel))));
	if (!rel->rd_index->indisvalid)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot check index \"%s\"", RelationGetRelationName(rel)),
				 errdetail("The index is not valid."),
				 errhint("Drop it, or REINDEX it.")));
}

/*
 * amq_index_check(index regclass, heapallindexed boolean DEFAULT false)
 *
 * Raises an error at the first corruption found; returns nothing when the
 * index is sound.
 */
Datum
amq_index_check(PG_FUNCTION_ARGS)
{
	Oid			indrelid = PG_GETARG_OID(0);
	bool		heapallindexed = PG_GETARG_BOOL(1);
	Oid			heapid;
	Relation	heap = NULL;
	Relation	index;
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	/*
	 * The table first, then the index, as everything that opens both locks
	 * them (no deadlock).  If the relation is no index there is no table:
	 * check_target() says what it is.
	 */
	heapid = IndexGetRelation(indrelid, true);
	if (OidIsValid(heapid))
		heap = table_open(heapid, AccessShareLock);
	index = relation_open(indrelid, AccessShareLock);
	check_target(index, heap, heapid);

	/* an unlogged index has no main fork on a standby: nothing to check */
	if (index->rd_rel->relpersistence == RELPERSISTENCE_UNLOGGED && RecoveryInProgress())
	{
		ereport(DEBUG1,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot verify unlogged index \"%s\" during recovery, skipping",
						RelationGetRelationName(index))));
		relation_close(index, AccessShareLock);
		table_close(heap, AccessShareLock);
		PG_RETURN_VOID();
	}

	/*
	 * Index expressions and the support function run as the table's owner,
	 * restricted, with a safe search_path, as when the index is built.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(heap->rd_rel->relowner,
						   save_sec_context | SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION);

	check_index(index, heap, heapallindexed);

	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	/*
	 * The locks go now, as bt_index_check's do: the check changes nothing,
	 * and one transaction may check many indexes.
	 */
	relation_close(index, AccessShareLock);
	table_close(heap, AccessShareLock);
	PG_RETURN_VOID();
}
