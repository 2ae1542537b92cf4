/*-------------------------------------------------------------------------
 *
 * test_static.c
 *	  Checks shared by the unit tests of the static fingerprint kinds,
 *	  "xor" and "fuse" (see test_static.h).
 *
 * Static kinds are built from a sorted, deduplicated hash array, so the
 * generic checks of unit.c written for add() do not apply except for
 * test_bits_per_key; the rest of what the two kinds share is here.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_static.h"

/* ---- helpers ---- */

/* "<kind><what>", the name of a check; valid until the next call */
static const char *
kname(const AmqKindOps *ops, const char *what)
{
	static char buf[256];

	snprintf(buf, sizeof(buf), "%s%s", ops->name, what);
	return buf;
}

void *
static_test_alloc(void *ctx, size_t size)
{
	StaticTestAlloc *a = ctx;

	if (a->fail_at > 0 && a->nalloc + 1 >= a->fail_at)
		return NULL;
	a->nalloc++;
	return malloc(size);
}

void
static_test_free(void *ctx, void *ptr)
{
	StaticTestAlloc *a = ctx;

	a->nfree++;
	free(ptr);
}

uint64_t *
static_keys(uint64_t n)
{
	uint64_t   *h = xcalloc(n + 1, sizeof(uint64_t));
	uint64_t   *scratch = xcalloc(n + 1, sizeof(uint64_t));
	uint64_t	i;
	size_t		m;

	for (i = 0; i < n; i++)
		h[i] = key_in(i);
	m = amq_sort_unique(h, n, scratch);
	if (m != n)
	{
		fprintf(stderr, "key_in is not injective\n");
		exit(2);
	}
	free(scratch);
	return h;
}

AmqStatus
static_make(const AmqKindOps *ops, AmqFilter *f, const uint64_t *hashes,
			uint64_t n, double fpr, uint64_t seed, StaticTestAlloc *counts)
{
	StaticTestAlloc local = {0, 0, 0};
	AmqAllocator alloc;
	AmqStatus	st;

	if (counts == NULL)
		counts = &local;
	alloc.alloc = static_test_alloc;
	alloc.free = static_test_free;
	alloc.ctx = counts;

	st = make_filter(ops, f, n > 0 ? n : 1, fpr, seed);
	if (st != AMQ_OK)
		return st;
	st = ops->build(f, hashes, (size_t) n, &alloc);
	f->nkeys = n;
	return st;
}

uint64_t
static_count_missing(const AmqKindOps *ops, const AmqFilter *f,
					 const uint64_t *hashes, uint64_t n)
{
	uint64_t	missing = 0;
	uint64_t	i;

	for (i = 0; i < n; i++)
		missing += !ops->contains(f, hashes[i]);
	return missing;
}

uint64_t
static_count_fp(const AmqKindOps *ops, const AmqFilter *f, uint64_t nprobe)
{
	uint64_t	fp = 0;
	uint64_t	i;

	for (i = 0; i < nprobe; i++)
		fp += ops->contains(f, key_out(i));
	return fp;
}

/* ---- tests ---- */

void
static_test_ops(const AmqKindOps *ops, int id, const char *name)
{
	check(ops->id == id && strcmp(ops->name, name) == 0 &&
		  ops->caps == AMQ_CAP_STATIC && ops->build != NULL &&
		  ops->add == NULL && ops->remove == NULL && ops->merge == NULL &&
		  ops->grow_plan == NULL && ops->grow == NULL &&
		  (ops->probe_span == NULL) == (ops->contains_span == NULL) &&
		  ops->contains != NULL && ops->stats != NULL,
		  kname(ops, " ops table: id, name, caps, static only"), NULL);
}

/*
 * A kind with probe_span: at every width, each span lies inside the
 * payload, is at most max_span bytes, and contains_span on it answers as
 * contains does, for present and absent keys.
 */
