/*-------------------------------------------------------------------------
 *
 * test_cuckoo.c
 *	  Unit tests of the "cuckoo" kind: accuracy against the rate its
 *	  fingerprint width and load give, removal, duplicates, the full-table
 *	  behaviour, the bit-packed layout at every width, plan and check.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

#define OPS			(&amq_cuckoo_ops)

/* ---- a slow reference of the documented layout ---- */

static uint64_t
ref_get(const uint8_t *p, uint64_t slot, uint32_t fb)
{
	uint64_t	v = 0;
	uint32_t	k;

	for (k = 0; k < fb; k++)
	{
		uint64_t	pos = slot * fb + k;

		v |= (uint64_t) ((p[pos >> 3] >> (pos & 7)) & 1) << k;
	}
	return v;
}

static void
ref_set(uint8_t *p, uint64_t slot, uint32_t fb, uint64_t v)
{
	uint32_t	k;

	for (k = 0; k < fb; k++)
	{
		uint64_t	pos = slot * fb + k;

		p[pos >> 3] = (uint8_t) ((p[pos >> 3] & ~(1u << (pos & 7))) |
								 (((v >> k) & 1) << (pos & 7)));
	}
}

/* fingerprint and both buckets of a key hash, as the header comment says */
static void
ref_place(const AmqFilter *f, uint64_t hash, uint64_t *fp, uint64_t *i1,
		  uint64_t *i2)
{
	uint64_t	h = amq_seeded(f, hash);
	uint64_t	nb = f->param[0];
	uint32_t	fb = (uint32_t) f->param[1];
	uint64_t	t;

	*fp = (((uint64_t) (uint32_t) h * ((UINT64_C(1) << fb) - 1)) >> 32) + 1;
	*i1 = amq_reduce(h, nb);
	t = amq_reduce(*fp * UINT64_C(0x9e3779b97f4a7c15), nb);
	*i2 = (t + nb - *i1) % nb;
}

static bool
ref_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	fp,
				i1,
				i2;
	int			j;

	ref_place(f, hash, &fp, &i1, &i2);
	for (j = 0; j < 4; j++)
		if (ref_get(f->payload, i1 * 4 + j, (uint32_t) f->param[1]) == fp ||
			ref_get(f->payload, i2 * 4 + j, (uint32_t) f->param[1]) == fp)
			return true;
	return false;
}

/* a filter of nb buckets of fb-bit slots, by hand: the documented length */
static void
make_manual(AmqFilter *f, uint64_t nb, uint32_t fb, uint64_t seed)
{
	memset(f, 0, sizeof(*f));
	f->kind = AMQ_KIND_CUCKOO;
	f->fpr = 0.01;
	f->seed = seed;
	f->param[0] = nb;
	f->param[1] = fb;
	f->payload_len = (nb * 4 * fb + 7) / 8 + (fb <= 16 ? 8 : 16);
	f->payload = xcalloc(1, f->payload_len);
}

static bool
all_zero(const uint8_t *p, uint64_t len)
{
	uint64_t	i;

	for (i = 0; i < len; i++)
		if (p[i] != 0)
			return false;
	return true;
}

/* ---- tests ---- */

static void
test_cuckoo_ops(void)
{
	check(OPS->id == AMQ_KIND_CUCKOO && strcmp(OPS->name, "cuckoo") == 0 &&
		  OPS->caps == (AMQ_CAP_ADD | AMQ_CAP_REMOVE) &&
		  OPS->plan && OPS->check && OPS->add && OPS->remove &&
		  OPS->contains && OPS->stats &&
		  OPS->build == NULL && OPS->grow_plan == NULL && OPS->grow == NULL &&
		  OPS->merge == NULL && OPS->probe_span == NULL &&
		  OPS->contains_span == NULL,
		  "cuckoo ops table: id, name, caps, entries", NULL);
}

/*
 * 10^6 keys: all adds succeed, no false negatives, the measured rate on
 * nneg negatives is within 0.7x..1.3x of the rate stats reports for the
 * fingerprint width at the actual load, which is within the target; then
 * remove half and check the rest.
 */
