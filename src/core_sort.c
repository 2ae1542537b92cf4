/*-------------------------------------------------------------------------
 *
 * core_sort.c
 *	  Sort 64-bit hashes ascending and drop duplicates.
 *
 * The aggregate sorts every key hash of a group before building a filter,
 * so this is on the critical path of a build.  The keys are hashes, nearly
 * uniform, and the sort is a radix sort in three steps:
 *
 * - The whole array is first grouped by its top byte in place, following
 *	 the permutation's cycles several at a time (msd_permute), so that it
 *	 needs no second array: a second array of the input's size is memory
 *	 the kernel must clear on first touch, 80 MB at 10^7 keys, which cost
 *	 more than the grouping itself where first touches are slow.
 *
 * - A bucket too big for cache is split further most-significant digit
 *	 first, one byte at a time, into a scratch array of its own size.
 *	 Writing keys one by one to 256 places in memory would cost a
 *	 read-for-ownership of the destination line per key; instead keys
 *	 collect in a cache-line buffer per bucket and go out a full line at a
 *	 time with non-temporal stores.
 *
 * - A range that fits in L2 cache is sorted least-significant digit first
 *	 by two digits that together cover about log2(n) + 7 of its top varying
 *	 bits, after which keys that still tie on those bits are rare and are
 *	 sorted while dropping duplicates.  This is branch-free but for the rare
 *	 tie; finishing small MSD buckets by insertion sort instead would
 *	 mispredict about once per key.
 *
 * For 10M hashes that is a counting pass and an in-place permutation over
 * main memory, then all further work per 39k-key bucket while it is in
 * cache, with 312 KB of scratch, including dropping duplicates and
 * compacting the result into place.  An LSD sort would stream the whole
 * array through memory once per digit.
 *
 * On this 2-core VM that takes about 75 ms for 10M random keys in memory
 * touched before, as the out-of-place split did; where the out-of-place
 * split's scratch was fresh memory it took 80 to 280 ms.
 *
 * Skewed input stays correct and reasonably fast: the first pass finds the
 * highest bit on which the keys differ, all-equal input returns at once,
 * an MSD digit on which every key of a range agrees is skipped without
 * moving data, and ties are resolved by recursion on the lower bits.
 * Histograms live in non-recursive helpers, so the recursion, which drops
 * at least 8 bits of key per level, needs little stack.
 *
 *-------------------------------------------------------------------------
 */
#include "core.h"

#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#define SORT_HAVE_SSE2 1
#endif

/* ranges at most this long are finished by insertion sort */
#define SORT_SMALL			16

/* ranges at most this long (two copies: 1 MB) are sorted in cache by LSD */
#define SORT_CACHE_KEYS		((size_t) 1 << 16)

/* widest LSD digit: 2048 counters */
#define SORT_LSD_MAX_BITS	11

/* MSD digit for ranges beyond cache; keys per 64-byte line */
#define SORT_MSD_BITS		8
#define SORT_MSD_BUCKETS	(1 << SORT_MSD_BITS)
#define WC_LINE				8

static void sort_range(uint64_t *x, uint64_t *y, size_t n, int hi,
					   bool into_y);

/* Sort a short run in place. */
static void
insertion_sort(uint64_t *a, size_t n)
{
	size_t		i;

	for (i = 1; i < n; i++)
	{
		uint64_t	v = a[i];
		size_t		j = i;

		while (j > 0 && a[j - 1] > v)
		{
			a[j] = a[j - 1];
			j--;
		}
		a[j] = v;
	}
}

/* the digit of width "bits" whose top bit is bit hi - 1 */
static inline size_t
msd_digit(uint64_t v, int hi, int bits)
{
	return (size_t) ((v >> (hi - bits)) & (((uint64_t) 1 << bits) - 1));
}

#ifdef SORT_HAVE_SSE2

