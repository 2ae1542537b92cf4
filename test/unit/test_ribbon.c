/*-------------------------------------------------------------------------
 *
 * test_ribbon.c
 *	  Unit tests of the "ribbon" kind (static Standard Ribbon filter).
 *
 * The generic checks of unit.c add keys one by one, which a static kind
 * cannot do, so everything here builds filters from sorted key lists.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_static.h"

/* the golden filter of test_ribbon_determinism: 1000 keys, fpr 1%, seed 0 */
#define RIBBON_GOLDEN_M		UINT64_C(1216)
#define RIBBON_GOLDEN_FNV	UINT64_C(0x69dd8631ca07666e)

/* ---- allocators ---- */

static void *
std_alloc(void *ctx, size_t size)
{
	return malloc(size);
}

static void
std_free(void *ctx, void *ptr)
{
	free(ptr);
}

static const AmqAllocator std_allocator = {std_alloc, std_free, NULL};

/* counts live blocks; fails the call numbered fail_at (0-based), if >= 0 */
typedef struct CountingAlloc
{
	int			calls;
	int			live;
	int			fail_at;
} CountingAlloc;

static void *
counting_alloc(void *ctx, size_t size)
{
	CountingAlloc *ca = ctx;
	void	   *p;

	if (ca->calls++ == ca->fail_at)
		return NULL;
	p = malloc(size);
	if (p != NULL)
		ca->live++;
	return p;
}

static void
counting_free(void *ctx, void *ptr)
{
	CountingAlloc *ca = ctx;

	if (ptr != NULL)
		ca->live--;
	free(ptr);
}

/* ---- helpers ---- */

/* key_in(from .. from + n - 1), sorted ascending (they are distinct) */
static uint64_t *
sorted_keys(uint64_t from, size_t n)
{
	uint64_t   *keys = xcalloc(n + 1, sizeof(uint64_t));
	uint64_t   *scratch = xcalloc(n + 1, sizeof(uint64_t));
	size_t		i;
	size_t		got;

	for (i = 0; i < n; i++)
		keys[i] = key_in(from + i);
	got = amq_sort_unique(keys, n, scratch);
	if (got != n)
	{
		fprintf(stderr, "key_in collided\n");
		exit(2);
	}
	free(scratch);
	return keys;
}

/* plan for max(n, 1) keys and build; the filter's payload is malloc'ed */
static AmqStatus
build_filter(AmqFilter *f, const uint64_t *keys, size_t n, double fpr,
			 uint64_t seed)
{
	const AmqKindOps *ops = &amq_ribbon_ops;
	AmqStatus	st;

	st = make_filter(ops, f, n > 0 ? n : 1, fpr, seed);
	if (st != AMQ_OK)
		return st;
	st = ops->build(f, keys, n, &std_allocator);
	f->nkeys = n;
	return st;
}

static uint64_t
count_absent(const AmqFilter *f, const uint64_t *keys, size_t n)
{
	uint64_t	missing = 0;
	size_t		i;

	for (i = 0; i < n; i++)
		missing += !amq_ribbon_ops.contains(f, keys[i]);
	return missing;
}

static uint64_t
count_fp(const AmqFilter *f, uint64_t nprobe)
{
	uint64_t	fp = 0;
	uint64_t	i;

	for (i = 0; i < nprobe; i++)
		fp += amq_ribbon_ops.contains(f, key_out(i));
	return fp;
}

