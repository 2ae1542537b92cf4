/*-------------------------------------------------------------------------
 *
 * kind_ribbon.c
 *	  The "ribbon" kind: a static Standard Ribbon filter (Dillinger and
 *	  Walzer), built once from the complete set of key hashes.
 *
 * Every key is one linear equation over GF(2): a w-bit coefficient row c
 * placed at a start slot s, and an r-bit fingerprint fp.  The filter is a
 * solution S, r bits per slot, with XOR over {S[s + k] : bit k of c set}
 * equal to fp for every key; a probe recomputes that XOR and compares.  An
 * absent key yields an unrelated r-bit value, so it passes with
 * probability 2^-r: that is the stated false-positive rate, and r is the
 * smallest width with 2^-r <= the target fpr.
 *
 * Parameters: param[0] = m, the number of slots (a multiple of 64, at
 * least w + 64); param[1] = r, result bits per slot (1..32); param[2] = w,
 * the coefficient width, always 192.  Starts lie in [0, m - w).
 *
 * Payload: m * r / 8 bytes, column-major and interleaved by 64-slot
 * segment: segment g is r little-endian 64-bit words, word j holding
 * result bit j of slots 64g .. 64g + 63 (slot 64g + b at bit b).  A probe
 * needs bits s .. s + w - 1 of every column, which are words q .. q + 3 of
 * each column with q = s / 64: one contiguous run of 4r words at byte
 * q * r * 8 (224 bytes at r = 7, four or five cache lines, all loaded in
 * parallel).  The coefficient is shifted once by s % 64, then each result
 * bit is the parity of four ANDs.  Slot m - 1 is never covered (the last
 * start is m - w - 1), which keeps the fourth word in bounds without a
 * branch.
 *
 * Hashing: h = amq_seeded(f, key hash).  The start is amq_reduce(h, m - w),
 * monotone in h; the fingerprint is the low r bits of h; the coefficient
 * comes from amq_mix64(h), a bijective remix that leaves it unrelated to
 * both, with its lowest bit forced to 1 so that a key's row begins exactly
 * at its start.
 *
 * Why w = 192 rather than RocksDB's 128: construction fails when some
 * stretch of slots receives more keys than it can pivot, and the spare
 * space needed to make that unlikely grows with log(n) / w.  Measured at
 * 10^7 keys, w = 128 needs about 5.5% spare slots for 5 successes in 6
 * attempts, i.e. 7.39 bits per key at r = 7, over the 7.3 the spec allows;
 * w = 192 needs about 3.5%, and plans 3.9% (7.27 bits per key).  The cost
 * is one more word per column in a probe and in banding.
 * ribbon_overhead() below has the measurements.
 *
 * Construction (ribbon_build): the keys are banded in ascending start
 * order, which is ascending h: with seed 0 that is the caller's order,
 * otherwise the remixed hashes are radix sorted first.  Banding is
 * Gaussian elimination on the fly: a key's row, starting at slot i, is
 * stored there if the slot is free; otherwise the stored row (which also
 * begins at i) is XORed into it along with its result, and the walk moves
 * to the new row's lowest set bit.  Sorted order keeps every access within
 * a window of w slots that slides forward, so the band stays in cache and
 * is zeroed lazily just ahead of the window.  A row that cancels to zero
 * means the system has no solution for this seed: the attempt fails and
 * the next seed is tried.  The result does not depend on the order of the
 * keys, so three thirds of them are banded as independent chains, a step
 * of each in turn (see ribbon_band).  Back-substitution then fixes S from
 * the last slot down; a free slot (no pivot) gets 0.
 *
 * Scratch memory, from the caller's allocator: 24 bytes of coefficient
 * per slot and a byte of result (four where r > 8): about 260 MB for 10^7
 * keys at r = 7, one block of 250 MB, plus 8 bytes per key for the remixed
 * hashes when the seed is not 0.  Measured at 10^7 keys: banding about 28
 * ns per key (7.8 row operations on average, each a dependent load, in
 * three chains) plus 10 to 20 for the page faults of first touching the
 * scratch; back-substitution about 17 ns, 13 with SSE2 for 4 < r <= 8
 * (ribbon_solve8), 6.3 with AVX2 (ribbon_solve8_avx2) and about 3 with
 * AVX-512 (ribbon_solve_avx512, for every r), each where the CPU has it.
 * The whole build, malloc'ed scratch included (r = 7): 41 ns per key with
 * AVX2, 40 with a byte of result instead of four, 35 with AVX-512.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "core.h"

#if defined(__SSE2__) && !defined(AMQ_BIG_ENDIAN) && !defined(RIBBON_NO_SSE2)
#include <emmintrin.h>
#define RIBBON_SSE2 1
#endif

/*
 * AVX2 for the back-substitution, compiled for that target alone and
 * chosen at run time (ribbon_build), so the rest of the build and every
 * probe stay baseline x86-64.
 */
#if defined(RIBBON_SSE2) && defined(__x86_64__) && defined(__GNUC__) && \
	!defined(RIBBON_NO_AVX2)
#include <immintrin.h>
#define RIBBON_AVX2 1
#endif

/* and AVX-512 with its population count and double shifts, likewise */
#if defined(RIBBON_AVX2) && !defined(RIBBON_NO_AVX512)
#define RIBBON_AVX512 1
#define RIBBON_AVX512_TARGET "avx512f,avx512dq,avx512vpopcntdq,avx512vbmi2"
#endif

/*
 * The back-substitution a build uses is the fastest that the CPU runs and
 * this bound allows; the unit tests lower it to check each against the
 * scalar one.
 */
AmqRibbonSolver amq_ribbon_solver_max = AMQ_RIBBON_SOLVE_AVX512;

#define RIBBON_WORDS		3	/* 64-bit words per coefficient row */
#define RIBBON_W			(64 * RIBBON_WORDS)
#define RIBBON_MAX_R		32

/*
 * Seeds tried by build: attempt 0 uses f->seed, attempt a >= 1 uses
 * amq_mix64(f->seed + a * RIBBON_SEED_STEP).  Plans aim at about 98%
 * success per attempt, so running out means broken input, not bad luck.
 */
