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
 * about 26 bytes per key (1.23 slots), from the caller's allocator: per
 * slot 12 bytes of count and hash xor, 9 of peeling queue (a key's hash
 * and which of its slots queued it; the peeled keys are written back over
 * its head, in order) and a bit marking a queued key peeled elsewhere.
 *
 * The peeling order fixes the payload.  It is breadth-first (format
 * version 2, AMQ_FLAG_XOR_BFS): slots holding one key are queued in slot
 * order, then each key taken from the queue's head queues the slots it
 * leaves with one key.  Releases before 0.5.0 peeled depth-first, from a
 * stack (version 1, which reads and answers the same way).  Out of cache
 * every slot touched is a cache miss.  Depth-first, most keys came from
 * the slot the previous key had just left alone, known only once that
 * slot's line had arrived: one memory latency per such key.  Breadth-
 * first, the keys in the queue are independent of the one being peeled,
 * and the queue holds each key's hash, so the build fetches the slots of
 * the key some entries ahead and the misses overlap: at 10^7 keys the
 * build went from about 170 to 80 ns per key, bound now by memory
 * throughput (two slots per key peeled, three per key counted).
 *
 * The build keeps a slot's count and hash xor in one entry (AmqFpSlot).
 * Counting, whose result does not depend on the order of the keys, goes
 * through buckets by slot range so that each range of the scratch is
 * updated while in cache (xor_count_partitioned).  Assigning reads the keys
 * in sequence, as peeling recorded them, and prefetches the payload slots
 * of a key some keys ahead.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "core.h"
#include "kind_fingerprint.h"

#define XOR_MAX_ATTEMPTS	100

/* Rotate h left by r bits. */
static inline uint64_t
xor_rotl(uint64_t h, int r)
{
	return (h << r) | (h >> (64 - r));
}

/* slot b (0, 1 or 2) of h: in block b, from h rotated by 21 b bits */
static inline uint64_t
xor_slot(uint64_t h, int b, uint64_t blocklen)
{
	uint64_t	x = (b == 0) ? h : xor_rotl(h, 21 * b);

	return (uint64_t) b * blocklen + amq_reduce(x, blocklen);
}

/* the three slots of h, one per block */
static inline void
xor_slots(uint64_t h, uint64_t blocklen, uint64_t *p)
{
	p[0] = xor_slot(h, 0, blocklen);
	p[1] = xor_slot(h, 1, blocklen);
	p[2] = xor_slot(h, 2, blocklen);
}

/* The block length and fingerprint bits for capacity keys at fpr. */
static AmqStatus
xor_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	double		n = (double) (capacity > 0 ? capacity : 1);
	double		blocklen;
	int			w;
	uint64_t	bytes_per_slot;

	if (!(fpr > 0.0 && fpr < 1.0))
		return AMQ_ERR_PARAM;
	w = amq_fp_width(fpr);
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
	/* built by the breadth-first peel: format version 2 */
	f->flags |= AMQ_FLAG_XOR_BFS;
	return AMQ_OK;
}

