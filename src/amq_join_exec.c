/*-------------------------------------------------------------------------
 *
 * amq_join_exec.c
 *	  Automatic hash-join pre-filters: the executor nodes.
 *
 * Two pass-through CustomScans that amq_join.c puts into a hash join's plan
 * (see the design comment there):
 *
 *	AmqCollect	  under the Hash node: buffers the 64-bit hash of every inner
 *				  row's keys; when its child is exhausted it sorts and
 *				  deduplicates them and builds a blocked filter sized for the
 *				  distinct keys (1% false positives).
 *	AmqPrefilter  above the outer child (and, pushed down, above a node
 *				  further down): hashes each outer row's keys the same way
 *				  and drops the row when the filter says no.
 *
 * The two find each other through a small registry keyed by the EState and
 * the id the planner gave the pair; the entry lives in the query's memory
 * and leaves the registry when that memory goes.  The filter is valid only
 * for the inner rows it was built from: a rescan of the collector drops it,
 * and so does a rescan of the prefilter when the inner side depends on
 * parameters (the hash join may then rebuild its table after fetching a
 * first outer row).  Without a filter, rows pass unfiltered.
 *
 * Under Parallel Hash (both nodes parallel-aware) the filter lives in the
 * query's dynamic shared memory instead, owned by the collector under its
 * plan_node_id: sized from the planner's estimate of the inner rows before
 * any row is read, every participant's collector ORs its rows' bits into
 * it with atomics, every participant's prefilter (the join's own and a
 * pushed-down copy) finds it in the toc and probes it once the join's build
 * barrier is past the inner hashing phase (prefilter_parallel_ready says
 * why that means complete).  A rescan of the Gather above clears it in
 * ReInitializeDSMCustomScan.  Parallel plans run without shared memory (no
 * DSM callbacks called) use the registry as serial plans do.
 *
 * AmqPrefilterSkipped, a bare pass-through under the Hash, only explains
 * why a join got no pre-filter.
 *
 * Keys: a row with a NULL key passes (strict equality never matches it,
 * and passing is always safe).  Several keys combine their canonical
 * hashes in order.
 *
 * It pays only when many outer rows cannot join: after
 * AMQ_PREFILTER_SAMPLE probes, a pass rate above AMQ_PREFILTER_MAX_PASS
 * (AMQ_PREFILTER_MAX_PASS_LARGE for a filter larger than one of
 * AMQ_JOIN_CACHED_KEYS keys, whose probes miss the cache)
 * pauses the probing for the next AMQ_PREFILTER_PAUSE rows, then it samples
 * again: rows stored in key order (a fact table loaded by date, lineitem
 * by order) can all match in one stretch and not in the next, and a filter
 * pushed below a serial join can first see rows before it is complete.  A
 * useless filter probes one row in sixteen.
 *
 * A filter larger than the cache misses it on most probes: there the
 * pre-filter reads AMQ_PREFILTER_AHEAD rows ahead, prefetches their lines
 * and then probes them in order (prefilter_ahead), where holding a row is
 * cheap (bloomamq.join_prefilter_read_ahead).
 *
 * Memory: 8 bytes per inner row while collecting (16 while sorting), at
 * most max(hash_mem, 64 MB); past that the filter is abandoned for the
 * scan.  The filter itself takes about 10.5 bits per distinct key.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/htup_details.h"
#include "access/parallel.h"
#include "commands/explain.h"
#include AMQ_EXPLAIN_FORMAT_H
#include "executor/executor.h"
#include "executor/hashjoin.h"
#include "port/atomics.h"
#include "port/pg_bswap.h"
#include "storage/barrier.h"
#include "storage/dsm.h"
#include "storage/sharedfileset.h"
#include "storage/shm_toc.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/nodeFuncs.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
#include "utils/sharedtuplestore.h"
#include AMQ_WAIT_EVENT_H
#include "utils/guc.h"
#include "utils/tuplestore.h"

#include "amq_join.h"
#include "amqfilter.h"
#include "amq_hashing.h"
#include "kind_blocked.h"

#define AMQ_JOIN_FPR			0.01
#define AMQ_PREFILTER_SAMPLE	4096
#define AMQ_PREFILTER_MAX_PASS	0.9
#define AMQ_PREFILTER_MAX_PASS_LARGE	0.6
#define AMQ_PREFILTER_PAUSE		(15 * AMQ_PREFILTER_SAMPLE)
#define AMQ_COLLECT_MIN_BYTES	((Size) 64 * 1024 * 1024)

/*
 * Hashes a collector under Parallel Hash holds while the shared filter's
 * lines for them are prefetched, then adds together: a filter larger than
 * the cache costs overlapping misses, not one waited-for miss per row.
 */
#define AMQ_COLLECT_BATCH		32

/*
 * Rows a pre-filter reads ahead of the one it returns where its filter is
 * larger than the cache, their filter lines prefetched together: the
 * probes' misses overlap.  Only where the child's rows are cheap to hold:
 * rows in a shared buffer (a copy is a pin) or of values passed by value.
 */
#define AMQ_PREFILTER_AHEAD		16

/* bloomamq.join_prefilter_read_ahead: for filters larger than the cache */
typedef enum
{
	AMQ_READ_AHEAD_OFF,
	AMQ_READ_AHEAD_AUTO,		/* larger than cached_filter_bytes() */
	AMQ_READ_AHEAD_ON			/* every filter */
} AmqReadAhead;

static int	amq_join_prefilter_read_ahead = AMQ_READ_AHEAD_AUTO;

static const struct config_enum_entry read_ahead_options[] = {
	{"auto", AMQ_READ_AHEAD_AUTO, false},
	{"on", AMQ_READ_AHEAD_ON, false},
	{"off", AMQ_READ_AHEAD_OFF, false},
	{NULL, 0, false}
};

/*
 * The fewest keys a shared filter is sized for: 128K keys at 1% is 169 kB,
 * which a probe finds in a core's L2 cache as it would a smaller filter.
 */
#define AMQ_SHARED_MIN_KEYS		(128 * 1024)

/* The filter of one hash join in one EState, shared by its two nodes. */
typedef struct AmqJoinFilter
{
	struct AmqJoinFilter *next; /* in the registry */
	EState	   *estate;
	int			id;
	MemoryContextCallback unlink;	/* leaves the registry with the query */
	MemoryContext cxt;			/* hashes and filter of the current build */

	/* collection */
	uint64	   *hashes;
	Size		nhashes;
	Size		maxhashes;		/* allocated */
	Size		limit;			/* most hashes buffered */

	/* the filter, valid when ready */
	bool		ready;
	bool		abandoned;		/* more inner rows than limit */
	AmqFilter	filter;			/* blocked, seed 0 */
	uint64		builds;

	/* where to publish it once built, for a copy below a Gather */
	struct AmqPublishedFilter *publish_to;

	/*
	 * A filter of the outer keys for the inner side (AmqOuterCollect): what
	 * builds it now, when the inner side needs it first.
	 */
	void		(*build_now) (void *arg);
	void	   *build_now_arg;

	/*
	 * In the leader, of the join's filter in shared memory under Parallel
	 * Hash (either direction), for EXPLAIN
	 */
	uint64		shared_capacity;	/* 0: none */
	uint64		shared_payload_len;
	bool		shared_abandoned;
} AmqJoinFilter;

static AmqJoinFilter *registry = NULL;

/*
 * The filter of a Parallel Hash join, in the query's dynamic shared memory
 * under the collector's plan_node_id.  Sized from the planner's estimate of
 * the inner rows before any row is read, filled by every participant's
 * collector with atomic ORs, read by every participant's prefilter once the
 * build barrier has passed the inner hashing phase.  The payload follows the
 * header at AMQ_SHARED_PAYLOAD_OFFSET.
 */
typedef struct AmqSharedFilter
{
	uint64		nblocks;
	uint64		payload_len;
	uint64		capacity;		/* keys it was sized for */
	pg_atomic_uint64 inner_rows;	/* hashed by all participants (outer rows
									 * for AmqOuterCollect) */

	/*
	 * A filter of the outer keys (AmqOuterCollect): phase 1 of the barrier
	 * once every participant's outer rows are in; set if one gave up.
	 */
	Barrier		collected;
	pg_atomic_uint32 abandoned;
} AmqSharedFilter;

#define AMQ_SHARED_PAYLOAD_OFFSET	TYPEALIGN(64, sizeof(AmqSharedFilter))
#define AMQ_SHARED_PAYLOAD(sf)		((uint8 *) (sf) + AMQ_SHARED_PAYLOAD_OFFSET)

/*
 * The filter of a hash join in the leader, published to the workers under a
 * Gather below it for a pushed-down copy (AMQ_PUSHED_PUBLISHED): room for a
 * filter sized as a Parallel Hash join's shared one, into which the leader
 * copies its own once complete, when the Gather starts its workers or, if
 * that comes first, when its collector builds it; then it sets ready.  A
 * filter larger than the room is not published: the workers pass their
 * rows, and the join's own prefilter filters them in the leader.  The
 * payload follows the header.
 */
typedef struct AmqPublishedFilter
{
	pg_atomic_uint32 ready;		/* the fields below are set */
	uint64		room;			/* bytes of payload there is room for */
	uint64		nblocks;
	uint64		nkeys;
	uint64		payload_len;
} AmqPublishedFilter;

#define AMQ_PUBLISHED_PAYLOAD_OFFSET	TYPEALIGN(64, sizeof(AmqPublishedFilter))
#define AMQ_PUBLISHED_PAYLOAD(pf)		((uint8 *) (pf) + AMQ_PUBLISHED_PAYLOAD_OFFSET)

/* How a node hashes the join keys of its child's tuples. */
typedef struct AmqJoinKeys
{
	int			nkeys;
	ExprState **exprs;
	AttrNumber *attnos;			/* > 0: the key is that column of the tuple */
	AmqKeyHasher *hashers;
	ExprContext *econtext;
	bool		plain;			/* every key a column of int4 or int8: hashing
								 * evaluates nothing and allocates nothing */
} AmqJoinKeys;

