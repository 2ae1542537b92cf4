/*-------------------------------------------------------------------------
 *
 * core_parquet.c
 *	  Parquet bloom filters in the pure-C core: what amq_from_parquet
 *	  takes, a bare split block bitset or a whole Parquet bloom filter (a
 *	  Thrift compact-protocol BloomFilterHeader, then the bitset), and the
 *	  blocked filter such a bitset describes.
 *
 * Parquet lives in two files, one per layer.  This one reads untrusted
 * bytes, so it is pure C, like the rest of the core: the unit tests
 * (test/unit/test_parquet.c) and a libFuzzer harness (test/fuzz/
 * fuzz_parquet.c) run it without a server.  amq_parquet.c is the SQL side:
 * the functions amq_to_parquet and amq_from_parquet, and Parquet's hashing
 * of SQL values.
 *
 *-------------------------------------------------------------------------
 */
#include <stdarg.h>
#include <stdio.h>

#include "core.h"

/*
 * Parquet split block bitsets (amq_from_parquet): a whole number of 32-byte
 * blocks, at least one, that fits in a filter.
 */
bool
amq_parquet_bitset_ok(uint64_t len)
{
	return len >= 32 && len % 32 == 0 && len <= AMQ_MAX_PAYLOAD;
}

/*
 * Make f, whose payload holds a Parquet bitset of f->payload_len bytes
 * (amq_parquet_bitset_ok) and whose key fields are set, a blocked filter
 * with Parquet hashing: its geometry from the length, its rate and key
 * count estimated from its bits.  The header is then written as for any
 * filter.
 */
void
amq_parquet_describe(AmqFilter *f)
{
	AmqStats	st;

	f->kind = AMQ_KIND_BLOCKED;
	f->hash_scheme = AMQ_HASH_PARQUET;
	f->seed = 0;
	f->param[0] = f->payload_len / 32;
	f->param[1] = f->param[2] = 0;
	amq_blocked_ops.stats(f, &st);
	f->fpr = st.est_fpr < 1e-12 ? 1e-12 :
		(st.est_fpr > AMQ_FPR_MAX ? AMQ_FPR_MAX : st.est_fpr);
	f->nkeys = amq_nkeys_from_estimate(st.est_distinct);
	f->flags |= AMQ_FLAG_NKEYS_ESTIMATED;
}

/*
 * Whole Parquet bloom filters (amq_from_parquet).  A Parquet file stores a
 * column chunk's filter as a Thrift compact-protocol BloomFilterHeader
 * followed by its bitset:
 *
 *	struct BloomFilterHeader {
 *	  1: required i32 numBytes;						   bytes of bitset after it
 *	  2: required BloomFilterAlgorithm algorithm;	   union { 1: BLOCK }
 *	  3: required BloomFilterHash hash;				   union { 1: XXHASH }
 *	  4: required BloomFilterCompression compression;  union { 1: UNCOMPRESSED }
 *	}
 *
 * each union member an empty struct.  The reader below walks untrusted
 * bytes: it never reads past the end, refuses a varint longer than its
 * type, a field id that does not fit an i16, an unknown type and nesting
 * deeper than AMQ_THRIFT_MAX_DEPTH, and skips fields of the header it does
 * not know (a newer writer's), as Thrift readers do.  A field inside a
 * union's member struct is not skipped but refused: it would be a parameter
 * of the algorithm, hash or compression, which could change the bits.
 */
#define AMQ_THRIFT_MAX_DEPTH	64

/* compact protocol type ids */
enum
{
	TC_STOP = 0,
	TC_TRUE = 1,				/* a bool field's value is its type */
	TC_FALSE = 2,
	TC_BYTE = 3,
	TC_I16 = 4,
	TC_I32 = 5,
	TC_I64 = 6,
	TC_DOUBLE = 7,
	TC_BINARY = 8,
	TC_LIST = 9,
	TC_SET = 10,
	TC_MAP = 11,
	TC_STRUCT = 12,
	TC_UUID = 13
};

typedef struct TcReader
{
	const uint8_t *p;
	const uint8_t *end;
	char	   *why;			/* the first failure, a sentence */
	size_t		whylen;
	bool		failed;
} TcReader;

static bool
tc_fail(TcReader *r, const char *fmt,...)
	__attribute__((format(printf, 2, 3)));

/* Record the first failure, a sentence; returns false. */
static bool
tc_fail(TcReader *r, const char *fmt,...)
{
	if (!r->failed)
	{
		va_list		ap;

		va_start(ap, fmt);
		vsnprintf(r->why, r->whylen, fmt, ap);
		va_end(ap);
		r->failed = true;
	}
	return false;
}

/* Fail: the bytes end inside the header. */
static bool
tc_truncated(TcReader *r)
{
	return tc_fail(r, "The bytes end inside the BloomFilterHeader.");
}

