/*-------------------------------------------------------------------------
 *
 * test_scalable.c
 *	  Unit tests of the "scalable" kind: growth through the grow protocol,
 *	  accuracy over many stages, the layout, check() and the size limit.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"
#include "kind_blocked.h"

#define OPS			(&amq_scalable_ops)

/*
 * Add one key hash the way the SQL layer does: on AMQ_ERR_FULL ask
 * grow_plan for the new length, extend the payload with zeros, grow and
 * retry.  Returns the status of the add, or of grow_plan if that failed.
 */
static AmqStatus
grow_add(AmqFilter *f, uint64_t hash)
{
	AmqStatus	st = OPS->add(f, hash);

	while (st == AMQ_ERR_FULL)
	{
		uint64_t	new_len;
		AmqStatus	g = OPS->grow_plan(f, &new_len);
		uint8_t    *p;

		if (g != AMQ_OK)
			return g;
		p = realloc(f->payload, new_len);
		if (p == NULL)
		{
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
		memset(p + f->payload_len, 0, new_len - f->payload_len);
		f->payload = p;
		OPS->grow(f, new_len);
		st = OPS->add(f, hash);
	}
	return st;
}

/* add key_in(from..to-1) through the grow protocol; number of failures */
static uint64_t
grow_range(AmqFilter *f, uint64_t from, uint64_t to)
{
	uint64_t	failed = 0;
	uint64_t	i;

	for (i = from; i < to; i++)
		failed += grow_add(f, key_in(i)) != AMQ_OK;
	return failed;
}

static void
test_scalable_ops(void)
{
	check(OPS->id == AMQ_KIND_SCALABLE && strcmp(OPS->name, "scalable") == 0 &&
		  OPS->caps == (AMQ_CAP_ADD | AMQ_CAP_GROW) &&
		  OPS->plan && OPS->check && OPS->add && OPS->contains &&
		  OPS->stats && OPS->grow_plan && OPS->grow &&
		  OPS->build == NULL && OPS->remove == NULL && OPS->merge == NULL &&
		  OPS->probe_span == NULL && OPS->contains_span == NULL,
		  "scalable ops table: id, name, caps, entries", NULL);
}

/*
 * Start at c0 = 1000 and add 10^6 keys through the grow protocol: ten
 * stages.  The rate must stay below the target (the stages' rates sum to
 * fpr (1 - 0.85^10), about 0.8 fpr) and not far below it.
 */
static void
test_scalable_accuracy(double fpr, uint64_t nneg, uint64_t seed)
{
	const uint64_t n = 1000000;
	AmqFilter	f;
	AmqStats	st;
	uint64_t	failed;
	uint64_t	missing;
	uint64_t	fp = 0;
	uint64_t	i;
	double		measured;
	double		ratio;
	double		err;
	char		name[256];

	check(make_filter(OPS, &f, 1000, fpr, seed) == AMQ_OK && f.param[0] == 1000 &&
		  f.param[1] == 1 && f.param[2] == 0,
		  "scalable: plan c0 = 1000", NULL);
	failed = grow_range(&f, 0, n);
	snprintf(name, sizeof(name),
			 "scalable fpr=%g seed=%llu: 10^6 adds through the grow protocol (%llu stages, %.2f MB)",
			 fpr, (unsigned long long) seed, (unsigned long long) f.param[1],
			 (double) f.payload_len / 1e6);
	check(failed == 0 && f.param[1] == 10 &&
		  f.param[2] == n - 1000 * ((UINT64_C(1) << 9) - 1),
		  name, "%llu failed, %llu stages, %llu in the last",
		  (unsigned long long) failed, (unsigned long long) f.param[1],
		  (unsigned long long) f.param[2]);
	snprintf(name, sizeof(name), "scalable fpr=%g seed=%llu: grown filter passes check()",
			 fpr, (unsigned long long) seed);
	check(OPS->check(&f) == AMQ_OK, name, NULL);

	missing = count_missing(OPS, &f, 0, n);
	snprintf(name, sizeof(name), "scalable fpr=%g seed=%llu: no false negatives",
			 fpr, (unsigned long long) seed);
	check(missing == 0, name, "%llu missing", (unsigned long long) missing);

	for (i = 0; i < nneg; i++)
		fp += OPS->contains(&f, key_out(i));
	measured = (double) fp / (double) nneg;
	ratio = measured / fpr;
	snprintf(name, sizeof(name),
			 "scalable fpr=%g seed=%llu: measured fpr %.6f (%.3fx target, %llu negatives), %.2f bits/key",
			 fpr, (unsigned long long) seed, measured, ratio,
			 (unsigned long long) nneg, (double) f.payload_len * 8.0 / (double) n);
	check(measured <= fpr && ratio >= 0.5 && ratio <= 1.3, name,
		  "outside 0.5x..1x");

	OPS->stats(&f, &st);
	err = st.est_distinct / (double) n - 1.0;
	snprintf(name, sizeof(name),
			 "scalable fpr=%g seed=%llu: stats est_distinct %.0f (%+.2f%%), est_fpr %.6f, fill %.3f, k %u",
			 fpr, (unsigned long long) seed, st.est_distinct, err * 100.0,
			 st.est_fpr, st.fill, st.k);
	check(fabs(err) <= 0.05 && st.est_fpr > measured * 0.7 &&
		  st.est_fpr < measured * 1.3 && st.fill > 0.0 && st.fill < 1.0 &&
		  st.k == 8 && st.fingerprint_bits == 0, name, NULL);

	free_filter(&f);
}

/*
 * The grow protocol step by step: the old payload stays a prefix, the
 * trailer holds the new stage's blocks, the params move on, and every key
 * added so far is still found.
 */
static void
test_scalable_growth(void)
{
	AmqFilter	f;
	uint8_t    *before = NULL;
	uint64_t	before_len = 0;
	uint64_t	i;
	uint64_t	growths = 0;
	bool		prefix_ok = true;
	bool		params_ok = true;
	bool		check_ok = true;
	bool		full_ok = true;
	uint64_t	missing;

	make_filter(OPS, &f, 10, 0.01, 5);
	for (i = 0; i < 40950; i++)		/* 10 (2^12 - 1): exactly 12 full stages */
	{
		AmqStatus	st = OPS->add(&f, key_in(i));
		uint64_t	new_len;
		uint64_t	cap = f.param[0] << (f.param[1] - 1);

		if (st == AMQ_OK)
			continue;
		if (st != AMQ_ERR_FULL || f.param[2] != cap)
		{
			full_ok = false;
			break;
		}
		/* a full filter stays full and unchanged until it grows */
		free(before);
		before = xcalloc(1, f.payload_len);
		memcpy(before, f.payload, f.payload_len);
		before_len = f.payload_len;
		if (OPS->add(&f, key_in(i)) != AMQ_ERR_FULL ||
			memcmp(before, f.payload, f.payload_len) != 0)
			full_ok = false;

		if (OPS->grow_plan(&f, &new_len) != AMQ_OK)
		{
			full_ok = false;
			break;
		}
		f.payload = realloc(f.payload, new_len);
		memset(f.payload + f.payload_len, 0, new_len - f.payload_len);
		OPS->grow(&f, new_len);
		growths++;
		if (f.payload_len != new_len || f.param[2] != 0 ||
			f.param[1] != growths + 1 ||
			amq_load64(f.payload + new_len - 32) * 32 + 32 != new_len - before_len)
			params_ok = false;
		if (OPS->add(&f, key_in(i)) != AMQ_OK || f.param[2] != 1)
			params_ok = false;
		if (memcmp(before, f.payload, before_len) != 0)
			prefix_ok = false;
		if (OPS->check(&f) != AMQ_OK)
			check_ok = false;
	}
	check(full_ok, "scalable growth: add is AMQ_ERR_FULL exactly when the last stage is full, and changes nothing",
		  "at key %llu", (unsigned long long) i);
	check(growths == 11 && f.param[1] == 12 && f.param[2] == 10 << 11,
		  "scalable growth: 40950 keys from c0 = 10 make 12 full stages",
		  "%llu growths, %llu stages, %llu in the last",
		  (unsigned long long) growths, (unsigned long long) f.param[1],
		  (unsigned long long) f.param[2]);
	check(params_ok, "scalable growth: grow sets the trailer, the stage count and the last-stage count",
		  NULL);
	check(prefix_ok, "scalable growth: the old payload stays a prefix", NULL);
	check(check_ok, "scalable growth: check() passes after every growth", NULL);
	missing = count_missing(OPS, &f, 0, 40950);
	check(missing == 0, "scalable growth: every key found after 11 growths",
		  "%llu missing", (unsigned long long) missing);

	/* a duplicate counts towards the stage's capacity like any add */
	{
		uint64_t	last = f.param[2];

		grow_add(&f, key_in(0));
		grow_add(&f, key_in(0));
		check(f.param[1] == 13 && f.param[2] == 2 && last == (10 << 11),
			  "scalable: a duplicate add is counted (it fills the stage)", NULL);
	}
	free(before);
	free_filter(&f);
}

/* The layout: stage 0 at offset 0, and each later stage's trailer. */
static void
test_scalable_layout(void)
{
	AmqFilter	f;
	AmqFilter	b;
	uint64_t	h = UINT64_C(0x0123456789abcdef);
	uint64_t	nb0;
	uint64_t	nb1;
	uint64_t	i;
	uint64_t	block;
	bool		only = true;

	make_filter(OPS, &f, 100, 0.01, 0);
	nb0 = f.payload_len / 32;

	/* stage 0 is exactly the blocked filter planned for (100, fpr 0.15%) */
	memset(&b, 0, sizeof(b));
	b.kind = AMQ_KIND_BLOCKED;
	b.fpr = 0.01 * (1.0 - 0.85);
	check(amq_blocked_ops.plan(&b, 100, b.fpr) == AMQ_OK && b.param[0] == nb0,
		  "scalable layout: stage 0 is the blocked plan for (c0, fpr (1 - 0.85))",
		  "%llu blocks, blocked plans %llu", (unsigned long long) nb0,
		  (unsigned long long) b.param[0]);

	OPS->add(&f, h);
	block = amq_blocked_block(h, nb0);
	for (i = 0; i < f.payload_len; i++)
		if (i / 32 != block && f.payload[i] != 0)
			only = false;
	check(only && amq_blocked_probe(f.payload + block * 32, (uint32_t) h),
		  "scalable layout: a key sets its pattern in one block of stage 0", NULL);

	/* fill stage 0 and grow: stage 1 is the blocked plan for (200, fpr 0.15% * 0.85) */
	grow_range(&f, 1000, 1100);
	grow_add(&f, h);
	b.fpr = 0.01 * (1.0 - 0.85) * 0.85;
	amq_blocked_ops.plan(&b, 200, b.fpr);
	nb1 = b.param[0];
	check(f.param[1] == 2 && f.payload_len == (nb0 + nb1 + 1) * 32 &&
		  amq_load64(f.payload + f.payload_len - 32) == nb1 &&
		  amq_load64(f.payload + f.payload_len - 24) == 0 &&
		  amq_load64(f.payload + f.payload_len - 16) == 0 &&
		  amq_load64(f.payload + f.payload_len - 8) == 0,
		  "scalable layout: stage 1 follows stage 0, then its 32-byte trailer of nblocks",
		  "len %llu, nb0 %llu, nb1 %llu", (unsigned long long) f.payload_len,
		  (unsigned long long) nb0, (unsigned long long) nb1);
	block = amq_blocked_block(h, nb1);
	check(amq_blocked_probe(f.payload + (nb0 + block) * 32, (uint32_t) h),
		  "scalable layout: the last stage takes the new adds", NULL);
	free_filter(&f);
}

/* A 3-stage filter (c0 = 100, 700 keys) and every way of corrupting it. */
static void
test_scalable_check(void)
{
	AmqFilter	f;
	AmqFilter	g;

	make_filter(OPS, &f, 100, 0.01, 0);
	grow_range(&f, 0, 700);
	check(f.param[0] == 100 && f.param[1] == 3 && f.param[2] == 400 &&
		  OPS->check(&f) == AMQ_OK,
		  "scalable check: a full 3-stage filter passes", NULL);

	g = f;
	g.param[0] = 0;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT, "scalable check: rejects c0 = 0", NULL);
	g = f;
	g.param[0] = 200;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects a c0 of another layout", NULL);
	g = f;
	g.param[0] = UINT64_MAX;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects c0 = 2^64 - 1 (capacity overflows)", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 62;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects c0 = 2^62 (2^64 in stage 2)", NULL);
	g = f;
	g.param[1] = 0;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects 0 stages", NULL);
	g = f;
	g.param[1] = 2;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects one stage too few", NULL);
	g = f;
	g.param[1] = 4;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects one stage too many", NULL);
	g = f;
	g.param[1] = 65;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects 65 stages", NULL);
	g = f;
	g.param[1] = (UINT64_C(1) << 32) | 3;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects a stage count that only looks valid in 32 bits",
		  NULL);
	g = f;
	g.param[2] = 401;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects more keys than the last stage holds", NULL);
	g = f;
	g.param[2] = UINT64_MAX;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects 2^64 - 1 keys in the last stage", NULL);
	g = f;
	g.param[2] = 0;
	check(OPS->check(&g) == AMQ_OK,
		  "scalable check: accepts an empty last stage", NULL);
	g = f;
	g.payload_len -= 32;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects payload_len one block short", NULL);
	g = f;
	g.payload_len += 32;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects payload_len one block long", NULL);
	g = f;
	g.payload_len -= 1;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects payload_len not a multiple of 32", NULL);
	g = f;
	g.payload_len = UINT64_C(1) << 62;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects payload beyond AMQ_MAX_PAYLOAD", NULL);
	g = f;
	g.fpr = 0.02;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects an fpr of another layout", NULL);
	g = f;
	g.fpr = nan("");
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable check: rejects fpr NaN", NULL);

	/* trailers are payload, left to the bounded walk: check() reads none */
	g = f;
	g.payload = NULL;
	check(OPS->check(&g) == AMQ_OK,
		  "scalable check: decides on the params alone, reading no payload", NULL);
	free_filter(&f);
}

