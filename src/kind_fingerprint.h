/*-------------------------------------------------------------------------
 *
 * kind_fingerprint.h
 *	  Helpers shared by the static 3-wise fingerprint kinds, "xor" and
 *	  "fuse" (kind_xor.c, kind_fuse.c).
 *
 * Both kinds store one w-bit fingerprint per slot (w = 8, 16 or 32), slot
 * i at byte offset i * w / 8, little-endian, and say a key is present when
 * the xor of its three slots equals its fingerprint.  They differ only in
 * how a key's hash picks its three slots and in their geometry; everything
 * else lives here, as static inline functions so the probe and the build
 * loops compile to the same code as when each kind had its own copy:
 *
 *	- the fingerprint width for a target rate, and the check of a stored one;
 *	- the seeded hash a filter works with and the nonzero fingerprint of it;
 *	- reading and writing w-bit slots;
 *	- the deterministic seed of each build attempt;
 *	- the scratch allocation of a build and the peeling steps on it;
 *	- the stats of a payload of fingerprints.
 *
 * Everything here is part of the on-disk format: a change to any of it
 * changes the bytes of every xor and fuse filter.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KIND_FINGERPRINT_H
#define KIND_FINGERPRINT_H

#include <math.h>

#include "core.h"

#define AMQ_FP_GOLDEN		UINT64_C(0x9e3779b97f4a7c15)

/* Smallest width whose rate 2^-w meets fpr, or 0 when none does. */
static inline int
amq_fp_width(double fpr)
{
	if (fpr >= 1.0 / 256.0)
		return 8;
	if (fpr >= 1.0 / 65536.0)
		return 16;
	if (fpr >= AMQ_FP_FPR_MIN)
		return 32;
	return 0;
}

/* whether a (stored, untrusted) width is one amq_fp_width can give */
static inline bool
amq_fp_width_valid(uint64_t w)
{
	return w == 8 || w == 16 || w == 32;
}

/* 2^w - 1 for a valid width */
static inline uint32_t
amq_fp_mask(int w)
{
	return (w == 32) ? 0xffffffffu : ((1u << w) - 1);
}

/*
 * The hash the filter works with.  Always remixed (also for seed 0) so the
 * retries of a build see independent mappings; the seed a build leaves
 * behind is never 0.
 */
static inline uint64_t
amq_fp_hash(uint64_t hash, uint64_t seed)
{
	return amq_mix64(hash ^ seed);
}

/* nonzero fingerprint of w bits; mask is 2^w - 1 */
static inline uint32_t
amq_fp_fingerprint(uint64_t h, uint32_t mask)
{
	uint32_t	x = (uint32_t) (h ^ (h >> 32)) & mask;

	return x + (x == 0);
}

static inline uint32_t
amq_fp_load16(const uint8_t *p)
{
	return (uint32_t) p[0] | ((uint32_t) p[1] << 8);
}

/* slot i of a payload of w-bit fingerprints */
static inline uint32_t
amq_fp_get(const uint8_t *payload, uint64_t i, int w)
{
	if (w == 8)
		return payload[i];
	if (w == 16)
		return amq_fp_load16(payload + 2 * i);
	return amq_load32(payload + 4 * i);
}

static inline void
amq_fp_set(uint8_t *payload, uint64_t i, int w, uint32_t v)
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

/*
 * The probe, given the seeded hash h and its three slots p: three loads, no
 * data-dependent branch.  The width switch is the same for every probe of a
 * filter, so it predicts perfectly.
 */
static inline bool
amq_fp_match3(const uint8_t *b, const uint64_t *p, uint64_t w, uint64_t h)
{
	switch (w)
	{
		case 8:
			return (uint32_t) (b[p[0]] ^ b[p[1]] ^ b[p[2]]) ==
				amq_fp_fingerprint(h, 0xff);
		case 16:
			return (amq_fp_load16(b + 2 * p[0]) ^ amq_fp_load16(b + 2 * p[1]) ^
					amq_fp_load16(b + 2 * p[2])) ==
				amq_fp_fingerprint(h, 0xffff);
		default:
			return (amq_load32(b + 4 * p[0]) ^ amq_load32(b + 4 * p[1]) ^
					amq_load32(b + 4 * p[2])) ==
				amq_fp_fingerprint(h, 0xffffffffu);
	}
}

/* the seed of attempt i: deterministic, never 0 */
static inline uint64_t
amq_fp_attempt_seed(uint64_t seed, int attempt)
{
	uint64_t	s = amq_mix64(seed + (uint64_t) (attempt + 1) * AMQ_FP_GOLDEN);

	return s != 0 ? s : AMQ_FP_GOLDEN;
}

/* allocate count elements of size bytes, NULL also when the size overflows */
static inline void *
amq_fp_alloc(const AmqAllocator *alloc, uint64_t count, size_t size)
{
	if (count == 0)
		count = 1;
	if (count > SIZE_MAX / size)
		return NULL;
	return alloc->alloc(alloc->ctx, (size_t) count * size);
}

