/*-------------------------------------------------------------------------
 *
 * test_counting.c
 *	  Unit tests of the "counting" kind (kind_counting.c).
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

static const AmqKindOps *const ops = &amq_counting_ops;

/* counter i: byte i / 2, low nibble first */
static unsigned
counter(const AmqFilter *f, uint64_t i)
{
	return (f->payload[i / 2] >> ((i % 2) * 4)) & 15;
}

/*
 * The key's k positions, computed here independently of the kind: double
 * hashing as in kind_bloom.c, multiply-shift onto [0, m).
 */
static void
positions(const AmqFilter *f, uint64_t hash, uint64_t *pos)
{
	uint64_t	h = f->seed ? amq_mix64(hash ^ f->seed) : hash;
	uint64_t	step = ((h >> 32) | (h << 32)) | 1;
	uint64_t	i;

	for (i = 0; i < f->param[1]; i++)
	{
		pos[i] = (uint64_t) (((unsigned __int128) h * f->param[0]) >> 64);
		h += step;
	}
}

static uint64_t
counter_sum(const AmqFilter *f)
{
	uint64_t	sum = 0;
	uint64_t	i;

	for (i = 0; i < f->param[0]; i++)
		sum += counter(f, i);
	return sum;
}

static void
counting_ops_table(void)
{
	check(ops->id == AMQ_KIND_COUNTING && strcmp(ops->name, "counting") == 0 &&
		  ops->caps == (AMQ_CAP_ADD | AMQ_CAP_REMOVE | AMQ_CAP_UNION |
						AMQ_CAP_INTERSECT) &&
		  ops->plan && ops->check && ops->add && ops->remove &&
		  ops->contains && ops->merge && ops->stats &&
		  !ops->build && !ops->probe_span && !ops->contains_span &&
		  !ops->grow_plan && !ops->grow,
		  "counting ops table: id, name, caps", NULL);
}

static void
counting_check_params(void)
{
	AmqFilter	f;
	AmqFilter	g;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_COUNTING;
	f.fpr = 0.01;
	check(ops->plan(&f, 12345, 0.01) == AMQ_OK && ops->check(&f) == AMQ_OK &&
		  f.payload_len == f.param[0] / 2 && f.param[0] % 16 == 0 &&
		  f.param[1] == 7 && f.param[2] == 0,
		  "counting check: planned params pass (k = 7 at 1%)", NULL);

	g = f;
	g.param[0] = 0;
	g.payload_len = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "counting check: rejects m = 0", NULL);
	g = f;
	g.param[0] = 8;
	g.payload_len = 4;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "counting check: rejects m < 16", NULL);
	g = f;
	g.param[0] = 1000;
	g.payload_len = 500;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "counting check: rejects m not a multiple of 16", NULL);
	g = f;
	g.payload_len += 8;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "counting check: rejects wrong payload_len", NULL);
	g = f;
	g.param[0] += 16;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "counting check: rejects m not matching payload_len", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 63;
	g.payload_len = UINT64_C(1) << 62;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "counting check: rejects payload over AMQ_MAX_PAYLOAD", NULL);
	g = f;
	g.param[1] = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "counting check: rejects k = 0", NULL);
	g = f;
	g.param[1] = 31;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "counting check: rejects k = 31", NULL);
	g = f;
	g.param[1] = UINT64_C(1) << 32 | 7;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "counting check: rejects k that truncates to a valid one", NULL);
	g = f;
	g.param[2] = 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "counting check: rejects nonzero param[2]", NULL);
	g = f;
	g.param[0] = 16;
	g.param[1] = 30;
	g.payload_len = 8;
	check(ops->check(&g) == AMQ_OK,
		  "counting check: accepts m = 16, k = 30", NULL);
}

