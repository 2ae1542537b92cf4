/*-------------------------------------------------------------------------
 *
 * kind_cuckoo.c
 *	  The "cuckoo" kind: a cuckoo filter (Fan, Andersen, Kaminsky and
 *	  Mitzenmacher, 2014) with buckets of four bit-packed fingerprints.
 *
 * Parameters: param[0] = nb, the number of buckets (1 <= nb <= 2^30, any
 * value, not only powers of two); param[1] = fb, the fingerprint width in
 * bits (4..32); param[2] is reserved and zero.
 *
 * Payload: nb buckets of four fb-bit slots, bit-packed with no gap, so slot
 * j of bucket b occupies bits [(4b + j) fb, (4b + j + 1) fb) of the
 * little-endian bit string (bit i is bit i & 7 of byte i >> 3).  Then come
 * 8 bytes of padding (16 when fb > 16) that are never written: they let
 * every bucket be read with one unaligned 8- (16-) byte load.  A bucket
 * starts at bit 4 fb b, a multiple of 4, so it lies at bit offset 0 or 4
 * of its first byte (0 when fb is even) and 4 fb + 4 <= 64 (128) bits
 * suffice.  The payload is ceil(nb fb / 2) + 8 (or 16) bytes.
 *
 * A slot holding 0 is empty; fingerprints are drawn uniformly from
 * [1, 2^fb - 1] by multiply-shift of the low 32 bits of the (seeded) key
 * hash, so no computed fingerprint is 0 and none is favoured.  The first
 * bucket is the hash reduced onto [0, nb) by multiply-shift (its high
 * bits).  The alternate bucket is
 *
 *		i2 = (t(fp) - i1) mod nb
 *
 * with t(fp) the fingerprint times the 64-bit golden ratio, reduced onto
 * [0, nb) by multiply-shift: an involution for any nb (t - (t - i1) = i1),
 * computed with one compare and one conditional add instead of a modulo.
 * Moving a fingerprint thus needs only the fingerprint and the bucket it
 * is in (partial-key cuckoo hashing).
 *
 * A probe tests both buckets, each with one load and a SWAR zero-lane test
 * of bucket XOR (fp in all four lanes): two cache misses at most, taken
 * together, and no branch within a bucket.
 *
 * Adding puts the fingerprint in a free slot of the emptier of its two
 * buckets (two choices keep the loads even).  When both are full, a
 * breadth-first search over at most CUCKOO_MAX_NODES buckets finds the
 * shortest chain of moves (a resident to its alternate bucket, whose
 * resident to its own alternate, ...) ending in a free slot, and only then
 * moves the chain.  Where the paper's random walk would kick up to 500
 * times and have to undo its kicks on failure, the search writes nothing
 * until it succeeds, so AMQ_ERR_FULL leaves the payload byte for byte as
 * it was and no key is ever lost; it also reaches higher loads (about 0.97
 * against 0.955 for 500 random kicks, with 10-bit fingerprints).  The
 * search is deterministic: the same keys in the same order give the same
 * bytes.
 *
 * Adding a key twice stores two copies, as in the paper, so removing it
 * once leaves it present; a key can be stored at most 8 times (4 when its
 * two buckets coincide), after which adding it again is AMQ_ERR_FULL.
 * Remove clears one copy of the fingerprint from either bucket and is a
 * no-op for a fingerprint not there; it must only be given keys that were
 * added, or it may remove another key sharing the fingerprint and bucket.
 *
 * Sizing: a negative probe meets up to 8 occupied slots, each matching
 * with probability 1 / (2^fb - 1), so at load a (occupied slots / slots)
 * the false-positive rate is 1 - (1 - 1/(2^fb - 1))^(8a), about 8a / 2^fb.
 * plan() takes the smallest fb meeting the target at the load planned for
 * that width (cuckoo_planned_load: 0.95 from 9 bits up, less for narrower
 * fingerprints, which restrict where a fingerprint can move) and then
 * nb = ceil((n / load + 4 sqrt(n) + 8) / 4), the slack covering the larger
 * spread of small tables.  That is fb / 0.95 bits per key, 10.53 at 1%
 * (fb = 10) and 13.7 at 0.1% (fb = 13).  Fingerprints are at most 32 bits
 * wide, so an fpr below about 1.8e-9 is AMQ_ERR_PARAM.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "core.h"

#define CUCKOO_SLOTS		4
#define CUCKOO_MIN_BITS		4
#define CUCKOO_MAX_BITS		32
#define CUCKOO_MAX_BUCKETS	(UINT64_C(1) << 30)
#define CUCKOO_MAX_NODES	2048	/* buckets one add may search */
#define CUCKOO_LOAD			0.95	/* planned load from 9 bits up */
#define CUCKOO_GOLDEN		UINT64_C(0x9e3779b97f4a7c15)

