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
 * can be 3L slots apart, so the kind does not offer AMQ_CAP_SLICE, though
 * it gives probe_span for readers that hold the payload in pages.)  The key
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
 * which orders them by segment, so that counting walks the scratch arrays
 * almost sequentially instead of missing the cache on every key.  If
 * peeling stalls (a 2-core remains) the build retries with the next seed,
 * up to FUSE_MAX_ATTEMPTS; each attempt succeeds with probability well
 * above 1/2, so running out means the keys were not distinct.  Scratch is
 * about 20 bytes per key, from the caller's allocator.
 *
 * The peeling order fixes the payload.  It is breadth-first (format
 * version 2, AMQ_FLAG_FUSE_BFS): slots holding one key are queued in slot
 * order, then each key taken from the queue's head queues the slots it
 * leaves with one key.  Releases before 0.5.0 peeled depth-first, from a
 * stack (version 1, which reads and answers the same way).  Depth-first,
 * most keys came from the slot the previous key had just left alone, so
 * each waited for the loads of the one before; breadth-first, the queue
 * holds each key's hash and the slot that queued it, so the build fetches
 * what the key some entries ahead will touch and the loads overlap.
 * Peeled keys are written back over the queue's head, in order, so
 * assigning reads them in sequence.
 *
 * Where the time goes at 10^7 keys (8-bit fingerprints, thread CPU clock,
 * scratch reused so that page faults are left out, on a 2-core AMD EPYC
 * VM): bucketing 2.5 ns per key, counting 4, peeling 9 (depth-first: 23 to
 * 26), assigning 4.5 to 6.5 (depth-first: 3.4, its order being closer to
 * the payload's).  First touching the scratch adds 5 to 10 ns: the whole
 * build took 28 to 30 ns per key with it, 41 to 45 depth-first.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "core.h"
#include "kind_fingerprint.h"

#define FUSE_MIN_SEGMENT	4
#define FUSE_MAX_SEGMENT	(UINT64_C(1) << 18)
#define FUSE_MAX_ATTEMPTS	100
/* at most 2^16 buckets for the locality pass: 256 KB of counters */
#define FUSE_MAX_BUCKET_BITS 16

/* the three slots of h, in segments s, s + 1 and s + 2 */
static inline void
fuse_slots(uint64_t h, uint64_t seglen, uint64_t span, uint64_t *p)
{
	uint64_t	p0 = amq_reduce(h, span);

	p[0] = p0;
	p[1] = (p0 + seglen) ^ ((h >> 18) & (seglen - 1));
	p[2] = (p0 + 2 * seglen) ^ (h & (seglen - 1));
}

/*
 * How many entries ahead of its head the peeling fetches what a queued key
 * will touch (16: 12 ns per key at 10^7 keys, 32: 9, 64: 9).
 */
#define FUSE_PEEL_AHEAD		32

/* slots zeroed at a time ahead of the counting */
#ifndef FUSE_ZERO_CHUNK
#define FUSE_ZERO_CHUNK		2048
#endif

/* Segment length, segment count, fingerprint bits for capacity at fpr. */
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
	w = amq_fp_width(fpr);
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
	/* built by the breadth-first peel: format version 2 */
	f->flags |= AMQ_FLAG_FUSE_BFS;
	return AMQ_OK;
}