/* Copy a full write-combining line to its bucket. */
static inline void
flush_line(uint64_t *dst, const uint64_t *src)
{
	int			k;

	for (k = 0; k < WC_LINE; k++)
		_mm_stream_si64((long long *) (dst + k), (long long) src[k]);
}

/* Finish the lines copied by flush_line. */
static inline void
flush_done(void)
{
	_mm_sfence();				/* streamed lines are visible before reuse */
}
#else
/* Copy a full write-combining line to its bucket. */
static inline void
flush_line(uint64_t *dst, const uint64_t *src)
{
	memcpy(dst, src, WC_LINE * sizeof(uint64_t));
}

/* Finish the lines copied by flush_line. */
static inline void
flush_done(void)
{
}
#endif

/*
 * Scatter x[0..n) into y by digit msd_digit(v, hi, bits), through one
 * line buffer per bucket.  pos[d] is the start of bucket d on entry and its
 * end on return.
 */
static void
scatter_lines(const uint64_t *x, uint64_t *y, size_t n, int hi, int bits,
			  size_t *pos)
{
	uint64_t	buf[SORT_MSD_BUCKETS][WC_LINE];
	size_t		first[SORT_MSD_BUCKETS];
	size_t		nbuckets = (size_t) 1 << bits;

	/* lines are aligned to real cache lines, given y's alignment */
	size_t		skew = ((uintptr_t) y / sizeof(uint64_t)) & (WC_LINE - 1);
	size_t		d;
	size_t		i;

	memcpy(first, pos, nbuckets * sizeof(size_t));
	for (i = 0; i < n;)
	{
		size_t		chunk_end = amq_poll_chunk_end(i, n);

		for (; i < chunk_end; i++)
		{
			uint64_t	v = x[i];
			size_t		b = msd_digit(v, hi, bits);
			size_t		p = pos[b]++;

			buf[b][(p + skew) & (WC_LINE - 1)] = v;
			if (((p + 1 + skew) & (WC_LINE - 1)) == 0)
			{
				/* compare without subtracting: the line may start before y */
				if (p + 1 >= first[b] + WC_LINE)
					flush_line(y + p + 1 - WC_LINE, buf[b]);
				else
				{
					/* the bucket's first line is partial: the rest is not ours */
					memcpy(y + first[b],
						   buf[b] + ((first[b] + skew) & (WC_LINE - 1)),
						   (p + 1 - first[b]) * sizeof(uint64_t));
				}
			}
		}
		amq_poll();
	}
	flush_done();

	/* the partial last line of each bucket */
	for (d = 0; d < nbuckets; d++)
	{
		size_t		end = pos[d];
		size_t		in_line = (end + skew) & (WC_LINE - 1);
		size_t		base = first[d];

		if (end - first[d] > in_line)
			base = end - in_line;
		if (end > base)
			memcpy(y + base, buf[d] + ((base + skew) & (WC_LINE - 1)),
				   (end - base) * sizeof(uint64_t));
	}
}

/*
 * The size of each bucket of x[0..n) by the digit of width "bits" below hi,
 * into sizes: counted, or copied from counts if given.  Returns false if
 * all keys share the digit.
 */
static bool
msd_count(const uint64_t *x, size_t n, int hi, int bits, size_t *sizes,
		  const size_t *counts)
{
	size_t		nbuckets = (size_t) 1 << bits;
	size_t		i;

	if (counts != NULL)
		memcpy(sizes, counts, nbuckets * sizeof(size_t));
	else
	{
		memset(sizes, 0, nbuckets * sizeof(size_t));
		for (i = 0; i < n;)
		{
			size_t		chunk_end = amq_poll_chunk_end(i, n);

			for (; i < chunk_end; i++)
				sizes[msd_digit(x[i], hi, bits)]++;
			amq_poll();
		}
	}
	return sizes[msd_digit(x[0], hi, bits)] != n;
}

/*
 * One MSD step over a large range: count the digit of width "bits" below
 * hi and scatter x into y by it, filling ends[d] with the end of bucket d.
 * Returns false, moving nothing, if all keys share the digit.
 */
