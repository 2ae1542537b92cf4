/*-------------------------------------------------------------------------
 *
 * amq_agg.c
 *	  The aggregates amq_agg (build a filter from a column) and
 *	  amq_union_agg (union of filters), with combine, serialize and
 *	  deserialize functions so that parallel query can use them.
 *
 * The state lives in the aggregate memory context and is changed in place.
 * It has two modes:
 *
 * - buffer: without a capacity, amq_agg keeps the 64-bit key hashes and
 *   sizes the filter exactly for the distinct keys at the end.  In an
 *   aggregate without GROUP BY the buffer is sized from the planner's row
 *   estimate of the aggregate's input, so that it is allocated once instead
 *   of doubling (each doubling a remap and fresh page faults); otherwise it
 *   starts at a few entries, so a GROUP BY with many small groups stays
 *   small.  Past DEDUP_MIN entries a full buffer is deduplicated before it
 *   grows.  Sorting the hashes first also lets a blocked filter be filled
 *   block by block in address order, which makes the final build
 *   cache-friendly.  Partial states carry the hashes, sorted and distinct,
 *   so a static kind can be built from a parallel aggregate too, and
 *   combining two of them is a merge, not a second sort.
 * - filter: with a capacity (or in amq_union_agg), the state is a dynamic
 *   filter of fixed size; partial states are combined by union.  Rows are
 *   hashed as they come and their hashes wait in a small batch while the
 *   filter's cache line for each is prefetched, then go in together, so
 *   a filter larger than the cache costs overlapping misses instead of one
 *   waited-for miss per row.  Kinds without union (cuckoo, scalable) buffer
 *   hashes even with a capacity, so that partial states still combine; the
 *   capacity then sizes the final filter for keys added later.
 *
 * Buffers of many megabytes ask the kernel for transparent huge pages
 * (AmqAllocBig).
 *
 * A partial state of many hashes below a Gather does not go to the leader
 * as a tuple of its hashes: through a worker's tuple queue that is 64 kB at
 * a time with a wake-up of the other process for every quarter of it (26 MB
 * of hashes per worker at 10^7 keys), and nodeAgg copies the first tuple it
 * combines (usually the leader's own state) twice more.  The partial
 * aggregate copies its hashes into the query's dynamic shared memory area
 * and its tuple says only where they are (AMQ_STATE_SHARED); the combine
 * keeps them there as a run (state_share, state_take_shared, SharedRun).
 * The leader's own state of a plain aggregate needs no copy at all: its
 * tuple says where the hashes are in the leader's memory (AMQ_STATE_LOCAL,
 * LocalShare).
 *
 * A buffer that outgrows what one varlena (and so a serialized partial
 * state or the final filter) can carry is an error with a hint, never an
 * out-of-memory kill.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/xact.h"
#include "catalog/pg_aggregate.h"
#include "executor/execParallel.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "nodes/execnodes.h"
#include "nodes/nodeFuncs.h"
#include "utils/builtins.h"
#include "utils/expandeddatum.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "amqfilter.h"
#include "kind_blocked.h"

PG_FUNCTION_INFO_V1(amq_agg_trans);
PG_FUNCTION_INFO_V1(amq_agg_final);
PG_FUNCTION_INFO_V1(amq_agg_combine);
PG_FUNCTION_INFO_V1(amq_agg_serialize);
PG_FUNCTION_INFO_V1(amq_agg_deserialize);
PG_FUNCTION_INFO_V1(amq_union_agg_trans);
PG_FUNCTION_INFO_V1(amq_agg_transfn);
PG_FUNCTION_INFO_V1(amq_union_agg_transfn);
PG_FUNCTION_INFO_V1(amq_agg_finalfn);
PG_FUNCTION_INFO_V1(amq_agg_combinefn);
PG_FUNCTION_INFO_V1(amqaggstate_in);
PG_FUNCTION_INFO_V1(amqaggstate_recv);

#define AMQ_DEFAULT_FPR		0.01
#define AMQ_DEFAULT_KIND	AMQ_KIND_BLOCKED

#define INITIAL_HASHES	8
#define DEDUP_MIN		((Size) 1 << 24)
#define MAX_HASHES		((Size) AMQ_STATE_MAX_HASHES)

/* sorted partial states a combined state keeps to merge at once */
#define MAX_RUNS		16
StaticAssertDecl(MAX_RUNS + 1 <= AMQ_UNION_MAX_RUNS,
				 "a state's buffer and runs must fit AmqBuildFromRuns");

/* hashes of a fixed-size filter waiting for their prefetched lines */
#define FILTER_BATCH	32

/* partial states of at least this many hashes go through shared memory */
#define SHARE_MIN_HASHES	8192

/* the body of an AMQ_STATE_SHARED or _LOCAL state: where the hashes are */
#define SHARED_BODY		24

/* the modes are those of the serialized state (core.h) */
typedef enum AggMode
{
	AGG_BUFFER = AMQ_STATE_BUFFER,
	AGG_FILTER = AMQ_STATE_FILTER
} AggMode;

typedef struct AmqAggState
{
	/*
	 * The amqaggstate aggregates keep the state as an expanded object, so
	 * that a row changes it in place (this header is unused otherwise).
	 */
	ExpandedObjectHeader eoh;
	MemoryContext mcxt;			/* holds everything the state points to */
	AggMode		mode;
	uint8		kind;
	double		fpr;
	int64		capacity;		/* 0: size from the keys at the end */
	AmqFilter	keyinfo;		/* key family, hash scheme, key type */
	AmqKeyHasher *h;			/* hashes the keys (trans states only) */

	/* AGG_BUFFER */
	uint64	   *hashes;
	Size		nhashes;
	Size		maxhashes;
	Size		nsorted;		/* hashes[0..nsorted) ascending and distinct */
	int			nruns;			/* more sorted, distinct hashes: merged later */
	struct AggRuns *runs;		/* allocated on the first combine that needs it */

	/*
	 * A partial state below a Gather: the query's shared memory area, and
	 * the copy of the hashes state_body_size made there for state_write.
	 */
	dsa_area   *share_area;
	dsa_pointer share_dp;
	int			share_node;		/* the partial aggregate's plan node id */
	bool		share_local;	/* the leader's plain aggregate: LocalShare */
	struct LocalShare *local;	/* its registration, once flattened */

	/* AGG_FILTER: f points into filter */
	struct varlena *filter;
	AmqFilter	f;
	int			npending;		/* hashes in pending, not yet in f */
	uint64	   *pending;		/* FILTER_BATCH of them, for amq_agg only */
} AmqAggState;

/* the runs of a combined state (out of line: a GROUP BY state stays small) */
typedef struct AggRuns
{
	const uint64 *run[MAX_RUNS];
	Size		len[MAX_RUNS];
	struct SharedRun *shared[MAX_RUNS]; /* a run in shared memory, or NULL */
} AggRuns;

/*
 * A partial state's hashes in the query's shared memory (state_share), kept
 * as a run of the combining state instead of being copied out: freed when
 * the runs are merged, or when the state's memory goes while the area is
 * still attached (a rescan); at the query's end or an abort the area goes
 * with everything in it.
 */
typedef struct SharedRun
{
	MemoryContextCallback cb;
	dsa_area   *area;
	dsa_pointer dp;
	PlanState  *gather;			/* the Gather whose area it is, or NULL: the
								 * parallel worker's own (es_query_dsa) */
} SharedRun;

