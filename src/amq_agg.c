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
 * A buffer that outgrows what one varlena (and so a serialized partial
 * state or the final filter) can carry is an error with a hint, never an
 * out-of-memory kill.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "fmgr.h"
#include "libpq/pqformat.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "amqfilter.h"
#include "kind_blocked.h"

PG_FUNCTION_INFO_V1(amq_agg_trans);
PG_FUNCTION_INFO_V1(amq_agg_final);
PG_FUNCTION_INFO_V1(amq_agg_combine);
PG_FUNCTION_INFO_V1(amq_agg_serialize);
PG_FUNCTION_INFO_V1(amq_agg_deserialize);
PG_FUNCTION_INFO_V1(amq_union_agg_trans);

#define AMQ_DEFAULT_FPR		0.01
#define AMQ_DEFAULT_KIND	AMQ_KIND_BLOCKED

#define INITIAL_HASHES	8
#define DEDUP_MIN		((Size) 1 << 24)
#define MAX_HASHES		((Size) AMQ_STATE_MAX_HASHES)

/* sorted partial states a combined state keeps to merge at once */
#define MAX_RUNS		16

/* hashes of a fixed-size filter waiting for their prefetched lines */
#define FILTER_BATCH	32

/* the modes are those of the serialized state (core.h) */
typedef enum AggMode
{
	AGG_BUFFER = AMQ_STATE_BUFFER,
	AGG_FILTER = AMQ_STATE_FILTER
} AggMode;

typedef struct AmqAggState
{
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
} AggRuns;

static pg_noinline Datum agg_trans_slow(FunctionCallInfo fcinfo,
										AmqAggState *s, AmqKeyHasher *h);
static void buffer_resize(AmqAggState *s, Size newmax, MemoryContext mcxt);

