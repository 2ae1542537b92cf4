/*-------------------------------------------------------------------------
 *
 * test_kinds.c
 *	  Standalone tests of the filter kinds and of amq_sort_unique, without
 *	  a server.
 *
 * Every check prints "ok - <name>" or "not ok - <name> (details)"; lines
 * starting with "#" are information (timings).  The last line is
 * "N passed, N failed" and the exit status is 1 if anything failed.
 *
 * Only the kinds' ops tables, amq_sort_unique and core.h's inline helpers
 * are used, so this links with or without the rest of the core.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "unit.h"
#include "kind_blocked.h"

static void
test_check_bloom(void)
{
	const AmqKindOps *ops = &amq_bloom_ops;
	AmqFilter	f;
	AmqFilter	g;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_BLOOM;
	f.param[0] = 1024;
	f.param[1] = 7;
	f.payload_len = 128;
	check(ops->check(&f) == AMQ_OK, "bloom check: valid params pass", NULL);

	g = f;
	g.param[0] = 0;
	g.payload_len = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "bloom check: rejects m = 0", NULL);
	g = f;
	g.param[0] = 1000;
	g.payload_len = 125;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "bloom check: rejects m not a multiple of 64", NULL);
	g = f;
	g.param[0] = 32;
	g.payload_len = 4;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "bloom check: rejects m < 64", NULL);
	g = f;
	g.payload_len = 136;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "bloom check: rejects wrong payload_len", NULL);
	g = f;
	g.param[1] = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "bloom check: rejects k = 0", NULL);
	g = f;
	g.param[1] = 31;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "bloom check: rejects k = 31", NULL);
	g = f;
	g.param[1] = UINT64_C(1) << 32 | 7;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "bloom check: rejects k that only looks valid in 32 bits", NULL);
	g = f;
	g.param[2] = 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "bloom check: rejects nonzero param[2]", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 63;
	g.payload_len = UINT64_C(1) << 60;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "bloom check: rejects payload beyond AMQ_MAX_PAYLOAD", NULL);
}

static void
test_check_blocked(void)
{
	const AmqKindOps *ops = &amq_blocked_ops;
	AmqFilter	f;
	AmqFilter	g;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_BLOCKED;
	f.param[0] = 10;
	f.payload_len = 320;
	check(ops->check(&f) == AMQ_OK, "blocked check: valid params pass", NULL);

	g = f;
	g.param[0] = 0;
	g.payload_len = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "blocked check: rejects zero blocks", NULL);
	g = f;
	g.payload_len = 321;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "blocked check: rejects wrong payload_len", NULL);
	g = f;
	g.param[1] = 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "blocked check: rejects nonzero param[1]", NULL);
	g = f;
	g.param[2] = 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "blocked check: rejects nonzero param[2]", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 32;
	g.payload_len = g.param[0] * 32;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "blocked check: rejects 2^32 blocks", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 59;
	g.payload_len = 0;		/* 2^59 * 32 wraps to 0 */
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "blocked check: rejects a block count whose size wraps", NULL);
}

/* Parquet's salts, written out apart from kind_blocked.h's */
static const uint32_t parquet_salt[8] = {
	0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d,
	0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31
};

/* The bit that a key's low 32 bits set in word w of its block, by Parquet's spec */
static uint32_t
parquet_bit(uint32_t low, int w)
{
	return (low * parquet_salt[w]) >> 27;
}