/*
 * A partial state's hashes that the combining aggregate in the same process
 * reads where they are: the leader's own state of a plain aggregate, which
 * lives until the query ends or the partial aggregate is scanned again,
 * after the combining aggregate is done with it (its own rescan comes
 * first).  Its tuple names it by a token, which the combine looks up among
 * the registrations of this process that are alive: a value that names
 * none is an error, never a pointer followed.
 */
typedef struct LocalShare
{
	MemoryContextCallback cb;	/* unregisters it when the state's memory goes */
	struct LocalShare *next;
	uint64		token;
	const AmqAggState *state;
} LocalShare;

static LocalShare *local_shares;	/* this process's live registrations */
static uint64 local_share_tokens;

static pg_noinline AmqAggState *agg_trans_slow(FunctionCallInfo fcinfo,
												AmqAggState *s, bool expanded);
static void buffer_resize(AmqAggState *s, Size newmax);

/* The aggregate's memory context, or an ERROR outside an aggregate. */
static MemoryContext
agg_context(FunctionCallInfo fcinfo, const char *fname)
{
	MemoryContext aggcontext;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s can only be called by an aggregate", fname),
				 errhint("Use amq_agg or amq_union_agg, or an aggregate of your own with state type amqaggstate.")));
	return aggcontext;
}

/* Switch the state to holding filter v, and decode its header. */
static void
state_set_filter(AmqAggState *s, struct varlena *v)
{
	s->mode = AGG_FILTER;
	s->filter = v;
	AmqFilterDecode(v, &s->f);
}

static void merge_runs(AmqAggState *s);
static void shared_run_free(SharedRun *sr);
static void shared_runs_free(AmqAggState *s);
static int	state_runs(const AmqAggState *s, const uint64 **head, const uint64 **end);
static void filter_flush(AmqAggState *s);

/* Sort and deduplicate the buffer in place. */
static void
buffer_dedup(AmqAggState *s)
{
	uint64	   *scratch;

	if (s->nruns > 0)
		merge_runs(s);

	if (s->nhashes < 2 || s->nsorted == s->nhashes)
	{
		s->nsorted = s->nhashes;
		return;
	}
	/*
	 * Address space: the sort touches as much as its largest bucket needs.
	 * In the state's own context, not the current one: flattening runs in
	 * its caller's, which may not free single chunks (a tuplesort's bump
	 * context on PostgreSQL 17 and later).
	 */
	scratch = AmqAllocBig(s->mcxt, sizeof(uint64) * s->nhashes, 0);
	s->nhashes = amq_sort_unique(s->hashes, s->nhashes, scratch);
	s->nsorted = s->nhashes;
	pfree(scratch);
}

/* Report an aggregate without a capacity that outgrew its hash buffer. */
static void
too_many_keys(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("amq_agg without a capacity holds at most %zu distinct keys",
					(size_t) MAX_HASHES),
			 errdetail("Without a capacity the aggregate keeps the 64-bit hash of each distinct key to size the filter exactly."),
			 errhint("Pass a capacity, amq_agg(key, fpr, kind, capacity), to build in fixed memory, or split the keys over several filters.")));
}

/* Make room for at least "more" hashes in s's buffer. */
static void
buffer_reserve(AmqAggState *s, Size more)
{
	Size		newmax;

	if (s->nruns > 0)
		merge_runs(s);
	if (s->nhashes + more <= s->maxhashes)
		return;
	if (s->nhashes >= DEDUP_MIN)
	{
		buffer_dedup(s);
		if (s->nhashes + more <= s->maxhashes / 2 + 1)
			return;
		/* the final filter must be storable: fail now, not at the end */
		if (s->nhashes > 0)
		{
			AmqFilter	probe;

			AmqPlanOrError(&probe, s->kind, s->nhashes, s->fpr,
						   AmqBuildPlanFlags(s->kind, s->capacity));
		}
	}
	newmax = Max(s->maxhashes * 2, INITIAL_HASHES);
	while (newmax < s->nhashes + more)
		newmax *= 2;
	if (newmax > MAX_HASHES)
	{
		if (s->nhashes + more > MAX_HASHES)
		{
			buffer_dedup(s);
			if (s->nhashes + more > MAX_HASHES)
				too_many_keys();
		}
		newmax = MAX_HASHES;
	}
	buffer_resize(s, newmax);
}

/* Give s's buffer room for exactly newmax hashes (>= nhashes). */
static void
buffer_resize(AmqAggState *s, Size newmax)
{
	if (s->hashes == NULL)
		s->hashes = AmqAllocBig(s->mcxt, sizeof(uint64) * newmax, 0);
	else
	{
		s->hashes = repalloc_huge(s->hashes, sizeof(uint64) * newmax);
		AmqAdviseBig(s->hashes, sizeof(uint64) * newmax);
	}
	s->maxhashes = newmax;
}

/*
 * The planner's estimate of the rows that reach this aggregate, if it is
 * one group of a plain aggregate (no GROUP BY); else 0.  A guess, only to
 * size the buffer: too low costs a doubling, too high only address space,
 * since pages not written are never faulted in.
 */
static double
agg_input_estimate(FunctionCallInfo fcinfo)
{
	AggState   *as;
	Agg		   *agg;

	if (fcinfo->context == NULL || !IsA(fcinfo->context, AggState))
		return 0.0;
	as = (AggState *) fcinfo->context;
	agg = (Agg *) as->ss.ps.plan;
	if (agg == NULL || agg->aggstrategy != AGG_PLAIN || agg->groupingSets != NIL ||
		outerPlan(agg) == NULL)
		return 0.0;
	return outerPlan(agg)->plan_rows;
}

/*
 * Size a new, empty buffer for the rows the planner expects, if that is
 * more than a few; an allocation that fails leaves it to grow as usual.
 */
static void
buffer_presize(AmqAggState *s, FunctionCallInfo fcinfo)
{
	double		rows = agg_input_estimate(fcinfo);
	Size		want;

	if (!(rows > (double) INITIAL_HASHES))
		return;
	want = rows >= (double) MAX_HASHES ? MAX_HASHES : (Size) rows;
	s->hashes = AmqAllocBig(s->mcxt, sizeof(uint64) * want, MCXT_ALLOC_NO_OOM);
	if (s->hashes != NULL)
		s->maxhashes = want;
}

/* A new, empty aggregate state in mcxt (an internal one). */
static AmqAggState *
state_new(MemoryContext mcxt)
{
	AmqAggState *s = MemoryContextAllocZero(mcxt, sizeof(AmqAggState));

	s->mcxt = mcxt;
	return s;
}

/* Start fetching the filter's line that adding hash will read. */
static inline void
prefetch_key(const AmqFilter *f, uint64 hash)
{
	if (f->kind == AMQ_KIND_BLOCKED)
		__builtin_prefetch(amq_blocked_at(f->payload, f->param[0],
										  amq_seeded(f, hash)), 1);
	else
	{
		const AmqKindOps *ops = amq_kind_ops(f->kind);

		if (ops->probe_span != NULL)
		{
			uint64		off;
			uint32		len;

			ops->probe_span(f, hash, &off, &len);
			__builtin_prefetch(f->payload + off, 1);
		}
	}
}

/*
 * Add the pending hashes of a fixed-size filter, in the order they came:
 * the same filter and key count as adding each at once.  The blocked kind's
 * add is inlined (no key is counted twice: one already present is skipped).
 */
