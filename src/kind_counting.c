/*-------------------------------------------------------------------------
 *
 * kind_counting.c
 *	  The "counting" kind: a counting Bloom filter with 4-bit counters,
 *	  which can remove keys.
 *
 * Parameters: param[0] = m, the number of counters (a multiple of 16, at
 * least 16); param[1] = k, counters per key (1..30); param[2] is reserved
 * and zero.  The payload is m/2 bytes, two counters per byte: counter i
 * lives in byte i >> 1, in the low nibble when i is even and the high
 * nibble when it is odd.  Being byte-local, the layout is the same on
 * every host.
 *
 * m and k follow the standard Bloom optimum, as in kind_bloom.c: m =
 * -n ln p / (ln 2)^2 counters and k = round(m/n ln 2), so the filter costs
 * four times the bits of a plain Bloom filter for the same rate.  The k
 * positions come from the one 64-bit hash by the same double hashing and
 * multiply-shift as kind_bloom.c.
 *
 * Add increments the key's k counters and remove decrements them, so a key
 * added twice and removed once is still found.  A counter saturates at 15
 * and then stays 15 forever: once it has overflowed it no longer knows how
 * many keys it counts, and decrementing it could bring it to zero while
 * keys that still map to it remain, a false negative.  A stuck counter
 * only costs false positives.  With the optimal k a counter holds ln 2
 * keys on average, so one reaching 15 is about a 10^-15 event per counter.
 *
 * Remove first looks at all k counters: if one is zero the key is not in
 * the filter and nothing is changed (decrementing the others would corrupt
 * the counts of keys that are).  A key that was never added but whose
 * counters are all nonzero (a false positive) cannot be told apart, so
 * removing keys that were never added remains the caller's error.
 *
 * Union adds the counters (saturating), so the union of two filters is the
 * filter of the multiset sum of their keys; intersection takes the
 * per-counter minimum.  Both run on 64-bit words, 16 counters at a time.
 *
 * Nothing here allocates; the payload belongs to the caller.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "core.h"

#define COUNTING_MAX		15

/* masks of the low nibble (and bit 4) of every byte */
#define LOW_NIBBLES		UINT64_C(0x0f0f0f0f0f0f0f0f)
#define BIT4S			UINT64_C(0x1010101010101010)
#define ONE_PER_NIBBLE	UINT64_C(0x1111111111111111)

/* The 4-bit counter at pos. */
static inline unsigned
counter_get(const uint8_t *payload, uint64_t pos)
{
	return (payload[pos >> 1] >> ((pos & 1) * 4)) & 15;
}

/* The counters and hash count that reach fpr for capacity keys. */
static AmqStatus
counting_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	/* bloom's geometry, a counter per bit, two counters per byte */
	return amq_bloom_plan_cells(f, capacity, fpr, 2);
}

/* Validate a counting filter's parameters against its payload. */
static AmqStatus
counting_check(const AmqFilter *f)
{
	return amq_bloom_check_cells(f, 2);
}

/* Increment the key's k counters, each saturating at COUNTING_MAX. */
static AmqStatus
counting_add(AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	step = amq_bloom_step(h);
	uint64_t	m = f->param[0];
	uint32_t	k = (uint32_t) f->param[1];
	uint8_t    *c = f->payload;
	uint32_t	i;

	for (i = 0; i < k; i++)
	{
		uint64_t	pos = amq_reduce(h, m);
		unsigned	shift = (unsigned) (pos & 1) * 4;

		if (((c[pos >> 1] >> shift) & 15) != COUNTING_MAX)
			c[pos >> 1] += (uint8_t) (1u << shift);
		h += step;
	}
	return AMQ_OK;
}

/* Decrement the key's k counters. */
static AmqStatus
counting_remove(AmqFilter *f, uint64_t hash)
{
	uint64_t	h0 = amq_seeded(f, hash);
	uint64_t	step = amq_bloom_step(h0);
	uint64_t	m = f->param[0];
	uint32_t	k = (uint32_t) f->param[1];
	uint8_t    *c = f->payload;
	uint64_t	h;
	uint32_t	i;

	/* a zero counter: the key is absent, change nothing */
	h = h0;
	for (i = 0; i < k; i++)
	{
		if (counter_get(c, amq_reduce(h, m)) == 0)
			return AMQ_OK;
		h += step;
	}

	/*
	 * Saturated counters stay.  The zero test only matters when two of the
	 * key's positions coincide and the key was never added: it keeps a
	 * counter from wrapping to 15.
	 */
	h = h0;
	for (i = 0; i < k; i++)
	{
		uint64_t	pos = amq_reduce(h, m);
		unsigned	shift = (unsigned) (pos & 1) * 4;
		unsigned	v = (c[pos >> 1] >> shift) & 15;

		if (v != 0 && v != COUNTING_MAX)
			c[pos >> 1] -= (uint8_t) (1u << shift);
		h += step;
	}
	return AMQ_OK;
}