/* The blocked layout is Parquet's; check it bit for bit. */
static void
test_blocked_layout(void)
{
	const AmqKindOps *ops = &amq_blocked_ops;
	AmqFilter	f;
	uint64_t	h = UINT64_C(0xdeadbeefcafef00d);
	uint64_t	block;
	uint8_t		expect[32];
	bool		other_zero = true;
	uint64_t	i;
	int			w;

	make_filter(ops, &f, 1000, 0.01, 0);
	ops->add(&f, h);
	block = ((h >> 32) * f.param[0]) >> 32;
	memset(expect, 0, sizeof(expect));
	for (w = 0; w < 8; w++)
	{
		uint32_t	bit = parquet_bit((uint32_t) h, w);

		/* little-endian word w, bit "bit" */
		expect[4 * w + bit / 8] |= (uint8_t) (1u << (bit % 8));
	}
	check(memcmp(f.payload + block * 32, expect, 32) == 0,
		  "blocked layout: one key sets Parquet's bits, little-endian", NULL);
	for (i = 0; i < f.payload_len; i++)
		if (i / 32 != block && f.payload[i] != 0)
			other_zero = false;
	check(other_zero, "blocked layout: only the key's block is touched", NULL);
	check(amq_blocked_block(h, f.param[0]) == block &&
		  amq_blocked_probe(f.payload + block * 32, (uint32_t) h),
		  "blocked layout: inline helpers agree", NULL);
	free_filter(&f);

	/* ascending hashes visit ascending blocks */
	{
		uint64_t	prev = 0;
		bool		monotone = true;

		for (i = 0; i < 100000; i++)
		{
			uint64_t	b = amq_blocked_block(i * UINT64_C(184467440737095), 12345);

			if (b < prev || b >= 12345)
				monotone = false;
			prev = b;
		}
		check(monotone, "blocked layout: block index is monotone in the hash",
			  NULL);
	}
}

static void
test_bloom_layout(void)
{
	const AmqKindOps *ops = &amq_bloom_ops;
	AmqFilter	f;
	uint64_t	ones = 0;
	uint64_t	i;

	make_filter(ops, &f, 1000, 0.01, 0);
	ops->add(&f, key_in(1));
	for (i = 0; i < f.payload_len; i++)
		ones += (uint64_t) __builtin_popcount(f.payload[i]);
	check(ones >= 1 && ones <= f.param[1],
		  "bloom layout: one key sets at most k bits", "%llu bits",
		  (unsigned long long) ones);

	/* the bit positions stay within m even for extreme hashes */
	memset(f.payload, 0, f.payload_len);
	ops->add(&f, 0);
	ops->add(&f, UINT64_MAX);
	check(ops->contains(&f, 0) && ops->contains(&f, UINT64_MAX),
		  "bloom layout: extreme hashes round-trip", NULL);
	free_filter(&f);
}

static void
test_span(void)
{
	const AmqKindOps *ops = &amq_blocked_ops;
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

		ops->probe_span(&f, h, &off, &len);
		if (len != 32 || off % 32 != 0 || off + len > f.payload_len)
		{
			badspan++;
			continue;
		}
		if (ops->contains_span(&f, h, f.payload + off) != ops->contains(&f, h))
			disagree++;
	}
	check(badspan == 0, "blocked: probe_span gives a 32-byte block in bounds",
		  "%llu bad", (unsigned long long) badspan);
	check(disagree == 0, "blocked: contains_span agrees with contains",
		  "%llu disagree", (unsigned long long) disagree);
	free_filter(&f);
}

static void
test_caps(void)
{
	check(amq_bloom_ops.id == AMQ_KIND_BLOOM &&
		  strcmp(amq_bloom_ops.name, "bloom") == 0 &&
		  amq_bloom_ops.caps == (AMQ_CAP_ADD | AMQ_CAP_UNION | AMQ_CAP_INTERSECT) &&
		  amq_bloom_ops.build == NULL && amq_bloom_ops.remove == NULL &&
		  amq_bloom_ops.probe_span == NULL,
		  "bloom ops table: id, name, caps", NULL);
	check(amq_blocked_ops.id == AMQ_KIND_BLOCKED &&
		  strcmp(amq_blocked_ops.name, "blocked") == 0 &&
		  amq_blocked_ops.caps == (AMQ_CAP_ADD | AMQ_CAP_UNION |
								   AMQ_CAP_INTERSECT | AMQ_CAP_SLICE) &&
		  amq_blocked_ops.build == NULL && amq_blocked_ops.remove == NULL &&
		  amq_blocked_ops.probe_span != NULL &&
		  amq_blocked_ops.contains_span != NULL,
		  "blocked ops table: id, name, caps", NULL);
}

/* ---- amq_sort_unique ---- */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t	x = *(const uint64_t *) a;
	uint64_t	y = *(const uint64_t *) b;

	return (x > y) - (x < y);
}