void
static_test_span(const AmqKindOps *ops, uint64_t max_span)
{
	static const double fprs[] = {0.01, 1e-4, 1e-7};
	uint64_t	bad = 0,
				disagree = 0,
				probes = 0;
	size_t		i;

	for (i = 0; i < sizeof(fprs) / sizeof(fprs[0]); i++)
	{
		uint64_t	n = 5000 + 1000 * i;
		uint64_t   *h = static_keys(n);
		AmqFilter	f;
		uint64_t	j;

		if (static_make(ops, &f, h, n, fprs[i], 7, NULL) != AMQ_OK)
		{
			bad++;
			free(h);
			continue;
		}
		for (j = 0; j < 2 * n; j++)
		{
			uint64_t	k = (j & 1) ? key_in(j / 2) : key_out(j);
			uint64_t	off;
			uint32_t	len;

			ops->probe_span(&f, k, &off, &len);
			probes++;
			if (len == 0 || len > max_span || off + len > f.payload_len)
			{
				bad++;
				continue;
			}
			if (ops->contains_span(&f, k, f.payload + off) != ops->contains(&f, k))
				disagree++;
		}
		free_filter(&f);
		free(h);
	}
	check(bad == 0, kname(ops, ": probe_span gives a short span inside the payload"),
		  "%llu bad of %llu", (unsigned long long) bad, (unsigned long long) probes);
	check(disagree == 0, kname(ops, ": contains_span agrees with contains"),
		  "%llu disagree of %llu", (unsigned long long) disagree,
		  (unsigned long long) probes);
}

/*
 * The plan checks every width-based static kind passes; the sizes of its
 * own geometry are the kind's to check.
 */
void
static_test_plan(const AmqKindOps *ops, const StaticKindHooks *hk)
{
	static const struct
	{
		double		fpr;
		uint64_t	w;
	}			widths[] = {
		{0.5, 8}, {0.01, 8}, {1.0 / 256.0, 8}, {0.0039, 16}, {0.001, 16},
		{1.0 / 65536.0, 16}, {1e-5, 32}, {1e-9, 32}, {1.0 / 4294967296.0, 32}
	};
	AmqFilter	f;
	AmqStatus	st;
	bool		ok = true;
	size_t		i;

	memset(&f, 0, sizeof(f));
	f.kind = ops->id;
	f.fpr = 0.01;

	st = ops->plan(&f, 0, 0.01);
	check(st == AMQ_OK && f.payload_len > 0 && ops->check(&f) == AMQ_OK,
		  kname(ops, " plan: capacity 0 gives a valid filter"), "status %d",
		  (int) st);
	check(ops->plan(&f, UINT64_C(1) << 40, 0.01) == AMQ_ERR_TOO_LARGE,
		  kname(ops, " plan: 2^40 keys is AMQ_ERR_TOO_LARGE"), NULL);
	check(ops->plan(&f, UINT64_MAX, 1e-9) == AMQ_ERR_TOO_LARGE &&
		  ops->plan(&f, UINT64_MAX, 0.01) == AMQ_ERR_TOO_LARGE,
		  kname(ops, " plan: 2^64-1 keys is AMQ_ERR_TOO_LARGE"), NULL);

	check(ops->plan(&f, 100, 0.0) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, 1.0) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, -0.5) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, nan("")) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, INFINITY) == AMQ_ERR_PARAM,
		  kname(ops, " plan: rejects fpr 0, 1, negative, NaN, inf"), NULL);
	check(ops->plan(&f, 100, 1e-10) == AMQ_ERR_PARAM,
		  kname(ops, " plan: fpr below 2^-32 (no width meets it) is AMQ_ERR_PARAM"),
		  NULL);

	for (i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
	{
		st = ops->plan(&f, 1000, widths[i].fpr);
		if (st != AMQ_OK || f.param[hk->width_param] != widths[i].w)
		{
			ok = false;
			printf("# %s plan: fpr %g gives width %llu, want %llu\n",
				   ops->name, widths[i].fpr,
				   (unsigned long long) f.param[hk->width_param],
				   (unsigned long long) widths[i].w);
		}
	}
	check(ok, kname(ops, " plan: smallest fingerprint width of 8, 16, 32 with 2^-w <= fpr"),
		  NULL);
}

/*
 * check() of the width and of payload_len, around valid: params that
 * check() accepts, with 16-bit fingerprints.  The kind checks its own
 * geometry params.
 */
