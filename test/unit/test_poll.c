/*-------------------------------------------------------------------------
 *
 * test_poll.c
 *	  Unit tests of the core's poll (amq_poll_hook, core.h): every long pass
 *	  over keys calls it at least once per AMQ_POLL_KEYS keys, and a hook
 *	  that does not return (as the server's raises a query cancel) leaves
 *	  nothing behind but the caller's memory: the next build gives the same
 *	  bytes as one never interrupted.
 *
 *-------------------------------------------------------------------------
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"
#include "kind_blocked.h"
#include "test_static.h"

/* keys of the passes: 16 times AMQ_POLL_KEYS */
#define POLL_N		((size_t) 16 * AMQ_POLL_KEYS)

static long npolls;
static long jump_at;			/* the poll that jumps out; 0: none */
static jmp_buf poll_jmp;

static void
count_poll(void)
{
	npolls++;
	if (npolls == jump_at)
		longjmp(poll_jmp, 1);
}

/* the polls each pass made must cover its keys */
static void
check_polls(const char *what, size_t keys, long polls)
{
	char		name[256];

	snprintf(name, sizeof(name), "poll: %s, %zu keys: %ld polls", what, keys,
			 polls);
	check(polls >= (long) (keys / AMQ_POLL_KEYS), name,
		  "under one per %zu keys", AMQ_POLL_KEYS);
}

/* random (not sorted) hashes */
static uint64_t *
random_hashes(size_t n, uint64_t salt)
{
	uint64_t   *h = xcalloc(n, sizeof(uint64_t));

	for (size_t i = 0; i < n; i++)
		h[i] = amq_mix64(i * 2 + 1 + salt);
	return h;
}

static void
poll_sort_and_union(void)
{
	uint64_t   *a = random_hashes(POLL_N, 0);
	uint64_t   *scratch = xcalloc(POLL_N, sizeof(uint64_t));
	uint64_t   *out = xcalloc(3 * POLL_N, sizeof(uint64_t));
	uint64_t   *runs = xcalloc(3 * POLL_N, sizeof(uint64_t));
	const uint64_t *head[5];
	const uint64_t *end[5];
	size_t		n;

	npolls = 0;
	n = amq_sort_unique(a, POLL_N, scratch);
	check_polls("amq_sort_unique", POLL_N, npolls);

	/* three runs, each a third of the sorted keys, and two and five */
	for (int r = 0; r < 3; r++)
	{
		size_t		len = 0;

		for (size_t i = (size_t) r; i < n; i += 3)
			runs[(size_t) r * POLL_N + len++] = a[i];
		head[r] = runs + (size_t) r * POLL_N;
		end[r] = head[r] + len;
	}
	npolls = 0;
	check(amq_union_count(head, end, 3) == n, "poll: union count of 3 runs", NULL);
	check_polls("amq_union_count, 3 runs", n, npolls);
	npolls = 0;
	check(amq_union_merge(head, end, 3, out) == n, "poll: union merge of 3 runs", NULL);
	check_polls("amq_union_merge, 3 runs", n, npolls);
	npolls = 0;
	(void) amq_union_merge(head, end, 2, out);
	check_polls("amq_union_merge, 2 runs", (size_t) (end[0] - head[0]) * 2, npolls);
	head[3] = head[0];
	end[3] = end[0];
	head[4] = head[1];
	end[4] = end[1];
	npolls = 0;
	check(amq_union_count(head, end, 5) == n, "poll: union count of 5 runs", NULL);
	check_polls("amq_union_count, 5 runs", n, npolls);

	/* the blocked fills, from one run and from three */
	{
		AmqFilter	f;
		size_t		lens[3];

		if (make_filter(&amq_blocked_ops, &f, n, 0.01, 0) != AMQ_OK)
		{
			check(false, "poll: plan a blocked filter", NULL);
			return;
		}
		npolls = 0;
		amq_blocked_fill(f.payload, f.param[0], a, n);
		check_polls("amq_blocked_fill", n, npolls);
		for (int r = 0; r < 3; r++)
			lens[r] = (size_t) (end[r] - head[r]);
		npolls = 0;
		(void) amq_blocked_fill_runs(f.payload, f.param[0], head, lens, 3);
		check(npolls >= (long) (f.param[0] / AMQ_BLOCKED_FILL_SEGMENT),
			  "poll: amq_blocked_fill_runs, 3 runs: a poll per segment of blocks",
			  "%ld polls, %llu blocks", npolls, (unsigned long long) f.param[0]);
		free_filter(&f);
	}
	free(a);
	free(scratch);
	free(out);
	free(runs);
}