static void
test_cuckoo_accuracy(double fpr, uint64_t nneg, uint64_t seed)
{
	const uint64_t n = 1000000;
	AmqFilter	f;
	AmqStats	st;
	AmqStatus	s;
	uint64_t	failed = 0;
	uint64_t	missing;
	uint64_t	fp = 0;
	uint64_t	i;
	double		measured;
	char		name[256];

	s = make_filter(OPS, &f, n, fpr, seed);
	snprintf(name, sizeof(name), "cuckoo fpr=%g seed=%llu: plan for 10^6 keys (%u-bit fingerprints, %llu buckets)",
			 fpr, (unsigned long long) seed, (unsigned) f.param[1],
			 (unsigned long long) f.param[0]);
	check(s == AMQ_OK && OPS->check(&f) == AMQ_OK, name, "status %d", (int) s);
	if (s != AMQ_OK)
		return;

	for (i = 0; i < n; i++)
		failed += OPS->add(&f, key_in(i)) != AMQ_OK;
	snprintf(name, sizeof(name), "cuckoo fpr=%g seed=%llu: 10^6 adds succeed",
			 fpr, (unsigned long long) seed);
	check(failed == 0, name, "%llu failed", (unsigned long long) failed);

	missing = count_missing(OPS, &f, 0, n);
	snprintf(name, sizeof(name), "cuckoo fpr=%g seed=%llu: no false negatives",
			 fpr, (unsigned long long) seed);
	check(missing == 0, name, "%llu missing", (unsigned long long) missing);

	OPS->stats(&f, &st);
	for (i = 0; i < nneg; i++)
		fp += OPS->contains(&f, key_out(i));
	measured = (double) fp / (double) nneg;
	snprintf(name, sizeof(name),
			 "cuckoo fpr=%g seed=%llu: measured fpr %.6f = %.3fx the stated %.6f (%u bits, load %.4f, %llu negatives), %.2f bits/key",
			 fpr, (unsigned long long) seed, measured, measured / st.est_fpr,
			 st.est_fpr, st.fingerprint_bits, st.fill,
			 (unsigned long long) nneg, (double) f.payload_len * 8.0 / (double) n);
	check(measured >= 0.7 * st.est_fpr && measured <= 1.3 * st.est_fpr &&
		  st.est_fpr <= fpr, name, NULL);

	snprintf(name, sizeof(name),
			 "cuckoo fpr=%g seed=%llu: stats est_distinct = occupied slots = 10^6, k 0, fingerprint_bits",
			 fpr, (unsigned long long) seed);
	check(st.est_distinct == (double) n && st.k == 0 &&
		  st.fingerprint_bits == f.param[1] &&
		  fabs(st.fill - (double) n / (4.0 * (double) f.param[0])) < 1e-12,
		  name, "distinct %.0f fill %g", st.est_distinct, st.fill);

	/* remove the first half */
	failed = 0;
	for (i = 0; i < n / 2; i++)
		failed += OPS->remove(&f, key_in(i)) != AMQ_OK;
	missing = count_missing(OPS, &f, n / 2, n);
	OPS->stats(&f, &st);
	snprintf(name, sizeof(name),
			 "cuckoo fpr=%g seed=%llu: after removing half, no false negatives in the rest and half the slots used",
			 fpr, (unsigned long long) seed);
	check(failed == 0 && missing == 0 && st.est_distinct == (double) (n / 2),
		  name, "%llu failed, %llu missing, %.0f used",
		  (unsigned long long) failed, (unsigned long long) missing,
		  st.est_distinct);

	/* the removed keys are now found only at about the false-positive rate */
	fp = 0;
	for (i = 0; i < n / 2; i++)
		fp += OPS->contains(&f, key_in(i));
	snprintf(name, sizeof(name),
			 "cuckoo fpr=%g seed=%llu: removed keys answer like negatives (%.6f, stated %.6f)",
			 fpr, (unsigned long long) seed, (double) fp / (double) (n / 2),
			 st.est_fpr);
	check((double) fp / (double) (n / 2) < 2.0 * st.est_fpr + 1e-4, name, NULL);
	free_filter(&f);
}

