/*-------------------------------------------------------------------------
 *
 * amq_bridge.c
 *	  The SQL layer's bridge to the filter core: filters as varlenas and
 *	  back (varlena <-> AmqFilter), the core's status codes turned into
 *	  ereports with an errcode, detail and hint, and planning and building
 *	  filters under PostgreSQL's allocator.
 *
 * The core (core.h, kind_*.c) knows nothing of PostgreSQL: it returns a
 * status and takes a caller-supplied allocator.  Every SQL function, the
 * aggregates, the index and the join pre-filters make, read and check
 * filters through the helpers here, so each refusal is reported the same
 * way wherever it happens.  The type's own I/O is in amqfilter.c.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include <math.h>
#include <sys/mman.h>
#include <sys/statvfs.h>

#include "fmgr.h"
#include "storage/dsm_impl.h"
#include "utils/builtins.h"

#include "amqfilter.h"
#include "kind_blocked.h"

/* Allocate a zeroed filter varlena for f's geometry; point f at its payload. */
struct varlena *
AmqFilterAlloc(AmqFilter *f)
{
	Size		size = AMQ_VARSIZE(f->payload_len);
	struct varlena *v;

	if (f->payload_len > AMQ_MAX_PAYLOAD)
		elog(ERROR, "amqfilter payload of %llu bytes exceeds the limit",
			 (unsigned long long) f->payload_len);
	v = (struct varlena *) AmqAllocBig(CurrentMemoryContext, size, MCXT_ALLOC_ZERO);
	SET_VARSIZE(v, size);
	f->payload = (uint8 *) VARDATA(v) + AMQ_HEADER_SIZE;
	return v;
}

/*
 * Ask for transparent huge pages for the whole 2 MB pages of the "bytes"
 * at p, before they are first touched: first touching 80 MB in 4 kB pages
 * costs 20,000 page faults.  Only advice: where the kernel declines (or
 * offers huge pages to every process anyway), nothing changes.
 */
static void
advise_huge_pages(void *p, Size bytes)
{
#ifdef MADV_HUGEPAGE
	uintptr_t	lo = TYPEALIGN(AMQ_HUGE_PAGE_BYTES, (uintptr_t) p);
	uintptr_t	hi = TYPEALIGN_DOWN(AMQ_HUGE_PAGE_BYTES, (uintptr_t) p + bytes);

	if (hi > lo)
		(void) madvise((void *) lo, hi - lo, MADV_HUGEPAGE);
#endif
}

/*
 * MemoryContextAllocExtended(mcxt, bytes, MCXT_ALLOC_HUGE | flags), asking
 * for huge pages if it is large.  Such an allocation is a block of its own
 * (malloc's, usually mmap's), so the advice covers no other allocation.
 * A large block asked zeroed is zeroed after the advice, so that its first
 * touch already takes huge pages.
 */
void *
AmqAllocBig(MemoryContext mcxt, Size bytes, int flags)
{
	bool		big = (bytes >= 2 * AMQ_HUGE_PAGE_BYTES);
	bool		zero = big && (flags & MCXT_ALLOC_ZERO);
	void	   *p;

	p = MemoryContextAllocExtended(mcxt, bytes,
								   MCXT_ALLOC_HUGE | (zero ? flags & ~MCXT_ALLOC_ZERO : flags));
	if (p != NULL && big)
	{
		advise_huge_pages(p, bytes);
		if (zero)
			memset(p, 0, bytes);
	}
	return p;
}

/* After repalloc_huge of a block to "bytes": advise its new pages too. */
void
AmqAdviseBig(void *p, Size bytes)
{
	if (bytes >= 2 * AMQ_HUGE_PAGE_BYTES)
		advise_huge_pages(p, bytes);
}

/* Write the header (and its checksum) of a filter built in v. */
Datum
AmqFilterFinish(struct varlena *v, AmqFilter *f)
{
	Assert(f->payload == (uint8 *) VARDATA(v) + AMQ_HEADER_SIZE);
	amq_write_header(f, (uint8 *) VARDATA(v));
	PG_RETURN_POINTER(v);
}

/*
 * Report why amq_parse() refused len bytes (st is not AMQ_OK).
 * errcode_malformed is the SQLSTATE for structural damage: invalid text
 * representation for text input, invalid binary representation otherwise.
 */
