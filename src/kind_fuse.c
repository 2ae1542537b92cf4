/*-------------------------------------------------------------------------
 *
 * kind_fuse.c
 *	  The "fuse" kind: a static 3-wise binary fuse filter (Graf and Lemire,
 *	  "Binary Fuse Filters: Fast and Smaller Than Xor Filters", 2022).
 *
 * Parameters: param[0] = L, the segment length in slots (a power of two,
 * 4 .. 2^18); param[1] = S, the segment count (S >= 1); param[2] = w, the
 * fingerprint width in bits (8, 16 or 32).  The payload is (S + 2) * L
 * slots of w bits, slot i at byte offset i * w / 8, little-endian.
 *
 * A key's (seeded) hash h picks three slots in three consecutive segments:
 * p0 = h mapped onto [0, S * L) by multiply-shift, then p1 = (p0 + L) xor
 * ((h >> 18) & (L - 1)) and p2 = (p0 + 2L) xor (h & (L - 1)).  Adding L
 * moves to the next segment and the xor with a value below L stays inside
 * it, so the three slots always lie in segments s, s + 1 and s + 2 with
 * s < S: inside the payload for any S and L that check() accepts.  (They
 * can be 3L slots apart, so the kind does not offer AMQ_CAP_SLICE.)  The key
 * is present when the xor of the three slots equals its fingerprint, the
 * low w bits of h ^ (h >> 32), with 0 replaced by 1.  Fingerprints are
 * never 0, so an all-zero payload (the filter of no keys) answers false to
 * every probe; the replacement does not change the false-positive rate,
 * which is 2^-w (the slot xor of an absent key is uncorrelated with its
 * fingerprint).
 *
 * Fingerprint width: the smallest of 8, 16 and 32 bits with 2^-w <= fpr,
 * so the stated rate is 2^-w (0.39% for 8 bits, 0.0015% for 16); a target
 * below 2^-32 is AMQ_ERR_PARAM.
 *
 * Sizing, for exactly n keys (the formulas of the paper for arity 3):
 * L = 2^floor(ln n / ln 3.33 + 2.25), capped at 2^18; size factor
 * max(1.125, 0.875 + 0.25 * ln 10^6 / ln n), so about 1.125 slots per key
 * from a million keys up and more for small sets, where a random
 * hypergraph needs more slack to peel; S = max(1, ceil(n * factor / L) - 2).
 * At 10^7 keys and 8 bits that is 9.02 bits per key, 1.13 times the 8
 * bits the information-theoretic bound needs for the rate 2^-8.
 *
 * Build (static: every key known up front) is the usual peeling of the
 * 3-uniform hypergraph whose edges are the keys: keep per slot the number
 * of keys touching it and the xor of their hashes; a slot with one key
 * names that key, which is removed from its other two slots, and so on.
 * If every key peels, the slots are assigned in reverse peeling order,
 * each key's own slot getting the value that makes its three slots xor to
 * its fingerprint.  The keys are first bucketed by the top bits of h,
 * which orders them by segment, so the counting and peeling passes walk
 * the scratch arrays almost sequentially instead of missing the cache on
 * every key (2.3 times faster at 10^7 keys).  If peeling stalls (a
 * 2-core remains) the build retries with the next seed, up to
 * FUSE_MAX_ATTEMPTS; each attempt succeeds with probability well above
 * 1/2, so running out means the keys were not distinct.  Scratch is about
 * 26 bytes per key, from the caller's allocator.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "amq.h"

#define FUSE_MIN_SEGMENT	4
#define FUSE_MAX_SEGMENT	(UINT64_C(1) << 18)
#define FUSE_MAX_ATTEMPTS	100
/* at most 2^16 buckets for the locality pass: 256 KB of counters */
#define FUSE_MAX_BUCKET_BITS 16
#define FUSE_GOLDEN			UINT64_C(0x9e3779b97f4a7c15)