/* payload bytes for nb buckets of fb-bit slots, padding included */
static inline uint64_t
cuckoo_len(uint64_t nb, uint32_t fb)
{
	return (nb * CUCKOO_SLOTS * fb + 7) / 8 + (fb <= 16 ? 8 : 16);
}

/* uniform on [1, 2^fb - 1]: never 0, the empty slot */
static inline uint64_t
cuckoo_fingerprint(uint64_t h, uint32_t fb)
{
	return ((uint64_t) (uint32_t) h * ((UINT64_C(1) << fb) - 1) >> 32) + 1;
}

/* the other bucket of fp when it is in bucket b: an involution */
static inline uint64_t
cuckoo_alt(uint64_t b, uint64_t fp, uint64_t nb)
{
	uint64_t	t = amq_reduce(fp * CUCKOO_GOLDEN, nb);

	return (t >= b) ? t - b : t + nb - b;
}

/* one lane bit at the bottom of each of the four fb-bit lanes */
static inline uint64_t
cuckoo_lanes(uint32_t fb)
{
	return 1 | (UINT64_C(1) << fb) | (UINT64_C(1) << (2 * fb)) |
		(UINT64_C(1) << (3 * fb));
}

/*
 * Nonzero iff bucket b holds fp.  fb <= 16: the bucket is the low 4 fb
 * bits of an 8-byte window.  x = bucket ^ (fp in every lane) has a zero
 * lane exactly where fp is stored, and (x - lanes) & ~x & top-bits is
 * nonzero iff some lane of x is zero (no borrow crosses a nonzero lane,
 * and the lowest zero lane always flags), so the test is exact.
 */
static inline uint64_t
cuckoo_has64(const uint8_t *p, uint64_t b, uint64_t fp, uint32_t fb)
{
	uint64_t	bit = b * CUCKOO_SLOTS * fb;
	uint64_t	lanes = cuckoo_lanes(fb);
	uint64_t	mask = (fb == 16) ? ~UINT64_C(0) :
		(UINT64_C(1) << (CUCKOO_SLOTS * fb)) - 1;
	uint64_t	x;

	x = ((amq_load64(p + (bit >> 3)) >> (bit & 7)) & mask) ^ (fp * lanes);
	return (x - lanes) & ~x & (lanes << (fb - 1));
}

/* the same for 16 < fb <= 32, in a 16-byte window */
static inline uint64_t
cuckoo_has128(const uint8_t *p, uint64_t b, uint64_t fp, uint32_t fb)
{
	typedef unsigned __int128 u128;
	uint64_t	bit = b * CUCKOO_SLOTS * fb;
	const uint8_t *q = p + (bit >> 3);
	u128		lanes = ((u128) 1) | ((u128) 1 << fb) |
		((u128) 1 << (2 * fb)) | ((u128) 1 << (3 * fb));
	u128		mask = (fb == 32) ? ~(u128) 0 :
		((u128) 1 << (CUCKOO_SLOTS * fb)) - 1;
	u128		x;

	x = ((u128) amq_load64(q + 8) << 64) | amq_load64(q);
	x = ((x >> (bit & 7)) & mask) ^ ((u128) fp * lanes);
	x = (x - lanes) & ~x & (lanes << (fb - 1));
	return (uint64_t) x | (uint64_t) (x >> 64);
}