void
AmqFilterParseError(AmqStatus st, const uint8 *bytes, Size len,
					int errcode_malformed)
{
	switch (st)
	{
		case AMQ_ERR_VERSION:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("unsupported amqfilter format version %d", bytes[4]),
					 errdetail("This build of bloomamq reads format versions %d to %d.",
							   AMQ_FORMAT_VERSION, AMQ_FORMAT_VERSION_LATEST),
					 errhint("Install a bloomamq release that knows the version.")));
			break;
		case AMQ_ERR_CHECKSUM:
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("amqfilter checksum mismatch"),
					 errdetail("The filter's bytes do not match the checksum in its header: it was corrupted or altered.")));
			break;
		default:
			ereport(ERROR,
					(errcode(errcode_malformed),
					 errmsg("invalid amqfilter"),
					 errdetail("%s: %zu bytes do not form a valid filter.",
							   len < AMQ_HEADER_SIZE ? "truncated header" :
							   amq_status_message(st), (size_t) len)));
	}
}

/*
 * Validate untrusted bytes as a filter and return them as a new varlena.
 * All validation is amq_parse(), pure C, so that the fuzz harnesses run
 * exactly what every input path runs.
 */
struct varlena *
AmqFilterFromBytes(const uint8 *bytes, Size len, int errcode_malformed)
{
	AmqFilter	f;
	AmqStatus	st;

	st = amq_parse(bytes, len, &f);
	if (st != AMQ_OK)
		AmqFilterParseError(st, bytes, len, errcode_malformed);
	return AmqFilterCopyBytes(bytes, len);
}

/* A new varlena holding len bytes of a filter that passed amq_parse(). */
struct varlena *
AmqFilterCopyBytes(const uint8 *bytes, Size len)
{
	struct varlena *v = (struct varlena *) palloc(VARHDRSZ + len);

	SET_VARSIZE(v, VARHDRSZ + len);
	memcpy(VARDATA(v), bytes, len);
	return v;
}

/* Decode the header of a detoasted, already validated filter. */
void
AmqFilterDecode(struct varlena *v, AmqFilter *f)
{
	amq_parse_trusted((const uint8 *) VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v), f);
}

/*
 * Detoast and decode argument argno; with copy, the result may be changed
 * in place (it is a fresh 4-byte-header copy).
 */
struct varlena *
AmqFilterGetArg(FunctionCallInfo fcinfo, int argno, AmqFilter *f, bool copy)
{
	Datum		d = PG_GETARG_DATUM(argno);
	struct varlena *v;

	v = copy ? PG_DETOAST_DATUM_COPY(d) : PG_DETOAST_DATUM(d);
	AmqFilterDecode(v, f);
	return v;
}

/* The ops of the kind named name, or an ERROR listing the kinds. */
const AmqKindOps *
AmqKindOpsByName(const char *name)
{
	const AmqKindOps *ops = amq_kind_by_name(name);

	if (ops == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown amqfilter kind \"%s\"", name),
				 errhint("Valid kinds are: %s, auto, parquet.", amq_kind_names(0))));
	return ops;
}

/*
 * The kind that a build asks for by name, with the two names that are not
 * kinds of their own:
 *
 * - "auto": when the build sees the complete key set (keyset: an aggregate
 *   without a capacity, an array), the static kind with the fewest bits per
 *   key at this fpr, fuse unless ribbon is at least 15% smaller (fuse probes
 *   are faster), and bloom below the rates their 32-bit fingerprints reach
 *   (2^-32); otherwise, when keys may be added later, blocked.
 * - "parquet": the blocked kind with Parquet's hashing and a power-of-two
 *   number of blocks, for amq_to_parquet (*parquet is set).
 */