static void
filter_flush(AmqAggState *s)
{
	AmqFilter  *f = &s->f;

	if (f->kind == AMQ_KIND_BLOCKED)
	{
		for (int i = 0; i < s->npending; i++)
		{
			uint64		h = amq_seeded(f, s->pending[i]);
			uint8	   *b = amq_blocked_at(f->payload, f->param[0], h);

			if (!amq_blocked_probe(b, (uint32) h))
			{
				amq_blocked_insert(b, (uint32) h);
				amq_count_add(f);
			}
		}
	}
	else
	{
		const AmqKindOps *ops = amq_kind_ops(f->kind);

		for (int i = 0; i < s->npending; i++)
			AmqAddHash(&s->filter, f, ops, s->pending[i]);
	}
	s->npending = 0;
}

/*
 * States as bytes: the layout of core.h's serialized state, which is also
 * the amqaggstate type's value (the flat form of its expanded object).
 */

static void
local_share_forget(void *arg)
{
	LocalShare *ls = (LocalShare *) arg;

	for (LocalShare **pp = &local_shares; *pp != NULL; pp = &(*pp)->next)
		if (*pp == ls)
		{
			*pp = ls->next;
			break;
		}
}

/* Register s (once) for the combining aggregate to find (LocalShare). */
static void
local_share_register(AmqAggState *s)
{
	LocalShare *ls;

	if (s->local != NULL)
		return;
	ls = MemoryContextAllocZero(s->mcxt, sizeof(LocalShare));
	ls->token = ++local_share_tokens;
	ls->state = s;
	ls->cb.func = local_share_forget;
	ls->cb.arg = ls;
	MemoryContextRegisterResetCallback(s->mcxt, &ls->cb);
	ls->next = local_shares;
	local_shares = ls;
	s->local = ls;
}

/*
 * In a partial aggregate below a Gather, copy s's hashes (sorted,
 * distinct) into the query's shared memory area for state_write to say
 * where they are, or in the leader's plain aggregate register them where
 * they are (LocalShare): true if it did.  Small states, and an area or a
 * /dev/shm without room, go through the tuple queue as always.
 */
static bool
state_share(AmqAggState *s)
{
	if (s->share_area == NULL || s->nhashes < SHARE_MIN_HASHES)
		return false;
	if (s->share_local)
	{
		local_share_register(s);
		return true;
	}
	if (!DsaPointerIsValid(s->share_dp))
	{
		/* as much again for another worker's state */
		if (AmqShmFreeBytes() / 2 < sizeof(uint64) * s->nhashes)
			return false;
		s->share_dp = dsa_allocate_extended(s->share_area,
											sizeof(uint64) * s->nhashes,
											DSA_ALLOC_HUGE | DSA_ALLOC_NO_OOM);
		if (!DsaPointerIsValid(s->share_dp))
			return false;
		memcpy(dsa_get_address(s->share_area, s->share_dp), s->hashes,
			   sizeof(uint64) * s->nhashes);
	}
	return true;
}

/*
 * The size of the bytes after the state header (hashes or the filter),
 * made current: the buffer sorted and distinct, the filter's pending
 * hashes added and its header (checksum) written.  state_write() needs it.
 */
static Size
state_body_size(AmqAggState *s)
{
	if (s->mode == AGG_BUFFER)
	{
		buffer_dedup(s);
		if (state_share(s))
			return SHARED_BODY;
		return s->nhashes * sizeof(uint64);
	}
	filter_flush(s);
	amq_write_header(&s->f, (uint8 *) VARDATA(s->filter));
	return VARSIZE(s->filter) - VARHDRSZ;
}

/* Write s (made current by state_body_size) to p. */
static void
state_write(const AmqAggState *s, uint8 *p)
{
	const AmqFilter *ki = (s->mode == AGG_FILTER) ? &s->f : &s->keyinfo;
	AmqStateHeader hdr = {0};

	hdr.mode = (uint8) s->mode;
	if (s->mode == AGG_BUFFER && DsaPointerIsValid(s->share_dp))
		hdr.mode = AMQ_STATE_SHARED;
	else if (s->mode == AGG_BUFFER && s->local != NULL && s->nhashes >= SHARE_MIN_HASHES)
		hdr.mode = AMQ_STATE_LOCAL;
	hdr.kind = s->kind;
	hdr.key_family = ki->key_family;
	hdr.hash_scheme = ki->hash_scheme;
	hdr.key_type = ki->key_type;
	hdr.fpr = s->fpr;
	hdr.capacity = s->capacity;
	amq_state_write_header(&hdr, p);
	p += AMQ_STATE_HEADER;
	if (hdr.mode == AMQ_STATE_SHARED || hdr.mode == AMQ_STATE_LOCAL)
	{
		amq_store32(p, (uint32) s->share_node);
		amq_store32(p + 4, 0);
		amq_store64(p + 8, hdr.mode == AMQ_STATE_SHARED ? (uint64) s->share_dp :
					s->local->token);
		amq_store64(p + 16, s->nhashes);
	}
	else if (s->mode == AGG_BUFFER)
	{
#ifdef AMQ_BIG_ENDIAN
		for (Size i = 0; i < s->nhashes; i++)
			amq_store64(p + 8 * i, s->hashes[i]);
#else
		memcpy(p, s->hashes, sizeof(uint64) * s->nhashes);
#endif
	}
	else
		memcpy(p, VARDATA(s->filter), VARSIZE(s->filter) - VARHDRSZ);
}

/*
 * Validate a state's bytes, all of them, with amq_state_parse() (pure C,
 * fuzzed as it ships), into *hdr; an ERROR with errcode if they fail.
 */
static void
state_validate_into(const uint8 *buf, Size len, int code, AmqStateHeader *hdr)
{
	AmqFilter	f;
	AmqStatus	st;
	const char *why;

	st = amq_state_parse(buf, len, hdr, &f, &why);
	if (st == AMQ_OK)
		return;
	if (why != NULL)
		ereport(ERROR,
				(errcode(code),
				 errmsg("invalid serialized amq_agg state"),
				 errdetail("%s", why)));
	AmqFilterParseError(st, hdr->body, hdr->body_len, code);
}

static void
state_validate(const uint8 *buf, Size len, int errcode)
{
	AmqStateHeader hdr;

	state_validate_into(buf, len, errcode, &hdr);
}

/* The mode and options of the empty state s: those of a validated header. */
static void
state_set_options(AmqAggState *s, const AmqStateHeader *hdr)
{
	s->mode = (hdr->mode == AMQ_STATE_FILTER) ? AGG_FILTER : AGG_BUFFER;
	s->kind = hdr->kind;
	s->keyinfo.key_family = hdr->key_family;
	s->keyinfo.hash_scheme = hdr->hash_scheme;
	s->keyinfo.key_type = hdr->key_type;
	s->fpr = hdr->fpr;
	s->capacity = hdr->capacity;
}

/*
 * The empty buffer of s := the n hashes at src, little-endian bytes; sorted
 * and distinct if they are ascending, as state_write wrote them (they are
 * not trusted).
 */
static void
buffer_load(AmqAggState *s, const uint8 *src, Size n)
{
	uint64		unsorted = 0;

	buffer_reserve(s, n);
#ifdef AMQ_BIG_ENDIAN
	for (Size i = 0; i < n; i++)
		s->hashes[i] = amq_load64(src + 8 * i);
#else
	memcpy(s->hashes, src, sizeof(uint64) * n);
#endif
	for (Size i = 1; i < n; i++)
		unsorted |= (s->hashes[i] <= s->hashes[i - 1]);
	s->nhashes = n;
	s->nsorted = unsorted ? 0 : n;
}

