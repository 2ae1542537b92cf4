/*-------------------------------------------------------------------------
 *
 * amqidx_scan.c
 *	  Bitmap scans of an amq index.
 *
 * Each scan key (col = value, or col = ANY(array)) is hashed once, at
 * rescan, with the hash of its own type: the key families make an int8
 * value hash as the same number in an int4 column.  amgetbitmap then,
 * range by range under its directory page's share lock, reads the range
 * record and probes the filters of the keys' columns.  A range matches when every
 * scan key has a value that some filter of its column may contain; all
 * its heap pages go into the bitmap, lossy, and the heap scan rechecks.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "catalog/index.h"
#include "miscadmin.h"
#include "nodes/tidbitmap.h"
#include "pgstat.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "amqidx.h"

typedef struct AmqIdxScanKey
{
	int			att;			/* 0-based index column */
	int			nhashes;
	uint64	   *hashes;
} AmqIdxScanKey;

typedef struct AmqIdxScanOpaqueData
{
	MemoryContext keycxt;		/* the prepared keys */
	MemoryContext rangecxt;		/* reset per range */
	int			nkeys;
	AmqIdxScanKey *keys;
	bool		impossible;		/* a key no row can match (NULL, empty) */
} AmqIdxScanOpaqueData;

typedef AmqIdxScanOpaqueData *AmqIdxScanOpaque;

/* ambeginscan: a scan with its own memory contexts. */
IndexScanDesc
amqidxbeginscan(Relation index, int nkeys, int norderbys)
{
	IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);
	AmqIdxScanOpaque so = palloc0(sizeof(AmqIdxScanOpaqueData));

	so->keycxt = AllocSetContextCreate(CurrentMemoryContext, "amq index scan keys",
									   ALLOCSET_DEFAULT_SIZES);
	so->rangecxt = AllocSetContextCreate(CurrentMemoryContext, "amq index scan range",
										 ALLOCSET_DEFAULT_SIZES);
	scan->opaque = so;
	return scan;
}

/* Hash a scan key's value or array elements. */
static void
prepare_key(IndexScanDesc scan, ScanKey sk, AmqIdxScanKey *key)
{
	AmqIdxScanOpaque so = (AmqIdxScanOpaque) scan->opaque;
	int			att = sk->sk_attno - 1;
	Oid			keytype = OidIsValid(sk->sk_subtype) ? sk->sk_subtype :
		TupleDescAttr(RelationGetDescr(scan->indexRelation), att)->atttypid;
	AmqIdxHasher h;

	key->att = att;
	key->nhashes = 0;
	AmqIdxHasherInit(&h, scan->indexRelation, att, keytype);

	if (sk->sk_flags & SK_SEARCHARRAY)
	{
		ArrayType  *arr = DatumGetArrayTypeP(sk->sk_argument);
		int16		elmlen;
		bool		elmbyval;
		char		elmalign;
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		get_typlenbyvalalign(ARR_ELEMTYPE(arr), &elmlen, &elmbyval, &elmalign);
		deconstruct_array(arr, ARR_ELEMTYPE(arr), elmlen, elmbyval, elmalign,
						  &elems, &nulls, &n);
		key->hashes = palloc(sizeof(uint64) * Max(n, 1));
		for (int i = 0; i < n; i++)
			if (!nulls[i])
				key->hashes[key->nhashes++] = AmqIdxHash(&h, elems[i]);
	}
	else
	{
		key->hashes = palloc(sizeof(uint64));
		key->hashes[key->nhashes++] = AmqIdxHash(&h, sk->sk_argument);
	}
	/* = ANY of an empty or all-NULL array matches nothing */
	if (key->nhashes == 0)
		so->impossible = true;
}

/* amrescan: take the scan keys and prepare each for probing. */
void
amqidxrescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys,
			 int norderbys)
{
	AmqIdxScanOpaque so = (AmqIdxScanOpaque) scan->opaque;
	MemoryContext old;

	if (keys && scan->numberOfKeys > 0)
		memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));

	MemoryContextReset(so->keycxt);
	old = MemoryContextSwitchTo(so->keycxt);
	so->impossible = false;
	so->nkeys = 0;
	so->keys = palloc(sizeof(AmqIdxScanKey) * Max(scan->numberOfKeys, 1));
	for (int i = 0; i < scan->numberOfKeys; i++)
	{
		ScanKey		sk = &scan->keyData[i];

		/* = NULL is never true */
		if (sk->sk_flags & SK_ISNULL)
		{
			so->impossible = true;
			break;
		}
		prepare_key(scan, sk, &so->keys[so->nkeys++]);
	}
	MemoryContextSwitchTo(old);
}