/* The aggregate's memory context, or an ERROR outside an aggregate. */
static MemoryContext
agg_context(FunctionCallInfo fcinfo, const char *fname)
{
	MemoryContext aggcontext;

	if (!AggCheckCallContext(fcinfo, &aggcontext))
		elog(ERROR, "%s called in non-aggregate context", fname);
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

static void merge_runs(AmqAggState *s, MemoryContext mcxt);

/* Sort and deduplicate the buffer in place. */
static void
buffer_dedup(AmqAggState *s)
{
	uint64	   *scratch;

	if (s->nruns > 0)
		merge_runs(s, GetMemoryChunkContext(s));

	if (s->nhashes < 2 || s->nsorted == s->nhashes)
	{
		s->nsorted = s->nhashes;
		return;
	}
	scratch = AmqAllocBig(CurrentMemoryContext, sizeof(uint64) * s->nhashes, 0);
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

/* Make room for at least "more" hashes in s's buffer (in mcxt). */
static void
buffer_reserve(AmqAggState *s, Size more, MemoryContext mcxt)
{
	Size		newmax;

	if (s->nruns > 0)
		merge_runs(s, mcxt);
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

			AmqPlanOrError(&probe, s->kind, s->nhashes, s->fpr);
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
	buffer_resize(s, newmax, mcxt);
}

/* Give s's buffer room for exactly newmax hashes (>= nhashes). */
static void
buffer_resize(AmqAggState *s, Size newmax, MemoryContext mcxt)
{
	if (s->hashes == NULL)
		s->hashes = AmqAllocBig(mcxt, sizeof(uint64) * newmax, 0);
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
buffer_presize(AmqAggState *s, FunctionCallInfo fcinfo, MemoryContext mcxt)
{
	double		rows = agg_input_estimate(fcinfo);
	Size		want;

	if (!(rows > (double) INITIAL_HASHES))
		return;
	want = rows >= (double) MAX_HASHES ? MAX_HASHES : (Size) rows;
	s->hashes = AmqAllocBig(mcxt, sizeof(uint64) * want, MCXT_ALLOC_NO_OOM);
	if (s->hashes != NULL)
		s->maxhashes = want;
}

/* A new, empty aggregate state in mcxt. */
static AmqAggState *
state_new(MemoryContext mcxt)
{
	return MemoryContextAllocZero(mcxt, sizeof(AmqAggState));
}

/* Start fetching the filter's line that adding hash will read. */
static inline void
prefetch_key(const AmqFilter *f, uint64 hash)
{
	if (f->kind == AMQ_KIND_BLOCKED)
		__builtin_prefetch(f->payload + AMQ_BLOCKED_BLOCK_BYTES *
						   amq_blocked_block(amq_seeded(f, hash), f->param[0]), 1);
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
			uint8	   *b = f->payload + AMQ_BLOCKED_BLOCK_BYTES *
				amq_blocked_block(h, f->param[0]);

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
 * amq_agg(key [, fpr [, kind [, capacity]]]) transition.  The options are
 * read from the first row; NULL options take their defaults.
 */
Datum
amq_agg_trans(PG_FUNCTION_ARGS)
{
	AmqAggState *s = PG_ARGISNULL(0) ? NULL : (AmqAggState *) PG_GETARG_POINTER(0);
	/* the per-row path: append one hash */
	if (likely(s != NULL && s->mode == AGG_BUFFER &&
			   s->nhashes < s->maxhashes))
	{
		if (!PG_ARGISNULL(1))
			s->hashes[s->nhashes++] = AmqHashDatum(s->h, PG_GETARG_DATUM(1));
		PG_RETURN_POINTER(s);
	}

	return agg_trans_slow(fcinfo, s,
						  (AmqKeyHasher *) fcinfo->flinfo->fn_extra);
}

/*
 * amq_agg_trans for the first row, a full buffer, or a fixed-size filter.
 * Not inlined: its frame and stack-protector check would otherwise be paid
 * by every row of the fast path.
 */
static pg_noinline Datum
agg_trans_slow(FunctionCallInfo fcinfo, AmqAggState *s, AmqKeyHasher *h)
{
	MemoryContext aggcontext = agg_context(fcinfo, "amq_agg_trans");
	uint64		hash;

	if (h == NULL)
	{
		h = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(*h));
		AmqHasherInit(h, get_fn_expr_argtype(fcinfo->flinfo, 1),
					  PG_GET_COLLATION(), fcinfo->flinfo->fn_mcxt);
		fcinfo->flinfo->fn_extra = h;
	}

	if (s == NULL)
	{
		int			nargs = PG_NARGS();
		const AmqKindOps *ops = amq_kind_ops(AMQ_DEFAULT_KIND);
		bool		parquet = false;
		bool		has_capacity = (nargs > 4 && !PG_ARGISNULL(4));

		s = state_new(aggcontext);
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
			s->h = MemoryContextAlloc(aggcontext, sizeof(AmqKeyHasher));
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
			AmqPlanOrError(&f, s->kind, s->capacity, s->fpr);
			if (parquet)
				AmqPlanParquet(&f);
			if (ops->caps & AMQ_CAP_UNION)
			{
				f.key_family = s->keyinfo.key_family;
				f.hash_scheme = s->keyinfo.hash_scheme;
				f.key_type = s->keyinfo.key_type;
				old = MemoryContextSwitchTo(aggcontext);
				s->filter = AmqFilterAlloc(&f);
				MemoryContextSwitchTo(old);
				s->mode = AGG_FILTER;
				s->f = f;
				s->pending = MemoryContextAlloc(aggcontext,
												sizeof(uint64) * FILTER_BATCH);
			}
		}
		if (s->mode == AGG_BUFFER)
			buffer_presize(s, fcinfo, aggcontext);
	}

	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(s);

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
			buffer_reserve(s, 1, aggcontext);
		s->hashes[s->nhashes++] = hash;
	}
	PG_RETURN_POINTER(s);
}

/* amq_union_agg(filter) transition: union into a filter state. */
Datum
amq_union_agg_trans(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext = agg_context(fcinfo, "amq_union_agg_trans");
	AmqAggState *s = PG_ARGISNULL(0) ? NULL : (AmqAggState *) PG_GETARG_POINTER(0);
	AmqFilter	g;

	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(s);

	if (s == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(aggcontext);
		struct varlena *v = AmqFilterGetArg(fcinfo, 1, &g, true);

		MemoryContextSwitchTo(old);
		s = state_new(aggcontext);
		s->kind = g.kind;
		s->fpr = g.fpr;
		state_set_filter(s, v);
		s->keyinfo = s->f;
		PG_RETURN_POINTER(s);
	}
	AmqFilterGetArg(fcinfo, 1, &g, false);
	AmqMergeOrError(&s->f, &g, AMQ_MERGE_UNION);
	PG_RETURN_POINTER(s);
}

/* Final function: the filter of the state (NULL when no row came). */
Datum
amq_agg_final(PG_FUNCTION_ARGS)
{
	AmqAggState *s;
	struct varlena *v;
	AmqFilter	f;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	s = (AmqAggState *) PG_GETARG_POINTER(0);

	if (s->mode == AGG_BUFFER)
	{
		/* deduplication keeps the key set, so the state stays usable */
		buffer_dedup(s);
		return AmqBuildFromHashes(s->kind, s->fpr, &s->keyinfo,
								  s->hashes, s->nhashes, s->capacity);
	}

	filter_flush(s);
	/* copy: the state may be finalized again */
	v = (struct varlena *) palloc(VARSIZE(s->filter));
	memcpy(v, s->filter, VARSIZE(s->filter));
	f = s->f;
	f.payload = (uint8 *) VARDATA(v) + AMQ_HEADER_SIZE;
	return AmqFilterFinish(v, &f);
}

/*
 * Merge the ascending, distinct x[0..nx) and y[0..ny) into out, dropping
 * the keys both hold; returns the count.  Branch-free but for the loop.
 * out may be y itself or memory before it: out never gets ahead of y.
 */
static Size
merge2(const uint64 *x, Size nx, const uint64 *y, Size ny, uint64 *out)
{
	Size		i = 0,
				j = 0,
				w = 0;

	while (i < nx && j < ny)
	{
		uint64		u = x[i];
		uint64		v = y[j];

		out[w++] = u < v ? u : v;
		i += (u <= v);
		j += (v <= u);
	}
	while (i < nx)
		out[w++] = x[i++];
	if (out + w != y + j)
		memmove(out + w, y + j, (ny - j) * sizeof(uint64));
	return w + (ny - j);
}

/* Merge k (>= 1) ascending, distinct runs into out, dropping repeats. */
static Size
merge_k(const uint64 **head, const uint64 **end, int k, uint64 *out)
{
	Size		w = 0;

	if (k == 1)
	{
		memcpy(out, head[0], (end[0] - head[0]) * sizeof(uint64));
		return end[0] - head[0];
	}
	if (k == 2)
		return merge2(head[0], end[0] - head[0], head[1], end[1] - head[1], out);
	while (k > 0)
	{
		uint64		v = *head[0];

		/* the smallest head, then advance every run that holds it */
		for (int r = 1; r < k; r++)
			if (*head[r] < v)
				v = *head[r];
		out[w++] = v;
		for (int r = 0; r < k;)
		{
			if (*head[r] == v && ++head[r] == end[r])
			{
				head[r] = head[k - 1];
				end[r] = end[k - 1];
				k--;
				continue;
			}
			r++;
		}
	}
	return w;
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
merge_runs(AmqAggState *s, MemoryContext mcxt)
{
	const uint64 *head[MAX_RUNS + 1];
	const uint64 *end[MAX_RUNS + 1];
	int			k = 0;
	Size		total = 0;
	Size		n0;
	Size		ntail;
	uint64	   *out;

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
	for (int r = 0; r < k; r++)
		total += end[r] - head[r];
	s->nruns = 0;
	if (total == 0)
		return;

	out = AmqAllocBig(mcxt, sizeof(uint64) * total, 0);
	if (k == 1)
		s->nhashes = merge_k(head, end, 1, out);
	else
	{
		n0 = end[0] - head[0];
		ntail = merge_k(head + 1, end + 1, k - 1, out + n0);
		s->nhashes = merge2(head[0], n0, out + n0, ntail, out);
	}
	if (s->hashes != NULL)
		pfree(s->hashes);
	s->hashes = out;
	s->nsorted = s->nhashes;
	s->maxhashes = total;
}

/* Combine function: merge two partial states of a parallel aggregate. */
Datum
amq_agg_combine(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext = agg_context(fcinfo, "amq_agg_combine");
	AmqAggState *a = PG_ARGISNULL(0) ? NULL : (AmqAggState *) PG_GETARG_POINTER(0);
	AmqAggState *b = PG_ARGISNULL(1) ? NULL : (AmqAggState *) PG_GETARG_POINTER(1);

	if (b == NULL)
		PG_RETURN_POINTER(a);
	if (b->mode == AGG_FILTER)
		filter_flush(b);
	else if (b->nruns > 0)
		merge_runs(b, aggcontext);
	if (a == NULL)
	{
		/* copy b into the aggregate context */
		a = state_new(aggcontext);
		*a = *b;
		a->hashes = NULL;
		a->nhashes = a->maxhashes = a->nsorted = 0;
		a->nruns = 0;
		a->runs = NULL;
		a->pending = NULL;
		a->npending = 0;
		a->filter = NULL;
		if (b->mode == AGG_FILTER)
		{
			struct varlena *v = MemoryContextAlloc(aggcontext, VARSIZE(b->filter));

			memcpy(v, b->filter, VARSIZE(b->filter));
			a->filter = v;
			a->f.payload = (uint8 *) VARDATA(v) + AMQ_HEADER_SIZE;
			PG_RETURN_POINTER(a);
		}
	}
	else if (a->mode != b->mode || a->kind != b->kind)
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
		if (a->nsorted == a->nhashes && b->nsorted == b->nhashes &&
			b->nruns == 0 && a->nruns < MAX_RUNS && held <= MAX_HASHES)
		{
			/*
			 * Keep b's hashes to merge with the others at the end.  b is a
			 * deserialized partial state, in the aggregate context until
			 * the final function, and not used again; the buffer of a is
			 * marked full so that no row is appended before the merge.
			 */
			if (a->runs == NULL)
				a->runs = MemoryContextAlloc(aggcontext, sizeof(AggRuns));
			a->runs->run[a->nruns] = b->hashes;
			a->runs->len[a->nruns++] = b->nhashes;
			a->maxhashes = a->nhashes;
		}
		else
		{
			buffer_reserve(a, b->nhashes, aggcontext);
			memcpy(a->hashes + a->nhashes, b->hashes, sizeof(uint64) * b->nhashes);
			a->nhashes += b->nhashes;
		}
	}
	PG_RETURN_POINTER(a);
}

/* The serialized state's layout is in core.h (amq_state_write_header). */
Datum
amq_agg_serialize(PG_FUNCTION_ARGS)
{
	AmqAggState *s = (AmqAggState *) PG_GETARG_POINTER(0);
	const AmqFilter *ki = (s->mode == AGG_FILTER) ? &s->f : &s->keyinfo;
	Size		body;
	bytea	   *out;
	uint8	   *p;
	AmqStateHeader hdr = {0};

	agg_context(fcinfo, "amq_agg_serialize");
	if (s->mode == AGG_BUFFER)
	{
		buffer_dedup(s);
		body = s->nhashes * sizeof(uint64);
	}
	else
	{
		filter_flush(s);
		/* the header (checksum) must be current for deserialize to verify */
		amq_write_header(&s->f, (uint8 *) VARDATA(s->filter));
		body = VARSIZE(s->filter) - VARHDRSZ;
	}
	out = (bytea *) palloc(VARHDRSZ + AMQ_STATE_HEADER + body);
	SET_VARSIZE(out, VARHDRSZ + AMQ_STATE_HEADER + body);
	p = (uint8 *) VARDATA(out);
	hdr.mode = (uint8) s->mode;
	hdr.kind = s->kind;
	hdr.key_family = ki->key_family;
	hdr.hash_scheme = ki->hash_scheme;
	hdr.key_type = ki->key_type;
	hdr.fpr = s->fpr;
	hdr.capacity = s->capacity;
	amq_state_write_header(&hdr, p);
	p += AMQ_STATE_HEADER;
	if (s->mode == AGG_BUFFER)
		for (Size i = 0; i < s->nhashes; i++)
			amq_store64(p + 8 * i, s->hashes[i]);
	else
		memcpy(p, VARDATA(s->filter), body);
	PG_RETURN_BYTEA_P(out);
}

/* Report a serialized state that failed validation. */
static void
bad_state(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid serialized amq_agg state"),
			 errdetail("%s", why)));
}