/* FNV-1a, to pin payload bytes in a golden value */
static uint64_t
fnv1a(const uint8_t *p, size_t len)
{
	uint64_t	h = UINT64_C(0xcbf29ce484222325);
	size_t		i;

	for (i = 0; i < len; i++)
	{
		h ^= p[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

/* ---- tests ---- */

static void
test_ribbon_ops(void)
{
	const AmqKindOps *ops = &amq_ribbon_ops;

	check(ops->id == AMQ_KIND_RIBBON && strcmp(ops->name, "ribbon") == 0 &&
		  ops->caps == AMQ_CAP_STATIC,
		  "ribbon ops table: id, name, caps", NULL);
	check(ops->plan && ops->check && ops->build && ops->contains &&
		  ops->stats && !ops->add && !ops->remove && !ops->merge &&
		  !ops->grow_plan && !ops->grow && ops->probe_span &&
		  ops->contains_span,
		  "ribbon ops table: build/contains/stats and the probe's span only", NULL);
}

static void
test_ribbon_plan(void)
{
	const AmqKindOps *ops = &amq_ribbon_ops;
	static const struct
	{
		double		fpr;
		uint64_t	r;
	}			widths[] = {
		{0.9, 1}, {0.5, 1}, {0.49, 2}, {0.01, 7}, {0.0078125, 7},
		{0.0078, 8}, {0.001, 10}, {1e-9, 30}, {0x1p-32, 32},
	};
	AmqFilter	f;
	AmqStatus	st;
	bool		ok = true;
	size_t		i;
	char		name[200];

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_RIBBON;
	f.fpr = 0.01;

	for (i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
	{
		st = ops->plan(&f, 1000, widths[i].fpr);
		if (st != AMQ_OK || f.param[1] != widths[i].r)
		{
			ok = false;
			printf("# fpr %g: status %d r %llu, want %llu\n", widths[i].fpr,
				   (int) st, (unsigned long long) f.param[1],
				   (unsigned long long) widths[i].r);
		}
	}
	check(ok, "ribbon plan: r is the smallest width with 2^-r <= fpr", NULL);

	st = ops->plan(&f, 0, 0.01);
	check(st == AMQ_OK && f.payload_len > 0 && ops->check(&f) == AMQ_OK,
		  "ribbon plan: capacity 0 gives a valid filter", "status %d",
		  (int) st);
	st = ops->plan(&f, 1, 0.01);
	snprintf(name, sizeof(name),
			 "ribbon plan: capacity 1 gives a valid filter (%llu slots, %llu bytes)",
			 (unsigned long long) f.param[0],
			 (unsigned long long) f.payload_len);
	check(st == AMQ_OK && ops->check(&f) == AMQ_OK, name, "status %d",
		  (int) st);

	st = ops->plan(&f, UINT64_C(1) << 40, 0.01);
	check(st == AMQ_ERR_TOO_LARGE, "ribbon plan: 2^40 keys is AMQ_ERR_TOO_LARGE",
		  "status %d", (int) st);
	st = ops->plan(&f, UINT64_MAX, 1e-9);
	check(st == AMQ_ERR_TOO_LARGE,
		  "ribbon plan: 2^64-1 keys is AMQ_ERR_TOO_LARGE", "status %d",
		  (int) st);
	st = ops->plan(&f, UINT64_MAX, 0.9);
	check(st == AMQ_ERR_TOO_LARGE,
		  "ribbon plan: 2^64-1 keys at r = 1 is AMQ_ERR_TOO_LARGE", "status %d",
		  (int) st);

	/* the largest plan that fits is accepted by check */
	st = ops->plan(&f, UINT64_C(8000000000), 0.9);
	check(st == AMQ_OK && f.payload_len <= AMQ_MAX_PAYLOAD &&
		  ops->check(&f) == AMQ_OK,
		  "ribbon plan: 8e9 keys at r = 1 fits and passes check",
		  "status %d len %llu", (int) st, (unsigned long long) f.payload_len);

	check(ops->plan(&f, 100, 0.0) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, 1.0) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, -0.1) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, nan("")) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, 0x1p-33) == AMQ_ERR_PARAM,
		  "ribbon plan: rejects fpr 0, 1, < 0, NaN and below 2^-32", NULL);
}