/*
 * Other widths: the narrowest (4 bits, the 64-bit window with odd shifts),
 * 16 (a full 64-bit bucket) and 24 (the 128-bit window): fpr against the
 * stated rate where it is measurable, and no false negatives.
 */
static void
test_cuckoo_widths_fpr(double fpr, uint32_t expect_bits, uint64_t n,
					   uint64_t nneg)
{
	AmqFilter	f;
	AmqStats	st;
	uint64_t	failed = 0;
	uint64_t	fp = 0;
	uint64_t	i;
	double		measured;
	char		name[256];

	make_filter(OPS, &f, n, fpr, 3);
	for (i = 0; i < n; i++)
		failed += OPS->add(&f, key_in(i)) != AMQ_OK;
	OPS->stats(&f, &st);
	for (i = 0; i < nneg; i++)
		fp += OPS->contains(&f, key_out(i));
	measured = nneg > 0 ? (double) fp / (double) nneg : 0.0;
	if (nneg > 0)
		snprintf(name, sizeof(name),
				 "cuckoo fpr=%g: %u-bit fingerprints at load %.3f (%.2f bits/key), measured fpr %.3g = %.3fx the stated %.3g",
				 fpr, st.fingerprint_bits, st.fill,
				 (double) f.payload_len * 8.0 / (double) n, measured,
				 measured / st.est_fpr, st.est_fpr);
	else
		snprintf(name, sizeof(name),
				 "cuckoo fpr=%g: %u-bit fingerprints at load %.3f (%.2f bits/key), stated fpr %.3g, no false negatives",
				 fpr, st.fingerprint_bits, st.fill,
				 (double) f.payload_len * 8.0 / (double) n, st.est_fpr);
	check(f.param[1] == expect_bits && failed == 0 &&
		  count_missing(OPS, &f, 0, n) == 0 && st.est_fpr <= fpr &&
		  (nneg == 0 || (measured >= 0.7 * st.est_fpr &&
						 measured <= 1.3 * st.est_fpr)),
		  name, "%llu adds failed", (unsigned long long) failed);
	free_filter(&f);
}