void
static_test_check(const AmqKindOps *ops, const StaticKindHooks *hk,
				  const AmqFilter *valid)
{
	const int	wp = hk->width_param;
	AmqFilter	f = *valid;
	AmqFilter	g;

	check(ops->check(&f) == AMQ_OK, kname(ops, " check: valid params pass"),
		  NULL);

	g = f;
	g.param[wp] = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  kname(ops, " check: rejects fingerprint width 0"), NULL);
	g = f;
	g.param[wp] = 12;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  kname(ops, " check: rejects fingerprint width 12"), NULL);
	g = f;
	g.param[wp] = 64;
	g.payload_len = hk->nslots(&f) * 8;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  kname(ops, " check: rejects fingerprint width 64"), NULL);
	g = f;
	g.param[wp] = (UINT64_C(1) << 32) | 16;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  kname(ops, " check: rejects a width that only looks valid in 32 bits"),
		  NULL);
	g = f;
	g.param[wp] = 8;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  kname(ops, " check: rejects a width that does not match payload_len"),
		  NULL);
	g = f;
	g.payload_len += 1;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  kname(ops, " check: rejects payload_len one too long"), NULL);
	g = f;
	g.payload_len -= 2;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  kname(ops, " check: rejects payload_len one slot short"), NULL);
	g = f;
	g.payload_len = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  kname(ops, " check: rejects payload_len 0"), NULL);
}

/*
 * Geometries at the edges that check() accepts, with arbitrary payload
 * bytes: probes of extreme and random hashes stay in bounds (run under
 * AddressSanitizer to see it) and stats stay finite.
 */
void
static_test_untrusted(const AmqKindOps *ops, const StaticKindHooks *hk)
{
	bool		ok = true;
	size_t		g;

	for (g = 0;; g++)
	{
		AmqFilter	f;
		AmqStats	st;
		uint64_t	i;

		memset(&f, 0, sizeof(f));
		f.kind = ops->id;
		if (!hk->edge_geometry(&f, g))
			break;
		f.seed = g * 977;
		if (ops->check(&f) != AMQ_OK)
		{
			ok = false;
			break;
		}
		/* malloc, not calloc, so ASan sees reads just past the end */
		f.payload = malloc(f.payload_len);
		for (i = 0; i < f.payload_len; i++)
			f.payload[i] = (uint8_t) amq_mix64(i + g);
		(void) ops->contains(&f, 0);
		(void) ops->contains(&f, UINT64_MAX);
		for (i = 0; i < 100000; i++)
			(void) ops->contains(&f, key_out(i));
		ops->stats(&f, &st);
		if (!isfinite(st.fill) || !isfinite(st.est_fpr) ||
			!isfinite(st.est_distinct))
			ok = false;
		free(f.payload);
	}
	check(ok && g > 0,
		  kname(ops, ": probes of edge geometries with random payloads stay in bounds"),
		  NULL);
}

