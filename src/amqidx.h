/*-------------------------------------------------------------------------
 *
 * amqidx.h
 *	  The amq index access method: a block-range skip index that keeps one
 *	  approximate membership filter per indexed column per range of heap
 *	  pages, and answers = and = ANY through lossy bitmap scans.
 *
 * Design.  The heap is cut into ranges of pages_per_range pages.  For each
 * range and indexed column the index holds
 *	  - a sealed filter: a static kind (ribbon or binary fuse, whichever is
 *		smaller) built from exactly the distinct keys of the range, written
 *		by CREATE INDEX and by VACUUM, and
 *	  - dynamic segments: split block Bloom filters that take the keys of
 *		rows inserted later.  The range that is still growing has only
 *		these; a sealed range gets them as a small overflow when rows are
 *		inserted into it.  VACUUM reseals every range with segments, except
 *		the one at the end of the heap, from the heap's rows.
 * A scan hashes each key once, probes every range's filters and adds the
 * pages of the ranges that may hold a match to the bitmap; the heap scan
 * rechecks.  No heap TID is stored: deleted keys stay in their filter (a
 * false positive at worst) until the range is resealed or reindexed.
 *
 * Storage.  Block 0 is the metapage.  Filters and range records are
 * "blobs" in a byte stream: each data page holds AMQIDX_CONTENT bytes of
 * stream and a blob continues on the next block, so a blob is addressed by
 * the block and offset of its first byte.  Blobs are immutable once
 * referenced, but for the bits and key count of dynamic segments, which
 * inserts set in place.  Directory pages map a range number to the address
 * of its range record, which lists the range's sealed filter and segments
 * per column.
 *
 * Free space.  The metapage keeps a list of runs of whole data pages that
 * no record references; the stream goes on into one of them (the best fit
 * for the next blob) before it extends the index.  VACUUM fills the list
 * (amqidx_vacuum.c): it first sweeps the index for pages that hold no blob
 * in use, and then, as it reseals a range, frees the pages whose every
 * blob was the range's old record, sealed filters and segments.  A page is
 * freed in the same WAL record that switches its last referencing record
 * out of the directory, and so is reused only after that switch.
 *
 * Locking.  The metapage's exclusive lock serialises everything that
 * appends to the stream, frees pages or changes the directory's shape; a
 * directory page's exclusive lock is taken to replace a range record, its
 * share lock by inserts while they set bits in a segment (so a reseal never
 * drops a segment under an insert) and by scans while they read a range's
 * record and filters (so its pages are not freed and reused meanwhile, on
 * a primary or on a standby, whose replay takes the same locks).  Locks
 * are taken in the order metapage, directory page, data pages.
 * amq_index_check() takes the metapage's heavyweight page lock (ShareLock)
 * for a consistent picture of the whole stream; whatever appends or frees
 * takes it in ExclusiveLock first.
 *
 * WAL.  Every change goes through generic WAL; CREATE INDEX writes its
 * pages without WAL and logs them once at the end.
 *
 * The callbacks are split by group: amqidx.c (handler, options, cost),
 * amqidx_build.c, amqidx_insert.c, amqidx_scan.c, amqidx_vacuum.c,
 * amqidx_validate.c; the page and blob layer is amqidx_utils.c, and
 * amq_index_check(), which verifies all of the above, amqidx_check.c.
 *
 *-------------------------------------------------------------------------
 */
#ifndef AMQIDX_H
#define AMQIDX_H

#include "compat.h"

#include "access/amapi.h"
#include "access/generic_xlog.h"
#include "access/itup.h"
#include "nodes/execnodes.h"
#include "storage/bufmgr.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

#include "core.h"
#include "amq_hashing.h"

#define AMQIDX_MAGIC			0x51494d41u	/* "AMIQ" */
#define AMQIDX_VERSION			1
#define AMQIDX_METAPAGE_BLKNO	0
#define AMQIDX_PAGE_ID			0xFA51	/* last 2 bytes of every page */

/* support function 1: the key's canonical 64-bit hash */
#define AMQIDX_HASH_PROC		1
#define AMQIDX_NPROC			1
#define AMQIDX_EQUAL_STRATEGY	1
#define AMQIDX_NSTRATEGIES		1

/* defaults and limits of the options */
#define AMQIDX_DEFAULT_PAGES_PER_RANGE	64
#define AMQIDX_MAX_PAGES_PER_RANGE		131072
/* the automatic fpr: 0.1 false range per lookup, within these bounds */
#define AMQIDX_AUTO_FALSE_RANGES		0.1
#define AMQIDX_AUTO_FPR_MAX				0.01
#define AMQIDX_AUTO_FPR_MIN				1e-6
/* the lowest rate of a sealed filter (fuse or ribbon) */
#define AMQIDX_FPR_MIN					AMQ_FP_FPR_MIN