#ifndef RIBBON_MAX_ATTEMPTS
#define RIBBON_MAX_ATTEMPTS	16
#endif
#define RIBBON_SEED_STEP	UINT64_C(0x9e3779b97f4a7c15)

/* odd multipliers deriving the upper coefficient words */
#define RIBBON_K1			UINT64_C(0xa0761d6478bd642f)
#define RIBBON_K2			UINT64_C(0xe7037ed1a0b428db)

/* slots zeroed at a time ahead of the banding window */
#define RIBBON_ZERO_CHUNK	4096

/* largest m: r = 1 and the payload at AMQ_MAX_PAYLOAD */
#define RIBBON_MAX_SLOTS	((AMQ_MAX_PAYLOAD * 8) & ~(uint64_t) 63)

/* high and low halves of a 64 x 64 product, folded together */
static inline uint64_t
ribbon_mum(uint64_t a, uint64_t b)
{
	unsigned __int128 p = (unsigned __int128) a * b;

	return (uint64_t) p ^ (uint64_t) (p >> 64);
}

/* the coefficient row of a (seeded) hash; bit 0 is always set */
static inline void
ribbon_coeff(uint64_t h, uint64_t *c0, uint64_t *c1, uint64_t *c2)
{
	uint64_t	a = amq_mix64(h);

	*c0 = a | 1;
	*c1 = ribbon_mum(a, RIBBON_K1);
	*c2 = ribbon_mum(a, RIBBON_K2);
}

#ifdef RIBBON_SSE2
/*
 * The parities of the four 64-bit lanes of a and b, as bits 0..3 (a's low
 * lane first).  Each lane is folded to 32 bits, the four halves are packed
 * into one register and folded on to their top bit, which movemask reads.
 */
static inline uint32_t
ribbon_parity4(__m128i a, __m128i b)
{
	__m128	v;
	__m128i x;

	a = _mm_xor_si128(a, _mm_srli_epi64(a, 32));
	b = _mm_xor_si128(b, _mm_srli_epi64(b, 32));
	/* lanes 0 and 2 of each hold the folds: a0 a1 b0 b1 */
	v = _mm_shuffle_ps(_mm_castsi128_ps(a), _mm_castsi128_ps(b),
					   _MM_SHUFFLE(2, 0, 2, 0));
	x = _mm_castps_si128(v);
	x = _mm_xor_si128(x, _mm_slli_epi32(x, 16));
	x = _mm_xor_si128(x, _mm_slli_epi32(x, 8));
	x = _mm_xor_si128(x, _mm_slli_epi32(x, 4));
	x = _mm_xor_si128(x, _mm_slli_epi32(x, 2));
	x = _mm_xor_si128(x, _mm_slli_epi32(x, 1));
	return (uint32_t) _mm_movemask_ps(_mm_castsi128_ps(x));
}
#endif

/* The low r bits set. */
static inline uint32_t
ribbon_mask(uint32_t r)
{
	return r >= 32 ? UINT32_MAX : ((uint32_t) 1 << r) - 1;
}

/*
 * The result bits of slot i in the build's scratch: a byte per slot for
 * r <= 8 (RIBBON_NARROW), else four.  Callers pass wide as a constant
 * where it matters, so that the banding loop is compiled once for each.
 */
#define RIBBON_NARROW		8

static inline uint32_t
ribbon_res_get(const void *res, uint64_t i, bool wide)
{
	return wide ? ((const uint32_t *) res)[i] : ((const uint8_t *) res)[i];
}

static inline void
ribbon_res_put(void *res, uint64_t i, uint32_t v, bool wide)
{
	if (wide)
		((uint32_t *) res)[i] = v;
	else
		((uint8_t *) res)[i] = (uint8_t) v;
}

/*
 * Spare start positions as a fraction of n.  Failure is a local event (a
 * stretch of slots holding more keys than it can pivot), so its chance
 * grows with the number of places it can happen and the spare fraction
 * needed grows with log2(n).  Measured share of attempts that band, seed
 * 0, random keys, by spare fraction:
 *
 *	  keys     0.5%   1.0%   1.5%   2.0%   2.5%   3.0%   3.5%
 *	  3*10^4    87%    94%    99%
 *	  10^5             73%    95%    98%   100%
 *	  3*10^5                  60%    95%   100%
 *	  10^6                    20%    75%    90%   100%
 *	  3*10^6                                62%    94%   100%
 *	  10^7                                         60%   100%
 *
 * The 95% point follows 0.003 * log2(n) - 0.0336; planning 0.0025 above it
 * gives about 98% per attempt.  Below a few thousand keys the w slots past
 * the last start are slack enough on their own.
 */
static double
ribbon_overhead(double n)
{
	double		e = 0.003 * log2(n > 1.0 ? n : 1.0) - 0.031;

	return e > 0.0 ? e : 0.0;
}

/* The slots and result bits that reach fpr for capacity keys. */
static AmqStatus
ribbon_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	double		n = (double) capacity;
	double		slots;
	uint32_t	r;
	uint64_t	m;

	if (!(fpr > 0.0 && fpr < 1.0))
		return AMQ_ERR_PARAM;

	/* smallest r with 2^-r <= fpr; a narrower target is out of range */
	for (r = 1; r <= RIBBON_MAX_R && ldexp(1.0, -(int) r) > fpr; r++)
		;
	if (r > RIBBON_MAX_R)
		return AMQ_ERR_PARAM;

	/* starts span m - w slots: that is what must exceed n by the overhead */
	slots = ceil(n * (1.0 + ribbon_overhead(n))) + RIBBON_W + 63.0;

	/* test in floating point first so the conversion cannot overflow */
	if (!(slots * (double) r / 8.0 <= (double) AMQ_MAX_PAYLOAD))
		return AMQ_ERR_TOO_LARGE;
	m = (uint64_t) slots & ~(uint64_t) 63;
	if (m < RIBBON_W + 64)
		m = RIBBON_W + 64;
	if (m / 8 * r > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_TOO_LARGE;

	f->param[0] = m;
	f->param[1] = r;
	f->param[2] = RIBBON_W;
	f->payload_len = m / 8 * r;
	return AMQ_OK;
}

