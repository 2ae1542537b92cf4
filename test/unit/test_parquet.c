/*-------------------------------------------------------------------------
 *
 * test_parquet.c
 *	  Unit tests of what amq_from_parquet takes (amq_parquet_input): a bare
 *	  bitset, or a whole Parquet bloom filter, its Thrift compact-protocol
 *	  BloomFilterHeader followed by its bitset.  The headers are written
 *	  here by a small compact-protocol writer, besides the bytes DuckDB
 *	  wrote (test/vectors/parquet/MANIFEST.tsv).
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>

#include "unit.h"

/* a byte buffer that headers are written into */
typedef struct Buf
{
	uint8_t    *data;
	size_t		len;
	size_t		cap;
} Buf;

static void
put(Buf *b, uint8_t byte)
{
	if (b->len == b->cap)
	{
		b->cap = b->cap ? 2 * b->cap : 64;
		b->data = realloc(b->data, b->cap);
		if (b->data == NULL)
		{
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
	}
	b->data[b->len++] = byte;
}

static void
put_hex(Buf *b, const char *hex)
{
	for (; hex[0] && hex[1]; hex += 2)
	{
		unsigned int v;

		sscanf(hex, "%2x", &v);
		put(b, (uint8_t) v);
	}
}

static void
put_bytes(Buf *b, uint8_t byte, size_t n)
{
	for (size_t i = 0; i < n; i++)
		put(b, byte);
}

static void
put_varint(Buf *b, uint64_t v)
{
	while (v >= 0x80)
	{
		put(b, (uint8_t) (v | 0x80));
		v >>= 7;
	}
	put(b, (uint8_t) v);
}

static void
put_zigzag(Buf *b, int64_t v)
{
	put_varint(b, ((uint64_t) v << 1) ^ (uint64_t) (v >> 63));
}

/* a field header: the short form when delta is 1..15, else the long one */
static void
put_field(Buf *b, int last, int id, int type)
{
	int			delta = id - last;

	if (delta > 0 && delta <= 15)
		put(b, (uint8_t) (delta << 4 | type));
	else
	{
		put(b, (uint8_t) type);
		put_zigzag(b, id);
	}
}

/* a union with member "member" set to an empty struct */
static void
put_union(Buf *b, int member)
{
	put_field(b, 0, member, 12);
	put(b, 0);					/* the member's STOP */
	put(b, 0);					/* the union's STOP */
}

/*
 * A header as writers write it: numBytes, then the three unions (with the
 * members given), then STOP.
 */
static void
put_header(Buf *b, int64_t num_bytes, int algorithm, int hash, int compression)
{
	put_field(b, 0, 1, 5);
	put_zigzag(b, num_bytes);
	put_field(b, 1, 2, 12);
	put_union(b, algorithm);
	put_field(b, 2, 3, 12);
	put_union(b, hash);
	put_field(b, 3, 4, 12);
	put_union(b, compression);
	put(b, 0);
}

static void
put_bitset(Buf *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		put(b, (uint8_t) amq_mix64(seed + i));
}

/* check the outcome of amq_parquet_input on b */
static void
expect(const char *name, const Buf *b, AmqStatus want, bool whole,
	   size_t header_len, bool header_like)
{
	AmqParquetInput in;
	AmqStatus	st = amq_parquet_input(b->data, b->len, &in);
	bool		ok;

	if (want == AMQ_OK)
		ok = st == AMQ_OK && in.whole == whole &&
			in.bitset == b->data + (whole ? header_len : 0) &&
			in.bitset_len == b->len - (whole ? header_len : 0) &&
			(!whole || in.header.header_len == header_len);
	else
		ok = st == want && in.header_like == header_like && in.detail[0] != '\0';
	check(ok, name, "status %s, whole %d, header_like %d, bitset at %td of %zu: %s",
		  amq_status_message(st), in.whole, in.header_like,
		  in.bitset ? in.bitset - b->data : (ptrdiff_t) -1, in.bitset_len,
		  in.detail);
}

static void
reset(Buf *b)
{
	b->len = 0;
}

/* the headers DuckDB 1.5.6 wrote (MANIFEST.tsv), before their bitsets */
static void
test_writer_headers(void)
{
	static const struct
	{
		const char *hex;
		size_t		num_bytes;
	}			writer[] = {
		{"15401c1c00001c1c00001c1c000000", 32},
		{"1580021c1c00001c1c00001c1c000000", 128},
		{"1580101c1c00001c1c00001c1c000000", 1024},
		{"158080011c1c00001c1c00001c1c000000", 8192},
	};
	Buf			b = {0};

	for (size_t i = 0; i < sizeof(writer) / sizeof(writer[0]); i++)
	{
		char		name[96];
		size_t		hlen = strlen(writer[i].hex) / 2;
		AmqParquetInput in;

		reset(&b);
		put_hex(&b, writer[i].hex);
		put_bitset(&b, writer[i].num_bytes, i);
		snprintf(name, sizeof(name), "parquet header: DuckDB's, %zu-byte bitset",
				 writer[i].num_bytes);
		expect(name, &b, AMQ_OK, true, hlen, true);
		amq_parquet_input(b.data, b.len, &in);
		check(in.header.num_bytes == (int64_t) writer[i].num_bytes &&
			  in.header.algorithm == 1 && in.header.hash == 1 &&
			  in.header.compression == 1,
			  "parquet header: DuckDB's fields", "numBytes %lld",
			  (long long) in.header.num_bytes);

		/* the writer here writes this header byte for byte */
		{
			Buf			d = {0};

			put_hex(&d, writer[i].hex);
			reset(&b);
			put_header(&b, (int64_t) writer[i].num_bytes, 1, 1, 1);
			check(b.len == hlen && memcmp(b.data, d.data, hlen) == 0,
				  "parquet header: written here as DuckDB wrote it", NULL);
			free(d.data);
		}

		/* the bare bitset */
		reset(&b);
		put_bitset(&b, writer[i].num_bytes, i);
		expect("parquet header: bare bitset", &b, AMQ_OK, false, 0, false);
	}
	free(b.data);
}

/*
 * No bare bitset is taken for a header: random bitsets of every density,
 * and empty and full ones.
 */
static void
test_bitsets_stay_bitsets(void)
{
	Buf			b = {0};
	uint64_t	wrong = 0;
	uint64_t	n = 0;

	for (size_t len = 32; len <= 4096; len *= 2)
		for (int density = 0; density <= 8; density++)
			for (uint64_t seed = 0; seed < 300; seed++)
			{
				AmqParquetInput in;

				reset(&b);
				for (size_t i = 0; i < len; i++)
				{
					/* each bit set with probability density / 8 */
					uint8_t		byte = 0;
					uint64_t	r = amq_mix64(seed * 1000003 + len * 31 + i * 7 + density);

					for (int bit = 0; bit < 8; bit++)
						if (((r >> (4 * bit)) & 7) < (uint64_t) density)
							byte |= (uint8_t) (1u << bit);
					put(&b, byte);
				}
				if (amq_parquet_input(b.data, b.len, &in) != AMQ_OK || in.whole ||
					in.bitset != b.data || in.bitset_len != len)
					wrong++;
				n++;
			}
	check(wrong == 0, "parquet header: random bitsets stay bitsets",
		  "%llu of %llu taken otherwise", (unsigned long long) wrong,
		  (unsigned long long) n);
	free(b.data);
}

/* headers written other ways a writer may: field order, forms, new fields */
static void
test_header_forms(void)
{
	Buf			b = {0};
	size_t		hlen;

	/* fields in reverse order, each in the long form */
	reset(&b);
	put_field(&b, 0, 4, 12);
	put_union(&b, 1);
	put_field(&b, 4, 3, 12);
	put_union(&b, 1);
	put_field(&b, 3, 2, 12);
	put_union(&b, 1);
	put_field(&b, 2, 1, 5);
	put_zigzag(&b, 64);
	put(&b, 0);
	hlen = b.len;
	put_bitset(&b, 64, 1);
	expect("parquet header: fields in reverse order", &b, AMQ_OK, true, hlen, true);

	/* the field ids in the long form although short ones would do */
	reset(&b);
	put(&b, 5);
	put_zigzag(&b, 1);
	put_zigzag(&b, 32);
	put(&b, 12);
	put_zigzag(&b, 2);
	put_union(&b, 1);
	put(&b, 12);
	put_zigzag(&b, 3);
	put_union(&b, 1);
	put(&b, 12);
	put_zigzag(&b, 4);
	put_union(&b, 1);
	put(&b, 0);
	hlen = b.len;
	put_bitset(&b, 32, 2);
	expect("parquet header: long-form field ids", &b, AMQ_OK, true, hlen, true);

	/* a redundant varint byte (0x80 0x00 is 0 in two bytes) */
	reset(&b);
	put(&b, 0x15);
	put(&b, 0xc0);
	put(&b, 0x80);
	put(&b, 0x00);				/* 64 in three bytes */
	put_field(&b, 1, 2, 12);
	put_union(&b, 1);
	put_field(&b, 2, 3, 12);
	put_union(&b, 1);
	put_field(&b, 3, 4, 12);
	put_union(&b, 1);
	put(&b, 0);
	hlen = b.len;
	put_bitset(&b, 32, 3);
	expect("parquet header: non-minimal varint", &b, AMQ_OK, true, hlen, true);

	/* unknown fields of every type, skipped: one after each known field */
	reset(&b);
	put_header(&b, 32, 1, 1, 1);
	b.len--;					/* reopen the struct: drop its STOP */
	put_field(&b, 4, 5, 1);		/* bool true */
	put_field(&b, 5, 6, 2);		/* bool false */
	put_field(&b, 6, 7, 3);		/* byte */
	put(&b, 0xff);
	put_field(&b, 7, 8, 4);		/* i16 */
	put_zigzag(&b, -32768);
	put_field(&b, 8, 9, 5);		/* i32 */
	put_zigzag(&b, INT32_MIN);
	put_field(&b, 9, 10, 6);	/* i64 */
	put_zigzag(&b, INT64_MIN);
	put_field(&b, 10, 11, 7);	/* double */
	put_bytes(&b, 0x40, 8);
	put_field(&b, 11, 12, 8);	/* binary */
	put_varint(&b, 3);
	put_bytes(&b, 'x', 3);
	put_field(&b, 12, 13, 9);	/* list<i32>, 3 elements */
	put(&b, 0x35);
	put_zigzag(&b, 1);
	put_zigzag(&b, -1);
	put_zigzag(&b, 300);
	put_field(&b, 13, 14, 10);	/* set<bool>, 20 elements: the long size */
	put(&b, 0xf1);
	put_varint(&b, 20);
	put_bytes(&b, 1, 20);
	put_field(&b, 14, 15, 11);	/* map<binary, struct>, 2 entries */
	put_varint(&b, 2);
	put(&b, 0x8c);
	for (int i = 0; i < 2; i++)
	{
		put_varint(&b, 1);
		put(&b, 'k');
		put_field(&b, 0, 1, 6);
		put_zigzag(&b, i);
		put(&b, 0);
	}
	put_field(&b, 15, 16, 11);	/* an empty map */
	put_varint(&b, 0);
	put_field(&b, 16, 17, 13);	/* uuid */
	put_bytes(&b, 0xab, 16);
	put_field(&b, 17, 200, 12); /* a struct nesting a list of structs */
	put_field(&b, 0, 1, 9);
	put(&b, 0x2c);
	put_field(&b, 0, 1, 8);
	put_varint(&b, 0);
	put(&b, 0);
	put(&b, 0);
	put(&b, 0);
	put_field(&b, 200, -7, 5);	/* a negative id */
	put_zigzag(&b, 7);
	put(&b, 0);
	hlen = b.len;
	put_bitset(&b, 32, 4);
	expect("parquet header: unknown fields of every type skipped", &b, AMQ_OK,
		   true, hlen, true);

	free(b.data);
}

/* headers of other algorithms, hashes, compressions: unsupported */
static void
test_header_unsupported(void)
{
	Buf			b = {0};
	AmqParquetInput in;

	reset(&b);
	put_header(&b, 32, 2, 1, 1);
	put_bitset(&b, 32, 5);
	expect("parquet header: algorithm 2 unsupported", &b, AMQ_ERR_UNSUPPORTED,
		   true, 0, true);

	reset(&b);
	put_header(&b, 32, 1, 2, 1);
	put_bitset(&b, 32, 5);
	expect("parquet header: hash 2 unsupported", &b, AMQ_ERR_UNSUPPORTED, true,
		   0, true);
	amq_parquet_input(b.data, b.len, &in);
	check(strstr(in.detail, "BloomFilterHash") != NULL &&
		  strstr(in.detail, "XXHASH") != NULL,
		  "parquet header: the hash named in the reason", "%s", in.detail);

	reset(&b);
	put_header(&b, 32, 1, 1, 3);
	put_bitset(&b, 32, 5);
	expect("parquet header: compression 3 unsupported", &b, AMQ_ERR_UNSUPPORTED,
		   true, 0, true);

	/* unsupported even when numBytes is wrong too: the better reason */
	reset(&b);
	put_header(&b, 64, 1, 9, 1);
	put_bitset(&b, 32, 5);
	expect("parquet header: hash 9 with a wrong numBytes", &b,
		   AMQ_ERR_UNSUPPORTED, true, 0, true);

	/* XXHASH with a field in it: a parameter this version does not know */
	reset(&b);
	put_field(&b, 0, 1, 5);
	put_zigzag(&b, 32);
	put_field(&b, 1, 2, 12);
	put_union(&b, 1);
	put_field(&b, 2, 3, 12);
	put_field(&b, 0, 1, 12);	/* XXHASH { 1: i64 seed = 5 } */
	put_field(&b, 0, 1, 6);
	put_zigzag(&b, 5);
	put(&b, 0);
	put(&b, 0);
	put_field(&b, 3, 4, 12);
	put_union(&b, 1);
	put(&b, 0);
	put_bitset(&b, 32, 5);
	expect("parquet header: XXHASH with a parameter unsupported", &b,
		   AMQ_ERR_UNSUPPORTED, true, 0, true);

	/* a union member that is not a struct */
	reset(&b);
	put_field(&b, 0, 1, 5);
	put_zigzag(&b, 32);
	put_field(&b, 1, 2, 12);
	put_field(&b, 0, 1, 5);		/* BLOCK as an i32 */
	put_zigzag(&b, 0);
	put(&b, 0);
	put_field(&b, 2, 3, 12);
	put_union(&b, 1);
	put_field(&b, 3, 4, 12);
	put_union(&b, 1);
	put(&b, 0);
	put_bitset(&b, 32, 5);
	expect("parquet header: BLOCK not a struct", &b, AMQ_ERR_CORRUPT, false, 0,
		   true);

	free(b.data);
}

/* lengths: numBytes against the bytes that follow, every truncation */
static void
test_header_lengths(void)
{
	Buf			b = {0};
	Buf			whole = {0};
	size_t		hlen;
	uint64_t	wrong = 0;

	put_header(&whole, 64, 1, 1, 1);
	hlen = whole.len;
	put_bitset(&whole, 64, 6);

	/* every proper prefix, and every extension by up to 64 bytes */
	for (size_t len = 0; len < whole.len + 64; len++)
	{
		AmqParquetInput in;
		AmqStatus	st;

		if (len == whole.len)
			continue;
		reset(&b);
		for (size_t i = 0; i < len; i++)
			put(&b, i < whole.len ? whole.data[i] : 0);
		st = amq_parquet_input(b.data, b.len, &in);
		if (st != AMQ_ERR_CORRUPT || in.header_like != (len > 0) ||
			in.whole != (len >= hlen))
		{
			printf("# length %zu: status %s, whole %d, header_like %d: %s\n",
				   len, amq_status_message(st), in.whole, in.header_like, in.detail);
			wrong++;
		}
	}
	check(wrong == 0, "parquet header: every truncation and extension refused",
		  "%llu accepted or misread", (unsigned long long) wrong);

	reset(&b);
	put_header(&b, -32, 1, 1, 1);
	put_bitset(&b, 32, 7);
	expect("parquet header: negative numBytes", &b, AMQ_ERR_CORRUPT, true, 0, true);

	reset(&b);
	put_header(&b, 0, 1, 1, 1);
	expect("parquet header: numBytes 0, no bitset", &b, AMQ_ERR_CORRUPT, true, 0,
		   true);

	reset(&b);
	put_header(&b, 48, 1, 1, 1);
	put_bitset(&b, 48, 7);
	expect("parquet header: bitset not whole blocks", &b, AMQ_ERR_CORRUPT, true, 0,
		   true);

	reset(&b);
	put_header(&b, INT32_MAX, 1, 1, 1);
	put_bitset(&b, 32, 7);
	expect("parquet header: numBytes 2^31 - 1", &b, AMQ_ERR_CORRUPT, true, 0, true);

	/* not header-like: reported as a bitset of the wrong length */
	reset(&b);
	expect("parquet header: empty input", &b, AMQ_ERR_CORRUPT, false, 0, false);
	reset(&b);
	put_bytes(&b, 0, 31);
	expect("parquet header: 31 zero bytes", &b, AMQ_ERR_CORRUPT, false, 0, false);
	reset(&b);
	put_bytes(&b, 0, 32);
	expect("parquet header: 32 zero bytes are a bitset", &b, AMQ_OK, false, 0, false);

	free(b.data);
	free(whole.data);
}

/* malformed Thrift: each refused, none read past the end */
static void
test_header_malformed(void)
{
	Buf			b = {0};

	/* numBytes as a varint longer than an i32's five bytes */
	reset(&b);
	put(&b, 0x15);
	put_bytes(&b, 0x80, 5);
	put(&b, 0x01);
	put_bitset(&b, 40, 8);
	expect("parquet header: numBytes varint of six bytes", &b, AMQ_ERR_CORRUPT,
		   false, 0, true);

	/* five bytes, but more than 32 bits */
	reset(&b);
	put(&b, 0x15);
	put_bytes(&b, 0xff, 4);
	put(&b, 0x1f);
	put_bitset(&b, 40, 8);
	expect("parquet header: numBytes beyond 32 bits", &b, AMQ_ERR_CORRUPT, false,
		   0, true);

	/* an unknown i64 field of ten bytes, the last with more than 64 bits */
	reset(&b);
	put_field(&b, 0, 7, 6);
	put_bytes(&b, 0xff, 9);
	put(&b, 0x02);
	put_bitset(&b, 40, 8);
	expect("parquet header: i64 varint beyond 64 bits", &b, AMQ_ERR_CORRUPT, false,
		   0, true);

	/* numBytes an i64 */
	reset(&b);
	put_field(&b, 0, 1, 6);
	put_zigzag(&b, 32);
	put_field(&b, 1, 2, 12);
	put_union(&b, 1);
	put_field(&b, 2, 3, 12);
	put_union(&b, 1);
	put_field(&b, 3, 4, 12);
	put_union(&b, 1);
	put(&b, 0);
	put_bitset(&b, 32, 8);
	expect("parquet header: numBytes not an i32", &b, AMQ_ERR_CORRUPT, false, 0,
		   true);

	/* a field twice */
	reset(&b);
	put_header(&b, 32, 1, 1, 1);
	b.len--;
	put_field(&b, 4, 1, 5);
	put_zigzag(&b, 32);
	put(&b, 0);
	put_bitset(&b, 32, 8);
	expect("parquet header: numBytes twice", &b, AMQ_ERR_CORRUPT, false, 0, true);

	/* the legacy drafts' header: no compression field */
	reset(&b);
	put_field(&b, 0, 1, 5);
	put_zigzag(&b, 32);
	put_field(&b, 1, 2, 12);
	put_union(&b, 1);
	put_field(&b, 2, 3, 12);
	put_union(&b, 1);
	put(&b, 0);
	put_bitset(&b, 32, 8);
	expect("parquet header: no compression (the drafts' Murmur3 header)", &b,
		   AMQ_ERR_CORRUPT, false, 0, true);

	/* unions with no member and with two */
	reset(&b);
	put_field(&b, 0, 1, 5);
	put_zigzag(&b, 32);
	put_field(&b, 1, 2, 12);
	put(&b, 0);
	put_field(&b, 2, 3, 12);
	put_union(&b, 1);
	put_field(&b, 3, 4, 12);
	put_union(&b, 1);
	put(&b, 0);
	put_bitset(&b, 32, 8);
	expect("parquet header: empty union", &b, AMQ_ERR_CORRUPT, false, 0, true);
	reset(&b);
	put_field(&b, 0, 1, 5);
	put_zigzag(&b, 32);
	put_field(&b, 1, 2, 12);
	put_field(&b, 0, 1, 12);
	put(&b, 0);
	put_field(&b, 1, 2, 12);
	put(&b, 0);
	put(&b, 0);
	put_field(&b, 2, 3, 12);
	put_union(&b, 1);
	put_field(&b, 3, 4, 12);
	put_union(&b, 1);
	put(&b, 0);
	put_bitset(&b, 32, 8);
	expect("parquet header: union of two members", &b, AMQ_ERR_CORRUPT, false, 0,
		   true);

	/*
	 * An unknown type, and a type 0 with a field delta: first, these are
	 * not header-like (reported as a bitset of a wrong length); after a
	 * field, they are.
	 */
	reset(&b);
	put(&b, 0x1e);
	put_bitset(&b, 40, 8);
	expect("parquet header: first field of type 14", &b, AMQ_ERR_CORRUPT, false, 0,
		   false);
	reset(&b);
	put(&b, 0x10);
	put_bitset(&b, 40, 8);
	expect("parquet header: first field of type 0", &b, AMQ_ERR_CORRUPT, false, 0,
		   false);
	reset(&b);
	put_field(&b, 0, 1, 5);
	put_zigzag(&b, 40);
	put(&b, 0x1e);
	put_bitset(&b, 40, 8);
	expect("parquet header: second field of type 14", &b, AMQ_ERR_CORRUPT, false, 0,
		   true);

	/* a field id past 32767 by deltas */
	reset(&b);
	put(&b, 5);
	put_zigzag(&b, 32767);
	put_zigzag(&b, 0);
	put(&b, 0x15);
	put_zigzag(&b, 0);
	put_bitset(&b, 40, 8);
	expect("parquet header: field id beyond an i16", &b, AMQ_ERR_CORRUPT, false, 0,
		   true);

	/* a list claiming more elements than there are bytes */
	reset(&b);
	put_field(&b, 0, 9, 9);
	put(&b, 0xf5);
	put_varint(&b, 0xffffffffu);
	put_bitset(&b, 40, 8);
	expect("parquet header: list longer than the input", &b, AMQ_ERR_CORRUPT, false,
		   0, true);

	/* a binary claiming more bytes than there are */
	reset(&b);
	put_field(&b, 0, 9, 8);
	put_varint(&b, 1000);
	put_bitset(&b, 40, 8);
	expect("parquet header: binary longer than the input", &b, AMQ_ERR_CORRUPT,
		   false, 0, true);

	/* nesting 10000 deep: refused, without exhausting the stack */
	reset(&b);
	put_field(&b, 0, 9, 12);
	for (int i = 0; i < 10000; i++)
		put_field(&b, 0, 1, 12);
	put_bitset(&b, 40, 8);
	expect("parquet header: structs nested 10000 deep", &b, AMQ_ERR_CORRUPT, false,
		   0, true);
	reset(&b);
	put_field(&b, 0, 9, 9);
	for (int i = 0; i < 10000; i++)
		put(&b, 0x19);			/* list<list<...>> of one */
	put_bitset(&b, 40, 8);
	expect("parquet header: lists nested 10000 deep", &b, AMQ_ERR_CORRUPT, false,
		   0, true);

	/* a NULL pointer */
	{
		AmqParquetInput in;

		check(amq_parquet_input(NULL, 0, &in) == AMQ_ERR_CORRUPT &&
			  !in.header_like, "parquet header: NULL input", NULL);
	}

	free(b.data);
}

void
test_parquet(void)
{
	test_writer_headers();
	test_bitsets_stay_bitsets();
	test_header_forms();
	test_header_unsupported();
	test_header_lengths();
	test_header_malformed();
}