/* build progress subphases (1 is PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE) */
#define AMQIDX_PHASE_BUILD				2
#define AMQIDX_PHASE_LOG				3

/* page types */
#define AMQIDX_PAGE_META		1
#define AMQIDX_PAGE_DIR			2
#define AMQIDX_PAGE_DATA		3

typedef struct AmqIdxPageOpaqueData
{
	uint16		type;
	uint16		flags;			/* none yet; must be 0 */
	uint16		unused;
	uint16		page_id;		/* AMQIDX_PAGE_ID */
} AmqIdxPageOpaqueData;

typedef AmqIdxPageOpaqueData *AmqIdxPageOpaque;

#define AmqIdxPageGetOpaque(page) ((AmqIdxPageOpaque) PageGetSpecialPointer(page))

/* Every page is all content between its header and its special space. */
#define AMQIDX_CONTENT_START	MAXALIGN(SizeOfPageHeaderData)
#define AMQIDX_CONTENT_END		(BLCKSZ - MAXALIGN(sizeof(AmqIdxPageOpaqueData)))
#define AMQIDX_CONTENT			(AMQIDX_CONTENT_END - AMQIDX_CONTENT_START)
#define AmqIdxPageContent(page) ((char *) (page) + AMQIDX_CONTENT_START)

/* The address of a blob: its first byte's block and content offset. */
typedef struct AmqIdxAddr
{
	uint32		blk;			/* InvalidBlockNumber: none */
	uint32		off;
} AmqIdxAddr;

/* Metapage content. */
typedef struct AmqIdxMetaPageData
{
	uint32		magic;
	uint32		version;
	uint32		pages_per_range;
	uint16		natts;
	uint16		flags;			/* none yet; must be 0 */
	double		fpr_option;		/* the fpr option; 0 = automatic */
	uint32		nranges;		/* directory entries in use */
	uint32		ndirpages;
	AmqIdxAddr	stream_end;		/* where the next blob goes */
	uint64		sealed_keys;	/* keys of sealed filters, for sizing */
	uint64		sealed_ranges;	/* range-columns sealed, for sizing */
	BlockNumber dirpages[FLEXIBLE_ARRAY_MEMBER];
} AmqIdxMetaPageData;

typedef AmqIdxMetaPageData *AmqIdxMetaPage;

/*
 * The free space, at the end of the metapage's content (all zeros in an
 * index that has none: no run, the stream at the index's end).
 */
#define AMQIDX_MAX_FREE_RUNS	120

typedef struct AmqIdxFreeRun
{
	uint32		start;			/* first block */
	uint32		npages;
} AmqIdxFreeRun;

typedef struct AmqIdxFreeSpace
{
	/*
	 * 0: the stream's end is at the end of the index, which the next page
	 * extends; else the stream is in a run taken from the list, whose pages
	 * end before this block.
	 */
	uint32		run_end;
	uint32		nruns;
	AmqIdxFreeRun runs[AMQIDX_MAX_FREE_RUNS];	/* by start, apart */
} AmqIdxFreeSpace;

#define AmqIdxPageGetMeta(page) ((AmqIdxMetaPage) AmqIdxPageContent(page))
#define AmqIdxPageGetFreeSpace(page) \
	((AmqIdxFreeSpace *) (AmqIdxPageContent(page) + AMQIDX_CONTENT - \
						  sizeof(AmqIdxFreeSpace)))
#define AMQIDX_MAX_DIRPAGES \
	((AMQIDX_CONTENT - sizeof(AmqIdxFreeSpace) - \
	  offsetof(AmqIdxMetaPageData, dirpages)) / sizeof(BlockNumber))

/* A directory page is an array of range record addresses. */
#define AMQIDX_DIR_PER_PAGE		(AMQIDX_CONTENT / sizeof(AmqIdxAddr))
#define AmqIdxPageGetDir(page)	((AmqIdxAddr *) AmqIdxPageContent(page))

/*
 * A filter of a range record: where it is and, for a dynamic segment, how
 * many keys it was sized for.
 */
typedef struct AmqIdxSeg
{
	AmqIdxAddr	addr;
	uint32		capacity;
} AmqIdxSeg;

/*
 * A range record as stored: this header, natts AmqIdxColumnDisk, then
 * every column's segments in column order.
 */
typedef struct AmqIdxRangeDisk
{
	uint32		range;
	uint16		natts;
	uint16		flags;			/* AMQIDX_RANGE_* */
} AmqIdxRangeDisk;

#define AMQIDX_RANGE_SEALED		0x1	/* sealed filters were built */
#define AMQIDX_RANGE_RESEALING	0x2	/* a VACUUM is rebuilding its sealed
										 * filters: inserts add every key */
#define AMQIDX_RANGE_FLAGS		0x3