const AmqKindOps *
AmqResolveKind(const char *name, bool keyset, double fpr, bool *parquet)
{
	*parquet = false;
	if (strcmp(name, "parquet") == 0)
	{
		*parquet = true;
		return &amq_blocked_ops;
	}
	if (strcmp(name, "auto") == 0)
	{
		const AmqKindOps *fuse = amq_kind_ops(AMQ_KIND_FUSE);
		const AmqKindOps *ribbon = amq_kind_ops(AMQ_KIND_RIBBON);
		AmqFilter	a;
		AmqFilter	b;
		bool		fuse_ok;
		bool		ribbon_ok;

		if (!keyset || fuse == NULL || ribbon == NULL)
			return &amq_blocked_ops;
		AmqCheckFpr(fpr);
		fuse_ok = amq_plan(&a, AMQ_KIND_FUSE, 1000000, fpr) == AMQ_OK;
		ribbon_ok = amq_plan(&b, AMQ_KIND_RIBBON, 1000000, fpr) == AMQ_OK;
		if (!fuse_ok && !ribbon_ok)
			return &amq_bloom_ops;
		if (!fuse_ok || !ribbon_ok)
			return fuse_ok ? fuse : ribbon;
		return ((double) b.payload_len <= 0.85 * (double) a.payload_len) ? ribbon : fuse;
	}
	return AmqKindOpsByName(name);
}

/* The ops of f's kind; an unknown kind cannot pass amq_parse(). */
const AmqKindOps *
AmqKindOpsOf(const AmqFilter *f)
{
	const AmqKindOps *ops = amq_kind_ops(f->kind);

	if (ops == NULL)
		elog(ERROR, "amqfilter of unknown kind %d", f->kind);
	return ops;
}

/*
 * The kind f was made as, by the name amq_new takes: "parquet" for a
 * blocked filter with Parquet's hashing (the one kind Parquet hashing goes
 * with), else its kind's.
 */
const char *
AmqFilterKindName(const AmqFilter *f)
{
	if (f->hash_scheme == AMQ_HASH_PARQUET)
		return "parquet";
	return AmqKindOpsOf(f)->name;
}

/* An ERROR unless fpr is a false-positive rate a filter can have. */
void
AmqCheckFpr(double fpr)
{
	if (amq_check_fpr(fpr) != AMQ_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("false-positive rate %g is out of range", fpr),
				 errdetail("The false-positive rate must be greater than 0 and at most 0.5.")));
}

/* A byte count for a message: "22853 MB" below 1 TB, then "12 TB", "3 PB" ... */
const char *
AmqSizeString(double bytes)
{
	static const char *const units[] = {"TB", "PB", "EB"};
	double		v = bytes / (1024.0 * 1024.0);
	int			u = 0;

	if (v < 1024.0 * 1024.0)
		return psprintf("%.0f MB", v);
	v /= 1024.0 * 1024.0;
	while (v >= 1024.0 && u < (int) lengthof(units) - 1)
	{
		v /= 1024.0;
		u++;
	}
	return psprintf("%.0f %s", v, units[u]);
}

/*
 * Plan an empty filter's geometry (with amq_plan_flags' flags), or report
 * why it cannot be made.
 */
void
AmqPlanOrError(AmqFilter *f, int kind, int64 capacity, double fpr,
			   uint32 flags)
{
	AmqStatus	st;
	AmqFilter	small;
	double		need = -1;

	AmqCheckFpr(fpr);
	if (capacity <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("capacity " INT64_FORMAT " is out of range", capacity),
				 errdetail("The capacity (number of distinct keys) must be positive.")));

	st = amq_plan_flags(f, kind, (uint64) capacity, fpr, flags);
	if (st == AMQ_ERR_TOO_LARGE)
	{
		AmqStatus	sst = AMQ_ERR_TOO_LARGE;

		/*
		 * Filter size grows linearly with capacity: scale the plan of the
		 * largest capacity 2^-shift times smaller that fits, else of one
		 * key.  Not even one fits when the rate alone asks for more than
		 * 1 GB; a fingerprint kind may not reach the rate at all.
		 */
		for (int shift = 10; shift < 63 && ((uint64) capacity >> shift) > 0; shift += 10)
		{
			sst = amq_plan_flags(&small, kind, (uint64) capacity >> shift, fpr, flags);
			if (sst == AMQ_OK)
			{
				need = ldexp((double) small.payload_len, shift);
				break;
			}
		}
		if (need < 0 && sst != AMQ_ERR_PARAM)
		{
			sst = amq_plan_flags(&small, kind, 1, fpr, flags);
			if (sst == AMQ_OK)
				need = (double) small.payload_len * (double) capacity;
		}
		if (sst == AMQ_ERR_PARAM)
			st = AMQ_ERR_PARAM;
	}
	if (st == AMQ_ERR_TOO_LARGE)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("amqfilter of kind %s for " INT64_FORMAT " keys at false-positive rate %g is too large",
						amq_kind_ops(kind)->name, capacity, fpr),
				 need > 0 ?
				 errdetail("It would need about %s; an amqfilter holds at most 1 GB.",
						   AmqSizeString(need)) :
				 errdetail("At this false-positive rate even one key would need more than 1 GB; an amqfilter holds at most 1 GB."),
				 need > 0 ?
				 errhint("Use a larger false-positive rate or fewer keys per filter, for example one filter per partition or per GROUP BY bucket.") :
				 errhint("Use a larger false-positive rate.")));
	if (st == AMQ_ERR_PARAM)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("amqfilter kind %s cannot reach false-positive rate %g",
						amq_kind_ops(kind)->name, fpr),
				 errdetail("Its widest fingerprints, 32 bits, cannot reach so low a rate."),
				 errhint("Use a larger false-positive rate, or kind bloom or blocked.")));
	if (st != AMQ_OK)
		elog(ERROR, "could not plan amqfilter: %s", amq_status_message(st));
}