static inline void
amq_fp_free(const AmqAllocator *alloc, void *p)
{
	if (p != NULL && alloc->free != NULL)
		alloc->free(alloc->ctx, p);
}

/*
 * Contract breaches of a build's input that can never peel: more keys
 * than slots, and duplicates (adjacent in the sorted input).  Unsorted
 * duplicates are caught once peeling stalls (amq_fp_has_duplicate).
 */
static inline bool
amq_fp_input_ok(const uint64_t *hashes, size_t n, uint64_t nslots)
{
	size_t		i;

	if ((uint64_t) n > nslots)
		return false;
	for (i = 1; i < n; i++)
		if (hashes[i] == hashes[i - 1])
			return false;
	return true;
}

/*
 * The peeling scratch of a build, per slot: cnt holds 4 * (keys in the
 * slot) plus, in its low two bits, the xor of which of its three slots
 * (0, 1, 2) this one is for each key; xh the xor of the keys' hashes.  When
 * a slot holds one key, xh is that key and the low bits of cnt say which of
 * its slots this is.
 *
 * Two layouts of the same scratch.  fuse, whose three slots lie in one
 * window and whose keys are bucketed by window, streams through two arrays,
 * cnt[] and xh[].  xor's slots are unrelated cache misses, so it keeps both
 * fields of a slot in one packed 12-byte entry (AmqFpSlot): one line per
 * slot touched (two for the one entry in eight that straddles a line), not
 * one per array.  Padded to 16 bytes it would cost fuse-like streaming more
 * than the straddles cost xor; packed, fuse still measured 6% slower with
 * it than with two arrays (with its former depth-first peel), so fuse keeps
 * them.
 *
 * fuse's cnt[] is one byte a slot (AmqFpCount): a quarter of the memory
 * to fault in and to fetch while peeling (at 10^7 keys the build took 28
 * to 30 ns per key, against 31 to 33 with four-byte counts).  A byte
 * counts up to 63 keys, where a slot holds 2.7 on average: more than 63
 * wrap the count, which amq_fp_count_key reports, and the build then tries
 * its next seed.  Only keys chosen to collide can get there, and they do
 * not collide again under another seed.
 */
typedef uint8_t AmqFpCount;

/*
 * Count key h, whose slots are p, into the scratch.  Returns nonzero when a
 * count wrapped (a slot's 64th key): the scratch is then wrong for this
 * seed.
 */
static inline uint32_t
amq_fp_count_key(AmqFpCount *cnt, uint64_t *xh, const uint64_t *p, uint64_t h)
{
	AmqFpCount	c0 = (AmqFpCount) (cnt[p[0]] + 4);
	AmqFpCount	c1 = (AmqFpCount) ((cnt[p[1]] + 4) ^ 1);
	AmqFpCount	c2 = (AmqFpCount) ((cnt[p[2]] + 4) ^ 2);

	cnt[p[0]] = c0;
	cnt[p[1]] = c1;
	cnt[p[2]] = c2;
	xh[p[0]] ^= h;
	xh[p[1]] ^= h;
	xh[p[2]] ^= h;
	return (c0 < 4) | (c1 < 4) | (c2 < 4);
}

/*
 * Take key h out of slot q, its k-th.  When one key is left there, queue
 * that key: its hash and which of its slots q is (qh, qj at *tail).  The
 * entry at *tail is written either way (no branch), so qh and qj need one
 * entry beyond the most the queue can hold.  A queued key that is peeled
 * from another slot first leaves this slot's count at 0, which is how its
 * entry is known to be stale when taken.
 */
static inline void
amq_fp_unpeel_one(AmqFpCount *cnt, uint64_t *xh, uint64_t *qh, uint8_t *qj,
				  size_t *tail, uint64_t q, uint32_t k, uint64_t h)
{
	uint32_t	c = (AmqFpCount) ((cnt[q] - 4) ^ k);
	uint64_t	x = xh[q] ^ h;

	cnt[q] = (AmqFpCount) c;
	xh[q] = x;
	qh[*tail] = x;
	qj[*tail] = (uint8_t) (c & 3);
	*tail += (c >> 2) == 1;
}

/*
 * The same for the two slots of h other than its j-th, p[j], in their
 * order (ka < kb), picked without a branch.
 */
static inline void
amq_fp_unpeel_others(AmqFpCount *cnt, uint64_t *xh, uint64_t *qh, uint8_t *qj,
					 size_t *tail, const uint64_t *p, uint32_t j, uint64_t h)
{
	uint32_t	ka = (j == 0);
	uint32_t	kb = 2 - (j == 2);

	amq_fp_unpeel_one(cnt, xh, qh, qj, tail, p[ka], ka, h);
	amq_fp_unpeel_one(cnt, xh, qh, qj, tail, p[kb], kb, h);
}

/* the same scratch, one entry per slot (xor) */
typedef struct __attribute__((packed)) AmqFpSlot
{
	uint64_t	xh;
	uint32_t	cnt;
} AmqFpSlot;