static void
counting_layout(void)
{
	AmqFilter	f;
	uint64_t	pos[30];
	uint64_t	i;
	bool		ok = true;
	unsigned	expect[128];

	/* a small filter so that positions collide sometimes: count them all */
	make_filter(ops, &f, 10, 0.01, 5);
	for (i = 0; i < 200 && ok; i++)
	{
		uint64_t	j;

		memset(f.payload, 0, f.payload_len);
		memset(expect, 0, sizeof(expect));
		ops->add(&f, key_in(i));
		positions(&f, key_in(i), pos);
		for (j = 0; j < f.param[1]; j++)
			expect[pos[j]]++;
		for (j = 0; j < f.param[0]; j++)
			if (counter(&f, j) != expect[j])
				ok = false;
	}
	check(f.param[0] <= 128 && ok,
		  "counting layout: add increments the k double-hashing counters, "
		  "low nibble first", "key %llu", (unsigned long long) i - 1);
	free_filter(&f);

	/* byte order: counter 0 in the low nibble of byte 0 */
	make_filter(ops, &f, 1000, 0.01, 0);
	positions(&f, key_in(3), pos);
	ops->add(&f, key_in(3));
	check(f.payload[pos[0] / 2] & (pos[0] % 2 ? 0xf0 : 0x0f),
		  "counting layout: the first counter sits in its nibble", NULL);
	check(counter_sum(&f) == f.param[1],
		  "counting layout: one key adds k to the counter sum", NULL);

	/* extreme hashes stay in bounds and round-trip */
	memset(f.payload, 0, f.payload_len);
	ops->add(&f, 0);
	ops->add(&f, UINT64_MAX);
	check(ops->contains(&f, 0) && ops->contains(&f, UINT64_MAX),
		  "counting layout: extreme hashes round-trip", NULL);
	ops->remove(&f, 0);
	ops->remove(&f, UINT64_MAX);
	check(counter_sum(&f) == 0,
		  "counting layout: removing them leaves every counter zero", NULL);
	free_filter(&f);
}

/*
 * 10^6 keys, remove half: the rest is still found, and the filter is
 * exactly the one holding only the rest, so its fpr is that of 5*10^5
 * keys.
 */
static void
counting_remove_half(void)
{
	const uint64_t n = 1000000;
	const uint64_t nprobe = 1000000;
	AmqFilter	f;
	AmqFilter	half;
	AmqStats	st;
	uint64_t	missing;
	uint64_t	fp = 0;
	uint64_t	i;
	uint64_t	fp_full = 0;
	double		model;
	double		measured;
	bool		all_ok = true;
	char		name[200];

	make_filter(ops, &f, n, 0.01, 21);
	make_filter(ops, &half, n, 0.01, 21);
	add_range(ops, &f, 0, n);
	add_range(ops, &half, n / 2, n);
	for (i = 0; i < nprobe; i++)
		fp_full += ops->contains(&f, key_out(i));
	for (i = 0; i < n / 2; i++)
		all_ok &= (ops->remove(&f, key_in(i)) == AMQ_OK);
	missing = count_missing(ops, &f, n / 2, n);
	check(all_ok && missing == 0,
		  "counting: remove half of 10^6 keys, no false negatives on the rest",
		  "%llu missing", (unsigned long long) missing);
	check(memcmp(f.payload, half.payload, f.payload_len) == 0,
		  "counting: after removing half, the payload equals the filter of the rest",
		  NULL);

	for (i = 0; i < nprobe; i++)
		fp += ops->contains(&f, key_out(i));
	measured = (double) fp / (double) nprobe;
	model = pow(1.0 - exp(-(double) f.param[1] * (double) (n / 2) /
						  (double) f.param[0]), (double) f.param[1]);
	ops->stats(&f, &st);
	snprintf(name, sizeof(name),
			 "counting: after removal fpr %.5f (full %.5f) is that of 5*10^5 "
			 "keys (%.5f), est_distinct %.0f",
			 measured, (double) fp_full / (double) nprobe, model,
			 st.est_distinct);
	check(measured > 0.7 * model && measured < 1.3 * model &&
		  fabs(st.est_distinct / (double) (n / 2) - 1.0) < 0.05,
		  name, NULL);

	/* the removed keys are gone, apart from false positives */
	fp = 0;
	for (i = 0; i < n / 2; i++)
		fp += ops->contains(&f, key_in(i));
	snprintf(name, sizeof(name),
			 "counting: removed keys answer like absent ones (%.5f)",
			 (double) fp / (double) (n / 2));
	check((double) fp / (double) (n / 2) < 1.3 * model, name, NULL);

	/* and removing the rest empties the filter */
	for (i = n / 2; i < n; i++)
		ops->remove(&f, key_in(i));
	ops->stats(&f, &st);
	check(st.fill == 0.0 && counter_sum(&f) == 0,
		  "counting: removing every key leaves every counter zero", NULL);

	free_filter(&f);
	free_filter(&half);
}

