/*-------------------------------------------------------------------------
 *
 * core_union.c
 *	  Unions of sorted runs of 64-bit hashes: their size, and their merge.
 *
 * A parallel or distributed amq_agg combines partial states, each the
 * sorted, distinct hashes of its part of the rows, kept as runs (amq_agg.c).
 * The blocked kind is planned for the size of their union and filled from
 * the runs as they are, never merged (kind_blocked.c); the size is guessed
 * where the runs look disjoint, and the fill's count of the keys that
 * repeat an earlier run confirms it.  The other kinds take the merged union.
 *
 * Every merge here is branch-free but for its loop: which run holds the
 * next smallest hash is unpredictable, so a branch on it would mispredict
 * about once per hash.
 *
 *-------------------------------------------------------------------------
 */
#include "core.h"

#include <string.h>

#define MIN(a, b)	((a) < (b) ? (a) : (b))

/* Of the k runs p[r]..e[r], drop those that ended: how many are left. */
static inline int
drop_ended_runs(const uint64_t **p, const uint64_t **e, int k)
{
	for (int r = 0; r < k;)
	{
		if (p[r] == e[r])
		{
			p[r] = p[k - 1];
			e[r] = e[k - 1];
			k--;
			continue;
		}
		r++;
	}
	return k;
}

/*
 * The smallest head of the k ascending, distinct runs p[r]..e[r], every run
 * that holds it advanced past it; runs that end leave (*k).
 */
static inline uint64_t
union_next(const uint64_t **p, const uint64_t **e, int *k)
{
	uint64_t	v = *p[0];

	for (int r = 1; r < *k; r++)
		v = MIN(v, *p[r]);
	for (int r = 0; r < *k; r++)
		p[r] += (*p[r] == v);
	*k = drop_ended_runs(p, e, *k);
	return v;
}

/*
 * One step of a merge of three ascending, distinct runs p[0..2], none ended:
 * every run that holds the smallest head passes it, which is returned.
 */
static inline uint64_t
union3_step(const uint64_t **p)
{
	uint64_t	a = *p[0],
				b = *p[1],
				c = *p[2];
	uint64_t	v = MIN(a, MIN(b, c));

	p[0] += (a == v);
	p[1] += (b == v);
	p[2] += (c == v);
	return v;
}

/*
 * How many distinct hashes the k ascending, distinct runs p[r]..e[r] hold
 * together (runs may be empty): a merge that writes nothing.  Three runs,
 * the usual partial states of two workers and the leader, are unrolled
 * into registers with one test of their ends a step.
 */
static size_t
count_union_merge(const uint64_t **p, const uint64_t **e, int k)
{
	size_t		n = 0;

	k = drop_ended_runs(p, e, k);
	while (k == 3)
	{
		union3_step(p);
		amq_poll_every(++n);
		if (__builtin_expect(p[0] == e[0] || p[1] == e[1] || p[2] == e[2], 0))
			k = drop_ended_runs(p, e, k);
	}
	while (k > 1)
	{
		(void) union_next(p, e, &k);
		amq_poll_every(++n);
	}
	if (k == 1)
		n += e[0] - p[0];
	return n;
}

/* Where in the ascending x[0..n) the first value not below v is (n if none). */
size_t
amq_lower_bound(const uint64_t *x, size_t n, uint64_t v)
{
	size_t		lo = 0;

	while (lo < n)
	{
		size_t		mid = lo + (n - lo) / 2;

		if (x[mid] < v)
			lo = mid + 1;
		else
			n = mid;
	}
	return lo;
}

/*
 * amq_lower_bound of hashes about evenly spread over x[0] .. x[n - 1]: the
 * search starts where v would be if they were exactly even and widens a
 * window from there until it holds the answer, a few steps near where the
 * last ones looked instead of log2(n) across the whole run.  Correct for any
 * ascending x, only slower where the spread is uneven.
 */
size_t
amq_lower_bound_near(const uint64_t *x, size_t n, uint64_t v)
{
	size_t		guess;
	size_t		lo;
	size_t		hi;
	size_t		step = 8;

	if (n == 0 || v <= x[0])
		return 0;
	if (v > x[n - 1])
		return n;
	/* x[0] < v <= x[n - 1], so n >= 2 */
	guess = (size_t) ((double) (v - x[0]) / (double) (x[n - 1] - x[0]) *
					  (double) (n - 1));
	guess = MIN(guess, n - 1);
	if (x[guess] < v)
	{
		/* the answer is in (lo, hi]: x[lo] < v, and x[hi] >= v or hi == n */
		lo = guess;
		while (lo + step < n && x[lo + step] < v)
		{
			lo += step;
			step *= 2;
		}
		hi = MIN(lo + step, n);
	}
	else
	{
		/* the answer is in [lo, hi]: x[hi] >= v, and x[lo - 1] < v or lo == 0 */
		hi = guess;
		while (hi >= step && x[hi - step] >= v)
		{
			hi -= step;
			step *= 2;
		}
		lo = hi >= step ? hi - step : 0;
	}
	return lo + amq_lower_bound(x + lo, hi - lo, v);
}

/* the three-run merges run the hash space's quarters together (their loops step four) */
#define UNION_CHAINS	4

/*
 * How many distinct hashes three ascending, distinct runs hold together.
 * The runs are split at the quarters of the hash space and the four parts
 * merged in one loop: four independent chains of loads, where a single
 * merge waits for each load its last step chose.  The loop runs as many
 * steps as no run can end within (a step passes the next distinct hash, in
 * one run or several); each part's rest is merged on its own.  Three runs
 * of 3.3M random hashes took 11 ms to count, against 17 split in halves
 * and 29 unsplit.
 */
