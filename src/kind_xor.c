/*-------------------------------------------------------------------------
 *
 * kind_xor.c
 *	  The "xor" kind: a static 3-wise xor filter (Graf and Lemire, "Xor
 *	  Filters: Faster and Smaller Than Bloom and Cuckoo Filters", 2020).
 *
 * Parameters: param[0] = B, the block length in slots (B >= 1); param[1] =
 * w, the fingerprint width in bits (8, 16 or 32); param[2] is reserved and
 * zero.  The payload is three blocks of B slots of w bits, slot i at byte
 * offset i * w / 8, little-endian.
 *
 * A key's (seeded) hash h picks one slot in each block, by multiply-shift
 * of h and of h rotated by 21 and by 42 bits: p0 = reduce(h, B),
 * p1 = B + reduce(rotl(h, 21), B), p2 = 2B + reduce(rotl(h, 42), B), all
 * below 3B whatever B is.  The key is present when the xor of the three
 * slots equals its fingerprint, the low w bits of h ^ (h >> 32) with 0
 * replaced by 1.  Fingerprints are never 0, so an all-zero payload (the
 * filter of no keys) answers false to every probe; the replacement does not
 * change the false-positive rate, 2^-w.
 *
 * Fingerprint width: the smallest of 8, 16 and 32 bits with 2^-w <= fpr,
 * so the stated rate is 2^-w (0.39% for 8 bits, 0.0015% for 16); a target
 * below 2^-32 is AMQ_ERR_PARAM.
 *
 * Sizing, for exactly n keys: floor(1.23 n) + 32 slots, rounded up to a
 * multiple of 3, the paper's bound above which a random 3-partite
 * hypergraph peels with high probability (the 32 carries small sets).
 * That is 9.84 bits per key at 8 bits; the binary fuse filter ("fuse")
 * gets the same rate in 1.125 n slots with better locality, and is the
 * better choice from a few thousand keys up.
 *
 * Build: peel the hypergraph whose edges are the keys (per slot, the
 * number of keys and the xor of their hashes; a slot with one key names
 * it), then assign the slots in reverse peeling order, each key's own slot
 * getting the value that makes its three slots xor to its fingerprint.  A
 * stalled peel retries with the next seed, up to XOR_MAX_ATTEMPTS; each
 * attempt succeeds with probability near 1 for large n and above 1/2 for
 * small, so running out means the keys were not distinct.  Scratch is
 * about 24 bytes per key, from the caller's allocator.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "amq.h"

#define XOR_MAX_ATTEMPTS	100
#define XOR_GOLDEN			UINT64_C(0x9e3779b97f4a7c15)

/* Smallest width whose rate 2^-w meets fpr, or 0 when none does. */
static int
xor_width(double fpr)
{
	if (fpr >= 1.0 / 256.0)
		return 8;
	if (fpr >= 1.0 / 65536.0)
		return 16;
	if (fpr >= 1.0 / 4294967296.0)
		return 32;
	return 0;
}

/*
 * The hash the filter works with.  Always remixed (also for seed 0) so the
 * retries of a build see independent mappings; the seed a build leaves
 * behind is never 0.
 */
static inline uint64_t
xor_hash(uint64_t hash, uint64_t seed)
{
	return amq_mix64(hash ^ seed);
}

/* nonzero fingerprint of w bits; mask is 2^w - 1 */
static inline uint32_t
xor_fingerprint(uint64_t h, uint32_t mask)
{
	uint32_t	x = (uint32_t) (h ^ (h >> 32)) & mask;

	return x + (x == 0);
}

static inline uint64_t
xor_rotl(uint64_t h, int r)
{
	return (h << r) | (h >> (64 - r));
}

/* the three slots of h, one per block */
static inline void
xor_slots(uint64_t h, uint64_t blocklen, uint64_t *p)
{
	p[0] = amq_reduce(h, blocklen);
	p[1] = blocklen + amq_reduce(xor_rotl(h, 21), blocklen);
	p[2] = 2 * blocklen + amq_reduce(xor_rotl(h, 42), blocklen);
}

static inline uint32_t
xor_load16(const uint8_t *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8);
}

static inline uint32_t
xor_get(const uint8_t *payload, uint64_t i, int w)
{
	if (w == 8)
		return payload[i];
	if (w == 16)
		return xor_load16(payload + 2 * i);
	return amq_load32(payload + 4 * i);
}

static inline void
xor_set(uint8_t *payload, uint64_t i, int w, uint32_t v)
{
	if (w == 8)
		payload[i] = (uint8_t) v;
	else if (w == 16)
	{
		payload[2 * i] = (uint8_t) v;
		payload[2 * i + 1] = (uint8_t) (v >> 8);
	}
	else
		amq_store32(payload + 4 * i, v);
}