/* Read a state's bytes (validated) into the empty state s, in s->mcxt. */
static void
state_read(const uint8 *buf, Size len, AmqAggState *s, int errcode)
{
	AmqStateHeader hdr;

	state_validate_into(buf, len, errcode, &hdr);
	state_set_options(s, &hdr);
	if (s->mode == AGG_BUFFER)
		buffer_load(s, hdr.body, hdr.nhashes);
	else
	{
		MemoryContext old = MemoryContextSwitchTo(s->mcxt);
		struct varlena *v = AmqFilterCopyBytes(hdr.body, hdr.body_len);

		MemoryContextSwitchTo(old);
		state_set_filter(s, v);
	}
}

/*
 * The amqaggstate aggregates' states: expanded objects, each in a memory
 * context of its own under the aggregate's, so that nodeAgg (and Citus's
 * worker_partial_agg) keep the pointer a transition function returns
 * instead of copying the state per row.  Flattening writes the bytes above.
 */
static Size state_get_flat_size(ExpandedObjectHeader *eohptr);
static void state_flatten_into(ExpandedObjectHeader *eohptr, void *result,
							   Size allocated_size);

static const ExpandedObjectMethods state_methods = {
	state_get_flat_size,
	state_flatten_into
};

static Size
state_get_flat_size(ExpandedObjectHeader *eohptr)
{
	return VARHDRSZ + AMQ_STATE_HEADER + state_body_size((AmqAggState *) eohptr);
}

static void
state_flatten_into(ExpandedObjectHeader *eohptr, void *result, Size allocated_size)
{
	AmqAggState *s = (AmqAggState *) eohptr;

	Assert(allocated_size == state_get_flat_size(eohptr));
	SET_VARSIZE(result, allocated_size);
	state_write(s, (uint8 *) VARDATA(result));
	/* the shared copy is the combining state's now: another flattening makes its own */
	s->share_dp = InvalidDsaPointer;
}

/*
 * Where a call site keeps its states: one context under the aggregate's,
 * shared by its groups.  A context per state would be simpler, but costs
 * each group of a GROUP BY a kilobyte block at least; the expanded object
 * API needs only that the state's context be a child of the aggregate's
 * (and since a state is only ever replaced by itself, nothing deletes the
 * shared context before the aggregate's own reset).  The aggregate context
 * differs by grouping set and is reset per group in a sorted aggregate, so
 * the context is looked up per new state, and a callback forgets it when
 * its parent's reset deletes it.
 */
typedef struct StatesContext
{
	MemoryContext parent;		/* the aggregate context */
	MemoryContext cxt;			/* its child holding the states, or NULL */
} StatesContext;

typedef struct StatesContextForget
{
	MemoryContextCallback cb;
	StatesContext *cache;
	MemoryContext cxt;
} StatesContextForget;

/* What a call site (an FmgrInfo) of the aggregates' functions keeps. */
typedef struct CallSite
{
	AmqKeyHasher *h;			/* amq_agg: its keys' hasher, once known */
	StatesContext *states;		/* NULL if the call has no expression */
	StatesContext states_buf;
	int8		our_combine;	/* its aggregate combines with amq_agg_combinefn:
								 * 1 yes, 0 no, -1 not known yet */
} CallSite;

static CallSite *
call_site(FunctionCallInfo fcinfo)
{
	CallSite   *cs = (CallSite *) fcinfo->flinfo->fn_extra;

	if (cs == NULL)
	{
		cs = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CallSite));
		if (fcinfo->flinfo->fn_expr != NULL)
			cs->states = &cs->states_buf;
		cs->our_combine = -1;
		fcinfo->flinfo->fn_extra = cs;
	}
	return cs;
}

static void
states_context_forget(void *arg)
{
	StatesContextForget *f = (StatesContextForget *) arg;

	if (f->cache->cxt == f->cxt)
		f->cache->cxt = NULL;
}

/*
 * The context for a new state of the call in fcinfo, under aggcontext.
 * Citus calls through an FmgrInfo that lives for one row (no expression,
 * no cache): then each state gets a small context of its own.
 */
static MemoryContext
states_context(MemoryContext aggcontext, StatesContext *cache)
{
	StatesContextForget *f;

	if (cache == NULL)
		return AllocSetContextCreate(aggcontext, "amq_agg state", ALLOCSET_SMALL_SIZES);
	if (cache->cxt != NULL && cache->parent == aggcontext)
		return cache->cxt;
	cache->parent = aggcontext;
	cache->cxt = AllocSetContextCreate(aggcontext, "amq_agg states", ALLOCSET_DEFAULT_SIZES);
	f = MemoryContextAlloc(cache->cxt, sizeof(*f));
	f->cache = cache;
	f->cxt = cache->cxt;
	f->cb.func = states_context_forget;
	f->cb.arg = f;
	MemoryContextRegisterResetCallback(cache->cxt, &f->cb);
	return cache->cxt;
}

/* A new, empty expanded state under aggcontext. */
static AmqAggState *
state_new_expanded(FunctionCallInfo fcinfo, MemoryContext aggcontext)
{
	MemoryContext cxt = states_context(aggcontext, call_site(fcinfo)->states);
	AmqAggState *s = MemoryContextAllocZero(cxt, sizeof(AmqAggState));

	EOH_init_header(&s->eoh, &state_methods, cxt);
	s->mcxt = cxt;
	return s;
}

/* The state d points to if it is an expanded amqaggstate, else NULL. */
static AmqAggState *
state_of_expanded(Datum d)
{
	if (VARATT_IS_EXTERNAL_EXPANDED(DatumGetPointer(d)))
	{
		ExpandedObjectHeader *eoh = DatumGetEOHP(d);

		if (eoh->eoh_methods == &state_methods)
			return (AmqAggState *) eoh;
	}
	return NULL;
}

/* Read the amqaggstate value d (flattened if expanded) into empty s. */
static void
state_read_datum(Datum d, AmqAggState *s)
{
	struct varlena *v = PG_DETOAST_DATUM_PACKED(d);

	state_read((const uint8 *) VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v), s,
			   ERRCODE_INVALID_BINARY_REPRESENTATION);
}

/*
 * The state in d: an expanded one as it is (to be read, though finalizing
 * or flattening may sort its buffer, which keeps its keys); any other
 * value read and validated into *tmp, its memory in mcxt.
 */
static AmqAggState *
state_peek(Datum d, AmqAggState *tmp, MemoryContext mcxt)
{
	AmqAggState *s = state_of_expanded(d);

	if (s != NULL)
		return s;
	memset(tmp, 0, sizeof(*tmp));
	tmp->mcxt = mcxt;
	state_read_datum(d, tmp);
	return tmp;
}

/*
 * The object of d, an expanded datum: DatumGetEOHP without a call, since
 * the transition function reads it once per row.
 */
static inline ExpandedObjectHeader *
expanded_object(Datum d)
{
	varatt_expanded ptr;

	memcpy(&ptr, VARDATA_EXTERNAL(DatumGetPointer(d)), sizeof(ptr));
	return ptr.eohptr;
}

/*
 * Argument n of a transition or combine function: the read-write expanded
 * state the aggregate passes back.  (Without an initial value and with
 * functions that are not strict, nothing else reaches them.)
 */
