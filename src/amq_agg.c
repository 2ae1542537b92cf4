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
 *   sizes the filter exactly for the distinct keys at the end.  The buffer
 *   starts at a few entries, so a GROUP BY with many small groups stays
 *   small; past DEDUP_MIN entries a full buffer is deduplicated before it
 *   grows.  Sorting the hashes first also lets a blocked filter be filled
 *   block by block in address order, which makes the final build
 *   cache-friendly.  Partial states carry the hashes, so a static kind can
 *   be built from a parallel aggregate too.
 * - filter: with a capacity (or in amq_union_agg), the state is a dynamic
 *   filter of fixed size, filled key by key; partial states are combined by
 *   union.  Kinds without union (cuckoo, scalable) buffer hashes even with
 *   a capacity, so that partial states still combine; the capacity then
 *   sizes the final filter for keys added later.
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
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "amqfilter.h"

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

	/* AGG_FILTER: f points into filter */
	struct varlena *filter;
	AmqFilter	f;
} AmqAggState;

static pg_noinline Datum agg_trans_slow(FunctionCallInfo fcinfo,
										AmqAggState *s, AmqKeyHasher *h);

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

/* Sort and deduplicate the buffer in place. */
static void
buffer_dedup(AmqAggState *s)
{
	uint64	   *scratch;

	if (s->nhashes < 2)
		return;
	scratch = palloc_extended(sizeof(uint64) * s->nhashes, MCXT_ALLOC_HUGE);
	s->nhashes = amq_sort_unique(s->hashes, s->nhashes, scratch);
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
	if (s->hashes == NULL)
		s->hashes = MemoryContextAllocExtended(mcxt, sizeof(uint64) * newmax,
											   MCXT_ALLOC_HUGE);
	else
		s->hashes = repalloc_huge(s->hashes, sizeof(uint64) * newmax);
	s->maxhashes = newmax;
}

/* A new, empty aggregate state in mcxt. */
static AmqAggState *
state_new(MemoryContext mcxt)
{
	return MemoryContextAllocZero(mcxt, sizeof(AmqAggState));
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
			}
		}
	}

	if (PG_ARGISNULL(1))
		PG_RETURN_POINTER(s);

	hash = AmqHashDatum(s->h, PG_GETARG_DATUM(1));
	if (s->mode == AGG_FILTER)
		AmqAddHash(&s->filter, &s->f, amq_kind_ops(s->f.kind), hash);
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

	/* copy: the state may be finalized again */
	v = (struct varlena *) palloc(VARSIZE(s->filter));
	memcpy(v, s->filter, VARSIZE(s->filter));
	f = s->f;
	f.payload = (uint8 *) VARDATA(v) + AMQ_HEADER_SIZE;
	return AmqFilterFinish(v, &f);
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
	if (a == NULL)
	{
		/* copy b into the aggregate context */
		a = state_new(aggcontext);
		*a = *b;
		a->hashes = NULL;
		a->nhashes = a->maxhashes = 0;
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
		AmqMergeOrError(&a->f, &b->f, AMQ_MERGE_UNION);
	else if (b->nhashes > 0)
	{
		buffer_reserve(a, b->nhashes, aggcontext);
		memcpy(a->hashes + a->nhashes, b->hashes, sizeof(uint64) * b->nhashes);
		a->nhashes += b->nhashes;
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
		buffer_reserve(s, hdr.nhashes, aggcontext);
		for (Size i = 0; i < hdr.nhashes; i++)
			s->hashes[i] = amq_load64(hdr.body + 8 * i);
		s->nhashes = hdr.nhashes;
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
