/*-------------------------------------------------------------------------
 *
 * core_format.c
 *	  Reading, validating and writing the serialized filter format, and its
 *	  text encoding.
 *
 * amq_parse() is the one gate every untrusted input passes through (text
 * input, binary receive, the bytea cast, aggregate deserialization): it
 * checks every header field, the kind's parameters against the payload
 * length, and the XXH3 checksum, so a corrupted filter is rejected rather
 * than answering with false negatives.  The format is documented in core.h.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core.h"

/* header field offsets */
#define OFF_MAGIC		0
#define OFF_VERSION		4
#define OFF_KIND		5
#define OFF_SCHEME		6
#define OFF_FAMILY		7
#define OFF_FLAGS		8
#define OFF_KEYTYPE		12
#define OFF_SEED		16
#define OFF_NKEYS		24
#define OFF_FPR			32
#define OFF_PARAM		40
#define OFF_PAYLEN		64
#define OFF_CHECKSUM	72

AmqStatus
amq_check_fpr(double fpr)
{
	/* written so that NaN fails too */
	if (!(fpr > 0.0 && fpr <= AMQ_FPR_MAX))
		return AMQ_ERR_PARAM;
	return AMQ_OK;
}

/*
 * Fill the geometry of a new, empty filter of the given kind.  The caller
 * allocates AMQ_HEADER_SIZE + f->payload_len zeroed bytes afterwards.
 */