void
static_test_accuracy(const AmqKindOps *ops, const StaticKindHooks *hk,
					 double fpr, int width, uint64_t n, uint64_t nprobe)
{
	const int	wp = hk->width_param;
	uint64_t   *keys = static_keys(n);
	StaticTestAlloc counts = {0, 0, 0};
	AmqFilter	f;
	AmqStats	st;
	AmqStatus	s;
	uint64_t	missing;
	uint64_t	fp;
	double		stated = ldexp(1.0, -width);
	double		measured;
	double		ratio;
	double		nslots;
	char		name[256];

	s = static_make(ops, &f, keys, n, fpr, 0, &counts);
	snprintf(name, sizeof(name), "%s fpr=%g: build %llu keys, scratch freed",
			 ops->name, fpr, (unsigned long long) n);
	check(s == AMQ_OK && counts.nalloc == counts.nfree && f.param[wp] == (uint64_t) width,
		  name, "status %d, %ld allocs %ld frees, width %llu", (int) s,
		  counts.nalloc, counts.nfree, (unsigned long long) f.param[wp]);
	if (s != AMQ_OK)
	{
		free(keys);
		free_filter(&f);
		return;
	}
	check(ops->check(&f) == AMQ_OK, kname(ops, ": a built filter passes check()"),
		  NULL);

	missing = static_count_missing(ops, &f, keys, n);
	snprintf(name, sizeof(name), "%s fpr=%g: no false negatives over %llu keys",
			 ops->name, fpr, (unsigned long long) n);
	check(missing == 0, name, "%llu missing", (unsigned long long) missing);

	fp = static_count_fp(ops, &f, nprobe);
	measured = (double) fp / (double) nprobe;
	ratio = measured / stated;
	snprintf(name, sizeof(name),
			 "%s fpr=%g: measured fpr %.3g over %llu negatives is %.3fx the stated 2^-%d, %.2f bits/key",
			 ops->name, fpr, measured, (unsigned long long) nprobe, ratio, width,
			 (double) f.payload_len * 8.0 / (double) n);
	check(ratio >= 0.7 && ratio <= 1.3, name, "%llu false positives",
		  (unsigned long long) fp);

	ops->stats(&f, &st);
	nslots = (double) hk->nslots(&f);
	snprintf(name, sizeof(name),
			 "%s fpr=%g: stats est_fpr 2^-%d, k 3, %u-bit fingerprints, est_distinct %.0f, fill %.4f",
			 ops->name, fpr, width, width, st.est_distinct, st.fill);
	check(st.est_fpr == stated && st.k == 3 &&
		  st.fingerprint_bits == (uint32_t) width &&
		  st.est_distinct == (double) n &&
		  fabs(st.fill - (double) n / nslots) < 0.01,
		  name, "est_fpr %g k %u bits %u fill %g (keys/slots %g)",
		  st.est_fpr, st.k, st.fingerprint_bits, st.fill, (double) n / nslots);

	free_filter(&f);
	free(keys);
}

/* 32-bit fingerprints: a false positive in 10^7 probes has chance 0.2% */
void
static_test_wide(const AmqKindOps *ops, const StaticKindHooks *hk)
{
	const uint64_t n = 100000;
	uint64_t   *keys = static_keys(n);
	AmqFilter	f;
	AmqStatus	s;
	uint64_t	missing = 0;
	uint64_t	fp = 0;

	s = static_make(ops, &f, keys, n, 1e-7, 5, NULL);
	if (s == AMQ_OK)
	{
		missing = static_count_missing(ops, &f, keys, n);
		fp = static_count_fp(ops, &f, 10000000);
	}
	check(s == AMQ_OK && f.param[hk->width_param] == 32 && missing == 0 &&
		  fp <= 2,
		  kname(ops, " fpr=1e-7: 32-bit fingerprints, no false negatives, <= 2 false positives in 10^7"),
		  "status %d, %llu missing, %llu fp", (int) s,
		  (unsigned long long) missing, (unsigned long long) fp);
	free_filter(&f);
	free(keys);
}

void
static_test_small(const AmqKindOps *ops)
{
	uint64_t   *keys = static_keys(5000);
	AmqFilter	f;
	AmqStats	st;
	AmqStatus	s;
	uint64_t	fp;
	uint64_t	n;
	uint64_t	bad_n = 0;
	bool		ok = true;

	/* n = 0: planned for one key, the payload stays zero, nothing is in it */
	s = static_make(ops, &f, keys, 0, 0.01, 3, NULL);
	fp = s == AMQ_OK ? static_count_fp(ops, &f, 100000) : 1;
	check(s == AMQ_OK && fp == 0 && ops->check(&f) == AMQ_OK,
		  kname(ops, ": n = 0 builds a filter that contains nothing"),
		  "status %d, %llu false positives", (int) s, (unsigned long long) fp);
	if (s == AMQ_OK)
	{
		ops->stats(&f, &st);
		check(st.fill == 0.0 && st.est_fpr == 0.0 && st.est_distinct == 0.0 &&
			  st.fingerprint_bits == 8,
			  kname(ops, ": stats of the empty filter are zero"),
			  "fill %g fpr %g", st.fill, st.est_fpr);
	}
	free_filter(&f);

	/* n = 1 */
	s = static_make(ops, &f, keys, 1, 0.01, 3, NULL);
	fp = s == AMQ_OK ? static_count_fp(ops, &f, 1000000) : 0;
	check(s == AMQ_OK && ops->contains(&f, keys[0]) &&
		  (double) fp <= 1.3 * 1e6 / 256.0,
		  kname(ops, ": n = 1 holds its key, false positives at most the stated 2^-8"),
		  "status %d, %llu fp in 10^6", (int) s, (unsigned long long) fp);
	free_filter(&f);

	/* every n up to 300 and a spread beyond: builds succeed and hold the keys */
	for (n = 1; n <= 5000; n = n < 300 ? n + 1 : n * 5 / 4)
	{
		int			w;

		for (w = 0; w < 3 && ok; w++)
		{
			double		fpr = w == 0 ? 0.01 : w == 1 ? 0.001 : 1e-6;

			s = static_make(ops, &f, keys, n, fpr, n, NULL);
			ok = s == AMQ_OK && static_count_missing(ops, &f, keys, n) == 0;
			free_filter(&f);
		}
		if (!ok)
		{
			bad_n = n;
			break;
		}
	}
	check(ok, kname(ops, ": every n in 1..300 and a spread up to 5000 builds, all widths, no misses"),
		  "failed at n = %llu", (unsigned long long) bad_n);
	free(keys);
}