/* Validate a ribbon filter's parameters against its payload. */
static AmqStatus
ribbon_check(const AmqFilter *f)
{
	uint64_t	m = f->param[0];
	uint64_t	r = f->param[1];

	if (f->param[2] != RIBBON_W)
		return AMQ_ERR_CORRUPT;
	if (r < 1 || r > RIBBON_MAX_R)
		return AMQ_ERR_CORRUPT;
	/* bounding m first keeps m / 8 * r from overflowing */
	if (m < RIBBON_W + 64 || m > RIBBON_MAX_SLOTS || (m & 63) != 0)
		return AMQ_ERR_CORRUPT;
	if (f->payload_len != m / 8 * r || f->payload_len > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

/*
 * The probe.  s < m - w, so q + 3 <= m / 64 - 1 and every word read lies
 * within the payload whatever its content.
 *
 * Result bit j is the parity of (x0 & word q of column j) ^ ... ^ (x3 &
 * word q + 3 of column j).  Columns go four at a time, and the probe stops
 * at the first group that disagrees with the fingerprint: an absent key
 * fails the first four bits 15 times in 16.  Stopping early matters less
 * for the instructions saved than for the next probe: a short probe lets
 * the CPU overlap the next key's cache misses with this one's, which at
 * 10^7 keys (out of cache) halved the time of an absent probe, while a
 * present key pays nothing and a random mix of both about 10% less.
 *
 * With SSE2 (every x86-64) two adjacent columns share each 128-bit
 * operation and four parities are folded together; the scalar loop is
 * the reference and the fallback.
 */
static bool
ribbon_match(const AmqFilter *f, uint64_t h, uint64_t s, const uint8_t *p)
{
	uint32_t	r = (uint32_t) f->param[1];
	uint32_t	o = (uint32_t) (s & 63);
	uint32_t	want = (uint32_t) h & ribbon_mask(r);
	uint64_t	c0,
				c1,
				c2;
	uint64_t	x0,
				x1,
				x2,
				x3;
	uint32_t	got = 0;
	uint32_t	j = 0;

	ribbon_coeff(h, &c0, &c1, &c2);

	/* the row shifted to bit o of word q; ">> 1 >>" stays defined at o = 0 */
	x0 = c0 << o;
	x1 = (c1 << o) | (c0 >> 1 >> (63 - o));
	x2 = (c2 << o) | (c1 >> 1 >> (63 - o));
	x3 = c2 >> 1 >> (63 - o);

#ifdef RIBBON_SSE2
	{
		const __m128i m0 = _mm_set1_epi64x((long long) x0);
		const __m128i m1 = _mm_set1_epi64x((long long) x1);
		const __m128i m2 = _mm_set1_epi64x((long long) x2);
		const __m128i m3 = _mm_set1_epi64x((long long) x3);
		const size_t stride = (size_t) r * 8;

#define RIBBON_PAIR(q) \
	_mm_xor_si128(_mm_xor_si128( \
		_mm_and_si128(m0, _mm_loadu_si128((const __m128i *) (q))), \
		_mm_and_si128(m1, _mm_loadu_si128((const __m128i *) ((q) + stride)))), \
	_mm_xor_si128( \
		_mm_and_si128(m2, _mm_loadu_si128((const __m128i *) ((q) + 2 * stride))), \
		_mm_and_si128(m3, _mm_loadu_si128((const __m128i *) ((q) + 3 * stride)))))

		for (; j + 4 <= r; j += 4)
		{
			got |= ribbon_parity4(RIBBON_PAIR(p + 8 * j),
								  RIBBON_PAIR(p + 8 * j + 16)) << j;
			if ((((got ^ want) >> j) & 15) != 0)
				return false;
		}
		/* two or three columns left: a pair here, a single below */
		if (j + 2 <= r)
		{
			got |= ribbon_parity4(RIBBON_PAIR(p + 8 * j),
								  _mm_setzero_si128()) << j;
			j += 2;
		}
#undef RIBBON_PAIR
	}
#endif

	for (; j < r; j++)
	{
		uint64_t	v;

		v = (x0 & amq_load64(p + 8 * j)) ^
			(x1 & amq_load64(p + 8 * (r + j))) ^
			(x2 & amq_load64(p + 8 * (2 * r + j))) ^
			(x3 & amq_load64(p + 8 * (3 * r + j)));
		got |= (uint32_t) __builtin_parityll(v) << j;
		if ((j & 3) == 3 && (((got ^ want) >> (j - 3)) & 15) != 0)
			return false;
	}
	return got == want;
}

/* Does the key's band of the solution give its fingerprint? */
static bool
ribbon_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	s = amq_reduce(h, f->param[0] - RIBBON_W);

	return ribbon_match(f, h, s, f->payload + (s >> 6) * f->param[1] * 8);
}

/*
 * A probe reads words q to q + 3 of every column, which are stored
 * together: one span of 32 r bytes (the amq index reads it from its pages).
 */
static void
ribbon_probe_span(const AmqFilter *f, uint64_t hash,
				  uint64_t *offset, uint32_t *length)
{
	uint64_t	s = amq_reduce(amq_seeded(f, hash), f->param[0] - RIBBON_W);

	*offset = (s >> 6) * f->param[1] * 8;
	*length = (uint32_t) (32 * f->param[1]);
}

/* Probe the key's band, read apart from the filter. */
static bool
ribbon_contains_span(const AmqFilter *f, uint64_t hash, const uint8_t *span)
{
	uint64_t	h = amq_seeded(f, hash);

	return ribbon_match(f, h, amq_reduce(h, f->param[0] - RIBBON_W), span);
}

/*
 * A row being banded: its coefficient from slot i on (bit 0 is slot i) and
 * its result bits.
 */
typedef struct RibbonRow
{
	uint64_t	i;
	uint64_t	c0;
	uint64_t	c1;
	uint64_t	c2;
	uint32_t	fp;
} RibbonRow;

/* The row of key hash h, at its start. */
static inline void
ribbon_row_init(RibbonRow *w, uint64_t h, uint64_t nstarts, uint32_t mask)
{
	w->i = amq_reduce(h, nstarts);
	w->fp = (uint32_t) h & mask;
	ribbon_coeff(h, &w->c0, &w->c1, &w->c2);
}

/*
 * XOR the stored row of slot w->i into w and move w on to its new lowest
 * set bit.  False when the row cancelled to zero.
 */
static inline bool
ribbon_row_step(RibbonRow *w, const uint64_t *row, uint32_t res)
{
	uint32_t	tz;

	w->c0 ^= row[0];
	w->c1 ^= row[1];
	w->c2 ^= row[2];
	w->fp ^= res;
	if (w->c0 == 0)
	{
		if (w->c1 != 0)
		{
			w->c0 = w->c1;
			w->c1 = w->c2;
			w->c2 = 0;
			w->i += 64;
		}
		else if (w->c2 != 0)
		{
			w->c0 = w->c2;
			w->c1 = w->c2 = 0;
			w->i += 128;
		}
		else
			return false;
	}
	tz = (uint32_t) __builtin_ctzll(w->c0);
	w->c0 = (w->c0 >> tz) | (w->c1 << 1 << (63 - tz));
	w->c1 = (w->c1 >> tz) | (w->c2 << 1 << (63 - tz));
	w->c2 >>= tz;
	w->i += tz;
	return true;
}

static inline __attribute__((always_inline)) void
ribbon_row_store(const RibbonRow *w, uint64_t *coef, void *res, bool wide)
{
	uint64_t   *row = coef + 3 * w->i;

	row[0] = w->c0;
	row[1] = w->c1;
	row[2] = w->c2;
	ribbon_res_put(res, w->i, w->fp, wide);
}

/*
 * Zero the band from *zhi to at least slot need, a chunk ahead, but not
 * past cap.
 */
static inline void
ribbon_zero_to(uint64_t *coef, uint64_t *zhi, uint64_t need, uint64_t cap)
{
	if (need > *zhi)
	{
		uint64_t	to = need + RIBBON_ZERO_CHUNK;

		if (to > cap)
			to = cap;
		if (to > *zhi)
		{
			memset(coef + 3 * *zhi, 0, (size_t) (to - *zhi) * 3 * sizeof(uint64_t));
			*zhi = to;
		}
	}
}

/*
 * One step of a chain of walks: the walk of w moves on by one stored row,
 * or, at a free slot, is stored there and w starts the walk of keys[*k].
 * 1 when the chain has no key left, -1 when the row cancelled to zero.
 * Forced inline: called as a function, with each chain's row spilled to
 * memory, banding took 40% longer instead of 10% less.
 */
static inline __attribute__((always_inline)) int
ribbon_chain_step(RibbonRow *w, const uint64_t *keys, size_t *k, size_t end,
				  uint64_t *coef, void *res, bool wide, uint64_t nstarts,
				  uint32_t mask, uint64_t *zhi, uint64_t cap)
{
	const uint64_t *row = coef + 3 * w->i;

	if (row[0] & 1)
		return ribbon_row_step(w, row, ribbon_res_get(res, w->i, wide)) ? 0 : -1;
	ribbon_row_store(w, coef, res, wide);
	if (*k == end)
		return 1;
	ribbon_row_init(w, keys[(*k)++], nstarts, mask);
	ribbon_zero_to(coef, zhi, w->i + RIBBON_W, cap);
	return 0;
}

/*
 * Band the keys, given as seeded hashes in ascending order, into coef
 * (three words per slot) and res.  False when a row cancels to zero: the
 * keys' equations are dependent for this seed.
 *
 * The order in which keys are banded changes nothing in the result.  The
 * stored rows are an echelon basis of the keys' rows (one per pivot slot),
 * and the pivot slots of any echelon basis of a space are the same: the
 * leading slots of its vectors.  With the free slots at 0 the solution is
 * then unique (the keys' columns at the pivots are invertible), and a row
 * cancels to zero in some order exactly when it does in every order (the
 * rows are dependent).  Nor does the width: a walk at slot i XORs in only a
 * row that begins at i and ends before i + w, so its own row, already
 * within [i, i + w), stays there.
 *
 * So the keys go as three independent chains of walks, each a third of
 * the keys in start order, one step of each in turn.  Each step waits for
 * the row it loads, whose slot the previous step computed; the other
 * chains' steps fill that wait.  The chains meet only where one's last
 * walks reach the next one's first slots, and walks may interleave
 * anyhow: each step reads the band as it is, and stored rows never change.
 * The former scheme walked two consecutive keys in lock step, with masked
 * steps for the one that had stopped and care for both stopping at one
 * slot; at 10^7 keys (r = 7, seed 0, page faults left out by reusing the
 * scratch) the whole build went from 46 to 41.5 ns per key with two
 * chains, 40.5 with three; four measured no faster than three.
 *
 * In start order a walk that starts at s only touches slots below s + w:
 * every stored row begins at its pivot and ends before its own key's start
 * plus w.  So each chain zeroes slots lazily, a chunk at a time just ahead
 * of s + w, from its own first start up to the next chain's first start,
 * where that chain has zeroed w slots and more before any walk begins (the
 * top chain up to m).  *zeroed returns how far the band is zeroed.
 */
static inline __attribute__((always_inline)) bool
ribbon_band_body(const uint64_t *keys, size_t n, uint64_t m, uint32_t r,
				 uint64_t *coef, void *res, bool wide, uint64_t *zeroed)
{
	uint64_t	nstarts = m - RIBBON_W;
	uint32_t	mask = ribbon_mask(r);
	size_t		e1 = n / 3;
	size_t		e2 = 2 * (n / 3);
	size_t		ka = 0;
	size_t		kb = e1;
	size_t		kc = e2;
	uint64_t	za = 0;
	uint64_t	zb;
	uint64_t	zc;
	uint64_t	mb, mc;
	RibbonRow	a;
	RibbonRow	b;
	RibbonRow	c;
	int			sa = 1;
	int			sb = 1;
	int			sc = 0;
	size_t		rounds = 0;

	/* keys 2n/3 .. n - 1, never none; then the two lower thirds, if any */
	ribbon_row_init(&c, keys[kc++], nstarts, mask);
	mc = c.i;
	zc = mc;
	ribbon_zero_to(coef, &zc, mc + RIBBON_W, m);
	mb = mc;
	zb = mc;
	if (e2 > e1)
	{
		ribbon_row_init(&b, keys[kb++], nstarts, mask);
		mb = b.i;
		zb = mb;
		ribbon_zero_to(coef, &zb, mb + RIBBON_W, mc);
		sb = 0;
	}
	if (e1 > 0)
	{
		ribbon_row_init(&a, keys[ka++], nstarts, mask);
		ribbon_zero_to(coef, &za, a.i + RIBBON_W, mb);
		sa = 0;
	}

	while ((sa | sb | sc) == 0)
	{
		amq_poll_every(++rounds);
		sa = ribbon_chain_step(&a, keys, &ka, e1, coef, res, wide, nstarts, mask,
							   &za, mb);
		sb = ribbon_chain_step(&b, keys, &kb, e2, coef, res, wide, nstarts, mask,
							   &zb, mc);
		sc = ribbon_chain_step(&c, keys, &kc, n, coef, res, wide, nstarts, mask,
							   &zc, m);
	}
	/* a row cancelled to zero: no need to band the rest */
	if (sa < 0 || sb < 0 || sc < 0)
		return false;
	/* the other chains finish one at a time */
	while (sa == 0)
		sa = ribbon_chain_step(&a, keys, &ka, e1, coef, res, wide, nstarts, mask,
							   &za, mb);
	while (sb == 0)
		sb = ribbon_chain_step(&b, keys, &kb, e2, coef, res, wide, nstarts, mask,
							   &zb, mc);
	while (sc == 0)
		sc = ribbon_chain_step(&c, keys, &kc, n, coef, res, wide, nstarts, mask,
							   &zc, m);

	/* a lower chain may have stopped zeroing short of the next one's start */
	if (za < mb)
		memset(coef + 3 * za, 0, (size_t) (mb - za) * 3 * sizeof(uint64_t));
	if (zb < mc)
		memset(coef + 3 * zb, 0, (size_t) (mc - zb) * 3 * sizeof(uint64_t));
	*zeroed = zc;
	return sa > 0 && sb > 0 && sc > 0;
}

/* ribbon_band_body, compiled for each width of the result scratch */
static bool
ribbon_band(const uint64_t *keys, size_t n, uint64_t m, uint32_t r,
			uint64_t *coef, void *res, uint64_t *zeroed)
{
	if (r > RIBBON_NARROW)
		return ribbon_band_body(keys, n, m, r, coef, res, true, zeroed);
	return ribbon_band_body(keys, n, m, r, coef, res, false, zeroed);
}

/*
 * Solve the banded system from the last slot down into the payload.  For
 * each result column j, s0[j], s1[j], s2[j] hold the 192 solution bits
 * above slot i, bit k being S[i + 1 + k].  Shifting them up by one makes
 * room for S[i] at bit 0, which is the key's result bit XOR the parity of
 * the rest of its row against them (the row's own bit 0 meets the 0 there);
 * a free slot keeps 0.  At a segment start the low word is then exactly
 * S[i .. i + 63], the payload word.
 */
static void
ribbon_solve(const uint64_t *coef, const void *res, uint64_t m,
			 uint32_t r, uint8_t *payload)
{
	uint64_t	s0[RIBBON_MAX_R];
	uint64_t	s1[RIBBON_MAX_R];
	uint64_t	s2[RIBBON_MAX_R];
	uint64_t	i;
	uint32_t	j;

	memset(s0, 0, sizeof(s0));
	memset(s1, 0, sizeof(s1));
	memset(s2, 0, sizeof(s2));

	for (i = m; i-- > 0; amq_poll_every(i))
	{
		const uint64_t *row = coef + 3 * i;

		if (row[0] & 1)
		{
			uint64_t	c0 = row[0];
			uint64_t	c1 = row[1];
			uint64_t	c2 = row[2];
			uint32_t	fp = ribbon_res_get(res, i, r > RIBBON_NARROW);

			for (j = 0; j < r; j++)
			{
				uint64_t	a0 = s0[j] << 1;
				uint64_t	a1 = (s1[j] << 1) | (s0[j] >> 63);
				uint64_t	a2 = (s2[j] << 1) | (s1[j] >> 63);
				uint64_t	bit;

				bit = (uint64_t) __builtin_parityll((a0 & c0) ^ (a1 & c1) ^ (a2 & c2));
				s0[j] = a0 | (bit ^ ((fp >> j) & 1));
				s1[j] = a1;
				s2[j] = a2;
			}
		}
		else
		{
			for (j = 0; j < r; j++)
			{
				s2[j] = (s2[j] << 1) | (s1[j] >> 63);
				s1[j] = (s1[j] << 1) | (s0[j] >> 63);
				s0[j] <<= 1;
			}
		}

		if ((i & 63) == 0)
		{
			uint8_t    *out = payload + (i >> 6) * r * 8;

			for (j = 0; j < r; j++)
				amq_store64(out + 8 * j, s0[j]);
		}
	}
}

#ifdef RIBBON_SSE2
/*
 * ribbon_solve for 4 < r <= 8 (the widths of rates from 3% down to 0.4%)
 * with SSE2: the same recurrence, two columns per 128-bit register (column
 * 2k in the low lane of pair k), and the four parities of a pair of pairs
 * at once (ribbon_parity4).  The scalar loop keeps its 3r state words in
 * memory; here the 24 of eight columns are twelve registers, written out
 * pair by pair because a loop over an array of them left them on the
 * stack.  Columns r .. 7 are computed with result bits 0 and never stored.
 * At 10^7 keys and r = 7: 12 ns per key, where the scalar loop takes 17.
 */
#define RIBBON_SHIFT1(a, b, c) \
	do { \
		c = _mm_or_si128(_mm_slli_epi64(c, 1), _mm_srli_epi64(b, 63)); \
		b = _mm_or_si128(_mm_slli_epi64(b, 1), _mm_srli_epi64(a, 63)); \
		a = _mm_slli_epi64(a, 1); \
	} while (0)
#define RIBBON_DOT(a, b, c) \
	_mm_xor_si128(_mm_and_si128(a, c0), \
				  _mm_xor_si128(_mm_and_si128(b, c1), _mm_and_si128(c, c2)))

static void
ribbon_solve8(const uint64_t *coef, const uint8_t *res, uint64_t m,
			  uint32_t r, uint8_t *payload)
{
	static const uint64_t lanebits[4][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}};
	__m128i		a0 = _mm_setzero_si128(), a1 = a0, a2 = a0;
	__m128i		b0 = a0, b1 = a0, b2 = a0;
	__m128i		d0 = a0, d1 = a0, d2 = a0;
	__m128i		e0 = a0, e1 = a0, e2 = a0;
	uint64_t	i;

	for (i = m; i-- > 0; amq_poll_every(i))
	{
		const uint64_t *row = coef + 3 * i;

		RIBBON_SHIFT1(a0, a1, a2);
		RIBBON_SHIFT1(b0, b1, b2);
		RIBBON_SHIFT1(d0, d1, d2);
		RIBBON_SHIFT1(e0, e1, e2);

		if (row[0] & 1)
		{
			const __m128i c0 = _mm_set1_epi64x((long long) row[0]);
			const __m128i c1 = _mm_set1_epi64x((long long) row[1]);
			const __m128i c2 = _mm_set1_epi64x((long long) row[2]);
			uint32_t	bits;

			bits = ribbon_parity4(RIBBON_DOT(a0, a1, a2), RIBBON_DOT(b0, b1, b2)) |
				(ribbon_parity4(RIBBON_DOT(d0, d1, d2), RIBBON_DOT(e0, e1, e2)) << 4);
			bits ^= res[i];
			a0 = _mm_or_si128(a0, _mm_loadu_si128((const __m128i *) lanebits[bits & 3]));
			b0 = _mm_or_si128(b0, _mm_loadu_si128((const __m128i *) lanebits[(bits >> 2) & 3]));
			d0 = _mm_or_si128(d0, _mm_loadu_si128((const __m128i *) lanebits[(bits >> 4) & 3]));
			e0 = _mm_or_si128(e0, _mm_loadu_si128((const __m128i *) lanebits[(bits >> 6) & 3]));
		}

		if ((i & 63) == 0)
		{
			uint8_t    *out = payload + (i >> 6) * r * 8;

			_mm_storeu_si128((__m128i *) out, a0);
			_mm_storeu_si128((__m128i *) (out + 16), b0);
			if (r >= 6)
				_mm_storeu_si128((__m128i *) (out + 32), d0);
			else
				_mm_storel_epi64((__m128i *) (out + 32), d0);
			if (r == 8)
				_mm_storeu_si128((__m128i *) (out + 48), e0);
			else if (r == 7)
				_mm_storel_epi64((__m128i *) (out + 48), e0);
		}
	}
}
#undef RIBBON_SHIFT1
#undef RIBBON_DOT
#endif