typedef struct CollectState
{
	CustomScanState css;
	AmqJoinFilter *shared;
	AmqJoinKeys keys;
	bool		done;			/* child exhausted in this scan */

	/* under Parallel Hash with shared memory: the filter there */
	AmqSharedFilter *sf;
	AmqFilter	sf_plan;		/* its geometry, planned by the leader */
	uint64		unflushed_rows; /* hashed, not yet counted in sf */
	int			npending;		/* hashes waiting for their prefetched lines */
	uint64		pending[AMQ_COLLECT_BATCH];
} CollectState;

typedef struct PrefilterState
{
	CustomScanState css;
	AmqJoinFilter *shared;
	AmqJoinKeys keys;
	bool		inner_params;

	/* this scan: the current sample, or the rows of a pause */
	bool		disabled;
	uint64		scan_probed;
	uint64		scan_passed;
	uint64		paused_rows;

	/*
	 * Under Parallel Hash with shared memory: the toc to find the collector's
	 * filter and the join's state in, once all nodes have set up theirs; the
	 * shared filter as an AmqFilter once the build is complete; at shutdown,
	 * what EXPLAIN shows of it.  (The rows removed and the pauses are the
	 * node's instrumentation counts, nfiltered1 and nfiltered2, which the
	 * executor sums over the workers of any parallel plan.)
	 */
	shm_toc    *toc;
	AmqSharedFilter *sf;
	ParallelHashJoinState *phj;
	bool		parallel_ready;
	AmqFilter	view;
	bool		collected;		/* this segment's filter read */
	bool		have_totals;
	uint64		total_inner_rows;

	/*
	 * A copy below a Gather of a join in the leader (AMQ_PUSHED_PUBLISHED):
	 * in a worker, the leader's filter as published in shared memory, if it
	 * was; in the leader, whether it was published, for EXPLAIN ANALYZE.
	 */
	AmqPublishedFilter *pf;		/* worker: what the leader publishes */
	bool		published;		/* worker: published_view is set */
	AmqFilter	published_view;
	AmqPublishedFilter *publish_area;	/* leader: where it publishes */
	bool		publishing;		/* leader: it did, for EXPLAIN ANALYZE */

	/*
	 * Rows read ahead for a filter larger than the cache (prefilter_ahead):
	 * copies of the child's rows, their hashes, whether each passes; NULL
	 * where copying the child's rows costs more than a miss.
	 */
	TupleTableSlot **ahead;
	uint64		ahead_hash[AMQ_PREFILTER_AHEAD];
	bool		ahead_keyed[AMQ_PREFILTER_AHEAD];
	bool		ahead_pass[AMQ_PREFILTER_AHEAD];
	int			ahead_n;		/* rows read ahead */
	int			ahead_next;		/* the next of them to return */
	bool		ahead_end;		/* the child has no more rows */
} PrefilterState;

/* Reset callback of the query's context: drop a filter from the registry. */
static void
registry_unlink(void *arg)
{
	AmqJoinFilter *f = (AmqJoinFilter *) arg;
	AmqJoinFilter **p;

	for (p = &registry; *p; p = &(*p)->next)
	{
		if (*p == f)
		{
			*p = f->next;
			break;
		}
	}
}

/* The shared filter of join id in this query, made on first use. */
static AmqJoinFilter *
registry_get(EState *estate, int id)
{
	AmqJoinFilter *f;
	Size		limit;

	for (f = registry; f; f = f->next)
	{
		if (f->estate == estate && f->id == id)
			return f;
	}

	f = MemoryContextAllocZero(estate->es_query_cxt, sizeof(AmqJoinFilter));
	f->estate = estate;
	f->id = id;
	f->cxt = AllocSetContextCreate(estate->es_query_cxt,
								   "bloomamq join prefilter",
								   ALLOCSET_DEFAULT_SIZES);
	limit = Max(get_hash_memory_limit(), AMQ_COLLECT_MIN_BYTES);
	f->limit = limit / (2 * sizeof(uint64));
	f->unlink.func = registry_unlink;
	f->unlink.arg = f;
	MemoryContextRegisterResetCallback(estate->es_query_cxt, &f->unlink);
	f->next = registry;
	registry = f;
	return f;
}

/* Forget the filter and the hashes: the inner side is read again. */
static void
filter_reset(AmqJoinFilter *f)
{
	f->ready = false;
	f->abandoned = false;
	f->hashes = NULL;
	f->nhashes = f->maxhashes = 0;
	memset(&f->filter, 0, sizeof(f->filter));
	MemoryContextReset(f->cxt);
}

/* Buffer one inner key hash, or abandon the filter past the memory limit. */
static void
filter_collect(AmqJoinFilter *f, uint64 hash)
{
	if (unlikely(f->nhashes == f->maxhashes))
	{
		Size		n;

		if (f->abandoned)
			return;
		if (f->maxhashes >= f->limit)
		{
			/* too many inner rows to buffer: no filter for this scan */
			f->abandoned = true;
			f->hashes = NULL;
			f->nhashes = f->maxhashes = 0;
			MemoryContextReset(f->cxt);
			return;
		}
		n = Min(Max(f->maxhashes * 2, 1024), f->limit);
		if (f->hashes == NULL)
			f->hashes = MemoryContextAllocExtended(f->cxt, n * sizeof(uint64),
												   MCXT_ALLOC_HUGE);
		else
			f->hashes = repalloc_huge(f->hashes, n * sizeof(uint64));
		f->maxhashes = n;
	}
	f->hashes[f->nhashes++] = hash;
}

/*
 * Copy the leader's complete filter f into pf for the workers, if there is
 * room and it is not there yet (a rescan of a stable inner side builds the
 * same filter), then say it is ready: the write barrier orders the bytes
 * before the flag, which the workers read before the bytes.
 */
static void
filter_publish(AmqJoinFilter *f, AmqPublishedFilter *pf)
{
	if (pg_atomic_read_u32(&pf->ready) || f->filter.payload_len > pf->room)
		return;
	pf->nblocks = f->filter.param[0];
	pf->nkeys = f->filter.nkeys;
	pf->payload_len = f->filter.payload_len;
	memcpy(AMQ_PUBLISHED_PAYLOAD(pf), f->filter.payload, f->filter.payload_len);
	pg_write_barrier();
	pg_atomic_write_u32(&pf->ready, 1);
}

/* Build the filter from the buffered hashes once the inner side is read. */
static void
filter_build(AmqJoinFilter *f)
{
	uint64	   *scratch;
	Size		n = 0;
	AmqStatus	st;
	MemoryContext old;

	if (f->abandoned)
		return;
	old = MemoryContextSwitchTo(f->cxt);
	if (f->nhashes > 0)
	{
		scratch = MemoryContextAllocExtended(f->cxt, f->nhashes * sizeof(uint64),
											 MCXT_ALLOC_HUGE);
		n = amq_sort_unique(f->hashes, f->nhashes, scratch);
		pfree(scratch);
	}
	st = amq_plan(&f->filter, AMQ_KIND_BLOCKED, Max(n, 1), AMQ_JOIN_FPR);
	if (st != AMQ_OK)
		elog(ERROR, "could not size a join pre-filter for " UINT64_FORMAT " keys: %s",
			 (uint64) n, amq_status_message(st));
	f->filter.payload = MemoryContextAllocExtended(f->cxt, f->filter.payload_len,
												   MCXT_ALLOC_HUGE | MCXT_ALLOC_ZERO);
	/* sorted hashes fill the blocks in address order (seed 0: as they are) */
	amq_blocked_fill(f->filter.payload, f->filter.param[0], f->hashes, n);
	f->filter.nkeys = n;
	if (f->hashes)
		pfree(f->hashes);
	f->hashes = NULL;
	f->nhashes = f->maxhashes = 0;
	f->ready = true;
	f->builds++;
	MemoryContextSwitchTo(old);
	if (f->publish_to)
		filter_publish(f, f->publish_to);
}

/*
 * The size of a join filter of AMQ_JOIN_CACHED_KEYS keys: a larger one
 * misses the cache on most probes, and pauses itself sooner.
 */
static uint64 cached_bytes = 0;

static pg_noinline void
cached_filter_bytes_init(void)
{
	AmqFilter	f;

	if (amq_plan(&f, AMQ_KIND_BLOCKED, AMQ_JOIN_CACHED_KEYS,
				 AMQ_JOIN_FPR) != AMQ_OK)
		elog(ERROR, "could not size a join pre-filter for %d keys",
			 AMQ_JOIN_CACHED_KEYS);
	cached_bytes = f.payload_len;
}

/* (inline: the pre-filter asks once per row) */
static inline uint64
cached_filter_bytes(void)
{
	if (unlikely(cached_bytes == 0))
		cached_filter_bytes_init();
	return cached_bytes;
}

/* Probe the join filter (blocked, unseeded) for one hash. */
static inline bool
filter_may_contain(const AmqFilter *f, uint64 hash)
{
	return amq_blocked_probe(amq_blocked_at(f->payload, f->param[0], hash),
							 (uint32) hash);
}

/*
 * The geometry of a Parallel Hash join's shared filter for the planner's
 * estimate of the inner rows: twice that many keys, so that an estimate
 * short by half still gives about 1% false positives, and at least
 * AMQ_SHARED_MIN_KEYS, as the estimates of small filtered inner sides are
 * the ones most often short by more (TPC-H's q22: 2,880 rows estimated,
 * 23,020 read, which filled a filter of 5,760 keys to pass 73% of the
 * outer rows where 15% match); at most
 * max(hash_mem, 64 MB), and at most a quarter of what /dev/shm has free
 * (the rest for the hash table and the query's other shared memory): a
 * filter too small for its keys passes more rows, and pauses itself, where
 * one too large would fail the query.  The leader plans it once
 * (EstimateDSMCustomScan) and the others read it from shared memory.
 */
static void
shared_filter_plan(AmqFilter *f, double inner_rows)
{
	Size		limit = Min(Max(get_hash_memory_limit(), AMQ_COLLECT_MIN_BYTES),
							AmqShmFreeBytes() / 4);
	uint64		capacity = (uint64) Max(Min(inner_rows * 2, 1e12),
										(double) AMQ_SHARED_MIN_KEYS);
	AmqStatus	st;

	for (;;)
	{
		st = amq_plan(f, AMQ_KIND_BLOCKED, capacity, AMQ_JOIN_FPR);
		if (st != AMQ_OK)
			elog(ERROR, "could not size a join pre-filter for " UINT64_FORMAT " keys: %s",
				 capacity, amq_status_message(st));
		if (f->payload_len <= limit || capacity <= 1024)
			break;
		capacity /= 2;
	}
	f->nkeys = capacity;
}