static inline AmqAggState *
state_rw_arg(FunctionCallInfo fcinfo, int n)
{
	Datum		d = PG_GETARG_DATUM(n);
	AmqAggState *s;

	if (likely(VARATT_IS_EXTERNAL_EXPANDED_RW(DatumGetPointer(d))))
	{
		s = (AmqAggState *) expanded_object(d);
		if (likely(s->eoh.eoh_methods == &state_methods))
			return s;
	}
	elog(ERROR, "amq_agg state argument is not a read-write expanded amqaggstate");
	pg_unreachable();
}

/* a's options (not its keys) those of b */
static void
state_copy_options(AmqAggState *a, const AmqAggState *b)
{
	a->kind = b->kind;
	a->fpr = b->fpr;
	a->capacity = b->capacity;
	a->keyinfo = b->keyinfo;
	a->h = b->h;
}

/*
 * The key type of amq_agg's key argument.  Citus calls the transition
 * function of a pushed-down aggregate through an FmgrInfo of its own,
 * without the call's expression: then the key is the last argument of the
 * Aggref that called it (worker_partial_agg), whole or as the first field
 * of the row it packs several arguments into.
 */
static Oid
agg_key_type(FunctionCallInfo fcinfo)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 1);
	Aggref	   *aggref;
	Node	   *arg;

	if (OidIsValid(typid))
		return typid;
	aggref = AggGetAggref(fcinfo);
	if (aggref == NULL || aggref->args == NIL)
		return InvalidOid;
	arg = (Node *) ((TargetEntry *) llast(aggref->args))->expr;
	if (IsA(arg, RowExpr) && ((RowExpr *) arg)->args != NIL)
		arg = linitial(((RowExpr *) arg)->args);
	return exprType(arg);
}

/*
 * Does the aggregate of this transition call combine its states with
 * amq_agg_combinefn (amq_agg's, or an aggregate of one's own naming it),
 * the one combine function that reads a shared state?  Looked up once per
 * call site.
 */
static bool
combines_with_ours(FunctionCallInfo fcinfo)
{
	CallSite   *cs = call_site(fcinfo);

	if (cs->our_combine < 0)
	{
		Aggref	   *aggref = AggGetAggref(fcinfo);
		HeapTuple	tup;
		Oid			combinefn = InvalidOid;
		FmgrInfo	finfo;

		if (aggref != NULL)
		{
			tup = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggref->aggfnoid));
			if (HeapTupleIsValid(tup))
			{
				combinefn = ((Form_pg_aggregate) GETSTRUCT(tup))->aggcombinefn;
				ReleaseSysCache(tup);
			}
		}
		cs->our_combine = 0;
		if (OidIsValid(combinefn))
		{
			fmgr_info(combinefn, &finfo);
			cs->our_combine = (finfo.fn_addr == amq_agg_combinefn);
		}
	}
	return cs->our_combine == 1;
}

/*
 * The query's shared memory area, if this call is a partial aggregate below
 * a Gather (in a parallel worker, or in the leader running its share of the
 * plan), run by PostgreSQL's Agg node (not through an FmgrInfo of Citus's
 * own), whose states amq_agg_combinefn combines: its state then goes to
 * the combining aggregate through it (state_share).  The leader's own state
 * goes that way too: nodeAgg copies the first tuple it combines twice, and
 * that is usually the leader's.
 */
static dsa_area *
partial_share_area(FunctionCallInfo fcinfo)
{
	AggState   *agg = (AggState *) fcinfo->context;

	if (agg == NULL || !IsA(agg, AggState) || fcinfo->flinfo->fn_expr == NULL ||
		!DO_AGGSPLIT_SKIPFINAL(agg->aggsplit) ||
		agg->ss.ps.state->es_query_dsa == NULL || !combines_with_ours(fcinfo))
		return NULL;
	return agg->ss.ps.state->es_query_dsa;
}

/*
 * The options of a new amq_agg state, from its first row: a new state in
 * mcxt (an expanded object if expanded), in AGG_FILTER mode if it has a
 * capacity and its kind has union.
 */
static AmqAggState *
agg_start(FunctionCallInfo fcinfo, MemoryContext aggcontext, bool expanded)
{
	AmqAggState *s = expanded ? state_new_expanded(fcinfo, aggcontext) : state_new(aggcontext);
	CallSite   *cs = call_site(fcinfo);
	AmqKeyHasher *h = cs->h;
	int			nargs = PG_NARGS();
	const AmqKindOps *ops = amq_kind_ops(AMQ_DEFAULT_KIND);
	bool		parquet = false;
	bool		has_capacity = (nargs > 4 && !PG_ARGISNULL(4));

	if (h == NULL)
	{
		/*
		 * One hasher for the call site, in fn_mcxt, when the call has an
		 * expression; else (Citus, above) the FmgrInfo lives for one row:
		 * the state gets its own.
		 */
		bool		per_site = (fcinfo->flinfo->fn_expr != NULL);
		MemoryContext hcxt = per_site ? fcinfo->flinfo->fn_mcxt : s->mcxt;

		h = MemoryContextAlloc(hcxt, sizeof(*h));
		AmqHasherInit(h, agg_key_type(fcinfo), PG_GET_COLLATION(), hcxt);
		if (per_site)
			cs->h = h;
	}

	s->fpr = AMQ_DEFAULT_FPR;
	if (nargs > 2 && !PG_ARGISNULL(2))
		s->fpr = PG_GETARG_FLOAT8(2);
	AmqCheckFpr(s->fpr);
	if (nargs > 3 && !PG_ARGISNULL(3))
		ops = AmqResolveKind(text_to_cstring(PG_GETARG_TEXT_PP(3)),
							 !has_capacity, s->fpr, &parquet);
	s->kind = ops->id;
	s->h = h;
	if (parquet)
	{
		/* this state's own hasher: other groups may not be Parquet */
		s->h = MemoryContextAlloc(s->mcxt, sizeof(AmqKeyHasher));
		*s->h = *h;
		AmqHasherSetParquet(s->h, 0);
	}
	AmqSetFamily(&s->keyinfo, s->h);
	if (has_capacity)
	{
		AmqFilter	f;
		MemoryContext old;

		s->capacity = PG_GETARG_INT64(4);
		AmqRequireCap(ops, AMQ_CAP_ADD, "building in fixed memory (a capacity)");
		AmqPlanOrError(&f, s->kind, s->capacity, s->fpr, 0);
		if (parquet)
			AmqPlanParquet(&f);
		if (ops->caps & AMQ_CAP_UNION)
		{
			f.key_family = s->keyinfo.key_family;
			f.hash_scheme = s->keyinfo.hash_scheme;
			f.key_type = s->keyinfo.key_type;
			old = MemoryContextSwitchTo(s->mcxt);
			s->filter = AmqFilterAlloc(&f);
			MemoryContextSwitchTo(old);
			s->mode = AGG_FILTER;
			s->f = f;
			s->pending = MemoryContextAlloc(s->mcxt, sizeof(uint64) * FILTER_BATCH);
		}
	}
	if (s->mode == AGG_BUFFER)
	{
		buffer_presize(s, fcinfo);
		if (expanded && (s->share_area = partial_share_area(fcinfo)) != NULL)
		{
			Agg		   *plan = (Agg *) ((AggState *) fcinfo->context)->ss.ps.plan;

			s->share_node = plan->plan.plan_node_id;
			/* one state, kept until the combining aggregate is done with it */
			s->share_local = !IsParallelWorker() && plan->aggstrategy == AGG_PLAIN &&
				plan->groupingSets == NIL;
		}
	}
	return s;
}