static size_t
union3_quarters(const uint64_t *const *head, const uint64_t *const *end)
{
	const uint64_t *q[UNION_CHAINS][3];
	const uint64_t *f[UNION_CHAINS][3];
	size_t		n = 0;

	for (int r = 0; r < 3; r++)
	{
		for (int c = 0; c < UNION_CHAINS; c++)
		{
			q[c][r] = c == 0 ? head[r] : f[c - 1][r];
			f[c][r] = c == UNION_CHAINS - 1 ? end[r] :
				head[r] + amq_lower_bound(head[r], end[r] - head[r],
										  (uint64_t) (c + 1) << 62);
		}
	}
	for (;;)
	{
		size_t		safe = AMQ_POLL_KEYS / UNION_CHAINS;

		amq_poll();
		for (int c = 0; c < UNION_CHAINS; c++)
			for (int r = 0; r < 3; r++)
				safe = MIN(safe, (size_t) (f[c][r] - q[c][r]));
		if (safe == 0)
			break;
		n += UNION_CHAINS * safe;
		for (size_t i = 0; i < safe; i++)
		{
			union3_step(q[0]);
			union3_step(q[1]);
			union3_step(q[2]);
			union3_step(q[3]);
		}
	}
	for (int c = 0; c < UNION_CHAINS; c++)
		n += count_union_merge(q[c], f[c], 3);
	return n;
}

/*
 * How many distinct hashes the k (<= AMQ_UNION_MAX_RUNS) ascending,
 * distinct runs head[r]..end[r] hold together.
 */
size_t
amq_union_count(const uint64_t *const *head, const uint64_t *const *end, int k)
{
	const uint64_t *p[AMQ_UNION_MAX_RUNS];
	const uint64_t *e[AMQ_UNION_MAX_RUNS];

	if (k == 3)
		return union3_quarters(head, end);
	memcpy(p, head, k * sizeof(p[0]));
	memcpy(e, end, k * sizeof(e[0]));
	return count_union_merge(p, e, k);
}

/*
 * the share of the hash space amq_union_guess looks at, its lowest 1/64:
 * 150,000 of 10^7 hashes, counted in about 2% of the time of all
 */
#define UNION_SAMPLE_TOP	(UINT64_C(1) << 58)

/*
 * The count of the union of the k (<= AMQ_UNION_MAX_RUNS) ascending,
 * distinct runs, to plan a pass that counts it again as it goes
 * (amq_blocked_fill_runs): their total length, with *exact false, where no hash
 * of the lowest 1/64 of the hash space is in two runs (the runs of
 * disjoint parts of the rows, as a parallel aggregate's usually are, whose
 * hashes are uniform); else the union's count, with *exact true.
 */
size_t
amq_union_guess(const uint64_t *const *head, const uint64_t *const *end,
				int k, bool *exact)
{
	const uint64_t *stop[AMQ_UNION_MAX_RUNS];
	size_t		total = 0,
				sample = 0;

	for (int r = 0; r < k; r++)
	{
		size_t		len = end[r] - head[r];
		size_t		low = amq_lower_bound(head[r], len, UNION_SAMPLE_TOP);

		stop[r] = head[r] + low;
		sample += low;
		total += len;
	}
	*exact = amq_union_count(head, stop, k) != sample;
	return *exact ? amq_union_count(head, end, k) : total;
}

/*
 * Merge the ascending, distinct x[0..nx) and y[0..ny) into out, dropping
 * the hashes both hold; returns the count.  out may be y itself or memory
 * before it: out never gets ahead of y.
 */
size_t
amq_merge2(const uint64_t *x, size_t nx, const uint64_t *y, size_t ny,
		   uint64_t *out)
{
	size_t		i = 0,
				j = 0,
				w = 0;

	/* a step passes at most one hash of each: safe steps leave neither */
	for (;;)
	{
		size_t		safe = MIN(MIN(nx - i, ny - j), AMQ_POLL_KEYS);

		if (safe == 0)
			break;
		for (size_t s = 0; s < safe; s++)
		{
			uint64_t	u = x[i];
			uint64_t	v = y[j];

			out[w++] = u < v ? u : v;
			i += (u <= v);
			j += (v <= u);
		}
		amq_poll();
	}
	while (i < nx)
		out[w++] = x[i++];
	if (out + w != y + j)
		memmove(out + w, y + j, (ny - j) * sizeof(uint64_t));
	return w + (ny - j);
}

/*
 * Merge the k (1 <= k <= AMQ_UNION_MAX_RUNS) ascending, distinct runs
 * head[r]..end[r] into out, dropping repeats; returns the count.
 */
size_t
amq_union_merge(const uint64_t *const *head, const uint64_t *const *end,
				int k, uint64_t *out)
{
	const uint64_t *p[AMQ_UNION_MAX_RUNS];
	const uint64_t *e[AMQ_UNION_MAX_RUNS];
	size_t		w = 0;

	if (k == 1)
	{
		memcpy(out, head[0], (end[0] - head[0]) * sizeof(uint64_t));
		return end[0] - head[0];
	}
	if (k == 2)
		return amq_merge2(head[0], end[0] - head[0], head[1], end[1] - head[1],
						  out);
	memcpy(p, head, k * sizeof(p[0]));
	memcpy(e, end, k * sizeof(e[0]));
	k = drop_ended_runs(p, e, k);
	while (k > 0)
	{
		out[w++] = union_next(p, e, &k);
		amq_poll_every(w);
	}
	return w;
}