void
static_test_duplicates(const AmqKindOps *ops)
{
	const uint64_t nraw = 30000;
	uint64_t   *raw = xcalloc(nraw, sizeof(uint64_t));
	uint64_t   *scratch = xcalloc(nraw, sizeof(uint64_t));
	uint64_t   *keys = static_keys(10000);
	StaticTestAlloc counts = {0, 0, 0};
	AmqFilter	f;
	AmqStatus	s;
	uint64_t	i;
	size_t		n;
	double		t;

	/* each of 10000 keys three times, shuffled, deduplicated as the caller does */
	for (i = 0; i < nraw; i++)
		raw[i] = key_in((i * 7919) % 10000);
	n = amq_sort_unique(raw, nraw, scratch);
	s = static_make(ops, &f, raw, n, 0.01, 0, NULL);
	check(s == AMQ_OK && n == 10000 &&
		  static_count_missing(ops, &f, keys, 10000) == 0,
		  kname(ops, ": a key list with duplicates, deduplicated by amq_sort_unique, builds"),
		  "status %d, n %zu", (int) s, n);
	free_filter(&f);

	/* contract broken: one key twice, adjacent in sorted order */
	memcpy(raw, keys, 10000 * sizeof(uint64_t));
	raw[5001] = raw[5000];
	s = static_make(ops, &f, raw, 10000, 0.01, 0, &counts);
	check(s == AMQ_ERR_BUILD_FAILED && counts.nalloc == counts.nfree,
		  kname(ops, ": sorted input with a duplicate is AMQ_ERR_BUILD_FAILED"),
		  "status %d", (int) s);
	free_filter(&f);

	/* contract broken and unsorted: the duplicates are far apart */
	memcpy(raw, keys, 10000 * sizeof(uint64_t));
	raw[9999] = raw[17];
	raw[5000] = raw[4000];
	t = now_sec();
	s = static_make(ops, &f, raw, 10000, 0.01, 0, &counts);
	t = now_sec() - t;
	check(s == AMQ_ERR_BUILD_FAILED && counts.nalloc == counts.nfree,
		  kname(ops, ": unsorted input with duplicates is AMQ_ERR_BUILD_FAILED"),
		  "status %d", (int) s);
	printf("# %s: unsorted duplicates rejected in %.2f ms\n", ops->name,
		   t * 1e3);
	free_filter(&f);

	/* contract broken: more keys than the filter was planned for */
	s = make_filter(ops, &f, 10, 0.01, 0);
	if (s == AMQ_OK)
	{
		AmqAllocator alloc = {static_test_alloc, static_test_free, &counts};

		s = ops->build(&f, keys, 10000, &alloc);
	}
	check(s == AMQ_ERR_BUILD_FAILED && counts.nalloc == counts.nfree,
		  kname(ops, ": more keys than slots is AMQ_ERR_BUILD_FAILED"),
		  "status %d", (int) s);
	free_filter(&f);

	free(raw);
	free(scratch);
	free(keys);
}