/* Read one byte. */
static bool
tc_byte(TcReader *r, uint8_t *b)
{
	if (r->p >= r->end)
		return tc_truncated(r);
	*b = *r->p++;
	return true;
}

/* Skip n bytes. */
static bool
tc_skip_bytes(TcReader *r, uint64_t n)
{
	if (n > (uint64_t) (r->end - r->p))
		return tc_truncated(r);
	r->p += n;
	return true;
}

/*
 * An unsigned LEB128 varint of at most "bits" bits (16, 32 or 64): at most
 * ceil(bits / 7) bytes, none with bits beyond "bits".
 */
static bool
tc_varint(TcReader *r, int bits, uint64_t *out)
{
	int			maxbytes = (bits + 6) / 7;
	uint64_t	v = 0;

	for (int i = 0; i < maxbytes; i++)
	{
		uint8_t		b = 0;

		if (!tc_byte(r, &b))
			return false;
		/* the last byte may hold bits - 7 * i bits, no more */
		if (7 * (i + 1) > bits && (b & 0x7f) >> (bits - 7 * i) != 0)
			break;
		v |= (uint64_t) (b & 0x7f) << (7 * i);
		if ((b & 0x80) == 0)
		{
			*out = v;
			return true;
		}
	}
	return tc_fail(r, "A varint of the BloomFilterHeader is longer than its %d-bit type.",
				   bits);
}

/* zigzag-decoded signed varint of at most "bits" bits */
static bool
tc_zigzag(TcReader *r, int bits, int64_t *out)
{
	uint64_t	v = 0;

	if (!tc_varint(r, bits, &v))
		return false;
	*out = (int64_t) (v >> 1) ^ -(int64_t) (v & 1);
	return true;
}

/*
 * A field header of a struct whose previous field id is *last: *type is
 * TC_STOP at the struct's end, else the field's type and *id its id.
 */
static bool
tc_field(TcReader *r, int *last, int *type, int *id)
{
	uint8_t		b = 0;
	int			delta;

	if (!tc_byte(r, &b))
		return false;
	if (b == TC_STOP)
	{
		*type = TC_STOP;
		return true;
	}
	*type = b & 0x0f;
	if (*type == TC_STOP || *type > TC_UUID)
		return tc_fail(r, "A field of the BloomFilterHeader has unknown type %d.", *type);
	delta = b >> 4;
	if (delta != 0)
		*id = *last + delta;
	else
	{
		int64_t		v = 0;

		if (!tc_zigzag(r, 16, &v))
			return false;
		*id = (int) v;
	}
	if (*id < INT16_MIN || *id > INT16_MAX)
		return tc_fail(r, "A field id of the BloomFilterHeader is out of range.");
	*last = *id;
	return true;
}

static bool tc_skip(TcReader *r, int type, bool element, int depth);

/* a struct, its fields up to its STOP, at nesting depth "depth" */
static bool
tc_skip_struct(TcReader *r, int depth)
{
	int			last = 0;

	if (depth > AMQ_THRIFT_MAX_DEPTH)
		return tc_fail(r, "The BloomFilterHeader nests more than %d deep.",
					   AMQ_THRIFT_MAX_DEPTH);
	for (;;)
	{
		int			type;
		int			id;

		if (!tc_field(r, &last, &type, &id))
			return false;
		if (type == TC_STOP)
			return true;
		if (!tc_skip(r, type, false, depth + 1))
			return false;
	}
}

/* an element type of a list, set or map */
static bool
tc_element_type(TcReader *r, int type)
{
	if (type == TC_STOP || type > TC_UUID)
		return tc_fail(r, "A collection in the BloomFilterHeader has elements of unknown type %d.",
					   type);
	return true;
}

/*
 * Skip one value of the given type: a field's ("element" false: a bool is
 * its field header's type alone) or a collection's element (a bool is a
 * byte).  Every element takes at least one byte, so an element count is
 * checked against the bytes left before any is read.
 */