/*
 * amq_agg_trans for the first row, a full buffer, or a fixed-size filter.
 * Not inlined: its frame and stack-protector check would otherwise be paid
 * by every row of the fast path.
 */
static pg_noinline AmqAggState *
agg_trans_slow(FunctionCallInfo fcinfo, AmqAggState *s, bool expanded)
{
	uint64		hash;

	if (s == NULL)
		s = agg_start(fcinfo, agg_context(fcinfo, "amq_agg_trans"), expanded);

	if (PG_ARGISNULL(1))
		return s;

	hash = AmqHashDatum(s->h, PG_GETARG_DATUM(1));
	if (s->mode == AGG_FILTER)
	{
		prefetch_key(&s->f, hash);
		s->pending[s->npending++] = hash;
		if (s->npending == FILTER_BATCH)
			filter_flush(s);
	}
	else
	{
		if (unlikely(s->nhashes == s->maxhashes))
			buffer_reserve(s, 1);
		s->hashes[s->nhashes++] = hash;
	}
	return s;
}

/* The per-row path: append one hash to a buffer with room, or false. */
static inline bool
agg_trans_fast(FunctionCallInfo fcinfo, AmqAggState *s)
{
	if (likely(s != NULL && s->mode == AGG_BUFFER && s->nhashes < s->maxhashes))
	{
		if (!PG_ARGISNULL(1))
			s->hashes[s->nhashes++] = AmqHashDatum(s->h, PG_GETARG_DATUM(1));
		return true;
	}
	return false;
}

/*
 * amq_agg(key [, fpr [, kind [, capacity]]]) transition, state internal
 * (extension versions before 0.5.0).  The options are read from the first
 * row; NULL options take their defaults.
 */
Datum
amq_agg_trans(PG_FUNCTION_ARGS)
{
	AmqAggState *s = PG_ARGISNULL(0) ? NULL : (AmqAggState *) PG_GETARG_POINTER(0);

	if (!agg_trans_fast(fcinfo, s))
		s = agg_trans_slow(fcinfo, s, false);
	PG_RETURN_POINTER(s);
}

/* amq_agg transition, state amqaggstate: the same, on the expanded state. */
Datum
amq_agg_transfn(PG_FUNCTION_ARGS)
{
	AmqAggState *s = PG_ARGISNULL(0) ? NULL : state_rw_arg(fcinfo, 0);

	if (!agg_trans_fast(fcinfo, s))
		s = agg_trans_slow(fcinfo, s, true);
	PG_RETURN_DATUM(EOHPGetRWDatum(&s->eoh));
}

/* amq_union_agg(filter): union into a filter state. */
static AmqAggState *
union_trans(FunctionCallInfo fcinfo, AmqAggState *s, bool expanded)
{
	AmqFilter	g;

	if (PG_ARGISNULL(1))
		return s;

	if (s == NULL)
	{
		MemoryContext aggcontext = agg_context(fcinfo, "amq_union_agg_trans");
		MemoryContext old;
		struct varlena *v;

		s = expanded ? state_new_expanded(fcinfo, aggcontext) : state_new(aggcontext);
		old = MemoryContextSwitchTo(s->mcxt);
		v = AmqFilterGetArg(fcinfo, 1, &g, true);
		MemoryContextSwitchTo(old);
		s->kind = g.kind;
		s->fpr = g.fpr;
		state_set_filter(s, v);
		s->keyinfo = s->f;
		return s;
	}
	AmqFilterGetArg(fcinfo, 1, &g, false);
	AmqMergeOrError(&s->f, &g, AMQ_MERGE_UNION);
	return s;
}

/* amq_union_agg transition, state internal (before 0.5.0). */
Datum
amq_union_agg_trans(PG_FUNCTION_ARGS)
{
	AmqAggState *s = PG_ARGISNULL(0) ? NULL : (AmqAggState *) PG_GETARG_POINTER(0);

	s = union_trans(fcinfo, s, false);
	if (s == NULL)
		PG_RETURN_NULL();
	PG_RETURN_POINTER(s);
}