void
static_test_determinism(const AmqKindOps *ops)
{
	const uint64_t n = 200000;
	uint64_t   *keys = static_keys(n);
	AmqFilter	a;
	AmqFilter	b;
	AmqFilter	c;
	AmqStatus	sa;
	AmqStatus	sb;
	AmqStatus	sc;

	sa = static_make(ops, &a, keys, n, 0.001, 42, NULL);
	sb = static_make(ops, &b, keys, n, 0.001, 42, NULL);
	sc = static_make(ops, &c, keys, n, 0.001, 43, NULL);
	check(sa == AMQ_OK && sb == AMQ_OK && a.seed == b.seed &&
		  a.seed != 42 && a.seed != 0 &&
		  memcmp(a.payload, b.payload, a.payload_len) == 0,
		  kname(ops, ": two builds from the same hashes and seed give the same bytes"),
		  NULL);
	check(sc == AMQ_OK && c.seed != a.seed &&
		  memcmp(a.payload, c.payload, a.payload_len) != 0 &&
		  static_count_missing(ops, &c, keys, n) == 0,
		  kname(ops, ": another seed gives another filter, as complete"), NULL);
	free_filter(&a);
	free_filter(&b);
	free_filter(&c);
	free(keys);
}

void
static_test_nomem(const AmqKindOps *ops)
{
	const uint64_t n = 10000;
	uint64_t   *keys = static_keys(n);
	AmqFilter	f;
	AmqStatus	s = AMQ_ERR_NOMEM;
	long		fail_at;
	bool		ok = true;
	long		total = 0;

	for (fail_at = 1; fail_at < 100; fail_at++)
	{
		StaticTestAlloc counts = {0, 0, fail_at};

		s = static_make(ops, &f, keys, n, 0.01, 0, &counts);
		free_filter(&f);
		if (counts.nalloc != counts.nfree)
			ok = false;
		if (s != AMQ_ERR_NOMEM)
		{
			total = counts.nalloc;
			break;
		}
	}
	check(ok && s == AMQ_OK && total == fail_at - 1 && total >= 1,
		  kname(ops, ": a failing allocator gives AMQ_ERR_NOMEM at every allocation, without leaks"),
		  "status %d after %ld allocations, balanced %d", (int) s, total, ok);

	{
		AmqAllocator none = {NULL, NULL, NULL};

		make_filter(ops, &f, n, 0.01, 0);
		s = ops->build(&f, keys, n, &none);
		check(s == AMQ_ERR_NOMEM,
			  kname(ops, ": an allocator without an alloc function is AMQ_ERR_NOMEM"),
			  "status %d", (int) s);
		free_filter(&f);
	}
	free(keys);
}

void
static_test_stats_edges(const AmqKindOps *ops)
{
	static const double fprs[] = {0.01, 0.001, 1e-6};
	bool		ok = true;
	int			i;

	for (i = 0; i < 3; i++)
	{
		AmqFilter	f;
		AmqStats	st;
		int			w = 8 << i;

		make_filter(ops, &f, 1000, fprs[i], 0);
		ops->stats(&f, &st);
		if (!(st.fill == 0.0 && st.est_fpr == 0.0 && st.k == 3 &&
			  st.fingerprint_bits == (uint32_t) w))
			ok = false;
		memset(f.payload, 0xff, f.payload_len);
		f.nkeys = 1000;
		ops->stats(&f, &st);
		if (!(st.fill == 1.0 && st.est_fpr == ldexp(1.0, -w) &&
			  st.est_distinct == 1000.0 && isfinite(st.est_distinct)))
			ok = false;
		free_filter(&f);
	}
	check(ok, kname(ops, ": stats of all-zero and all-0xff payloads are finite (8, 16, 32 bits)"),
		  NULL);
}