static bool
msd_split(const uint64_t *x, uint64_t *y, size_t n, int hi, int bits,
		  size_t *ends, const size_t *counts)
{
	size_t		nbuckets = (size_t) 1 << bits;
	size_t		start = 0;
	size_t		d;

	if (!msd_count(x, n, hi, bits, ends, counts))
		return false;

	for (d = 0; d < nbuckets; d++)
	{
		size_t		len = ends[d];

		ends[d] = start;
		start += len;
	}
	scatter_lines(x, y, n, hi, bits, ends);
	return true;
}

/* cycles msd_permute follows at once */
#define SORT_CARRIERS		8

/* keys ahead in its bucket that msd_permute prefetches: two lines */
#define SORT_PERMUTE_AHEAD	(2 * WC_LINE)

/*
 * One MSD step over a large range, in place: count the digit of width
 * "bits" below hi (or take the counts given) and permute a[0..n) so that
 * its keys are grouped by it, filling ends[d] with the end of bucket d.
 * Returns false, moving nothing, if all keys share the digit.
 *
 * The permutation is the American flag sort's: each bucket's next place
 * takes the key a cycle of exchanges brings there.  Bucket heads advance
 * sequentially, one of 2^bits at a time; each exchange at a head fetches
 * the lines ahead of it, so the next exchange there finds its line in
 * cache.  Unlike msd_split it needs no second array.
 */
static bool
msd_permute(uint64_t *a, size_t n, int hi, int bits, size_t *ends,
			const size_t *counts)
{
	size_t		nbuckets = (size_t) 1 << bits;
	size_t		head[SORT_MSD_BUCKETS];
	size_t		start = 0;
	size_t		d;

	if (!msd_count(a, n, hi, bits, ends, counts))
		return false;

	for (d = 0; d < nbuckets; d++)
	{
		head[d] = start;
		start += ends[d];
		ends[d] = start;
	}
	/*
	 * SORT_CARRIERS cycles at once, taken in turn, so that the loads of one
	 * do not all wait for the one before.  A carrier takes the key at its
	 * home bucket's head (a place, its hole, now reserved for it below the
	 * head) and carries keys on, each to the head of its bucket in exchange
	 * for the key there, until it holds one of its home, which fills its
	 * hole.  A key whose bucket has no place left but other carriers' holes
	 * fills one of those; its carrier then carries on that carrier's key,
	 * and that carrier is done.
	 */
	{
		uint64_t	v[SORT_CARRIERS];
		size_t		hole[SORT_CARRIERS];
		size_t		home[SORT_CARRIERS];
		bool		done[SORT_CARRIERS];
		int			active = 0;
		int			c;
		int			k;
		size_t		rounds = 0;

		d = 0;
		for (;;)
		{
			/* a round moves up to SORT_CARRIERS keys */
			amq_poll_every(++rounds * SORT_CARRIERS);

			/* give idle carriers a key to carry */
			while (active < SORT_CARRIERS)
			{
				while (d < nbuckets && head[d] >= ends[d])
					d++;
				if (d == nbuckets)
					break;
				hole[active] = head[d]++;
				home[active] = d;
				v[active] = a[hole[active]];
				done[active] = false;
				active++;
			}
			if (active == 0)
				break;

			for (c = 0; c < active; c++)
			{
				size_t		b;

				if (done[c])
					continue;
				b = msd_digit(v[c], hi, bits);
				if (b == home[c])
				{
					a[hole[c]] = v[c];
					done[c] = true;
				}
				else if (head[b] < ends[b])
				{
					size_t		p = head[b]++;
					uint64_t	w = a[p];

					__builtin_prefetch((const char *) (a + p) +
									   SORT_PERMUTE_AHEAD * sizeof(uint64_t), 1);
					a[p] = v[c];
					v[c] = w;
				}
				else
				{
					int			y;

					/*
					 * Bucket b's places are all final or holes, and this is
					 * one of its keys, so a hole is left: a carrier homed
					 * there is active.
					 */
					for (y = 0; y < active; y++)
						if (!done[y] && home[y] == b)
							break;
					a[hole[y]] = v[c];
					v[c] = v[y];
					done[y] = true;
				}
			}

			/* drop the carriers that are done, keeping the others' order */
			for (c = 0, k = 0; c < active; c++)
			{
				if (done[c])
					continue;
				v[k] = v[c];
				hole[k] = hole[c];
				home[k] = home[c];
				done[k] = false;
				k++;
			}
			active = k;
		}
	}
	return true;
}