static bool
tc_skip(TcReader *r, int type, bool element, int depth)
{
	uint64_t	n = 0;
	uint8_t		b = 0;

	if (depth > AMQ_THRIFT_MAX_DEPTH)
		return tc_fail(r, "The BloomFilterHeader nests more than %d deep.",
					   AMQ_THRIFT_MAX_DEPTH);
	switch (type)
	{
		case TC_TRUE:
		case TC_FALSE:
			return element ? tc_skip_bytes(r, 1) : true;
		case TC_BYTE:
			return tc_skip_bytes(r, 1);
		case TC_I16:
			return tc_varint(r, 16, &n);
		case TC_I32:
			return tc_varint(r, 32, &n);
		case TC_I64:
			return tc_varint(r, 64, &n);
		case TC_DOUBLE:
			return tc_skip_bytes(r, 8);
		case TC_UUID:
			return tc_skip_bytes(r, 16);
		case TC_BINARY:
			return tc_varint(r, 32, &n) && tc_skip_bytes(r, n);
		case TC_LIST:
		case TC_SET:
			{
				int			etype;

				if (!tc_byte(r, &b))
					return false;
				etype = b & 0x0f;
				n = b >> 4;
				if (n == 15 && !tc_varint(r, 32, &n))
					return false;
				if (!tc_element_type(r, etype))
					return false;
				if (n > (uint64_t) (r->end - r->p))
					return tc_truncated(r);
				for (uint64_t i = 0; i < n; i++)
					if (!tc_skip(r, etype, true, depth + 1))
						return false;
				return true;
			}
		case TC_MAP:
			{
				int			ktype;
				int			vtype;

				if (!tc_varint(r, 32, &n))
					return false;
				if (n == 0)
					return true;
				if (!tc_byte(r, &b))
					return false;
				ktype = b >> 4;
				vtype = b & 0x0f;
				if (!tc_element_type(r, ktype) || !tc_element_type(r, vtype))
					return false;
				if (n > (uint64_t) (r->end - r->p) / 2)
					return tc_truncated(r);
				for (uint64_t i = 0; i < n; i++)
					if (!tc_skip(r, ktype, true, depth + 1) ||
						!tc_skip(r, vtype, true, depth + 1))
						return false;
				return true;
			}
		case TC_STRUCT:
			return tc_skip_struct(r, depth);
	}
	return tc_fail(r, "A field of the BloomFilterHeader has unknown type %d.", type);
}

/*
 * One of the header's unions (field "name"): a struct with exactly one
 * member set.  *member receives its field id, and *plain whether it is an
 * empty struct, as every member Parquet defines is.
 */
static bool
tc_union(TcReader *r, const char *name, int *member, bool *plain)
{
	int			last = 0;
	int			nmembers = 0;

	for (;;)
	{
		int			type;
		int			id;

		if (!tc_field(r, &last, &type, &id))
			return false;
		if (type == TC_STOP)
			break;
		if (++nmembers > 1)
			return tc_fail(r, "The %s union of the BloomFilterHeader has more than one member set.",
						   name);
		if (id == 1 && type != TC_STRUCT)
			return tc_fail(r, "Member 1 of the %s union of the BloomFilterHeader is not a struct.",
						   name);
		*member = id;
		*plain = false;
		if (type == TC_STRUCT)
		{
			const uint8_t *start = r->p;

			if (!tc_skip_struct(r, 2))
				return false;
			/* empty: its STOP alone */
			*plain = (r->p == start + 1);
		}
		else if (!tc_skip(r, type, false, 2))
			return false;
	}
	if (nmembers == 0)
		return tc_fail(r, "The %s union of the BloomFilterHeader has no member set.", name);
	return true;
}

static const char *const pq_field_names[] = {
	NULL, "numBytes", "algorithm", "hash", "compression"
};

/*
 * Parse the BloomFilterHeader at the start of buf (len bytes) into *h.
 * False, with the reason in r's buffer, unless the bytes begin with a
 * well-formed struct that has all four fields, of their types.
 * *any_field says whether a field of the header was read at all.
 */
static bool
pq_parse_header(TcReader *r, AmqParquetHeader *h, bool *any_field)
{
	int			last = 0;
	bool		seen[5] = {false};

	*any_field = false;
	for (;;)
	{
		int			type;
		int			id;
		int64_t		v = 0;

		if (!tc_field(r, &last, &type, &id))
			return false;
		if (type == TC_STOP)
			break;
		*any_field = true;
		if (id < 1 || id > 4)
		{
			/* a field a newer format may add */
			if (!tc_skip(r, type, false, 1))
				return false;
			continue;
		}
		if (seen[id])
			return tc_fail(r, "Field %s (%d) of the BloomFilterHeader appears twice.",
						   pq_field_names[id], id);
		seen[id] = true;
		if (id == 1)
		{
			if (type != TC_I32)
				return tc_fail(r, "Field numBytes (1) of the BloomFilterHeader is not an i32.");
			if (!tc_zigzag(r, 32, &v))
				return false;
			h->num_bytes = v;
			continue;
		}
		if (type != TC_STRUCT)
			return tc_fail(r, "Field %s (%d) of the BloomFilterHeader is not a union.",
						   pq_field_names[id], id);
		if (id == 2 && !tc_union(r, "algorithm", &h->algorithm, &h->algorithm_plain))
			return false;
		if (id == 3 && !tc_union(r, "hash", &h->hash, &h->hash_plain))
			return false;
		if (id == 4 && !tc_union(r, "compression", &h->compression, &h->compression_plain))
			return false;
	}
	for (int id = 1; id <= 4; id++)
		if (!seen[id])
			return tc_fail(r, "The BloomFilterHeader lacks required field %s (%d).",
						   pq_field_names[id], id);
	return true;
}