static size_t
reference_sort_unique(uint64_t *a, size_t n)
{
	size_t		w = 0;
	size_t		i;

	qsort(a, n, sizeof(uint64_t), cmp_u64);
	for (i = 0; i < n; i++)
		if (w == 0 || a[w - 1] != a[i])
			a[w++] = a[i];
	return w;
}

/* Sort a copy both ways and compare. */
static bool
sort_matches(const uint64_t *input, size_t n)
{
	uint64_t   *a = xcalloc(n + 1, sizeof(uint64_t));
	uint64_t   *b = xcalloc(n + 1, sizeof(uint64_t));
	uint64_t   *scratch = xcalloc(n + 1, sizeof(uint64_t));
	size_t		na;
	size_t		nb;
	bool		same;

	if (n > 0)
	{
		memcpy(a, input, n * sizeof(uint64_t));
		memcpy(b, input, n * sizeof(uint64_t));
	}
	na = amq_sort_unique(a, n, scratch);
	nb = reference_sort_unique(b, n);
	same = (na == nb) && (na == 0 || memcmp(a, b, na * sizeof(uint64_t)) == 0);
	free(a);
	free(b);
	free(scratch);
	return same;
}

static uint64_t rng_state = 12345;

static uint64_t
rng(void)
{
	rng_state += UINT64_C(0x9e3779b97f4a7c15);
	return amq_mix64(rng_state);
}

static void
test_sort(void)
{
	const size_t big = 1000000;
	uint64_t   *v = xcalloc(big, sizeof(uint64_t));
	uint64_t	pool[1000];
	size_t		i;
	size_t		n;
	bool		ok;
	uint64_t	one = 42;

	/* many duplicates: draws from 300000 distinct random values */
	for (i = 0; i < big; i++)
		v[i] = amq_mix64(rng() % 300000);
	check(sort_matches(v, big), "sort_unique: 10^6 random keys with duplicates",
		  NULL);

	for (i = 0; i < big; i++)
		v[i] = rng();
	check(sort_matches(v, big), "sort_unique: 10^6 distinct random keys", NULL);

	check(amq_sort_unique(NULL, 0, NULL) == 0, "sort_unique: n = 0", NULL);
	check(amq_sort_unique(&one, 1, NULL) == 1 && one == 42,
		  "sort_unique: n = 1", NULL);

	for (i = 0; i < big; i++)
		v[i] = UINT64_C(0x5555aaaa5555aaaa);
	{
		uint64_t   *scratch = xcalloc(big, sizeof(uint64_t));

		n = amq_sort_unique(v, big, scratch);
		check(n == 1 && v[0] == UINT64_C(0x5555aaaa5555aaaa),
			  "sort_unique: all equal", "n = %zu", n);
		free(scratch);
	}

	for (i = 0; i < big; i++)
		v[i] = i * 3;
	check(sort_matches(v, big), "sort_unique: already sorted small integers",
		  NULL);

	for (i = 0; i < big; i++)
		v[i] = UINT64_MAX - i / 2;
	check(sort_matches(v, big), "sort_unique: reverse sorted, pairs equal",
		  NULL);

	for (i = 0; i < big; i++)
		v[i] = (rng() & UINT64_C(0xff000000000000ff)) | UINT64_C(0x0012340000000000);
	check(sort_matches(v, big), "sort_unique: keys differing at both ends only",
		  NULL);

	/* half the keys in one top-byte bucket, too big to sort in cache */
	for (i = 0; i < big; i++)
	{
		uint64_t	r = rng();

		v[i] = (r & 1) ? r >> 8 : r;
	}
	check(sort_matches(v, big), "sort_unique: one oversized top-level bucket",
		  NULL);

	for (i = 0; i < big; i++)
		v[i] = (i % 7 == 0) ? 0 : (i % 7 == 1) ? UINT64_MAX : rng() >> (rng() & 63);
	check(sort_matches(v, big), "sort_unique: skewed magnitudes and extremes",
		  NULL);

	/* all small sizes, around the insertion-sort threshold and beyond */
	ok = true;
	for (n = 0; n <= 300 && ok; n++)
	{
		for (i = 0; i < n; i++)
			v[i] = (rng() % 4 == 0 && i > 0) ? v[i - 1] : rng();
		ok = sort_matches(v, n);
	}
	check(ok, "sort_unique: every n from 0 to 300", "failed at n = %zu", n - 1);

	ok = true;
	for (i = 0; i < 1000; i++)
		pool[i] = rng();
	for (n = 1000; n <= 200000 && ok; n = n * 3 / 2)
	{
		for (i = 0; i < n; i++)
			v[i] = pool[rng() % 1000] ^ (rng() % 3);
		ok = sort_matches(v, n);
	}
	check(ok, "sort_unique: few distinct values at various n", NULL);

	free(v);
}