/* Record the key family of the first key, or check a later key's. */
void
AmqSetFamily(AmqFilter *f, const AmqKeyHasher *h)
{
	if (f->key_family == AMQ_FAMILY_NONE)
	{
		f->key_family = h->family;
		f->hash_scheme = h->scheme;
		f->key_type = h->key_type;
	}
	else
		AmqCheckFamily(f, h);
}

/* The key family of dst combined with src (union, intersection). */
void
AmqMergeFamily(AmqFilter *dst, const AmqFilter *src)
{
	if (src->key_family == AMQ_FAMILY_NONE)
		return;
	if (dst->key_family == AMQ_FAMILY_NONE)
	{
		dst->key_family = src->key_family;
		dst->hash_scheme = src->hash_scheme;
		dst->key_type = src->key_type;
		return;
	}
	if (dst->key_family != src->key_family || dst->key_type != src->key_type)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot combine amqfilters holding keys of families %s and %s",
						AmqFamilyName(dst->key_family, dst->key_type),
						AmqFamilyName(src->key_family, src->key_type))));
}

/*
 * f op= g for two filters of one kind and geometry.  The key count of the
 * result is estimated from its payload, within the bounds the operation
 * implies.
 */
void
AmqMergeOrError(AmqFilter *f, const AmqFilter *g, AmqMergeOp op)
{
	const AmqKindOps *ops = AmqKindOpsOf(f);
	const char *what = (op == AMQ_MERGE_UNION) ? "union" : "intersection";
	uint32		cap = (op == AMQ_MERGE_UNION) ? AMQ_CAP_UNION : AMQ_CAP_INTERSECT;
	AmqStats	st;
	double		lo;
	double		hi;
	AmqStatus	rc;

	AmqRequireCap(ops, cap, what);
	if (f->kind != g->kind)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compute the %s of amqfilters of kinds %s and %s",
						what, ops->name, AmqKindOpsOf(g)->name),
				 errhint("Both filters must be of one kind; kinds that support %s: %s.",
						 what, amq_kind_names(cap))));
	if ((f->hash_scheme == AMQ_HASH_PARQUET) != (g->hash_scheme == AMQ_HASH_PARQUET))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compute the %s of a Parquet amqfilter and one of other hashing", what),
				 errdetail("Parquet filters hash keys with XXH64 of their Parquet encoding, other filters with XXH3."),
				 errhint("Build both with kind 'parquet', or neither.")));
	AmqMergeFamily(f, g);
	rc = ops->merge(f, g, op);
	if (rc == AMQ_ERR_MISMATCH)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot compute the %s of %s filters of different geometry",
						what, ops->name),
				 errdetail("The filters have %llu and %llu payload bytes, or different parameters or seeds.",
						   (unsigned long long) f->payload_len,
						   (unsigned long long) g->payload_len),
				 errhint("Build both with the same kind, capacity and false-positive rate: amq_new() with the same arguments, or amq_agg() with a capacity.")));
	if (rc != AMQ_OK)
		elog(ERROR, "amqfilter %s failed: %s", what, amq_status_message(rc));

	ops->stats(f, &st);
	if (op == AMQ_MERGE_UNION)
	{
		lo = Max(f->nkeys, g->nkeys);
		hi = (double) f->nkeys + (double) g->nkeys;
	}
	else
	{
		lo = 0;
		hi = Min(f->nkeys, g->nkeys);
	}
	/* exact only for a union with an empty filter */
	if (op == AMQ_MERGE_INTERSECT || (f->nkeys > 0 && g->nkeys > 0) ||
		(g->flags & AMQ_FLAG_NKEYS_ESTIMATED))
		f->flags |= AMQ_FLAG_NKEYS_ESTIMATED;
	f->nkeys = amq_nkeys_from_estimate(Min(Max(st.est_distinct, lo), hi));
}