#ifdef RIBBON_AVX2
/*
 * ribbon_solve8 with AVX2: four columns per 256-bit register (columns 0-3
 * in a, 4-7 in b, one lane each), so six registers of state instead of
 * twelve, and the eight parities folded in one register: each lane's
 * 64-bit dot is folded to 32 bits, b's halves are blended into the odd
 * 32-bit lanes beside a's, eight 32-bit lanes are folded on to their top
 * bit at once and put back in column order for movemask.
 *
 * What bounds the SSE2 loop is not its instructions but its chain: the
 * bits of slot i go into the state that slot i - 1's dot reads, through
 * the fold, movemask and a table load, some 30 cycles a slot.  Here the
 * bits of a slot join the state two slots later.  Slot i's dot then
 * misses only slot i + 1 (slot i + 2 has joined), whose bits meet bit 1
 * of slot i's row: XORing them in when that bit is set is one scalar AND
 * on the chain, and the vector work of successive slots overlaps.  At a
 * segment start the two pending slots are ORed into the stored words.
 * Same bits as ribbon_solve8; at 10^7 keys and r = 7 the back-substitution
 * takes 6.3 ns per key where ribbon_solve8 takes 13 (11.3 with AVX2
 * without the delay).
 */
#define RIBBON_SHIFT1_256(a, b, c) \
	do { \
		c = _mm256_or_si256(_mm256_slli_epi64(c, 1), _mm256_srli_epi64(b, 63)); \
		b = _mm256_or_si256(_mm256_slli_epi64(b, 1), _mm256_srli_epi64(a, 63)); \
		a = _mm256_slli_epi64(a, 1); \
	} while (0)