/* Validate a fuse filter's parameters against its payload. */
static AmqStatus
fuse_check(const AmqFilter *f)
{
	uint64_t	seglen = f->param[0];
	uint64_t	segs = f->param[1];
	uint64_t	w = f->param[2];

	if (seglen < FUSE_MIN_SEGMENT || seglen > FUSE_MAX_SEGMENT ||
		(seglen & (seglen - 1)) != 0)
		return AMQ_ERR_CORRUPT;
	if (!amq_fp_width_valid(w))
		return AMQ_ERR_CORRUPT;
	/* bounding segs first keeps the product below 2^50 */
	if (segs < 1 || segs > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_CORRUPT;
	if (f->payload_len > AMQ_MAX_PAYLOAD ||
		f->payload_len != (segs + 2) * seglen * (w / 8))
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

/* The probe: three loads, no data-dependent branch (amq_fp_match3). */
static bool
fuse_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_fp_hash(hash, f->seed);
	uint64_t	seglen = f->param[0];
	uint64_t	p[3];

	fuse_slots(h, seglen, f->param[1] * seglen, p);
	return amq_fp_match3(f->payload, p, f->param[2], h);
}

/*
 * The three slots lie in three consecutive segments, p[0] < p[1] < p[2],
 * so a probe reads one span of at most three segments: the amq index reads
 * it from its pages without assembling the whole filter.
 */
static void
fuse_probe_span(const AmqFilter *f, uint64_t hash,
				uint64_t *offset, uint32_t *length)
{
	uint64_t	h = amq_fp_hash(hash, f->seed);
	uint64_t	bytes_per_slot = f->param[2] / 8;
	uint64_t	p[3];

	fuse_slots(h, f->param[0], f->param[1] * f->param[0], p);
	*offset = p[0] * bytes_per_slot;
	*length = (uint32_t) ((p[2] - p[0] + 1) * bytes_per_slot);
}

/* Probe the key's three slots, read apart from the filter. */
static bool
fuse_contains_span(const AmqFilter *f, uint64_t hash, const uint8_t *span)
{
	uint64_t	h = amq_fp_hash(hash, f->seed);
	uint64_t	p[3];

	fuse_slots(h, f->param[0], f->param[1] * f->param[0], p);
	p[2] -= p[0];
	p[1] -= p[0];
	p[0] = 0;
	return amq_fp_match3(span, p, f->param[2], h);
}

/*
 * Scratch per slot: cnt and xh as kind_fingerprint.h describes, and the
 * peeling queue, each entry a key's hash (qh) and which of its slots queued
 * it (qj); per bucket, its counter.  qh first holds the bucketed hashes,
 * which only the counting reads; the peeled keys are written back over the
 * queue's head, in peeling order, so that assigning reads them in sequence.
 */
static AmqStatus
fuse_build(AmqFilter *f, const uint64_t *hashes, size_t n,
		   const AmqAllocator *alloc)
{
	const uint64_t seglen = f->param[0];
	const uint64_t span = f->param[1] * seglen;
	const uint64_t nslots = span + 2 * seglen;
	const int	w = (int) f->param[2];
	const uint32_t fpmask = amq_fp_mask(w);
	const uint64_t orig_seed = f->seed;
	uint64_t   *qh = NULL;		/* bucketed hashes, then the peeling queue */
	uint8_t    *qj = NULL;
	uint64_t   *xh = NULL;
	AmqFpCount *cnt = NULL;
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
		f->seed = amq_fp_attempt_seed(orig_seed, 0);
		return AMQ_OK;
	}

	if (!amq_fp_input_ok(hashes, n, nslots))
		return AMQ_ERR_BUILD_FAILED;

	/* about one bucket per segment, at least two */
	bucket_bits = 1;
	while (bucket_bits < FUSE_MAX_BUCKET_BITS &&
		   (UINT64_C(1) << bucket_bits) < f->param[1])
		bucket_bits++;
	nbuckets = UINT64_C(1) << bucket_bits;

	if (alloc == NULL || alloc->alloc == NULL)
		return AMQ_ERR_NOMEM;

	/*
	 * The queue holds each slot at most once, and amq_fp_unpeel_one writes
	 * one entry past its tail: nslots + 1 entries (n <= nslots, checked
	 * above, so the bucketed hashes fit too).
	 */
	qh = amq_fp_alloc(alloc, nslots + 1, sizeof(uint64_t));
	qj = qh ? amq_fp_alloc(alloc, nslots + 1, 1) : NULL;
	xh = qj ? amq_fp_alloc(alloc, nslots, sizeof(uint64_t)) : NULL;
	cnt = xh ? amq_fp_alloc(alloc, nslots, sizeof(AmqFpCount)) : NULL;
	bucket = cnt ? amq_fp_alloc(alloc, nbuckets, sizeof(uint32_t)) : NULL;
	if (bucket == NULL)
	{
		result = AMQ_ERR_NOMEM;
		goto done;
	}
	for (attempt = 0; attempt < FUSE_MAX_ATTEMPTS; attempt++)
	{
		const uint64_t seed = amq_fp_attempt_seed(orig_seed, attempt);
		const int	shift = 64 - bucket_bits;
		uint32_t	sum = 0;
		size_t		head = 0;
		size_t		tail = 0;
		size_t		npeeled = 0;
		uint32_t	wrapped = 0;
		uint64_t	zhi;
		uint64_t	s;

		/* bucket the hashes by their top bits, i.e. by segment */
		memset(bucket, 0, nbuckets * sizeof(uint32_t));
		for (i = 0; i < n; i++)
		{
			amq_poll_every(i);
			bucket[amq_fp_hash(hashes[i], seed) >> shift]++;
		}
		for (s = 0; s < nbuckets; s++)
		{
			uint32_t	c = bucket[s];

			bucket[s] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
		{
			uint64_t	h = amq_fp_hash(hashes[i], seed);

			amq_poll_every(i);
			qh[bucket[h >> shift]++] = h;
		}

		/*
		 * Count the keys of every slot.  The scratch is zeroed a chunk at a
		 * time just ahead of the highest slot counted so far, p[2] being a
		 * key's highest: the keys come segment by segment, so the chunk is
		 * still in cache when they reach it, where a memset of the whole
		 * scratch first would have left only its end there.
		 */
		zhi = 0;
		for (i = 0; i < n; i++)
		{
			uint64_t	h = qh[i];
			uint64_t	p[3];

			amq_poll_every(i);
			fuse_slots(h, seglen, span, p);
			if (p[2] >= zhi)
			{
				uint64_t	to = p[2] + 1 + FUSE_ZERO_CHUNK;

				if (to > nslots)
					to = nslots;
				memset(cnt + zhi, 0, (size_t) (to - zhi) * sizeof(AmqFpCount));
				memset(xh + zhi, 0, (size_t) (to - zhi) * sizeof(uint64_t));
				zhi = to;
			}
			wrapped |= amq_fp_count_key(cnt, xh, p, h);
		}
		if (wrapped)
			continue;			/* over 63 keys in a slot: the next seed */
		memset(cnt + zhi, 0, (size_t) (nslots - zhi) * sizeof(AmqFpCount));
		memset(xh + zhi, 0, (size_t) (nslots - zhi) * sizeof(uint64_t));

		/*
		 * Peel breadth-first.  Queue the slots holding one key, in slot
		 * order, without a branch (about one slot in five does; the write
		 * past the tail stays in the queue: tail <= s < nslots).  Then take
		 * each key from the queue's head: skip it if it was peeled from
		 * another slot meanwhile (this slot's count is 0 then), else peel
		 * it and queue the slots it leaves with one key.  The keys in the
		 * queue are independent of the one being peeled, so fetch the
		 * counts and hashes of the key some entries ahead.
		 */
		for (s = 0; s < nslots; s++)
		{
			amq_poll_every(s);
			qh[tail] = xh[s];
			qj[tail] = (uint8_t) (cnt[s] & 3);
			tail += (cnt[s] >> 2) == 1;
		}
		while (head < tail)
		{
			uint64_t	h;
			uint32_t	j;
			uint64_t	p[3];

			/*
			 * Fetch, for writing, what peeling the key some entries ahead
			 * will touch: the count of the slot that queued it, which says
			 * whether it is still there, and the counts and hashes of its
			 * other two.  Written here: in a static function of their own
			 * (given the slots as an array) GCC 12 at -O2 compiled them to
			 * nothing, as it had the counting's and the assigning's, which
			 * measured no faster once they were there and are gone.
			 */
			if (head + FUSE_PEEL_AHEAD < tail)
			{
				uint32_t	ja = qj[head + FUSE_PEEL_AHEAD];

				fuse_slots(qh[head + FUSE_PEEL_AHEAD], seglen, span, p);
				__builtin_prefetch(&cnt[p[0]], 1);
				__builtin_prefetch(&cnt[p[1]], 1);
				__builtin_prefetch(&cnt[p[2]], 1);
				__builtin_prefetch(&xh[p[ja == 0]], 1);
				__builtin_prefetch(&xh[p[2 - (ja == 2)]], 1);
			}
			amq_poll_every(head);
			h = qh[head];
			j = qj[head];
			head++;
			fuse_slots(h, seglen, span, p);
			if ((cnt[p[j]] >> 2) != 1)
				continue;		/* peeled from another slot */
			cnt[p[j]] = 0;
			qh[npeeled] = h;
			qj[npeeled++] = (uint8_t) j;
			amq_fp_unpeel_others(cnt, xh, qh, qj, &tail, p, j, h);
		}

		if (npeeled == n)
		{
			/* assign in reverse peeling order */
			for (i = n; i-- > 0;)
			{
				uint64_t	h = qh[i];
				uint64_t	p[3];

				amq_poll_every(i);
				fuse_slots(h, seglen, span, p);
				amq_fp_assign(f->payload, p[qj[i]], w, fpmask, p, h);
			}
			f->seed = seed;
			result = AMQ_OK;
			break;
		}

		/* duplicate keys: no seed will ever separate them */
		if (amq_fp_has_duplicate(cnt, xh, nslots))
			break;
	}

done:
	amq_fp_free(alloc, bucket);
	amq_fp_free(alloc, cnt);
	amq_fp_free(alloc, xh);
	amq_fp_free(alloc, qj);
	amq_fp_free(alloc, qh);
	return result;
}

/* fill is about n / slots (0.89 from a million keys up) once built */
static void
fuse_stats(const AmqFilter *f, AmqStats *st)
{
	const int	w = (int) f->param[2];

	amq_fp_stats(f, w, f->payload_len / ((uint64_t) w / 8), st);
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
	.probe_span = fuse_probe_span,
	.contains_span = fuse_contains_span,
	.merge = NULL,
	.stats = fuse_stats,
};