/* May any value of the key be in the range's filters of its column? */
static bool
key_matches(AmqIdxReader *r, const AmqIdxRange *rg, const AmqIdxScanKey *key)
{
	AmqIdxFilter filters[1 + AMQIDX_MAX_SEGS];
	int			nf = 0;
	int			att = key->att;

	if (rg->sealed[att].addr.blk != InvalidBlockNumber)
		AmqIdxSealedFilter(r, rg, att, &filters[nf++]);
	for (int s = 0; s < rg->nsegs[att]; s++)
		AmqIdxReadFilter(r, rg->segs[att][s].addr, &filters[nf++]);

	for (int k = 0; k < key->nhashes; k++)
		for (int i = 0; i < nf; i++)
			if (AmqIdxFilterContains(r, &filters[i], key->hashes[k]))
				return true;
	return false;
}

/* amgetbitmap: every page of each range whose filters may hold the keys. */
int64
amqidxgetbitmap(IndexScanDesc scan, TIDBitmap *tbm)
{
	AmqIdxScanOpaque so = (AmqIdxScanOpaque) scan->opaque;
	Relation	index = scan->indexRelation;
	Buffer		buf;
	AmqIdxMetaPage meta;
	uint32		ppr;
	uint32		nranges;
	uint32		ndirpages;
	BlockNumber *dirpages;
	BlockNumber heap_nblocks;
	AmqIdxReader rrec;			/* records: many to a page */
	AmqIdxReader r;				/* filters */
	int64		npages = 0;
	MemoryContext old;

	/* a search, as pg_stat_user_indexes and EXPLAIN ANALYZE count them */
	AMQ_COUNT_INDEX_SCAN(scan);
	if (so->impossible)
		return 0;

	/* the rows this backend inserted and holds back (amqidx_insert.c) */
	AmqIdxFlushBatch(index);

	buf = ReadBuffer(index, AMQIDX_METAPAGE_BLKNO);
	LockBuffer(buf, BUFFER_LOCK_SHARE);
	meta = AmqIdxCheckMetaPage(index, BufferGetPage(buf));
	ppr = meta->pages_per_range;
	nranges = meta->nranges;
	ndirpages = meta->ndirpages;
	dirpages = palloc(sizeof(BlockNumber) * Max(ndirpages, 1));
	memcpy(dirpages, meta->dirpages, sizeof(BlockNumber) * ndirpages);
	UnlockReleaseBuffer(buf);

	/* a bitmap scan has no heap relation of its own */
	{
		Relation	heap = table_open(IndexGetRelation(RelationGetRelid(index), false),
									  AccessShareLock);

		heap_nblocks = RelationGetNumberOfBlocks(heap);
		table_close(heap, AccessShareLock);
	}

	/*
	 * Each range under its directory page's share lock: its record and
	 * filters stay in use (and their pages unfreed) while they are read.
	 */
	AmqIdxReaderInit(&rrec, index);
	AmqIdxReaderInit(&r, index);
	for (uint32 p = 0; p * AMQIDX_DIR_PER_PAGE < nranges; p++)
	{
		uint32		first = p * (uint32) AMQIDX_DIR_PER_PAGE;
		uint32		end = Min(nranges, first + (uint32) AMQIDX_DIR_PER_PAGE);

		buf = ReadBuffer(index, dirpages[p]);
		for (uint32 range = first; range < end; range++)
		{
			AmqIdxRange rg;
			AmqIdxAddr	entry;
			bool		match = true;
			BlockNumber start = range * ppr;

			CHECK_FOR_INTERRUPTS();
			if (start >= heap_nblocks)
				break;
			LockBuffer(buf, BUFFER_LOCK_SHARE);
			AmqIdxCheckPage(index, BufferGetPage(buf), dirpages[p], AMQIDX_PAGE_DIR);
			entry = AmqIdxPageGetDir(BufferGetPage(buf))[range - first];
			if (entry.blk == InvalidBlockNumber)
			{
				LockBuffer(buf, BUFFER_LOCK_UNLOCK);
				continue;
			}
			old = MemoryContextSwitchTo(so->rangecxt);
			AmqIdxReadRange(&rrec, entry, &rg);
			AmqIdxReaderUnlock(&rrec);
			for (int k = 0; k < so->nkeys && match; k++)
				match = key_matches(&r, &rg, &so->keys[k]);
			AmqIdxReaderUnlock(&r);
			LockBuffer(buf, BUFFER_LOCK_UNLOCK);
			MemoryContextSwitchTo(old);
			MemoryContextReset(so->rangecxt);

			if (match)
			{
				BlockNumber stop = Min(start + ppr, heap_nblocks);

				for (BlockNumber blk = start; blk < stop; blk++)
					tbm_add_page(tbm, blk);
				npages += stop - start;
			}
		}
		ReleaseBuffer(buf);
	}
	AmqIdxReaderRelease(&rrec);
	AmqIdxReaderRelease(&r);
	pfree(dirpages);

	/* as BRIN: a guess of the rows, for EXPLAIN ANALYZE's counts */
	return npages * 10;
}

/* amendscan: free the scan's memory. */
void
amqidxendscan(IndexScanDesc scan)
{
	AmqIdxScanOpaque so = (AmqIdxScanOpaque) scan->opaque;

	MemoryContextDelete(so->keycxt);
	MemoryContextDelete(so->rangecxt);
	pfree(so);
}
