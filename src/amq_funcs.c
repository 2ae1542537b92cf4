/*-------------------------------------------------------------------------
 *
 * amq_funcs.c
 *	  SQL functions that make, change, combine and inspect filters.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "amqfilter.h"

PG_FUNCTION_INFO_V1(amq_new);
PG_FUNCTION_INFO_V1(amq_from_array);
PG_FUNCTION_INFO_V1(amq_add);
PG_FUNCTION_INFO_V1(amq_add_array);
PG_FUNCTION_INFO_V1(amq_remove);
PG_FUNCTION_INFO_V1(amq_remove_array);
PG_FUNCTION_INFO_V1(amq_union);
PG_FUNCTION_INFO_V1(amq_intersect);
PG_FUNCTION_INFO_V1(amq_info);
PG_FUNCTION_INFO_V1(amq_kind);
PG_FUNCTION_INFO_V1(amq_count);
PG_FUNCTION_INFO_V1(amq_fpr);
PG_FUNCTION_INFO_V1(amq_estimate_distinct);

/*
 * The key hasher of a call site, for argument keyarg (an array's elements),
 * to hash keys for filter f: Parquet hashing, of f's width, for Parquet
 * filters; the canonical hashes otherwise.  f may be NULL (canonical).
 */
static AmqKeyHasher *
call_hasher(FunctionCallInfo fcinfo, int keyarg, bool array, const AmqFilter *f)
{
	AmqHashers *hs = (AmqHashers *) fcinfo->flinfo->fn_extra;

	if (hs == NULL)
	{
		Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, keyarg);

		if (array && OidIsValid(typid))
			typid = get_base_element_type(typid);
		hs = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(*hs));
		AmqHasherInit(&hs->canon, typid, PG_GET_COLLATION(), fcinfo->flinfo->fn_mcxt);
		fcinfo->flinfo->fn_extra = hs;
	}
	return AmqHasherFor(hs, f);
}

/* Add (or remove) key to (from) f in *v. */
static void
change_key(struct varlena **v, AmqFilter *f, const AmqKindOps *ops,
		   AmqKeyHasher *h, Datum key, bool add)
{
	if (add)
		AmqAddHash(v, f, ops, AmqHashDatum(h, key));
	else
		AmqRemoveHash(f, ops, AmqHashDatum(h, key));
}

/*
 * The non-NULL elements of array argument argno hashed, sorted and
 * deduplicated; *n receives their number.
 */
static uint64 *
array_hashes(FunctionCallInfo fcinfo, int argno, AmqKeyHasher *h, Size *n)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(argno);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	uint64	   *hashes;
	uint64	   *scratch;
	Size		k = 0;

	get_typlenbyvalalign(ARR_ELEMTYPE(arr), &typlen, &typbyval, &typalign);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), typlen, typbyval, typalign,
					  &elems, &nulls, &nelems);
	hashes = palloc_extended(sizeof(uint64) * Max(nelems, 1), MCXT_ALLOC_HUGE);
	for (int i = 0; i < nelems; i++)
		if (!nulls[i])
			hashes[k++] = AmqHashDatum(h, elems[i]);
	scratch = palloc_extended(sizeof(uint64) * Max(k, 1), MCXT_ALLOC_HUGE);
	*n = amq_sort_unique(hashes, k, scratch);
	pfree(scratch);
	return hashes;
}

/* amq_new(kind, capacity, fpr): an empty filter. */
Datum
amq_new(PG_FUNCTION_ARGS)
{
	double		fpr = PG_GETARG_FLOAT8(2);
	bool		parquet;
	const AmqKindOps *ops = AmqResolveKind(text_to_cstring(PG_GETARG_TEXT_PP(0)),
										   false, fpr, &parquet);
	AmqFilter	f;
	struct varlena *v;

	AmqRequireCap(ops, AMQ_CAP_ADD, "adding keys after creation");
	AmqPlanOrError(&f, ops->id, PG_GETARG_INT64(1), fpr, 0);
	if (parquet)
		AmqPlanParquet(&f);
	v = AmqFilterAlloc(&f);
	return AmqFilterFinish(v, &f);
}