/* count key h in slot q, its k-th (xor's counting by buckets does one) */
static inline void
amq_fp_slot_count_one(AmqFpSlot *sl, uint64_t q, uint32_t k, uint64_t h)
{
	sl[q].cnt = (sl[q].cnt + 4) ^ k;
	sl[q].xh ^= h;
}

static inline void
amq_fp_slot_count_key(AmqFpSlot *sl, const uint64_t *p, uint64_t h)
{
	amq_fp_slot_count_one(sl, p[0], 0, h);
	amq_fp_slot_count_one(sl, p[1], 1, h);
	amq_fp_slot_count_one(sl, p[2], 2, h);
}

/*
 * Take key h out of slot q, its k-th.  When one key is left there, queue
 * that key: its hash and which of its slots q is (qh, qj at *tail).  When
 * none is, the key queued from q has just been peeled from another slot:
 * mark q in gone, so that its queue entry is skipped.  The entry at *tail
 * is written either way (no branch), so qh and qj need one entry beyond
 * the most the queue can hold.
 */
static inline void
amq_fp_slot_unpeel_one(AmqFpSlot *sl, uint64_t *qh, uint8_t *qj, size_t *tail,
					   uint64_t *gone, uint64_t q, uint32_t k, uint64_t h)
{
	uint32_t	c = (sl[q].cnt - 4) ^ k;
	uint64_t	x = sl[q].xh ^ h;

	sl[q].cnt = c;
	sl[q].xh = x;
	qh[*tail] = x;
	qj[*tail] = (uint8_t) (c & 3);
	*tail += (c >> 2) == 1;
	if ((c >> 2) == 0)
		gone[q >> 6] |= UINT64_C(1) << (q & 63);
}

/* the same for the two slots of h other than its j-th, p[j] */
static inline void
amq_fp_slot_unpeel_others(AmqFpSlot *sl, uint64_t *qh, uint8_t *qj,
						  size_t *tail, uint64_t *gone, const uint64_t *p,
						  uint32_t j, uint64_t h)
{
	uint32_t	ka = (j == 0);
	uint32_t	kb = 2 - (j == 2);

	amq_fp_slot_unpeel_one(sl, qh, qj, tail, gone, p[ka], ka, h);
	amq_fp_slot_unpeel_one(sl, qh, qj, tail, gone, p[kb], kb, h);
}

/*
 * Assign key h, peeled from slot, whose slots are p: in reverse peeling
 * order a key's own slot is still 0 when its turn comes (no key peeled
 * before it, which is assigned after it, uses that slot), so xor-ing all
 * three slots into it gives the value that completes the fingerprint.
 */
static inline void
amq_fp_assign(uint8_t *b, uint64_t slot, int w, uint32_t fpmask,
			  const uint64_t *p, uint64_t h)
{
	amq_fp_set(b, slot, w,
			   amq_fp_fingerprint(h, fpmask) ^ amq_fp_get(b, p[0], w) ^
			   amq_fp_get(b, p[1], w) ^ amq_fp_get(b, p[2], w));
}

/*
 * After a stalled peel: two keys alone in a slot whose hashes xor to 0 are
 * the same key, which no seed will ever separate.
 */
static inline bool
amq_fp_has_duplicate(const AmqFpCount *cnt, const uint64_t *xh, uint64_t nslots)
{
	bool		duplicate = false;
	uint64_t	s;

	for (s = 0; s < nslots && !duplicate; s++)
		duplicate = (cnt[s] >> 2) == 2 && xh[s] == 0;
	return duplicate;
}

static inline bool
amq_fp_slot_has_duplicate(const AmqFpSlot *sl, uint64_t nslots)
{
	bool		duplicate = false;
	uint64_t	s;

	for (s = 0; s < nslots && !duplicate; s++)
		duplicate = (sl[s].cnt >> 2) == 2 && sl[s].xh == 0;
	return duplicate;
}

/*
 * Stats of nslots fingerprints of w bits, probing k = 3 slots per key.
 * fill is the fraction of slots holding a nonzero value, 0 for the filter
 * of no keys.  An all-zero payload rejects every probe (fingerprints are
 * never 0), so its rate is 0; otherwise it is the rate the width gives,
 * 2^-w.
 */
static inline void
amq_fp_stats(const AmqFilter *f, int w, uint64_t nslots, AmqStats *st)
{
	uint64_t	nonzero = 0;
	uint64_t	i;

	for (i = 0; i < nslots; i++)
		nonzero += amq_fp_get(f->payload, i, w) != 0;

	st->fill = (double) nonzero / (double) nslots;
	st->est_fpr = nonzero > 0 ? ldexp(1.0, -w) : 0.0;
	st->est_distinct = (double) f->nkeys;
	st->k = 3;
	st->fingerprint_bits = (uint32_t) w;
}

#endif							/* KIND_FINGERPRINT_H */