static void
test_ribbon_check(void)
{
	const AmqKindOps *ops = &amq_ribbon_ops;
	AmqFilter	f;
	AmqFilter	g;
	bool		ok = true;
	uint64_t	n;
	char		name[200];

	/* every planned geometry passes */
	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_RIBBON;
	for (n = 0; n < UINT64_C(100000000000); n = n * 3 + 1)
	{
		static const double fprs[] = {0.5, 0.01, 0.001, 1e-6, 0x1p-32};
		size_t		i;

		for (i = 0; i < sizeof(fprs) / sizeof(fprs[0]); i++)
		{
			AmqStatus	st = ops->plan(&f, n, fprs[i]);

			if (st == AMQ_OK && ops->check(&f) != AMQ_OK)
				ok = false;
			if (st != AMQ_OK && st != AMQ_ERR_TOO_LARGE)
				ok = false;
		}
	}
	check(ok, "ribbon check: accepts every planned geometry", NULL);

	ops->plan(&f, 10000, 0.01);
	check(ops->check(&f) == AMQ_OK, "ribbon check: valid params pass", NULL);

	g = f;
	g.param[0] += 64;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects m that disagrees with payload_len", NULL);
	g = f;
	g.param[0] += 8;
	g.payload_len = g.param[0] / 8 * g.param[1];
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects m not a multiple of 64", NULL);
	g = f;
	g.param[0] = 192;
	g.payload_len = 192 / 8 * g.param[1];
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects m = w (no start positions)", NULL);
	g = f;
	g.param[0] = 0;
	g.payload_len = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "ribbon check: rejects m = 0", NULL);
	g = f;
	g.param[0] = (UINT64_C(1) << 62) + 64;
	g.param[1] = 32;
	g.payload_len = g.param[0] / 8 * 32;	/* 2^64 + 256 wraps to 256 */
	check(g.payload_len == 256 && ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects m whose size wraps to a small payload", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 34;
	g.payload_len = (g.param[0] / 8) * 7;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects payload beyond AMQ_MAX_PAYLOAD", NULL);
	g = f;
	g.payload_len += 8;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects wrong payload_len", NULL);
	g = f;
	g.payload_len = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects payload_len 0", NULL);
	g = f;
	g.param[1] = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "ribbon check: rejects r = 0", NULL);
	g = f;
	g.param[1] = 33;
	g.payload_len = g.param[0] / 8 * 33;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "ribbon check: rejects r = 33", NULL);
	g = f;
	g.param[1] = UINT64_C(1) << 32 | 7;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects r that only looks valid in 32 bits", NULL);
	g = f;
	g.param[1] = 8;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects r that disagrees with payload_len", NULL);
	g = f;
	g.param[2] = 0;
	check(ops->check(&g) == AMQ_ERR_CORRUPT, "ribbon check: rejects w = 0", NULL);
	g = f;
	g.param[2] = 128;
	check(ops->check(&g) == AMQ_ERR_CORRUPT,
		  "ribbon check: rejects w = 128 (unsupported width)", NULL);
	g = f;
	g.param[2] = UINT64_C(1) << 32 | 192;
	snprintf(name, sizeof(name),
			 "ribbon check: rejects w that only looks valid in 32 bits");
	check(ops->check(&g) == AMQ_ERR_CORRUPT, name, NULL);
}

/*
 * After check() passes, any payload content and any hash must probe
 * within bounds (run under ASan to make that mean something): the
 * smallest and a larger geometry, random payloads, extreme hashes.
 */
static void
test_ribbon_hostile(void)
{
	const AmqKindOps *ops = &amq_ribbon_ops;
	static const uint64_t slots[] = {256, 320, 4096 + 192};
	static const uint64_t rs[] = {1, 7, 32};
	uint64_t	state = 99;
	uint64_t	hits = 0;
	uint64_t	probes = 0;
	size_t		a,
				b;

	for (a = 0; a < sizeof(slots) / sizeof(slots[0]); a++)
		for (b = 0; b < sizeof(rs) / sizeof(rs[0]); b++)
		{
			AmqFilter	f;
			AmqStats	st;
			size_t		i;

			memset(&f, 0, sizeof(f));
			f.kind = AMQ_KIND_RIBBON;
			f.param[0] = slots[a];
			f.param[1] = rs[b];
			f.param[2] = 192;
			f.payload_len = slots[a] / 8 * rs[b];
			f.seed = state;
			f.nkeys = UINT64_MAX;
			if (ops->check(&f) != AMQ_OK)
			{
				check(false, "ribbon hostile: geometry passes check", NULL);
				continue;
			}
			f.payload = malloc(f.payload_len);	/* exact size for ASan */
			for (i = 0; i < f.payload_len; i++)
			{
				state = amq_mix64(state + 1);
				f.payload[i] = (uint8_t) state;
			}
			hits += ops->contains(&f, 0);
			hits += ops->contains(&f, UINT64_MAX);
			probes += 2;
			for (i = 0; i < 20000; i++)
			{
				state = amq_mix64(state + 1);
				hits += ops->contains(&f, state);
				probes++;
			}
			ops->stats(&f, &st);
			if (!(isfinite(st.fill) && isfinite(st.est_fpr) &&
				  isfinite(st.est_distinct)))
				check(false, "ribbon hostile: stats finite", NULL);
			free(f.payload);
		}
	/* random solution bits match a random fingerprint half the time at r = 1 */
	check(hits > 0 && hits < probes,
		  "ribbon hostile: random payloads and extreme hashes probe in bounds",
		  "%llu of %llu", (unsigned long long) hits,
		  (unsigned long long) probes);
}

/*
 * The probe against a bit-by-bit reading of the documented layout: result
 * bit j of slot t is bit (t % 64) of the little-endian word at byte
 * ((t / 64) * r + j) * 8, and the key's value is the XOR over its 192
 * coefficient bits.  The coefficient is recomputed the way the header
 * comment says.
 */