/* amq_union_agg transition, state amqaggstate. */
Datum
amq_union_agg_transfn(PG_FUNCTION_ARGS)
{
	AmqAggState *s = PG_ARGISNULL(0) ? NULL : state_rw_arg(fcinfo, 0);

	s = union_trans(fcinfo, s, true);
	if (s == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(EOHPGetRWDatum(&s->eoh));
}

/*
 * The filter of a state.  Deduplicating the buffer keeps the key set, so
 * the state stays usable: a window aggregate finalizes it again.
 */
static Datum
state_final(AmqAggState *s)
{
	struct varlena *v;
	AmqFilter	f;

	if (s->mode == AGG_BUFFER && s->nruns > 0 && AmqBuildTakesRuns(s->kind))
	{
		/*
		 * The partial states of a parallel plan, combined as runs: the
		 * blocked fill takes them as they are and counts their union as
		 * it goes, so the union is never written out (80 MB written and
		 * faulted in at 10^7 keys).
		 */
		const uint64 *head[MAX_RUNS + 1];
		const uint64 *end[MAX_RUNS + 1];
		Size		lens[MAX_RUNS + 1];
		int			k = state_runs(s, head, end);

		for (int r = 0; r < k; r++)
			lens[r] = end[r] - head[r];
		return AmqBuildFromRuns(s->kind, s->fpr, &s->keyinfo, head, lens, k,
								s->capacity);
	}
	if (s->mode == AGG_BUFFER)
	{
		buffer_dedup(s);
		return AmqBuildFromHashes(s->kind, s->fpr, &s->keyinfo,
								  s->hashes, s->nhashes, s->capacity);
	}

	filter_flush(s);
	v = (struct varlena *) palloc(VARSIZE(s->filter));
	memcpy(v, s->filter, VARSIZE(s->filter));
	f = s->f;
	f.payload = (uint8 *) VARDATA(v) + AMQ_HEADER_SIZE;
	return AmqFilterFinish(v, &f);
}

/* Final function, state internal: the filter (NULL when no row came). */
Datum
amq_agg_final(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	return state_final((AmqAggState *) PG_GETARG_POINTER(0));
}

/*
 * Final function, state amqaggstate: the aggregate's expanded state, or
 * (Citus, or a call from SQL) any value of the type, validated.
 */
Datum
amq_agg_finalfn(PG_FUNCTION_ARGS)
{
	AmqAggState tmp;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	return state_final(state_peek(PG_GETARG_DATUM(0), &tmp, CurrentMemoryContext));
}

/*
 * The sorted, distinct runs of s (its buffer first, then the runs combined
 * into it), the empty ones left out, as head[r]..end[r]: how many.
 */
static int
state_runs(const AmqAggState *s, const uint64 **head, const uint64 **end)
{
	int			k = 0;

	Assert(s->nsorted == s->nhashes);
	if (s->nhashes > 0)
	{
		head[k] = s->hashes;
		end[k++] = s->hashes + s->nhashes;
	}
	for (int r = 0; r < s->nruns; r++)
	{
		if (s->runs->len[r] == 0)
			continue;
		head[k] = s->runs->run[r];
		end[k++] = s->runs->run[r] + s->runs->len[r];
	}
	return k;
}

/*
 * s's hashes := the union of its sorted, distinct buffer and its runs (each
 * sorted and distinct), merged into one new buffer: the partial states of a
 * parallel aggregate, each sorted by its worker, are neither sorted again
 * nor copied once per combine.  The runs but the first are merged into the
 * new buffer's tail, which the first is then merged with in place: two
 * branch-free passes for the usual three partial states (two workers and
 * the leader).
 */
static void
merge_runs(AmqAggState *s)
{
	const uint64 *head[MAX_RUNS + 1];
	const uint64 *end[MAX_RUNS + 1];
	int			k = state_runs(s, head, end);
	Size		total = 0;
	Size		n0;
	Size		ntail;
	uint64	   *out;

	for (int r = 0; r < k; r++)
		total += end[r] - head[r];
	if (total == 0)
	{
		shared_runs_free(s);
		s->nruns = 0;
		return;
	}

	out = AmqAllocBig(s->mcxt, sizeof(uint64) * total, 0);
	if (k == 1)
		s->nhashes = amq_union_merge(head, end, 1, out);
	else
	{
		n0 = end[0] - head[0];
		ntail = amq_union_merge(head + 1, end + 1, k - 1, out + n0);
		s->nhashes = amq_merge2(head[0], n0, out + n0, ntail, out);
	}
	shared_runs_free(s);
	s->nruns = 0;
	if (s->hashes != NULL)
		pfree(s->hashes);
	s->hashes = out;
	s->nsorted = s->nhashes;
	s->maxhashes = total;
}

/*
 * Combine b into a (both of one aggregate).  With take, b's memory is a's
 * to keep (b came from bytes read into a's context, and is not used again):
 * its sorted hashes become a run of a, merged with the others at the end.
 */
static void
combine_into(AmqAggState *a, AmqAggState *b, bool take, SharedRun *sr)
{
	if (b->mode == AGG_FILTER)
		filter_flush(b);
	else if (b->nruns > 0)
		merge_runs(b);
	if (a->mode != b->mode || a->kind != b->kind)
		elog(ERROR, "cannot combine amq_agg states of different modes or kinds");

	if (a->mode == AGG_FILTER)
	{
		filter_flush(a);
		AmqMergeOrError(&a->f, &b->f, AMQ_MERGE_UNION);
	}
	else if (b->nhashes > 0)
	{
		Size		held = a->nhashes + b->nhashes;

		for (int r = 0; r < a->nruns; r++)
			held += a->runs->len[r];
		if (take && a->nsorted == a->nhashes && b->nsorted == b->nhashes &&
			a->nruns < MAX_RUNS && held <= MAX_HASHES)
		{
			/* the buffer of a is marked full: no row goes in before the merge */
			if (a->runs == NULL)
				a->runs = MemoryContextAlloc(a->mcxt, sizeof(AggRuns));
			a->runs->run[a->nruns] = b->hashes;
			a->runs->len[a->nruns] = b->nhashes;
			a->runs->shared[a->nruns++] = sr;
			a->maxhashes = a->nhashes;
			return;
		}
		buffer_reserve(a, b->nhashes);
		memcpy(a->hashes + a->nhashes, b->hashes, sizeof(uint64) * b->nhashes);
		a->nhashes += b->nhashes;
	}
	if (sr != NULL)
		shared_run_free(sr);
}

/* Combine function, state internal: b is a deserialized partial state. */
Datum
amq_agg_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext = agg_context(fcinfo, "amq_agg_combine");
	AmqAggState *a = PG_ARGISNULL(0) ? NULL : (AmqAggState *) PG_GETARG_POINTER(0);
	AmqAggState *b = PG_ARGISNULL(1) ? NULL : (AmqAggState *) PG_GETARG_POINTER(1);

	if (b == NULL)
		PG_RETURN_POINTER(a);
	if (a == NULL)
	{
		/* an empty state of b's options; b's contents are combined below */
		a = state_new(aggcontext);
		state_copy_options(a, b);
		if (b->mode == AGG_FILTER)
		{
			struct varlena *v;

			filter_flush(b);
			v = MemoryContextAlloc(a->mcxt, VARSIZE(b->filter));
			memcpy(v, b->filter, VARSIZE(b->filter));
			a->mode = AGG_FILTER;
			a->filter = v;
			a->f = b->f;
			a->f.payload = (uint8 *) VARDATA(v) + AMQ_HEADER_SIZE;
			PG_RETURN_POINTER(a);
		}
	}
	combine_into(a, b, true, NULL);
	PG_RETURN_POINTER(a);
}

/* the parallel executor state of a Gather or Gather Merge (NULL once shut down) */
static struct ParallelExecutorInfo *
gather_pei(PlanState *ps)
{
	if (IsA(ps, GatherState))
		return ((GatherState *) ps)->pei;
	if (IsA(ps, GatherMergeState))
		return ((GatherMergeState *) ps)->pei;
	return NULL;
}

/*
 * Finds, below a combining aggregate, the Gather or Gather Merge above the
 * partial aggregate of a given plan node id: whose area its states are in.
 * (The parallel query's area is made in place, so it has no handle to name
 * it by; plan node ids are the same in every process.)
 */
typedef struct AreaSearch
{
	int			node_id;
	PlanState  *gather;
} AreaSearch;

static bool
has_node_walker(PlanState *ps, void *context)
{
	if (ps->plan->plan_node_id == *(int *) context)
		return true;
	return planstate_tree_walker(ps, has_node_walker, context);
}

static bool
find_area_walker(PlanState *ps, void *context)
{
	AreaSearch *search = (AreaSearch *) context;
	struct ParallelExecutorInfo *pei = gather_pei(ps);

	if (pei != NULL && pei->area != NULL &&
		has_node_walker(outerPlanState(ps), &search->node_id))
	{
		search->gather = ps;
		return true;
	}
	return planstate_tree_walker(ps, find_area_walker, context);
}

/* Free a shared run's hashes now, if not yet. */
static void
shared_run_free(SharedRun *sr)
{
	if (DsaPointerIsValid(sr->dp))
	{
		dsa_free(sr->area, sr->dp);
		sr->dp = InvalidDsaPointer;
	}
}

/* Free the hashes of s's shared runs (merged, or copied). */
static void
shared_runs_free(AmqAggState *s)
{
	for (int r = 0; r < s->nruns; r++)
		if (s->runs->shared[r] != NULL)
			shared_run_free(s->runs->shared[r]);
}

/*
 * Reset callback of a shared run's state memory: free its hashes if the
 * area is still attached, i.e. on a rescan.  Not in an abort, nor after the
 * Gather shut down (its area went, the hashes with it), nor when no
 * transaction is running normally.
 */
static void
shared_run_forget(void *arg)
{
	SharedRun  *sr = (SharedRun *) arg;

	if (!DsaPointerIsValid(sr->dp) || !IsTransactionState())
		return;
	if (sr->gather != NULL)
	{
		struct ParallelExecutorInfo *pei = gather_pei(sr->gather);

		if (pei == NULL || pei->area != sr->area)
			return;
	}
	shared_run_free(sr);
}

/*
 * If d is a partial state handed over where it is (state_share), make the
 * empty state s its hashes and return true.  In shared memory, they stay
 * in the area of the Gather below this aggregate (or this parallel
 * worker's own), and *srp is set to the run that frees them (its callback
 * on mcxt, the combining state's memory); in this process's memory
 * (LocalShare), *srp is NULL: the partial state keeps them.  False for any
 * other value.  The header is validated as any state's; the hashes are
 * this extension's own, written by the partial aggregate of this query,
 * sorted and distinct.  Only a partial aggregate writes these forms, and
 * every input function refuses them (amq_state_parse).
 */