/*
 * Sort x[0..n) (n <= SORT_CACHE_KEYS) by the bits [lo, lo + wl + wh), as a
 * low digit of wl bits and a high digit of wh bits, with y as scratch.
 * Stable, so ties keep their order.  The sorted keys end up in x.
 *
 * Inlined into lsd_sort with constant digit widths for the common case,
 * which spares the hot loops variable shifts (slow on x86 without BMI2).
 */
static inline __attribute__((always_inline)) void
lsd_sort_body(uint64_t *x, uint64_t *y, size_t n, int lo, int wl, int wh)
{
	uint32_t	cl[1 << SORT_LSD_MAX_BITS];
	uint32_t	ch[1 << SORT_LSD_MAX_BITS];
	uint64_t	ml = ((uint64_t) 1 << wl) - 1;
	uint64_t	mh = ((uint64_t) 1 << wh) - 1;
	uint32_t	sl = 0;
	uint32_t	sh = 0;
	size_t		d;
	size_t		i;

	/* the low digit first; y is usually cold, so fetch it meanwhile */
	memset(cl, 0, ((size_t) ml + 1) * sizeof(uint32_t));
	for (i = 0; i < n; i++)
	{
		if ((i & (WC_LINE - 1)) == 0)
			__builtin_prefetch(y + i, 1, 3);
		cl[(x[i] >> lo) & ml]++;
	}
	for (d = 0; d <= ml; d++)
	{
		uint32_t	len = cl[d];

		cl[d] = sl;
		sl += len;
	}

	/* scatter by the low digit, counting the high one on the way */
	memset(ch, 0, ((size_t) mh + 1) * sizeof(uint32_t));
	for (i = 0; i < n; i++)
	{
		uint64_t	t = x[i] >> lo;

		ch[(t >> wl) & mh]++;
		y[cl[t & ml]++] = x[i];
	}
	for (d = 0; d <= mh; d++)
	{
		uint32_t	len = ch[d];

		ch[d] = sh;
		sh += len;
	}

	/* and back by the high digit */
	for (i = 0; i < n; i++)
	{
		uint64_t	v = y[i];

		x[ch[(v >> (lo + wl)) & mh]++] = v;
	}
}

/* LSD radix sort, with the common digit widths compiled as constants. */
static void
lsd_sort(uint64_t *x, uint64_t *y, size_t n, int lo, int wl, int wh)
{
	if (wl == SORT_LSD_MAX_BITS && wh == SORT_LSD_MAX_BITS)
		lsd_sort_body(x, y, n, lo, SORT_LSD_MAX_BITS, SORT_LSD_MAX_BITS);
	else
		lsd_sort_body(x, y, n, lo, wl, wh);
}

/*
 * End of the run of keys starting at a[start] that share its digit, in a
 * range grouped by ascending digit: exponential then binary search, so a
 * bucket of b keys costs O(log b) probes.
 */
static size_t
run_end(const uint64_t *a, size_t n, size_t start, int hi, int bits)
{
	size_t		d = msd_digit(a[start], hi, bits);
	size_t		in = start;		/* last index known to hold digit d */
	size_t		out;			/* first index known not to, or n */
	size_t		step = 1;

	while (step < n - in && msd_digit(a[in + step], hi, bits) == d)
	{
		in += step;
		step <<= 1;
	}
	out = step < n - in ? in + step : n;
	while (out - in > 1)
	{
		size_t		mid = in + (out - in) / 2;

		if (msd_digit(a[mid], hi, bits) == d)
			in = mid;
		else
			out = mid;
	}
	return out;
}

