/*-------------------------------------------------------------------------
 *
 * test_twobit.c
 *	  Unit tests of the "twobit" kind (kind_twobit.c).
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

static const AmqKindOps *const ops = &amq_twobit_ops;

static void
twobit_ops_table(void)
{
	check(ops->id == AMQ_KIND_TWOBIT && strcmp(ops->name, "twobit") == 0 &&
		  ops->caps == (AMQ_CAP_ADD | AMQ_CAP_UNION | AMQ_CAP_INTERSECT |
						AMQ_CAP_SLICE) &&
		  ops->plan && ops->check && ops->add && ops->contains &&
		  ops->merge && ops->stats && ops->probe_span && ops->contains_span &&
		  !ops->build && !ops->remove && !ops->grow_plan && !ops->grow,
		  "twobit ops table: id, name, caps", NULL);
}

static void
twobit_check_params(void)
{
	AmqFilter	f;
	AmqFilter	g;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_TWOBIT;
	f.fpr = 0.01;
	check(ops->plan(&f, 12345, 0.01) == AMQ_OK && ops->check(&f) == AMQ_OK &&
		  f.payload_len == 4 * f.param[0] && f.param[1] == 0 && f.param[2] == 0,
		  "twobit check: planned params pass", NULL);

	g = f;
	g.param[0] = 0;
	g.payload_len = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "twobit check: rejects W = 0", NULL);
	g = f;
	g.payload_len += 4;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "twobit check: rejects payload_len one word too long", NULL);
	g = f;
	g.payload_len -= 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "twobit check: rejects payload_len not 4 W", NULL);
	g = f;
	g.param[0] += 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "twobit check: rejects W not matching payload_len", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 62;
	g.payload_len = 0;			/* 4 W wraps to 0 */
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "twobit check: rejects W whose byte length wraps", NULL);
	g = f;
	g.param[0] = AMQ_MAX_PAYLOAD / 4 + 1;
	g.payload_len = 4 * g.param[0];
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "twobit check: rejects payload over AMQ_MAX_PAYLOAD", NULL);
	g = f;
	g.param[1] = 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "twobit check: rejects nonzero param[1]", NULL);
	g = f;
	g.param[2] = 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "twobit check: rejects nonzero param[2]", NULL);
	g = f;
	g.param[0] = 1;
	g.payload_len = 4;
	check(ops->check(&g) == AMQ_OK, "twobit check: accepts one word", NULL);
}

