/*-------------------------------------------------------------------------
 *
 * test_union.c
 *	  Unit tests of the unions of sorted runs (core_union.c): the count a
 *	  combined amq_agg state plans its filter with, and the merge, against
 *	  sorting all the runs' hashes together; and the searches of a run.
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

/*
 * k runs of the n distinct, ascending hashes h: run r takes hash i when a
 * mix of i and r says so (shared names how many runs share a hash, about:
 * 0 disjoint, 1 some, 2 most).  Runs go to store, k * n long.
 */
static void
make_runs(const uint64_t *h, size_t n, int k, int shared, uint64_t *store,
		  const uint64_t **head, const uint64_t **end)
{
	for (int r = 0; r < k; r++)
	{
		uint64_t   *run = store + (size_t) r * n;
		size_t		len = 0;

		for (size_t i = 0; i < n; i++)
		{
			uint64_t	mix = (i * 4 + r + 1) * UINT64_C(0x9e3779b97f4a7c15);
			bool		take;

			if (shared == 0)
				take = (i % k) == (size_t) r;
			else if (shared == 1)
				take = (mix >> 61) < 3;
			else
				take = (mix >> 61) < 7;
			if (take)
				run[len++] = h[i];
		}
		head[r] = run;
		end[r] = run + len;
	}
}

/* the distinct hashes of the k runs, by sorting them all */
static size_t
reference_union(const uint64_t **head, const uint64_t **end, int k,
				uint64_t *out, uint64_t *scratch)
{
	size_t		n = 0;

	for (int r = 0; r < k; r++)
		for (const uint64_t *p = head[r]; p < end[r]; p++)
			out[n++] = *p;
	return amq_sort_unique(out, n, scratch);
}

/*
 * amq_lower_bound_near finds what amq_lower_bound finds, for every value in
 * a run and between its values, and beyond both ends: runs of even, uneven
 * (squared: crowded low, sparse high) and repeating spreads, long and short.
 */
static void
test_lower_bound_near(void)
{
	const size_t sizes[] = {1, 2, 3, 17, 1000, 100000};
	char		fail[160] = "";

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
	{
		size_t		n = sizes[si];
		uint64_t   *x = xcalloc(n, sizeof(uint64_t));
		uint64_t   *scratch = xcalloc(n, sizeof(uint64_t));

		for (int spread = 0; spread < 3; spread++)
		{
			size_t		m;

			for (size_t i = 0; i < n; i++)
			{
				uint64_t	k = key_in(i);

				if (spread == 1)
					k = (k >> 32) * (k >> 32);	/* crowded near 0 */
				else if (spread == 2)
					k = (k >> 60) << 60;	/* 16 values */
				x[i] = k;
			}
			m = amq_sort_unique(x, n, scratch);
			for (size_t i = 0; i < m && fail[0] == '\0'; i++)
			{
				uint64_t	probes[3] = {x[i], x[i] - 1, x[i] + 1};

				for (int p = 0; p < 3; p++)
				{
					size_t		want = amq_lower_bound(x, m, probes[p]);
					size_t		got = amq_lower_bound_near(x, m, probes[p]);

					if (got != want)
						snprintf(fail, sizeof(fail),
								 "n=%zu spread=%d value %llu: %zu, want %zu",
								 m, spread, (unsigned long long) probes[p], got, want);
				}
			}
			if (amq_lower_bound_near(x, m, 0) != amq_lower_bound(x, m, 0) ||
				amq_lower_bound_near(x, m, UINT64_MAX) != amq_lower_bound(x, m, UINT64_MAX))
				snprintf(fail, sizeof(fail), "n=%zu spread=%d: the ends", m, spread);
		}
		free(x);
		free(scratch);
	}
	check(amq_lower_bound_near(NULL, 0, 42) == 0 && fail[0] == '\0',
		  "lower bound near a guess: as a binary search, for even, uneven and repeating runs",
		  "%s", fail);
}