/*
 * Add a hash to the shared filter, concurrently with other participants:
 * each of the block's eight words gets its bit by an atomic OR, skipped
 * when the bit is already there.  The words are little-endian, as the
 * probe reads them.
 */
static inline void
shared_filter_add(AmqSharedFilter *sf, uint64 hash)
{
	static const uint32 salts[8] = {
		AMQ_BLOCKED_SALT0, AMQ_BLOCKED_SALT1, AMQ_BLOCKED_SALT2,
		AMQ_BLOCKED_SALT3, AMQ_BLOCKED_SALT4, AMQ_BLOCKED_SALT5,
		AMQ_BLOCKED_SALT6, AMQ_BLOCKED_SALT7
	};
	pg_atomic_uint32 *words = (pg_atomic_uint32 *)
		amq_blocked_at(AMQ_SHARED_PAYLOAD(sf), sf->nblocks, hash);
	int			i;

	for (i = 0; i < 8; i++)
	{
		uint32		bit = AMQ_BLOCKED_BIT((uint32) hash, salts[i]);

#ifdef WORDS_BIGENDIAN
		bit = pg_bswap32(bit);
#endif
		if ((pg_atomic_read_u32(&words[i]) & bit) == 0)
			pg_atomic_fetch_or_u32(&words[i], bit);
	}
}

/* Empty the shared filter sf, for a scan of the Gather above. */
static void
shared_filter_clear(AmqSharedFilter *sf)
{
	pg_atomic_write_u64(&sf->inner_rows, 0);
	BarrierInit(&sf->collected, 0);
	pg_atomic_write_u32(&sf->abandoned, 0);
	memset(AMQ_SHARED_PAYLOAD(sf), 0, sf->payload_len);
}

/* Set up the shared filter sf in new shared memory, of the geometry planned. */
static void
shared_filter_init(AmqSharedFilter *sf, const AmqFilter *planned)
{
	sf->nblocks = planned->param[0];
	sf->payload_len = planned->payload_len;
	sf->capacity = planned->nkeys;
	pg_atomic_init_u64(&sf->inner_rows, 0);
	pg_atomic_init_u32(&sf->abandoned, 0);
	shared_filter_clear(sf);
}

/* view: the blocked filter of nblocks whose payload_len bytes are at payload. */
static void
filter_view(AmqFilter *view, uint64 nblocks, uint64 payload_len, uint8 *payload)
{
	memset(view, 0, sizeof(*view));
	view->kind = AMQ_KIND_BLOCKED;
	view->param[0] = nblocks;
	view->payload_len = payload_len;
	view->payload = payload;
}

/* Set up the key hashing of node, whose child is already initialized. */
static void
keys_init(AmqJoinKeys *k, CustomScanState *node, EState *estate)
{
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *collations = list_nth(cscan->custom_private,
									  AMQ_JOIN_PRIV_COLLATIONS);
	ListCell   *lc;
	int			i = 0;

	k->nkeys = list_length(cscan->custom_exprs);
	k->exprs = palloc0(sizeof(ExprState *) * k->nkeys);
	k->attnos = palloc0(sizeof(AttrNumber) * k->nkeys);
	k->hashers = palloc0(sizeof(AmqKeyHasher) * k->nkeys);
	k->econtext = node->ss.ps.ps_ExprContext;
	k->plain = true;

	foreach(lc, cscan->custom_exprs)
	{
		Expr	   *expr = (Expr *) lfirst(lc);

		if (IsA(expr, Var) && ((Var *) expr)->varno == OUTER_VAR &&
			((Var *) expr)->varattno > 0)
			k->attnos[i] = ((Var *) expr)->varattno;
		else
			k->exprs[i] = ExecInitExpr(expr, &node->ss.ps);
		AmqHasherInit(&k->hashers[i], exprType((Node *) expr),
					  list_nth_oid(collations, i), estate->es_query_cxt);
		if (k->attnos[i] == 0 || (k->hashers[i].fast_type != INT4OID &&
								  k->hashers[i].fast_type != INT8OID))
			k->plain = false;
		i++;
	}
}

/*
 * The combined hash of slot's keys; false if a key is NULL.  Plain keys
 * need no expression context, so rows of them skip its reset.
 */
static pg_attribute_always_inline bool
keys_hash(AmqJoinKeys *k, TupleTableSlot *slot, uint64 *hash)
{
	ExprContext *econtext = k->econtext;
	MemoryContext old = NULL;
	uint64		h = 0;
	bool		isnull = false;

	if (!k->plain)
	{
		ResetExprContext(econtext);
		econtext->ecxt_outertuple = slot;
		old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	}
	for (int i = 0; i < k->nkeys; i++)
	{
		Datum		value;

		if (k->attnos[i] > 0)
			value = slot_getattr(slot, k->attnos[i], &isnull);
		else
			value = ExecEvalExpr(k->exprs[i], econtext, &isnull);
		if (isnull)
			break;
		if (i == 0)
			h = AmqHashDatum(&k->hashers[i], value);
		else
			h = amq_mix64(h) ^ AmqHashDatum(&k->hashers[i], value);
	}
	if (!k->plain)
		MemoryContextSwitchTo(old);
	*hash = h;
	return !isnull;
}

/* Begin: the node returns its child's tuples, of the child's slot type. */
static void
pass_through_begin(CustomScanState *node, EState *estate, int eflags)
{
	PlanState  *child;

	child = ExecInitNode(outerPlan(node->ss.ps.plan), estate, eflags);
	outerPlanState(node) = child;
	node->ss.ps.resultopsset = true;
	node->ss.ps.resultops = ExecGetResultSlotOps(child,
												 &node->ss.ps.resultopsfixed);
}

/* End: the child ends. */
static void
pass_through_end(CustomScanState *node)
{
	ExecEndNode(outerPlanState(node));
}

/* Rescan the child unless a changed parameter makes it rescan itself. */
static void
pass_through_rescan(CustomScanState *node)
{
	PlanState  *child = outerPlanState(node);

	if (child->chgParam == NULL)
		ExecReScan(child);
}

/* The which'th integer of the custom scan's private list. */
static int
private_int(CustomScanState *node, int which)
{
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;

	return list_nth_int(list_nth(cscan->custom_private, AMQ_JOIN_PRIV_INTS),
						which);
}

/*
 * The forms of EXPLAIN VERBOSE's reasons for a skipped pre-filter of either
 * side's rows: too few rows, or too few removed (than: the bound missed).
 */
static char *
skipped_few_rows(int rows, const char *side)
{
	return psprintf("skipped, %d %s rows expected, fewer than bloomamq.join_prefilter_min_rows (%d)",
					rows, side, amq_join_prefilter_min_rows);
}

static char *
skipped_few_removed(double remove, int rows, const char *side, const char *than)
{
	return psprintf("skipped, expected to remove %.1f%% of %d %s rows, %s",
					remove, rows, side, than);
}

static char *
below_min_remove(bool twice)
{
	return psprintf("less than %sbloomamq.join_prefilter_min_remove (%g%%)",
					twice ? "twice " : "",
					amq_join_prefilter_min_remove * (twice ? 200 : 100));
}

/*
 * EXPLAIN of a hash join's pre-filter of the outer side, or of a skipped
 * one, where the inner side was the larger: why its rows got no filter.
 */
static void
explain_inner_why(CustomScanState *node, ExplainState *es)
{
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	AmqInnerDecision inner_why;
	double		inner_remove;
	int			inner_rows;
	char	   *why;

	if (list_length(list_nth(cscan->custom_private, AMQ_JOIN_PRIV_INTS)) <=
		AMQ_JOIN_INT_INNER_WHY_ROWS)
		return;
	inner_why = private_int(node, AMQ_JOIN_INT_INNER_DECISION);
	inner_remove = private_int(node, AMQ_JOIN_INT_INNER_REMOVE) / 10.0;
	inner_rows = private_int(node, AMQ_JOIN_INT_INNER_WHY_ROWS);
	if (inner_why == AMQ_INNER_NONE)
		return;
	if (!es->verbose)
		why = "skipped";
	else if (inner_why == AMQ_INNER_SKIPPED_OUTER)
		why = "skipped, the outer side may read other rows when read again";
	else if (inner_why == AMQ_INNER_SKIPPED_ROWS)
		why = skipped_few_rows(inner_rows, "inner");
	else if (inner_why == AMQ_INNER_SKIPPED_UNKNOWN)
		why = psprintf("skipped, no statistics of both keys estimate how many of %d inner rows match",
					   inner_rows);
	else if (inner_why == AMQ_INNER_SKIPPED_COST)
		why = skipped_few_removed(inner_remove, inner_rows, "inner",
								  below_min_remove(false));
	else
		why = skipped_few_removed(inner_remove, inner_rows, "inner",
								  "fewer than three for each outer row");
	ExplainPropertyText("Inner Prefilter", why, es);
}

/* EXPLAIN: the key expressions, deparsed against the node's child */
static void
explain_keys(CustomScanState *node, List *ancestors, ExplainState *es,
			 const char *label)
{
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *context;
	List	   *result = NIL;
	bool		useprefix;
	ListCell   *lc;

	context = set_deparse_context_plan(es->deparse_cxt, &cscan->scan.plan,
									   ancestors);
	useprefix = list_length(es->rtable) > 1 || es->verbose;
	foreach(lc, cscan->custom_exprs)
		result = lappend(result, deparse_expression(lfirst(lc), context,
													useprefix, false));
	ExplainPropertyList(label, result, es);
}

/* ---- AmqCollect ---- */

static Node *
collect_create(CustomScan *cscan);
static void collect_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *collect_exec(CustomScanState *node);
static void collect_rescan(CustomScanState *node);
static void collect_explain(CustomScanState *node, List *ancestors,
							ExplainState *es);
static Size collect_estimate_dsm(CustomScanState *node, ParallelContext *pcxt);
static void collect_initialize_dsm(CustomScanState *node, ParallelContext *pcxt,
								   void *coordinate);