/*
 * After check() no payload content may send a probe out of bounds: run
 * contains, add and stats over valid params with hostile trailers (under
 * the sanitizers this is what catches a stray read).
 */
static void
test_scalable_hostile(void)
{
	AmqFilter	f;
	uint64_t	trailers[] = {0, 1, 2, UINT64_MAX, UINT64_C(1) << 58, 0, 0};
	uint64_t	t;
	uint64_t	i;
	uint64_t	hits = 0;
	bool		finite = true;

	make_filter(OPS, &f, 100, 0.01, 0);
	grow_range(&f, 0, 1500);		/* 4 stages */
	check(OPS->check(&f) == AMQ_OK && f.param[1] == 4,
		  "scalable hostile: a 4-stage filter passes check()", NULL);

	/* the largest trailer that leaves stage 0 one block, and one more */
	trailers[5] = (f.payload_len - 64) / 32;
	trailers[6] = trailers[5] + 1;
	for (t = 0; t < 7 * 3 + 2; t++)
	{
		AmqFilter	g;
		AmqStats	st;

		copy_filter(&g, &f);
		if (t < 21)
		{
			/* one trailer in three places: the newest, and a guess at older ones */
			uint64_t	where = (t % 3 == 0) ? g.payload_len - 32 :
				(t % 3 == 1) ? g.payload_len / 2 / 32 * 32 : 32;

			amq_store64(g.payload + where, trailers[t / 3]);
		}
		else if (t == 21)
			memset(g.payload, 0xff, g.payload_len);
		else
			for (i = 0; i < g.payload_len; i++)
				g.payload[i] = (uint8_t) amq_mix64(i);
		for (i = 0; i < 2000; i++)
			hits += OPS->contains(&g, key_out(i));
		for (i = 0; i < 50; i++)
			OPS->add(&g, key_in(10000 + i));
		OPS->stats(&g, &st);
		if (!isfinite(st.fill) || !isfinite(st.est_fpr) ||
			!isfinite(st.est_distinct) || st.fill < 0.0 || st.fill > 1.0)
			finite = false;
		free_filter(&g);
	}
	check(finite, "scalable hostile: contains, add and stats stay in bounds on hostile payloads",
		  "%llu hits", (unsigned long long) hits);
	free_filter(&f);
}