/* amq_from_array(keys, fpr, kind): a filter sized exactly for the keys. */
Datum
amq_from_array(PG_FUNCTION_ARGS)
{
	double		fpr = PG_GETARG_FLOAT8(1);
	bool		parquet;
	const AmqKindOps *ops = AmqResolveKind(text_to_cstring(PG_GETARG_TEXT_PP(2)),
										   true, fpr, &parquet);
	AmqFilter	keyinfo = {0};
	AmqKeyHasher *h;
	uint64	   *hashes;
	Size		n;

	AmqCheckFpr(fpr);
	keyinfo.hash_scheme = parquet ? AMQ_HASH_PARQUET : AMQ_HASH_XXH3;
	h = call_hasher(fcinfo, 0, true, &keyinfo);
	hashes = array_hashes(fcinfo, 0, h, &n);
	AmqSetFamily(&keyinfo, h);
	return AmqBuildFromHashes(ops->id, fpr, &keyinfo, hashes, n, 0);
}

/* amq_add(f, key) and amq_remove(f, key): f changed by one key. */
static Datum
change_one(FunctionCallInfo fcinfo, bool add)
{
	AmqFilter	f;
	struct varlena *v = AmqFilterGetArg(fcinfo, 0, &f, true);
	const AmqKindOps *ops = AmqKindOpsOf(&f);
	AmqKeyHasher *h = call_hasher(fcinfo, 1, false, &f);

	if (add)
		AmqRequireCap(ops, AMQ_CAP_ADD, "adding keys after creation");
	else
		AmqRequireCap(ops, AMQ_CAP_REMOVE, "removing keys");
	AmqSetFamily(&f, h);
	change_key(&v, &f, ops, h, PG_GETARG_DATUM(1), add);
	return AmqFilterFinish(v, &f);
}

/* amq_add(f, keys[]) and amq_remove(f, keys[]): every non-NULL element. */
static Datum
change_array(FunctionCallInfo fcinfo, bool add)
{
	AmqFilter	f;
	struct varlena *v = AmqFilterGetArg(fcinfo, 0, &f, true);
	const AmqKindOps *ops = AmqKindOpsOf(&f);
	AmqKeyHasher *h = call_hasher(fcinfo, 1, true, &f);
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(1);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;

	if (add)
		AmqRequireCap(ops, AMQ_CAP_ADD, "adding keys after creation");
	else
		AmqRequireCap(ops, AMQ_CAP_REMOVE, "removing keys");
	AmqSetFamily(&f, h);
	get_typlenbyvalalign(ARR_ELEMTYPE(arr), &typlen, &typbyval, &typalign);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), typlen, typbyval, typalign,
					  &elems, &nulls, &nelems);
	for (int i = 0; i < nelems; i++)
		if (!nulls[i])
			change_key(&v, &f, ops, h, elems[i], add);
	return AmqFilterFinish(v, &f);
}

/* amq_add(f, key): f with key added. */
Datum
amq_add(PG_FUNCTION_ARGS)
{
	return change_one(fcinfo, true);
}

/* amq_add(f, keys[]): f with every non-NULL key added. */
Datum
amq_add_array(PG_FUNCTION_ARGS)
{
	return change_array(fcinfo, true);
}

/* amq_remove(f, key): f with key removed. */
Datum
amq_remove(PG_FUNCTION_ARGS)
{
	return change_one(fcinfo, false);
}

/* amq_remove(f, keys[]): f with every non-NULL key removed. */
Datum
amq_remove_array(PG_FUNCTION_ARGS)
{
	return change_array(fcinfo, false);
}

/* f op g, returned as a new filter. */
static Datum
merge_filters(FunctionCallInfo fcinfo, AmqMergeOp op)
{
	AmqFilter	f;
	AmqFilter	g;
	struct varlena *v = AmqFilterGetArg(fcinfo, 0, &f, true);

	AmqFilterGetArg(fcinfo, 1, &g, false);
	AmqMergeOrError(&f, &g, op);
	return AmqFilterFinish(v, &f);
}

/* amq_union(f, g): the filter of the keys of either. */
Datum
amq_union(PG_FUNCTION_ARGS)
{
	return merge_filters(fcinfo, AMQ_MERGE_UNION);
}

/* amq_intersect(f, g): the filter of the keys of both (approximately). */
Datum
amq_intersect(PG_FUNCTION_ARGS)
{
	return merge_filters(fcinfo, AMQ_MERGE_INTERSECT);
}

/* The name amq_info gives a hash scheme. */
static const char *
scheme_name(int scheme)
{
	switch (scheme)
	{
		case AMQ_HASH_XXH3:
			return "xxh3";
		case AMQ_HASH_PARQUET:
			return "parquet";
		default:
			return "type";
	}
}