void
test_union(void)
{
	/*
	 * hashes all below 2^63, all above, spread with the extremes and each
	 * side of the quarters amq_union_count splits at, all in one quarter
	 */
	const size_t sizes[] = {0, 1, 2, 5, 100, 20000};

	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
	{
		size_t		n = sizes[si];
		uint64_t   *h = xcalloc(n + 1, sizeof(uint64_t));
		uint64_t   *scratch = xcalloc(6 * n + 1, sizeof(uint64_t));
		uint64_t   *store = xcalloc(5 * n + 1, sizeof(uint64_t));
		uint64_t   *want = xcalloc(5 * n + 1, sizeof(uint64_t));
		uint64_t   *got = xcalloc(5 * n + 1, sizeof(uint64_t));

		for (int spread = 0; spread < 4; spread++)
		{
			char		fail[160] = "";
			size_t		m;

			for (size_t i = 0; i < n; i++)
			{
				h[i] = key_in(i);
				if (spread == 0)
					h[i] >>= 1;		/* all in the lower half */
				else if (spread == 1)
					h[i] |= UINT64_C(1) << 63;	/* all in the upper half */
				else if (spread == 3)
					h[i] >>= 2;		/* all in the lowest quarter */
			}
			if (spread == 2 && n >= 2)
			{
				h[0] = 0;
				h[1] = UINT64_MAX;
				for (size_t i = 2; i + 1 < n && i < 8; i += 2)
				{
					h[i] = (uint64_t) (i / 2) << 62;
					h[i + 1] = h[i] - 1;
				}
			}
			m = amq_sort_unique(h, n, scratch);

			for (int k = 1; k <= 5; k++)
			{
				for (int shared = 0; shared <= 2; shared++)
				{
					const uint64_t *head[5];
					const uint64_t *end[5];
					size_t		nwant;
					size_t		count;
					size_t		merged;
					size_t		guess;
					bool		exact;

					make_runs(h, m, k, shared, store, head, end);
					nwant = reference_union(head, end, k, want, scratch);
					count = amq_union_count(head, end, k);
					merged = amq_union_merge(head, end, k, got);
					if (count != nwant || merged != nwant ||
						memcmp(got, want, nwant * sizeof(uint64_t)) != 0)
					{
						snprintf(fail, sizeof(fail),
								 "runs=%d shared=%d: %zu and %zu, want %zu",
								 k, shared, count, merged, nwant);
						continue;
					}

					/*
					 * the guess: the runs' total length where the sample
					 * (hashes below 2^58) holds no repeat, else exact
					 */
					guess = amq_union_guess(head, end, k, &exact);
					{
						size_t		total = 0;
						size_t		sample_total = 0;
						size_t		sample_distinct = 0;

						for (int r = 0; r < k; r++)
						{
							total += end[r] - head[r];
							for (const uint64_t *p = head[r]; p < end[r]; p++)
								sample_total += *p < (UINT64_C(1) << 58);
						}
						for (size_t i = 0; i < nwant; i++)
							sample_distinct += want[i] < (UINT64_C(1) << 58);
						if (exact != (sample_total != sample_distinct) ||
							guess != (exact ? nwant : total))
						{
							snprintf(fail, sizeof(fail),
									 "runs=%d shared=%d: guess %zu (%s), total %zu, union %zu",
									 k, shared, guess, exact ? "exact" : "guessed",
									 total, nwant);
							continue;
						}
					}
					if (k == 2)
					{
						/* in place, as a combined state merges: y at out's end */
						size_t		nx = end[0] - head[0];
						size_t		ny = end[1] - head[1];

						memcpy(got + nx, head[1], ny * sizeof(uint64_t));
						merged = amq_merge2(head[0], nx, got + nx, ny, got);
						if (merged != nwant ||
							memcmp(got, want, nwant * sizeof(uint64_t)) != 0)
							snprintf(fail, sizeof(fail),
									 "shared=%d: in place, %zu, want %zu",
									 shared, merged, nwant);
					}
				}
			}
			check(fail[0] == '\0',
				  "union of 1 to 5 runs: count, merge and guess as sorting them all",
				  "n=%zu spread=%d %s", n, spread, fail);
		}
		free(h);
		free(scratch);
		free(store);
		free(want);
		free(got);
	}

	test_lower_bound_near();
}