/*
 * Slot access for add and remove: slot s (= 4 b + j) starts at bit s fb,
 * within 7 bits of a byte, so one 8-byte window holds it (fb <= 32).
 * Writes rewrite the window keeping its other bits.
 */
static inline uint64_t
cuckoo_get(const uint8_t *p, uint64_t s, uint32_t fb)
{
	uint64_t	bit = s * fb;

	return (amq_load64(p + (bit >> 3)) >> (bit & 7)) &
		((UINT64_C(1) << fb) - 1);
}

/* Store fingerprint v in slot s. */
static inline void
cuckoo_set(uint8_t *p, uint64_t s, uint32_t fb, uint64_t v)
{
	uint64_t	bit = s * fb;
	uint64_t	mask = ((UINT64_C(1) << fb) - 1) << (bit & 7);
	uint64_t	w = amq_load64(p + (bit >> 3));

	amq_store64(p + (bit >> 3), (w & ~mask) | (v << (bit & 7)));
}

/* occupied slots of bucket b; *first_free gets the first free (-1: none) */
static inline int
cuckoo_scan(const uint8_t *p, uint64_t b, uint32_t fb, int *first_free)
{
	int			used = 0;
	int			j;

	*first_free = -1;
	for (j = CUCKOO_SLOTS - 1; j >= 0; j--)
	{
		if (cuckoo_get(p, b * CUCKOO_SLOTS + j, fb) != 0)
			used++;
		else
			*first_free = j;
	}
	return used;
}

/* false-positive rate at a load (occupied / slots) with fb-bit prints */
static double
cuckoo_model_fpr(double load, uint32_t fb)
{
	double		match = 1.0 / ((double) (UINT64_C(1) << fb) - 1.0);

	/* -expm1(x log1p(-m)) is 1 - (1 - m)^x without cancellation */
	return -expm1(2.0 * CUCKOO_SLOTS * load * log1p(-match));
}

/*
 * The load plan() fills a table to with fb-bit fingerprints.  A bucket's
 * residents can move to at most 2^fb - 1 other buckets, so narrow
 * fingerprints cap the load insertion reaches (the paper's partial-key
 * bound).  The first failures of CUCKOO_MAX_NODES searches came at these
 * loads (least of the trials, tables of 10^6 to 6.4 10^7 buckets): 4 bits
 * 0.743, 5: 0.839, 6: 0.892, 7: 0.946, 8: 0.955, 9: 0.965, 10: 0.969, 13
 * and up: 0.975.  The plan keeps 2-8% below them.
 */
static double
cuckoo_planned_load(uint32_t fb)
{
	switch (fb)
	{
		case 4:
			return 0.66;
		case 5:
			return 0.76;
		case 6:
			return 0.84;
		case 7:
			return 0.91;
		case 8:
			return 0.93;
		default:
			return CUCKOO_LOAD;
	}
}

/* The buckets and fingerprint bits that reach fpr for capacity keys. */
static AmqStatus
cuckoo_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	double		n = (double) capacity;
	double		load;
	double		slots;
	double		nb;
	uint32_t	fb;
	uint64_t	len;

	if (!(fpr > 0.0 && fpr < 1.0))
		return AMQ_ERR_PARAM;

	/* the narrowest fingerprint meeting fpr at its load, which is cheapest */
	for (fb = CUCKOO_MIN_BITS; fb < CUCKOO_MAX_BITS; fb++)
		if (cuckoo_model_fpr(cuckoo_planned_load(fb), fb) <= fpr)
			break;
	load = cuckoo_planned_load(fb);

	/*
	 * Slack for small tables, whose bucket loads vary more: 4 sqrt(n) + 8
	 * slots, which the unit tests' trials of every capacity up to 2000
	 * showed enough.  Test in floating point first so nothing overflows.
	 */
	slots = n / load + 4.0 * sqrt(n) + 8.0;
	nb = ceil(slots / CUCKOO_SLOTS);
	if (!(nb <= (double) CUCKOO_MAX_BUCKETS &&
		  nb * fb / 2.0 + 16.0 <= (double) AMQ_MAX_PAYLOAD))
		return AMQ_ERR_TOO_LARGE;
	len = cuckoo_len((uint64_t) nb, fb);
	if (len > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_TOO_LARGE;

	/* 32-bit fingerprints are the widest the packing allows */
	if (cuckoo_model_fpr(load, fb) > fpr)
		return AMQ_ERR_PARAM;

	f->param[0] = (uint64_t) nb;
	f->param[1] = fb;
	f->param[2] = 0;
	f->payload_len = len;
	return AMQ_OK;
}