static uint64_t
ref_mum(uint64_t a, uint64_t b)
{
	unsigned __int128 p = (unsigned __int128) a * b;

	return (uint64_t) p ^ (uint64_t) (p >> 64);
}

static bool
ref_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	m = f->param[0];
	uint32_t	r = (uint32_t) f->param[1];
	uint64_t	s = amq_reduce(h, m - 192);
	uint64_t	a = amq_mix64(h);
	uint64_t	c[3];
	uint32_t	got = 0;
	uint32_t	want;
	uint32_t	j;
	int			k;

	c[0] = a | 1;
	c[1] = ref_mum(a, UINT64_C(0xa0761d6478bd642f));
	c[2] = ref_mum(a, UINT64_C(0xe7037ed1a0b428db));
	for (j = 0; j < r; j++)
	{
		uint32_t	bit = 0;

		for (k = 0; k < 192; k++)
		{
			uint64_t	t = s + (uint64_t) k;
			const uint8_t *byte = f->payload + ((t / 64) * r + j) * 8 + (t % 64) / 8;

			if ((c[k / 64] >> (k % 64)) & 1)
				bit ^= (*byte >> (t % 8)) & 1;
		}
		got |= bit << j;
	}
	want = (uint32_t) h & (r == 32 ? UINT32_MAX : ((uint32_t) 1 << r) - 1);
	return got == want;
}

static void
test_ribbon_layout(void)
{
	uint64_t   *keys = sorted_keys(5000000, 3000);
	AmqFilter	f;
	AmqStatus	st;
	uint64_t	disagree = 0;
	uint64_t	refmiss = 0;
	uint64_t	i;
	static const double fprs[] = {0.5, 0.01, 0x1p-32};
	size_t		t;

	for (t = 0; t < sizeof(fprs) / sizeof(fprs[0]); t++)
	{
		st = build_filter(&f, keys, 3000, fprs[t], t * 77);
		if (st != AMQ_OK)
		{
			check(false, "ribbon layout: build", "status %d", (int) st);
			free_filter(&f);
			continue;
		}
		for (i = 0; i < 3000; i++)
			refmiss += !ref_contains(&f, keys[i]);
		for (i = 0; i < 20000; i++)
			disagree += ref_contains(&f, key_out(i)) !=
				amq_ribbon_ops.contains(&f, key_out(i));
		/* and on a random payload, where every bit matters */
		for (i = 0; i < f.payload_len; i++)
			f.payload[i] = (uint8_t) amq_mix64(i * 31 + t);
		for (i = 0; i < 20000; i++)
			disagree += ref_contains(&f, key_out(i)) !=
				amq_ribbon_ops.contains(&f, key_out(i));
		free_filter(&f);
	}
	check(refmiss == 0,
		  "ribbon layout: a bitwise reading of the documented layout finds every key",
		  "%llu missing", (unsigned long long) refmiss);
	check(disagree == 0,
		  "ribbon layout: probe agrees with the bitwise reference",
		  "%llu disagree", (unsigned long long) disagree);
	free(keys);
}

/*
 * Every back-substitution this CPU runs writes the scalar one's bytes, for
 * r = 1 to 10 and at and around each boundary of AVX-512's groups of eight
 * columns up to 32 (SSE2 and AVX2 fall back past 8), with seed 0 and with
 * a seed whose keys are remixed and sorted first.
 */
