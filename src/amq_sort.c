/*-------------------------------------------------------------------------
 *
 * amq_sort.c
 *	  Sort 64-bit hashes ascending and drop duplicates.
 *
 * The aggregate sorts every key hash of a group before building a filter,
 * so this is on the critical path of a build.  The keys are hashes, nearly
 * uniform, which suits a most-significant-digit radix sort: one pass over
 * the whole array scatters it into 256 buckets by its top byte (few enough
 * output streams that the TLB copes), then each bucket, now small enough
 * for L2 cache, is finished there by one or two more digits and insertion
 * sort, deduplicated, and compacted into place.  An LSD radix sort would
 * stream the whole array through memory eight times; this does about three.
 *
 * Skewed input stays correct and reasonably fast: a digit on which every
 * key of a range agrees is skipped after its counting pass without moving
 * any data, so equal keys or a long shared prefix cost little.  The
 * recursive step keeps no histogram in its frame (bucket boundaries are
 * found again by searching the scattered range), so even the worst-case
 * recursion depth, one level per key bit, needs only a few kB of stack.
 *
 *-------------------------------------------------------------------------
 */
#include "amq.h"

/* ranges at most this long are finished by insertion sort */
#define SORT_SMALL			32

/* widest digit, and the widest for a range too big for cache */
#define SORT_MAX_BITS		11
#define SORT_STREAM_BITS	8
#define SORT_CACHE_KEYS		((size_t) 1 << 17)	/* 1 MB of keys */

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

/*
 * Counting sort of x[0..n) into y[0..n) by the digit (key >> lo) & mask.
 * Returns false, leaving y untouched, when every key has the same digit.
 * The histogram lives only in this frame, not in the recursion's.
 */
static bool
scatter(const uint64_t *x, uint64_t *y, size_t n, int lo, uint64_t mask)
{
	size_t		pos[1 << SORT_MAX_BITS];
	size_t		nbuckets = (size_t) mask + 1;
	size_t		start = 0;
	size_t		d;
	size_t		i;

	memset(pos, 0, nbuckets * sizeof(size_t));
	for (i = 0; i < n; i++)
		pos[(x[i] >> lo) & mask]++;
	if (pos[(x[0] >> lo) & mask] == n)
		return false;

	for (d = 0; d < nbuckets; d++)
	{
		size_t		len = pos[d];

		pos[d] = start;
		start += len;
	}
	for (i = 0; i < n; i++)
	{
		uint64_t	v = x[i];

		y[pos[(v >> lo) & mask]++] = v;
	}
	return true;
}

/*
 * End of the run of keys starting at a[start] that share its digit, in a
 * range grouped by ascending digit: exponential then binary search, so a
 * bucket of b keys costs O(log b) probes.
 */
static size_t
run_end(const uint64_t *a, size_t n, size_t start, int lo, uint64_t mask)
{
	uint64_t	d = (a[start] >> lo) & mask;
	size_t		in = start;		/* last index known to hold digit d */
	size_t		out;			/* first index known not to, or n */
	size_t		step = 1;

	while (step < n - in && ((a[in + step] >> lo) & mask) == d)
	{
		in += step;
		step <<= 1;
	}
	out = step < n - in ? in + step : n;
	while (out - in > 1)
	{
		size_t		mid = in + (out - in) / 2;

		if (((a[mid] >> lo) & mask) == d)
			in = mid;
		else
			out = mid;
	}
	return out;
}

/*
 * Sort the keys in x[0..n), whose bits at and above "hi" are all equal.
 * y[0..n) is scratch of the same size.  The sorted keys end up in y if
 * into_y, else in x; scattering alternates between the two arrays, so the
 * flag flips at each level rather than copying back.
 */
static void
sort_range(uint64_t *x, uint64_t *y, size_t n, int hi, bool into_y)
{
	int			bits;
	int			lo;
	uint64_t	mask;
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

		/* about 16 keys per bucket; narrower when streaming from memory */
		bits = 1;
		while (bits < SORT_MAX_BITS && (n >> (bits + 4)) > 1)
			bits++;
		if (n > SORT_CACHE_KEYS && bits > SORT_STREAM_BITS)
			bits = SORT_STREAM_BITS;
		if (bits > hi)
			bits = hi;
		lo = hi - bits;
		mask = ((uint64_t) 1 << bits) - 1;

		if (scatter(x, y, n, lo, mask))
			break;
		/* all keys share this digit: go on to the next, nothing moved */
		hi = lo;
	}

	/* the keys are in y now, grouped by digit; finish each group */
	for (start = 0; start < n;)
	{
		size_t		end = run_end(y, n, start, lo, mask);

		sort_range(y + start, x + start, end - start, lo, !into_y);
		start = end;
	}
}

/* drop adjacent duplicates of sorted src[0..n) into dst, where dst <= src */
static size_t
unique_into(uint64_t *dst, const uint64_t *src, size_t n)
{
	size_t		w;
	size_t		i;

	if (n == 0)
		return 0;
	dst[0] = src[0];
	w = 1;
	for (i = 1; i < n; i++)
	{
		/* branch-free: always store, advance only past a new value */
		uint64_t	v = src[i];

		dst[w] = v;
		w += (v != dst[w - 1]);
	}
	return w;
}

