/*-------------------------------------------------------------------------
 *
 * fuzz_common.c
 *	  Driving an accepted filter through its kind's operations, with the
 *	  checks of what the SQL layer relies on.  See fuzz_common.h.
 *
 * Payloads are copied into buffers of exactly their length so that
 * AddressSanitizer sees any read or write past either end.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "fuzz_common.h"

#define NPROBES			24
#define NADDS			12
/* a growing kind may grow its payload this far in one run */
#define MAX_GROWN_BYTES	((uint64_t) 1 << 22)

void *
fuzz_malloc(size_t size)
{
	void	   *p = malloc(size ? size : 1);

	if (p == NULL)
		abort();
	return p;
}

void
fuzz_fix_checksum(uint8_t *buf, size_t len)
{
	amq_store64(buf + 72, amq_checksum(buf, buf + AMQ_HEADER_SIZE,
									   len - AMQ_HEADER_SIZE));
}

/* a copy of f whose payload is its own buffer of exactly payload_len bytes */
static void
clone(AmqFilter *dst, const AmqFilter *src)
{
	*dst = *src;
	dst->payload = fuzz_malloc((size_t) src->payload_len);
	memcpy(dst->payload, src->payload, (size_t) src->payload_len);
}

/*
 * Serialize f as the SQL layer stores it and pass it through the input
 * gate again: what the kinds write must always read back.
 */
static void
check_reparses(const AmqFilter *f, const char *after)
{
	size_t		len = AMQ_HEADER_SIZE + (size_t) f->payload_len;
	uint8_t    *buf = fuzz_malloc(len);
	AmqFilter	g;
	AmqStatus	st;

	memcpy(buf + AMQ_HEADER_SIZE, f->payload, (size_t) f->payload_len);
	amq_write_header(f, buf);
	st = amq_parse(buf, len, &g);
	FUZZ_CHECK(st == AMQ_OK, "kind %d after %s: %s", f->kind, after,
			   amq_status_message(st));
	free(buf);
}

static void
check_stats(const AmqKindOps *ops, const AmqFilter *f)
{
	AmqStats	st;

	memset(&st, 0xa5, sizeof(st));
	ops->stats(f, &st);
	FUZZ_CHECK(st.fill >= 0.0 && st.fill <= 1.0, "%s fill %g", ops->name, st.fill);
	FUZZ_CHECK(st.est_fpr >= 0.0 && st.est_fpr <= 1.0, "%s est_fpr %g",
			   ops->name, st.est_fpr);
	/* a saturated filter may estimate infinitely many keys, never NaN */
	FUZZ_CHECK(st.est_distinct >= 0.0, "%s est_distinct %g", ops->name,
			   st.est_distinct);
}

/* key hashes to probe and add: spread, and different for every input */
static uint64_t
fuzz_key(uint64_t i, uint64_t salt)
{
	return amq_mix64(i * 0x9e3779b97f4a7c15ULL + salt);
}

/* Add hash to f, growing the payload as AmqAddHash does. */
static AmqStatus
add_growing(const AmqKindOps *ops, AmqFilter *f, uint64_t hash)
{
	AmqStatus	st = ops->add(f, hash);

	while (st == AMQ_ERR_FULL && (ops->caps & AMQ_CAP_GROW))
	{
		uint64_t	newlen;
		uint8_t    *p;

		if (ops->grow_plan(f, &newlen) != AMQ_OK)
			return AMQ_ERR_TOO_LARGE;
		FUZZ_CHECK(newlen > f->payload_len, "%s grows from %llu to %llu bytes",
				   ops->name, (unsigned long long) f->payload_len,
				   (unsigned long long) newlen);
		if (newlen > MAX_GROWN_BYTES)
			return AMQ_ERR_TOO_LARGE;
		p = fuzz_malloc((size_t) newlen);
		memcpy(p, f->payload, (size_t) f->payload_len);
		memset(p + f->payload_len, 0, (size_t) (newlen - f->payload_len));
		free(f->payload);
		f->payload = p;
		ops->grow(f, newlen);
		FUZZ_CHECK(f->payload_len == newlen, "%s grow left %llu bytes, planned %llu",
				   ops->name, (unsigned long long) f->payload_len,
				   (unsigned long long) newlen);
		FUZZ_CHECK(ops->check(f) == AMQ_OK, "%s invalid after growing", ops->name);
		st = ops->add(f, hash);
	}
	return st;
}