static void
test_ribbon_solvers(void)
{
	static const char *const names[] = {"scalar", "SSE2", "AVX2", "AVX-512"};
	uint64_t   *keys = sorted_keys(7000000, 20000);
	AmqRibbonSolver saved = amq_ribbon_solver_max;
	static const uint32_t widths[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 16, 17,
	24, 25, 31, 32};
	uint64_t	differ[AMQ_RIBBON_SOLVE_AVX512 + 1] = {0};
	uint64_t	failed = 0;
	int			v;

	for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
	{
		uint32_t	r = widths[w];

		for (uint64_t seed = 0; seed < 2; seed++)
		{
			AmqFilter	ref;

			amq_ribbon_solver_max = AMQ_RIBBON_SOLVE_SCALAR;
			if (build_filter(&ref, keys, 20000, ldexp(1.0, -(int) r), seed * 0x5eed) != AMQ_OK)
			{
				failed++;
				free_filter(&ref);
				continue;
			}
			for (v = AMQ_RIBBON_SOLVE_SSE2; v <= AMQ_RIBBON_SOLVE_AVX512; v++)
			{
				AmqFilter	f;

				amq_ribbon_solver_max = (AmqRibbonSolver) v;
				if (build_filter(&f, keys, 20000, ldexp(1.0, -(int) r), seed * 0x5eed) != AMQ_OK)
					failed++;
				else if (f.seed != ref.seed || f.payload_len != ref.payload_len ||
						 memcmp(f.payload, ref.payload, ref.payload_len) != 0)
					differ[v]++;
				free_filter(&f);
			}
			free_filter(&ref);
		}
	}
	amq_ribbon_solver_max = saved;
	check(failed == 0, "ribbon solvers: every build succeeds", "%llu failed",
		  (unsigned long long) failed);
	for (v = AMQ_RIBBON_SOLVE_SSE2; v <= AMQ_RIBBON_SOLVE_AVX512; v++)
	{
		char		name[160];

		snprintf(name, sizeof(name),
				 "ribbon solvers: up to %s, the scalar bytes for r = 1..10, 15..17, 24, 25, 31, 32 (where the CPU has it)",
				 names[v]);
		check(differ[v] == 0, name, "%llu of %zu filters differ",
			  (unsigned long long) differ[v], 2 * sizeof(widths) / sizeof(widths[0]));
	}
	free(keys);
}

/* 10^6 keys: no false negatives, measured fpr against 2^-r, stats */
static void
test_ribbon_accuracy(double fpr, uint64_t seed, uint64_t nprobe)
{
	const size_t n = 1000000;
	uint64_t   *keys = sorted_keys(0, n);
	AmqFilter	f;
	AmqStatus	st;
	AmqStats	stats;
	uint64_t	missing;
	uint64_t	fp;
	double		stated;
	double		measured;
	char		name[300];

	st = build_filter(&f, keys, n, fpr, seed);
	snprintf(name, sizeof(name), "ribbon fpr=%g seed=%llu: build 10^6 keys",
			 fpr, (unsigned long long) seed);
	check(st == AMQ_OK && amq_ribbon_ops.check(&f) == AMQ_OK, name,
		  "status %d", (int) st);
	if (st != AMQ_OK)
	{
		free_filter(&f);
		free(keys);
		return;
	}

	missing = count_absent(&f, keys, n);
	snprintf(name, sizeof(name), "ribbon fpr=%g seed=%llu: no false negatives",
			 fpr, (unsigned long long) seed);
	check(missing == 0, name, "%llu keys missing", (unsigned long long) missing);

	stated = ldexp(1.0, -(int) f.param[1]);
	fp = count_fp(&f, nprobe);
	measured = (double) fp / (double) nprobe;
	snprintf(name, sizeof(name),
			 "ribbon fpr=%g seed=%llu: measured fpr %.6f = %.3fx stated 2^-%d "
			 "(%llu fp in %.0e probes), %.3f bits/key",
			 fpr, (unsigned long long) seed, measured, measured / stated,
			 (int) f.param[1], (unsigned long long) fp, (double) nprobe,
			 (double) f.payload_len * 8.0 / (double) n);
	check(measured >= 0.7 * stated && measured <= 1.3 * stated &&
		  stated <= fpr, name, "outside 0.7x..1.3x");

	amq_ribbon_ops.stats(&f, &stats);
	snprintf(name, sizeof(name),
			 "ribbon fpr=%g seed=%llu: stats est_fpr %g, fingerprint_bits %u, "
			 "est_distinct %.0f, fill %.4f, k %u",
			 fpr, (unsigned long long) seed, stats.est_fpr,
			 stats.fingerprint_bits, stats.est_distinct, stats.fill, stats.k);
	check(stats.est_fpr == stated && stats.fingerprint_bits == f.param[1] &&
		  stats.k == 0 && stats.est_distinct == (double) n &&
		  stats.fill > 0.9 && stats.fill < 1.0, name, NULL);

	free_filter(&f);
	free(keys);
}