static bool
state_take_shared(FunctionCallInfo fcinfo, Datum d, AmqAggState *s,
				  MemoryContext mcxt, SharedRun **srp)
{
	AggState   *agg = (AggState *) fcinfo->context;
	struct varlena *v = (struct varlena *) DatumGetPointer(d);
	const uint8 *buf;
	uint8		head[AMQ_STATE_HEADER];
	AmqStateHeader hdr;
	AreaSearch	search;
	SharedRun  *sr;
	uint64		n;

	*srp = NULL;
	if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
		return false;			/* expanded, toasted: not 56 bytes in a tuple */
	buf = (const uint8 *) VARDATA_ANY(v);
	if (VARSIZE_ANY_EXHDR(v) != AMQ_STATE_HEADER + SHARED_BODY ||
		buf[0] != AMQ_STATE_VERSION ||
		(buf[1] != AMQ_STATE_SHARED && buf[1] != AMQ_STATE_LOCAL))
		return false;

	/* the header is a buffer state's but for its mode */
	memcpy(head, buf, AMQ_STATE_HEADER);
	head[1] = AMQ_STATE_BUFFER;
	state_validate_into(head, AMQ_STATE_HEADER, ERRCODE_INVALID_BINARY_REPRESENTATION,
						&hdr);
	n = amq_load64(buf + AMQ_STATE_HEADER + 16);
	if (n == 0 || n > AMQ_STATE_MAX_HASHES)
		elog(ERROR, "amq_agg partial state in shared memory has %llu hashes",
			 (unsigned long long) n);
	if (agg == NULL || !IsA(agg, AggState))
		elog(ERROR, "amq_agg partial state in shared memory outside an aggregate");

	if (buf[1] == AMQ_STATE_LOCAL)
	{
		uint64		token = amq_load64(buf + AMQ_STATE_HEADER + 8);
		LocalShare *ls = local_shares;

		while (ls != NULL && ls->token != token)
			ls = ls->next;
		if (ls == NULL || ls->state->nhashes != n || ls->state->nsorted != n)
			elog(ERROR, "amq_agg partial state of this process not found");
		state_set_options(s, &hdr);
		s->hashes = ls->state->hashes;
		s->nhashes = s->nsorted = s->maxhashes = n;
		return true;
	}

	sr = MemoryContextAllocZero(mcxt, sizeof(SharedRun));
	search.node_id = (int) amq_load32(buf + AMQ_STATE_HEADER);
	search.gather = NULL;
	if (find_area_walker(&agg->ss.ps, &search))
	{
		sr->area = gather_pei(search.gather)->area;
		sr->gather = search.gather;
	}
	else if (IsParallelWorker() && agg->ss.ps.state->es_query_dsa != NULL)
		sr->area = agg->ss.ps.state->es_query_dsa; /* combined in the worker */
	else
		elog(ERROR, "shared memory of an amq_agg partial state not found");
	sr->dp = (dsa_pointer) amq_load64(buf + AMQ_STATE_HEADER + 8);
	sr->cb.func = shared_run_forget;
	sr->cb.arg = sr;
	MemoryContextRegisterResetCallback(mcxt, &sr->cb);

	state_set_options(s, &hdr);
	s->hashes = dsa_get_address(sr->area, sr->dp);
	s->nhashes = s->nsorted = s->maxhashes = n;
	*srp = sr;
	return true;
}

/*
 * Combine function, state amqaggstate (not strict).  b is a partial state
 * read from a parallel worker's tuple or from Citus's text form: flat
 * bytes, read (validated) straight into a's memory.
 */
Datum
amq_agg_combinefn(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext = agg_context(fcinfo, "amq_agg_combine");
	AmqAggState *a;
	AmqAggState tmp;
	AmqAggState *b;
	SharedRun  *sr;

	if (PG_ARGISNULL(1))
	{
		if (PG_ARGISNULL(0))
			PG_RETURN_NULL();
		PG_RETURN_DATUM(PG_GETARG_DATUM(0));
	}
	a = PG_ARGISNULL(0) ? state_new_expanded(fcinfo, aggcontext) : state_rw_arg(fcinfo, 0);
	memset(&tmp, 0, sizeof(tmp));
	if (state_take_shared(fcinfo, PG_GETARG_DATUM(1), &tmp, a->mcxt, &sr))
	{
		/* a new state takes the options; the hashes become a run of it */
		if (PG_ARGISNULL(0))
			state_copy_options(a, &tmp);
		combine_into(a, &tmp, true, sr);
	}
	else if (PG_ARGISNULL(0))
		state_read_datum(PG_GETARG_DATUM(1), a);
	else
	{
		b = state_peek(PG_GETARG_DATUM(1), &tmp, a->mcxt);
		combine_into(a, b, b == &tmp, NULL);
	}
	PG_RETURN_DATUM(EOHPGetRWDatum(&a->eoh));
}

/* Serialize, state internal: the layout of core.h (amq_state_write_header). */
Datum
amq_agg_serialize(PG_FUNCTION_ARGS)
{
	AmqAggState *s = (AmqAggState *) PG_GETARG_POINTER(0);
	Size		size;
	bytea	   *out;

	agg_context(fcinfo, "amq_agg_serialize");
	size = VARHDRSZ + AMQ_STATE_HEADER + state_body_size(s);
	out = (bytea *) palloc(size);
	SET_VARSIZE(out, size);
	state_write(s, (uint8 *) VARDATA(out));
	PG_RETURN_BYTEA_P(out);
}

/* Deserialize, state internal: validated like any other untrusted input. */
Datum
amq_agg_deserialize(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext = agg_context(fcinfo, "amq_agg_deserialize");
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	AmqAggState *s = state_new(aggcontext);

	state_read((const uint8 *) VARDATA_ANY(in), VARSIZE_ANY_EXHDR(in), s,
			   ERRCODE_INVALID_BINARY_REPRESENTATION);
	PG_RETURN_POINTER(s);
}

/*
 * The amqaggstate type.  Its bytes are those of a serialized state (core.h);
 * every way in validates them with amq_state_parse(), like amqfilter's.
 */

/* Validate bytes as a state and return them as an amqaggstate value. */
static struct varlena *
state_value_from_bytes(const uint8 *buf, Size len, int errcode)
{
	struct varlena *v;

	state_validate(buf, len, errcode);
	v = (struct varlena *) palloc(VARHDRSZ + len);
	SET_VARSIZE(v, VARHDRSZ + len);
	memcpy(VARDATA(v), buf, len);
	return v;
}

/* Text input: base64 of the state's bytes (output: amqfilter_out). */
Datum
amqaggstate_in(PG_FUNCTION_ARGS)
{
	size_t		n;
	uint8	   *buf = AmqBase64Input(PG_GETARG_CSTRING(0), "amqaggstate", &n);
	struct varlena *v;

	v = state_value_from_bytes(buf, n, ERRCODE_INVALID_TEXT_REPRESENTATION);
	pfree(buf);
	PG_RETURN_POINTER(v);
}

/* Binary input: the bytes, validated (output: amqfilter_send). */
Datum
amqaggstate_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	struct varlena *v;

	v = state_value_from_bytes((const uint8 *) buf->data + buf->cursor,
							   buf->len - buf->cursor,
							   ERRCODE_INVALID_BINARY_REPRESENTATION);
	buf->cursor = buf->len;
	PG_RETURN_POINTER(v);
}
