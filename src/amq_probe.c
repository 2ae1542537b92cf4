/*-------------------------------------------------------------------------
 *
 * amq_probe.c
 *	  Membership probes: f @> key, key <@ f, amq_contains[_any|_all], and
 *	  amq_hash().
 *
 * A probe is the per-row hot path, so each call site keeps a cache in
 * fn_extra:
 *
 * - the key hasher, set up once for the argument's type;
 * - the decoded filter, kept while the filter argument is the same value.
 *   A filter that is a Const or a Param (an InitPlan result, a bind
 *   parameter) is detoasted and decoded once per query.  Identity is the
 *   TOAST pointer for an out-of-line value, and the address plus the header
 *   checksum for an in-memory one (the checksum covers every byte, so a
 *   different filter at a reused address is noticed);
 * - for a filter that changes row by row and lives out of line uncompressed
 *   (amqfilter's default storage is EXTERNAL), kinds that read one small
 *   span per probe (blocked) fetch just the header and that span as TOAST
 *   slices instead of detoasting megabytes per row.  A value seen twice in
 *   a row is detoasted whole and cached instead (a nested loop over one
 *   filter).
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/detoast.h"
#include "catalog/pg_type.h"
#include "nodes/primnodes.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "amqfilter.h"
#include "kind_blocked.h"

PG_FUNCTION_INFO_V1(amq_contains);
PG_FUNCTION_INFO_V1(amq_contained);
PG_FUNCTION_INFO_V1(amq_contains_any);
PG_FUNCTION_INFO_V1(amq_contains_all);
PG_FUNCTION_INFO_V1(amq_hash);

typedef struct AmqProbeCache
{
	AmqHashers	hashers;		/* for the key type */
	AmqKeyHasher *active;		/* the one the cached filter needs */
	bool		filter_per_query;	/* filter arg is a Const or Param */

	/* the cached filter, valid when have_filter */
	bool		have_filter;
	AmqFilter	f;
	const AmqKindOps *ops;
	struct varlena *owned;		/* detoasted copy in fn_mcxt, or NULL */
	Pointer		src;			/* in-memory identity: address ... */
	uint64		src_checksum;	/* ... and header checksum */
	bool		src_toasted;	/* out-of-line identity: */
	Oid			toastrelid;
	Oid			valueid;

	/* the last out-of-line value probed by slices */
	Oid			last_toastrelid;
	Oid			last_valueid;
} AmqProbeCache;

#define HEADER_CHECKSUM(p)	amq_load64((const uint8 *) (p) + 72)

/* Is argument argno the same in every row (a Const or a Param)? */
static bool
arg_is_per_query(FmgrInfo *flinfo, int argno)
{
	Node	   *expr = flinfo->fn_expr;
	List	   *args;
	Node	   *arg;

	if (expr == NULL)
		return false;
	if (IsA(expr, FuncExpr))
		args = ((FuncExpr *) expr)->args;
	else if (IsA(expr, OpExpr))
		args = ((OpExpr *) expr)->args;
	else
		return false;
	if (argno >= list_length(args))
		return false;
	arg = (Node *) list_nth(args, argno);
	while (IsA(arg, RelabelType))
		arg = (Node *) ((RelabelType *) arg)->arg;
	return IsA(arg, Const) || IsA(arg, Param);
}

/*
 * The call site's cache; keyarg is the key (or array) argument, whose type
 * (or element type) sets the hasher.
 */
static AmqProbeCache *
probe_cache(FunctionCallInfo fcinfo, int filterarg, int keyarg, bool array)
{
	AmqProbeCache *c = (AmqProbeCache *) fcinfo->flinfo->fn_extra;

	if (c == NULL)
	{
		Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, keyarg);

		if (array && OidIsValid(typid))
		{
			typid = get_base_element_type(typid);
			if (!OidIsValid(typid))
				elog(ERROR, "amqfilter array argument is not an array");
		}
		c = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(*c));
		AmqHasherInit(&c->hashers.canon, typid, PG_GET_COLLATION(),
					  fcinfo->flinfo->fn_mcxt);
		c->active = &c->hashers.canon;
		c->filter_per_query = arg_is_per_query(fcinfo->flinfo, filterarg);
		fcinfo->flinfo->fn_extra = c;
	}
	return c;
}

/* Drop the cached filter. */
static void
cache_forget(AmqProbeCache *c)
{
	if (c->owned)
		pfree(c->owned);
	c->owned = NULL;
	c->have_filter = false;
	c->src_toasted = false;
}

/* Decode v into the cache (v already detoasted and owned as decided). */
static void
cache_set(AmqProbeCache *c, struct varlena *v)
{
	AmqFilterDecode(v, &c->f);
	c->ops = AmqKindOpsOf(&c->f);
	c->active = AmqHasherFor(&c->hashers, &c->f);
	AmqCheckFamily(&c->f, c->active);
	c->have_filter = true;
}

/* Detoast an out-of-line value whole into fn_mcxt and cache it. */
static void
cache_toasted(FunctionCallInfo fcinfo, AmqProbeCache *c, Datum d,
			  struct varatt_external *tp)
{
	MemoryContext old;

