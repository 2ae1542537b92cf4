/*-------------------------------------------------------------------------
 *
 * test_xor.c
 *	  Unit tests of the "xor" kind (static 3-wise xor filter).
 *
 * Static kinds are built from a sorted, deduplicated hash array, so the
 * generic checks of unit.c written for add() do not apply except for
 * test_bits_per_key.  The checks xor shares with fuse are in
 * test_static.c; the ones of its own geometry (block length B = param[0],
 * 3B slots, param[2] reserved) are here.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_static.h"

/* ---- hooks ---- */

static uint64_t
xor_nslots(const AmqFilter *f)
{
	return 3 * f->param[0];
}

/* {B, w}: the smallest blocks, odd and large ones, each width */
static bool
xor_edge_geometry(AmqFilter *f, size_t i)
{
	static const uint64_t geo[][2] = {
		{1, 8}, {1, 32}, {2, 16}, {3, 8}, {1000, 8}, {12345, 32}, {65537, 16}
	};

	if (i >= sizeof(geo) / sizeof(geo[0]))
		return false;
	f->param[0] = geo[i][0];
	f->param[1] = geo[i][1];
	f->payload_len = 3 * geo[i][0] * geo[i][1] / 8;
	return true;
}

static const StaticKindHooks xor_hooks = {
	.width_param = 1,
	.nslots = xor_nslots,
	.edge_geometry = xor_edge_geometry,
};

/* ---- tests ---- */

/* the sizes of the xor geometry; the rest of plan is static_test_plan */
static void
test_xor_plan(void)
{
	const AmqKindOps *ops = &amq_xor_ops;
	AmqFilter	f;
	AmqStatus	st;
	bool		ok = true;
	size_t		i;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_XOR;
	f.fpr = 0.01;

	st = ops->plan(&f, 1, 0.01);
	check(st == AMQ_OK && f.payload_len == 33 && f.param[0] == 11 &&
		  ops->check(&f) == AMQ_OK,
		  "xor plan: capacity 1 gives 1.23 + 32 slots, three blocks of 11",
		  "status %d len %llu", (int) st, (unsigned long long) f.payload_len);

	/* the largest 8-bit filter: about 873M keys fit, 9*10^8 do not */
	st = ops->plan(&f, 850000000, 0.01);
	check(st == AMQ_OK && f.payload_len <= AMQ_MAX_PAYLOAD &&
		  ops->check(&f) == AMQ_OK,
		  "xor plan: 8.5*10^8 keys at 8 bits fits", "status %d", (int) st);
	check(ops->plan(&f, 900000000, 0.01) == AMQ_ERR_TOO_LARGE,
		  "xor plan: 9*10^8 keys at 8 bits is AMQ_ERR_TOO_LARGE", NULL);

	/* every capacity up to 10^5 (sampled) gives geometry check() accepts */
	for (i = 0; i <= 100000 && ok; i = i < 300 ? i + 1 : i * 21 / 20)
	{
		st = ops->plan(&f, i, 0.001);
		ok = st == AMQ_OK && ops->check(&f) == AMQ_OK &&
			3 * f.param[0] >= floor(1.23 * (double) (i > 0 ? i : 1)) + 32;
	}
	check(ok, "xor plan: capacities 0..10^5 pass check() with room for the keys",
		  "failed at %zu", i);
}

/* check() of the block params; width and payload_len: static_test_check */
static void
test_xor_check(void)
{
	const AmqKindOps *ops = &amq_xor_ops;
	AmqFilter	f;
	AmqFilter	g;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_XOR;
	f.param[0] = 100;
	f.param[1] = 16;
	f.payload_len = 3 * 100 * 2;
	static_test_check(ops, &xor_hooks, &f);

	g = f;
	g.param[0] = 0;
	g.payload_len = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "xor check: rejects block length 0", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 63;
	g.payload_len = 0;		/* 3 * 2^63 * 2 wraps to 0 */
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "xor check: rejects a block length whose size wraps", NULL);
	g = f;
	g.param[0] = (UINT64_C(1) << 62) / 3 + 1;
	g.payload_len = 3 * g.param[0] * 2;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "xor check: rejects a block length whose byte size wraps", NULL);
	g = f;
	g.param[0] = AMQ_MAX_PAYLOAD / 6 + 1;
	g.payload_len = 3 * g.param[0] * 2;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "xor check: rejects payload beyond AMQ_MAX_PAYLOAD", NULL);
	g = f;
	g.param[2] = 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "xor check: rejects nonzero param[2]", NULL);
}

void
test_xor(void)
{
	const AmqKindOps *ops = &amq_xor_ops;

	static_test_ops(ops, AMQ_KIND_XOR, "xor");
	static_test_plan(ops, &xor_hooks);
	test_xor_plan();
	test_xor_check();
	static_test_version(ops, AMQ_FLAG_XOR_BFS, &amq_fuse_ops, AMQ_FLAG_FUSE_BFS);
	static_test_untrusted(ops, &xor_hooks);
	/* 1.23 slots of 8 bits per key: 9.84 */
	test_bits_per_key(ops, 1000000, 9.9);
	test_bits_per_key(ops, 10000000, 9.9);
	static_test_small(ops);
	static_test_duplicates(ops);
	static_test_determinism(ops);
	static_test_nomem(ops);
	static_test_stats_edges(ops);

	/* 10^6 negatives: 3906 false positives expected at 2^-8 */
	static_test_accuracy(ops, &xor_hooks, 0.01, 8, 1000000, 1000000);

	/*
	 * 2^27 negatives: 2048 expected at 2^-16, so the 0.7x..1.3x band is
	 * over 13 standard deviations wide on each side.
	 */
	static_test_accuracy(ops, &xor_hooks, 0.001, 16, 1000000,
						 UINT64_C(1) << 27);
	static_test_wide(ops, &xor_hooks);
	static_test_big(ops);
}