void
static_test_big(const AmqKindOps *ops)
{
	const uint64_t n = 10000000;
	uint64_t   *keys = static_keys(n);
	StaticTestAlloc counts = {0, 0, 0};
	AmqFilter	f;
	AmqStatus	s;
	uint64_t	hits = 0;
	uint64_t	missing = 0;
	uint64_t	i;
	double		t_build;
	double		t_neg;
	double		t_pos;

	t_build = now_sec();
	s = static_make(ops, &f, keys, n, 0.01, 0, &counts);
	t_build = now_sec() - t_build;
	check(s == AMQ_OK && counts.nalloc == counts.nfree,
		  kname(ops, ": builds 10^7 keys"), "status %d", (int) s);
	if (s != AMQ_OK)
	{
		free_filter(&f);
		free(keys);
		return;
	}

	t_neg = now_sec();
	for (i = 0; i < n; i++)
		hits += ops->contains(&f, key_out(i));
	t_neg = now_sec() - t_neg;

	t_pos = now_sec();
	for (i = 0; i < n; i++)
		missing += !ops->contains(&f, key_in(i));
	t_pos = now_sec() - t_pos;

	check(missing == 0, kname(ops, ": no false negatives over 10^7 keys"),
		  "%llu missing", (unsigned long long) missing);
	printf("# %s at 10^7 keys, fpr 1%% (%.1f MB): build %.1f ns/key, "
		   "probe %.1f ns absent, %.1f ns present (%.3f bits/key, %.4f%% fp)\n",
		   ops->name, (double) f.payload_len / 1e6,
		   t_build * 1e9 / (double) n,
		   t_neg * 1e9 / (double) n, t_pos * 1e9 / (double) n,
		   (double) f.payload_len * 8.0 / (double) n,
		   100.0 * (double) hits / (double) n);
	free_filter(&f);
	free(keys);
}

/*
 * A static kind whose build is format version 2 by its flag (xor's and
 * fuse's breadth-first peel): a build carries the flag and is written as
 * version 2; the same payload under a version 1 header (the depth-first
 * peel of earlier releases has the same layout and probe) parses and holds
 * every key; the flag and the version go together, only on this kind
 * (other, a kind with a flag of its own, refuses it), and never from the
 * caller of amq_plan_flags.
 */
void
static_test_version(const AmqKindOps *ops, uint32_t flag,
					const AmqKindOps *other, uint32_t other_flag)
{
	const uint64_t n = 10000;
	uint64_t   *keys = static_keys(n);
	AmqFilter	f;
	AmqFilter	g;
	uint8_t    *buf;
	size_t		len;

	check(static_make(ops, &f, keys, n, 0.01, 7, NULL) == AMQ_OK && f.flags == flag,
		  kname(ops, " version: a build carries the breadth-first flag"), NULL);
	buf = serialize_filter(&f, &len);
	check(buf[AMQ_OFF_VERSION] == 2 && amq_parse(buf, len, &g) == AMQ_OK &&
		  g.flags == flag,
		  kname(ops, " version: written as format version 2, and parsed back"), NULL);

	/* version 1: no flag */
	f.flags = 0;
	amq_write_header(&f, buf);
	check(buf[AMQ_OFF_VERSION] == 1 && amq_parse(buf, len, &g) == AMQ_OK &&
		  g.flags == 0 && static_count_missing(ops, &g, keys, n) == 0,
		  kname(ops, " version: the payload under a version 1 header parses and holds every key"),
		  NULL);
	check(parse_as_version(buf, len, 2, &g) == AMQ_ERR_CORRUPT,
		  kname(ops, " version: version 2 without the flag is refused"), NULL);
	f.flags = flag;
	amq_write_header(&f, buf);
	check(parse_as_version(buf, len, 1, &g) == AMQ_ERR_CORRUPT,
		  kname(ops, " version: version 1 with the flag is refused"), NULL);
	free(buf);
	free_filter(&f);

	/* the flag from the caller, or on the other kind */
	check(amq_plan_flags(&f, ops->id, 100, 0.01, flag) == AMQ_ERR_PARAM,
		  kname(ops, " version: amq_plan_flags takes no such flag from the caller"), NULL);
	check(static_make(other, &f, keys, 100, 0.01, 7, NULL) == AMQ_OK &&
		  f.flags == other_flag,
		  kname(ops, " version: a filter of the other kind"), NULL);
	f.flags = flag;
	buf = serialize_filter(&f, &len);
	check(amq_parse(buf, len, &g) == AMQ_ERR_CORRUPT,
		  kname(ops, " version: the other kind with this flag is refused"), NULL);
	free(buf);
	free_filter(&f);
	free(keys);
}