	cache_forget(c);
	old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
	c->owned = PG_DETOAST_DATUM(d);
	MemoryContextSwitchTo(old);
	cache_set(c, c->owned);
	c->src_toasted = true;
	c->toastrelid = tp->va_toastrelid;
	c->valueid = tp->va_valueid;
}

/*
 * Probe hash against an uncompressed out-of-line filter by fetching only
 * its header and, for slice-capable kinds, the span the probe reads.
 * Returns false in *done when the kind cannot be probed by slices.
 */
static bool
probe_span_of(Datum d, const AmqFilter *f, const AmqKindOps *ops, uint64 hash)
{
	struct varlena *sv;
	uint64		off;
	uint32		len;
	bool		result;

	ops->probe_span(f, hash, &off, &len);
	sv = PG_DETOAST_DATUM_SLICE(d, AMQ_HEADER_SIZE + off, len);
	if (VARSIZE_ANY_EXHDR(sv) < len)
		elog(ERROR, "truncated amqfilter payload slice");
	result = ops->contains_span(f, hash, (const uint8 *) VARDATA_ANY(sv));
	pfree(sv);
	return result;
}

/* Probe a toasted filter reading only its header and the key's span. */
static bool
probe_by_slices(AmqProbeCache *c, Datum d, Datum key, bool *done)
{
	struct varlena *hv;
	AmqFilter	f;
	const AmqKindOps *ops;
	AmqKeyHasher *h;
	bool		result;

	hv = PG_DETOAST_DATUM_SLICE(d, 0, AMQ_HEADER_SIZE);
	if (VARSIZE_ANY_EXHDR(hv) < AMQ_HEADER_SIZE)
		elog(ERROR, "truncated amqfilter header slice");
	amq_parse_trusted((const uint8 *) VARDATA_ANY(hv), AMQ_HEADER_SIZE, &f);
	ops = AmqKindOpsOf(&f);
	if (!(ops->caps & AMQ_CAP_SLICE))
	{
		*done = false;
		return false;
	}
	h = AmqHasherFor(&c->hashers, &f);
	AmqCheckFamily(&f, h);
	result = probe_span_of(d, &f, ops, AmqHashDatum(h, key));
	if (!result)
	{
		uint64		alts[AMQ_MAX_ALT_HASHES];
		int			n = AmqAltHashes(h, key, alts);

		for (int i = 0; i < n && !result; i++)
			result = probe_span_of(d, &f, ops, alts[i]);
	}
	pfree(hv);
	*done = true;
	return result;
}

/* An in-memory, uncompressed value?  (A TOAST pointer has a short header.) */
static inline bool
is_plain(Pointer p)
{
	return !VARATT_IS_EXTENDED(p) || (VARATT_IS_SHORT(p) && !VARATT_IS_EXTERNAL(p));
}

/* Does the cache hold plain value p, decoded already? */
static inline bool
cache_holds_plain(const AmqProbeCache *c, Pointer p)
{
	return c->have_filter && !c->src_toasted && c->src == p &&
		c->src_checksum == HEADER_CHECKSUM(VARDATA_ANY(p));
}

/*
 * Make the cache hold filter d, unless the probe can be answered by TOAST
 * slices: then answer it in *result and return false.
 */
static bool
cache_filter(FunctionCallInfo fcinfo, AmqProbeCache *c, Datum d,
			 Datum key, bool *result)
{
	Pointer		p = DatumGetPointer(d);

	if (is_plain(p))
	{
		/* in memory, uncompressed: decoding is free, no copy needed */
		if (cache_holds_plain(c, p))
			return true;
		cache_forget(c);
		cache_set(c, (struct varlena *) p);
		c->src = p;
		c->src_checksum = HEADER_CHECKSUM(VARDATA_ANY(p));
		return true;
	}

	if (VARATT_IS_EXTERNAL_ONDISK(p))
	{
		struct varatt_external tp;

		VARATT_EXTERNAL_GET_POINTER(tp, p);
		if (c->have_filter && c->src_toasted &&
			c->toastrelid == tp.va_toastrelid && c->valueid == tp.va_valueid)
			return true;

		if (!c->filter_per_query && !VARATT_EXTERNAL_IS_COMPRESSED(tp) &&
			!(c->last_toastrelid == tp.va_toastrelid &&
			  c->last_valueid == tp.va_valueid))
		{
			bool		done;

			c->last_toastrelid = tp.va_toastrelid;
			c->last_valueid = tp.va_valueid;
			*result = probe_by_slices(c, d, key, &done);
			if (done)
				return false;
		}
		cache_toasted(fcinfo, c, d, &tp);
		return true;
	}

	/*
	 * Compressed inline or indirect.  A per-query argument keeps its address
	 * for the whole scan, so the address identifies it; anything else is
	 * detoasted for this call only.
	 */
	if (c->filter_per_query && c->have_filter && c->owned && c->src == p)
		return true;
	cache_forget(c);
	if (c->filter_per_query)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);

		c->owned = PG_DETOAST_DATUM(d);
		MemoryContextSwitchTo(old);
		cache_set(c, c->owned);
		c->src = p;
		return true;
	}
	cache_set(c, PG_DETOAST_DATUM(d));
	c->src = NULL;				/* never matches: decode again next call */
	return true;
}

