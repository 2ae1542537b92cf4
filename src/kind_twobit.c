/*-------------------------------------------------------------------------
 *
 * kind_twobit.c
 *	  The "twobit" kind: a Bloom filter that sets two bits in one 32-bit
 *	  word per key, for fixed memory budgets run at high fill.
 *
 * Parameters: param[0] = W, the number of 32-bit words (1 <= W <=
 * AMQ_MAX_PAYLOAD / 4); param[1] and param[2] are reserved and zero.  The
 * payload is W little-endian 32-bit words, 4 * W bytes.
 *
 * A key's (seeded) hash h picks one word by multiply-shift, amq_reduce(h,
 * W), which reads the high bits of h.  Its low 32 bits place the two bits
 * in that word: bit b1 = h & 31, and bit b2 = b1 + 1 + r (mod 32), where
 * r in [0, 30] is a multiply-shift of bits 5..31 by 31.  Add ORs the two
 * bits into the word; a probe loads the word once and tests
 * (word & mask) == mask.  Every operation therefore touches one word: one
 * cache miss, one atomic-friendly OR, no data-dependent branch.  Words are
 * at most 2^28, so each word spans at least 2^36 consecutive hashes and
 * the low 32 bits are uniform whatever word was chosen.
 *
 * Why two bits: a single bit per key (k = 1) is the cheapest filter but
 * its false-positive rate is the fill itself; demanding two bits of the
 * same word keeps the single memory access and roughly halves the rate of
 * a small fixed-size filter at high load (2^21 bits holding 2^18 keys:
 * 11.8% with one bit, 5.4% with two by the model below).  More bits per
 * word buy little more and cost more fill.
 *
 * The two bits are forced to differ.  Were they allowed to coincide (1/32
 * of keys), those keys would set one bit only, and probes landing on one
 * bit would pass on it alone: computed the same way, that raises the rate
 * by 7% at 4 keys per word, 15% at 2 and 28% at 1 (a 1% filter holds
 * 1.45), for no saving in time or space.
 *
 * Sizing.  A fresh key passes when both its bits a != b are set.  Every
 * key leaves a given bit clear with probability 1 - 1/(16 W) (its word
 * 1/W, then 2 of 32 bits) and leaves both a and b clear with probability
 * 1 - 61/(496 W) (C(30,2)/C(32,2) = 435/496 of the pairs miss both), keys
 * being independent.  By inclusion-exclusion the expected false-positive
 * rate after n keys is exactly
 *
 *	  fpr(n, W) = 1 - 2 (1 - 1/(16 W))^n + (1 - 61/(496 W))^n,
 *
 * which already averages over the binomial load of the words: the uneven
 * load is what costs a one-word filter its space, and leaving it out
 * would undersize the filter.  plan() searches for the fewest words
 * meeting the target after "capacity" keys (fpr falls as W grows), so the
 * measured rate lands on the target.  The price of one access is space:
 * 22 bits per key at 1%, 101 at 0.1% (a Bloom filter needs 9.6 and 14.4),
 * so this kind suits fixed budgets and moderate rates, not tight ones.
 *
 * The filter never refuses a key: past its capacity the false-positive
 * rate just rises, which is the point of a fixed budget.
 *
 * Nothing here allocates; the payload belongs to the caller.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "core.h"

#define TWOBIT_MAX_WORDS	(AMQ_MAX_PAYLOAD / 4)

/* ordered pairs of distinct bits in a word, 2 * C(32, 2) */
#define TWOBIT_PAIRS		992.0

/* the two bits a (seeded) hash sets in its word */
static inline uint32_t
twobit_mask(uint64_t h)
{
	uint32_t	lo = (uint32_t) h;
	uint32_t	b1 = lo & 31;
	uint32_t	r = ((lo >> 5) * 31u) >> 27;	/* 27 bits times 31 fits */
	uint32_t	b2 = (b1 + 1 + r) & 31;

	return ((uint32_t) 1 << b1) | ((uint32_t) 1 << b2);
}

/* The word a hash selects. */
static inline uint64_t
twobit_word(uint64_t h, uint64_t nwords)
{
	return amq_reduce(h, nwords);
}

/*
 * Expected false-positive rate of W words after n keys (header comment),
 * written with expm1/log1p: for small loads the terms nearly cancel, and
 * this keeps the result accurate down to the smallest rates.
 */
static double
twobit_model_fpr(double n, double nwords)
{
	double		p = 1.0 / nwords;

	return -2.0 * expm1(n * log1p(-p / 16.0)) +
		expm1(n * log1p(-61.0 * p / 496.0));
}