/* small sizes, where the w-slot tail and rounding dominate */
static void
test_ribbon_small(void)
{
	static const size_t sizes[] = {0, 1, 2, 3, 63, 64, 65, 127, 128, 129,
	191, 192, 193, 1000, 4097};
	const uint64_t nprobe = 200000;
	size_t		t;

	for (t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++)
	{
		size_t		n = sizes[t];
		uint64_t   *keys = sorted_keys(1000000 + 10000 * t, n);
		AmqFilter	f;
		AmqStatus	st;
		uint64_t	missing;
		uint64_t	fp;
		double		stated;
		double		ratio;
		char		name[200];

		st = build_filter(&f, keys, n, 0.01, t);
		missing = (st == AMQ_OK) ? count_absent(&f, keys, n) : n;
		fp = (st == AMQ_OK) ? count_fp(&f, nprobe) : 0;
		stated = ldexp(1.0, -(int) f.param[1]);
		ratio = (double) fp / (double) nprobe / stated;
		snprintf(name, sizeof(name),
				 "ribbon n=%zu: builds, holds every key, fpr %.2fx stated "
				 "(%llu slots, %llu bytes)",
				 n, ratio, (unsigned long long) f.param[0],
				 (unsigned long long) f.payload_len);
		check(st == AMQ_OK && missing == 0 && ratio >= 0.7 && ratio <= 1.3,
			  name, "status %d, %llu missing", (int) st,
			  (unsigned long long) missing);
		free_filter(&f);
		free(keys);
	}
}

static void
test_ribbon_duplicates(void)
{
	const size_t n = 50000;
	uint64_t   *raw = xcalloc(2 * n, sizeof(uint64_t));
	uint64_t   *scratch = xcalloc(2 * n, sizeof(uint64_t));
	uint64_t   *copy;
	AmqFilter	f;
	AmqStatus	st;
	size_t		distinct;
	size_t		i;
	uint64_t	missing = 0;

	/* every key twice, in scrambled order */
	for (i = 0; i < 2 * n; i++)
		raw[i] = key_in((i * 7919) % n);
	distinct = amq_sort_unique(raw, 2 * n, scratch);
	check(distinct == n, "ribbon duplicates: amq_sort_unique leaves the distinct keys",
		  "%zu", distinct);
	st = build_filter(&f, raw, distinct, 0.01, 0);
	for (i = 0; i < n; i++)
		missing += !amq_ribbon_ops.contains(&f, key_in(i));
	check(st == AMQ_OK && missing == 0,
		  "ribbon duplicates: deduplicated list builds and holds every key",
		  "status %d, %llu missing", (int) st, (unsigned long long) missing);
	free_filter(&f);

	/* the contract broken: a duplicate, or a descending pair */
	copy = xcalloc(distinct + 1, sizeof(uint64_t));
	memcpy(copy, raw, distinct * sizeof(uint64_t));
	copy[distinct / 2] = copy[distinct / 2 + 1];
	st = build_filter(&f, copy, distinct, 0.01, 0);
	check(st == AMQ_ERR_BUILD_FAILED,
		  "ribbon duplicates: a duplicate hash is AMQ_ERR_BUILD_FAILED",
		  "status %d", (int) st);
	free_filter(&f);

	memcpy(copy, raw, distinct * sizeof(uint64_t));
	copy[distinct - 1] = copy[0];
	st = build_filter(&f, copy, distinct, 0.01, 5);
	check(st == AMQ_ERR_BUILD_FAILED,
		  "ribbon duplicates: a duplicate out of order is AMQ_ERR_BUILD_FAILED",
		  "status %d", (int) st);
	free_filter(&f);

	memcpy(copy, raw, distinct * sizeof(uint64_t));
	copy[10] = raw[11];
	copy[11] = raw[10];
	st = build_filter(&f, copy, distinct, 0.01, 0);
	check(st == AMQ_ERR_BUILD_FAILED,
		  "ribbon duplicates: unsorted input is AMQ_ERR_BUILD_FAILED",
		  "status %d", (int) st);
	free_filter(&f);

	copy[0] = copy[1] = 42;
	st = build_filter(&f, copy, 2, 0.01, 0);
	check(st == AMQ_ERR_BUILD_FAILED,
		  "ribbon duplicates: two equal hashes are AMQ_ERR_BUILD_FAILED",
		  "status %d", (int) st);
	free_filter(&f);

	free(copy);
	free(raw);
	free(scratch);
}

