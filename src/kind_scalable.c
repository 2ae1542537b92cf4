/*-------------------------------------------------------------------------
 *
 * kind_scalable.c
 *	  The "scalable" kind: a scalable Bloom filter (Almeida, Baquero,
 *	  Preguica and Hutchison, 2007), a chain of blocked Bloom stages that
 *	  grows a stage at a time and never fills up.
 *
 * Parameters: param[0] = c0, the capacity of stage 0 (>= 1); param[1] = the
 * number of stages (1..SCALABLE_MAX_STAGES); param[2] = the keys added to
 * the last stage (at most its capacity).
 *
 * Stage i holds c0 * 2^i keys at false-positive rate p_i = fpr (1 - r) r^i
 * with the tightening ratio r = 0.85, so however many stages there are the
 * total rate 1 - prod(1 - p_i) stays below sum p_i = fpr (1 - r^n) < fpr.
 *
 * A filter built from a known set of keys (an aggregate, amq_build) has
 * stage 0 sized for exactly those keys, and growing past them is the
 * exception: flag AMQ_FLAG_SCALABLE_SIZED (format version 2) then gives
 * stage 0 the share q = 0.95 of the rate and the later stages the rest,
 * p_0 = q fpr and p_i = (1 - q) fpr (1 - r) r^(i-1) for i >= 1, whose sum
 * is below fpr as well.  Stage 0 then costs what one blocked filter at
 * 0.95 fpr does (10.65 bits per key at 1% against blocked's 10.53, where
 * the unflagged schedule's 0.15% costs 15.6), and a first added stage
 * about 27 bits per key of its capacity.
 *
 * Each stage is a "blocked" filter (split block Bloom, kind_blocked.h) of
 * nblocks_i 32-byte blocks, sized by amq_blocked_ops.plan for (c0 2^i,
 * p_i), so the layout is a pure function of (c0, fpr, the sized flag, the
 * number of stages) and a probe of a stage reads one cache line.  Doubling the capacity
 * keeps the number of stages, hence the cost of an absent key, logarithmic
 * in the number of keys.  The price is space: stage i spends about
 * 3.9 + 0.34 i bits per key more than one filter at fpr would (the factors
 * 1 - r and r^i), and up to half of the newest stage is still empty; from
 * c0 = 1000 to 10^6 keys at 1% that is about 20.6 bits per key.
 *
 * Payload: stage 0's blocks, then for each later stage its blocks followed
 * by a 32-byte trailer whose first 8 bytes hold its nblocks (little-endian)
 * and whose other 24 bytes are zero:
 *
 *	 [stage 0 blocks][stage 1 blocks][trailer 1] ...
 *										[stage n-1 blocks][trailer n-1]
 *
 * Sizing a stage runs the blocked kind's numerical model, far too slow for
 * every probe, so the trailers let a probe find the stages walking back
 * from the end of the payload: stage 0 needs none, being what remains.
 * check() recomputes the whole layout from the params and f->fpr and
 * verifies payload_len against it.  The trailers are payload, which may
 * hold anything, so the walk bounds each trailer it reads: a bad one ends
 * the walk, the bytes left over being read as one stage, and no content
 * can send a probe out of bounds.
 *
 * Every stage probes with the same seeded hash: the stages hold different
 * keys, so their false positives are independent anyway.  A probe finds
 * the key's block in every stage and prefetches them all before testing
 * any, so an absent key's misses (one per stage) overlap.
 *
 * Growth (AMQ_CAP_GROW): add fills the last stage and returns AMQ_ERR_FULL
 * once it holds its capacity.  grow_plan then gives the payload length
 * with one more stage, the caller extends the payload with zeros, and grow
 * writes the new trailer and bumps the params.  Every add is counted, a
 * duplicate too: callers skip keys already present if they want exact
 * counts.  Nothing here allocates; the payload belongs to the caller.
 *
 *-------------------------------------------------------------------------
 */
#include "core.h"
#include "kind_blocked.h"

#define SCALABLE_RATIO		0.85	/* tightening ratio r */
#define SCALABLE_SIZED_SHARE 0.95	/* stage 0's share q of fpr, when sized */
#define SCALABLE_MAX_STAGES	64
#define SCALABLE_TRAILER	32		/* one block, to keep blocks aligned */
#define BLOCK				AMQ_BLOCKED_BLOCK_BYTES

/*
 * nblocks of stage i of a filter with stage-0 capacity c0, target fpr and
 * header flags; 0 when that stage cannot be built (its capacity overflows
 * or it exceeds the largest blocked filter).  p_i is computed by repeated
 * multiplication, exact IEEE arithmetic rather than pow(), so that hosts
 * agree on it; the blocked model itself uses libm, so two hosts could
 * still disagree on a stage whose rate falls within rounding of a
 * block-count boundary.
 */