/* an allocator that keeps what it handed out, to free it after a jump */
#define TRACK_MAX	16

typedef struct TrackAlloc
{
	void	   *p[TRACK_MAX];
	int			n;
} TrackAlloc;

static void *
track_alloc(void *ctx, size_t size)
{
	TrackAlloc *t = ctx;

	if (t->n == TRACK_MAX)
		return NULL;
	t->p[t->n] = malloc(size);
	return t->p[t->n] ? t->p[t->n++] : NULL;
}

static void
track_free(void *ctx, void *ptr)
{
	TrackAlloc *t = ctx;

	for (int i = 0; i < t->n; i++)
		if (t->p[i] == ptr)
		{
			t->p[i] = t->p[--t->n];
			break;
		}
	free(ptr);
}

/*
 * A static kind's build polls through its passes; jumped out of at its
 * first, middle and last poll, it leaves only its allocator's blocks (which
 * the caller frees, as a memory context would), and then builds the same
 * bytes as before.
 */
static void
poll_static_build(const AmqKindOps *ops)
{
	uint64_t   *keys = static_keys(POLL_N);
	AmqFilter	ref;
	StaticTestAlloc counts = {0, 0, 0};
	long		total;
	char		what[64];
	char		name[256];

	npolls = 0;
	jump_at = 0;
	if (static_make(ops, &ref, keys, POLL_N, 0.01, 0, &counts) != AMQ_OK)
	{
		snprintf(name, sizeof(name), "poll: %s builds", ops->name);
		check(false, name, NULL);
		free(keys);
		return;
	}
	total = npolls;
	snprintf(what, sizeof(what), "%s build", ops->name);
	check_polls(what, POLL_N, total);

	for (int t = 0; t < 3; t++)
	{
		long		at = t == 0 ? 1 : t == 1 ? total / 2 : total;
		AmqFilter	f;
		TrackAlloc	track = {{NULL}, 0};
		AmqAllocator alloc = {track_alloc, track_free, &track};
		volatile bool jumped = false;
		int			left;

		if (make_filter(ops, &f, POLL_N, 0.01, 0) != AMQ_OK)
			break;
		npolls = 0;
		jump_at = at;
		if (setjmp(poll_jmp) == 0)
			(void) ops->build(&f, keys, POLL_N, &alloc);
		else
			jumped = true;
		jump_at = 0;
		left = track.n;
		while (track.n > 0)
			free(track.p[--track.n]);
		snprintf(name, sizeof(name),
				 "poll: %s build left at poll %ld of %ld (%d blocks of its allocator out)",
				 ops->name, at, total, left);
		check(jumped, name, "the hook's jump did not happen");
		free_filter(&f);

		if (make_filter(ops, &f, POLL_N, 0.01, 0) != AMQ_OK)
			break;
		snprintf(name, sizeof(name),
				 "poll: %s builds the same bytes after a build left at poll %ld",
				 ops->name, at);
		check(ops->build(&f, keys, POLL_N, &alloc) == AMQ_OK &&
			  f.payload_len == ref.payload_len && f.seed == ref.seed &&
			  memcmp(f.payload, ref.payload, (size_t) f.payload_len) == 0 &&
			  track.n == 0, name, NULL);
		free_filter(&f);
	}
	free_filter(&ref);
	free(keys);
}

void
test_poll(void)
{
	amq_poll_hook = count_poll;
	poll_sort_and_union();
	poll_static_build(&amq_xor_ops);
	poll_static_build(&amq_fuse_ops);
	poll_static_build(&amq_ribbon_ops);
	amq_poll_hook = NULL;
}