static void
counting_multiplicity(void)
{
	AmqFilter	f;
	uint64_t	pos[30];
	uint64_t	i;
	uint64_t	found = 0;
	bool		stuck = true;
	uint64_t	before;

	make_filter(ops, &f, 1000, 0.01, 0);
	ops->add(&f, key_in(1));
	ops->add(&f, key_in(1));
	ops->remove(&f, key_in(1));
	check(ops->contains(&f, key_in(1)) && counter_sum(&f) == f.param[1],
		  "counting: a key added twice and removed once is still found", NULL);
	ops->remove(&f, key_in(1));
	check(!ops->contains(&f, key_in(1)) && counter_sum(&f) == 0,
		  "counting: ... and gone after the second remove", NULL);

	/* saturation: 20 adds, 20 removes; the counters stay at 15 */
	for (i = 0; i < 20; i++)
		ops->add(&f, key_in(2));
	positions(&f, key_in(2), pos);
	for (i = 0; i < f.param[1]; i++)
		stuck &= (counter(&f, pos[i]) == 15);
	check(stuck && counter_sum(&f) == 15 * f.param[1],
		  "counting: 20 adds saturate the key's counters at 15", NULL);
	for (i = 0; i < 20; i++)
	{
		ops->remove(&f, key_in(2));
		found += ops->contains(&f, key_in(2));
	}
	for (i = 0; i < f.param[1]; i++)
		stuck &= (counter(&f, pos[i]) == 15);
	check(found == 20 && stuck,
		  "counting: 20 removes never decrement a saturated counter; the key stays found",
		  NULL);

	/* removing absent keys changes no byte */
	{
		uint8_t    *copy = xcalloc(1, f.payload_len);
		uint64_t	tried = 0;

		add_range(ops, &f, 100, 200);
		memcpy(copy, f.payload, f.payload_len);
		for (i = 0; i < 10000; i++)
		{
			if (ops->contains(&f, key_out(i)))
				continue;		/* a false positive cannot be told apart */
			tried++;
			if (ops->remove(&f, key_out(i)) != AMQ_OK)
				tried = 0;
		}
		check(tried > 9000 && memcmp(copy, f.payload, f.payload_len) == 0,
			  "counting: remove of absent keys is AMQ_OK and changes no byte",
			  "%llu tried", (unsigned long long) tried);
		free(copy);
	}
	free_filter(&f);

	/* a saturated filter: contains everything, remove changes nothing */
	make_filter(ops, &f, 1000, 0.01, 0);
	memset(f.payload, 0xff, f.payload_len);
	before = counter_sum(&f);
	for (i = 0; i < 1000; i++)
		ops->remove(&f, key_out(i));
	check(ops->contains(&f, key_out(1)) && counter_sum(&f) == before,
		  "counting: a saturated filter stays saturated under remove", NULL);
	free_filter(&f);
}

static uint64_t rng_state = 777;

static uint64_t
rng(void)
{
	rng_state += UINT64_C(0x9e3779b97f4a7c15);
	return amq_mix64(rng_state);
}