/* Validate a cuckoo filter's parameters against its payload. */
static AmqStatus
cuckoo_check(const AmqFilter *f)
{
	uint64_t	nb = f->param[0];
	uint64_t	fb = f->param[1];

	if (nb < 1 || nb > CUCKOO_MAX_BUCKETS)
		return AMQ_ERR_CORRUPT;
	if (fb < CUCKOO_MIN_BITS || fb > CUCKOO_MAX_BITS)
		return AMQ_ERR_CORRUPT;
	if (f->param[2] != 0)
		return AMQ_ERR_CORRUPT;
	/* nb <= 2^30 and fb <= 32: the length cannot overflow */
	if (f->payload_len != cuckoo_len(nb, (uint32_t) fb) ||
		f->payload_len > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

typedef struct CuckooNode
{
	uint32_t	bucket;			/* a full bucket */
	int16_t		parent;			/* node whose item moves here, or -1 */
	uint8_t		pslot;			/* that item's slot in the parent bucket */
} CuckooNode;

/*
 * Store the key's fingerprint, moving others when both its buckets are full;
 * AMQ_ERR_FULL, the payload unchanged, if no move frees a slot.
 */
static AmqStatus
cuckoo_add(AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	nb = f->param[0];
	uint32_t	fb = (uint32_t) f->param[1];
	uint8_t    *p = f->payload;
	uint64_t	fp = cuckoo_fingerprint(h, fb);
	uint64_t	i1 = amq_reduce(h, nb);
	uint64_t	i2 = cuckoo_alt(i1, fp, nb);
	CuckooNode	q[CUCKOO_MAX_NODES];
	int			qlen = 0;
	int			qi;
	int			n1,
				n2,
				free1,
				free2;

	/*
	 * A free slot in the emptier bucket, the first on a tie: two choices
	 * balance the bucket loads, which puts off the searches below.
	 */
	n1 = cuckoo_scan(p, i1, fb, &free1);
	n2 = cuckoo_scan(p, i2, fb, &free2);
	if (free1 >= 0 && (n1 <= n2 || free2 < 0))
	{
		cuckoo_set(p, i1 * CUCKOO_SLOTS + free1, fb, fp);
		return AMQ_OK;
	}
	if (free2 >= 0)
	{
		cuckoo_set(p, i2 * CUCKOO_SLOTS + free2, fb, fp);
		return AMQ_OK;
	}

	/*
	 * Both full: breadth-first search for the shortest chain of moves that
	 * ends in a free slot.  Nothing is written until one is found, so when
	 * the search runs out of nodes the payload is exactly as it was.  The
	 * chain found is a shortest one, so no bucket appears on it twice (a
	 * repeat would give a shorter chain, which the search, in order of
	 * length, would have found first), which makes the moves safe.
	 */
	q[qlen].bucket = (uint32_t) i1;
	q[qlen].parent = -1;
	q[qlen++].pslot = 0;
	if (i2 != i1)
	{
		q[qlen].bucket = (uint32_t) i2;
		q[qlen].parent = -1;
		q[qlen++].pslot = 0;
	}

	for (qi = 0; qi < qlen; qi++)
	{
		uint64_t	b = q[qi].bucket;
		int			j;

		for (j = 0; j < CUCKOO_SLOTS; j++)
		{
			uint64_t	s = b * CUCKOO_SLOTS + j;
			uint64_t	v = cuckoo_get(p, s, fb);
			uint64_t	b2 = cuckoo_alt(b, v, nb);
			int			k;
			int			e;

			if (cuckoo_scan(p, b2, fb, &k) == CUCKOO_SLOTS)
			{
				if (qlen < CUCKOO_MAX_NODES)
				{
					q[qlen].bucket = (uint32_t) b2;
					q[qlen].parent = (int16_t) qi;
					q[qlen++].pslot = (uint8_t) j;
				}
				continue;
			}

			/* move v to b2, then each item on the path into the slot freed */
			cuckoo_set(p, b2 * CUCKOO_SLOTS + k, fb, v);
			for (e = qi; q[e].parent >= 0; e = q[e].parent)
			{
				uint64_t	from = (uint64_t) q[q[e].parent].bucket *
					CUCKOO_SLOTS + q[e].pslot;

				cuckoo_set(p, s, fb, cuckoo_get(p, from, fb));
				s = from;
			}
			cuckoo_set(p, s, fb, fp);
			return AMQ_OK;
		}
	}
	return AMQ_ERR_FULL;
}

/* Remove one copy of the key's fingerprint. */
static AmqStatus
cuckoo_remove(AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	nb = f->param[0];
	uint32_t	fb = (uint32_t) f->param[1];
	uint8_t    *p = f->payload;
	uint64_t	fp = cuckoo_fingerprint(h, fb);
	uint64_t	b = amq_reduce(h, nb);
	int			pass;
	int			j;

	for (pass = 0; pass < 2; pass++)
	{
		for (j = 0; j < CUCKOO_SLOTS; j++)
		{
			if (cuckoo_get(p, b * CUCKOO_SLOTS + j, fb) == fp)
			{
				cuckoo_set(p, b * CUCKOO_SLOTS + j, fb, 0);
				return AMQ_OK;
			}
		}
		b = cuckoo_alt(b, fp, nb);
	}
	return AMQ_OK;
}

/*
 * Both buckets are tested without a branch between them, so for an absent
 * key, the common case when a filter prunes rows, the two cache misses
 * overlap instead of following one another.
 */
static bool
cuckoo_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	nb = f->param[0];
	uint32_t	fb = (uint32_t) f->param[1];
	uint64_t	fp = cuckoo_fingerprint(h, fb);
	uint64_t	i1 = amq_reduce(h, nb);
	uint64_t	i2 = cuckoo_alt(i1, fp, nb);

	if (fb <= 16)
		return (cuckoo_has64(f->payload, i1, fp, fb) |
				cuckoo_has64(f->payload, i2, fp, fb)) != 0;
	return (cuckoo_has128(f->payload, i1, fp, fb) |
			cuckoo_has128(f->payload, i2, fp, fb)) != 0;
}

/* Estimated rate and distinct keys from the slots in use. */
static void
cuckoo_stats(const AmqFilter *f, AmqStats *st)
{
	uint64_t	nb = f->param[0];
	uint32_t	fb = (uint32_t) f->param[1];
	uint64_t	nslots = nb * CUCKOO_SLOTS;
	uint64_t	used = 0;
	uint64_t	s;
	double		fill;

	for (s = 0; s < nslots; s++)
		used += cuckoo_get(f->payload, s, fb) != 0;

	fill = (double) used / (double) nslots;
	st->fill = fill;
	st->est_fpr = cuckoo_model_fpr(fill, fb);
	st->est_distinct = (double) used;
	st->k = 0;
	st->fingerprint_bits = fb;
}

const AmqKindOps amq_cuckoo_ops = {
	.name = "cuckoo",
	.id = AMQ_KIND_CUCKOO,
	.caps = AMQ_CAP_ADD | AMQ_CAP_REMOVE,
	.plan = cuckoo_plan,
	.check = cuckoo_check,
	.add = cuckoo_add,
	.build = NULL,
	.grow_plan = NULL,
	.grow = NULL,
	.remove = cuckoo_remove,
	.contains = cuckoo_contains,
	.probe_span = NULL,
	.contains_span = NULL,
	.merge = NULL,
	.stats = cuckoo_stats,
};