static void collect_reinitialize_dsm(CustomScanState *node,
									 ParallelContext *pcxt, void *coordinate);
static void collect_initialize_worker(CustomScanState *node, shm_toc *toc,
									  void *coordinate);
static void collect_shutdown(CustomScanState *node);

const CustomScanMethods amq_collector_scan_methods = {
	.CustomName = "AmqCollect",
	.CreateCustomScanState = collect_create,
};

static const CustomExecMethods collect_exec_methods = {
	.CustomName = "AmqCollect",
	.BeginCustomScan = collect_begin,
	.ExecCustomScan = collect_exec,
	.EndCustomScan = pass_through_end,
	.ReScanCustomScan = collect_rescan,
	.EstimateDSMCustomScan = collect_estimate_dsm,
	.InitializeDSMCustomScan = collect_initialize_dsm,
	.ReInitializeDSMCustomScan = collect_reinitialize_dsm,
	.InitializeWorkerCustomScan = collect_initialize_worker,
	.ShutdownCustomScan = collect_shutdown,
	.ExplainCustomScan = collect_explain,
};

/* CreateCustomScanState of the collector. */
static Node *
collect_create(CustomScan *cscan)
{
	CollectState *cs = palloc0(sizeof(CollectState));

	NodeSetTag(cs, T_CustomScanState);
	cs->css.methods = &collect_exec_methods;
	return (Node *) cs;
}

/* BeginCustomScan of the collector: the shared filter, key hashing. */
static void
collect_begin(CustomScanState *node, EState *estate, int eflags)
{
	CollectState *cs = (CollectState *) node;

	pass_through_begin(node, estate, eflags);
	cs->shared = registry_get(estate, private_int(node, AMQ_JOIN_INT_ID));
	keys_init(&cs->keys, node, estate);
}

/* Add the pending hashes, whose lines were prefetched, to the shared filter. */
static void
collect_add_pending(CollectState *cs)
{
	for (int i = 0; i < cs->npending; i++)
		shared_filter_add(cs->sf, cs->pending[i]);
	cs->npending = 0;
}

/*
 * Add this participant's pending hashes to the shared filter, and its count
 * of hashed rows to the shared one.  Adding is always safe (hashes of a
 * scan started over only add false positives); dropping is not.
 */
static void
collect_flush(CollectState *cs)
{
	if (cs->sf == NULL)
		return;
	collect_add_pending(cs);
	if (cs->unflushed_rows > 0)
	{
		pg_atomic_fetch_add_u64(&cs->sf->inner_rows, cs->unflushed_rows);
		cs->unflushed_rows = 0;
	}
}

/* ExecCustomScan of the collector: each inner row, its keys hashed. */
static TupleTableSlot *
collect_exec(CustomScanState *node)
{
	CollectState *cs = (CollectState *) node;
	TupleTableSlot *slot = ExecProcNode(outerPlanState(node));
	uint64		hash;

	if (cs->sf)
	{
		/* Parallel Hash: into the shared filter, in prefetched batches */
		if (TupIsNull(slot))
			collect_flush(cs);
		else if (keys_hash(&cs->keys, slot, &hash))
		{
			__builtin_prefetch(amq_blocked_at(AMQ_SHARED_PAYLOAD(cs->sf),
											  cs->sf->nblocks, hash), 1);
			cs->pending[cs->npending++] = hash;
			cs->unflushed_rows++;
			if (cs->npending == AMQ_COLLECT_BATCH)
				collect_add_pending(cs);
		}
		return slot;
	}

	if (TupIsNull(slot))
	{
		if (!cs->done)
		{
			filter_build(cs->shared);
			cs->done = true;
		}
		return slot;
	}
	if (!cs->shared->abandoned && keys_hash(&cs->keys, slot, &hash))
		filter_collect(cs->shared, hash);
	return slot;
}

/* ReScanCustomScan of the collector: the inner side is read again. */
static void
collect_rescan(CustomScanState *node)
{
	CollectState *cs = (CollectState *) node;

	collect_flush(cs);
	filter_reset(cs->shared);
	cs->done = false;
	pass_through_rescan(node);
}

/* EstimateDSMCustomScan of the collector: the shared filter's bytes. */
static Size
collect_estimate_dsm(CustomScanState *node, ParallelContext *pcxt)
{
	CollectState *cs = (CollectState *) node;

	shared_filter_plan(&cs->sf_plan, private_int(node, AMQ_JOIN_INT_INNER_ROWS));
	return AMQ_SHARED_PAYLOAD_OFFSET + cs->sf_plan.payload_len;
}

/* InitializeDSMCustomScan of the collector (leader): an empty filter. */
static void
collect_initialize_dsm(CustomScanState *node, ParallelContext *pcxt,
					   void *coordinate)
{
	CollectState *cs = (CollectState *) node;

	shared_filter_init(coordinate, &cs->sf_plan);
	cs->sf = coordinate;
}

/*
 * ReInitializeDSMCustomScan of the collector: the Gather above is rescanned
 * and no participant runs; the join will hash its inner side again.
 */
static void
collect_reinitialize_dsm(CustomScanState *node, ParallelContext *pcxt,
						 void *coordinate)
{
	shared_filter_clear(coordinate);
}

/* InitializeWorkerCustomScan of the collector: the leader's filter. */
static void
collect_initialize_worker(CustomScanState *node, shm_toc *toc,
						  void *coordinate)
{
	((CollectState *) node)->sf = (AmqSharedFilter *) coordinate;
}

/* ShutdownCustomScan of the collector. */
static void
collect_shutdown(CustomScanState *node)
{
	collect_flush((CollectState *) node);
}

/* ExplainCustomScan of the collector: its keys. */
static void
collect_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	explain_keys(node, ancestors, es, "Collect Keys");
}

/* ---- AmqPrefilter ---- */

static Node *prefilter_create(CustomScan *cscan);
static void prefilter_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *prefilter_exec(CustomScanState *node);
static void prefilter_end(CustomScanState *node);
static void prefilter_rescan(CustomScanState *node);
static void prefilter_explain(CustomScanState *node, List *ancestors,
							  ExplainState *es);
static Size prefilter_estimate_dsm(CustomScanState *node, ParallelContext *pcxt);
static void prefilter_initialize_dsm(CustomScanState *node,
									 ParallelContext *pcxt, void *coordinate);
static void prefilter_initialize_worker(CustomScanState *node, shm_toc *toc,
										void *coordinate);
static void prefilter_shutdown(CustomScanState *node);

const CustomScanMethods amq_prefilter_scan_methods = {
	.CustomName = "AmqPrefilter",
	.CreateCustomScanState = prefilter_create,
};

static const CustomExecMethods prefilter_exec_methods = {
	.CustomName = "AmqPrefilter",
	.BeginCustomScan = prefilter_begin,
	.ExecCustomScan = prefilter_exec,
	.EndCustomScan = prefilter_end,
	.ReScanCustomScan = prefilter_rescan,
	.EstimateDSMCustomScan = prefilter_estimate_dsm,
	.InitializeDSMCustomScan = prefilter_initialize_dsm,
	.InitializeWorkerCustomScan = prefilter_initialize_worker,
	.ShutdownCustomScan = prefilter_shutdown,
	.ExplainCustomScan = prefilter_explain,
};

/* CreateCustomScanState of the pre-filter. */
static Node *
prefilter_create(CustomScan *cscan)
{
	PrefilterState *ps = palloc0(sizeof(PrefilterState));

	NodeSetTag(ps, T_CustomScanState);
	ps->css.methods = &prefilter_exec_methods;
	return (Node *) ps;
}

/*
 * The read-ahead copies, of the child's slot type, where that is fixed and a
 * copy cheap: a pin of a row in a shared buffer, or values passed by value.
 * They are the query's (the executor drops them, and their pins, at the end).
 */
static void
prefilter_ahead_init(PrefilterState *ps, EState *estate)
{
	PlanState  *child = outerPlanState(&ps->css);
	TupleDesc	desc = ExecGetResultType(child);
	bool		fixed;
	const TupleTableSlotOps *ops = ExecGetResultSlotOps(child, &fixed);

	if (!fixed || amq_join_prefilter_read_ahead == AMQ_READ_AHEAD_OFF)
		return;
	if (ops == &TTSOpsVirtual)
	{
		for (int i = 0; i < desc->natts; i++)
			if (!TupleDescAttr(desc, i)->attbyval)
				return;
	}
	else if (ops != &TTSOpsBufferHeapTuple)
		return;
	ps->ahead = palloc(sizeof(TupleTableSlot *) * AMQ_PREFILTER_AHEAD);
	for (int i = 0; i < AMQ_PREFILTER_AHEAD; i++)
		ps->ahead[i] = ExecInitExtraTupleSlot(estate, desc, ops);
}

/* BeginCustomScan of the pre-filter: the shared filter, key hashing. */
static void
prefilter_begin(CustomScanState *node, EState *estate, int eflags)
{
	PrefilterState *ps = (PrefilterState *) node;

	pass_through_begin(node, estate, eflags);
	ps->shared = registry_get(estate, private_int(node, AMQ_JOIN_INT_ID));
	ps->inner_params = private_int(node, AMQ_JOIN_INT_INNER_PARAMS) != 0;
	keys_init(&ps->keys, node, estate);
	prefilter_ahead_init(ps, estate);
}

/*
 * Under Parallel Hash: find the shared filter and the join's shared state,
 * set up by the leader before any participant ran.
 */
static void
prefilter_lookup(PrefilterState *ps)
{
	CustomScanState *node = &ps->css;

	if (ps->sf)
		return;
	ps->sf = shm_toc_lookup(ps->toc, private_int(node, AMQ_JOIN_INT_COLLECT_NODE),
							true);
	ps->phj = shm_toc_lookup(ps->toc, private_int(node, AMQ_JOIN_INT_JOIN_NODE),
							 true);
	if (ps->sf == NULL || ps->phj == NULL)
		elog(ERROR, "shared state of a join pre-filter not found");
	filter_view(&ps->view, ps->sf->nblocks, ps->sf->payload_len,
				AMQ_SHARED_PAYLOAD(ps->sf));
}