static void
counting_merge(void)
{
	const uint64_t n = 100000;
	AmqFilter	a,
				b,
				u,
				x,
				all,
				other;
	AmqStatus	st;
	uint64_t	i;
	uint64_t	missing;
	uint64_t	extra = 0;
	bool		ok;

	/* a holds [0, n), b holds [n/2, 3n/2) */
	make_filter(ops, &a, 2 * n, 0.01, 7);
	make_filter(ops, &b, 2 * n, 0.01, 7);
	make_filter(ops, &all, 2 * n, 0.01, 7);
	add_range(ops, &a, 0, n);
	add_range(ops, &b, n / 2, 3 * n / 2);

	/* union = filter of the multiset: the shared keys twice */
	copy_filter(&u, &a);
	st = ops->merge(&u, &b, AMQ_MERGE_UNION);
	add_range(ops, &all, 0, 3 * n / 2);
	add_range(ops, &all, n / 2, n);
	check(st == AMQ_OK && memcmp(u.payload, all.payload, all.payload_len) == 0,
		  "counting: union equals the filter of all keys (shared ones twice)",
		  "status %d", (int) st);
	missing = count_missing(ops, &u, 0, 3 * n / 2);
	check(missing == 0, "counting: union contains every key of both",
		  "%llu missing", (unsigned long long) missing);
	/* removing b's keys from the union gives back a */
	for (i = n / 2; i < 3 * n / 2; i++)
		ops->remove(&u, key_in(i));
	check(memcmp(u.payload, a.payload, a.payload_len) == 0,
		  "counting: union minus b's keys is a again", NULL);

	/* intersection = per-counter minimum */
	copy_filter(&x, &a);
	st = ops->merge(&x, &b, AMQ_MERGE_INTERSECT);
	ok = (st == AMQ_OK);
	for (i = 0; i < a.param[0] && ok; i++)
	{
		unsigned	ca = counter(&a, i);
		unsigned	cb = counter(&b, i);

		ok = counter(&x, i) == (ca < cb ? ca : cb);
	}
	check(ok, "counting: intersection is the per-counter minimum", NULL);
	missing = count_missing(ops, &x, n / 2, n);
	check(missing == 0, "counting: intersection contains the common keys",
		  "%llu missing", (unsigned long long) missing);
	for (i = 0; i < n / 2; i++)
		extra += ops->contains(&x, key_in(i));
	check(extra < n / 2 / 5,
		  "counting: intersection drops most keys of one side", "%llu remain",
		  (unsigned long long) extra);

	/* the word-parallel merge against a nibble loop, on random bytes */
	ok = true;
	for (i = 0; i < a.payload_len; i++)
	{
		a.payload[i] = (uint8_t) rng();
		b.payload[i] = (uint8_t) rng();
	}
	copy_filter(&other, &a);
	ops->merge(&other, &b, AMQ_MERGE_UNION);
	for (i = 0; i < a.param[0] && ok; i++)
	{
		unsigned	s = counter(&a, i) + counter(&b, i);

		ok = counter(&other, i) == (s > 15 ? 15 : s);
	}
	memcpy(other.payload, a.payload, a.payload_len);
	ops->merge(&other, &b, AMQ_MERGE_INTERSECT);
	for (i = 0; i < a.param[0] && ok; i++)
	{
		unsigned	ca = counter(&a, i);
		unsigned	cb = counter(&b, i);

		ok = counter(&other, i) == (ca < cb ? ca : cb);
	}
	check(ok, "counting: saturating add and min agree with a nibble loop "
		  "on random counters", "counter %llu", (unsigned long long) i - 1);
	free_filter(&other);

	/* mismatches: geometry, k, seed, kind */
	make_filter(ops, &other, 3 * n, 0.01, 7);
	check(ops->merge(&u, &other, AMQ_MERGE_UNION) == AMQ_ERR_MISMATCH,
		  "counting: merge of different size is AMQ_ERR_MISMATCH", NULL);
	free_filter(&other);
	copy_filter(&other, &u);
	other.param[1]++;
	check(ops->merge(&u, &other, AMQ_MERGE_UNION) == AMQ_ERR_MISMATCH,
		  "counting: merge of different k is AMQ_ERR_MISMATCH", NULL);
	other.param[1]--;
	other.seed++;
	check(ops->merge(&u, &other, AMQ_MERGE_INTERSECT) == AMQ_ERR_MISMATCH,
		  "counting: merge of different seed is AMQ_ERR_MISMATCH", NULL);
	other.seed--;
	other.kind = AMQ_KIND_BLOOM;
	check(ops->merge(&u, &other, AMQ_MERGE_UNION) == AMQ_ERR_MISMATCH,
		  "counting: merge with another kind is AMQ_ERR_MISMATCH", NULL);
	other.kind = AMQ_KIND_COUNTING;
	check(ops->merge(&u, &other, AMQ_MERGE_UNION) == AMQ_OK,
		  "counting: merge of equal geometry is AMQ_OK", NULL);
	free_filter(&other);

	free_filter(&a);
	free_filter(&b);
	free_filter(&u);
	free_filter(&x);
	free_filter(&all);
}