/* The bit-packed layout, at every width, against the slow reference. */
static void
test_cuckoo_layout(void)
{
	bool		check_ok = true;
	bool		one_slot = true;
	bool		agree = true;
	bool		hits_ok = true;
	bool		removed = true;
	bool		pad_ok = true;
	bool		hostile_ok = true;
	bool		tiny_ok = true;
	uint32_t	fb;

	for (fb = 4; fb <= 32; fb++)
	{
		AmqFilter	f;
		uint64_t	nb = 37;	/* odd: buckets at odd nibbles when fb is odd */
		uint64_t	fp,
					i1,
					i2;
		uint64_t	used = 0;
		uint64_t	s;
		uint64_t	i;
		uint64_t	data = (nb * 4 * fb + 7) / 8;

		make_manual(&f, nb, fb, 11);
		if (OPS->check(&f) != AMQ_OK)
			check_ok = false;

		/* one key in an empty filter: its fingerprint in bucket i1 */
		OPS->add(&f, key_in(0));
		ref_place(&f, key_in(0), &fp, &i1, &i2);
		for (s = 0; s < nb * 4; s++)
			used += ref_get(f.payload, s, fb) != 0;
		if (used != 1 || ref_get(f.payload, i1 * 4, fb) != fp)
			one_slot = false;

		/* 100 keys, then remove them all: the payload is zero again */
		for (i = 1; i < 100; i++)
			OPS->add(&f, key_in(i));
		for (i = 0; i < 100; i++)
			if (!OPS->contains(&f, key_in(i)) || !ref_contains(&f, key_in(i)))
				hits_ok = false;
		for (i = 0; i < 4000; i++)
			if (OPS->contains(&f, key_out(i)) != ref_contains(&f, key_out(i)))
				agree = false;
		if (!all_zero(f.payload + data, f.payload_len - data))
			pad_ok = false;
		for (i = 0; i < 100; i++)
			OPS->remove(&f, key_in(i));
		if (!all_zero(f.payload, f.payload_len))
			removed = false;

		/*
		 * Arbitrary bytes, padding included, with 100 keys planted by the
		 * reference: contains and the reference agree everywhere.
		 */
		for (i = 0; i < f.payload_len; i++)
			f.payload[i] = (uint8_t) amq_mix64(i * 977 + fb);
		for (i = 0; i < 100; i++)
		{
			ref_place(&f, key_in(i), &fp, &i1, &i2);
			ref_set(f.payload, ((i & 1) ? i2 : i1) * 4 + (i & 3), fb, fp);
			if (!OPS->contains(&f, key_in(i)))
				hits_ok = false;
		}
		for (i = 0; i < 4000; i++)
			if (OPS->contains(&f, key_out(i)) != ref_contains(&f, key_out(i)))
				agree = false;

		/* adds, removes and stats on arbitrary bytes stay in bounds */
		for (i = 0; i < 300; i++)
		{
			AmqStats	st;

			OPS->add(&f, key_out(i));
			OPS->remove(&f, key_out(i / 2));
			if (i % 100 == 0)
			{
				OPS->stats(&f, &st);
				if (!isfinite(st.est_fpr) || st.fill < 0.0 || st.fill > 1.0)
					hostile_ok = false;
			}
		}
		free_filter(&f);

		/* the smallest tables: one and two buckets, filled until full */
		for (nb = 1; nb <= 2; nb++)
		{
			uint8_t		before[64];
			uint64_t	stored = 0;
			uint64_t	k;

			make_manual(&f, nb, fb, 5);
			for (k = 0; k < 64; k++)
			{
				memcpy(before, f.payload, f.payload_len);
				if (OPS->add(&f, key_in(k)) == AMQ_OK)
				{
					stored++;
					continue;
				}
				if (memcmp(before, f.payload, f.payload_len) != 0)
					tiny_ok = false;
			}
			if (stored > 4 * nb || stored < 3 * nb)
				tiny_ok = false;
			for (k = 0; k < 64; k++)
				if (OPS->contains(&f, key_in(k)) != ref_contains(&f, key_in(k)))
					tiny_ok = false;
			free_filter(&f);
		}
	}
	check(hostile_ok, "cuckoo hostile: add, remove and stats on arbitrary payloads stay in bounds",
		  NULL);
	check(tiny_ok, "cuckoo: tables of 1 and 2 buckets fill up, and a failed add changes nothing",
		  NULL);
	check(check_ok, "cuckoo layout: payload is ceil(4 nb fb / 8) + 8 bytes (+ 16 past 16 bits), for every width",
		  NULL);
	check(one_slot, "cuckoo layout: one key fills one slot of its first bucket with its fingerprint",
		  NULL);
	check(hits_ok, "cuckoo layout: added and planted keys are found at every width",
		  NULL);
	check(agree, "cuckoo layout: contains agrees with a bit-by-bit reference at every width",
		  NULL);
	check(pad_ok, "cuckoo layout: the padding is never written", NULL);
	check(removed, "cuckoo layout: removing every key added leaves an all-zero payload",
		  NULL);
}

/*
 * Fill until AMQ_ERR_FULL, then try 200 more keys: every failed add leaves
 * the payload byte for byte as it was, and every key stored, before the
 * first failure or after it, is found.
 */
static void
test_cuckoo_full(double fpr, uint64_t capacity)
{
	AmqFilter	f;
	uint8_t    *before;
	uint64_t   *stored;
	uint64_t	nstored = 0;
	uint64_t	first = 0;
	uint64_t	failures = 0;
	uint64_t	missing = 0;
	uint64_t	i;
	bool		unchanged = true;
	char		name[256];

	make_filter(OPS, &f, capacity, fpr, 21);
	before = xcalloc(1, f.payload_len);
	stored = xcalloc(4 * f.param[0] + 1, sizeof(uint64_t));

	for (i = 0; failures < 200 && i < 100 * capacity; i++)
	{
		AmqStatus	s;

		memcpy(before, f.payload, f.payload_len);
		s = OPS->add(&f, key_in(i));
		if (s == AMQ_OK)
		{
			stored[nstored++] = i;
			continue;
		}
		if (failures++ == 0)
			first = nstored;
		if (s != AMQ_ERR_FULL || memcmp(before, f.payload, f.payload_len) != 0)
			unchanged = false;
	}
	for (i = 0; i < nstored; i++)
		missing += !OPS->contains(&f, key_in(stored[i]));

	snprintf(name, sizeof(name),
			 "cuckoo full (fpr %g, %u bits, capacity %llu): AMQ_ERR_FULL leaves the payload unchanged (first at load %.3f, %llu keys stored in all)",
			 fpr, (unsigned) f.param[1], (unsigned long long) capacity,
			 (double) first / (4.0 * (double) f.param[0]),
			 (unsigned long long) nstored);
	check(failures == 200 && unchanged && first >= capacity, name,
		  "%llu failures, unchanged %d", (unsigned long long) failures,
		  (int) unchanged);
	snprintf(name, sizeof(name),
			 "cuckoo full (fpr %g, capacity %llu): every key stored is found",
			 fpr, (unsigned long long) capacity);
	check(missing == 0, name, "%llu missing", (unsigned long long) missing);
	free(stored);
	free(before);
	free_filter(&f);
}