/*
 * Sort x[0..n) of a range that fits in cache by LSD on its top bits, y
 * being scratch.  Returns lo: the keys are sorted by their bits from lo
 * up, and keys that tie on those (rare for hashes) are left in any order.
 */
static int
sort_cached(uint64_t *x, uint64_t *y, size_t n, int hi)
{
	int			need = 64 - __builtin_clzll(n) + 7;
	int			wl;
	int			wh;

	if (need > 2 * SORT_LSD_MAX_BITS)
		need = 2 * SORT_LSD_MAX_BITS;
	if (need > hi)
		need = hi;
	wh = (need + 1) / 2;
	wl = need - wh;

	if (wl > 0)
		lsd_sort(x, y, n, hi - need, wl, wh);
	else
		lsd_sort(x, y, n, hi - need, wh, 0);
	return hi - need;
}

/* sort each run of x[0..n) that ties on the bits from lo up */
static void
resolve_ties(uint64_t *x, uint64_t *y, size_t n, int lo)
{
	uint64_t	hmask = ~(uint64_t) 0 << lo;
	size_t		i = 1;

	if (lo == 0)
		return;					/* ties are equal keys */
	while (i < n)
	{
		size_t		s;
		size_t		e;

		if (((x[i] ^ x[i - 1]) & hmask) != 0)
		{
			i++;
			continue;
		}
		s = i - 1;
		e = i + 1;
		while (e < n && ((x[e] ^ x[s]) & hmask) == 0)
			e++;
		sort_range(x + s, y + s, e - s, lo, false);
		/* x[e] and x[e - 1] differ from lo up, so resume past that pair */
		i = e + 1;
	}
}

/*
 * Sort the keys in x[0..n), whose bits at and above "hi" are all equal.
 * y[0..n) is scratch of the same size.  The sorted keys end up in y if
 * into_y, else in x.
 */
static void
sort_range(uint64_t *x, uint64_t *y, size_t n, int hi, bool into_y)
{
	int			bits;
	size_t		start;

	for (;;)
	{
		if (n <= SORT_SMALL || hi <= 0)
		{
			/* below bit 0 all keys are equal, and sorted already */
			if (hi > 0)
				insertion_sort(x, n);
			if (into_y)
				memcpy(y, x, n * sizeof(uint64_t));
			return;
		}
		if (n <= SORT_CACHE_KEYS)
		{
			resolve_ties(x, y, n, sort_cached(x, y, n, hi));
			if (into_y)
				memcpy(y, x, n * sizeof(uint64_t));
			return;
		}

		bits = hi < SORT_MSD_BITS ? hi : SORT_MSD_BITS;
		{
			size_t		ends[SORT_MSD_BUCKETS];

			if (msd_split(x, y, n, hi, bits, ends, NULL))
				break;
		}
		/* all keys share this digit: go on to the next, nothing moved */
		hi -= bits;
	}

	/* the keys are in y now, grouped by digit; finish each group */
	for (start = 0; start < n;)
	{
		size_t		end = run_end(y, n, start, hi, bits);

		amq_poll();
		sort_range(y + start, x + start, end - start, hi - bits, !into_y);
		start = end;
	}
}

/*
 * Drop duplicates of src[0..n), which is sorted by its bits from lo up,
 * into dst, sorting the runs that tie on those bits on the way: the same
 * scan finds both, and ties of hashes are rare.  tmp[0..n) is scratch for
 * the ties.  dst may be src, or memory before it, or tmp itself: dst never
 * gets ahead of the scan, and a run's part of tmp lies at or beyond the
 * run's place in dst, which is rewritten after the run is sorted.
 */