static void
test_ribbon_determinism(void)
{
	const size_t n = 200000;
	uint64_t   *keys = sorted_keys(3000000, n);
	AmqFilter	a,
				b,
				c;
	AmqStatus	sa,
				sb,
				sc;
	uint64_t	golden;

	sa = build_filter(&a, keys, n, 0.001, 12345);
	sb = build_filter(&b, keys, n, 0.001, 12345);
	check(sa == AMQ_OK && sb == AMQ_OK && a.seed == b.seed &&
		  a.payload_len == b.payload_len &&
		  memcmp(a.payload, b.payload, a.payload_len) == 0,
		  "ribbon determinism: same keys and seed give the same bytes", NULL);

	sc = build_filter(&c, keys, n, 0.001, 54321);
	check(sc == AMQ_OK && count_absent(&c, keys, n) == 0 &&
		  memcmp(a.payload, c.payload, a.payload_len) != 0,
		  "ribbon determinism: another seed gives other bytes, same keys", NULL);
	free_filter(&a);
	free_filter(&b);
	free_filter(&c);
	free(keys);

	/* pin the format: any change to hashing, sizing or layout shows here */
	keys = sorted_keys(0, 1000);
	sa = build_filter(&a, keys, 1000, 0.01, 0);
	golden = fnv1a(a.payload, a.payload_len);
	check(sa == AMQ_OK && a.seed == 0 && a.param[0] == RIBBON_GOLDEN_M &&
		  golden == RIBBON_GOLDEN_FNV,
		  "ribbon determinism: golden payload for 1000 keys",
		  "m %llu fnv %016llx", (unsigned long long) a.param[0],
		  (unsigned long long) golden);
	free_filter(&a);
	free(keys);
}

/*
 * Retries: in a geometry too tight for most seeds some key sets fail on
 * the first seed and succeed on a later one, which is then kept in
 * f->seed; with far too few slots every seed fails.
 */
static void
test_ribbon_retries(void)
{
	const AmqKindOps *ops = &amq_ribbon_ops;
	const size_t n = 20000;
	AmqFilter	f;
	AmqStatus	st;
	CountingAlloc ca = {0, 0, -1};
	AmqAllocator alloc = {counting_alloc, counting_free, &ca};
	int			retried = 0;
	int			wrong = 0;
	int			set;

	for (set = 0; set < 40 && retried < 3; set++)
	{
		uint64_t   *keys = sorted_keys(100000000 + (uint64_t) set * n, n);

		make_filter(ops, &f, n, 0.01, 0);
		/* about 2% fewer slots than planned: most first attempts fail */
		f.param[0] = (uint64_t) (n * 1.002 + 192) & ~(uint64_t) 63;
		f.payload_len = f.param[0] / 8 * f.param[1];
		f.payload = realloc(f.payload, f.payload_len);
		st = ops->build(&f, keys, n, &alloc);
		if (st == AMQ_OK && f.seed != 0)
		{
			retried++;
			if (count_absent(&f, keys, n) != 0)
				wrong++;
		}
		free_filter(&f);
		free(keys);
	}
	check(retried > 0 && wrong == 0,
		  "ribbon retries: a later seed succeeds, is kept and finds every key",
		  "%d retried, %d wrong", retried, wrong);

	{
		uint64_t   *keys = sorted_keys(7, n);

		make_filter(ops, &f, n, 0.01, 3);
		f.param[0] = (uint64_t) (n * 0.98 + 192) & ~(uint64_t) 63;
		f.payload_len = f.param[0] / 8 * f.param[1];
		f.payload = realloc(f.payload, f.payload_len);
		st = ops->build(&f, keys, n, &alloc);
		check(st == AMQ_ERR_BUILD_FAILED && f.seed == 3,
			  "ribbon retries: too few slots is AMQ_ERR_BUILD_FAILED, seed untouched",
			  "status %d", (int) st);
		free_filter(&f);
		free(keys);
	}
	check(ca.live == 0, "ribbon retries: scratch all freed", "%d live",
		  ca.live);
}

static void
test_ribbon_nomem(void)
{
	const AmqKindOps *ops = &amq_ribbon_ops;
	const size_t n = 10000;
	uint64_t   *keys = sorted_keys(42, n);
	AmqFilter	f;
	AmqStatus	st;
	CountingAlloc ca;
	AmqAllocator alloc = {counting_alloc, counting_free, &ca};
	int			total;
	int			fail_at;
	bool		ok = true;

	/* count the allocations of a successful build with a nonzero seed */
	ca.calls = ca.live = 0;
	ca.fail_at = -1;
	make_filter(ops, &f, n, 0.01, 77);
	st = ops->build(&f, keys, n, &alloc);
	total = ca.calls;
	check(st == AMQ_OK && ca.live == 0 && total >= 2,
		  "ribbon nomem: a build frees all its scratch", "status %d, %d live",
		  (int) st, ca.live);
	free_filter(&f);

	for (fail_at = 0; fail_at < total; fail_at++)
	{
		ca.calls = ca.live = 0;
		ca.fail_at = fail_at;
		make_filter(ops, &f, n, 0.01, 77);
		st = ops->build(&f, keys, n, &alloc);
		if (st != AMQ_ERR_NOMEM || ca.live != 0 || f.seed != 77)
		{
			ok = false;
			printf("# failing allocation %d: status %d, %d live\n", fail_at,
				   (int) st, ca.live);
		}
		free_filter(&f);
	}
	check(ok, "ribbon nomem: each failing allocation gives AMQ_ERR_NOMEM, no leak",
		  NULL);
	free(keys);
}