/* Duplicates: two copies, one removed at a time; at most 8 (or 4) copies. */
static void
test_cuckoo_duplicates(void)
{
	AmqFilter	f;
	AmqFilter	g;
	uint64_t	k = key_in(42);
	uint64_t	fp,
				i1,
				i2;
	uint64_t	copies = 0;
	uint64_t	expect;
	uint8_t    *before;
	int			i;
	bool		ok = true;

	make_filter(OPS, &f, 1000, 0.01, 0);
	check(OPS->add(&f, k) == AMQ_OK && OPS->add(&f, k) == AMQ_OK &&
		  OPS->remove(&f, k) == AMQ_OK && OPS->contains(&f, k),
		  "cuckoo duplicates: a key added twice and removed once is still present",
		  NULL);
	check(OPS->remove(&f, k) == AMQ_OK && !OPS->contains(&f, k) &&
		  all_zero(f.payload, f.payload_len),
		  "cuckoo duplicates: removed twice it is gone and the payload is zero",
		  NULL);
	check(OPS->remove(&f, k) == AMQ_OK && all_zero(f.payload, f.payload_len),
		  "cuckoo remove: an absent key is a no-op returning AMQ_OK", NULL);

	/* a key fills its two buckets, then the table says full */
	ref_place(&f, k, &fp, &i1, &i2);
	expect = (i1 == i2) ? 4 : 8;
	before = xcalloc(1, f.payload_len);
	for (i = 0; i < 12; i++)
	{
		AmqStatus	s;

		memcpy(before, f.payload, f.payload_len);
		s = OPS->add(&f, k);
		if (s == AMQ_OK)
			copies++;
		else if (s != AMQ_ERR_FULL || memcmp(before, f.payload, f.payload_len) != 0)
			ok = false;
	}
	check(ok && copies == expect,
		  "cuckoo duplicates: a key is stored at most 8 times (its two buckets), then AMQ_ERR_FULL changes nothing",
		  "%llu copies", (unsigned long long) copies);
	for (i = 0; i < (int) copies; i++)
		if (!OPS->contains(&f, k) || OPS->remove(&f, k) != AMQ_OK)
			ok = false;
	check(ok && !OPS->contains(&f, k) && all_zero(f.payload, f.payload_len),
		  "cuckoo duplicates: each copy removes one at a time", NULL);
	free(before);
	free_filter(&f);

	/* removing absent keys changes nothing */
	make_filter(OPS, &f, 10000, 0.01, 0);
	add_range(OPS, &f, 0, 5000);
	copy_filter(&g, &f);
	ok = true;
	for (i = 0; i < 20000; i++)
		if (!OPS->contains(&f, key_out(i)) &&
			OPS->remove(&f, key_out(i)) != AMQ_OK)
			ok = false;
	check(ok && memcmp(f.payload, g.payload, f.payload_len) == 0,
		  "cuckoo remove: keys not present change nothing", NULL);

	/* the same keys in the same order give the same bytes */
	memset(g.payload, 0, g.payload_len);
	add_range(OPS, &g, 0, 5000);
	check(memcmp(f.payload, g.payload, f.payload_len) == 0,
		  "cuckoo: adds are deterministic", NULL);
	free_filter(&g);
	free_filter(&f);
}