typedef struct AmqIdxColumnDisk
{
	AmqIdxSeg	sealed;			/* addr.blk invalid: no keys when sealed */
	uint16		nsegs;
	uint16		reseal_from;	/* AMQIDX_RANGE_RESEALING: the first segment
								 * the reseal keeps; else 0 */
	/* a copy of the sealed filter's header, so a probe reads one page less */
	uint8		sealed_header[AMQ_HEADER_SIZE];
} AmqIdxColumnDisk;

/* A range record in memory. */
typedef struct AmqIdxRange
{
	uint32		range;
	uint16		natts;
	uint16		flags;
	AmqIdxSeg	sealed[INDEX_MAX_KEYS];
	uint8		sealed_header[INDEX_MAX_KEYS][AMQ_HEADER_SIZE];
	int			nsegs[INDEX_MAX_KEYS];
	int			reseal_from[INDEX_MAX_KEYS];
	AmqIdxSeg  *segs[INDEX_MAX_KEYS];
} AmqIdxRange;

/* the limit that keeps a record readable in one piece */
#define AMQIDX_MAX_SEGS			64

/* options (rd_options) */
typedef struct AmqIdxOptions
{
	int32		vl_len_;
	int			pages_per_range;
	double		fpr;
} AmqIdxOptions;

/* How one column's keys are hashed. */
typedef struct AmqIdxHasher
{
	bool		internal;		/* the canonical hash, inline */
	AmqKeyHasher canon;
	FmgrInfo	proc;			/* else this support function */
	Oid			collation;
} AmqIdxHasher;

/*
 * Reading blobs: one pinned, share-locked page at a time.  amqidx_read
 * gives a pointer into the page when the bytes lie in it, else copies them
 * into the caller's scratch; the pointer is good until the next read or
 * release.
 */
typedef struct AmqIdxReader
{
	Relation	index;
	Buffer		buf;
	BlockNumber blk;
	bool		locked;
	BlockNumber nblocks;		/* of the index, as last asked */
	uint8	   *scratch;		/* for bytes that straddle pages */
	uint32		scratch_len;
	MemoryContext mcxt;			/* of the scratch */
} AmqIdxReader;

/*
 * Writing blobs.  During CREATE INDEX (wal = false) pages are written
 * through the buffer manager and logged once at the end; otherwise every
 * page goes through generic WAL, and the caller holds the metapage lock.
 */
typedef struct AmqIdxWriter
{
	Relation	index;
	bool		wal;
	AmqIdxAddr	end;			/* stream end */
	ForkNumber	fork;
	AmqIdxFreeSpace fs;			/* the metapage's, as appends change it */
	int			nfreed;			/* pages to free at the record switch */
	int			maxfreed;
	BlockNumber *freed;
} AmqIdxWriter;

/* A filter header read from the index. */
typedef struct AmqIdxFilter
{
	AmqFilter	f;				/* payload is NULL: it stays in the pages */
	const AmqKindOps *ops;
	AmqIdxAddr	payload;		/* address of the payload's first byte */
} AmqIdxFilter;

/* amqidx.c */
extern void AmqIdxInit(void);
extern int	AmqIdxPagesPerRange(Relation index);
extern double AmqIdxFprOption(Relation index);
extern double AmqIdxEffectiveFpr(double fpr_option, uint64 nranges);

/* amqidx_utils.c */
extern void AmqIdxInitPage(Page page, uint16 type);
extern void AmqIdxInitMetaPage(Page page, int pages_per_range, double fpr,
							   int natts);
extern AmqIdxMetaPage AmqIdxCheckMetaPage(Relation index, Page page);
extern int	AmqIdxMetaPagesPerRange(Relation index);
extern void AmqIdxBuiltOptions(Relation index, int *ppr, double *fpr_option);
extern void AmqIdxCheckPage(Relation index, Page page, BlockNumber blk,
							uint16 type);
extern void AmqIdxInitDirPage(Page page);
pg_noreturn extern void AmqIdxCorrupted(Relation index, BlockNumber blk,
										const char *what);
extern AmqIdxAddr AmqIdxAddrAdd(AmqIdxAddr a, uint64 delta);

extern void AmqIdxReaderInit(AmqIdxReader *r, Relation index);
extern const uint8 *AmqIdxRead(AmqIdxReader *r, AmqIdxAddr a, uint64 delta,
							   uint32 len);
extern void AmqIdxReaderUnlock(AmqIdxReader *r);
extern void AmqIdxReaderRelease(AmqIdxReader *r);
extern void AmqIdxReadRange(AmqIdxReader *r, AmqIdxAddr a, AmqIdxRange *rg);
extern void AmqIdxReadFilter(AmqIdxReader *r, AmqIdxAddr a, AmqIdxFilter *f);
extern void AmqIdxSealedFilter(AmqIdxReader *r, const AmqIdxRange *rg, int att,
							   AmqIdxFilter *f);