/* Raise the standard error when a kind lacks a capability. */
void
AmqRequireCap(const AmqKindOps *ops, uint32 cap, const char *what)
{
	const char *able;

	if ((ops->caps & cap) == cap)
		return;
	able = amq_kind_names(cap);
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("amqfilter kind %s does not support %s", ops->name, what),
			 *able ? errhint("Kinds that support %s: %s.", what, able) :
			 errhint("No kind supports %s.", what)));
}

/* Report a full fixed-size filter. */
static void
filter_full(const AmqKindOps *ops)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("amqfilter of kind %s is full", ops->name),
			 errdetail("No key was lost: the filter is unchanged by the failed add."),
			 errhint("Create the filter with a larger capacity, or use kind scalable, which grows.")));
}

/*
 * Add a key hash to the dynamic filter f, which lives in *v (a plain
 * varlena that the caller owns; a kind that grows may reallocate it, in its
 * memory context).
 *
 * Kinds that can remove keys count every add, so that adding a key twice
 * and removing it once leaves it present.  For the others a key the filter
 * already reports present changes nothing and is not counted again.
 */
void
AmqAddHash(struct varlena **v, AmqFilter *f, const AmqKindOps *ops, uint64 hash)
{
	AmqStatus	st;

	if (!(ops->caps & AMQ_CAP_REMOVE) && ops->contains(f, hash))
		return;
	st = ops->add(f, hash);
	while (st == AMQ_ERR_FULL && (ops->caps & AMQ_CAP_GROW))
	{
		uint64		newlen;
		Size		oldsize = VARSIZE(*v);
		Size		newsize;

		if (ops->grow_plan(f, &newlen) != AMQ_OK)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("amqfilter of kind %s cannot grow past 1 GB", ops->name),
					 errdetail("It holds " UINT64_FORMAT " keys in %llu bytes.",
							   f->nkeys, (unsigned long long) f->payload_len),
					 errhint("Use a larger false-positive rate or fewer keys per filter.")));
		newsize = AMQ_VARSIZE(newlen);
		*v = (struct varlena *) repalloc_huge(*v, newsize);
		memset((char *) *v + oldsize, 0, newsize - oldsize);
		SET_VARSIZE(*v, newsize);
		f->payload = (uint8 *) VARDATA(*v) + AMQ_HEADER_SIZE;
		ops->grow(f, newlen);
		st = ops->add(f, hash);
	}
	if (st == AMQ_ERR_FULL)
		filter_full(ops);
	if (st != AMQ_OK)
		elog(ERROR, "could not add to amqfilter: %s", amq_status_message(st));
	amq_count_add(f);
}

/*
 * Remove a key hash from a filter whose kind can (counting, cuckoo).  A key
 * the filter does not report present is not there: nothing changes.
 */
void
AmqRemoveHash(AmqFilter *f, const AmqKindOps *ops, uint64 hash)
{
	AmqStatus	st;

	if (!ops->contains(f, hash))
		return;
	st = ops->remove(f, hash);
	if (st != AMQ_OK)
		elog(ERROR, "could not remove from amqfilter: %s", amq_status_message(st));
	if (f->nkeys > 0)
		f->nkeys--;
}