static void
test_cuckoo_plan(void)
{
	static const double fprs[] = {
		0.5, 0.3, 0.1, 0.05, 0.01, 0.001, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 2e-9
	};
	AmqFilter	f;
	AmqStatus	s;
	bool		ok = true;
	uint32_t	prev = 0;
	size_t		i;
	uint64_t	cap;
	char		line[512];
	size_t		len = 0;

	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_CUCKOO;
	f.fpr = 0.01;

	s = OPS->plan(&f, 0, 0.01);
	check(s == AMQ_OK && f.payload_len > 0 && OPS->check(&f) == AMQ_OK,
		  "cuckoo: plan(capacity 0) gives a valid filter", "status %d", (int) s);
	check(OPS->plan(&f, UINT64_C(1) << 40, 0.01) == AMQ_ERR_TOO_LARGE,
		  "cuckoo: plan(2^40 keys) is AMQ_ERR_TOO_LARGE", NULL);
	check(OPS->plan(&f, UINT64_MAX, 0.01) == AMQ_ERR_TOO_LARGE &&
		  OPS->plan(&f, UINT64_MAX, 1e-9) == AMQ_ERR_TOO_LARGE &&
		  OPS->plan(&f, UINT64_MAX, 1e-15) == AMQ_ERR_TOO_LARGE,
		  "cuckoo: plan(2^64-1 keys) is AMQ_ERR_TOO_LARGE", NULL);
	check(OPS->plan(&f, 100, 0.0) == AMQ_ERR_PARAM &&
		  OPS->plan(&f, 100, 1.0) == AMQ_ERR_PARAM &&
		  OPS->plan(&f, 100, -0.1) == AMQ_ERR_PARAM &&
		  OPS->plan(&f, 100, nan("")) == AMQ_ERR_PARAM,
		  "cuckoo: plan rejects fpr 0, 1, -0.1 and NaN", NULL);
	check(OPS->plan(&f, 100, 1e-10) == AMQ_ERR_PARAM &&
		  OPS->plan(&f, 100, 2e-9) == AMQ_OK && f.param[1] == 32,
		  "cuckoo: fpr below what 32-bit fingerprints give is AMQ_ERR_PARAM; 2e-9 takes 32 bits",
		  NULL);

	/* the largest filter: within the payload limit */
	s = OPS->plan(&f, 800000000, 0.01);
	check(s == AMQ_OK && f.payload_len <= AMQ_MAX_PAYLOAD &&
		  OPS->check(&f) == AMQ_OK &&
		  OPS->plan(&f, 900000000, 0.01) == AMQ_ERR_TOO_LARGE,
		  "cuckoo: 8 10^8 keys at 1% fit in 1 GB, 9 10^8 do not", "status %d",
		  (int) s);

	/* the width grows as fpr falls, and meets it at the planned fill */
	for (i = 0; i < sizeof(fprs) / sizeof(fprs[0]); i++)
	{
		double		load;
		double		rate;

		if (OPS->plan(&f, 1000000, fprs[i]) != AMQ_OK)
		{
			ok = false;
			continue;
		}
		load = 1000000.0 / (4.0 * (double) f.param[0]);
		rate = 1.0 - pow(1.0 - 1.0 / (pow(2.0, (double) f.param[1]) - 1.0),
						 8.0 * load);
		if (f.param[1] < prev || rate > fprs[i] || OPS->check(&f) != AMQ_OK)
			ok = false;
		len += snprintf(line + len, sizeof(line) - len, "%s%g: %u (%.1f)",
						i > 0 ? ", " : "", fprs[i], (unsigned) f.param[1],
						(double) f.payload_len * 8.0 / 1e6);
		prev = (uint32_t) f.param[1];
	}
	printf("# cuckoo plan for 10^6 keys, fpr: fingerprint bits (bits/key): %s\n",
		   line);
	check(ok, "cuckoo plan: fingerprint widths for fpr 0.5 .. 2e-9 meet the target at capacity",
		  NULL);
	OPS->plan(&f, 1000000, 0.01);
	s = OPS->plan(&f, 1000000, 0.001);
	check(f.param[1] == 13 && s == AMQ_OK && OPS->plan(&f, 1000000, 0.01) == AMQ_OK &&
		  f.param[1] == 10,
		  "cuckoo plan: 10 bits at 1%, 13 at 0.1%", NULL);

	/* every small capacity holds its keys, at narrow and usual widths */
	ok = true;
	for (i = 0; i < 3 && ok; i++)
	{
		double		fpr = (i == 0) ? 0.01 : (i == 1) ? 0.5 : 0.15;
		uint64_t	seed;

		for (seed = 0; seed < 2; seed++)
		{
			for (cap = 1; cap <= 2000; cap++)
			{
				uint64_t	j;

				make_filter(OPS, &f, cap, fpr, seed * 1000003 + cap);
				for (j = 0; j < cap; j++)
					if (OPS->add(&f, key_in(j + cap * 10000)) != AMQ_OK)
						ok = false;
				free_filter(&f);
				if (!ok)
					break;
			}
			if (!ok)
				break;
		}
		if (!ok)
			printf("# cuckoo: capacity %llu failed at fpr %g\n",
				   (unsigned long long) cap, fpr);
	}
	check(ok, "cuckoo plan: every capacity 1..2000 holds its keys (fpr 1%, 15%, 50%; 2 seeds)",
		  NULL);

	/* mid-size tables at every narrow width's planned load */
	ok = true;
	for (i = 0; i < 6; i++)
	{
		static const double nf[] = {0.5, 0.25, 0.12, 0.06, 0.03, 0.015};
		uint64_t	j;

		make_filter(OPS, &f, 300000, nf[i], 77);
		for (j = 0; j < 300000; j++)
			if (OPS->add(&f, key_in(j)) != AMQ_OK)
				ok = false;
		if (!ok)
			printf("# cuckoo: 3 10^5 keys at fpr %g (%u bits, load %.3f) failed\n",
				   nf[i], (unsigned) f.param[1],
				   300000.0 / (4.0 * (double) f.param[0]));
		free_filter(&f);
	}
	check(ok, "cuckoo plan: 3 10^5 keys fit at the planned load of 4- to 9-bit fingerprints",
		  NULL);
}