static void
counting_stats_edges(void)
{
	AmqFilter	f;
	AmqStats	st;

	make_filter(ops, &f, 1000, 0.01, 0);
	ops->stats(&f, &st);
	check(st.fill == 0.0 && st.est_distinct == 0.0 && st.est_fpr == 0.0 &&
		  st.k == f.param[1] && st.fingerprint_bits == 0,
		  "counting: stats of an empty filter are zero, k = param[1]",
		  "fill %g distinct %g fpr %g", st.fill, st.est_distinct, st.est_fpr);

	memset(f.payload, 0xff, f.payload_len);
	ops->stats(&f, &st);
	check(st.fill == 1.0 && st.est_fpr == 1.0 && isfinite(st.est_distinct) &&
		  st.est_distinct > 1000.0,
		  "counting: stats of an all-0xff filter are finite",
		  "fill %g distinct %g fpr %g", st.fill, st.est_distinct, st.est_fpr);

	/* every counter 1 or every counter in the high nibble only */
	memset(f.payload, 0x11, f.payload_len);
	ops->stats(&f, &st);
	check(st.fill == 1.0 && isfinite(st.est_distinct),
		  "counting: all counters 1 is full", NULL);
	memset(f.payload, 0x80, f.payload_len);
	ops->stats(&f, &st);
	check(st.fill == 0.5, "counting: high nibbles alone are half full",
		  "fill %g", st.fill);
	free_filter(&f);
}

/* the filter holds 10^7 keys; 2 * 10^6 probes of each sort time it */
static void
counting_timing(void)
{
	const uint64_t n = 10000000;
	const uint64_t nprobe = 2000000;
	AmqFilter	f;
	uint64_t	hits = 0;
	uint64_t	i;
	double		t_add,
				t_neg,
				t_pos,
				t_rm;

	if (make_filter(ops, &f, n, 0.01, 0) != AMQ_OK)
		return;
	t_add = now_sec();
	add_range(ops, &f, 0, n);
	t_add = now_sec() - t_add;

	t_neg = now_sec();
	for (i = 0; i < nprobe; i++)
		hits += ops->contains(&f, key_out(i));
	t_neg = now_sec() - t_neg;

	t_pos = now_sec();
	for (i = 0; i < nprobe; i++)
		hits += ops->contains(&f, key_in(i * 5));
	t_pos = now_sec() - t_pos;

	t_rm = now_sec();
	for (i = 0; i < nprobe / 2; i++)
		ops->remove(&f, key_in(i * 7 + 3));
	t_rm = now_sec() - t_rm;

	printf("# counting at 10^7 keys, fpr 1%% (%.1f MB): add %.1f ns/key, "
		   "probe %.1f ns absent, %.1f ns present, remove %.1f ns (%llu hits)\n",
		   (double) f.payload_len / 1e6, t_add * 1e9 / (double) n,
		   t_neg * 1e9 / (double) nprobe, t_pos * 1e9 / (double) nprobe,
		   t_rm * 1e9 / (double) (nprobe / 2), (unsigned long long) hits);
	free_filter(&f);
}

void
test_counting(void)
{
	double		t0 = now_sec();

	counting_ops_table();
	test_accuracy(ops, 0.01, 0);
	test_accuracy(ops, 0.001, 0);
	test_accuracy(ops, 0.01, UINT64_C(0x0123456789abcdef));
	/* four bits per counter: four times bloom's 9.7 */
	test_bits_per_key(ops, 1000000, 4 * 9.7);
	test_bits_per_key(ops, 10000000, 4 * 9.7);
	test_plan_edges(ops);
	counting_check_params();
	counting_layout();
	counting_remove_half();
	counting_multiplicity();
	counting_merge();
	counting_stats_edges();
	counting_timing();
	printf("# counting tests took %.1f s\n", now_sec() - t0);
}