/*
 * Scratch memory for static builds: NULL on failure, never an ERROR.  No
 * huge pages: fuse and ribbon zero their scratch a chunk at a time just
 * before they use it, and faulting it in 2 MB at a time ahead of that
 * measured 10% (ribbon) and 15% (fuse) slower.  xor, whose accesses are
 * random across its scratch, gained a few percent from them while the
 * memory was warm, but where the kernel had just handed freed memory back
 * to a hypervisor its 2 MB faults cost far more: amq_agg(id, 0.01, 'xor')
 * over 10^7 rows, the second of two runs in a row and after 4 s idle,
 * medians of 5 alternating rounds, took 1,240 and 1,666 ms with them, 1,084
 * and 1,257 ms without.
 */
static void *
build_alloc(void *ctx, size_t size)
{
	return MemoryContextAllocExtended(CurrentMemoryContext, size,
									  MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
}

/* Free scratch memory of a static build. */
static void
build_free(void *ctx, void *ptr)
{
	pfree(ptr);
}

/*
 * How many bytes of dynamic shared memory new segments may still take:
 * with the POSIX implementation on Linux, what /dev/shm has free (a tmpfs,
 * 64 MB in a container by default), else SIZE_MAX.  A segment that does
 * not fit there fails its query with ENOSPC, an ERROR raised under locks
 * that cannot be caught and carried on from, so what can work without
 * shared memory (a slower hand-over, a smaller filter) asks first.  A file
 * system that cannot be asked is taken to have room.
 */
Size
AmqShmFreeBytes(void)
{
#ifdef __linux__
	struct statvfs sv;

	if (dynamic_shared_memory_type == DSM_IMPL_POSIX &&
		statvfs("/dev/shm", &sv) == 0)
		return (Size) Min((double) sv.f_bavail * (double) sv.f_frsize,
						  (double) (SIZE_MAX / 2));
#endif
	return SIZE_MAX;
}

/*
 * Can AmqBuildFromRuns build this kind?  Only where the build is an OR of
 * each key's bits (the blocked fill), so that a key held by two runs, or
 * the runs' order, changes no byte.
 */
bool
AmqBuildTakesRuns(int kind)
{
	return kind == AMQ_KIND_BLOCKED;
}

/* Plan f for capacity keys of keyinfo's key family and hash scheme. */
static void
plan_for_keys(AmqFilter *f, int kind, double fpr, const AmqFilter *keyinfo,
			  uint64 capacity, uint64 min_capacity)
{
	AmqPlanOrError(f, kind, capacity, fpr,
				   AmqBuildPlanFlags(kind, (int64) min_capacity));
	if (keyinfo->hash_scheme == AMQ_HASH_PARQUET)
		AmqPlanParquet(f);
	f->key_family = keyinfo->key_family;
	f->hash_scheme = keyinfo->hash_scheme;
	f->key_type = keyinfo->key_type;
}

/*
 * Build a filter sized exactly for n distinct hashes (or for min_capacity
 * keys, if more), given as nruns runs, each sorted ascending (sorted order
 * lets a dynamic kind touch its payload in order).  One run holds the n
 * distinct hashes; more runs, each of distinct hashes but sharing some, n
 * distinct in all, only for AmqBuildTakesRuns kinds, where n may also be a
 * guess (n_exact false) that the fill's own count of the union corrects.
 * keyinfo supplies the key family, hash scheme and key type.  Without a
 * min_capacity the keys are all there will be (AmqBuildPlanFlags); with
 * one, the caller expects more.
 */
static Datum
build_from_runs(int kind, double fpr, const AmqFilter *keyinfo,
				const uint64 *const *runs, const Size *lens, int nruns,
				Size n, bool n_exact, uint64 min_capacity)
{
	AmqFilter	f;
	const AmqKindOps *ops = amq_kind_ops(kind);
	struct varlena *v;
	AmqStatus	st = AMQ_OK;
	uint64		capacity = Max(Max(n, 1), min_capacity);

	Assert(n_exact || AmqBuildTakesRuns(kind));
	for (int attempt = 0;; attempt++)
	{
		plan_for_keys(&f, kind, fpr, keyinfo, capacity, min_capacity);
		v = AmqFilterAlloc(&f);

		if (ops->caps & AMQ_CAP_STATIC)
		{
			AmqAllocator alloc = {build_alloc, build_free, NULL};

			Assert(nruns == 1);
			st = ops->build(&f, runs[0], n, &alloc);
		}
		else if (kind == AMQ_KIND_BLOCKED && f.seed == 0)
		{
			/*
			 * Sorted runs fill the blocks in order, a segment at a time, and
			 * the fill counts the keys that repeat an earlier run: where the
			 * guess was wrong, the filter stays only if the count plans the
			 * same one.
			 */
			Size		count = 0;
			AmqFilter	g;

			for (int r = 0; r < nruns; r++)
				count += lens[r];
			count -= amq_blocked_fill_runs(f.payload, f.param[0], runs, lens,
										   nruns);
			if (count != n)
			{
				if (n_exact)
					elog(ERROR, "blocked fill of %d runs counted %zu distinct keys, not %zu",
						 nruns, (size_t) count, (size_t) n);
				n = count;
				capacity = Max(Max(n, 1), min_capacity);
				plan_for_keys(&g, kind, fpr, keyinfo, capacity, min_capacity);
				if (g.payload_len != f.payload_len || g.param[0] != f.param[0])
				{
					n_exact = true;
					pfree(v);
					continue;
				}
			}
			n_exact = true;
		}
		else
		{
			if (!n_exact)
				elog(ERROR, "a guessed key count of kind %s without its fill",
					 ops->name);
			for (int r = 0; r < nruns && st == AMQ_OK; r++)
				for (Size i = 0; i < lens[r] && st == AMQ_OK; i++)
				{
					amq_poll_every(i);
					st = ops->add(&f, runs[r][i]);
				}
		}

		/*
		 * A cuckoo table planned for n keys holds them but for bad luck:
		 * plan a quarter more room and build again.
		 */
		if (st != AMQ_ERR_FULL || attempt == 3)
			break;
		pfree(v);
		capacity += capacity / 4 + 1;
		st = AMQ_OK;
	}
	if (st == AMQ_ERR_NOMEM)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory building an amqfilter of kind %s for %zu keys",
						ops->name, (size_t) n)));
	if (st == AMQ_ERR_BUILD_FAILED)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("could not build an amqfilter of kind %s for %zu keys",
						ops->name, (size_t) n),
				 errdetail("Construction failed with every one of its deterministic seeds."),
				 errhint("Build it again with another kind, for example blocked.")));
	if (st == AMQ_ERR_FULL)
		filter_full(ops);
	if (st != AMQ_OK)
		elog(ERROR, "could not build amqfilter of kind %s: %s",
			 ops->name, amq_status_message(st));
	f.nkeys = n;
	return AmqFilterFinish(v, &f);
}