static void
test_cuckoo_check(void)
{
	AmqFilter	f;
	AmqFilter	g;

	make_filter(OPS, &f, 1000, 0.01, 0);
	check(OPS->check(&f) == AMQ_OK, "cuckoo check: a planned filter passes", NULL);

	g = f;
	g.param[0] = 0;
	g.payload_len = 8;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT, "cuckoo check: rejects 0 buckets", NULL);
	g = f;
	g.param[0]++;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects a bucket count of another length", NULL);
	g = f;
	g.param[0] = (UINT64_C(1) << 30) + 1;
	g.payload_len = (g.param[0] * 4 * 4 + 7) / 8 + 8;
	g.param[1] = 4;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects more than 2^30 buckets", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 61;
	g.param[1] = 16;
	g.payload_len = 8;		/* 2^61 * 64 bits / 8 wraps to 0 */
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects a bucket count whose size wraps", NULL);
	g = f;
	g.param[0] = UINT64_C(1) << 30;
	g.param[1] = 32;
	g.payload_len = (g.param[0] * 4 * 32) / 8 + 16;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects a consistent payload beyond AMQ_MAX_PAYLOAD", NULL);
	g = f;
	g.param[1] = 3;
	g.payload_len = (g.param[0] * 4 * 3 + 7) / 8 + 8;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects 3-bit fingerprints", NULL);
	g = f;
	g.param[1] = 33;
	g.payload_len = (g.param[0] * 4 * 33 + 7) / 8 + 16;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects 33-bit fingerprints", NULL);
	g = f;
	g.param[1] |= UINT64_C(1) << 32;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects a width that only looks valid in 32 bits", NULL);
	g = f;
	g.param[1] = 11;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects a width of another length", NULL);
	g = f;
	g.param[2] = 1;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects nonzero param[2]", NULL);
	g = f;
	g.payload_len++;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects payload_len one byte long", NULL);
	g = f;
	g.payload_len--;
	check(OPS->check(&g) == AMQ_ERR_CORRUPT,
		  "cuckoo check: rejects payload_len one byte short (no padding)", NULL);
	free_filter(&f);
}