/*
 * Under Parallel Hash: is the shared filter complete?
 *
 * Every participant that hashes inner rows (through its collector) does so
 * in the build barrier's inner hashing phase and arrives at the barrier
 * only after its last row; the phase advances only when all attached
 * participants have arrived, and a participant that attaches later never
 * hashes inner rows.  So once the phase is past inner hashing, every inner
 * row is in the filter.  nodeHashjoin.c reads the outer side only after
 * that (it never fetches an outer row early under Parallel Hash): the check
 * is a guard, cheap, made until it holds in each scan.  The phase only
 * grows until the Gather above is rescanned, when no participant runs; the
 * barrier operations that moved it are full memory barriers, the read
 * barrier here orders our reads of the filter after the phase.
 */
static bool
prefilter_parallel_ready(PrefilterState *ps)
{
	prefilter_lookup(ps);
	if (BarrierPhase(&ps->phj->build_barrier) <= AMQ_PHJ_BUILD_HASH_INNER)
		return false;
	pg_read_barrier();
	ps->parallel_ready = true;
	return true;
}

/*
 * In a worker, for a copy of a join in the leader: has the leader published
 * its filter?  The read barrier orders our reads of it after the flag.
 */
static bool
prefilter_published_ready(PrefilterState *ps)
{
	AmqPublishedFilter *pf = ps->pf;

	if (!pg_atomic_read_u32(&pf->ready))
		return false;
	pg_read_barrier();
	filter_view(&ps->published_view, pf->nblocks, pf->payload_len,
				AMQ_PUBLISHED_PAYLOAD(pf));
	ps->published_view.nkeys = pf->nkeys;
	ps->published = true;
	return true;
}

/*
 * The filter this scan probes, or NULL while it has none (it is not yet
 * built, or was abandoned): then rows pass.
 */
static const AmqFilter *
prefilter_filter(PrefilterState *ps)
{
	AmqJoinFilter *shared = ps->shared;

	if (ps->toc)
		return ps->parallel_ready || prefilter_parallel_ready(ps) ? &ps->view : NULL;
	if (ps->pf)
		return ps->published || prefilter_published_ready(ps) ?
			&ps->published_view : NULL;
	/* on the inner side: the outer side is read first */
	if (!shared->ready && !shared->abandoned && shared->build_now)
		shared->build_now(shared->build_now_arg);
	return shared->ready ? &shared->filter : NULL;
}

/*
 * Probe filter for one row's hash, counting the sample: true if the row may
 * join.  After each sample of AMQ_PREFILTER_SAMPLE probes that passed too
 * many, the probing pauses.
 */
static pg_attribute_always_inline bool
prefilter_probe(PrefilterState *ps, const AmqFilter *filter, uint64 hash)
{
	bool		pass = filter_may_contain(filter, hash);

	ps->scan_probed++;
	if (pass)
		ps->scan_passed++;
	else
		InstrCountFiltered1(ps, 1);

	if (unlikely(ps->scan_probed == AMQ_PREFILTER_SAMPLE))
	{
		double		max_pass = filter->payload_len > cached_filter_bytes() ?
			AMQ_PREFILTER_MAX_PASS_LARGE : AMQ_PREFILTER_MAX_PASS;

		if (ps->scan_passed > max_pass * AMQ_PREFILTER_SAMPLE)
		{
			/* most rows join: probing costs more than it saves */
			ps->disabled = true;
			ps->paused_rows = 0;
			InstrCountFiltered2(ps, 1);
		}
		ps->scan_probed = ps->scan_passed = 0;
	}
	return pass;
}

/*
 * Read up to AMQ_PREFILTER_AHEAD rows, from slot (whose keys hash to hash)
 * on, into the read-ahead copies, prefetching each one's filter line, then
 * probe them in order.  Once the probing pauses the rest pass.
 */
static void
prefilter_ahead(PrefilterState *ps, const AmqFilter *filter,
				TupleTableSlot *slot, uint64 hash)
{
	PlanState  *child = outerPlanState(&ps->css);
	int			n = 0;

	ps->ahead_keyed[0] = true;
	ps->ahead_hash[0] = hash;
	for (;;)
	{
		if (ps->ahead_keyed[n])
			__builtin_prefetch(amq_blocked_at(filter->payload, filter->param[0],
											  ps->ahead_hash[n]));
		ExecCopySlot(ps->ahead[n], slot);
		if (++n == AMQ_PREFILTER_AHEAD)
			break;
		slot = ExecProcNode(child);
		if (TupIsNull(slot))
		{
			ps->ahead_end = true;
			break;
		}
		ps->ahead_keyed[n] = keys_hash(&ps->keys, slot, &ps->ahead_hash[n]);
	}
	for (int i = 0; i < n; i++)
		ps->ahead_pass[i] = !ps->ahead_keyed[i] || ps->disabled ||
			prefilter_probe(ps, filter, ps->ahead_hash[i]);
	InstrCountTuples2(ps, n);
	ps->ahead_n = n;
	ps->ahead_next = 0;
}

/* ExecCustomScan of the pre-filter: pass up the outer rows that may match. */
static TupleTableSlot *
prefilter_exec(CustomScanState *node)
{
	PrefilterState *ps = (PrefilterState *) node;
	PlanState  *child = outerPlanState(node);

	for (;;)
	{
		TupleTableSlot *slot;
		const AmqFilter *filter;
		uint64		hash;

		while (ps->ahead_next < ps->ahead_n)
		{
			int			i = ps->ahead_next++;

			if (ps->ahead_pass[i])
				return ps->ahead[i];
		}
		if (ps->ahead_end)
			return NULL;

		slot = ExecProcNode(child);
		if (TupIsNull(slot))
			return slot;
		if (ps->disabled)
		{
			if (++ps->paused_rows < AMQ_PREFILTER_PAUSE)
				return slot;
			/* sample again */
			ps->disabled = false;
		}
		filter = prefilter_filter(ps);
		if (filter == NULL || !keys_hash(&ps->keys, slot, &hash))
			return slot;
		if (ps->ahead && (amq_join_prefilter_read_ahead == AMQ_READ_AHEAD_ON ||
						  filter->payload_len > cached_filter_bytes()))
			prefilter_ahead(ps, filter, slot, hash);
		else if (prefilter_probe(ps, filter, hash))
			return slot;
	}
}

/* Forget the rows read ahead, for a new scan. */
static void
prefilter_ahead_reset(PrefilterState *ps)
{
	if (ps->ahead)
		for (int i = 0; i < AMQ_PREFILTER_AHEAD; i++)
			ExecClearTuple(ps->ahead[i]);
	ps->ahead_n = ps->ahead_next = 0;
	ps->ahead_end = false;
}

/*
 * In the leader, for a copy below a Gather: the Gather is about to leave its
 * shared memory (it shuts down or ends, after this node): note whether the
 * filter was published, and publish nothing more there.
 */
static void
prefilter_unpublish(PrefilterState *ps)
{
	if (ps->publish_area == NULL)
		return;
	ps->publishing = pg_atomic_read_u32(&ps->publish_area->ready) != 0;
	if (ps->shared->publish_to == ps->publish_area)
		ps->shared->publish_to = NULL;
	ps->publish_area = NULL;
}

/* EndCustomScan of the pre-filter. */
static void
prefilter_end(CustomScanState *node)
{
	prefilter_unpublish((PrefilterState *) node);
	pass_through_end(node);
}

/* ReScanCustomScan of the pre-filter. */
static void
prefilter_rescan(CustomScanState *node)
{
	PrefilterState *ps = (PrefilterState *) node;

	/*
	 * A hash join rebuilds its table from an inner side with new parameter
	 * values lazily, after it may have fetched the first outer row: the old
	 * filter must not judge that row.
	 */
	if (ps->inner_params)
		ps->shared->ready = false;
	/* under Parallel Hash, the Gather above is rescanned: a new build */
	ps->parallel_ready = false;
	ps->scan_probed = ps->scan_passed = 0;
	ps->disabled = false;
	prefilter_ahead_reset(ps);
	pass_through_rescan(node);
}

/* Is node a copy below a Gather, of a join in the leader? */
static bool
prefilter_publishes(CustomScanState *node)
{
	AmqPrefilterPushed pushed = private_int(node, AMQ_JOIN_INT_PUSHED);

	return pushed == AMQ_PUSHED_PUBLISHED || pushed == AMQ_PUSHED_INNER_PUBLISHED;
}

/*
 * The room for the filter a copy below a Gather publishes: the size of the
 * leader's filter if it is complete (the Gather usually starts after the
 * join has read its inner side), else that of a Parallel Hash join's shared
 * filter for the planner's estimate of the inner rows (shared_filter_plan,
 * with its limits).
 */
static Size
publish_room(PrefilterState *ps)
{
	AmqJoinFilter *f = ps->shared;
	AmqFilter	plan;

	if (f->ready && !f->abandoned)
		return f->filter.payload_len <= AmqShmFreeBytes() / 4 ?
			f->filter.payload_len : 0;
	shared_filter_plan(&plan, private_int(&ps->css, AMQ_JOIN_INT_INNER_ROWS));
	return plan.payload_len;
}

/*
 * EstimateDSMCustomScan of the pre-filter: under Parallel Hash nothing of
 * its own (it takes the callbacks to find the collector's filter in the
 * toc); for a copy below a Gather of a join in the leader, the published
 * filter (AmqPublishedFilter).
 */
static Size
prefilter_estimate_dsm(CustomScanState *node, ParallelContext *pcxt)
{
	if (!prefilter_publishes(node))
		return 0;
	return AMQ_PUBLISHED_PAYLOAD_OFFSET + publish_room((PrefilterState *) node);
}

/* InitializeDSMCustomScan of the pre-filter (leader). */
static void
prefilter_initialize_dsm(CustomScanState *node, ParallelContext *pcxt,
						 void *coordinate)
{
	PrefilterState *ps = (PrefilterState *) node;

	if (prefilter_publishes(node))
	{
		AmqPublishedFilter *pf = coordinate;
		AmqJoinFilter *f = ps->shared;

		/*
		 * The leader itself probes its own filter, in the registry; the
		 * room was reckoned just before, in the same state of f.
		 */
		pg_atomic_init_u32(&pf->ready, 0);
		pf->room = publish_room(ps);
		pf->nblocks = pf->nkeys = pf->payload_len = 0;
		ps->publish_area = pf;
		if (f->ready && !f->abandoned)
			filter_publish(f, pf);
		else
			f->publish_to = pf;
		return;
	}
	ps->toc = pcxt->toc;

	/*
	 * A Gather that shut down (a Limit above it was satisfied) and runs
	 * again sets up new shared memory: forget what was found in the old.
	 */
	ps->sf = NULL;
	ps->phj = NULL;
	ps->parallel_ready = false;
	ps->collected = false;
}