static void
time_sort(void)
{
	const size_t n = 10000000;
	uint64_t   *v = xcalloc(n, sizeof(uint64_t));
	uint64_t   *scratch = xcalloc(n, sizeof(uint64_t));
	double		best = 1e9;
	double		cold;
	double		t;
	size_t		i;
	size_t		m = 0;
	int			rep;

	/* scratch as a caller would pass it fresh: its pages not yet touched */
	for (i = 0; i < n; i++)
		v[i] = rng();
	t = now_sec();
	m = amq_sort_unique(v, n, scratch);
	cold = now_sec() - t;

	for (rep = 0; rep < 5; rep++)
	{
		for (i = 0; i < n; i++)
			v[i] = rng();
		t = now_sec();
		m = amq_sort_unique(v, n, scratch);
		t = now_sec() - t;
		if (t < best)
			best = t;
	}
	printf("# amq_sort_unique: 10^7 random uint64 in %.1f ms (best of 5; "
		   "%.1f ms with untouched scratch; %zu distinct)\n",
		   best * 1e3, cold * 1e3, m);
	free(v);
	free(scratch);
}

static void
time_probes(const AmqKindOps *ops)
{
	const uint64_t n = 10000000;
	AmqFilter	f;
	uint64_t	hits = 0;
	uint64_t	i;
	double		t_add;
	double		t_neg;
	double		t_pos;

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

	printf("# %s at 10^7 keys, fpr 1%% (%.1f MB): add %.1f ns/key, "
		   "probe %.1f ns absent, %.1f ns present (%llu hits)\n",
		   ops->name, (double) f.payload_len / 1e6, t_add * 1e9 / (double) n,
		   t_neg * 1e9 / (double) n, t_pos * 1e9 / (double) n,
		   (unsigned long long) hits);

	if (ops->id == AMQ_KIND_BLOCKED)
	{
		/* the SQL layer's inlined path for the default kind */
		hits = 0;
		t_neg = now_sec();
		for (i = 0; i < n; i++)
		{
			uint64_t	h = amq_seeded(&f, key_out(i));

			hits += amq_blocked_probe(f.payload +
									  amq_blocked_block(h, f.param[0]) * 32,
									  (uint32_t) h);
		}
		t_neg = now_sec() - t_neg;
		printf("# %s inline probe: %.1f ns absent (%llu hits)\n", ops->name,
			   t_neg * 1e9 / (double) n, (unsigned long long) hits);
	}
	free_filter(&f);
}

/*
 * amq_blocked_fill (vectorized where the CPU allows) and the run fill give
 * the same bytes as adding each key alone, for sorted and unsorted hashes,
 * runs that end inside and at the end of a block, and extreme hashes.
 */
static void
test_blocked_fill(void)
{
	const AmqKindOps *ops = &amq_blocked_ops;
	const size_t counts[] = {0, 1, 2, 3, 7, 1000, 100000};
	size_t		c;

	for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
	{
		size_t		n = counts[c];
		uint64_t   *h = xcalloc(n + 2, sizeof(uint64_t));
		uint64_t   *scratch = xcalloc(n + 2, sizeof(uint64_t));
		AmqFilter	one,
					run,
					fill;
		size_t		i;
		int			sorted;

		for (i = 0; i < n; i++)
			h[i] = key_in(i);
		if (n >= 2)
		{
			h[0] = 0;
			h[1] = UINT64_MAX;
		}
		for (sorted = 0; sorted <= 1; sorted++)
		{
			size_t		m = n;

			if (sorted)
				m = amq_sort_unique(h, n, scratch);
			make_filter(ops, &one, n > 0 ? n / 3 + 1 : 1, 0.01, 0);
			copy_filter(&run, &one);
			copy_filter(&fill, &one);
			for (i = 0; i < m; i++)
				ops->add(&one, h[i]);
			amq_blocked_insert_run(run.payload, run.param[0], h, m);
			amq_blocked_fill(fill.payload, fill.param[0], h, m);
			check(memcmp(one.payload, run.payload, one.payload_len) == 0 &&
				  memcmp(one.payload, fill.payload, one.payload_len) == 0,
				  "blocked fill: the same bytes as one add per key",
				  "n=%zu sorted=%d", n, sorted);
			free_filter(&one);
			free_filter(&run);
			free_filter(&fill);
		}
		free(h);
		free(scratch);
	}
}