static uint64_t
scalable_stage_blocks(uint64_t c0, double fpr, uint32_t flags, uint32_t i)
{
	AmqFilter	tmp;
	double		p;
	uint32_t	j = 0;

	if (i >= SCALABLE_MAX_STAGES || c0 < 1 || c0 > (UINT64_MAX >> i))
		return 0;
	if (!(flags & AMQ_FLAG_SCALABLE_SIZED))
		p = fpr * (1.0 - SCALABLE_RATIO);
	else if (i == 0)
		p = fpr * SCALABLE_SIZED_SHARE;
	else
	{
		p = fpr * (1.0 - SCALABLE_SIZED_SHARE) * (1.0 - SCALABLE_RATIO);
		j = 1;
	}
	for (; j < i; j++)
		p *= SCALABLE_RATIO;

	memset(&tmp, 0, sizeof(tmp));
	tmp.kind = AMQ_KIND_BLOCKED;
	tmp.fpr = p;
	if (amq_blocked_ops.plan(&tmp, c0 << i, p) != AMQ_OK)
		return 0;
	return tmp.param[0];
}

/* capacity of the last stage; check() has made sure it does not overflow */
static inline uint64_t
scalable_last_capacity(const AmqFilter *f)
{
	return f->param[0] << (f->param[1] - 1);
}

/*
 * Step from the end of a later stage (its trailer included) to its start:
 * *nb gets its nblocks and the offset of its blocks is returned.  A
 * trailer that would leave stage 0 without a block is bad: then 0 is
 * returned and the caller reads [0, end) as one stage.
 */
static inline uint64_t
scalable_step(const uint8_t *p, uint64_t end, uint64_t *nb)
{
	uint64_t	n;

	if (end < 3 * BLOCK)
		return 0;
	n = amq_load64(p + end - SCALABLE_TRAILER);
	if (n == 0 || n > (end - SCALABLE_TRAILER - BLOCK) / BLOCK)
		return 0;
	*nb = n;
	return end - SCALABLE_TRAILER - n * BLOCK;
}

/* The first stage's geometry for capacity keys at fpr. */
static AmqStatus
scalable_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	uint64_t	c0 = capacity > 0 ? capacity : 1;
	uint64_t	nb;

	if (!(fpr > 0.0 && fpr < 1.0))
		return AMQ_ERR_PARAM;
	nb = scalable_stage_blocks(c0, fpr, f->flags, 0);
	if (nb == 0 || nb > AMQ_MAX_PAYLOAD / BLOCK)
		return AMQ_ERR_TOO_LARGE;

	f->param[0] = c0;
	f->param[1] = 1;
	f->param[2] = 0;
	f->payload_len = nb * BLOCK;
	return AMQ_OK;
}

/* Validate a scalable filter's stages against its payload. */
static AmqStatus
scalable_check(const AmqFilter *f)
{
	uint64_t	c0 = f->param[0];
	uint64_t	nstages = f->param[1];
	uint64_t	total = 0;
	uint32_t	i;

	if (c0 < 1 || nstages < 1 || nstages > SCALABLE_MAX_STAGES)
		return AMQ_ERR_CORRUPT;
	if (c0 > (UINT64_MAX >> (nstages - 1)))
		return AMQ_ERR_CORRUPT;
	if (f->param[2] > scalable_last_capacity(f))
		return AMQ_ERR_CORRUPT;
	if (f->payload_len > AMQ_MAX_PAYLOAD || f->payload_len % BLOCK != 0)
		return AMQ_ERR_CORRUPT;

	/*
	 * Recompute the layout, stopping as soon as it outgrows the payload so
	 * that a forged header costs no more than a genuine one.
	 */
	for (i = 0; i < nstages; i++)
	{
		uint64_t	nb = scalable_stage_blocks(c0, f->fpr, f->flags, i);
		uint64_t	len;

		if (nb == 0 || nb > (f->payload_len - total) / BLOCK)
			return AMQ_ERR_CORRUPT;
		len = nb * BLOCK + (i > 0 ? SCALABLE_TRAILER : 0);
		if (len > f->payload_len - total)
			return AMQ_ERR_CORRUPT;
		total += len;
	}
	if (total != f->payload_len)
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

/* Add the key to the newest stage; full when that stage is. */
static AmqStatus
scalable_add(AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	nb = f->payload_len / BLOCK;
	uint64_t	start = 0;

	if (f->param[2] >= scalable_last_capacity(f))
		return AMQ_ERR_FULL;
	if (f->param[1] > 1)
	{
		uint64_t	n;
		uint64_t	s = scalable_step(f->payload, f->payload_len, &n);

		if (s > 0)
		{
			start = s;
			nb = n;
		}
	}
	amq_blocked_insert(amq_blocked_at(f->payload + start, nb, h), (uint32_t) h);
	f->param[2]++;
	return AMQ_OK;
}

/*
 * Find the key's block in every stage first, prefetching each, then test
 * them newest first (the newest stage is the largest, so the likeliest to
 * hold a key).  An absent key, the common case when a filter prunes rows,
 * must test every stage: issuing all the cache misses before waiting on
 * any lets them overlap, which measured about 1.8x faster at 14 stages
 * than testing each stage as it is found.
 */
static bool
scalable_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	const uint8_t *p = f->payload;
	const uint8_t *block[SCALABLE_MAX_STAGES];
	uint64_t	end = f->payload_len;
	uint64_t	s;
	int			n = 0;
	int			i;

	/* check() caps the stages at SCALABLE_MAX_STAGES; so does the loop */
	for (s = f->param[1]; s > 1 && n < SCALABLE_MAX_STAGES - 1; s--)
	{
		uint64_t	nb;
		uint64_t	start = scalable_step(p, end, &nb);

		if (start == 0)
			break;
		block[n] = amq_blocked_at(p + start, nb, h);
		__builtin_prefetch(block[n]);
		n++;
		end = start;
	}
	block[n] = amq_blocked_at(p, end / BLOCK, h);
	__builtin_prefetch(block[n]);
	n++;

	for (i = 0; i < n; i++)
		if (amq_blocked_probe(block[i], (uint32_t) h))
			return true;
	return false;
}

