/*-------------------------------------------------------------------------
 *
 * test_static.h
 *	  Checks shared by the unit tests of the static fingerprint kinds,
 *	  "xor" and "fuse" (test_static.c).
 *
 * Both kinds are built from a sorted, deduplicated hash array and store
 * one w-bit fingerprint (8, 16 or 32 bits) per slot, so everything but
 * their geometry is tested the same way.  Each check takes the kind's ops
 * table and a few hooks that say where its geometry differs; its name
 * starts with the kind's name (ops->name), as the per-kind copies did.
 * test_<kind>.c keeps the checks of its own geometry (plan sizes, check()
 * of the geometry params) and calls these for the rest.
 *
 *-------------------------------------------------------------------------
 */
#ifndef TEST_STATIC_H
#define TEST_STATIC_H

#include "unit.h"

/* where a static kind's geometry differs */
typedef struct StaticKindHooks
{
	/* the index of the param[] that holds the fingerprint width */
	int			width_param;

	/* the number of slots of a (checked) geometry */
	uint64_t	(*nslots) (const AmqFilter *f);

	/*
	 * Fill f's params and payload_len with the i-th edge geometry that
	 * check() must accept (smallest, largest segments or blocks, each
	 * width); false once i is past the last.
	 */
	bool		(*edge_geometry) (AmqFilter *f, size_t i);
} StaticKindHooks;

/* an allocator over malloc that counts, and fails from call fail_at on */
typedef struct StaticTestAlloc
{
	long		nalloc;
	long		nfree;
	long		fail_at;		/* 1-based; 0 = never fail */
} StaticTestAlloc;

extern void *static_test_alloc(void *ctx, size_t size);
extern void static_test_free(void *ctx, void *ptr);

/* the sorted hashes key_in(0..n-1) */
extern uint64_t *static_keys(uint64_t n);

/* plan for max(n, 1), build from hashes, with a counting allocator */
extern AmqStatus static_make(const AmqKindOps *ops, AmqFilter *f,
							 const uint64_t *hashes, uint64_t n, double fpr,
							 uint64_t seed, StaticTestAlloc *counts);
extern uint64_t static_count_missing(const AmqKindOps *ops, const AmqFilter *f,
									 const uint64_t *hashes, uint64_t n);
extern void static_test_span(const AmqKindOps *ops, uint64_t max_span);
extern uint64_t static_count_fp(const AmqKindOps *ops, const AmqFilter *f,
								uint64_t nprobe);

/* the checks */
extern void static_test_ops(const AmqKindOps *ops, int id, const char *name);
extern void static_test_plan(const AmqKindOps *ops, const StaticKindHooks *hk);
extern void static_test_check(const AmqKindOps *ops, const StaticKindHooks *hk,
							  const AmqFilter *valid);
extern void static_test_untrusted(const AmqKindOps *ops,
								  const StaticKindHooks *hk);
extern void static_test_accuracy(const AmqKindOps *ops,
								 const StaticKindHooks *hk, double fpr,
								 int width, uint64_t n, uint64_t nprobe);
extern void static_test_wide(const AmqKindOps *ops, const StaticKindHooks *hk);
extern void static_test_small(const AmqKindOps *ops);
extern void static_test_duplicates(const AmqKindOps *ops);
extern void static_test_determinism(const AmqKindOps *ops);
extern void static_test_nomem(const AmqKindOps *ops);
extern void static_test_stats_edges(const AmqKindOps *ops);
extern void static_test_big(const AmqKindOps *ops);
extern void static_test_version(const AmqKindOps *ops, uint32_t flag,
								const AmqKindOps *other, uint32_t other_flag);

#endif							/* TEST_STATIC_H */