/* one key sets two distinct bits of one little-endian word, nothing else */
static void
twobit_layout(void)
{
	AmqFilter	f;
	uint64_t	i;
	uint64_t	bad_bits = 0;
	uint64_t	bad_word = 0;
	uint64_t	pairs[32][32];
	uint64_t	nkeys = 496 * 2000;
	double		chi2 = 0.0;
	int			a,
				b;

	make_filter(ops, &f, 1000, 0.01, 0);
	for (i = 0; i < 2000; i++)
	{
		uint64_t	h = key_in(i);
		uint64_t	word = amq_reduce(h, f.param[0]);
		uint64_t	ones = 0;
		uint64_t	j;

		memset(f.payload, 0, f.payload_len);
		ops->add(&f, h);
		for (j = 0; j < f.payload_len; j++)
		{
			ones += (uint64_t) __builtin_popcount(f.payload[j]);
			if (f.payload[j] != 0 && j / 4 != word)
				bad_word++;
		}
		if (ones != 2)
			bad_bits++;
	}
	check(bad_bits == 0, "twobit layout: every key sets exactly two bits",
		  "%llu keys did not", (unsigned long long) bad_bits);
	check(bad_word == 0,
		  "twobit layout: only the word amq_reduce(h, W) is touched",
		  "%llu stray bytes", (unsigned long long) bad_word);

	/* little-endian: bit b of the word is bit b % 8 of byte b / 8 */
	memset(f.payload, 0, f.payload_len);
	ops->add(&f, key_in(5));
	{
		uint64_t	word = amq_reduce(key_in(5), f.param[0]);
		const uint8_t *p = f.payload + 4 * word;
		uint32_t	v = (uint32_t) p[0] | (uint32_t) p[1] << 8 |
			(uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;

		check(__builtin_popcount(v) == 2 &&
			  (v & ((uint32_t) 1 << (key_in(5) & 31))) != 0,
			  "twobit layout: bit h & 31 of the little-endian word is set",
			  "word %08x", v);
	}

	/* extreme hashes stay in bounds and round-trip */
	memset(f.payload, 0, f.payload_len);
	ops->add(&f, 0);
	ops->add(&f, UINT64_MAX);
	check(ops->contains(&f, 0) && ops->contains(&f, UINT64_MAX),
		  "twobit layout: extreme hashes round-trip", NULL);
	free_filter(&f);

	/*
	 * The unordered pair of bits is uniform over the 496 pairs: chi-square
	 * with 495 degrees of freedom (mean 495, sd 31.5) below 650.
	 */
	memset(pairs, 0, sizeof(pairs));
	make_filter(ops, &f, 1, 0.01, 0);
	for (i = 0; i < nkeys; i++)
	{
		uint32_t	v;

		f.payload[0] = f.payload[1] = f.payload[2] = f.payload[3] = 0;
		ops->add(&f, key_in(i));
		v = amq_load32(f.payload);
		a = __builtin_ctz(v);
		b = 31 - __builtin_clz(v);
		pairs[a][b]++;
	}
	for (a = 0; a < 32; a++)
		for (b = a + 1; b < 32; b++)
		{
			double		d = (double) pairs[a][b] - 2000.0;

			chi2 += d * d / 2000.0;
		}
	check(chi2 < 650.0, "twobit layout: bit pairs are uniform over the 496 pairs",
		  "chi-square %.1f", chi2);
	free_filter(&f);
}

static void
twobit_span(void)
{
	AmqFilter	f;
	uint64_t	disagree = 0;
	uint64_t	badspan = 0;
	uint64_t	i;

	make_filter(ops, &f, 100000, 0.01, 99);
	add_range(ops, &f, 0, 100000);
	for (i = 0; i < 200000; i++)
	{
		uint64_t	h = (i & 1) ? key_in(i / 2) : key_out(i);
		uint64_t	off;
		uint32_t	len;
		uint8_t		span[4];

		ops->probe_span(&f, h, &off, &len);
		if (len != 4 || off % 4 != 0 || off + len > f.payload_len)
		{
			badspan++;
			continue;
		}
		/* a copy, as the SQL layer passes a fetched slice */
		memcpy(span, f.payload + off, 4);
		if (ops->contains_span(&f, h, span) != ops->contains(&f, h))
			disagree++;
	}
	check(badspan == 0, "twobit: probe_span gives a 4-byte word in bounds",
		  "%llu bad", (unsigned long long) badspan);
	check(disagree == 0, "twobit: contains_span agrees with contains",
		  "%llu disagree", (unsigned long long) disagree);
	free_filter(&f);
}

/* more small plan edges than test_plan_edges covers */
static void
twobit_plan_more(void)
{
	AmqFilter	f;
	AmqStatus	st;
	uint64_t	prev = 0;
	bool		monotone = true;
	uint64_t	n;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_TWOBIT;
	st = ops->plan(&f, 1, 0.01);
	check(st == AMQ_OK && f.param[0] == 1 && f.payload_len == 4,
		  "twobit plan: capacity 1 at 1% is one word (fpr 1/496)",
		  "W %llu", (unsigned long long) f.param[0]);
	st = ops->plan(&f, 1, 0.001);
	check(st == AMQ_OK && f.param[0] == 3,
		  "twobit plan: capacity 1 at 0.1% is three words (two give 1/992)",
		  "W %llu", (unsigned long long) f.param[0]);
	st = ops->plan(&f, 0, 0.5);
	check(st == AMQ_OK && f.param[0] == 1 && ops->check(&f) == AMQ_OK,
		  "twobit plan: capacity 0 at fpr 0.5 is one word", NULL);
	st = ops->plan(&f, 100, 1e-300);
	check(st == AMQ_ERR_TOO_LARGE, "twobit plan: fpr 1e-300 is TOO_LARGE",
		  "status %d", (int) st);
	st = ops->plan(&f, 100, -0.5);
	check(st == AMQ_ERR_PARAM, "twobit plan: negative fpr is PARAM", NULL);

	for (n = 1; n < 20000000 && monotone; n = n * 3 + 1)
	{
		if (ops->plan(&f, n, 0.01) != AMQ_OK || f.param[0] < prev)
			monotone = false;
		prev = f.param[0];
	}
	check(monotone, "twobit plan: W grows with capacity", NULL);
}

/*
 * The model of kind_twobit.c's header, 1 - 2 (1 - 1/16w)^n +
 * (1 - 61/496w)^n, with log1p so that large n keep their precision.
 */
static double
model_fpr(double n, double w)
{
	return 1.0 - 2.0 * exp(n * log1p(-1.0 / (16.0 * w))) +
		exp(n * log1p(-61.0 / (496.0 * w)));
}

/*
 * The model is exact for any load, small filters included: Monte Carlo of
 * 3-word filters holding 8 keys against it; and plan() picks the fewest
 * words that meet the target under it.
 */
static void
twobit_model(void)
{
	const int	trials = 20000;
	const int	probes = 50;
	AmqFilter	f;
	uint64_t	fp = 0;
	uint64_t	key = 0;
	double		expect = model_fpr(8.0, 3.0);
	double		measured;
	double		fprs[] = {0.3, 0.05, 0.01, 0.001, 1e-5};
	uint64_t	caps[] = {1, 7, 100, 5000, 1000000, 30000000};
	bool		minimal = true;
	int			t,
				i;
	char		name[200];

	make_filter(ops, &f, 1, 0.01, 0);
	free_filter(&f);
	f.param[0] = 3;
	f.payload_len = 12;
	f.payload = xcalloc(1, 12);
	for (t = 0; t < trials; t++)
	{
		memset(f.payload, 0, 12);
		for (i = 0; i < 8; i++)
			ops->add(&f, key_in(key++));
		for (i = 0; i < probes; i++)
			fp += ops->contains(&f, key_out((uint64_t) t * probes + i));
	}
	measured = (double) fp / (double) (trials * probes);
	snprintf(name, sizeof(name),
			 "twobit model: 8 keys in 3 words, measured fpr %.5f, model %.5f",
			 measured, expect);
	check(fabs(measured / expect - 1.0) < 0.03, name, NULL);
	free_filter(&f);

	for (t = 0; t < 5; t++)
		for (i = 0; i < 6; i++)
		{
			double		w;

			memset(&f, 0, sizeof(f));
			if (ops->plan(&f, caps[i], fprs[t]) != AMQ_OK)
			{
				/* too large only if even the largest filter misses */
				if (!(model_fpr((double) caps[i],
								(double) (AMQ_MAX_PAYLOAD / 4)) > fprs[t]))
					minimal = false;
				continue;
			}
			w = (double) f.param[0];
			if (!(model_fpr((double) caps[i], w) <= fprs[t] * (1.0 + 1e-7)) ||
				(w > 1.0 && !(model_fpr((double) caps[i], w - 1.0) >
							  fprs[t] * (1.0 - 1e-7))))
				minimal = false;
		}
	check(minimal, "twobit plan: W is the fewest words meeting the target",
		  NULL);
}

/*
 * A fixed budget: keys past the capacity are always taken and the rate
 * rises, and est_fpr still follows the measured rate at high fill.
 */
static void
twobit_overfill(void)
{
	const uint64_t n = 100000;
	const uint64_t nprobe = 1000000;
	AmqFilter	f;
	int			mult;
	char		name[200];

	make_filter(ops, &f, n, 0.01, 3);
	for (mult = 1; mult <= 8; mult *= 2)
	{
		uint64_t	fp = 0;
		uint64_t	i;
		uint64_t	missing;
		AmqStats	st;
		double		measured;
		bool		all_ok = true;

		for (i = (mult == 1 ? 0 : n * mult / 2); i < n * mult; i++)
			all_ok &= (ops->add(&f, key_in(i)) == AMQ_OK);
		missing = count_missing(ops, &f, 0, n * mult);
		for (i = 0; i < nprobe; i++)
			fp += ops->contains(&f, key_out(i));
		measured = (double) fp / (double) nprobe;
		ops->stats(&f, &st);
		snprintf(name, sizeof(name),
				 "twobit overfill x%d: adds succeed, no false negatives, "
				 "est_fpr %.4f vs measured %.4f, fill %.3f, est_distinct %.0f",
				 mult, st.est_fpr, measured, st.fill, st.est_distinct);
		check(all_ok && missing == 0 &&
			  st.est_fpr > measured * 0.9 && st.est_fpr < measured * 1.1 &&
			  fabs(st.est_distinct / (double) (n * mult) - 1.0) < 0.05 &&
			  (mult == 1 || measured > 0.01),
			  name, "%llu missing", (unsigned long long) missing);
	}
	free_filter(&f);
}

static void
twobit_stats_edges(void)
{
	AmqFilter	f;
	AmqStats	st;

	make_filter(ops, &f, 1000, 0.01, 0);
	ops->stats(&f, &st);
	check(st.fill == 0.0 && st.est_distinct == 0.0 && st.est_fpr == 0.0 &&
		  st.k == 2 && st.fingerprint_bits == 0,
		  "twobit: stats of an empty filter are zero, k = 2",
		  "fill %g distinct %g fpr %g k %u", st.fill, st.est_distinct,
		  st.est_fpr, st.k);

	memset(f.payload, 0xff, f.payload_len);
	ops->stats(&f, &st);
	check(st.fill == 1.0 && st.est_fpr == 1.0 && isfinite(st.est_distinct) &&
		  st.est_distinct > 1000.0,
		  "twobit: stats of a full filter are finite",
		  "fill %g distinct %g fpr %g", st.fill, st.est_distinct, st.est_fpr);
	check(ops->contains(&f, key_out(1)),
		  "twobit: a full filter contains everything", NULL);
	free_filter(&f);

	/* one word, one key: est_fpr is exactly 1/496 */
	make_filter(ops, &f, 1, 0.01, 0);
	ops->add(&f, key_in(0));
	ops->stats(&f, &st);
	check(fabs(st.est_fpr - 1.0 / 496.0) < 1e-12 &&
		  fabs(st.est_distinct - 1.0) < 1e-9 && st.fill == 2.0 / 32.0,
		  "twobit: stats of one key in one word",
		  "fpr %g distinct %g fill %g", st.est_fpr, st.est_distinct, st.fill);
	free_filter(&f);
}

static void
twobit_timing(void)
{
	const uint64_t n = 10000000;
	AmqFilter	f;
	uint64_t	hits = 0;
	uint64_t	i;
	uint32_t   *arr;
	uint64_t	nwords;
	uint64_t	sum = 0;
	double		t_add,
				t_neg,
				t_pos,
				t_miss;

	if (make_filter(ops, &f, n, 0.01, 0) != AMQ_OK)
		return;
	t_add = now_sec();
	add_range(ops, &f, 0, n);
	t_add = now_sec() - t_add;

	t_neg = now_sec();
	for (i = 0; i < n; i++)
		hits += ops->contains(&f, key_out(i));
	t_neg = now_sec() - t_neg;

	t_pos = now_sec();
	for (i = 0; i < n; i++)
		hits += ops->contains(&f, key_in(i));
	t_pos = now_sec() - t_pos;

	/* one random 4-byte load from an array of the same size, for scale */
	nwords = f.param[0];
	arr = xcalloc(nwords, 4);
	for (i = 0; i < nwords; i++)
		arr[i] = (uint32_t) i;
	t_miss = now_sec();
	for (i = 0; i < n; i++)
		sum += arr[amq_reduce(key_out(i), nwords)];
	t_miss = now_sec() - t_miss;

	printf("# twobit at 10^7 keys, fpr 1%% (%.1f MB): add %.1f ns/key, "
		   "probe %.1f ns absent, %.1f ns present (%llu hits)\n",
		   (double) f.payload_len / 1e6, t_add * 1e9 / (double) n,
		   t_neg * 1e9 / (double) n, t_pos * 1e9 / (double) n,
		   (unsigned long long) hits);
	printf("# twobit: a random load from the same %.1f MB costs %.1f ns "
		   "(absent probe = %.2f of it; %llu)\n",
		   (double) f.payload_len / 1e6, t_miss * 1e9 / (double) n,
		   t_neg / t_miss, (unsigned long long) (sum & 1));
	free(arr);
	free_filter(&f);
}

void
test_twobit(void)
{
	double		t0 = now_sec();

	twobit_ops_table();
	test_accuracy(ops, 0.01, 0);
	test_accuracy(ops, 0.001, 0);
	test_accuracy(ops, 0.01, UINT64_C(0x0123456789abcdef));
	test_accuracy(ops, 0.05, 11);
	test_bits_per_key(ops, 1000000, 22.5);
	test_bits_per_key(ops, 10000000, 22.5);
	test_plan_edges(ops);
	twobit_plan_more();
	twobit_model();
	twobit_check_params();
	twobit_layout();
	twobit_span();
	test_merge(ops);
	twobit_overfill();
	twobit_stats_edges();
	twobit_timing();
	printf("# twobit tests took %.1f s\n", now_sec() - t0);
}