/* The name amq_info gives a key family. */
static const char *
family_key(int family)
{
	static const char *const names[] = {
		"none", "integer", "float", "numeric", "text", "bytea", "uuid",
		"date", "timestamp", "timestamptz", "boolean", "other"
	};

	return (family >= 0 && family <= AMQ_FAMILY_MAX) ? names[family] : "unknown";
}

/* JSON number, with non-finite values as null */
static void
append_num(StringInfo s, const char *key, double v)
{
	if (isfinite(v))
		appendStringInfo(s, ", \"%s\": %.6g", key, v);
	else
		appendStringInfo(s, ", \"%s\": null", key);
}

/* amq_info(f): a filter's header and estimates as jsonb. */
Datum
amq_info(PG_FUNCTION_ARGS)
{
	AmqFilter	f;
	struct varlena *v = AmqFilterGetArg(fcinfo, 0, &f, false);
	const AmqKindOps *ops = AmqKindOpsOf(&f);
	AmqStats	st;
	StringInfoData s;
	uint64		bytes = VARSIZE_ANY(v);

	ops->stats(&f, &st);
	initStringInfo(&s);
	appendStringInfo(&s, "{\"kind\": \"%s\", \"format_version\": %d, \"bytes\": " UINT64_FORMAT ", \"payload_bytes\": " UINT64_FORMAT ", \"keys\": " UINT64_FORMAT ", \"keys_estimated\": %s",
					 AmqFilterKindName(&f), amq_format_version(f.flags), bytes, f.payload_len,
					 f.nkeys, (f.flags & AMQ_FLAG_NKEYS_ESTIMATED) ? "true" : "false");
	append_num(&s, "bits_per_key", f.nkeys ? (double) bytes * 8.0 / f.nkeys : NAN);
	if (st.k)
		appendStringInfo(&s, ", \"k\": %u", st.k);
	if (st.fingerprint_bits)
		appendStringInfo(&s, ", \"fingerprint_bits\": %u", st.fingerprint_bits);
	append_num(&s, "fill_ratio", st.fill);
	append_num(&s, "target_fpr", f.fpr);
	append_num(&s, "estimated_fpr", st.est_fpr);
	append_num(&s, "estimated_distinct", st.est_distinct);
	appendStringInfo(&s, ", \"key_family\": \"%s\"", family_key(f.key_family));
	if (f.key_family == AMQ_FAMILY_OTHER)
		appendStringInfo(&s, ", \"key_type\": \"%s\"", format_type_be(f.key_type));
	if (f.hash_scheme == AMQ_HASH_PARQUET)
		appendStringInfo(&s, ", \"parquet_type\": \"%s\"", AmqParquetTypeName(&f));
	appendStringInfo(&s, ", \"hash_scheme\": \"%s\", \"portable\": %s, \"seed\": " UINT64_FORMAT "}",
					 scheme_name(f.hash_scheme),
					 f.hash_scheme != AMQ_HASH_TYPE ? "true" : "false", f.seed);
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data));
}

/* amq_kind(f): the kind f was made as, by the name amq_new takes. */
Datum
amq_kind(PG_FUNCTION_ARGS)
{
	AmqFilter	f;

	AmqFilterGetArg(fcinfo, 0, &f, false);
	PG_RETURN_TEXT_P(cstring_to_text(AmqFilterKindName(&f)));
}

/* amq_count(f): the number of keys added (exact or estimated). */
Datum
amq_count(PG_FUNCTION_ARGS)
{
	AmqFilter	f;

	AmqFilterGetArg(fcinfo, 0, &f, false);
	PG_RETURN_INT64((int64) f.nkeys);
}

/* amq_fpr(f): the false-positive rate estimated from f's contents. */
Datum
amq_fpr(PG_FUNCTION_ARGS)
{
	AmqFilter	f;
	AmqStats	st;

	AmqFilterGetArg(fcinfo, 0, &f, false);
	AmqKindOpsOf(&f)->stats(&f, &st);
	PG_RETURN_FLOAT8(st.est_fpr);
}

/* amq_estimate_distinct(f): distinct keys estimated from f's contents. */
Datum
amq_estimate_distinct(PG_FUNCTION_ARGS)
{
	AmqFilter	f;
	AmqStats	st;

	AmqFilterGetArg(fcinfo, 0, &f, false);
	AmqKindOpsOf(&f)->stats(&f, &st);
	PG_RETURN_FLOAT8(st.est_distinct);
}