/*
 * InitializeWorkerCustomScan of the pre-filter: under Parallel Hash, the toc
 * to find the shared filter in; for a copy of a join in the leader, the
 * filter the leader published, if it did (else rows pass).
 */
static void
prefilter_initialize_worker(CustomScanState *node, shm_toc *toc,
							void *coordinate)
{
	PrefilterState *ps = (PrefilterState *) node;

	if (prefilter_publishes(node))
	{
		ps->pf = coordinate;
		return;
	}
	ps->toc = toc;
}

/*
 * ShutdownCustomScan of the pre-filter.  In the leader this runs before the
 * Gather above detaches from shared memory and, once the Gather has
 * returned its last row, after every worker has added its counts: add the
 * totals to those kept for EXPLAIN ANALYZE (a Gather that runs again after
 * shutting down gets a new segment).
 */
static void
prefilter_shutdown(CustomScanState *node)
{
	PrefilterState *ps = (PrefilterState *) node;

	prefilter_unpublish(ps);

	/*
	 * Called again after the Gather detached from the segment (a Limit shut
	 * its subtree down first): nothing to read there any more.
	 */
	if (ps->toc == NULL || ps->collected || IsParallelWorker())
		return;
	prefilter_lookup(ps);
	ps->collected = true;
	ps->have_totals = true;
	ps->total_inner_rows += pg_atomic_read_u64(&ps->sf->inner_rows);
	ps->shared->shared_capacity = ps->sf->capacity;
	ps->shared->shared_payload_len = ps->sf->payload_len;
}

/*
 * The rows a pre-filter read ahead and probed together (prefilter_ahead),
 * summed over the processes as the executor sums every node's ntuples2: in
 * text only where there were any, as EXPLAIN shows rows removed by a filter.
 */
static void
explain_read_ahead(uint64 rows, ExplainState *es)
{
	if (rows > 0 || es->format != EXPLAIN_FORMAT_TEXT)
		ExplainPropertyUInteger("Rows Read Ahead", NULL, rows, es);
}

/*
 * ExplainCustomScan of the pre-filter: its keys, its counts if ANALYZE.
 * The counts are those of every process that ran the node (the executor
 * adds the workers' instrumentation to the leader's); the filter shown is
 * the shared one under Parallel Hash, else this process's, which each
 * process builds alike from the whole inner side.
 */
static void
prefilter_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	PrefilterState *ps = (PrefilterState *) node;
	AmqJoinFilter *f = ps->shared;
	AmqPrefilterPushed pushed = private_int(node, AMQ_JOIN_INT_PUSHED);
	bool		inner = pushed == AMQ_PUSHED_INNER ||
		pushed == AMQ_PUSHED_INNER_PUBLISHED;
	uint64		removed;
	uint64		read_ahead;
	bool		paused;

	explain_keys(node, ancestors, es, "Prefilter Keys");
	if (es->verbose)
	{
		double		remove = private_int(node, AMQ_JOIN_INT_REMOVE) / 10.0;
		const char *of = pushed == AMQ_PUSHED_COPY ||
			pushed == AMQ_PUSHED_PUBLISHED ? "its" :
			inner ? psprintf("%d", private_int(node, AMQ_JOIN_INT_OUTER_ROWS)) :
			psprintf("%.0f", node->ss.ps.plan->plan_rows);
		const char *side = inner ? "inner" : "outer";
		char	   *why;

		/* a negative share: no statistics gave an estimate */
		if (remove < 0)
			why = psprintf("no statistics estimate how many of %s %s rows match", of, side);
		else
			why = psprintf("expected to remove %.1f%% of %s %s rows", remove, of, side);

		if (pushed == AMQ_PUSHED_COPY)
			ExplainPropertyText("Prefilter",
								psprintf("pushed down from a hash join above, %s", why), es);
		else if (pushed == AMQ_PUSHED_INNER)
			ExplainPropertyText("Prefilter",
								psprintf("on the inner side, with the outer side's keys%s, %s",
										 private_int(node, AMQ_JOIN_INT_PARALLEL) ?
										 " of all participants" : "", why), es);
		else if (pushed == AMQ_PUSHED_INNER_PUBLISHED)
			ExplainPropertyText("Prefilter",
								psprintf("on the inner side below the Gather, with the outer side's keys published to the workers, %s", why), es);
		else if (pushed == AMQ_PUSHED_PUBLISHED)
			ExplainPropertyText("Prefilter",
								psprintf("pushed down from a hash join above the Gather, its filter published to the workers, %s", why), es);
		else
		{
			ExplainPropertyText("Prefilter",
								psprintf("placed, %s%s", why,
										 pushed == AMQ_PUSHED_HAS_COPY ?
										 "; also pushed down" : ""), es);
			explain_inner_why(node, es);
		}
	}
	/* (the instrumentation's type was renamed in 19: not named here) */
	if (!es->analyze || node->ss.ps.instrument == NULL)
		return;
	removed = (uint64) node->ss.ps.instrument->nfiltered1;
	paused = node->ss.ps.instrument->nfiltered2 > 0;
	read_ahead = (uint64) node->ss.ps.instrument->ntuples2;

	if (ps->have_totals || (inner && f->shared_capacity > 0))
	{
		/*
		 * Parallel Hash: one filter, the counts of all participants (the
		 * outer rows collected are the collector's to show)
		 */
		if (f->shared_abandoned)
			ExplainPropertyText("Filter", "not built: more outer rows than expected", es);
		else
		{
			ExplainPropertyText("Filter", "shared", es);
			ExplainPropertyUInteger("Filter Capacity", NULL, f->shared_capacity, es);
			ExplainPropertyUInteger("Filter Size", "kB",
									(f->shared_payload_len + 1023) / 1024, es);
		}
		if (!inner)
			ExplainPropertyUInteger("Filter Inner Rows", NULL,
									ps->total_inner_rows, es);
		ExplainPropertyUInteger("Rows Removed by Prefilter", NULL, removed, es);
		explain_read_ahead(read_ahead, es);
		ExplainPropertyBool("Prefilter Disabled", paused, es);
		return;
	}
	if (f->builds > 0 && !f->abandoned)
	{
		ExplainPropertyUInteger("Filter Keys", NULL, f->filter.nkeys, es);
		ExplainPropertyUInteger("Filter Size", "kB",
								(f->filter.payload_len + 1023) / 1024, es);
		ExplainPropertyFloat("Filter FPR", NULL, f->filter.fpr, 4, es);
		if (prefilter_publishes(node))
			ExplainPropertyBool("Filter Published", ps->publishing, es);
	}
	else if (f->abandoned)
		ExplainPropertyText("Filter",
							inner ? "not built: more outer rows than expected" :
							"not built: too many inner rows", es);
	else
		ExplainPropertyText("Filter", removed > 0 ?
							"built by parallel workers" : "not built", es);
	ExplainPropertyUInteger("Rows Removed by Prefilter", NULL, removed, es);
	explain_read_ahead(read_ahead, es);
	ExplainPropertyBool("Prefilter Disabled", paused, es);
}

/* ---- AmqOuterCollect ---- */

/*
 * Above the outer side of a hash join whose inner side is much the larger:
 * reads the whole outer side first, into a tuplestore, hashing its keys
 * into a filter with which an AmqPrefilter on the inner side drops the
 * inner rows that no outer row can meet, before they are hashed (or
 * aggregated below the Hash); then returns the stored rows.  The inner
 * prefilter makes it read the outer side if the hash join reads its inner
 * side first (build_now).  The planner places it only where the outer
 * side depends on no parameter (but uncorrelated initPlans' outputs,
 * computed once) and reads the same rows each time
 * (amq_join.c): a rescan replays the stored rows, and the filter, like the
 * hash table built with it, stays right.
 *
 * Under Parallel Hash (the node parallel-aware, with shared memory) each
 * participant reads its part of the outer side into one SharedTuplestore
 * and ORs its keys into one filter (AmqSharedFilter, sized from the
 * planner's estimate of all outer rows), both in the query's dynamic shared
 * memory, then waits at the filter's barrier for the others attached to
 * it; only then does its inner prefilter probe the filter.  The filter is
 * complete, because:
 *	- every participant that reads outer rows before the barrier's phase
 *	  advances is attached to it and arrives only after its last row; a
 *	  partial plan gives each outer row to exactly one participant, so once
 *	  the attached participants have read to the end, none is left;
 *	- a participant that attaches later finds its part empty (checked);
 *	- nodeHashjoin.c never fetches an outer row before a Parallel Hash
 *	  build, and a participant reaches this node either from its inner
 *	  prefilter during the build, or from the join after it.
 * The stored rows are then read back by whichever participants ask, each
 * row by one, as from any partial plan: a participant that joins its rows
 * sooner must not end the join's batch while another still holds rows of
 * its own.  No participant waits for another while holding anything the
 * other needs: those attached only read the outer side, and none returns a
 * row, to a Gather's queue or otherwise, before its hash table is built.
 * A participant that gives up (below) says so in the shared memory, and
 * every participant stops collecting and lets its inner rows pass; the rows
 * not yet read follow the stored ones.  A rescan of the Gather above
 * starts all over, in ReInitializeDSMCustomScan and the node's rescan.
 */
typedef struct OuterCollectState
{
	CustomScanState css;
	AmqJoinFilter *shared;
	AmqJoinKeys keys;
	Tuplestorestate *store;
	TupleTableSlot *stored;		/* the stored rows, read back */
	bool		collected;
	bool		streaming;		/* gave up: rows go on from the child */
	bool		child_done;		/* the child returned its last row */
	uint64		rows;

	/* under Parallel Hash with shared memory: the filter and rows there */
	AmqSharedFilter *sf;
	SharedTuplestoreAccessor *sts;
	bool		reading;		/* the shared rows are being read back */
	AmqFilter	sf_plan;		/* the filter's geometry, planned by the leader */
	bool		have_totals;	/* leader: read at shutdown, for EXPLAIN */
	uint64		total_rows;		/* of all participants, all scans */
} OuterCollectState;