extern bool AmqIdxFilterContains(AmqIdxReader *r, const AmqIdxFilter *f,
								 uint64 hash);

extern void AmqIdxWriterInit(AmqIdxWriter *w, Relation index, bool wal,
							 Page metapage, ForkNumber fork);
extern void AmqIdxFreeLater(AmqIdxWriter *w, BlockNumber blk);
extern void AmqIdxFreeSpaceAdd(AmqIdxFreeSpace *fs, BlockNumber start,
							   uint32 npages);
extern void AmqIdxLockSpace(Relation index, LOCKMODE mode);
extern void AmqIdxUnlockSpace(Relation index, LOCKMODE mode);
extern uint64 AmqIdxFilterBlobLen(const uint8 *header);
extern AmqIdxAddr AmqIdxAppend(AmqIdxWriter *w, const uint8 *data, Size len,
							   bool block_aligned);
extern void AmqIdxRangeInit(AmqIdxRange *rg, uint32 range, int natts,
							uint16 flags);
extern void AmqIdxAppendSegment(AmqIdxWriter *w, AmqIdxRange *rg, int att,
								uint32 capacity, double fpr,
								const AmqIdxHasher *h);
extern void AmqIdxSwitchRecord(Relation index, Buffer metabuf, Buffer dirbuf,
							   AmqIdxWriter *w, const AmqIdxRange *rg,
							   uint64 sealed_keys, uint64 sealed_ranges);
extern Size AmqIdxRangeSize(const AmqIdxRange *rg);
extern void AmqIdxRangeSerialize(const AmqIdxRange *rg, uint8 *out);
extern AmqIdxAddr AmqIdxAppendRange(AmqIdxWriter *w, const AmqIdxRange *rg);
extern void AmqIdxRewriteRangeHeader(Relation index, AmqIdxAddr a,
									 const AmqIdxRange *rg);
extern void AmqIdxSetSealed(AmqIdxRange *rg, int att, AmqIdxAddr a,
							const struct varlena *filter);
extern BlockNumber AmqIdxNewBuffer(Relation index, ForkNumber fork,
								   Buffer *buf);

extern void AmqIdxHasherInit(AmqIdxHasher *h, Relation index, int attno,
							 Oid keytype);
extern uint64 AmqIdxHash(AmqIdxHasher *h, Datum value);
extern void AmqIdxSetKeyInfo(AmqFilter *f, const AmqIdxHasher *h);
extern struct varlena *AmqIdxBuildSealed(uint64 *hashes, Size n, double fpr,
										 const AmqIdxHasher *h);
extern struct varlena *AmqIdxNewSegment(uint32 capacity, double fpr,
										const AmqIdxHasher *h);

/* amqidx_build.c */
extern IndexBuildResult *amqidxbuild(Relation heap, Relation index,
									 IndexInfo *indexInfo);
extern void amqidxbuildempty(Relation index);
extern void AmqIdxCollectRange(Relation heap, Relation index,
							   IndexInfo *indexInfo, uint32 range,
							   int pages_per_range, AmqIdxHasher *hashers,
							   uint64 **hashes, Size *nhashes);

/* amqidx_insert.c */
extern void AmqIdxInsertInit(void);
extern void AmqIdxFlushBatch(Relation index);
extern bool amqidxinsert(Relation index, Datum *values, bool *isnull,
						 ItemPointer ht_ctid, Relation heapRel,
						 IndexUniqueCheck checkUnique, AMQ_AMINSERT_UNCHANGED_PARAM
						 IndexInfo *indexInfo);

/* amqidx_scan.c */
extern IndexScanDesc amqidxbeginscan(Relation index, int nkeys, int norderbys);
extern void amqidxrescan(IndexScanDesc scan, ScanKey keys, int nkeys,
						 ScanKey orderbys, int norderbys);
extern int64 amqidxgetbitmap(IndexScanDesc scan, TIDBitmap *tbm);
extern void amqidxendscan(IndexScanDesc scan);

/* amqidx_vacuum.c */
extern IndexBulkDeleteResult *amqidxbulkdelete(IndexVacuumInfo *info,
											   IndexBulkDeleteResult *stats,
											   IndexBulkDeleteCallback callback,
											   void *callback_state);
extern IndexBulkDeleteResult *amqidxvacuumcleanup(IndexVacuumInfo *info,
												  IndexBulkDeleteResult *stats);

/* amqidx_validate.c */
extern bool amqidxvalidate(Oid opclassoid);

/* amqidx_check.c: amq_index_check(), the verification of an index */
extern Datum amq_index_check(PG_FUNCTION_ARGS);

/* amq_probe.c: the canonical hash, recognised as support function 1 */
extern Datum amq_hash(PG_FUNCTION_ARGS);

#endif							/* AMQIDX_H */