/*
 * Build a filter sized exactly for n distinct hashes, sorted ascending (see
 * build_from_runs).
 */
Datum
AmqBuildFromHashes(int kind, double fpr, const AmqFilter *keyinfo,
				   const uint64 *hashes, Size n, uint64 min_capacity)
{
	return build_from_runs(kind, fpr, keyinfo, &hashes, &n, 1, n, true,
						   min_capacity);
}

/*
 * Build from nruns (<= AMQ_UNION_MAX_RUNS) runs, each sorted ascending and
 * distinct, without merging them into one: an AmqBuildTakesRuns kind only.
 * Where the runs look disjoint (amq_union_guess), the fill counts their
 * union as it goes; else it is counted first.
 */
Datum
AmqBuildFromRuns(int kind, double fpr, const AmqFilter *keyinfo,
				 const uint64 *const *runs, const Size *lens, int nruns,
				 uint64 min_capacity)
{
	const uint64 *ends[AMQ_UNION_MAX_RUNS];
	bool		exact;
	Size		n;

	if (!AmqBuildTakesRuns(kind) || nruns < 0 || nruns > AMQ_UNION_MAX_RUNS)
		elog(ERROR, "cannot build an amqfilter of kind %d from %d runs",
			 kind, nruns);
	for (int r = 0; r < nruns; r++)
		ends[r] = runs[r] + lens[r];
	n = amq_union_guess(runs, ends, nruns, &exact);
	return build_from_runs(kind, fpr, keyinfo, runs, lens, nruns, n, exact,
						   min_capacity);
}