void
fuzz_exercise(const AmqFilter *parsed, const uint8_t *bytes, size_t len)
{
	const AmqKindOps *ops = amq_kind_ops(parsed->kind);
	uint8_t		header[AMQ_HEADER_SIZE];
	AmqFilter	f;
	uint64_t	salt = parsed->seed ^ parsed->payload_len ^ parsed->nkeys;
	uint64_t	probes[NPROBES];
	bool		present[NPROBES];

	FUZZ_CHECK(ops != NULL, "kind %d accepted", parsed->kind);
	FUZZ_CHECK(parsed->payload_len == len - AMQ_HEADER_SIZE, "payload length");

	/* an accepted filter writes back to the same bytes (text round trip) */
	f = *parsed;
	f.payload = (uint8_t *) bytes + AMQ_HEADER_SIZE;
	amq_write_header(&f, header);
	FUZZ_CHECK(memcmp(header, bytes, AMQ_HEADER_SIZE) == 0, "header round trip");

	clone(&f, parsed);
	FUZZ_CHECK(ops->check(&f) == AMQ_OK, "check");
	check_stats(ops, &f);

	for (int i = 0; i < NPROBES; i++)
	{
		probes[i] = fuzz_key(i, salt);
		present[i] = ops->contains(&f, probes[i]);
		if (ops->caps & AMQ_CAP_SLICE)
		{
			uint64_t	off = UINT64_MAX;
			uint32_t	slen = UINT32_MAX;
			uint8_t    *span;

			ops->probe_span(&f, probes[i], &off, &slen);
			FUZZ_CHECK(off <= f.payload_len && slen <= f.payload_len - off,
					   "%s span %llu+%u of %llu bytes", ops->name,
					   (unsigned long long) off, slen,
					   (unsigned long long) f.payload_len);
			span = fuzz_malloc(slen);
			memcpy(span, f.payload + off, slen);
			FUZZ_CHECK(ops->contains_span(&f, probes[i], span) == present[i],
					   "%s slice probe differs", ops->name);
			free(span);
		}
	}

	/* union and intersection with itself, and union into an empty copy */
	if (ops->caps & (AMQ_CAP_UNION | AMQ_CAP_INTERSECT))
	{
		for (int op = 0; op < 3; op++)
		{
			AmqFilter	m;
			AmqStatus	st;
			AmqMergeOp	mop = (op == 1) ? AMQ_MERGE_INTERSECT : AMQ_MERGE_UNION;

			if (!(ops->caps & (mop == AMQ_MERGE_UNION ? AMQ_CAP_UNION : AMQ_CAP_INTERSECT)))
				continue;
			clone(&m, &f);
			if (op == 2)
				memset(m.payload, 0, (size_t) m.payload_len);
			/* the largest count the SQL layer may give the result */
			m.nkeys = amq_nkeys_from_estimate((double) f.nkeys + (double) f.nkeys);
			st = ops->merge(&m, &f, mop);
			FUZZ_CHECK(st == AMQ_OK, "%s merge with itself: %s", ops->name,
					   amq_status_message(st));
			for (int i = 0; i < NPROBES; i++)
				FUZZ_CHECK(!present[i] || ops->contains(&m, probes[i]),
						   "%s lost key %d in merge %d", ops->name, i, op);
			check_stats(ops, &m);
			check_reparses(&m, "merge");
			free(m.payload);
		}
	}

	/* adds to a copy: every added key is found afterwards */
	if (ops->caps & AMQ_CAP_ADD)
	{
		AmqFilter	a;
		bool		added[NADDS];
		uint64_t	keys[NADDS];

		clone(&a, &f);
		for (int i = 0; i < NADDS; i++)
		{
			AmqStatus	st;

			keys[i] = fuzz_key(i + 1000, salt);
			st = add_growing(ops, &a, keys[i]);
			FUZZ_CHECK(st == AMQ_OK || st == AMQ_ERR_FULL || st == AMQ_ERR_TOO_LARGE,
					   "%s add: %s", ops->name, amq_status_message(st));
			added[i] = (st == AMQ_OK);
			if (added[i])
				amq_count_add(&a);	/* as the SQL layer counts */
			if (added[i])
				FUZZ_CHECK(ops->contains(&a, keys[i]), "%s add lost key %d",
						   ops->name, i);
		}
		for (int i = 0; i < NADDS; i++)
			FUZZ_CHECK(!added[i] || ops->contains(&a, keys[i]),
					   "%s later adds lost key %d", ops->name, i);
		check_stats(ops, &a);
		check_reparses(&a, "add");

		/* removing a key keeps every other added key */
		if (ops->caps & AMQ_CAP_REMOVE)
		{
			for (int r = 0; r < NADDS; r += 3)
			{
				AmqStatus	st;

				if (!added[r])
					continue;
				st = ops->remove(&a, keys[r]);
				FUZZ_CHECK(st == AMQ_OK, "%s remove: %s", ops->name,
						   amq_status_message(st));
				added[r] = false;
				for (int i = 0; i < NADDS; i++)
					FUZZ_CHECK(!added[i] || ops->contains(&a, keys[i]),
							   "%s remove lost key %d", ops->name, i);
			}
			/* probes the filter reports present can be removed, as SQL may */
			for (int i = 0; i < NPROBES; i++)
				if (ops->contains(&a, probes[i]))
				{
					AmqStatus	st = ops->remove(&a, probes[i]);

					FUZZ_CHECK(st == AMQ_OK, "%s remove of a present key: %s",
							   ops->name, amq_status_message(st));
				}
			check_stats(ops, &a);
			check_reparses(&a, "remove");
		}
		free(a.payload);
	}
	free(f.payload);
}