/*
 * The probe that amq_blocked_probe picks on this CPU (AVX2 on x86-64 that
 * has it) answers as the scalar one, and both as the key's eight bits by
 * Parquet's spec say:
 * in blocks empty, full, random and holding only the key, at even and odd
 * addresses; and with each of the key's bits cleared in turn, both miss.
 */
static void
test_blocked_probe(void)
{
	uint8_t		block[32 + 1];
	uint64_t	state = 12345;
	long		disagree = 0,
				wrong = 0,
				hits = 0;

	for (int i = 0; i < 200000; i++)
	{
		int			mode = i % 4;
		uint8_t    *b = block + (i / 4) % 2;
		uint32_t	low;
		bool		want = true;

		state = state * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
		low = (uint32_t) (state >> 32);
		memset(block, mode == 1 ? 0xff : 0, sizeof(block));
		if (mode == 2)
			for (int j = 0; j < 32; j++)
				b[j] = (uint8_t) (state >> (j % 8 * 8)) ^ (uint8_t) (j * 0x9d);
		if (mode == 3)
			amq_blocked_insert(b, low);
		for (int w = 0; w < 8; w++)
			if (!((amq_load32(b + 4 * w) >> parquet_bit(low, w)) & 1))
				want = false;
		if (amq_blocked_probe(b, low) != amq_blocked_probe_scalar(b, low))
			disagree++;
		if (amq_blocked_probe(b, low) != want)
			wrong++;
		hits += want;
		if (mode == 3)
		{
			int			w = (i / 8) % 8;

			amq_store32(b + 4 * w,
						amq_load32(b + 4 * w) & ~((uint32_t) 1 << parquet_bit(low, w)));
			if (amq_blocked_probe(b, low) || amq_blocked_probe_scalar(b, low))
				wrong++;
		}
	}
	check(disagree == 0 && wrong == 0 && hits > 50000,
		  "blocked probe: the CPU's probe answers as the scalar one and the bits",
		  "disagree=%ld wrong=%ld hits=%ld", disagree, wrong, hits);
}

/*
 * amq_blocked_fill_runs gives the same bytes as adding each key of each run
 * alone, and counts the keys that repeat an earlier run: 1 to 5 ascending
 * runs that share some keys, over filters of fewer and of more blocks than
 * its segment, with the extreme hashes; and where the filter is so small
 * that almost every key finds its bits set already.
 */
