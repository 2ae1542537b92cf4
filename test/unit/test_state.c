/*-------------------------------------------------------------------------
 *
 * test_state.c
 *	  Unit tests of the serialized aggregate state (amq_state_parse, the
 *	  validation amq_agg_deserialize runs) and of the Parquet bitset import
 *	  (amq_parquet_describe), and the saturation of key counts.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

/* a serialized state: header h, then body */
static uint8_t *
state_bytes(const AmqStateHeader *h, const uint8_t *body, size_t body_len,
			size_t *len)
{
	uint8_t    *buf = xcalloc(1, AMQ_STATE_HEADER + body_len + 1);

	amq_state_write_header(h, buf);
	if (body_len > 0)
		memcpy(buf + AMQ_STATE_HEADER, body, body_len);
	*len = AMQ_STATE_HEADER + body_len;
	return buf;
}

/* parse h + body; check the status and whether a reason was given */
static void
expect(const char *name, const AmqStateHeader *h, const uint8_t *body,
	   size_t body_len, AmqStatus want, bool want_why)
{
	size_t		len;
	uint8_t    *buf = state_bytes(h, body, body_len, &len);
	AmqStateHeader out;
	AmqFilter	f;
	const char *why;
	AmqStatus	st = amq_state_parse(buf, len, &out, &f, &why);

	check(st == want && (why != NULL) == want_why, name,
		  "status %s, reason %s", amq_status_message(st), why ? why : "none");
	free(buf);
}

/* a serialized blocked filter of 100 keys */
static uint8_t *
filter_bytes(uint8_t family, size_t *len)
{
	AmqFilter	f;
	uint8_t    *buf;

	make_filter(&amq_blocked_ops, &f, 100, 0.01, 0);
	add_range(&amq_blocked_ops, &f, 0, 100);
	f.key_family = family;
	f.nkeys = 100;
	buf = serialize_filter(&f, len);
	free_filter(&f);
	return buf;
}