AmqStatus
amq_plan(AmqFilter *f, int kind, uint64_t capacity, double fpr)
{
	const AmqKindOps *ops = amq_kind_ops(kind);
	AmqStatus	st;

	if (ops == NULL || ops->plan == NULL)
		return AMQ_ERR_UNSUPPORTED;
	if (amq_check_fpr(fpr) != AMQ_OK || capacity == 0)
		return AMQ_ERR_PARAM;
	memset(f, 0, sizeof(*f));
	f->kind = (uint8_t) kind;
	f->hash_scheme = AMQ_HASH_XXH3;
	f->fpr = fpr;
	st = ops->plan(f, capacity, fpr);
	if (st != AMQ_OK)
		return st;
	if (f->payload_len > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_TOO_LARGE;
	return AMQ_OK;
}

uint64_t
amq_checksum(const uint8_t *header, const uint8_t *payload,
			 uint64_t payload_len)
{
	uint64_t	ph = XXH3_64bits(payload, (size_t) payload_len);

	return XXH3_64bits_withSeed(header, OFF_CHECKSUM, ph);
}

static double
load_double(const uint8_t *p)
{
	uint64_t	bits = amq_load64(p);
	double		d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

static void
store_double(uint8_t *p, double d)
{
	uint64_t	bits;

	memcpy(&bits, &d, sizeof(bits));
	amq_store64(p, bits);
}

static void
decode_header(const uint8_t *buf, size_t len, AmqFilter *f)
{
	f->kind = buf[OFF_KIND];
	f->hash_scheme = buf[OFF_SCHEME];
	f->key_family = buf[OFF_FAMILY];
	f->flags = amq_load32(buf + OFF_FLAGS);
	f->key_type = amq_load32(buf + OFF_KEYTYPE);
	f->seed = amq_load64(buf + OFF_SEED);
	f->nkeys = amq_load64(buf + OFF_NKEYS);
	f->fpr = load_double(buf + OFF_FPR);
	for (int i = 0; i < 3; i++)
		f->param[i] = amq_load64(buf + OFF_PARAM + 8 * i);
	f->payload_len = amq_load64(buf + OFF_PAYLEN);
	f->payload = (uint8_t *) buf + AMQ_HEADER_SIZE;
}

/*
 * Decode a filter already validated on its way in (a stored value, or one
 * this module built).
 */
void
amq_parse_trusted(const uint8_t *buf, size_t len, AmqFilter *out)
{
	decode_header(buf, len, out);
}

/*
 * Do the key fields of a header go together?  Shared by amq_parse() and the
 * validation of serialized aggregate states.
 */
AmqStatus
amq_check_keyinfo(int kind, int hash_scheme, int key_family,
				  uint32_t key_type, uint64_t seed)
{
	if (key_family > AMQ_FAMILY_MAX)
		return AMQ_ERR_CORRUPT;
	/* the type-hash scheme goes with the "other" family, and only it */
	if (hash_scheme == AMQ_HASH_XXH3)
	{
		if (key_family == AMQ_FAMILY_OTHER || key_type != 0)
			return AMQ_ERR_CORRUPT;
	}
	else if (hash_scheme == AMQ_HASH_TYPE)
	{
		if (key_family != AMQ_FAMILY_OTHER || key_type == 0)
			return AMQ_ERR_CORRUPT;
	}
	else if (hash_scheme == AMQ_HASH_PARQUET)
	{
		/*
		 * Parquet's split block filter: the blocked layout unseeded, keys
		 * of a family with a Parquet physical type; integers and floats
		 * name their width.
		 */
		if (kind != AMQ_KIND_BLOCKED || seed != 0)
			return AMQ_ERR_CORRUPT;
		switch (key_family)
		{
			case AMQ_FAMILY_INT:
			case AMQ_FAMILY_FLOAT:
				if (key_type != 4 && key_type != 8)
					return AMQ_ERR_CORRUPT;
				break;
			case AMQ_FAMILY_NONE:
			case AMQ_FAMILY_TEXT:
			case AMQ_FAMILY_BYTEA:
			case AMQ_FAMILY_UUID:
			case AMQ_FAMILY_DATE:
			case AMQ_FAMILY_TIMESTAMP:
			case AMQ_FAMILY_TIMESTAMPTZ:
				if (key_type != 0)
					return AMQ_ERR_CORRUPT;
				break;
			default:
				return AMQ_ERR_CORRUPT;
		}
	}
	else
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

/*
 * Validate untrusted bytes and decode them.  Nothing in "out" may be used
 * unless AMQ_OK is returned.
 */
AmqStatus
amq_parse(const uint8_t *buf, size_t len, AmqFilter *out)
{
	const AmqKindOps *ops;

	if (buf == NULL || len < AMQ_HEADER_SIZE)
		return AMQ_ERR_CORRUPT;
	if (amq_load32(buf + OFF_MAGIC) != AMQ_MAGIC)
		return AMQ_ERR_CORRUPT;
	if (buf[OFF_VERSION] != AMQ_FORMAT_VERSION)
		return AMQ_ERR_VERSION;
	if (len > AMQ_MAX_BYTES)
		return AMQ_ERR_CORRUPT;

	decode_header(buf, len, out);

	ops = amq_kind_ops(out->kind);
	if (ops == NULL)
		return AMQ_ERR_CORRUPT;
	if (out->payload_len != len - AMQ_HEADER_SIZE)
		return AMQ_ERR_CORRUPT;
	if (amq_check_keyinfo(out->kind, out->hash_scheme, out->key_family,
						   out->key_type, out->seed) != AMQ_OK)
		return AMQ_ERR_CORRUPT;
	if ((out->flags & ~AMQ_FLAGS_KNOWN) != 0)
		return AMQ_ERR_CORRUPT;
	if (amq_check_fpr(out->fpr) != AMQ_OK)
		return AMQ_ERR_CORRUPT;
	if (out->nkeys > AMQ_MAX_NKEYS)
		return AMQ_ERR_CORRUPT;
	if (ops->check(out) != AMQ_OK)
		return AMQ_ERR_CORRUPT;
	if (amq_load64(buf + OFF_CHECKSUM) !=
		amq_checksum(buf, out->payload, out->payload_len))
		return AMQ_ERR_CHECKSUM;
	return AMQ_OK;
}

/*
 * Write f's header, with the checksum of the payload, into the first
 * AMQ_HEADER_SIZE bytes of buf.  f->payload must already hold the payload.
 */
void
amq_write_header(const AmqFilter *f, uint8_t *buf)
{
	memset(buf, 0, AMQ_HEADER_SIZE);
	amq_store32(buf + OFF_MAGIC, AMQ_MAGIC);
	buf[OFF_VERSION] = AMQ_FORMAT_VERSION;
	buf[OFF_KIND] = f->kind;
	buf[OFF_SCHEME] = f->hash_scheme;
	buf[OFF_FAMILY] = f->key_family;
	amq_store32(buf + OFF_FLAGS, f->flags);
	amq_store32(buf + OFF_KEYTYPE, f->key_type);
	amq_store64(buf + OFF_SEED, f->seed);
	amq_store64(buf + OFF_NKEYS, f->nkeys);
	store_double(buf + OFF_FPR, f->fpr);
	for (int i = 0; i < 3; i++)
		amq_store64(buf + OFF_PARAM + 8 * i, f->param[i]);
	amq_store64(buf + OFF_PAYLEN, f->payload_len);
	amq_store64(buf + OFF_CHECKSUM,
				amq_checksum(buf, f->payload, f->payload_len));
}

const char *
amq_status_message(AmqStatus st)
{
	switch (st)
	{
		case AMQ_OK:
			return "success";
		case AMQ_ERR_PARAM:
			return "parameter out of range";
		case AMQ_ERR_TOO_LARGE:
			return "filter too large";
		case AMQ_ERR_CORRUPT:
			return "malformed filter";
		case AMQ_ERR_VERSION:
			return "unknown filter format version";
		case AMQ_ERR_CHECKSUM:
			return "filter checksum mismatch";
		case AMQ_ERR_UNSUPPORTED:
			return "operation not supported by this kind";
		case AMQ_ERR_MISMATCH:
			return "filters of different kind or geometry";
		case AMQ_ERR_FULL:
			return "filter is full";
		case AMQ_ERR_NOMEM:
			return "out of memory";
		case AMQ_ERR_BUILD_FAILED:
			return "filter construction failed";
	}
	return "unknown status";
}

/*
 * Base64 (RFC 4648, standard alphabet, padded), the text form of a filter.
 * Decoding is strict: no whitespace, no missing padding, no stray bits, so
 * each filter has exactly one text form and text I/O round-trips exactly.
 */
static const char b64_alphabet[] =
"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t
amq_base64_encoded_len(size_t len)
{
	return (len + 2) / 3 * 4;
}

size_t
amq_base64_encode(const uint8_t *src, size_t len, char *dst)
{
	char	   *p = dst;
	size_t		i = 0;

	for (; i + 3 <= len; i += 3)
	{
		uint32_t	v = (uint32_t) src[i] << 16 | (uint32_t) src[i + 1] << 8 | src[i + 2];

		*p++ = b64_alphabet[v >> 18];
		*p++ = b64_alphabet[(v >> 12) & 63];
		*p++ = b64_alphabet[(v >> 6) & 63];
		*p++ = b64_alphabet[v & 63];
	}
	if (i < len)
	{
		uint32_t	v = (uint32_t) src[i] << 16;

		if (i + 1 < len)
			v |= (uint32_t) src[i + 1] << 8;
		*p++ = b64_alphabet[v >> 18];
		*p++ = b64_alphabet[(v >> 12) & 63];
		*p++ = (i + 1 < len) ? b64_alphabet[(v >> 6) & 63] : '=';
		*p++ = '=';
	}
	return (size_t) (p - dst);
}

static int
b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Decode len characters into dst, which has room for len / 4 * 3 bytes;
 * *dstlen receives the decoded length.  False on any malformed input.
 */
bool
amq_base64_decode(const char *src, size_t len, uint8_t *dst, size_t *dstlen)
{
	size_t		o = 0;

	if (len % 4 != 0)
		return false;
	for (size_t i = 0; i < len; i += 4)
	{
		int			a = b64_value(src[i]);
		int			b = b64_value(src[i + 1]);
		int			c;
		int			d;
		bool		last = (i + 4 == len);

		if (a < 0 || b < 0)
			return false;
		if (last && src[i + 2] == '=')
		{
			/* one byte; the unused bits of b must be zero */
			if (src[i + 3] != '=' || (b & 15) != 0)
				return false;
			dst[o++] = (uint8_t) (a << 2 | b >> 4);
			break;
		}
		c = b64_value(src[i + 2]);
		if (c < 0)
			return false;
		if (last && src[i + 3] == '=')
		{
			if ((c & 3) != 0)
				return false;
			dst[o++] = (uint8_t) (a << 2 | b >> 4);
			dst[o++] = (uint8_t) ((b & 15) << 4 | c >> 2);
			break;
		}
		d = b64_value(src[i + 3]);
		if (d < 0)
			return false;
		dst[o++] = (uint8_t) (a << 2 | b >> 4);
		dst[o++] = (uint8_t) ((b & 15) << 4 | c >> 2);
		dst[o++] = (uint8_t) ((c & 3) << 6 | d);
	}
	*dstlen = o;
	return true;
}

bool
amq_same_geometry(const AmqFilter *a, const AmqFilter *b)
{
	return a->kind == b->kind &&
		a->param[0] == b->param[0] &&
		a->param[1] == b->param[1] &&
		a->param[2] == b->param[2] &&
		a->payload_len == b->payload_len &&
		a->seed == b->seed;
}

/* OR or AND src's bytes into dst's, eight at a time. */
static void
amq_merge_bits(uint8_t *dst, const uint8_t *src, uint64_t len, AmqMergeOp op)
{
	uint64_t	off = 0;

	for (; off + 8 <= len; off += 8)
	{
		uint64_t	a,
					b;

		memcpy(&a, dst + off, 8);
		memcpy(&b, src + off, 8);
		a = (op == AMQ_MERGE_UNION) ? (a | b) : (a & b);
		memcpy(dst + off, &a, 8);
	}
	for (; off < len; off++)
		dst[off] = (op == AMQ_MERGE_UNION) ? (dst[off] | src[off]) : (dst[off] & src[off]);
}

/* Union or intersection of two bit-array filters of the same geometry. */
AmqStatus
amq_bitarray_merge(AmqFilter *dst, const AmqFilter *src, AmqMergeOp op)
{
	if (!amq_same_geometry(dst, src))
		return AMQ_ERR_MISMATCH;
	amq_merge_bits(dst->payload, src->payload, dst->payload_len, op);
	return AMQ_OK;
}

/*
 * The serialized state of the amq_agg aggregates (see core.h for the
 * layout).  Partial states cross process boundaries and may come from
 * other systems (Citus ships them between nodes), so they are validated
 * as strictly as filters: amq_state_parse() is what the aggregate's
 * deserialize function runs, and it leaves nothing to check afterwards.
 */
void
amq_state_write_header(const AmqStateHeader *h, uint8_t *buf)
{
	memset(buf, 0, AMQ_STATE_HEADER);
	buf[0] = AMQ_STATE_VERSION;
	buf[1] = h->mode;
	buf[2] = h->kind;
	buf[3] = h->key_family;
	buf[4] = h->hash_scheme;
	amq_store32(buf + 8, h->key_type);
	store_double(buf + 16, h->fpr);
	amq_store64(buf + 24, (uint64_t) h->capacity);
}

/*
 * Validate a serialized state of len bytes and decode its header into
 * *out.  A filter-mode state's filter is validated by amq_parse() and
 * decoded into *filter; a buffer-mode state's hashes are out->nhashes
 * little-endian words at out->body.
 *
 * On failure *why says what is wrong with the state itself, or is NULL
 * when the embedded filter failed amq_parse() (whose status is returned).
 */
AmqStatus
amq_state_parse(const uint8_t *buf, size_t len, AmqStateHeader *out,
				AmqFilter *filter, const char **why)
{
	const AmqKindOps *ops;
	AmqStatus	st;

	*why = NULL;
	memset(out, 0, sizeof(*out));
	if (buf == NULL || len < AMQ_STATE_HEADER)
	{
		*why = "truncated header";
		return AMQ_ERR_CORRUPT;
	}
	if (buf[0] != AMQ_STATE_VERSION)
	{
		*why = "unknown version";
		return AMQ_ERR_VERSION;
	}
	if (buf[1] > AMQ_STATE_FILTER || buf[5] || buf[6] || buf[7] ||
		amq_load32(buf + 12) != 0)
	{
		*why = "bad mode or reserved bytes";
		return AMQ_ERR_CORRUPT;
	}
	out->mode = buf[1];
	out->kind = buf[2];
	out->key_family = buf[3];
	out->hash_scheme = buf[4];
	out->key_type = amq_load32(buf + 8);
	out->fpr = load_double(buf + 16);
	out->capacity = (int64_t) amq_load64(buf + 24);
	out->body = buf + AMQ_STATE_HEADER;
	out->body_len = len - AMQ_STATE_HEADER;

	ops = amq_kind_ops(out->kind);
	if (ops == NULL)
	{
		*why = "unknown kind";
		return AMQ_ERR_CORRUPT;
	}
	/*
	 * Whether the kind can reach the rate is for the final build to report,
	 * as it does in a serial plan.  A capacity only for kinds built by adds.
	 */
	if (amq_check_fpr(out->fpr) != AMQ_OK || out->capacity < 0 ||
		(out->capacity > 0 && !(ops->caps & AMQ_CAP_ADD)))
	{
		*why = "bad fpr or capacity";
		return AMQ_ERR_CORRUPT;
	}
	if (amq_check_keyinfo(out->kind, out->hash_scheme, out->key_family,
						  out->key_type, 0) != AMQ_OK)
	{
		*why = "bad key family or hash scheme";
		return AMQ_ERR_CORRUPT;
	}

	if (out->mode == AMQ_STATE_BUFFER)
	{
		if (out->body_len % sizeof(uint64_t) != 0 ||
			out->body_len / sizeof(uint64_t) > AMQ_STATE_MAX_HASHES)
		{
			*why = "bad hash array length";
			return AMQ_ERR_CORRUPT;
		}
		out->nhashes = out->body_len / sizeof(uint64_t);
		return AMQ_OK;
	}

	st = amq_parse(out->body, out->body_len, filter);
	if (st != AMQ_OK)
		return st;
	if (filter->kind != out->kind || filter->key_family != out->key_family ||
		filter->hash_scheme != out->hash_scheme ||
		filter->key_type != out->key_type)
	{
		*why = "filter does not match the state";
		return AMQ_ERR_CORRUPT;
	}
	return AMQ_OK;
}

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

static bool
tc_truncated(TcReader *r)
{
	return tc_fail(r, "The bytes end inside the BloomFilterHeader.");
}

static bool
tc_byte(TcReader *r, uint8_t *b)
{
	if (r->p >= r->end)
		return tc_truncated(r);
	*b = *r->p++;
	return true;
}

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