/* Smallest width whose rate 2^-w meets fpr, or 0 when none does. */
static int
fuse_width(double fpr)
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
fuse_hash(uint64_t hash, uint64_t seed)
{
	return amq_mix64(hash ^ seed);
}

/* nonzero fingerprint of w bits; mask is 2^w - 1 */
static inline uint32_t
fuse_fingerprint(uint64_t h, uint32_t mask)
{
	uint32_t	x = (uint32_t) (h ^ (h >> 32)) & mask;

	return x + (x == 0);
}

/* the three slots of h, in segments s, s + 1 and s + 2 */
static inline void
fuse_slots(uint64_t h, uint64_t seglen, uint64_t span, uint64_t *p)
{
	uint64_t	p0 = amq_reduce(h, span);

	p[0] = p0;
	p[1] = (p0 + seglen) ^ ((h >> 18) & (seglen - 1));
	p[2] = (p0 + 2 * seglen) ^ (h & (seglen - 1));
}

static inline uint32_t
fuse_load16(const uint8_t *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8);
}

static inline uint32_t
fuse_get(const uint8_t *payload, uint64_t i, int w)
{
	if (w == 8)
		return payload[i];
	if (w == 16)
		return fuse_load16(payload + 2 * i);
	return amq_load32(payload + 4 * i);
}

static inline void
fuse_set(uint8_t *payload, uint64_t i, int w, uint32_t v)
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
fuse_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	double		n;
	double		lnn;
	double		seglen;
	double		factor;
	double		segs;
	int			w;
	uint64_t	bytes_per_slot;

	if (!(fpr > 0.0 && fpr < 1.0))
		return AMQ_ERR_PARAM;
	w = fuse_width(fpr);
	if (w == 0)
		return AMQ_ERR_PARAM;
	bytes_per_slot = (uint64_t) w / 8;

	/* one key and none get the smallest geometry; the formulas need n >= 2 */
	n = (double) (capacity > 2 ? capacity : 2);

	/* test in floating point first so nothing below can overflow */
	if (!(n * 1.125 * (double) bytes_per_slot <= (double) AMQ_MAX_PAYLOAD))
		return AMQ_ERR_TOO_LARGE;

	lnn = log(n);
	seglen = ldexp(1.0, (int) floor(lnn / log(3.33) + 2.25));
	if (seglen > (double) FUSE_MAX_SEGMENT)
		seglen = (double) FUSE_MAX_SEGMENT;
	factor = fmax(1.125, 0.875 + 0.25 * log(1e6) / lnn);
	segs = ceil(round(n * factor) / seglen) - 2.0;
	if (segs < 1.0)
		segs = 1.0;
	if (!((segs + 2.0) * seglen * (double) bytes_per_slot <=
		  (double) AMQ_MAX_PAYLOAD))
		return AMQ_ERR_TOO_LARGE;

	f->param[0] = (uint64_t) seglen;
	f->param[1] = (uint64_t) segs;
	f->param[2] = (uint64_t) w;
	f->payload_len = (f->param[1] + 2) * f->param[0] * bytes_per_slot;
	return AMQ_OK;
}