/* Probe the cached filter for one hash. */
static inline bool
probe_hash(const AmqProbeCache *c, uint64 hash)
{
	const AmqFilter *f = &c->f;

	/* the default kind, inlined */
	if (f->kind == AMQ_KIND_BLOCKED && f->seed == 0)
		return amq_blocked_probe(amq_blocked_at(f->payload, f->param[0], hash),
								 (uint32) hash);
	return c->ops->contains(f, hash);
}

/* The key's other hashes, if its own missed (cold; see AmqAltHashes). */
static pg_noinline bool
probe_alternates(AmqProbeCache *c, Datum key)
{
	uint64		alts[AMQ_MAX_ALT_HASHES];
	int			n = AmqAltHashes(c->active, key, alts);

	for (int i = 0; i < n; i++)
		if (probe_hash(c, alts[i]))
			return true;
	return false;
}

/*
 * Probe the cached filter for key.  Inlined into the hot path, which takes
 * no local's address (that would add a stack-protector check per call).
 */
static pg_attribute_always_inline bool
probe_key(AmqProbeCache *c, Datum key)
{
	if (probe_hash(c, AmqHashDatum(c->active, key)))
		return true;
	/* Parquet's zeros and NaNs are several values; SQL's are one each */
	return unlikely(c->active->alternates != NULL) && probe_alternates(c, key);
}

/* contains_one when the filter is not the cached in-memory one (cold) */
static pg_noinline bool
contains_one_slow(FunctionCallInfo fcinfo, int filterarg, int keyarg)
{
	AmqProbeCache *c = (AmqProbeCache *) fcinfo->flinfo->fn_extra;
	Datum		key = PG_GETARG_DATUM(keyarg);
	bool		result;

	if (c == NULL)
		c = probe_cache(fcinfo, filterarg, keyarg, false);
	if (!cache_filter(fcinfo, c, PG_GETARG_DATUM(filterarg), key, &result))
		return result;
	return probe_key(c, key);
}

/*
 * The per-row path of f @> key and key <@ f: one call, the cache check,
 * the key's hash and one probe.
 */
static pg_attribute_always_inline bool
contains_one(FunctionCallInfo fcinfo, int filterarg, int keyarg)
{
	AmqProbeCache *c = (AmqProbeCache *) fcinfo->flinfo->fn_extra;
	Pointer		p = DatumGetPointer(PG_GETARG_DATUM(filterarg));

	/* the hot path: the in-memory filter of the previous call */
	if (likely(c != NULL && is_plain(p) && cache_holds_plain(c, p)))
		return probe_key(c, PG_GETARG_DATUM(keyarg));
	return contains_one_slow(fcinfo, filterarg, keyarg);
}

/* amq_contains(f, key), the operator f @> key. */
Datum
amq_contains(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(contains_one(fcinfo, 0, 1));
}

/* amq_contained(key, f), the operator key <@ f. */
Datum
amq_contained(PG_FUNCTION_ARGS)
{
	PG_RETURN_BOOL(contains_one(fcinfo, 1, 0));
}

/*
 * amq_contains_any / amq_contains_all: NULL elements are unknown, as for
 * "= ANY": any() is true if some element may be present, else NULL if a
 * NULL was seen, else false; all() is false if some element is absent,
 * else NULL if a NULL was seen, else true.
 */
static Datum
contains_array(FunctionCallInfo fcinfo, bool want_all)
{
	AmqProbeCache *c = probe_cache(fcinfo, 0, 1, true);
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(1);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	bool		saw_null = false;

	get_typlenbyvalalign(ARR_ELEMTYPE(arr), &typlen, &typbyval, &typalign);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), typlen, typbyval, typalign,
					  &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
	{
		bool		hit;

		if (nulls[i])
		{
			saw_null = true;
			continue;
		}
		if (cache_filter(fcinfo, c, PG_GETARG_DATUM(0), elems[i], &hit))
			hit = probe_key(c, elems[i]);
		/* else answered by slices */
		if (hit != want_all)
			PG_RETURN_BOOL(hit);
	}
	if (saw_null)
		PG_RETURN_NULL();
	PG_RETURN_BOOL(want_all);
}

/* amq_contains_any(f, keys[]): does f report any of the keys? */
Datum
amq_contains_any(PG_FUNCTION_ARGS)
{
	return contains_array(fcinfo, false);
}

/* amq_contains_all(f, keys[]): does f report every key? */
Datum
amq_contains_all(PG_FUNCTION_ARGS)
{
	return contains_array(fcinfo, true);
}

/* The canonical 64-bit hash of a key, as the filters store it. */
Datum
amq_hash(PG_FUNCTION_ARGS)
{
	AmqProbeCache *c = probe_cache(fcinfo, 0, 0, false);

	PG_RETURN_INT64((int64) AmqHashDatum(&c->hashers.canon, PG_GETARG_DATUM(0)));
}