/*
 * Serialized states are validated like any other untrusted input, all of
 * it by amq_state_parse() (pure C, fuzzed as it ships).
 */
Datum
amq_agg_deserialize(PG_FUNCTION_ARGS)
{
	MemoryContext aggcontext = agg_context(fcinfo, "amq_agg_deserialize");
	bytea	   *in = PG_GETARG_BYTEA_PP(0);
	AmqStateHeader hdr;
	AmqFilter	f;
	AmqStatus	st;
	const char *why;
	AmqAggState *s;

	st = amq_state_parse((const uint8 *) VARDATA_ANY(in),
						 VARSIZE_ANY_EXHDR(in), &hdr, &f, &why);
	if (st != AMQ_OK)
	{
		if (why != NULL)
			bad_state(why);
		AmqFilterParseError(st, hdr.body, hdr.body_len,
							ERRCODE_INVALID_BINARY_REPRESENTATION);
	}

	s = state_new(aggcontext);
	s->mode = (AggMode) hdr.mode;
	s->kind = hdr.kind;
	s->keyinfo.key_family = hdr.key_family;
	s->keyinfo.hash_scheme = hdr.hash_scheme;
	s->keyinfo.key_type = hdr.key_type;
	s->fpr = hdr.fpr;
	s->capacity = hdr.capacity;
	if (s->mode == AGG_BUFFER)
	{
		bool		sorted = true;

		buffer_reserve(s, hdr.nhashes, aggcontext);
		for (Size i = 0; i < hdr.nhashes; i++)
		{
			s->hashes[i] = amq_load64(hdr.body + 8 * i);
			/* as written by serialize; but the bytes are not trusted */
			if (i > 0 && s->hashes[i] <= s->hashes[i - 1])
				sorted = false;
		}
		s->nhashes = hdr.nhashes;
		s->nsorted = sorted ? hdr.nhashes : 0;
	}
	else
	{
		MemoryContext old = MemoryContextSwitchTo(aggcontext);
		struct varlena *v = AmqFilterCopyBytes(hdr.body, hdr.body_len);

		MemoryContextSwitchTo(old);
		state_set_filter(s, v);
	}
	PG_RETURN_POINTER(s);
}