static AmqStatus
fuse_check(const AmqFilter *f)
{
	uint64_t	seglen = f->param[0];
	uint64_t	segs = f->param[1];
	uint64_t	w = f->param[2];

	if (seglen < FUSE_MIN_SEGMENT || seglen > FUSE_MAX_SEGMENT ||
		(seglen & (seglen - 1)) != 0)
		return AMQ_ERR_CORRUPT;
	if (w != 8 && w != 16 && w != 32)
		return AMQ_ERR_CORRUPT;
	/* bounding segs first keeps the product below 2^50 */
	if (segs < 1 || segs > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_CORRUPT;
	if (f->payload_len > AMQ_MAX_PAYLOAD ||
		f->payload_len != (segs + 2) * seglen * (w / 8))
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

/*
 * The probe: three loads, no data-dependent branch.  The width switch is
 * the same for every probe of a filter, so it predicts perfectly.
 */
static bool
fuse_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = fuse_hash(hash, f->seed);
	uint64_t	seglen = f->param[0];
	uint64_t	p[3];
	const uint8_t *b = f->payload;

	fuse_slots(h, seglen, f->param[1] * seglen, p);
	switch (f->param[2])
	{
		case 8:
			return (uint32_t) (b[p[0]] ^ b[p[1]] ^ b[p[2]]) ==
				fuse_fingerprint(h, 0xff);
		case 16:
			return (fuse_load16(b + 2 * p[0]) ^ fuse_load16(b + 2 * p[1]) ^
					fuse_load16(b + 2 * p[2])) == fuse_fingerprint(h, 0xffff);
		default:
			return (amq_load32(b + 4 * p[0]) ^ amq_load32(b + 4 * p[1]) ^
					amq_load32(b + 4 * p[2])) ==
				fuse_fingerprint(h, 0xffffffffu);
	}
}

/* the seed of attempt i: deterministic, never 0 */
static uint64_t
fuse_attempt_seed(uint64_t seed, int attempt)
{
	uint64_t	s = amq_mix64(seed + (uint64_t) (attempt + 1) * FUSE_GOLDEN);

	return s != 0 ? s : FUSE_GOLDEN;
}

/* allocate count elements of size bytes, NULL also when the size overflows */
static void *
fuse_alloc(const AmqAllocator *alloc, uint64_t count, size_t size)
{
	if (count == 0)
		count = 1;
	if (count > SIZE_MAX / size)
		return NULL;
	return alloc->alloc(alloc->ctx, (size_t) count * size);
}

static void
fuse_free(const AmqAllocator *alloc, void *p)
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
fuse_build(AmqFilter *f, const uint64_t *hashes, size_t n,
		   const AmqAllocator *alloc)
{
	const uint64_t seglen = f->param[0];
	const uint64_t span = f->param[1] * seglen;
	const uint64_t nslots = span + 2 * seglen;
	const int	w = (int) f->param[2];
	const uint32_t fpmask = (w == 32) ? 0xffffffffu : ((1u << w) - 1);
	const uint64_t orig_seed = f->seed;
	uint64_t   *keys = NULL;	/* bucketed hashes, then the peel order */
	uint64_t   *xh = NULL;
	uint32_t   *cnt = NULL;
	uint32_t   *alone = NULL;
	uint32_t   *bucket = NULL;
	int			bucket_bits;
	uint64_t	nbuckets;
	AmqStatus	result = AMQ_ERR_BUILD_FAILED;
	int			attempt;
	size_t		i;

	memset(f->payload, 0, f->payload_len);
	if (n == 0)
	{
		/* all zero, and fingerprints are never 0: every probe says no */
		f->seed = fuse_attempt_seed(orig_seed, 0);
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

	/* about one bucket per segment, at least two */
	bucket_bits = 1;
	while (bucket_bits < FUSE_MAX_BUCKET_BITS &&
		   (UINT64_C(1) << bucket_bits) < f->param[1])
		bucket_bits++;
	nbuckets = UINT64_C(1) << bucket_bits;

	if (alloc == NULL || alloc->alloc == NULL)
		return AMQ_ERR_NOMEM;
	keys = fuse_alloc(alloc, n, sizeof(uint64_t));
	xh = keys ? fuse_alloc(alloc, nslots, sizeof(uint64_t)) : NULL;
	cnt = xh ? fuse_alloc(alloc, nslots, sizeof(uint32_t)) : NULL;
	alone = cnt ? fuse_alloc(alloc, nslots, sizeof(uint32_t)) : NULL;
	bucket = alone ? fuse_alloc(alloc, nbuckets, sizeof(uint32_t)) : NULL;
	if (bucket == NULL)
	{
		result = AMQ_ERR_NOMEM;
		goto done;
	}
	for (attempt = 0; attempt < FUSE_MAX_ATTEMPTS; attempt++)
	{
		const uint64_t seed = fuse_attempt_seed(orig_seed, attempt);
		const int	shift = 64 - bucket_bits;
		uint32_t	sum = 0;
		size_t		top = 0;
		size_t		npeeled = 0;
		bool		duplicate = false;
		uint64_t	s;

		/* bucket the hashes by their top bits, i.e. by segment */
		memset(bucket, 0, nbuckets * sizeof(uint32_t));
		for (i = 0; i < n; i++)
			bucket[fuse_hash(hashes[i], seed) >> shift]++;
		for (s = 0; s < nbuckets; s++)
		{
			uint32_t	c = bucket[s];

			bucket[s] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
		{
			uint64_t	h = fuse_hash(hashes[i], seed);

			keys[bucket[h >> shift]++] = h;
		}

		/* count the keys of every slot */
		memset(cnt, 0, nslots * sizeof(uint32_t));
		memset(xh, 0, nslots * sizeof(uint64_t));
		for (i = 0; i < n; i++)
		{
			uint64_t	h = keys[i];
			uint64_t	p[3];

			fuse_slots(h, seglen, span, p);
			cnt[p[0]] += 4;
			cnt[p[1]] = (cnt[p[1]] + 4) ^ 1;
			cnt[p[2]] = (cnt[p[2]] + 4) ^ 2;
			xh[p[0]] ^= h;
			xh[p[1]] ^= h;
			xh[p[2]] ^= h;
		}

		/*
		 * Peel.  A slot is pushed when it first holds exactly one key, which
		 * happens at most once, so the stack never exceeds nslots.  The
		 * peeled slots overwrite keys[], no longer needed: a peeled slot's
		 * xh is its key.
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
			fuse_slots(h, seglen, span, p);
			keys[npeeled++] = slot;
			cnt[slot] = 0;

			/*
			 * Remove the key from its other two slots.  The branches are
			 * deliberate: a branch-free push makes the next pop wait for
			 * this slot's count to load, which measured 40% slower.
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
				uint64_t	slot = keys[i];
				uint64_t	h = xh[slot];
				uint64_t	p[3];

				fuse_slots(h, seglen, span, p);
				fuse_set(b, slot, w,
						 fuse_fingerprint(h, fpmask) ^ fuse_get(b, p[0], w) ^
						 fuse_get(b, p[1], w) ^ fuse_get(b, p[2], w));
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
	fuse_free(alloc, bucket);
	fuse_free(alloc, alone);
	fuse_free(alloc, cnt);
	fuse_free(alloc, xh);
	fuse_free(alloc, keys);
	return result;
}

/*
 * fill is the fraction of slots holding a nonzero value: about n / slots
 * (0.89 from a million keys up) once built, 0 for the filter of no keys.
 * An all-zero payload rejects every probe (fingerprints are never 0), so
 * its rate is 0; otherwise it is the rate the width gives, 2^-w.
 */
static void
fuse_stats(const AmqFilter *f, AmqStats *st)
{
	const int	w = (int) f->param[2];
	const uint64_t nslots = f->payload_len / ((uint64_t) w / 8);
	uint64_t	nonzero = 0;
	uint64_t	i;

	for (i = 0; i < nslots; i++)
		nonzero += fuse_get(f->payload, i, w) != 0;

	st->fill = (double) nonzero / (double) nslots;
	st->est_fpr = nonzero > 0 ? ldexp(1.0, -w) : 0.0;
	st->est_distinct = (double) f->nkeys;
	st->k = 3;
	st->fingerprint_bits = (uint32_t) w;
}

const AmqKindOps amq_fuse_ops = {
	.name = "fuse",
	.id = AMQ_KIND_FUSE,
	.caps = AMQ_CAP_STATIC,
	.plan = fuse_plan,
	.check = fuse_check,
	.add = NULL,
	.build = fuse_build,
	.grow_plan = NULL,
	.grow = NULL,
	.remove = NULL,
	.contains = fuse_contains,
	.probe_span = NULL,
	.contains_span = NULL,
	.merge = NULL,
	.stats = fuse_stats,
};