static void
test_scalable_plan_edges(void)
{
	AmqFilter	f;
	AmqStatus	st;
	uint64_t	new_len;
	uint64_t	lo;
	uint64_t	hi;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_SCALABLE;
	f.fpr = 0.01;

	st = OPS->plan(&f, 0, 0.01);
	check(st == AMQ_OK && f.param[0] == 1 && f.param[1] == 1 &&
		  f.payload_len == 32 && OPS->check(&f) == AMQ_OK,
		  "scalable: plan(capacity 0) gives one block with c0 = 1", "status %d",
		  (int) st);
	check(OPS->plan(&f, UINT64_C(1) << 40, 0.01) == AMQ_ERR_TOO_LARGE,
		  "scalable: plan(2^40 keys) is AMQ_ERR_TOO_LARGE", NULL);
	check(OPS->plan(&f, UINT64_MAX, 1e-9) == AMQ_ERR_TOO_LARGE &&
		  OPS->plan(&f, UINT64_MAX, 0.01) == AMQ_ERR_TOO_LARGE,
		  "scalable: plan(2^64-1 keys) is AMQ_ERR_TOO_LARGE", NULL);
	check(OPS->plan(&f, 100, 0.0) == AMQ_ERR_PARAM &&
		  OPS->plan(&f, 100, 1.0) == AMQ_ERR_PARAM &&
		  OPS->plan(&f, 100, -0.5) == AMQ_ERR_PARAM &&
		  OPS->plan(&f, 100, nan("")) == AMQ_ERR_PARAM,
		  "scalable: plan rejects fpr 0, 1, -0.5 and NaN", NULL);

	/* capacity 1: every add past the first grows, and all are found */
	make_filter(OPS, &f, 1, 0.01, 0);
	check(grow_range(&f, 0, 1000) == 0 && f.param[1] == 10 &&
		  count_missing(OPS, &f, 0, 1000) == 0 && OPS->check(&f) == AMQ_OK,
		  "scalable: c0 = 1 grows to 10 stages for 1000 keys and finds them",
		  "%llu stages", (unsigned long long) f.param[1]);
	free_filter(&f);

	/*
	 * Near the limit: a first stage that fits where a second does not.
	 * grow_plan reads only the header, so no payload is allocated.
	 */
	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_SCALABLE;
	f.fpr = 0.01;
	st = OPS->plan(&f, 400000000, 0.01);
	check(st == AMQ_OK && f.payload_len <= AMQ_MAX_PAYLOAD &&
		  OPS->grow_plan(&f, &new_len) == AMQ_ERR_TOO_LARGE,
		  "scalable: grow_plan past 1 GB is AMQ_ERR_TOO_LARGE",
		  "status %d, stage 0 of %llu bytes", (int) st,
		  (unsigned long long) f.payload_len);

	/* the largest c0 whose second stage still fits: grow_plan says exactly */
	lo = 1;
	hi = 400000000;
	while (lo + 1 < hi)
	{
		uint64_t	mid = lo + (hi - lo) / 2;

		OPS->plan(&f, mid, 0.01);
		if (OPS->grow_plan(&f, &new_len) == AMQ_OK)
			lo = mid;
		else
			hi = mid;
	}
	OPS->plan(&f, lo, 0.01);
	st = OPS->grow_plan(&f, &new_len);
	check(st == AMQ_OK && new_len <= AMQ_MAX_PAYLOAD &&
		  new_len > AMQ_MAX_PAYLOAD - 64 * 1024 * 1024,
		  "scalable: grow_plan just below the limit succeeds within it",
		  "c0 %llu, new_len %llu", (unsigned long long) lo,
		  (unsigned long long) new_len);
	OPS->plan(&f, hi, 0.01);
	check(OPS->grow_plan(&f, &new_len) == AMQ_ERR_TOO_LARGE,
		  "scalable: grow_plan one key of c0 later is AMQ_ERR_TOO_LARGE", NULL);

	/* the stage cap */
	OPS->plan(&f, 1, 0.01);
	f.param[1] = 64;
	check(OPS->grow_plan(&f, &new_len) == AMQ_ERR_TOO_LARGE,
		  "scalable: grow_plan of a 65th stage is AMQ_ERR_TOO_LARGE", NULL);
}