static void
test_cuckoo_stats_edges(void)
{
	AmqFilter	f;
	AmqStats	st;

	make_filter(OPS, &f, 1000, 0.01, 0);
	OPS->stats(&f, &st);
	check(st.fill == 0.0 && st.est_fpr == 0.0 && st.est_distinct == 0.0 &&
		  st.k == 0 && st.fingerprint_bits == 10,
		  "cuckoo: stats of an empty filter are zero, 10-bit fingerprints", NULL);
	memset(f.payload, 0xff, f.payload_len);
	OPS->stats(&f, &st);
	check(st.fill == 1.0 && isfinite(st.est_fpr) && st.est_fpr > 0.0 &&
		  st.est_fpr < 0.01 && st.est_distinct == 4.0 * (double) f.param[0],
		  "cuckoo: stats of an all-ones payload are finite (every slot used)",
		  "fill %g fpr %g distinct %g", st.fill, st.est_fpr, st.est_distinct);
	free_filter(&f);
}

static void
time_cuckoo(void)
{
	const uint64_t n = 10000000;
	AmqFilter	f;
	uint64_t	hits = 0;
	uint64_t	failed = 0;
	uint64_t	i;
	double		t_add;
	double		t_neg;
	double		t_pos;
	double		t_rm;

	if (make_filter(OPS, &f, n, 0.01, 0) != AMQ_OK)
		return;
	t_add = now_sec();
	for (i = 0; i < n; i++)
		failed += OPS->add(&f, key_in(i)) != AMQ_OK;
	t_add = now_sec() - t_add;

	t_neg = now_sec();
	for (i = 0; i < n; i++)
		hits += OPS->contains(&f, key_out(i));
	t_neg = now_sec() - t_neg;

	t_pos = now_sec();
	for (i = 0; i < n; i++)
		hits += OPS->contains(&f, key_in(i));
	t_pos = now_sec() - t_pos;

	t_rm = now_sec();
	for (i = 0; i < n; i++)
		OPS->remove(&f, key_in(i));
	t_rm = now_sec() - t_rm;

	printf("# cuckoo at 10^7 keys, fpr 1%% (%.1f MB): add %.1f ns/key, "
		   "probe %.1f ns absent, %.1f ns present; remove %.1f ns/key "
		   "(%.2f bits/key, %u-bit fingerprints, load %.3f, %llu hits)\n",
		   (double) f.payload_len / 1e6, t_add * 1e9 / (double) n,
		   t_neg * 1e9 / (double) n, t_pos * 1e9 / (double) n,
		   t_rm * 1e9 / (double) n,
		   (double) f.payload_len * 8.0 / (double) n, (unsigned) f.param[1],
		   (double) n / (4.0 * (double) f.param[0]),
		   (unsigned long long) hits);
	check(failed == 0 && all_zero(f.payload, f.payload_len),
		  "cuckoo: 10^7 keys added, then all removed, leave a zero payload", NULL);
	free_filter(&f);
}

void
test_cuckoo(void)
{
	test_cuckoo_ops();
	test_cuckoo_accuracy(0.01, 1000000, 0);
	test_cuckoo_accuracy(0.001, 10000000, 0);
	test_cuckoo_accuracy(0.01, 1000000, UINT64_C(0x0123456789abcdef));
	test_cuckoo_widths_fpr(0.5, 4, 100000, 1000000);
	test_cuckoo_widths_fpr(2e-4, 16, 1000000, 20000000);
	test_cuckoo_widths_fpr(1e-6, 23, 1000000, 0);
	test_bits_per_key(OPS, 1000000, 10.6);
	test_bits_per_key(OPS, 10000000, 10.6);
	test_cuckoo_layout();
	test_cuckoo_full(0.01, 100);
	test_cuckoo_full(0.5, 100);
	test_cuckoo_full(1e-6, 1000);
	test_cuckoo_full(0.01, 100000);
	test_cuckoo_duplicates();
	test_cuckoo_plan();
	test_cuckoo_check();
	test_cuckoo_stats_edges();
	time_cuckoo();
}