static void
test_state_buffer(void)
{
	AmqStateHeader h = {0};
	AmqStateHeader out;
	AmqFilter	f;
	const char *why;
	uint8_t		body[24];
	uint8_t    *buf;
	size_t		len;
	AmqStatus	st;

	h.mode = AMQ_STATE_BUFFER;
	h.kind = AMQ_KIND_FUSE;
	h.key_family = AMQ_FAMILY_TEXT;
	h.hash_scheme = AMQ_HASH_XXH3;
	h.fpr = 0.01;
	for (int i = 0; i < 3; i++)
		amq_store64(body + 8 * i, key_in(i));

	buf = state_bytes(&h, body, sizeof(body), &len);
	st = amq_state_parse(buf, len, &out, &f, &why);
	check(st == AMQ_OK && out.mode == AMQ_STATE_BUFFER && out.kind == AMQ_KIND_FUSE &&
		  out.key_family == AMQ_FAMILY_TEXT && out.fpr == 0.01 && out.capacity == 0 &&
		  out.nhashes == 3 && out.body == buf + AMQ_STATE_HEADER &&
		  amq_load64(out.body + 16) == key_in(2),
		  "state: buffer round trip", "status %s", amq_status_message(st));

	/* truncated, and every byte of the header that must be zero */
	st = amq_state_parse(buf, AMQ_STATE_HEADER - 1, &out, &f, &why);
	check(st == AMQ_ERR_CORRUPT && why != NULL, "state: truncated header", NULL);
	for (int off = 5; off < 16; off++)
	{
		uint8_t		saved;

		if (off >= 8 && off < 12)
			continue;			/* the key type */
		saved = buf[off];
		buf[off] = 1;
		st = amq_state_parse(buf, len, &out, &f, &why);
		check(st == AMQ_ERR_CORRUPT && why != NULL, "state: reserved byte set",
			  "offset %d: %s", off, amq_status_message(st));
		buf[off] = saved;
	}
	buf[0] = 2;
	st = amq_state_parse(buf, len, &out, &f, &why);
	check(st == AMQ_ERR_VERSION && why != NULL, "state: unknown version", NULL);
	free(buf);

	expect("state: hashes not whole words", &h, body, 12, AMQ_ERR_CORRUPT, true);
	expect("state: no hashes", &h, body, 0, AMQ_OK, false);

	h.mode = AMQ_STATE_SHARED;
	expect("state: the shared hand-over's mode", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	h.mode = AMQ_STATE_LOCAL;
	expect("state: the local hand-over's mode", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	h.mode = 4;
	expect("state: unknown mode", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	h.mode = AMQ_STATE_BUFFER;
	h.kind = 0;
	expect("state: kind 0", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	h.kind = AMQ_KIND_MAX + 1;
	expect("state: unknown kind", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	h.kind = AMQ_KIND_FUSE;

	h.fpr = 0.0;
	expect("state: fpr 0", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	h.fpr = NAN;
	expect("state: fpr NaN", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	h.fpr = 0.6;
	expect("state: fpr above 0.5", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	/* a rate the kind cannot reach is the final build's error, as serially */
	h.fpr = 1e-15;
	expect("state: unreachable fpr left to the build", &h, body, sizeof(body),
		   AMQ_OK, false);
	h.fpr = 0.01;

	h.capacity = -1;
	expect("state: negative capacity", &h, body, sizeof(body), AMQ_ERR_CORRUPT, true);
	/* static kinds are built from the key set, never with a capacity */
	h.capacity = 1000;
	expect("state: capacity of a static kind", &h, body, sizeof(body),
		   AMQ_ERR_CORRUPT, true);
	h.kind = AMQ_KIND_CUCKOO;
	expect("state: capacity of a dynamic kind", &h, body, sizeof(body), AMQ_OK, false);
	h.capacity = 0;

	/* key fields that no filter may have */
	h.hash_scheme = AMQ_HASH_TYPE;
	expect("state: type hashing of a canonical family", &h, body, sizeof(body),
		   AMQ_ERR_CORRUPT, true);
	h.key_family = AMQ_FAMILY_OTHER;
	h.key_type = 2950;
	expect("state: type hashing of another type", &h, body, sizeof(body), AMQ_OK, false);
	h.hash_scheme = AMQ_HASH_PARQUET;
	expect("state: Parquet hashing of a cuckoo state", &h, body, sizeof(body),
		   AMQ_ERR_CORRUPT, true);
	h.kind = AMQ_KIND_BLOCKED;
	h.key_family = AMQ_FAMILY_INT;
	h.key_type = 8;
	expect("state: Parquet hashing of int8 keys", &h, body, sizeof(body), AMQ_OK, false);
	h.key_type = 2;
	expect("state: Parquet hashing of a width 2", &h, body, sizeof(body),
		   AMQ_ERR_CORRUPT, true);
}

static void
test_state_filter(void)
{
	AmqStateHeader h = {0};
	AmqStateHeader out;
	AmqFilter	f;
	const char *why;
	size_t		flen;
	uint8_t    *fbytes = filter_bytes(AMQ_FAMILY_INT, &flen);
	uint8_t    *buf;
	size_t		len;
	AmqStatus	st;

	h.mode = AMQ_STATE_FILTER;
	h.kind = AMQ_KIND_BLOCKED;
	h.key_family = AMQ_FAMILY_INT;
	h.hash_scheme = AMQ_HASH_XXH3;
	h.fpr = 0.01;
	h.capacity = 100;

	buf = state_bytes(&h, fbytes, flen, &len);
	st = amq_state_parse(buf, len, &out, &f, &why);
	check(st == AMQ_OK && out.body_len == flen && f.kind == AMQ_KIND_BLOCKED &&
		  f.nkeys == 100 && amq_blocked_ops.contains(&f, key_in(7)),
		  "state: filter round trip", "status %s", amq_status_message(st));
	free(buf);

	/* the filter's own damage is amq_parse's error, without a reason */
	fbytes[AMQ_HEADER_SIZE + 3] ^= 0x10;
	expect("state: corrupted filter", &h, fbytes, flen, AMQ_ERR_CHECKSUM, false);
	fbytes[AMQ_HEADER_SIZE + 3] ^= 0x10;
	expect("state: truncated filter", &h, fbytes, flen - 1, AMQ_ERR_CORRUPT, false);

	/* the filter must be the state's */
	h.kind = AMQ_KIND_BLOOM;
	expect("state: filter of another kind", &h, fbytes, flen, AMQ_ERR_CORRUPT, true);
	h.kind = AMQ_KIND_BLOCKED;
	h.key_family = AMQ_FAMILY_TEXT;
	expect("state: filter of another family", &h, fbytes, flen, AMQ_ERR_CORRUPT, true);
	free(fbytes);
	fbytes = filter_bytes(AMQ_FAMILY_NONE, &flen);
	h.key_family = AMQ_FAMILY_NONE;
	h.hash_scheme = AMQ_HASH_PARQUET;
	expect("state: filter of another hashing", &h, fbytes, flen, AMQ_ERR_CORRUPT, true);
	free(fbytes);
}

static void
test_parquet_import(void)
{
	uint8_t    *buf = xcalloc(1, AMQ_HEADER_SIZE + 256);
	AmqFilter	f;
	AmqFilter	g;
	AmqStatus	st;

	check(!amq_parquet_bitset_ok(0) && !amq_parquet_bitset_ok(31) &&
		  !amq_parquet_bitset_ok(48) && amq_parquet_bitset_ok(32) &&
		  amq_parquet_bitset_ok(256) && !amq_parquet_bitset_ok(AMQ_MAX_PAYLOAD + 32),
		  "parquet: bitset lengths", NULL);

	/* empty and full bitsets: rates clamped into (0, 0.5], counts finite */
	for (int fill = 0; fill < 2; fill++)
	{
		memset(&f, 0, sizeof(f));
		f.payload_len = 256;
		f.key_family = AMQ_FAMILY_INT;
		f.key_type = 8;
		f.payload = buf + AMQ_HEADER_SIZE;
		memset(f.payload, fill ? 0xff : 0, 256);
		amq_parquet_describe(&f);
		amq_write_header(&f, buf);
		st = amq_parse(buf, AMQ_HEADER_SIZE + 256, &g);
		check(st == AMQ_OK && g.kind == AMQ_KIND_BLOCKED &&
			  g.hash_scheme == AMQ_HASH_PARQUET && g.param[0] == 8 &&
			  (g.flags & AMQ_FLAG_NKEYS_ESTIMATED) &&
			  (fill ? (g.fpr == AMQ_FPR_MAX && g.nkeys > 0) :
			   (g.fpr == 1e-12 && g.nkeys == 0)),
			  fill ? "parquet: full bitset" : "parquet: empty bitset",
			  "status %s, fpr %g, nkeys %llu", amq_status_message(st), g.fpr,
			  (unsigned long long) g.nkeys);
	}
	free(buf);
}

/* key counts saturate where the input gate stops accepting them */
static void
test_key_counts(void)
{
	AmqFilter	f;

	memset(&f, 0, sizeof(f));
	f.nkeys = AMQ_MAX_NKEYS - 1;
	amq_count_add(&f);
	amq_count_add(&f);
	check(f.nkeys == AMQ_MAX_NKEYS, "counts: adds saturate at 2^62", "%llu",
		  (unsigned long long) f.nkeys);
	check(amq_nkeys_from_estimate(INFINITY) == AMQ_MAX_NKEYS &&
		  amq_nkeys_from_estimate(1e30) == AMQ_MAX_NKEYS &&
		  amq_nkeys_from_estimate(NAN) == 0 &&
		  amq_nkeys_from_estimate(-1.0) == 0 &&
		  amq_nkeys_from_estimate(41.6) == 42,
		  "counts: estimates clamped to [0, 2^62]", NULL);
}

void
test_state(void)
{
	test_key_counts();
	test_state_buffer();
	test_state_filter();
	test_parquet_import();
}