#define RIBBON_DOT_256(a, b, c) \
	_mm256_xor_si256(_mm256_and_si256(a, c0), \
					 _mm256_xor_si256(_mm256_and_si256(b, c1), \
									  _mm256_and_si256(c, c2)))
#define RIBBON_LB(v) {(v) & 1, ((v) >> 1) & 1, ((v) >> 2) & 1, ((v) >> 3) & 1}

__attribute__((target("avx2")))
static void
ribbon_solve8_avx2(const uint64_t *coef, const uint8_t *res, uint64_t m,
				   uint32_t r, uint8_t *payload)
{
	/* lane k of entry v is bit k of v: bit 0 of four columns */
	static const uint64_t lanebits[16][4] = {
		RIBBON_LB(0), RIBBON_LB(1), RIBBON_LB(2), RIBBON_LB(3),
		RIBBON_LB(4), RIBBON_LB(5), RIBBON_LB(6), RIBBON_LB(7),
		RIBBON_LB(8), RIBBON_LB(9), RIBBON_LB(10), RIBBON_LB(11),
		RIBBON_LB(12), RIBBON_LB(13), RIBBON_LB(14), RIBBON_LB(15)
	};
	const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
	/* columns 4 .. r - 1 of b are stored, the rest never */
	const __m256i bmask = _mm256_cmpgt_epi64(_mm256_set1_epi64x(r - 4),
											 _mm256_setr_epi64x(0, 1, 2, 3));
	__m256i		a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0;
	__m256i		b0 = a0, b1 = a0, b2 = a0;
	uint32_t	p1 = 0;			/* the bits of slot i + 1, not yet in a, b */
	uint32_t	p2 = 0;			/* the bits of slot i + 2, likewise */
	uint64_t	i;

	for (i = m; i-- > 0; amq_poll_every(i))
	{
		const uint64_t *row = coef + 3 * i;
		uint32_t	bits = 0;

		/* slot i + 2 into bit 1, then all up by one: slot i at bit 0 */
		a0 = _mm256_or_si256(a0, _mm256_slli_epi64(_mm256_loadu_si256((const __m256i *) lanebits[p2 & 15]), 1));
		b0 = _mm256_or_si256(b0, _mm256_slli_epi64(_mm256_loadu_si256((const __m256i *) lanebits[(p2 >> 4) & 15]), 1));
		RIBBON_SHIFT1_256(a0, a1, a2);
		RIBBON_SHIFT1_256(b0, b1, b2);

		if (row[0] & 1)
		{
			const __m256i c0 = _mm256_set1_epi64x((long long) row[0]);
			const __m256i c1 = _mm256_set1_epi64x((long long) row[1]);
			const __m256i c2 = _mm256_set1_epi64x((long long) row[2]);
			__m256i		da = RIBBON_DOT_256(a0, a1, a2);
			__m256i		db = RIBBON_DOT_256(b0, b1, b2);
			__m256i		x;

			da = _mm256_xor_si256(da, _mm256_srli_epi64(da, 32));
			db = _mm256_xor_si256(db, _mm256_srli_epi64(db, 32));
			x = _mm256_blend_epi32(da, _mm256_slli_epi64(db, 32), 0xaa);
			x = _mm256_xor_si256(x, _mm256_slli_epi32(x, 16));
			x = _mm256_xor_si256(x, _mm256_slli_epi32(x, 8));
			x = _mm256_xor_si256(x, _mm256_slli_epi32(x, 4));
			x = _mm256_xor_si256(x, _mm256_slli_epi32(x, 2));
			x = _mm256_xor_si256(x, _mm256_slli_epi32(x, 1));
			x = _mm256_permutevar8x32_epi32(x, order);
			/* slot i + 1, at bit 1 of the row, was left out of a and b */
			bits = (uint32_t) _mm256_movemask_ps(_mm256_castsi256_ps(x)) ^
				res[i] ^ (p1 & (0 - (uint32_t) ((row[0] >> 1) & 1)));
		}
		p2 = p1;
		p1 = bits;

		if ((i & 63) == 0)
		{
			uint8_t    *out = payload + (i >> 6) * r * 8;
			__m256i		wa = _mm256_or_si256(a0, _mm256_loadu_si256((const __m256i *) lanebits[p1 & 15]));
			__m256i		wb = _mm256_or_si256(b0, _mm256_loadu_si256((const __m256i *) lanebits[(p1 >> 4) & 15]));

			wa = _mm256_or_si256(wa, _mm256_slli_epi64(_mm256_loadu_si256((const __m256i *) lanebits[p2 & 15]), 1));
			wb = _mm256_or_si256(wb, _mm256_slli_epi64(_mm256_loadu_si256((const __m256i *) lanebits[(p2 >> 4) & 15]), 1));
			_mm256_storeu_si256((__m256i *) out, wa);
			_mm256_maskstore_epi64((long long *) (out + 32), bmask, wb);
		}
	}
}
#undef RIBBON_SHIFT1_256
#undef RIBBON_DOT_256
#undef RIBBON_LB
#endif