/* The payload length with one more stage. */
static AmqStatus
scalable_grow_plan(const AmqFilter *f, uint64_t *new_len)
{
	uint64_t	nb = scalable_stage_blocks(f->param[0], f->fpr, f->flags,
										   (uint32_t) f->param[1]);

	/* nb <= 2^32 blocks, so nothing below overflows */
	if (nb == 0 ||
		f->payload_len + nb * BLOCK + SCALABLE_TRAILER > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_TOO_LARGE;
	*new_len = f->payload_len + nb * BLOCK + SCALABLE_TRAILER;
	return AMQ_OK;
}

/* the new bytes are zero: write the trailer and take the new stage on */
static void
scalable_grow(AmqFilter *f, uint64_t new_len)
{
	uint8_t    *t = f->payload + new_len - SCALABLE_TRAILER;

	amq_store64(t, (new_len - f->payload_len - SCALABLE_TRAILER) / BLOCK);
	memset(t + 8, 0, SCALABLE_TRAILER - 8);
	f->param[1]++;
	f->param[2] = 0;
	f->payload_len = new_len;
}

/* the blocked kind's stats of one stage */
static void
scalable_stage_stats(const AmqFilter *f, uint64_t start, uint64_t nb,
					 AmqStats *st)
{
	AmqFilter	stage;

	memset(&stage, 0, sizeof(stage));
	stage.kind = AMQ_KIND_BLOCKED;
	stage.fpr = f->fpr;
	stage.param[0] = nb;
	stage.payload_len = nb * BLOCK;
	stage.payload = f->payload + start;
	amq_blocked_ops.stats(&stage, st);
}

/* Estimated rate and distinct keys over every stage. */
static void
scalable_stats(const AmqFilter *f, AmqStats *st)
{
	uint64_t	end = f->payload_len;
	uint64_t	nb = 0;
	uint64_t	start = 0;
	uint64_t	s = f->param[1];
	double		ones = 0.0;
	double		bits = 0.0;
	double		pass = 1.0;		/* P(no stage answers falsely) */
	double		distinct = 0.0;

	/* newest first, stage 0 (or what a bad trailer leaves) last */
	for (;;)
	{
		AmqStats	one;

		if (s > 1 && (start = scalable_step(f->payload, end, &nb)) > 0)
			s--;
		else
		{
			start = 0;
			nb = end / BLOCK;
			s = 0;
		}
		scalable_stage_stats(f, start, nb, &one);
		ones += one.fill * 256.0 * (double) nb;
		bits += 256.0 * (double) nb;
		pass *= 1.0 - one.est_fpr;
		distinct += one.est_distinct;
		if (s == 0)
			break;
		end = start;
	}

	st->fill = ones / bits;
	st->est_fpr = 1.0 - pass;
	st->est_distinct = distinct;
	st->k = 8;
	st->fingerprint_bits = 0;
}

const AmqKindOps amq_scalable_ops = {
	.name = "scalable",
	.id = AMQ_KIND_SCALABLE,
	.caps = AMQ_CAP_ADD | AMQ_CAP_GROW,
	.plan = scalable_plan,
	.check = scalable_check,
	.add = scalable_add,
	.build = NULL,
	.grow_plan = scalable_grow_plan,
	.grow = scalable_grow,
	.remove = NULL,
	.contains = scalable_contains,
	.probe_span = NULL,
	.contains_span = NULL,
	.merge = NULL,
	.stats = scalable_stats,
};