/*
 * What follows an outer collector's filter in shared memory: the space for
 * its stored rows' files, and the SharedTuplestore of those rows.
 */
typedef struct AmqOuterShared
{
	SharedFileSet fileset;
	dsm_handle	seg;			/* the query's segment, for the workers */
	int			participants;
} AmqOuterShared;

#define AMQ_OUTER_SHARED(sf) ((AmqOuterShared *) \
	(AMQ_SHARED_PAYLOAD(sf) + MAXALIGN((sf)->payload_len)))
#define AMQ_OUTER_STS(os) ((SharedTuplestore *) \
	((char *) (os) + MAXALIGN(sizeof(AmqOuterShared))))

static Node *outer_collect_create(CustomScan *cscan);
static void outer_collect_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *outer_collect_exec(CustomScanState *node);
static void outer_collect_end(CustomScanState *node);
static void outer_collect_rescan(CustomScanState *node);
static void outer_collect_explain(CustomScanState *node, List *ancestors,
								  ExplainState *es);
static Size outer_collect_estimate_dsm(CustomScanState *node,
									   ParallelContext *pcxt);
static void outer_collect_initialize_dsm(CustomScanState *node,
										 ParallelContext *pcxt, void *coordinate);
static void outer_collect_reinitialize_dsm(CustomScanState *node,
										   ParallelContext *pcxt, void *coordinate);
static void outer_collect_initialize_worker(CustomScanState *node, shm_toc *toc,
											void *coordinate);
static void outer_collect_shutdown(CustomScanState *node);

const CustomScanMethods amq_outer_collect_scan_methods = {
	.CustomName = "AmqOuterCollect",
	.CreateCustomScanState = outer_collect_create,
};

static const CustomExecMethods outer_collect_exec_methods = {
	.CustomName = "AmqOuterCollect",
	.BeginCustomScan = outer_collect_begin,
	.ExecCustomScan = outer_collect_exec,
	.EndCustomScan = outer_collect_end,
	.ReScanCustomScan = outer_collect_rescan,
	.EstimateDSMCustomScan = outer_collect_estimate_dsm,
	.InitializeDSMCustomScan = outer_collect_initialize_dsm,
	.ReInitializeDSMCustomScan = outer_collect_reinitialize_dsm,
	.InitializeWorkerCustomScan = outer_collect_initialize_worker,
	.ShutdownCustomScan = outer_collect_shutdown,
	.ExplainCustomScan = outer_collect_explain,
};

/* CreateCustomScanState of the outer collector. */
static Node *
outer_collect_create(CustomScan *cscan)
{
	OuterCollectState *oc = palloc0(sizeof(OuterCollectState));

	NodeSetTag(oc, T_CustomScanState);
	oc->css.methods = &outer_collect_exec_methods;
	return (Node *) oc;
}

/* Under Parallel Hash: close the shared rows' files read from, if any. */
static void
outer_collect_stop_reading(OuterCollectState *oc)
{
	if (oc->reading)
		sts_end_parallel_scan(oc->sts);
	oc->reading = false;
}

/* Forget the stored rows and the filter: the outer side is read anew. */
static void
outer_collect_forget(OuterCollectState *oc)
{
	outer_collect_stop_reading(oc);
	if (oc->store)
		tuplestore_end(oc->store);
	oc->store = NULL;
	oc->collected = false;
	oc->streaming = false;
	oc->child_done = false;
	oc->rows = 0;
	filter_reset(oc->shared);
}

/*
 * Under Parallel Hash: this participant's outer rows and keys are in the
 * shared memory; add its count, wait for the others attached (see above),
 * start reading back the stored rows, and make the filter the join's, or
 * say there is none.
 */
static void
outer_collect_share(OuterCollectState *oc, bool late)
{
	AmqSharedFilter *sf = oc->sf;
	AmqJoinFilter *f = oc->shared;

	if (late && oc->rows > 0)
		elog(ERROR, "outer rows of a join pre-filter read after its filter was complete");
	sts_end_write(oc->sts);
	pg_atomic_fetch_add_u64(&sf->inner_rows, oc->rows);
	if (oc->streaming)
		pg_atomic_write_u32(&sf->abandoned, 1);
	if (!late)
		BarrierArriveAndWait(&sf->collected, PG_WAIT_EXTENSION);
	BarrierDetach(&sf->collected);
	sts_begin_parallel_scan(oc->sts);
	oc->reading = true;

	/* the barrier's operations order our reads after the others' writes */
	if (pg_atomic_read_u32(&sf->abandoned))
	{
		oc->streaming = true;
		f->abandoned = true;
		return;
	}
	filter_view(&f->filter, sf->nblocks, sf->payload_len, AMQ_SHARED_PAYLOAD(sf));
	f->filter.nkeys = sf->capacity;
	f->ready = true;
}

/*
 * Read the whole outer side into the store and build the filter.  An outer
 * side far larger than the planner expected (more than four times) that no
 * longer fits in work_mem would cost a write and a read of every row for a
 * filter less likely to pay: the collector stops there, builds no filter
 * (the inner rows pass), and after the stored rows passes on the rest of
 * the child's.  Under Parallel Hash it also stops once another participant
 * has.
 */
static void
outer_collect_all(void *arg)
{
	OuterCollectState *oc = (OuterCollectState *) arg;
	EState	   *estate = oc->css.ss.ps.state;
	PlanState  *child = outerPlanState(&oc->css);
	MemoryContext old;
	uint64		expected = (uint64) 4 * private_int(&oc->css, AMQ_JOIN_INT_INNER_ROWS);
	Size		bytes = 0;
	bool		late = false;

	/* the Gather above runs again; the node has not been called yet */
	if (oc->css.ss.ps.chgParam != NULL)
		ExecReScan(&oc->css.ss.ps);
	if (oc->collected)
		return;
	if (oc->sf)
	{
		late = BarrierAttach(&oc->sf->collected) > 0;

		/*
		 * The others gave up before all rows were read: no filter, and the
		 * rows not read pass after the stored ones.
		 */
		if (late && pg_atomic_read_u32(&oc->sf->abandoned))
		{
			outer_collect_share(oc, late);
			oc->collected = true;
			return;
		}
	}
	else
	{
		old = MemoryContextSwitchTo(estate->es_query_cxt);
		oc->store = tuplestore_begin_heap(false, false, work_mem);
		tuplestore_set_eflags(oc->store, EXEC_FLAG_REWIND);
		MemoryContextSwitchTo(old);
	}
	for (;;)
	{
		TupleTableSlot *slot = ExecProcNode(child);
		uint64		hash;

		if (TupIsNull(slot))
		{
			oc->child_done = true;
			break;
		}
		oc->rows++;
		if (oc->sf)
		{
			bool		should_free;
			MinimalTuple tuple = ExecFetchSlotMinimalTuple(slot, &should_free);

			sts_puttuple(oc->sts, NULL, tuple);
			bytes += tuple->t_len;
			if (should_free)
				pfree(tuple);
			if (keys_hash(&oc->keys, slot, &hash))
				shared_filter_add(oc->sf, hash);
		}
		else
		{
			tuplestore_puttupleslot(oc->store, slot);
			if (!oc->shared->abandoned && keys_hash(&oc->keys, slot, &hash))
				filter_collect(oc->shared, hash);
		}
		if (oc->rows > expected &&
			(oc->sf ? bytes > (Size) work_mem * 1024 :
			 !tuplestore_in_memory(oc->store)))
		{
			oc->shared->abandoned = true;
			oc->streaming = true;
			break;
		}
		if (oc->sf && (oc->rows & 1023) == 0 &&
			pg_atomic_read_u32(&oc->sf->abandoned))
			break;
	}
	if (oc->sf)
		outer_collect_share(oc, late);
	else
		filter_build(oc->shared);
	oc->collected = true;
}

/*
 * BeginCustomScan of the outer collector: it returns minimal tuples from
 * its store; the filter's entry learns how to have the outer side read.
 */
static void
outer_collect_begin(CustomScanState *node, EState *estate, int eflags)
{
	OuterCollectState *oc = (OuterCollectState *) node;

	pass_through_begin(node, estate, eflags);
	node->ss.ps.resultops = &TTSOpsMinimalTuple;
	node->ss.ps.resultopsfixed = true;
	oc->stored = ExecInitExtraTupleSlot(estate,
										ExecGetResultType(outerPlanState(node)),
										&TTSOpsMinimalTuple);
	oc->shared = registry_get(estate, private_int(node, AMQ_JOIN_INT_ID));
	oc->shared->build_now = outer_collect_all;
	oc->shared->build_now_arg = oc;
	keys_init(&oc->keys, node, estate);
}

/* ExecCustomScan of the outer collector: the stored rows, in order. */
static TupleTableSlot *
outer_collect_exec(CustomScanState *node)
{
	OuterCollectState *oc = (OuterCollectState *) node;

	outer_collect_all(oc);
	if (oc->reading)
	{
		MinimalTuple tuple = sts_parallel_scan_next(oc->sts, NULL);

		if (tuple)
			return ExecStoreMinimalTuple(tuple, oc->stored, false);
		outer_collect_stop_reading(oc);
	}
	else if (oc->store &&
			 tuplestore_gettupleslot(oc->store, true, false, oc->stored))
		return oc->stored;
	if (oc->streaming && !oc->child_done)
	{
		TupleTableSlot *slot = ExecProcNode(outerPlanState(node));

		/* the node returns minimal tuples */
		if (!TupIsNull(slot))
			return ExecCopySlot(oc->stored, slot);
		oc->child_done = true;
	}
	return ExecClearTuple(oc->stored);
}

/* EndCustomScan of the outer collector. */
static void
outer_collect_end(CustomScanState *node)
{
	OuterCollectState *oc = (OuterCollectState *) node;

	if (oc->store)
		tuplestore_end(oc->store);
	oc->store = NULL;
	outer_collect_stop_reading(oc);
	pass_through_end(node);
}

/*
 * ReScanCustomScan of the outer collector: the outer side depends on no
 * parameter that changes and reads the same rows each time, so the stored
 * rows are replayed, and the filter stays.  Under Parallel Hash the Gather
 * above is rescanned: every participant reads its part anew.
 */