/* The fewest words that reach fpr for capacity keys. */
static AmqStatus
twobit_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	double		n = (double) (capacity > 0 ? capacity : 1);
	uint64_t	lo = 1;
	uint64_t	hi = TWOBIT_MAX_WORDS;

	if (!(fpr > 0.0 && fpr < 1.0))
		return AMQ_ERR_PARAM;

	if (twobit_model_fpr(n, (double) hi) > fpr)
		return AMQ_ERR_TOO_LARGE;

	/* fewest words meeting the target; the model falls as W grows */
	while (lo < hi)
	{
		uint64_t	mid = lo + (hi - lo) / 2;

		if (twobit_model_fpr(n, (double) mid) <= fpr)
			hi = mid;
		else
			lo = mid + 1;
	}

	f->param[0] = lo;
	f->param[1] = 0;
	f->param[2] = 0;
	f->payload_len = lo * 4;
	return AMQ_OK;
}

/* Validate a twobit filter's parameters against its payload. */
static AmqStatus
twobit_check(const AmqFilter *f)
{
	uint64_t	nwords = f->param[0];

	if (nwords < 1 || nwords > TWOBIT_MAX_WORDS)
		return AMQ_ERR_CORRUPT;
	if (f->payload_len != nwords * 4)
		return AMQ_ERR_CORRUPT;
	if (f->param[1] != 0 || f->param[2] != 0)
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

/* Set the key's two bits in its word. */
static AmqStatus
twobit_add(AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint8_t    *word = f->payload + twobit_word(h, f->param[0]) * 4;

	amq_store32(word, amq_load32(word) | twobit_mask(h));
	return AMQ_OK;
}

/* Are both of the key's bits set in its word? */
static bool
twobit_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint32_t	mask = twobit_mask(h);

	return (amq_load32(f->payload + twobit_word(h, f->param[0]) * 4) & mask) == mask;
}

/* The one word a probe reads. */
static void
twobit_probe_span(const AmqFilter *f, uint64_t hash,
				  uint64_t *offset, uint32_t *length)
{
	*offset = twobit_word(amq_seeded(f, hash), f->param[0]) * 4;
	*length = 4;
}

/* Probe the key's word, read apart from the filter. */
static bool
twobit_contains_span(const AmqFilter *f, uint64_t hash, const uint8_t *span)
{
	uint32_t	mask = twobit_mask(amq_seeded(f, hash));

	return (amq_load32(span) & mask) == mask;
}

/*
 * est_fpr is exact given the payload: the mean over words of
 * C(pc,2)/C(32,2).  est_distinct inverts the expected number of set bits:
 * each key covers a given bit with probability 1/(16 W) (its word 1/W,
 * then 2 of 32 bits), so after n keys a bit is clear with probability
 * (1 - 1/(16 W))^n, and n = ln(clear fraction) / ln(1 - 1/(16 W)), linear
 * counting over the 32 W bits.  Inverting the total rather than each
 * word's count avoids the bias a per-word inversion has at low load.
 */
static void
twobit_stats(const AmqFilter *f, AmqStats *st)
{
	uint64_t	nwords = f->param[0];
	double		bits = 32.0 * (double) nwords;
	uint64_t	per_pc[33];
	uint64_t	ones = 0;
	uint64_t	i;
	double		fpr_sum = 0.0;
	double		clear;
	int			pc;

	memset(per_pc, 0, sizeof(per_pc));
	for (i = 0; i < nwords; i++)
		per_pc[__builtin_popcount(amq_load32(f->payload + 4 * i))]++;
	for (pc = 0; pc <= 32; pc++)
	{
		ones += per_pc[pc] * (uint64_t) pc;
		fpr_sum += (double) per_pc[pc] * (pc * (pc - 1)) / TWOBIT_PAIRS;
	}

	/* a full filter says only "many": count it as half a bit short of full */
	clear = (ones == 32 * nwords) ? 0.5 / bits : 1.0 - (double) ones / bits;

	st->fill = (double) ones / bits;
	st->est_fpr = fpr_sum / (double) nwords;
	st->est_distinct = log(clear) / log1p(-1.0 / (16.0 * (double) nwords));
	st->k = 2;
	st->fingerprint_bits = 0;
}

const AmqKindOps amq_twobit_ops = {
	.name = "twobit",
	.id = AMQ_KIND_TWOBIT,
	.caps = AMQ_CAP_ADD | AMQ_CAP_UNION | AMQ_CAP_INTERSECT | AMQ_CAP_SLICE,
	.plan = twobit_plan,
	.check = twobit_check,
	.add = twobit_add,
	.build = NULL,
	.grow_plan = NULL,
	.grow = NULL,
	.remove = NULL,
	.contains = twobit_contains,
	.probe_span = twobit_probe_span,
	.contains_span = twobit_contains_span,
	.merge = amq_bitarray_merge,
	.stats = twobit_stats,
};