/* Validate a xor filter's parameters against its payload. */
static AmqStatus
xor_check(const AmqFilter *f)
{
	uint64_t	blocklen = f->param[0];
	uint64_t	w = f->param[1];

	/* bounding blocklen first keeps the product below 2^34 */
	if (blocklen < 1 || blocklen > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_CORRUPT;
	if (!amq_fp_width_valid(w))
		return AMQ_ERR_CORRUPT;
	if (f->param[2] != 0)
		return AMQ_ERR_CORRUPT;
	if (f->payload_len > AMQ_MAX_PAYLOAD ||
		f->payload_len != 3 * blocklen * (w / 8))
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

/* The probe: three loads, no data-dependent branch (amq_fp_match3). */
static bool
xor_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_fp_hash(hash, f->seed);
	uint64_t	p[3];

	xor_slots(h, f->param[0], p);
	return amq_fp_match3(f->payload, p, f->param[1], h);
}

/* keys ahead whose payload slots the assigning loop prefetches */
#define XOR_ASSIGN_AHEAD	8
/* queue entries ahead whose key's slots the peel prefetches */
#define XOR_PEEL_AHEAD		16

/*
 * Partitioned counting.  Each counting bucket covers 2^XOR_BUCKET_SHIFT
 * slots of one block (more for huge blocks, so that a block has at most
 * XOR_MAX_BLOCK_BUCKETS buckets): 384 KB of scratch, which stays in the L2
 * cache, beside the next bucket's, while its keys are applied.  Below
 * XOR_PARTITION_MIN slots the whole scratch is in cache and keys are
 * counted directly.
 */
#define XOR_BUCKET_SHIFT	15
#define XOR_MAX_BLOCK_BUCKETS 1024
#define XOR_PARTITION_MIN	(UINT64_C(1) << 19)

/* the counting bucket of slot p[b], nbb buckets per block */
static inline size_t
xor_bucket(const uint64_t *p, int b, uint64_t blocklen, int shift, size_t nbb)
{
	return (size_t) b * nbb + (size_t) ((p[b] - (uint64_t) b * blocklen) >> shift);
}

/* the slots [*lo, *hi) of counting bucket k, nbb buckets per block */
static inline void
xor_bucket_range(size_t k, size_t nbb, int shift, uint64_t blocklen,
				 uint64_t *lo, uint64_t *hi)
{
	uint64_t	b = (uint64_t) (k / nbb);
	uint64_t	first = (uint64_t) (k % nbb) << shift;
	uint64_t	last = first + (UINT64_C(1) << shift);

	*lo = b * blocklen + first;
	*hi = b * blocklen + (last < blocklen ? last : blocklen);
}

/* Zero the scratch, then count the keys straight into it. */
static void
xor_count_direct(AmqFpSlot *sl, const uint64_t *hashes, size_t n,
				 uint64_t seed, uint64_t blocklen)
{
	size_t		i;

	memset(sl, 0, 3 * blocklen * sizeof(AmqFpSlot));
	for (i = 0; i < n; i++)
	{
		uint64_t	h = amq_fp_hash(hashes[i], seed);
		uint64_t	p[3];

		amq_poll_every(i);
		xor_slots(h, blocklen, p);
		amq_fp_slot_count_key(sl, p, h);
	}
}

/*
 * Zero the scratch and count the keys through buckets.  Direct counting
 * does three random read-modify-writes per key all over the scratch, 12
 * bytes per slot, far larger than any cache: each is a miss, and their
 * number bounds it (55 ns per key at 10^7 keys, prefetched).  Here a chunk
 * of keys is first scattered as hashes into buckets by slot range (block
 * and position in it), a sequential write to a few hundred streams, then
 * each bucket is applied to its range of the scratch, which the previous
 * bucket's pass fetched in sequence, so at memory bandwidth rather than a
 * miss at a time.  The first chunk zeroes each range just before using
 * it, which saves a pass over the whole scratch.
 *
 * A slot's count and hash xor are a sum and xors, so the order in which
 * its keys arrive changes nothing: the scratch ends exactly as direct
 * counting leaves it.  buf holds cap hashes, which bounds a chunk to
 * cap / 3 keys; pos holds 3 * XOR_MAX_BLOCK_BUCKETS + 1 offsets.
 */
static void
xor_count_partitioned(AmqFpSlot *sl, const uint64_t *hashes, size_t n,
					  uint64_t seed, uint64_t blocklen,
					  uint64_t *buf, size_t cap, size_t *pos)
{
	int			shift = XOR_BUCKET_SHIFT;
	size_t		nbb;
	size_t		nbuckets;
	size_t		chunk = cap / 3;
	size_t		start;

	while (((blocklen - 1) >> shift) + 1 > XOR_MAX_BLOCK_BUCKETS)
		shift++;
	nbb = (size_t) ((blocklen - 1) >> shift) + 1;
	nbuckets = 3 * nbb;

	for (start = 0; start < n; start += chunk)
	{
		size_t		m = (n - start < chunk) ? n - start : chunk;
		size_t		sum = 0;
		size_t		i;
		size_t		k;

		/* size the buckets, then scatter the chunk's keys into them */
		memset(pos, 0, (nbuckets + 1) * sizeof(size_t));
		for (i = start; i < start + m; i++)
		{
			uint64_t	h = amq_fp_hash(hashes[i], seed);
			uint64_t	p[3];

			amq_poll_every(i);
			xor_slots(h, blocklen, p);
			pos[xor_bucket(p, 0, blocklen, shift, nbb)]++;
			pos[xor_bucket(p, 1, blocklen, shift, nbb)]++;
			pos[xor_bucket(p, 2, blocklen, shift, nbb)]++;
		}
		for (k = 0; k < nbuckets; k++)
		{
			size_t		c = pos[k];

			pos[k] = sum;
			sum += c;
		}
		for (i = start; i < start + m; i++)
		{
			uint64_t	h = amq_fp_hash(hashes[i], seed);
			uint64_t	p[3];

			amq_poll_every(i);
			xor_slots(h, blocklen, p);
			buf[pos[xor_bucket(p, 0, blocklen, shift, nbb)]++] = h;
			buf[pos[xor_bucket(p, 1, blocklen, shift, nbb)]++] = h;
			buf[pos[xor_bucket(p, 2, blocklen, shift, nbb)]++] = h;
		}

		/* bucket k now ends at pos[k], where bucket k + 1 starts */
		for (k = 0; k < nbuckets; k++)
		{
			int			b = (int) (k / nbb);
			size_t		e = (k == 0) ? 0 : pos[k - 1];
			size_t		end = pos[k];
			uint64_t	lo;
			uint64_t	hi;
			const char *pf = NULL;
			const char *pfend = NULL;

			amq_poll();
			xor_bucket_range(k, nbb, shift, blocklen, &lo, &hi);
			if (start == 0)
				memset(&sl[lo], 0, (size_t) (hi - lo) * sizeof(AmqFpSlot));
			/* the next bucket's range, a line per key applied */
			if (k + 1 < nbuckets)
			{
				xor_bucket_range(k + 1, nbb, shift, blocklen, &lo, &hi);
				pf = (const char *) &sl[lo];
				pfend = (const char *) &sl[hi];
			}

			for (; e < end; e++)
			{
				uint64_t	h = buf[e];
				uint64_t	s = xor_slot(h, b, blocklen);

				if (pf < pfend)
				{
					__builtin_prefetch(pf, 1, 0);
					pf += 64;
				}
				amq_fp_slot_count_one(sl, s, (uint32_t) b, h);
			}
		}
	}
}

/*
 * Scratch per slot: an AmqFpSlot (kind_fingerprint.h); the peeling queue,
 * each entry a key's hash (qh) and which of its slots it was queued from
 * (qj); and a bit per slot (gone) marking the entries whose key was peeled
 * from another slot.  Peeled keys are written back over the queue's head,
 * in peeling order, so that assigning reads them in sequence.  qh, qj and
 * gone are one allocation, which the partitioned count uses first as its
 * buckets.
 */
static AmqStatus
xor_build(AmqFilter *f, const uint64_t *hashes, size_t n,
		  const AmqAllocator *alloc)
{
	const uint64_t blocklen = f->param[0];
	const uint64_t nslots = 3 * blocklen;
	const int	w = (int) f->param[1];
	const uint32_t fpmask = amq_fp_mask(w);
	const uint64_t orig_seed = f->seed;
	const bool	partitioned = nslots >= XOR_PARTITION_MIN;
	const size_t ngone = (size_t) (nslots + 63) / 64;
	AmqFpSlot  *sl = NULL;
	uint64_t   *work = NULL;
	size_t		nwork;
	uint64_t   *qh;
	uint64_t   *gone;
	uint8_t    *qj;
	size_t	   *pos = NULL;
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

	if (alloc == NULL || alloc->alloc == NULL)
		return AMQ_ERR_NOMEM;
	/*
	 * work: qh (8 bytes a slot), gone (a bit a slot), qj (1 byte a slot), in
	 * whole uint64s; nslots < 2^32, so the sum cannot overflow.  qh and qj
	 * have one entry more than the queue can hold: amq_fp_slot_unpeel_one
	 * writes an entry at the tail whether or not it queues it, and every
	 * slot holding a key is queued once, so the tail can be nslots then.
	 */
	nwork = (size_t) nslots + 1 + ngone + ((size_t) nslots + 1 + 7) / 8;
	sl = amq_fp_alloc(alloc, nslots, sizeof(AmqFpSlot));
	work = sl ? amq_fp_alloc(alloc, nwork, sizeof(uint64_t)) : NULL;
	if (partitioned && work != NULL)
		pos = amq_fp_alloc(alloc, 3 * XOR_MAX_BLOCK_BUCKETS + 1, sizeof(size_t));
	if (work == NULL || (partitioned && pos == NULL))
	{
		result = AMQ_ERR_NOMEM;
		goto done;
	}
	qh = work;
	gone = work + nslots + 1;
	qj = (uint8_t *) (gone + ngone);

	for (attempt = 0; attempt < XOR_MAX_ATTEMPTS; attempt++)
	{
		const uint64_t seed = amq_fp_attempt_seed(orig_seed, attempt);
		size_t		head = 0;
		size_t		tail = 0;
		size_t		npeeled = 0;
		uint64_t	s;

		/* count the keys of every slot */
		if (partitioned)
			xor_count_partitioned(sl, hashes, n, seed, blocklen,
								  work, nwork, pos);
		else
			xor_count_direct(sl, hashes, n, seed, blocklen);

		/*
		 * Peel breadth-first.  A key is queued when one of its slots first
		 * holds it alone, which happens at most once per slot, so the queue
		 * never exceeds nslots.  The queued keys are independent of the key
		 * being peeled, so their misses overlap: fetch the other slots of
		 * the key some entries ahead, and its bit in gone.
		 */
		memset(gone, 0, ngone * sizeof(uint64_t));
		for (s = 0; s < nslots; s++)
		{
			amq_poll_every(s);
			qh[tail] = sl[s].xh;
			qj[tail] = (uint8_t) (sl[s].cnt & 3);
			tail += (sl[s].cnt >> 2) == 1;
		}
		while (head < tail)
		{
			uint64_t	h;
			uint32_t	j;
			uint64_t	p[3];

			if (head + XOR_PEEL_AHEAD < tail)
			{
				uint32_t	ja = qj[head + XOR_PEEL_AHEAD];

				xor_slots(qh[head + XOR_PEEL_AHEAD], blocklen, p);
				__builtin_prefetch(&sl[p[ja == 0]], 1, 0);
				__builtin_prefetch(&sl[p[2 - (ja == 2)]], 1, 0);
				__builtin_prefetch(&gone[p[ja] >> 6], 0, 0);
			}
			amq_poll_every(head);
			h = qh[head];
			j = qj[head];
			head++;
			xor_slots(h, blocklen, p);
			if (gone[p[j] >> 6] & (UINT64_C(1) << (p[j] & 63)))
				continue;		/* peeled from another slot */
			qh[npeeled] = h;
			qj[npeeled++] = (uint8_t) j;
			amq_fp_slot_unpeel_others(sl, qh, qj, &tail, gone, p, j, h);
		}

		if (npeeled == n)
		{
			/*
			 * Assign in reverse peeling order.  The keys' payload slots are
			 * independent misses (the payload is larger than the cache from
			 * a million keys up): fetch those of the key some keys ahead.
			 */
			for (i = n; i-- > 0;)
			{
				uint64_t	h = qh[i];
				uint64_t	p[3];

				amq_poll_every(i);
				if (i >= XOR_ASSIGN_AHEAD)
				{
					xor_slots(qh[i - XOR_ASSIGN_AHEAD], blocklen, p);
					__builtin_prefetch(f->payload + p[0] * (w / 8), 1, 0);
					__builtin_prefetch(f->payload + p[1] * (w / 8), 1, 0);
					__builtin_prefetch(f->payload + p[2] * (w / 8), 1, 0);
				}
				xor_slots(h, blocklen, p);
				amq_fp_assign(f->payload, p[qj[i]], w, fpmask, p, h);
			}
			f->seed = seed;
			result = AMQ_OK;
			break;
		}

		/* duplicate keys: no seed will ever separate them */
		if (amq_fp_slot_has_duplicate(sl, nslots))
			break;
	}

done:
	amq_fp_free(alloc, pos);
	amq_fp_free(alloc, work);
	amq_fp_free(alloc, sl);
	return result;
}

/* fill is about n / slots (0.81) once built */
static void
xor_stats(const AmqFilter *f, AmqStats *st)
{
	amq_fp_stats(f, (int) f->param[1], 3 * f->param[0], st);
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