static size_t
unique_ties(uint64_t *dst, uint64_t *src, size_t n, int lo, uint64_t *tmp)
{
	uint64_t	hmask = ~(uint64_t) 0 << lo;
	uint64_t	prev;
	size_t		w;
	size_t		i;

	if (n == 0)
		return 0;
	prev = dst[0] = src[0];
	w = 1;
	for (i = 1; i < n; i++)
	{
		uint64_t	v = src[i];
		size_t		e;
		size_t		j;

		if (((v ^ prev) & hmask) != 0)
		{
			dst[w++] = v;
			prev = v;
			continue;
		}

		/*
		 * src[i - 1] starts a tie (src[i - 2] differs from lo up, so it was
		 * stored as dst[w - 1]): sort the run, then store it deduplicated.
		 */
		e = i + 1;
		while (e < n && ((src[e] ^ prev) & hmask) == 0)
			e++;
		if (lo > 0)
			sort_range(src + i - 1, tmp + i - 1, e - i + 1, lo, false);
		w--;
		prev = dst[w++] = src[i - 1];
		for (j = i; j < e; j++)
		{
			if (src[j] != prev)
				prev = dst[w++] = src[j];
		}
		i = e - 1;
	}
	return w;
}

/* Sort a[0..n) ascending and drop duplicates; returns the new n. */
size_t
amq_sort_unique(uint64_t *a, size_t n, uint64_t *scratch)
{
	size_t		counts[SORT_MSD_BUCKETS];
	size_t		ends[SORT_MSD_BUCKETS];
	const int	top = 64 - SORT_MSD_BITS;
	uint64_t	all_or = 0;
	uint64_t	all_and = ~(uint64_t) 0;
	uint64_t	diff;
	int			hi;
	int			bits;
	size_t		start;
	size_t		w;
	size_t		d;
	size_t		i;

	if (n <= SORT_SMALL)
	{
		insertion_sort(a, n);
		return unique_ties(a, a, n, 0, NULL);
	}

	/* count the top byte, and on the way find which bits vary at all */
	memset(counts, 0, sizeof(counts));
	for (i = 0; i < n;)
	{
		size_t		chunk_end = amq_poll_chunk_end(i, n);

		for (; i < chunk_end; i++)
		{
			uint64_t	v = a[i];

			counts[v >> top]++;
			all_or |= v;
			all_and &= v;
		}
		amq_poll();
	}
	diff = all_or ^ all_and;
	if (diff == 0)
		return 1;				/* all keys equal */
	hi = 64 - __builtin_clzll(diff);

	if (n <= SORT_CACHE_KEYS)
		return unique_ties(a, a, n, sort_cached(a, scratch, n, hi), scratch);

	/*
	 * Group by the top varying byte, in place: for hashes the one just
	 * counted, else count again (hi < 64 means not hashes, so speed matters
	 * less).
	 */
	bits = hi < SORT_MSD_BITS ? hi : SORT_MSD_BITS;
	msd_permute(a, n, hi, bits, ends, hi == 64 ? counts : NULL);

	/*
	 * Finish each bucket while it is in cache: sort it in place, with the
	 * start of scratch as temporary space (so only as much of scratch as
	 * the largest bucket is ever touched), then store its distinct keys at
	 * the front of a.  The write cursor w never passes the bucket's own
	 * start.
	 */
	w = 0;
	start = 0;
	for (d = 0; d < ((size_t) 1 << bits); d++)
	{
		size_t		len = ends[d] - start;

		amq_poll();
		if (len > SORT_CACHE_KEYS)
		{
			sort_range(a + start, scratch, len, hi - bits, false);
			w += unique_ties(a + w, a + start, len, 0, NULL);
		}
		else if (len > 0)
		{
			int			lo = 0;

			if (len > SORT_SMALL)
				lo = sort_cached(a + start, scratch, len, hi - bits);
			else
				insertion_sort(a + start, len);
			w += unique_ties(a + w, a + start, len, lo, scratch);
		}
		start = ends[d];
	}
	return w;
}