static void
test_ribbon_stats_edges(void)
{
	const AmqKindOps *ops = &amq_ribbon_ops;
	AmqFilter	f;
	AmqStats	st;

	make_filter(ops, &f, 1000, 0.001, 0);
	f.nkeys = 0;
	ops->stats(&f, &st);
	check(st.fill == 0.0 && st.est_distinct == 0.0 &&
		  st.est_fpr == ldexp(1.0, -10) && st.k == 0 &&
		  st.fingerprint_bits == 10,
		  "ribbon stats: empty filter", "fill %g distinct %g fpr %g",
		  st.fill, st.est_distinct, st.est_fpr);

	memset(f.payload, 0xff, f.payload_len);
	f.nkeys = UINT64_MAX;
	ops->stats(&f, &st);
	check(st.fill == 1.0 && isfinite(st.est_distinct) &&
		  st.est_fpr == ldexp(1.0, -10),
		  "ribbon stats: all-0xff payload and huge nkeys stay finite",
		  "fill %g distinct %g", st.fill, st.est_distinct);
	free_filter(&f);
}

/* 10^7 keys: build, no false negatives, the timing line */
static void
test_ribbon_big(void)
{
	const size_t n = 10000000;
	uint64_t   *keys = sorted_keys(0, n);
	AmqFilter	f;
	AmqStatus	st;
	uint64_t	missing = 0;
	uint64_t	fp = 0;
	double		t_build;
	double		t_neg;
	double		t_pos;
	uint64_t	i;
	char		name[200];

	make_filter(&amq_ribbon_ops, &f, n, 0.01, 0);
	t_build = now_sec();
	st = amq_ribbon_ops.build(&f, keys, n, &std_allocator);
	t_build = now_sec() - t_build;
	f.nkeys = n;

	t_neg = now_sec();
	for (i = 0; i < n; i++)
		fp += amq_ribbon_ops.contains(&f, key_out(i));
	t_neg = now_sec() - t_neg;

	t_pos = now_sec();
	for (i = 0; i < n; i++)
		missing += !amq_ribbon_ops.contains(&f, key_in(i));
	t_pos = now_sec() - t_pos;

	snprintf(name, sizeof(name),
			 "ribbon 10^7 keys: built, no false negatives, fpr %.5f, %.3f bits/key",
			 (double) fp / (double) n, (double) f.payload_len * 8.0 / (double) n);
	check(st == AMQ_OK && missing == 0 &&
		  fp < 1.3 * ldexp((double) n, -(int) f.param[1]),
		  name, "status %d, %llu missing", (int) st,
		  (unsigned long long) missing);

	printf("# ribbon at 10^7 keys, fpr 1%% (%.1f MB): build %.1f ns/key, "
		   "probe %.1f ns absent, %.1f ns present\n",
		   (double) f.payload_len / 1e6, t_build * 1e9 / (double) n,
		   t_neg * 1e9 / (double) n, t_pos * 1e9 / (double) n);
	free_filter(&f);
	free(keys);
}

void
test_ribbon(void)
{
	test_ribbon_ops();
	test_ribbon_plan();
	test_ribbon_check();
	test_ribbon_hostile();
	test_ribbon_layout();
	test_ribbon_solvers();
	test_ribbon_accuracy(0.01, 0, 1000000);
	test_ribbon_accuracy(0.001, 0, 10000000);
	test_ribbon_accuracy(0.01, UINT64_C(0x0123456789abcdef), 1000000);
	test_bits_per_key(&amq_ribbon_ops, 1000000, 7.3);
	test_bits_per_key(&amq_ribbon_ops, 10000000, 7.3);
	test_ribbon_small();
	test_ribbon_duplicates();
	test_ribbon_determinism();
	test_ribbon_retries();
	test_ribbon_nomem();
	test_ribbon_stats_edges();
	static_test_span(&amq_ribbon_ops, 32 * 32);
	test_ribbon_big();
}