static void
test_scalable_stats_edges(void)
{
	AmqFilter	f;
	AmqStats	st;

	make_filter(OPS, &f, 1000, 0.01, 0);
	OPS->stats(&f, &st);
	check(st.fill == 0.0 && st.est_fpr == 0.0 && st.est_distinct == 0.0 &&
		  st.k == 8 && st.fingerprint_bits == 0,
		  "scalable: stats of an empty filter are zero, k = 8", NULL);
	memset(f.payload, 0xff, f.payload_len);
	OPS->stats(&f, &st);
	check(st.fill == 1.0 && st.est_fpr == 1.0 && isfinite(st.est_distinct) &&
		  st.est_distinct > 1000.0,
		  "scalable: stats of an all-ones stage are finite",
		  "fill %g fpr %g distinct %g", st.fill, st.est_fpr, st.est_distinct);
	free_filter(&f);

	/* three stages, all zero but the trailers; then all ones, trailers too */
	make_filter(OPS, &f, 100, 0.01, 0);
	grow_range(&f, 0, 701);
	{
		uint64_t	end = f.payload_len;
		uint64_t	s;

		for (s = f.param[1]; s > 1; s--)
		{
			uint64_t	nb = amq_load64(f.payload + end - 32);

			memset(f.payload + end - 32 - nb * 32, 0, nb * 32);
			end -= 32 + nb * 32;
		}
		memset(f.payload, 0, end);
	}
	OPS->stats(&f, &st);
	check(f.param[1] == 4 && OPS->check(&f) == AMQ_OK && st.fill == 0.0 &&
		  st.est_fpr == 0.0 && st.est_distinct == 0.0,
		  "scalable: stats of 4 empty stages are zero",
		  "fill %g fpr %g distinct %g", st.fill, st.est_fpr, st.est_distinct);
	memset(f.payload, 0xff, f.payload_len);
	OPS->stats(&f, &st);
	check(st.fill == 1.0 && st.est_fpr == 1.0 && isfinite(st.est_distinct),
		  "scalable: stats of an all-ones 4-stage payload are finite",
		  "fill %g fpr %g distinct %g", st.fill, st.est_fpr, st.est_distinct);
	free_filter(&f);
}