static void
test_blocked_fill_runs(void)
{
	const AmqKindOps *ops = &amq_blocked_ops;
	const size_t counts[] = {0, 1, 1000, 400000};
#ifdef AMQ_BLOCKED_HAVE_AVX2
	bool		have_avx2 = amq_blocked_avx2;
#endif

	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
	{
		size_t		n = counts[c];
		uint64_t   *h = xcalloc(n + 2, sizeof(uint64_t));
		uint64_t   *scratch = xcalloc(n + 2, sizeof(uint64_t));
		uint64_t   *store = xcalloc(5 * (n + 2), sizeof(uint64_t));
		size_t		m;

		for (size_t i = 0; i < n; i++)
			h[i] = key_in(i);
		if (n >= 2)
		{
			h[0] = 0;
			h[1] = UINT64_MAX;
		}
		m = amq_sort_unique(h, n, scratch);
		for (int nruns = 1; nruns <= 5; nruns++)
		{
			const uint64_t *runs[5];
			size_t		lens[5];
			AmqFilter	one,
						fill;
			size_t		distinct = 0;
			size_t		count;

			/* run r takes key i when bit r of a mix of i is set: some share keys */
			for (int r = 0; r < nruns; r++)
			{
				uint64_t   *run = store + r * (n + 2);

				lens[r] = 0;
				for (size_t i = 0; i < m; i++)
					if (((i * UINT64_C(0x9e3779b97f4a7c15)) >> (40 + r)) & 1)
						run[lens[r]++] = h[i];
				runs[r] = run;
			}
			for (size_t i = 0; i < m; i++)
				distinct += (((i * UINT64_C(0x9e3779b97f4a7c15)) >> 40) &
							 ((1u << nruns) - 1)) != 0;
			for (int tiny = 0; tiny <= 3; tiny++)
			{
				size_t		total = 0;

				/*
				 * odd: planned for 1 key in 64, so nearly every probe hits;
				 * 2 and 3: without AVX2
				 */
				make_filter(ops, &one, (tiny & 1) ? 1 + m / 64 : (m > 0 ? m : 1), 0.01, 0);
#ifdef AMQ_BLOCKED_HAVE_AVX2
				amq_blocked_avx2 = have_avx2 && tiny < 2;
#endif
				copy_filter(&fill, &one);
				for (int r = 0; r < nruns; r++)
				{
					total += lens[r];
					for (size_t i = 0; i < lens[r]; i++)
						ops->add(&one, runs[r][i]);
				}
				count = total - amq_blocked_fill_runs(fill.payload, fill.param[0],
													  runs, lens, nruns);
#ifdef AMQ_BLOCKED_HAVE_AVX2
				amq_blocked_avx2 = have_avx2;
#endif
				check(count == distinct &&
					  memcmp(one.payload, fill.payload, one.payload_len) == 0,
					  "blocked fill of runs: the same bytes as one add per key, and the union's count",
					  "n=%zu runs=%d blocks=%llu%s count=%zu want %zu", n, nruns,
					  (unsigned long long) one.param[0], tiny < 2 ? "" : " scalar",
					  count, distinct);
				free_filter(&one);
				free_filter(&fill);
			}
		}
		free(h);
		free(scratch);
		free(store);
	}
}

int
main(void)
{
	double		t0 = now_sec();

	test_caps();

	test_accuracy(&amq_bloom_ops, 0.01, 0);
	test_accuracy(&amq_bloom_ops, 0.001, 0);
	test_accuracy(&amq_blocked_ops, 0.01, 0);
	test_accuracy(&amq_blocked_ops, 0.001, 0);
	test_accuracy(&amq_bloom_ops, 0.01, UINT64_C(0x0123456789abcdef));
	test_accuracy(&amq_blocked_ops, 0.01, UINT64_C(0x0123456789abcdef));

	test_bits_per_key(&amq_bloom_ops, 1000000, 9.7);
	test_bits_per_key(&amq_bloom_ops, 10000000, 9.7);
	test_bits_per_key(&amq_blocked_ops, 1000000, 10.6);
	test_bits_per_key(&amq_blocked_ops, 10000000, 10.6);

	test_plan_edges(&amq_bloom_ops);
	test_plan_edges(&amq_blocked_ops);
	test_bloom_layout();
	test_blocked_layout();
	test_blocked_probe();
	test_blocked_fill();
	test_blocked_fill_runs();
	test_span();
	test_merge(&amq_bloom_ops);
	test_merge(&amq_blocked_ops);
	test_check_bloom();
	test_check_blocked();
	test_stats_edges(&amq_bloom_ops);
	test_stats_edges(&amq_blocked_ops);
	test_sort();

	/* the other kinds, each from its own file */
	if (test_twobit)
		test_twobit();
	if (test_counting)
		test_counting();
	if (test_cuckoo)
		test_cuckoo();
	if (test_scalable)
		test_scalable();
	if (test_xor)
		test_xor();
	if (test_fuse)
		test_fuse();
	if (test_ribbon)
		test_ribbon();
	if (test_state)
		test_state();
	if (test_parquet)
		test_parquet();
	if (test_union)
		test_union();
	if (test_poll)
		test_poll();

	time_sort();
	time_probes(&amq_bloom_ops);
	time_probes(&amq_blocked_ops);

	printf("# total time %.1f s\n", now_sec() - t0);
	printf("%d passed, %d failed\n", npassed, nfailed);
	return nfailed > 0 ? 1 : 0;
}
