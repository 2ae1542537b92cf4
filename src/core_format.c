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
 * Parquet's bloom filters are read in core_parquet.c.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core.h"

/* AMQ_OK if fpr is a rate a filter can have: above 0, at most AMQ_FPR_MAX. */
AmqStatus
amq_check_fpr(double fpr)
{
	/* written so that NaN fails too */
	if (!(fpr > 0.0 && fpr <= AMQ_FPR_MAX))
		return AMQ_ERR_PARAM;
	return AMQ_OK;
}

/* The sized flag belongs to scalable filters only, each BFS flag to its kind. */
static inline bool
amq_flags_fit_kind(uint32_t flags, int kind)
{
	return (!(flags & AMQ_FLAG_SCALABLE_SIZED) || kind == AMQ_KIND_SCALABLE) &&
		(!(flags & AMQ_FLAG_XOR_BFS) || kind == AMQ_KIND_XOR) &&
		(!(flags & AMQ_FLAG_FUSE_BFS) || kind == AMQ_KIND_FUSE);
}

/*
 * Fill the geometry of a new, empty filter of the given kind.  The caller
 * allocates AMQ_HEADER_SIZE + f->payload_len zeroed bytes afterwards.
 */
AmqStatus
amq_plan(AmqFilter *f, int kind, uint64_t capacity, double fpr)
{
	return amq_plan_flags(f, kind, capacity, fpr, 0);
}

/*
 * amq_plan with header flags that shape the geometry, which the kind's
 * plan reads from f->flags: only AMQ_FLAG_SCALABLE_SIZED, for a scalable
 * filter built from exactly "capacity" keys.
 */
AmqStatus
amq_plan_flags(AmqFilter *f, int kind, uint64_t capacity, double fpr,
			   uint32_t flags)
{
	const AmqKindOps *ops = amq_kind_ops(kind);
	AmqStatus	st;

	if (ops == NULL || ops->plan == NULL)
		return AMQ_ERR_UNSUPPORTED;
	if (amq_check_fpr(fpr) != AMQ_OK || capacity == 0)
		return AMQ_ERR_PARAM;
	if ((flags & ~AMQ_FLAG_SCALABLE_SIZED) != 0 ||
		!amq_flags_fit_kind(flags, kind))
		return AMQ_ERR_PARAM;
	memset(f, 0, sizeof(*f));
	f->kind = (uint8_t) kind;
	f->hash_scheme = AMQ_HASH_XXH3;
	f->flags = flags;
	f->fpr = fpr;
	st = ops->plan(f, capacity, fpr);
	if (st != AMQ_OK)
		return st;
	if (f->payload_len > AMQ_MAX_PAYLOAD)
		return AMQ_ERR_TOO_LARGE;
	return AMQ_OK;
}

/* The header checksum: XXH3 of the header seeded with the payload's. */
uint64_t
amq_checksum(const uint8_t *header, const uint8_t *payload,
			 uint64_t payload_len)
{
	uint64_t	ph = XXH3_64bits(payload, (size_t) payload_len);

	return XXH3_64bits_withSeed(header, AMQ_OFF_CHECKSUM, ph);
}

/* A little-endian float8. */
static double
load_double(const uint8_t *p)
{
	uint64_t	bits = amq_load64(p);
	double		d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

/* Store a float8 little-endian. */
static void
store_double(uint8_t *p, double d)
{
	uint64_t	bits;

	memcpy(&bits, &d, sizeof(bits));
	amq_store64(p, bits);
}

/* Decode the header fields of buf into f, unchecked. */
static void
decode_header(const uint8_t *buf, size_t len, AmqFilter *f)
{
	f->kind = buf[AMQ_OFF_KIND];
	f->hash_scheme = buf[AMQ_OFF_SCHEME];
	f->key_family = buf[AMQ_OFF_FAMILY];
	f->flags = amq_load32(buf + AMQ_OFF_FLAGS);
	f->key_type = amq_load32(buf + AMQ_OFF_KEYTYPE);
	f->seed = amq_load64(buf + AMQ_OFF_SEED);
	f->nkeys = amq_load64(buf + AMQ_OFF_NKEYS);
	f->fpr = load_double(buf + AMQ_OFF_FPR);
	for (int i = 0; i < 3; i++)
		f->param[i] = amq_load64(buf + AMQ_OFF_PARAM + 8 * i);
	f->payload_len = amq_load64(buf + AMQ_OFF_PAYLEN);
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
 * Do a decoded header's flags go with its kind and with the format version
 * it was written as?  The version is written from the flags alone, and
 * each version 2 flag belongs to one kind: anything else was not written
 * by bloomamq.  Shared by amq_parse() and the amq index's reading of the
 * headers in its pages.
 */
bool
amq_check_version(const AmqFilter *f, int version)
{
	return (f->flags & ~AMQ_FLAGS_KNOWN) == 0 &&
		version == amq_format_version(f->flags) &&
		amq_flags_fit_kind(f->flags, f->kind);
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
	if (amq_load32(buf + AMQ_OFF_MAGIC) != AMQ_MAGIC)
		return AMQ_ERR_CORRUPT;
	if (buf[AMQ_OFF_VERSION] < AMQ_FORMAT_VERSION ||
		buf[AMQ_OFF_VERSION] > AMQ_FORMAT_VERSION_LATEST)
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
	if (!amq_check_version(out, buf[AMQ_OFF_VERSION]))
		return AMQ_ERR_CORRUPT;
	if (amq_check_fpr(out->fpr) != AMQ_OK)
		return AMQ_ERR_CORRUPT;
	if (out->nkeys > AMQ_MAX_NKEYS)
		return AMQ_ERR_CORRUPT;
	if (ops->check(out) != AMQ_OK)
		return AMQ_ERR_CORRUPT;
	if (amq_load64(buf + AMQ_OFF_CHECKSUM) !=
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
	amq_store32(buf + AMQ_OFF_MAGIC, AMQ_MAGIC);
	buf[AMQ_OFF_VERSION] = (uint8_t) amq_format_version(f->flags);
	buf[AMQ_OFF_KIND] = f->kind;
	buf[AMQ_OFF_SCHEME] = f->hash_scheme;
	buf[AMQ_OFF_FAMILY] = f->key_family;
	amq_store32(buf + AMQ_OFF_FLAGS, f->flags);
	amq_store32(buf + AMQ_OFF_KEYTYPE, f->key_type);
	amq_store64(buf + AMQ_OFF_SEED, f->seed);
	amq_store64(buf + AMQ_OFF_NKEYS, f->nkeys);
	store_double(buf + AMQ_OFF_FPR, f->fpr);
	for (int i = 0; i < 3; i++)
		amq_store64(buf + AMQ_OFF_PARAM + 8 * i, f->param[i]);
	amq_store64(buf + AMQ_OFF_PAYLEN, f->payload_len);
	amq_store64(buf + AMQ_OFF_CHECKSUM,
				amq_checksum(buf, f->payload, f->payload_len));
}

/* A status code as a phrase for messages. */
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

/* The length of the padded base64 of len bytes. */
size_t
amq_base64_encoded_len(size_t len)
{
	return (len + 2) / 3 * 4;
}

/* Padded base64 of src into dst; returns its length. */
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

/* A base64 character's value, or -1. */
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

/* Do a and b have the same kind, parameters, seed and payload length? */
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
 * layout).  Partial states cross process boundaries (parallel workers
 * send them to the leader through shared memory), so they are validated
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