#ifdef RIBBON_AVX512
/*
 * The back-substitution with AVX-512, for every r: column 8g + j is lane j
 * of group g's three 512-bit registers, which hold the 192 solution bits
 * above slot i of its eight columns as ribbon_solve's s0, s1, s2 do.  Per
 * group a slot costs two double shifts and a shift, the dot product as
 * three ternary-logic operations (the slot's result bits go into the first
 * as bit 0 of each lane, which flips the lane's parity where they are set),
 * a population count per lane, and one more ternary operation that ORs
 * each lane's parity into bit 0 where the slot has a pivot: about ten
 * vector operations for eight columns, where ribbon_solve8_avx2 needs some
 * thirty to fold eight parities.  A free slot's result bits were never
 * written; the pivot mask discards what they gave.  Same bits as
 * ribbon_solve.  groups is a constant in each caller, so that the groups'
 * registers stay registers.
 */
__attribute__((target(RIBBON_AVX512_TARGET))) static inline __attribute__((always_inline)) void
ribbon_solve_avx512_body(const uint64_t *coef, const void *res, uint64_t m,
						 uint32_t r, uint8_t *payload, const int groups)
{
	const __m512i one = _mm512_set1_epi64(1);
	__m512i		a0[4],
				a1[4],
				a2[4];
	__mmask8	store[4];
	uint64_t	i;

	for (int g = 0; g < groups; g++)
	{
		a0[g] = a1[g] = a2[g] = _mm512_setzero_si512();
		/* the group's columns below r; the cast keeps eight at most */
		store[g] = (__mmask8) ribbon_mask(r - 8 * g);
	}

	for (i = m; i-- > 0; amq_poll_every(i))
	{
		const uint64_t *row = coef + 3 * i;
		const __m512i c0 = _mm512_set1_epi64((long long) row[0]);
		const __m512i c1 = _mm512_set1_epi64((long long) row[1]);
		const __m512i c2 = _mm512_set1_epi64((long long) row[2]);
		const __mmask8 pivot = (__mmask8) (0 - (row[0] & 1));
		const uint32_t bits = ribbon_res_get(res, i, groups > 1);

		for (int g = 0; g < groups; g++)
		{
			__m512i		x;

			/* bit k of a0, a1, a2 := S[i + k], bit 0 still 0 */
			a2[g] = _mm512_shldi_epi64(a2[g], a1[g], 1);
			a1[g] = _mm512_shldi_epi64(a1[g], a0[g], 1);
			a0[g] = _mm512_slli_epi64(a0[g], 1);

			/* (a2 & c2) ^ res, then ^ (a1 & c1), ^ (a0 & c0): 0x6a is (A & B) ^ C */
			x = _mm512_maskz_mov_epi64((__mmask8) (bits >> (8 * g)), one);
			x = _mm512_ternarylogic_epi64(a2[g], c2, x, 0x6a);
			x = _mm512_ternarylogic_epi64(a1[g], c1, x, 0x6a);
			x = _mm512_ternarylogic_epi64(a0[g], c0, x, 0x6a);
			x = _mm512_popcnt_epi64(x);
			/* a0 |= parity where the slot has a pivot: 0xf8 is A | (B & C) */
			a0[g] = _mm512_mask_ternarylogic_epi64(a0[g], pivot, x, one, 0xf8);
		}

		if ((i & 63) == 0)
		{
			uint8_t    *out = payload + (i >> 6) * r * 8;

			for (int g = 0; g < groups; g++)
				_mm512_mask_storeu_epi64(out + 64 * g, store[g], a0[g]);
		}
	}
}