static AmqStatus
xor_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	double		n = (double) (capacity > 0 ? capacity : 1);
	double		blocklen;
	int			w;
	uint64_t	bytes_per_slot;

	if (!(fpr > 0.0 && fpr < 1.0))
		return AMQ_ERR_PARAM;
	w = xor_width(fpr);
	if (w == 0)
		return AMQ_ERR_PARAM;
	bytes_per_slot = (uint64_t) w / 8;

	/* in floating point first so the conversion cannot overflow */
	blocklen = ceil((floor(1.23 * n) + 32.0) / 3.0);
	if (!(3.0 * blocklen * (double) bytes_per_slot <= (double) AMQ_MAX_PAYLOAD))
		return AMQ_ERR_TOO_LARGE;

	f->param[0] = (uint64_t) blocklen;
	f->param[1] = (uint64_t) w;
	f->param[2] = 0;
	f->payload_len = 3 * f->param[0] * bytes_per_slot;
	return AMQ_OK;
}

static AmqStatus
xor_check(const AmqFilter *f)
{
	uint64_t	blocklen = f->param[0];
	uint64_t	w = f->param[1];

	/* bounding blocklen first keeps the product below 2^34 */
	if (blocklen < 1 || blocklen > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_CORRUPT;
	if (w != 8 && w != 16 && w != 32)
		return AMQ_ERR_CORRUPT;
	if (f->param[2] != 0)
		return AMQ_ERR_CORRUPT;
	if (f->payload_len > AMQ_MAX_PAYLOAD ||
		f->payload_len != 3 * blocklen * (w / 8))
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

/* Three loads, no data-dependent branch; the width switch always predicts. */
static bool
xor_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = xor_hash(hash, f->seed);
	uint64_t	p[3];
	const uint8_t *b = f->payload;

	xor_slots(h, f->param[0], p);
	switch (f->param[1])
	{
		case 8:
			return (uint32_t) (b[p[0]] ^ b[p[1]] ^ b[p[2]]) ==
				xor_fingerprint(h, 0xff);
		case 16:
			return (xor_load16(b + 2 * p[0]) ^ xor_load16(b + 2 * p[1]) ^
					xor_load16(b + 2 * p[2])) == xor_fingerprint(h, 0xffff);
		default:
			return (amq_load32(b + 4 * p[0]) ^ amq_load32(b + 4 * p[1]) ^
					amq_load32(b + 4 * p[2])) ==
				xor_fingerprint(h, 0xffffffffu);
	}
}

/* the seed of attempt i: deterministic, never 0 */
static uint64_t
xor_attempt_seed(uint64_t seed, int attempt)
{
	uint64_t	s = amq_mix64(seed + (uint64_t) (attempt + 1) * XOR_GOLDEN);

	return s != 0 ? s : XOR_GOLDEN;
}

/* allocate count elements of size bytes, NULL also when the size overflows */
static void *
xor_alloc(const AmqAllocator *alloc, uint64_t count, size_t size)
{
	if (count == 0)
		count = 1;
	if (count > SIZE_MAX / size)
		return NULL;
	return alloc->alloc(alloc->ctx, (size_t) count * size);
}

static void
xor_free(const AmqAllocator *alloc, void *p)
{
	if (p != NULL && alloc->free != NULL)
		alloc->free(alloc->ctx, p);
}

/*
 * Scratch per slot: cnt holds 4 * (keys in the slot) plus, in its low two
 * bits, the xor of which of its three slots (0, 1, 2) this one is for each
 * key; xh the xor of the keys' hashes.  When a slot holds one key, xh is
 * that key and the low bits of cnt say which of its slots this is.
 */
static AmqStatus
xor_build(AmqFilter *f, const uint64_t *hashes, size_t n,
		  const AmqAllocator *alloc)
{
	const uint64_t blocklen = f->param[0];
	const uint64_t nslots = 3 * blocklen;
	const int	w = (int) f->param[1];
	const uint32_t fpmask = (w == 32) ? 0xffffffffu : ((1u << w) - 1);
	const uint64_t orig_seed = f->seed;
	uint64_t   *xh = NULL;
	uint32_t   *cnt = NULL;
	uint32_t   *alone = NULL;
	uint32_t   *order = NULL;
	AmqStatus	result = AMQ_ERR_BUILD_FAILED;
	int			attempt;
	size_t		i;

	memset(f->payload, 0, f->payload_len);
	if (n == 0)
	{
		/* all zero, and fingerprints are never 0: every probe says no */
		f->seed = xor_attempt_seed(orig_seed, 0);
		return AMQ_OK;
	}

	/*
	 * Contract breaches that can never peel: more keys than slots, and
	 * duplicates (adjacent in the sorted input).  Unsorted duplicates are
	 * caught below once peeling stalls.
	 */
	if ((uint64_t) n > nslots)
		return AMQ_ERR_BUILD_FAILED;
	for (i = 1; i < n; i++)
		if (hashes[i] == hashes[i - 1])
			return AMQ_ERR_BUILD_FAILED;

	if (alloc == NULL || alloc->alloc == NULL)
		return AMQ_ERR_NOMEM;
	xh = xor_alloc(alloc, nslots, sizeof(uint64_t));
	cnt = xh ? xor_alloc(alloc, nslots, sizeof(uint32_t)) : NULL;
	alone = cnt ? xor_alloc(alloc, nslots, sizeof(uint32_t)) : NULL;
	order = alone ? xor_alloc(alloc, n, sizeof(uint32_t)) : NULL;
	if (order == NULL)
	{
		result = AMQ_ERR_NOMEM;
		goto done;
	}

	for (attempt = 0; attempt < XOR_MAX_ATTEMPTS; attempt++)
	{
		const uint64_t seed = xor_attempt_seed(orig_seed, attempt);
		size_t		top = 0;
		size_t		npeeled = 0;
		bool		duplicate = false;
		uint64_t	s;

		/* count the keys of every slot */
		memset(cnt, 0, nslots * sizeof(uint32_t));
		memset(xh, 0, nslots * sizeof(uint64_t));
		for (i = 0; i < n; i++)
		{
			uint64_t	h = xor_hash(hashes[i], seed);
			uint64_t	p[3];

			xor_slots(h, blocklen, p);
			cnt[p[0]] += 4;
			cnt[p[1]] = (cnt[p[1]] + 4) ^ 1;
			cnt[p[2]] = (cnt[p[2]] + 4) ^ 2;
			xh[p[0]] ^= h;
			xh[p[1]] ^= h;
			xh[p[2]] ^= h;
		}

		/*
		 * Peel.  A slot is pushed when it first holds exactly one key, which
		 * happens at most once, so the stack never exceeds nslots.
		 */
		for (s = 0; s < nslots; s++)
			if ((cnt[s] >> 2) == 1)
				alone[top++] = (uint32_t) s;
		while (top > 0)
		{
			uint32_t	slot = alone[--top];
			uint32_t	c = cnt[slot];
			uint64_t	h;
			uint64_t	p[3];
			uint32_t	j;
			uint32_t	k;

			if ((c >> 2) != 1)
				continue;		/* its key was peeled from another slot */
			j = c & 3;
			h = xh[slot];
			xor_slots(h, blocklen, p);
			order[npeeled++] = slot;
			cnt[slot] = 0;

			/*
			 * Remove the key from its other two slots.  Branches, not a
			 * branch-free push: that would make the next pop wait for this
			 * slot's count to load.
			 */
			for (k = 0; k < 3; k++)
			{
				uint64_t	q = p[k];

				if (k == j)
					continue;
				cnt[q] = (cnt[q] - 4) ^ k;
				xh[q] ^= h;
				if ((cnt[q] >> 2) == 1)
					alone[top++] = (uint32_t) q;
			}
		}

		if (npeeled == n)
		{
			/*
			 * Assign in reverse peeling order.  A key's own slot is still 0
			 * when its turn comes (no key peeled before it, which is
			 * assigned after it, uses that slot), so xor-ing all three
			 * slots into it gives the value that completes the fingerprint.
			 */
			uint8_t    *b = f->payload;

			for (i = n; i-- > 0;)
			{
				uint32_t	slot = order[i];
				uint64_t	h = xh[slot];
				uint64_t	p[3];

				xor_slots(h, blocklen, p);
				xor_set(b, slot, w,
						xor_fingerprint(h, fpmask) ^ xor_get(b, p[0], w) ^
						xor_get(b, p[1], w) ^ xor_get(b, p[2], w));
			}
			f->seed = seed;
			result = AMQ_OK;
			break;
		}

		/*
		 * Two keys alone in a slot whose hashes xor to 0 are the same key:
		 * no seed will ever separate them.
		 */
		for (s = 0; s < nslots && !duplicate; s++)
			duplicate = (cnt[s] >> 2) == 2 && xh[s] == 0;
		if (duplicate)
			break;
	}

done:
	xor_free(alloc, order);
	xor_free(alloc, alone);
	xor_free(alloc, cnt);
	xor_free(alloc, xh);
	return result;
}

/*
 * fill is the fraction of slots holding a nonzero value: about n / slots
 * (0.81) once built, 0 for the filter of no keys.  An all-zero payload
 * rejects every probe (fingerprints are never 0), so its rate is 0;
 * otherwise it is the rate the width gives, 2^-w.
 */
static void
xor_stats(const AmqFilter *f, AmqStats *st)
{
	const int	w = (int) f->param[1];
	const uint64_t nslots = 3 * f->param[0];
	uint64_t	nonzero = 0;
	uint64_t	i;

	for (i = 0; i < nslots; i++)
		nonzero += xor_get(f->payload, i, w) != 0;

	st->fill = (double) nonzero / (double) nslots;
	st->est_fpr = nonzero > 0 ? ldexp(1.0, -w) : 0.0;
	st->est_distinct = (double) f->nkeys;
	st->k = 3;
	st->fingerprint_bits = (uint32_t) w;
}

const AmqKindOps amq_xor_ops = {
	.name = "xor",
	.id = AMQ_KIND_XOR,
	.caps = AMQ_CAP_STATIC,
	.plan = xor_plan,
	.check = xor_check,
	.add = NULL,
	.build = xor_build,
	.grow_plan = NULL,
	.grow = NULL,
	.remove = NULL,
	.contains = xor_contains,
	.probe_span = NULL,
	.contains_span = NULL,
	.merge = NULL,
	.stats = xor_stats,
};