static void
time_scalable(void)
{
	const uint64_t n = 10000000;
	AmqFilter	f;
	uint64_t	hits = 0;
	uint64_t	i;
	double		t_add;
	double		t_neg;
	double		t_pos;

	make_filter(OPS, &f, 1000, 0.01, 0);
	t_add = now_sec();
	grow_range(&f, 0, n);
	t_add = now_sec() - t_add;

	t_neg = now_sec();
	for (i = 0; i < n; i++)
		hits += OPS->contains(&f, key_out(i));
	t_neg = now_sec() - t_neg;

	t_pos = now_sec();
	for (i = 0; i < n; i++)
		hits += OPS->contains(&f, key_in(i));
	t_pos = now_sec() - t_pos;

	printf("# scalable at 10^7 keys, fpr 1%% (%.1f MB): add %.1f ns/key, "
		   "probe %.1f ns absent, %.1f ns present (c0 = 1000, %llu stages, "
		   "growth included in add, %.2f bits/key, %llu hits)\n",
		   (double) f.payload_len / 1e6, t_add * 1e9 / (double) n,
		   t_neg * 1e9 / (double) n, t_pos * 1e9 / (double) n,
		   (unsigned long long) f.param[1],
		   (double) f.payload_len * 8.0 / (double) n,
		   (unsigned long long) hits);
	free_filter(&f);
}