/* ribbon_solve_avx512_body, compiled for each number of column groups */
__attribute__((target(RIBBON_AVX512_TARGET)))
static void
ribbon_solve_avx512(const uint64_t *coef, const void *res, uint64_t m,
					uint32_t r, uint8_t *payload)
{
	if (r <= 8)
		ribbon_solve_avx512_body(coef, res, m, r, payload, 1);
	else if (r <= 16)
		ribbon_solve_avx512_body(coef, res, m, r, payload, 2);
	else if (r <= 24)
		ribbon_solve_avx512_body(coef, res, m, r, payload, 3);
	else
		ribbon_solve_avx512_body(coef, res, m, r, payload, 4);
}
#endif

/* Build from distinct hashes: band the equations, then back-substitute. */
static AmqStatus
ribbon_build(AmqFilter *f, const uint64_t *hashes, size_t n,
			 const AmqAllocator *alloc)
{
	uint64_t	m = f->param[0];
	uint32_t	r = (uint32_t) f->param[1];
	uint64_t   *coef = NULL;
	void	   *res = NULL;
	uint64_t   *mixed = NULL;
	AmqStatus	st = AMQ_ERR_BUILD_FAILED;
	size_t		k;
	int			attempt;

	if (n == 0)
	{
		memset(f->payload, 0, (size_t) f->payload_len);
		return AMQ_OK;
	}

	/* the contract: distinct and ascending; anything else cannot be banded */
	for (k = 1; k < n; k++)
		if (hashes[k] <= hashes[k - 1])
			return AMQ_ERR_BUILD_FAILED;
	/* more keys than usable slots can never succeed */
	if ((uint64_t) n >= m - 1)
		return AMQ_ERR_BUILD_FAILED;

	if (m > SIZE_MAX / (3 * sizeof(uint64_t)))
		return AMQ_ERR_NOMEM;
	coef = alloc->alloc(alloc->ctx, (size_t) m * 3 * sizeof(uint64_t));
	res = coef ? alloc->alloc(alloc->ctx, (size_t) m * (r > RIBBON_NARROW ? 4 : 1)) : NULL;
	if (res == NULL)
	{
		st = AMQ_ERR_NOMEM;
		goto done;
	}

	for (attempt = 0; attempt < RIBBON_MAX_ATTEMPTS; attempt++)
	{
		uint64_t	seed = f->seed;
		const uint64_t *keys = hashes;
		uint64_t	zeroed;

		amq_poll();
		if (attempt > 0)
			seed = amq_mix64(f->seed + (uint64_t) attempt * RIBBON_SEED_STEP);

		/* seed 0 leaves the hashes as they are: already in start order */
		if (seed != 0)
		{
			if (mixed == NULL)
			{
				mixed = alloc->alloc(alloc->ctx, n * sizeof(uint64_t));
				if (mixed == NULL)
				{
					st = AMQ_ERR_NOMEM;
					goto done;
				}
			}
			for (k = 0; k < n; k++)
				mixed[k] = amq_mix64(hashes[k] ^ seed);
			/* the band is free scratch here (3m words > n); mix64 is a bijection */
			amq_sort_unique(mixed, n, coef);
			keys = mixed;
		}

		if (ribbon_band(keys, n, m, r, coef, res, &zeroed))
		{
			if (zeroed < m)
				memset(coef + 3 * zeroed, 0,
					   (size_t) (m - zeroed) * 3 * sizeof(uint64_t));
#ifdef RIBBON_AVX512
			if (amq_ribbon_solver_max >= AMQ_RIBBON_SOLVE_AVX512 &&
				__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
				__builtin_cpu_supports("avx512vpopcntdq") &&
				__builtin_cpu_supports("avx512vbmi2"))
				ribbon_solve_avx512(coef, res, m, r, f->payload);
			else
#endif
#ifdef RIBBON_AVX2
			if (r > 4 && r <= 8 && amq_ribbon_solver_max >= AMQ_RIBBON_SOLVE_AVX2 &&
				__builtin_cpu_supports("avx2"))
				ribbon_solve8_avx2(coef, res, m, r, f->payload);
			else
#endif
#ifdef RIBBON_SSE2
			if (r > 4 && r <= 8 && amq_ribbon_solver_max >= AMQ_RIBBON_SOLVE_SSE2)
				ribbon_solve8(coef, res, m, r, f->payload);
			else
#endif
				ribbon_solve(coef, res, m, r, f->payload);
			f->seed = seed;
			st = AMQ_OK;
			break;
		}
	}

done:
	if (mixed)
		alloc->free(alloc->ctx, mixed);
	if (res)
		alloc->free(alloc->ctx, res);
	if (coef)
		alloc->free(alloc->ctx, coef);
	return st;
}

/*
 * Nothing in the payload tells how full it is: every slot is some solution
 * bit.  The header's key count does: each key took one slot as its pivot.
 */
static void
ribbon_stats(const AmqFilter *f, AmqStats *st)
{
	double		m = (double) f->param[0];
	double		fill = (double) f->nkeys / m;

	st->fill = fill < 1.0 ? fill : 1.0;
	st->est_fpr = ldexp(1.0, -(int) f->param[1]);
	st->est_distinct = (double) f->nkeys;
	st->k = 0;
	st->fingerprint_bits = (uint32_t) f->param[1];
}

const AmqKindOps amq_ribbon_ops = {
	.name = "ribbon",
	.id = AMQ_KIND_RIBBON,
	.caps = AMQ_CAP_STATIC,
	.plan = ribbon_plan,
	.check = ribbon_check,
	.add = NULL,
	.build = ribbon_build,
	.grow_plan = NULL,
	.grow = NULL,
	.remove = NULL,
	.contains = ribbon_contains,
	.probe_span = ribbon_probe_span,
	.contains_span = ribbon_contains_span,
	.merge = NULL,
	.stats = ribbon_stats,
};