/* Stop at the first zero counter, as kind_bloom.c does and for its reason. */
static bool
counting_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	step = amq_bloom_step(h);
	uint64_t	m = f->param[0];
	uint32_t	k = (uint32_t) f->param[1];
	const uint8_t *c = f->payload;
	uint32_t	i;

	for (i = 0; i < k; i++)
	{
		if (counter_get(c, amq_reduce(h, m)) == 0)
			return false;
		h += step;
	}
	return true;
}

/*
 * Sixteen counters at a time: the even and the odd nibbles are spread into
 * the low halves of the eight bytes, where a sum (at most 30) or a biased
 * difference (16 + a - b, in 1..31) cannot carry into the next byte; bit 4
 * of each byte then tells overflow, or a >= b.
 */
static inline uint64_t
nibbles_add_sat(uint64_t a, uint64_t b)
{
	uint64_t	sum = a + b;		/* a, b: nibbles in byte lows */
	uint64_t	over = ((sum & BIT4S) >> 4) * 15;

	return (sum | over) & LOW_NIBBLES;
}

/* The counter-wise minimum of two words of 4-bit counters. */
static inline uint64_t
nibbles_min(uint64_t a, uint64_t b)
{
	uint64_t	diff = (a | BIT4S) - b;
	uint64_t	a_ge = ((diff & BIT4S) >> 4) * 15;	/* 0xf where a >= b */

	return (b & a_ge) | (a & ~a_ge);
}

/* Union (counters summed) or intersection (minimum) of counting filters. */
static AmqStatus
counting_merge(AmqFilter *dst, const AmqFilter *src, AmqMergeOp op)
{
	uint64_t	len = dst->payload_len;
	uint64_t	off;

	if (!amq_same_geometry(dst, src))
		return AMQ_ERR_MISMATCH;

	/* bytewise lanes, so word order does not matter; len is a multiple of 8 */
	for (off = 0; off < len; off += 8)
	{
		uint64_t	a,
					b,
					lo,
					hi;

		memcpy(&a, dst->payload + off, 8);
		memcpy(&b, src->payload + off, 8);
		if (op == AMQ_MERGE_UNION)
		{
			lo = nibbles_add_sat(a & LOW_NIBBLES, b & LOW_NIBBLES);
			hi = nibbles_add_sat((a >> 4) & LOW_NIBBLES, (b >> 4) & LOW_NIBBLES);
		}
		else
		{
			lo = nibbles_min(a & LOW_NIBBLES, b & LOW_NIBBLES);
			hi = nibbles_min((a >> 4) & LOW_NIBBLES, (b >> 4) & LOW_NIBBLES);
		}
		a = lo | (hi << 4);
		memcpy(dst->payload + off, &a, 8);
	}
	return AMQ_OK;
}

/*
 * A nonzero counter plays the part of a set bit, so fill, est_fpr and
 * est_distinct are those of a Bloom filter of m bits.
 */
static void
counting_stats(const AmqFilter *f, AmqStats *st)
{
	double		m = (double) f->param[0];
	double		k = (double) f->param[1];
	uint64_t	nonzero = 0;
	uint64_t	off;
	double		fill;
	double		empty;

	for (off = 0; off < f->payload_len; off += 8)
	{
		uint64_t	x;

		memcpy(&x, f->payload + off, 8);
		/* fold each nibble onto its lowest bit */
		x |= x >> 1;
		x |= x >> 2;
		nonzero += (uint64_t) __builtin_popcountll(x & ONE_PER_NIBBLE);
	}

	fill = (double) nonzero / m;

	/*
	 * A filter with no zero counter says only "at least this many"; count
	 * it as half a counter short of full so the estimate stays finite.
	 */
	empty = (nonzero == f->param[0]) ? 0.5 / m : 1.0 - fill;

	st->fill = fill;
	st->est_fpr = pow(fill, k);
	st->est_distinct = -(m / k) * log(empty);
	st->k = (uint32_t) f->param[1];
	st->fingerprint_bits = 0;
}

const AmqKindOps amq_counting_ops = {
	.name = "counting",
	.id = AMQ_KIND_COUNTING,
	.caps = AMQ_CAP_ADD | AMQ_CAP_REMOVE | AMQ_CAP_UNION | AMQ_CAP_INTERSECT,
	.plan = counting_plan,
	.check = counting_check,
	.add = counting_add,
	.build = NULL,
	.grow_plan = NULL,
	.grow = NULL,
	.remove = counting_remove,
	.contains = counting_contains,
	.probe_span = NULL,
	.contains_span = NULL,
	.merge = counting_merge,
	.stats = counting_stats,
};