/*
 * A filter planned with AMQ_FLAG_SCALABLE_SIZED (built from exactly its
 * keys): stage 0 is the blocked plan at 0.95 fpr, later stages share the
 * remaining 5% geometrically, the total stays within fpr as it grows, and
 * the header is format version 2, which parse holds to the flag.
 */
static void
test_scalable_sized(void)
{
	const uint64_t n = 1000000;
	const uint64_t nneg = 2000000;
	AmqFilter	f;
	AmqFilter	b;
	AmqFilter	g;
	uint64_t	fp = 0;
	uint64_t	i;
	uint64_t	nb0;
	uint64_t	nb1;
	double		bpk;
	double		measured;
	uint8_t    *buf;
	size_t		len;

	check(amq_plan_flags(&f, AMQ_KIND_SCALABLE, n, 0.01,
						 AMQ_FLAG_SCALABLE_SIZED) == AMQ_OK &&
		  f.flags == AMQ_FLAG_SCALABLE_SIZED && f.param[0] == n,
		  "scalable sized: plan with the flag", NULL);
	f.payload = xcalloc(1, f.payload_len);
	nb0 = f.payload_len / 32;
	memset(&b, 0, sizeof(b));
	b.kind = AMQ_KIND_BLOCKED;
	b.fpr = 0.01 * 0.95;
	amq_blocked_ops.plan(&b, n, b.fpr);
	bpk = (double) f.payload_len * 8.0 / (double) n;
	check(b.param[0] == nb0 && bpk <= 11.0,
		  "scalable sized: stage 0 is the blocked plan at 0.95 fpr, at most 11 bits per key at 1%",
		  "%llu blocks (blocked plans %llu), %.2f bits per key",
		  (unsigned long long) nb0, (unsigned long long) b.param[0], bpk);

	check(grow_range(&f, 0, n) == 0 && f.param[1] == 1 &&
		  count_missing(OPS, &f, 0, n) == 0,
		  "scalable sized: n keys fill stage 0 alone, none missing", NULL);
	for (i = 0; i < nneg; i++)
		fp += OPS->contains(&f, key_out(i));
	measured = (double) fp / (double) nneg;
	check(measured <= 0.01 && measured >= 0.0095 * 0.8,
		  "scalable sized: one stage answers at about 0.95 fpr",
		  "measured %.5f", measured);

	/* grow to three stages: 7n keys; the rate stays within fpr */
	check(grow_range(&f, n, 7 * n) == 0 && f.param[1] == 3 &&
		  OPS->check(&f) == AMQ_OK && count_missing(OPS, &f, 0, 7 * n) == 0,
		  "scalable sized: 7n keys grow it to 3 stages, check() passes, none missing",
		  "%llu stages", (unsigned long long) f.param[1]);
	b.fpr = 0.01 * 0.05 * 0.15;
	amq_blocked_ops.plan(&b, 2 * n, b.fpr);
	nb1 = b.param[0];
	check(amq_load64(f.payload + nb0 * 32 + nb1 * 32) == nb1,
		  "scalable sized: stage 1 is the blocked plan at (1 - 0.95) fpr (1 - 0.85)",
		  NULL);
	fp = 0;
	for (i = 0; i < nneg; i++)
		fp += OPS->contains(&f, key_out(i));
	measured = (double) fp / (double) nneg;
	check(measured <= 0.01,
		  "scalable sized: three stages stay within the target rate",
		  "measured %.5f", measured);

	/* the same params without the flag are another layout */
	g = f;
	g.flags = 0;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "scalable sized: the layout does not pass check() without the flag", NULL);

	/* format version 2 goes with the flag, and only on scalable */
	buf = serialize_filter(&f, &len);
	check(buf[AMQ_OFF_VERSION] == 2 && amq_parse(buf, len, &g) == AMQ_OK &&
		  g.flags == AMQ_FLAG_SCALABLE_SIZED,
		  "scalable sized: written as format version 2, and parsed back", NULL);
	check(parse_as_version(buf, len, 1, &g) == AMQ_ERR_CORRUPT,
		  "scalable sized: version 1 with the flag is refused", NULL);
	check(parse_as_version(buf, len, 3, &g) == AMQ_ERR_VERSION,
		  "scalable sized: version 3 is an unknown version", NULL);
	free(buf);
	free_filter(&f);

	check(make_filter(OPS, &f, 100, 0.01, 0) == AMQ_OK, "scalable: plan", NULL);
	buf = serialize_filter(&f, &len);
	check(buf[AMQ_OFF_VERSION] == 1, "scalable unsized: still written as version 1", NULL);
	check(parse_as_version(buf, len, 2, &g) == AMQ_ERR_CORRUPT,
		  "scalable unsized: version 2 without the flag is refused", NULL);
	free(buf);
	free_filter(&f);

	check(amq_plan_flags(&f, AMQ_KIND_BLOCKED, 100, 0.01,
						 AMQ_FLAG_SCALABLE_SIZED) == AMQ_ERR_PARAM &&
		  amq_plan_flags(&f, AMQ_KIND_SCALABLE, 100, 0.01,
						 AMQ_FLAG_NKEYS_ESTIMATED) == AMQ_ERR_PARAM,
		  "amq_plan_flags: the sized flag only for scalable, no other flag", NULL);
	make_filter(&amq_blocked_ops, &f, 100, 0.01, 0);
	f.flags = AMQ_FLAG_SCALABLE_SIZED;
	buf = serialize_filter(&f, &len);
	check(amq_parse(buf, len, &g) == AMQ_ERR_CORRUPT,
		  "blocked with the scalable flag is refused", NULL);
	free(buf);
	free_filter(&f);
}

void
test_scalable(void)
{
	test_scalable_ops();
	test_scalable_accuracy(0.01, 1000000, 0);
	test_scalable_accuracy(0.001, 10000000, 0);
	test_scalable_accuracy(0.01, 1000000, UINT64_C(0x0123456789abcdef));
	test_scalable_growth();
	test_scalable_layout();
	test_scalable_sized();
	test_scalable_check();
	test_scalable_hostile();
	test_scalable_plan_edges();
	test_scalable_stats_edges();
	time_scalable();
}
