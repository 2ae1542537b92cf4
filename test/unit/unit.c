/*-------------------------------------------------------------------------
 *
 * unit.c
 *	  The harness of the C unit tests: reporting, key streams and the
 *	  checks every kind goes through (see unit.h).
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "unit.h"


int			npassed = 0;
int			nfailed = 0;

/* Report one check; fmt describes the failure (or NULL). */
void
check(bool cond, const char *name, const char *fmt,...)
{
	if (cond)
	{
		printf("ok - %s\n", name);
		npassed++;
		return;
	}
	printf("not ok - %s", name);
	if (fmt != NULL)
	{
		va_list		ap;

		printf(" (");
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf(")");
	}
	printf("\n");
	nfailed++;
}

double
now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

uint64_t
key_in(uint64_t i)
{
	return amq_mix64(KEY_BASE + i);
}

uint64_t
key_out(uint64_t i)
{
	return amq_mix64(NEG_BASE + i);
}

void *
xcalloc(size_t n, size_t size)
{
	void	   *p = calloc(n, size);

	if (p == NULL)
	{
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

/* Plan a filter and allocate its zeroed payload. */
AmqStatus
make_filter(const AmqKindOps *ops, AmqFilter *f, uint64_t capacity,
			double fpr, uint64_t seed)
{
	AmqStatus	st;

	memset(f, 0, sizeof(*f));
	f->kind = ops->id;
	f->hash_scheme = AMQ_HASH_XXH3;
	f->seed = seed;
	f->fpr = fpr;
	st = ops->plan(f, capacity, fpr);
	if (st == AMQ_OK)
		f->payload = xcalloc(1, f->payload_len);
	return st;
}

/* f serialized: a header written for it, then its payload, in a new buffer */
uint8_t *
serialize_filter(const AmqFilter *f, size_t *len)
{
	uint8_t    *buf;

	*len = AMQ_HEADER_SIZE + f->payload_len;
	buf = xcalloc(1, *len);
	memcpy(buf + AMQ_HEADER_SIZE, f->payload, f->payload_len);
	amq_write_header(f, buf);
	return buf;
}

/*
 * Set the format version byte of the serialized filter buf (len bytes),
 * write the checksum that goes with it, and parse it into out.
 */
AmqStatus
parse_as_version(uint8_t *buf, size_t len, int version, AmqFilter *out)
{
	buf[AMQ_OFF_VERSION] = (uint8_t) version;
	amq_store64(buf + AMQ_OFF_CHECKSUM,
				amq_checksum(buf, buf + AMQ_HEADER_SIZE, len - AMQ_HEADER_SIZE));
	return amq_parse(buf, len, out);
}

void
free_filter(AmqFilter *f)
{
	free(f->payload);
	f->payload = NULL;
}

/* copy a filter, payload included */
void
copy_filter(AmqFilter *dst, const AmqFilter *src)
{
	*dst = *src;
	dst->payload = xcalloc(1, src->payload_len);
	memcpy(dst->payload, src->payload, src->payload_len);
}

void
add_range(const AmqKindOps *ops, AmqFilter *f, uint64_t from, uint64_t to)
{
	uint64_t	i;

	for (i = from; i < to; i++)
		ops->add(f, key_in(i));
}

/* number of keys key_in(from..to) that the filter misses */
uint64_t
count_missing(const AmqKindOps *ops, const AmqFilter *f, uint64_t from,
			  uint64_t to)
{
	uint64_t	missing = 0;
	uint64_t	i;

	for (i = from; i < to; i++)
		missing += !ops->contains(f, key_in(i));
	return missing;
}

/* plan, fill to capacity, then check false negatives, fpr and stats */
void
test_accuracy(const AmqKindOps *ops, double fpr, uint64_t seed)
{
	const uint64_t n = 1000000;
	const uint64_t nprobe = 1000000;
	AmqFilter	f;
	AmqStatus	st;
	AmqStats	stats;
	uint64_t	fp = 0;
	uint64_t	i;
	uint64_t	missing;
	double		measured;
	double		ratio;
	double		err;
	char		name[200];

	snprintf(name, sizeof(name), "%s fpr=%g seed=%llu: plan for 10^6 keys",
			 ops->name, fpr, (unsigned long long) seed);
	st = make_filter(ops, &f, n, fpr, seed);
	check(st == AMQ_OK, name, "status %d", (int) st);
	if (st != AMQ_OK)
		return;
	snprintf(name, sizeof(name), "%s fpr=%g seed=%llu: planned filter passes check()",
			 ops->name, fpr, (unsigned long long) seed);
	check(ops->check(&f) == AMQ_OK, name, NULL);

	add_range(ops, &f, 0, n);
	missing = count_missing(ops, &f, 0, n);
	snprintf(name, sizeof(name), "%s fpr=%g seed=%llu: no false negatives",
			 ops->name, fpr, (unsigned long long) seed);
	check(missing == 0, name, "%llu keys missing", (unsigned long long) missing);

	for (i = 0; i < nprobe; i++)
		fp += ops->contains(&f, key_out(i));
	measured = (double) fp / (double) nprobe;
	ratio = measured / fpr;
	snprintf(name, sizeof(name),
			 "%s fpr=%g seed=%llu: measured fpr %.5f (%.3fx target), %.2f bits/key",
			 ops->name, fpr, (unsigned long long) seed, measured, ratio,
			 (double) f.payload_len * 8.0 / (double) n);
	check(ratio >= 0.7 && ratio <= 1.3, name, "outside 0.7x..1.3x");

	ops->stats(&f, &stats);
	err = stats.est_distinct / (double) n - 1.0;
	snprintf(name, sizeof(name),
			 "%s fpr=%g seed=%llu: est_distinct %.0f within 5%% (%+.2f%%), est_fpr %.5f, fill %.3f",
			 ops->name, fpr, (unsigned long long) seed, stats.est_distinct,
			 err * 100.0, stats.est_fpr, stats.fill);
	check(fabs(err) <= 0.05, name, "true count %llu", (unsigned long long) n);

	snprintf(name, sizeof(name), "%s fpr=%g seed=%llu: stats est_fpr near measured",
			 ops->name, fpr, (unsigned long long) seed);
	check(stats.est_fpr > measured * 0.7 && stats.est_fpr < measured * 1.3,
		  name, "est %.5f measured %.5f", stats.est_fpr, measured);

	free_filter(&f);
}

void
test_bits_per_key(const AmqKindOps *ops, uint64_t n, double limit)
{
	AmqFilter	f;
	AmqStatus	st;
	double		bpk;
	char		name[200];

	memset(&f, 0, sizeof(f));
	f.kind = ops->id;
	f.fpr = 0.01;
	st = ops->plan(&f, n, 0.01);
	bpk = (double) f.payload_len * 8.0 / (double) n;
	snprintf(name, sizeof(name), "%s: %.3f bits/key at fpr 1%% for %llu keys (limit %.1f)",
			 ops->name, bpk, (unsigned long long) n, limit);
	check(st == AMQ_OK && bpk <= limit, name, "status %d", (int) st);
}

void
test_plan_edges(const AmqKindOps *ops)
{
	AmqFilter	f;
	AmqStatus	st;
	char		name[200];

	memset(&f, 0, sizeof(f));
	f.kind = ops->id;
	f.fpr = 0.01;

	st = ops->plan(&f, 0, 0.01);
	snprintf(name, sizeof(name), "%s: plan(capacity 0) gives a valid filter",
			 ops->name);
	check(st == AMQ_OK && f.payload_len > 0 && ops->check(&f) == AMQ_OK,
		  name, "status %d len %llu", (int) st,
		  (unsigned long long) f.payload_len);

	st = ops->plan(&f, UINT64_C(1) << 40, 0.01);
	snprintf(name, sizeof(name), "%s: plan(2^40 keys) is AMQ_ERR_TOO_LARGE",
			 ops->name);
	check(st == AMQ_ERR_TOO_LARGE, name, "status %d", (int) st);

	st = ops->plan(&f, UINT64_MAX, 1e-9);
	snprintf(name, sizeof(name), "%s: plan(2^64-1 keys) is AMQ_ERR_TOO_LARGE",
			 ops->name);
	check(st == AMQ_ERR_TOO_LARGE, name, "status %d", (int) st);

	snprintf(name, sizeof(name), "%s: plan rejects fpr 0, 1 and NaN", ops->name);
	check(ops->plan(&f, 100, 0.0) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, 1.0) == AMQ_ERR_PARAM &&
		  ops->plan(&f, 100, nan("")) == AMQ_ERR_PARAM, name, NULL);

	/* a tiny filter still works */
	if (make_filter(ops, &f, 1, 0.01, 0) == AMQ_OK)
	{
		ops->add(&f, key_in(0));
		snprintf(name, sizeof(name), "%s: capacity-1 filter holds its key",
				 ops->name);
		check(ops->contains(&f, key_in(0)), name, NULL);
		free_filter(&f);
	}
}

void
test_merge(const AmqKindOps *ops)
{
	const uint64_t n = 100000;
	AmqFilter	a,
				b,
				u,
				x,
				all,
				other;
	AmqStatus	st;
	uint64_t	missing;
	uint64_t	extra = 0;
	uint64_t	i;
	bool		subset = true;
	char		name[200];

	/* a holds [0, n), b holds [n/2, 3n/2): they share [n/2, n) */
	make_filter(ops, &a, 2 * n, 0.01, 7);
	make_filter(ops, &b, 2 * n, 0.01, 7);
	make_filter(ops, &all, 2 * n, 0.01, 7);
	add_range(ops, &a, 0, n);
	add_range(ops, &b, n / 2, 3 * n / 2);

	copy_filter(&u, &a);
	st = ops->merge(&u, &b, AMQ_MERGE_UNION);
	missing = count_missing(ops, &u, 0, 3 * n / 2);
	snprintf(name, sizeof(name), "%s: union contains every key of both",
			 ops->name);
	check(st == AMQ_OK && missing == 0, name, "status %d, %llu missing",
		  (int) st, (unsigned long long) missing);

	add_range(ops, &all, 0, 3 * n / 2);
	snprintf(name, sizeof(name), "%s: union equals the filter of all keys",
			 ops->name);
	check(memcmp(u.payload, all.payload, all.payload_len) == 0, name, NULL);

	copy_filter(&x, &a);
	st = ops->merge(&x, &b, AMQ_MERGE_INTERSECT);
	missing = count_missing(ops, &x, n / 2, n);
	snprintf(name, sizeof(name), "%s: intersection contains the common keys",
			 ops->name);
	check(st == AMQ_OK && missing == 0, name, "status %d, %llu missing",
		  (int) st, (unsigned long long) missing);

	/* the intersection's bits are those of both, so within a and b */
	for (i = 0; i < x.payload_len; i++)
		if ((x.payload[i] & ~(a.payload[i] & b.payload[i])) != 0)
			subset = false;
	snprintf(name, sizeof(name), "%s: intersection is the AND of the payloads",
			 ops->name);
	check(subset, name, NULL);

	/* keys only in a should mostly be gone from the intersection */
	for (i = 0; i < n / 2; i++)
		extra += ops->contains(&x, key_in(i));
	snprintf(name, sizeof(name),
			 "%s: intersection drops most keys of one side (%.1f%% remain)",
			 ops->name, 100.0 * (double) extra / (double) (n / 2));
	check(extra < n / 2 / 5, name, NULL);

	/* mismatches: geometry, seed, kind */
	make_filter(ops, &other, 3 * n, 0.01, 7);
	st = ops->merge(&u, &other, AMQ_MERGE_UNION);
	snprintf(name, sizeof(name), "%s: merge of different size is AMQ_ERR_MISMATCH",
			 ops->name);
	check(st == AMQ_ERR_MISMATCH, name, "status %d", (int) st);
	free_filter(&other);

	make_filter(ops, &other, 2 * n, 0.01, 8);
	st = ops->merge(&u, &other, AMQ_MERGE_INTERSECT);
	snprintf(name, sizeof(name), "%s: merge of different seed is AMQ_ERR_MISMATCH",
			 ops->name);
	check(st == AMQ_ERR_MISMATCH, name, "status %d", (int) st);

	other.seed = 7;
	other.param[1] ^= 1;
	st = ops->merge(&u, &other, AMQ_MERGE_UNION);
	snprintf(name, sizeof(name), "%s: merge of different param[1] is AMQ_ERR_MISMATCH",
			 ops->name);
	check(st == AMQ_ERR_MISMATCH, name, "status %d", (int) st);
	other.param[1] ^= 1;

	other.kind = (ops->id == AMQ_KIND_BLOOM) ? AMQ_KIND_BLOCKED : AMQ_KIND_BLOOM;
	st = ops->merge(&u, &other, AMQ_MERGE_UNION);
	snprintf(name, sizeof(name), "%s: merge with another kind is AMQ_ERR_MISMATCH",
			 ops->name);
	check(st == AMQ_ERR_MISMATCH, name, "status %d", (int) st);
	free_filter(&other);

	free_filter(&a);
	free_filter(&b);
	free_filter(&u);
	free_filter(&x);
	free_filter(&all);
}

void
test_stats_edges(const AmqKindOps *ops)
{
	AmqFilter	f;
	AmqStats	st;
	char		name[200];

	make_filter(ops, &f, 1000, 0.01, 0);
	ops->stats(&f, &st);
	snprintf(name, sizeof(name), "%s: stats of an empty filter are zero",
			 ops->name);
	check(st.fill == 0.0 && st.est_distinct == 0.0 && st.est_fpr == 0.0,
		  name, "fill %g distinct %g fpr %g", st.fill, st.est_distinct,
		  st.est_fpr);

	memset(f.payload, 0xff, f.payload_len);
	ops->stats(&f, &st);
	snprintf(name, sizeof(name),
			 "%s: stats of a full filter are finite (est_distinct %.0f)",
			 ops->name, st.est_distinct);
	check(st.fill == 1.0 && st.est_fpr == 1.0 && isfinite(st.est_distinct) &&
		  st.est_distinct > 1000.0, name, "fill %g distinct %g fpr %g",
		  st.fill, st.est_distinct, st.est_fpr);
	snprintf(name, sizeof(name), "%s: stats k and fingerprint_bits", ops->name);
	check(st.k == (ops->id == AMQ_KIND_BLOOM ? (uint32_t) f.param[1] : 8) &&
		  st.fingerprint_bits == 0, name, "k %u", st.k);
	free_filter(&f);
}