static void
outer_collect_rescan(CustomScanState *node)
{
	OuterCollectState *oc = (OuterCollectState *) node;

	if (node->ss.ps.plan->parallel_aware)
	{
		outer_collect_forget(oc);
		pass_through_rescan(node);
		return;
	}
	if (node->ss.ps.chgParam != NULL)
		elog(ERROR, "outer side of an inner join pre-filter depends on a parameter");
	if (oc->streaming)
	{
		/* read the child again, from its start, as a pass-through */
		if (oc->store)
			tuplestore_end(oc->store);
		oc->store = NULL;
		oc->child_done = false;
		pass_through_rescan(node);
	}
	else if (oc->store)
		tuplestore_rescan(oc->store);
}

/*
 * EstimateDSMCustomScan of the outer collector: the shared filter, the
 * space for the stored rows' files and their SharedTuplestore.
 */
static Size
outer_collect_estimate_dsm(CustomScanState *node, ParallelContext *pcxt)
{
	OuterCollectState *oc = (OuterCollectState *) node;

	shared_filter_plan(&oc->sf_plan, private_int(node, AMQ_JOIN_INT_INNER_ROWS));
	return AMQ_SHARED_PAYLOAD_OFFSET + MAXALIGN(oc->sf_plan.payload_len) +
		MAXALIGN(sizeof(AmqOuterShared)) + sts_estimate(pcxt->nworkers + 1);
}

/* Set up the SharedTuplestore of os for a scan, with the leader's accessor. */
static void
outer_collect_init_store(OuterCollectState *oc, AmqOuterShared *os)
{
	oc->sts = sts_initialize(AMQ_OUTER_STS(os), os->participants, 0, 0,
							 SHARED_TUPLESTORE_SINGLE_PASS, &os->fileset,
							 "amqouter");
}

/*
 * InitializeDSMCustomScan of the outer collector (leader): an empty filter
 * and store; a Gather that shut down and runs again sets up new shared
 * memory.  Without a segment (no workers can start) the node runs as in a
 * serial plan.
 */
static void
outer_collect_initialize_dsm(CustomScanState *node, ParallelContext *pcxt,
							 void *coordinate)
{
	OuterCollectState *oc = (OuterCollectState *) node;
	AmqSharedFilter *sf = coordinate;
	AmqOuterShared *os;

	outer_collect_forget(oc);
	oc->sf = NULL;
	if (pcxt->seg == NULL)
		return;
	shared_filter_init(sf, &oc->sf_plan);
	os = AMQ_OUTER_SHARED(sf);
	SharedFileSetInit(&os->fileset, pcxt->seg);
	os->seg = dsm_segment_handle(pcxt->seg);
	os->participants = pcxt->nworkers + 1;
	outer_collect_init_store(oc, os);
	oc->sf = sf;
}

/*
 * ReInitializeDSMCustomScan of the outer collector: the Gather runs again,
 * and no participant runs yet.
 */
static void
outer_collect_reinitialize_dsm(CustomScanState *node, ParallelContext *pcxt,
							   void *coordinate)
{
	OuterCollectState *oc = (OuterCollectState *) node;
	AmqOuterShared *os;

	outer_collect_forget(oc);
	if (oc->sf == NULL)
		return;
	/* the last scan's rows, for EXPLAIN ANALYZE */
	oc->have_totals = true;
	oc->total_rows += pg_atomic_read_u64(&oc->sf->inner_rows);
	shared_filter_clear(oc->sf);
	os = AMQ_OUTER_SHARED(oc->sf);
	SharedFileSetDeleteAll(&os->fileset);
	outer_collect_init_store(oc, os);
}

/* InitializeWorkerCustomScan of the outer collector: the leader's filter. */
static void
outer_collect_initialize_worker(CustomScanState *node, shm_toc *toc,
								void *coordinate)
{
	OuterCollectState *oc = (OuterCollectState *) node;
	AmqSharedFilter *sf = coordinate;
	AmqOuterShared *os = AMQ_OUTER_SHARED(sf);
	dsm_segment *seg = dsm_find_mapping(os->seg);

	if (seg == NULL || ParallelWorkerNumber + 1 >= os->participants)
		elog(ERROR, "shared state of a join pre-filter not found");
	SharedFileSetAttach(&os->fileset, seg);
	oc->sts = sts_attach(AMQ_OUTER_STS(os), ParallelWorkerNumber + 1,
						 &os->fileset);
	oc->sf = sf;
}

/*
 * ShutdownCustomScan of the outer collector: in the leader, before the
 * Gather above leaves the shared memory and after the workers are done, the
 * totals for EXPLAIN ANALYZE; the filter there is no longer the join's.
 */
static void
outer_collect_shutdown(CustomScanState *node)
{
	OuterCollectState *oc = (OuterCollectState *) node;
	AmqJoinFilter *f = oc->shared;

	outer_collect_stop_reading(oc);
	if (oc->sf == NULL || IsParallelWorker())
		return;
	oc->have_totals = true;
	oc->total_rows += pg_atomic_read_u64(&oc->sf->inner_rows);
	f->shared_capacity = oc->sf->capacity;
	f->shared_payload_len = oc->sf->payload_len;
	f->shared_abandoned = pg_atomic_read_u32(&oc->sf->abandoned) != 0;
	f->ready = false;
	f->filter.payload = NULL;
	oc->sf = NULL;
}

/* ExplainCustomScan of the outer collector: its keys, the rows read. */
static void
outer_collect_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	OuterCollectState *oc = (OuterCollectState *) node;

	explain_keys(node, ancestors, es, "Collect Keys");
	if (!es->analyze)
		return;
	if (oc->have_totals)
	{
		/* Parallel Hash: the rows of all participants */
		ExplainPropertyUInteger("Outer Rows Collected", NULL, oc->total_rows, es);
		if (oc->shared->shared_abandoned)
			ExplainPropertyText("Filter", "not built: more outer rows than expected", es);
	}
	else if (oc->collected)
	{
		ExplainPropertyUInteger("Outer Rows Collected", NULL, oc->rows, es);
		if (oc->streaming)
			ExplainPropertyText("Filter", "not built: more outer rows than expected", es);
	}
}

/* ---- AmqPrefilterSkipped ---- */

static Node *skipped_create(CustomScan *cscan);
static void skipped_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *skipped_exec(CustomScanState *node);
static void skipped_explain(CustomScanState *node, List *ancestors,
							ExplainState *es);

const CustomScanMethods amq_skipped_scan_methods = {
	.CustomName = "AmqPrefilterSkipped",
	.CreateCustomScanState = skipped_create,
};

static const CustomExecMethods skipped_exec_methods = {
	.CustomName = "AmqPrefilterSkipped",
	.BeginCustomScan = skipped_begin,
	.ExecCustomScan = skipped_exec,
	.EndCustomScan = pass_through_end,
	.ReScanCustomScan = pass_through_rescan,
	.ExplainCustomScan = skipped_explain,
};

/* CreateCustomScanState of a skipped pre-filter. */
static Node *
skipped_create(CustomScan *cscan)
{
	CustomScanState *css = palloc0(sizeof(CustomScanState));

	NodeSetTag(css, T_CustomScanState);
	css->methods = &skipped_exec_methods;
	return (Node *) css;
}

/* The child's next tuple, called as the node's ExecProcNode. */
static TupleTableSlot *
skipped_exec_proc_node(PlanState *pstate)
{
	return ExecProcNode(outerPlanState(pstate));
}

/*
 * BeginCustomScan of a skipped pre-filter.  ExecProcNode goes to the child
 * directly, not through ExecCustomScan: the node costs one call per row.
 */
static void
skipped_begin(CustomScanState *node, EState *estate, int eflags)
{
	pass_through_begin(node, estate, eflags);
	node->ss.ps.ExecProcNode = skipped_exec_proc_node;
}

/* ExecCustomScan of a skipped pre-filter (not called: see skipped_begin). */
static TupleTableSlot *
skipped_exec(CustomScanState *node)
{
	return ExecProcNode(outerPlanState(node));
}

/*
 * EXPLAIN of a skipped pre-filter: that it is, and with VERBOSE why, from
 * the planner's estimates: for the outer side's rows and, where the inner
 * side is the larger, for the inner side's.
 */
static void
skipped_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	AmqPrefilterDecision decision = private_int(node, AMQ_JOIN_INT_DECISION);
	double		remove = private_int(node, AMQ_JOIN_INT_REMOVE) / 10.0;
	int			rows = private_int(node, AMQ_JOIN_INT_OUTER_ROWS);
	char	   *why = NULL;

	if (decision != AMQ_PREFILTER_NONE)
	{
		if (!es->verbose)
			why = "skipped";
		else if (decision == AMQ_PREFILTER_SKIPPED_ROWS)
			why = skipped_few_rows(rows, "outer");
		else if (decision == AMQ_PREFILTER_SKIPPED_LARGE)
			why = skipped_few_removed(remove, rows, "outer",
									  psprintf("%s, which a filter of over %d inner keys needs",
											   below_min_remove(true),
											   AMQ_JOIN_CACHED_KEYS));
		else if (decision == AMQ_PREFILTER_SKIPPED_UNKNOWN)
			why = psprintf("skipped, no statistics estimate how many of %d outer rows match",
						   rows);
		else
			why = skipped_few_removed(remove, rows, "outer", below_min_remove(false));
		ExplainPropertyText("Prefilter", why, es);
	}

	explain_inner_why(node, es);
}

/* Register the custom scans' methods. */
void
AmqJoinExecInit(void)
{
	DefineCustomEnumVariable("bloomamq.join_prefilter_read_ahead",
							 "Reads rows ahead where a join pre-filter is larger than the cache, to probe them together.",
							 "auto: filters of over a million keys; on: every filter; off: none.",
							 &amq_join_prefilter_read_ahead,
							 AMQ_READ_AHEAD_AUTO,
							 read_ahead_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	RegisterCustomScanMethods(&amq_prefilter_scan_methods);
	RegisterCustomScanMethods(&amq_collector_scan_methods);
	RegisterCustomScanMethods(&amq_skipped_scan_methods);
	RegisterCustomScanMethods(&amq_outer_collect_scan_methods);
}