/* a header of an algorithm, hash or compression other than Parquet's */
static AmqStatus
pq_unsupported(AmqParquetInput *out, const char *what, const char *union_name,
			   const char *supported, int member)
{
	if (member != 1)
		snprintf(out->detail, sizeof(out->detail),
				 "The header names member %d of %s as its %s; only member 1, %s, is supported.",
				 member, union_name, what, supported);
	else
		snprintf(out->detail, sizeof(out->detail),
				 "The header's %s %s has parameters that this version does not know.",
				 supported, what);
	return AMQ_ERR_UNSUPPORTED;
}

/*
 * What amq_from_parquet takes: a bare bitset, or a whole filter as stored
 * in a Parquet file (BloomFilterHeader, then numBytes bytes of bitset).
 * The two are told apart so:
 *
 *	- bytes that begin with a complete BloomFilterHeader (a well-formed
 *	  struct with all four of its required fields, of their types, up to its
 *	  STOP) are a whole filter, and must be a valid one;
 *	- else bytes whose length is a bitset's (amq_parquet_bitset_ok) are a
 *	  bare bitset;
 *	- anything else is refused.
 *
 * A bitset is not read as a header by chance: a complete header needs some
 * 14 bytes of given values in their places (four field headers of given
 * types, each union's member and two STOPs, the final STOP), which random
 * bits match with a chance of about 2^-70, and the bytes of a sparse
 * bitset, mostly zero, end a struct at once.  Nor is a damaged header
 * taken for a bitset: a header is 15 to 19 bytes as writers write it, so
 * a header and its bitset are never a whole number of 32-byte blocks, and
 * bytes that fail to parse as a header are refused (unless a writer padded
 * its header with unknown fields to such a length).
 *
 * On success *out says which form, where the bitset is and, for a whole
 * filter, the header.  On failure out->detail holds a sentence saying why:
 * AMQ_ERR_UNSUPPORTED for a header of another algorithm, hash or
 * compression; AMQ_ERR_CORRUPT for anything else, with out->header_like
 * telling whether the bytes began like a header (a field of one was read)
 * or are best described as a bitset of the wrong length.
 */
AmqStatus
amq_parquet_input(const uint8_t *buf, size_t len, AmqParquetInput *out)
{
	TcReader	r;
	AmqParquetHeader *h = &out->header;
	bool		any_field;
	size_t		hlen;

	memset(out, 0, sizeof(*out));
	r.p = buf;
	r.end = buf + len;
	r.why = out->detail;
	r.whylen = sizeof(out->detail);
	r.failed = false;

	if (buf == NULL || !pq_parse_header(&r, h, &any_field))
	{
		if (amq_parquet_bitset_ok(len))
		{
			memset(h, 0, sizeof(*h));
			out->detail[0] = '\0';
			out->bitset = buf;
			out->bitset_len = len;
			return AMQ_OK;
		}
		out->header_like = buf != NULL && any_field;
		if (!out->header_like)
			snprintf(out->detail, sizeof(out->detail),
					 "A bitset is a whole number of 32-byte blocks, at least one, and at most 1 GB.");
		return AMQ_ERR_CORRUPT;
	}

	out->whole = true;
	out->header_like = true;
	hlen = (size_t) (r.p - buf);
	h->header_len = hlen;
	if (h->algorithm != 1 || !h->algorithm_plain)
		return pq_unsupported(out, "algorithm", "BloomFilterAlgorithm", "BLOCK",
							  h->algorithm);
	if (h->hash != 1 || !h->hash_plain)
		return pq_unsupported(out, "hash function", "BloomFilterHash", "XXHASH",
							  h->hash);
	if (h->compression != 1 || !h->compression_plain)
		return pq_unsupported(out, "compression", "BloomFilterCompression",
							  "UNCOMPRESSED", h->compression);
	if (h->num_bytes < 0 || (uint64_t) h->num_bytes != len - hlen)
	{
		snprintf(out->detail, sizeof(out->detail),
				 "Its numBytes is %lld, but %zu bytes follow the %zu-byte header.",
				 (long long) h->num_bytes, len - hlen, hlen);
		return AMQ_ERR_CORRUPT;
	}
	if (!amq_parquet_bitset_ok((uint64_t) h->num_bytes))
	{
		snprintf(out->detail, sizeof(out->detail),
				 "Its bitset of %lld bytes is not a whole number of 32-byte blocks, at least one, and at most 1 GB.",
				 (long long) h->num_bytes);
		return AMQ_ERR_CORRUPT;
	}
	out->bitset = buf + hlen;
	out->bitset_len = len - hlen;
	return AMQ_OK;
}