/*
 * The top-level scatter streams the whole array to memory once.  Writing
 * each key straight to its bucket would cost a read-for-ownership of the
 * destination line per key and a TLB walk per bucket switch; instead keys
 * collect in one cache-line buffer per bucket and go out a full line at a
 * time with non-temporal stores, which more than halves the pass's time.
 */
#define WC_LINE		8			/* keys per 64-byte line */

#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>

static inline void
flush_line(uint64_t *dst, const uint64_t *src)
{
	int			k;

	for (k = 0; k < WC_LINE; k++)
		_mm_stream_si64((long long *) (dst + k), (long long) src[k]);
}

static inline void
flush_done(void)
{
	_mm_sfence();				/* order the streamed lines before reuse */
}
#else
static inline void
flush_line(uint64_t *dst, const uint64_t *src)
{
	memcpy(dst, src, WC_LINE * sizeof(uint64_t));
}

static inline void
flush_done(void)
{
}
#endif

/*
 * Scatter a[0..n) into dst by the top byte.  On entry pos[d] is the start
 * of bucket d; on return it is the bucket's end.
 */
static void
scatter_top(const uint64_t *a, uint64_t *dst, size_t n,
			size_t pos[1 << SORT_STREAM_BITS])
{
	uint64_t	buf[1 << SORT_STREAM_BITS][WC_LINE];
	size_t		first[1 << SORT_STREAM_BITS];
	const int	shift = 64 - SORT_STREAM_BITS;

	/* slot of index p in its line, so that lines match real cache lines */
	size_t		skew = ((uintptr_t) dst / sizeof(uint64_t)) & (WC_LINE - 1);
	size_t		d;
	size_t		i;

	memcpy(first, pos, sizeof(first));
	for (i = 0; i < n; i++)
	{
		uint64_t	v = a[i];
		size_t		b = v >> shift;
		size_t		p = pos[b]++;

		buf[b][(p + skew) & (WC_LINE - 1)] = v;
		if (((p + 1 + skew) & (WC_LINE - 1)) == 0)
		{
			/* compare without subtracting: the line may start before dst */
			if (p + 1 >= first[b] + WC_LINE)
				flush_line(dst + p + 1 - WC_LINE, buf[b]);
			else
			{
				/* the bucket's first line is partial: the rest is not ours */
				memcpy(dst + first[b], buf[b] + ((first[b] + skew) & (WC_LINE - 1)),
					   (p + 1 - first[b]) * sizeof(uint64_t));
			}
		}
	}
	flush_done();

	/* the partial last line of each bucket */
	for (d = 0; d < ((size_t) 1 << SORT_STREAM_BITS); d++)
	{
		size_t		end = pos[d];
		size_t		inline_keys = (end + skew) & (WC_LINE - 1);
		size_t		base = first[d];

		if (end - first[d] > inline_keys)
			base = end - inline_keys;
		if (end > base)
			memcpy(dst + base, buf[d] + ((base + skew) & (WC_LINE - 1)),
				   (end - base) * sizeof(uint64_t));
	}
}

size_t
amq_sort_unique(uint64_t *a, size_t n, uint64_t *scratch)
{
	size_t		pos[1 << SORT_STREAM_BITS];
	const int	shift = 64 - SORT_STREAM_BITS;
	uint64_t	all_or = 0;
	uint64_t	all_and = ~(uint64_t) 0;
	uint64_t	diff;
	size_t		start;
	size_t		w;
	size_t		d;
	size_t		i;

	if (n <= SORT_SMALL)
	{
		insertion_sort(a, n);
		return unique_into(a, a, n);
	}

	/* count the top byte, and on the way find which bits vary at all */
	memset(pos, 0, sizeof(pos));
	for (i = 0; i < n; i++)
	{
		uint64_t	v = a[i];

		pos[v >> shift]++;
		all_or |= v;
		all_and &= v;
	}
	diff = all_or ^ all_and;
	if (diff == 0)
		return 1;				/* all keys equal */

	if (pos[a[0] >> shift] == n)
	{
		/* a shared top byte (not hashes, then): start at the first bit that varies */
		sort_range(a, scratch, n, 64 - __builtin_clzll(diff), false);
		return unique_into(a, a, n);
	}

	/* the usual case: scatter by the top byte into scratch */
	start = 0;
	for (d = 0; d < ((size_t) 1 << SORT_STREAM_BITS); d++)
	{
		size_t		len = pos[d];

		pos[d] = start;
		start += len;
	}
	scatter_top(a, scratch, n, pos);

	/*
	 * Finish each bucket while it is in cache: sort it from scratch into its
	 * own place in a, then compact its distinct keys to the front of a.  The
	 * write cursor w never passes the bucket's start, and everything in a
	 * from there on was already scattered, so it is free to use.
	 */
	w = 0;
	start = 0;
	for (d = 0; d < ((size_t) 1 << SORT_STREAM_BITS); d++)
	{
		size_t		len = pos[d] - start;

		if (len > 0)
		{
			sort_range(scratch + start, a + start, len, shift, true);
			w += unique_into(a + w, a + start, len);
		}
		start = pos[d];
	}
	return w;
}
