/*-------------------------------------------------------------------------
 *
 * make_corpus.c
 *	  Write the seed corpus of the fuzz harnesses: real filters of every
 *	  kind, made by the filter core's own plan, add, grow and build
 *	  functions, in the form each harness reads.
 *
 *	  make_corpus DIR
 *
 * writes DIR/filter (serialized filters), DIR/text (their base64 text
 * form), DIR/aggstate (serialized aggregate states, buffer and filter
 * mode) and DIR/parquet (split block bitsets, alone and as whole Parquet
 * bloom filters).  The output is the same on every run and every host.
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "core.h"

static const char *outdir;
static int	nwritten;

static void *
xmalloc(size_t size)
{
	void	   *p = calloc(1, size ? size : 1);

	if (p == NULL)
	{
		fprintf(stderr, "make_corpus: out of memory\n");
		exit(1);
	}
	return p;
}

static void *
alloc_cb(void *ctx, size_t size)
{
	return malloc(size);
}

static void
free_cb(void *ctx, void *ptr)
{
	free(ptr);
}

static const AmqAllocator alloc = {alloc_cb, free_cb, NULL};

static void
write_file(const char *sub, const char *name, const void *data, size_t len)
{
	char		path[1024];
	FILE	   *fp;

	snprintf(path, sizeof(path), "%s/%s", outdir, sub);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
	{
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", outdir, sub, name);
	fp = fopen(path, "wb");
	if (fp == NULL || fwrite(data, 1, len, fp) != len || fclose(fp) != 0)
	{
		perror(path);
		exit(1);
	}
	nwritten++;
}

static uint64_t
key(uint64_t i)
{
	return amq_mix64(i + 0x5eed);
}

/*
 * Make a filter of kind with nkeys keys: planned for capacity, filled by
 * add (growing as the SQL layer does) or built from the sorted keys.
 * Returns the serialized bytes; *len receives their length.
 */
static uint8_t *
make_filter(int kind, uint64_t capacity, double fpr, uint32_t flags,
			uint64_t nkeys, int family, int scheme, uint32_t key_type,
			uint64_t seed, size_t *len)
{
	const AmqKindOps *ops = amq_kind_ops(kind);
	AmqFilter	f;
	uint8_t    *buf;
	AmqStatus	st;

	/* a rate the kind cannot reach (fingerprints past 32 bits): none */
	if (amq_plan_flags(&f, kind, capacity, fpr, flags) != AMQ_OK)
		return NULL;
	f.key_family = (uint8_t) family;
	f.hash_scheme = (uint8_t) scheme;
	f.key_type = key_type;
	f.seed = seed;
	f.payload = xmalloc((size_t) f.payload_len);

	if (ops->caps & AMQ_CAP_STATIC)
	{
		uint64_t   *hashes = xmalloc(sizeof(uint64_t) * (nkeys + 1));
		uint64_t   *scratch = xmalloc(sizeof(uint64_t) * (nkeys + 1));
		size_t		n;

		for (uint64_t i = 0; i < nkeys; i++)
			hashes[i] = key(i);
		n = amq_sort_unique(hashes, nkeys, scratch);
		st = ops->build(&f, hashes, n, &alloc);
		free(hashes);
		free(scratch);
	}
	else
	{
		st = AMQ_OK;
		for (uint64_t i = 0; i < nkeys && st == AMQ_OK; i++)
		{
			st = ops->add(&f, key(i));
			while (st == AMQ_ERR_FULL && (ops->caps & AMQ_CAP_GROW))
			{
				uint64_t	newlen;
				uint8_t    *p;

				if (ops->grow_plan(&f, &newlen) != AMQ_OK)
					break;
				p = xmalloc((size_t) newlen);
				memcpy(p, f.payload, (size_t) f.payload_len);
				free(f.payload);
				f.payload = p;
				ops->grow(&f, newlen);
				st = ops->add(&f, key(i));
			}
		}
	}
	if (st != AMQ_OK)
	{
		fprintf(stderr, "make_corpus: %s: %s\n", ops->name, amq_status_message(st));
		exit(1);
	}
	f.nkeys = nkeys;

	*len = AMQ_HEADER_SIZE + (size_t) f.payload_len;
	buf = xmalloc(*len);
	memcpy(buf + AMQ_HEADER_SIZE, f.payload, (size_t) f.payload_len);
	free(f.payload);
	f.payload = buf + AMQ_HEADER_SIZE;
	amq_write_header(&f, buf);
	if (amq_parse(buf, *len, &f) != AMQ_OK)
	{
		fprintf(stderr, "make_corpus: %s filter does not parse\n", ops->name);
		exit(1);
	}
	return buf;
}

/*
 * A fuzz_parquet input: the column byte (2: int8), then the bitset, alone
 * or after the BloomFilterHeader Parquet writers write (numBytes, then
 * BLOCK, XXHASH and UNCOMPRESSED, each an empty struct in its union).
 */
static void
write_parquet(const char *name, bool whole, const uint8_t *bitset, size_t len)
{
	uint8_t    *buf = xmalloc(1 + 32 + len);
	size_t		n = 0;
	AmqParquetInput in;

	buf[n++] = 2;
	if (whole)
	{
		/* field 1, i32, zigzag varint */
		uint64_t	v = (uint64_t) len << 1;

		buf[n++] = 0x15;
		for (; v >= 0x80; v >>= 7)
			buf[n++] = (uint8_t) (v | 0x80);
		buf[n++] = (uint8_t) v;
		/* fields 2, 3, 4: a union holding member 1, an empty struct */
		for (int i = 0; i < 3; i++)
		{
			memcpy(buf + n, "\x1c\x1c\x00\x00", 4);
			n += 4;
		}
		buf[n++] = 0;
	}
	memcpy(buf + n, bitset, len);
	if (amq_parquet_input(buf + 1, n - 1 + len, &in) != AMQ_OK || in.whole != whole)
	{
		fprintf(stderr, "make_corpus: Parquet input %s is not taken: %s\n", name,
				in.detail);
		exit(1);
	}
	write_file("parquet", name, buf, n + len);
	free(buf);
}

static void
write_state(const char *name, const AmqStateHeader *h, const uint8_t *body,
			size_t body_len)
{
	uint8_t    *buf = xmalloc(AMQ_STATE_HEADER + body_len);
	AmqStateHeader check;
	AmqFilter	f;
	const char *why;

	amq_state_write_header(h, buf);
	memcpy(buf + AMQ_STATE_HEADER, body, body_len);
	if (amq_state_parse(buf, AMQ_STATE_HEADER + body_len, &check, &f, &why) != AMQ_OK)
	{
		fprintf(stderr, "make_corpus: state %s does not parse: %s\n", name,
				why ? why : "filter");
		exit(1);
	}
	write_file("aggstate", name, buf, AMQ_STATE_HEADER + body_len);
	free(buf);
}

int
main(int argc, char **argv)
{
	static const struct
	{
		uint64_t	capacity;
		double		fpr;
		uint64_t	nkeys;
	}			sizes[] = {
		{1, 0.01, 0}, {1, 0.01, 1}, {20, 0.01, 20}, {40, 0.3, 30},
		{8, 0.05, 60},			/* past capacity: scalable grows */
		{10, 1e-6, 10}, {6, 1e-9, 6},	/* wide fingerprints, large k */
	};

	if (argc != 2)
	{
		fprintf(stderr, "usage: make_corpus DIR\n");
		return 2;
	}
	outdir = argv[1];
	if (mkdir(outdir, 0755) != 0 && errno != EEXIST)
	{
		perror(outdir);
		return 1;
	}

	for (int kind = 1; kind <= AMQ_KIND_MAX; kind++)
	{
		const AmqKindOps *ops = amq_kind_ops(kind);

		if (ops == NULL)
			continue;
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		{
			for (int variant = 0; variant < 3; variant++)
			{
				uint64_t	nkeys = sizes[s].nkeys;
				int			family = nkeys ? AMQ_FAMILY_INT : AMQ_FAMILY_NONE;
				int			scheme = AMQ_HASH_XXH3;
				uint32_t	key_type = 0;
				uint64_t	seed = 0;
				char		name[128];
				uint8_t    *buf;
				size_t		len;
				char	   *text;
				size_t		tlen;
				AmqStateHeader h = {0};

				/* dynamic kinds past their capacity only if they grow */
				if (nkeys > sizes[s].capacity && !(ops->caps & AMQ_CAP_GROW))
					continue;
				if (variant == 1)
				{
					/* a seeded filter of a type hashed by its own function */
					family = AMQ_FAMILY_OTHER;
					scheme = AMQ_HASH_TYPE;
					key_type = 2950;	/* uuid's OID, say */
					seed = 0x0123456789abcdefULL;
				}
				else if (variant == 2)
				{
					/* Parquet hashing: blocked, unseeded, int8 width */
					if (kind != AMQ_KIND_BLOCKED)
						continue;
					family = AMQ_FAMILY_INT;
					scheme = AMQ_HASH_PARQUET;
					key_type = 8;
				}
				/* scalable's other layout: stage 0 sized for its keys (v2) */
				buf = make_filter(kind, (ops->caps & AMQ_CAP_STATIC) ?
								  (nkeys ? nkeys : 1) : sizes[s].capacity,
								  sizes[s].fpr,
								  kind == AMQ_KIND_SCALABLE && variant == 1 ?
								  AMQ_FLAG_SCALABLE_SIZED : 0,
								  nkeys, family, scheme, key_type, seed, &len);
				if (buf == NULL)
					continue;

				snprintf(name, sizeof(name), "%s-%zu-%d", ops->name, s, variant);
				write_file("filter", name, buf, len);

				text = xmalloc(amq_base64_encoded_len(len) + 1);
				tlen = amq_base64_encode(buf, len, text);
				write_file("text", name, text, tlen);
				free(text);

				/* the filter-mode aggregate state holding this filter */
				h.mode = AMQ_STATE_FILTER;
				h.kind = (uint8_t) kind;
				h.key_family = (uint8_t) family;
				h.hash_scheme = (uint8_t) scheme;
				h.key_type = key_type;
				h.fpr = sizes[s].fpr;
				h.capacity = (ops->caps & AMQ_CAP_ADD) ? (int64_t) sizes[s].capacity : 0;
				write_state(name, &h, buf, len);

				/* and the buffer-mode state of its keys */
				if (variant != 1)
				{
					uint64_t   *hashes = xmalloc(8 * (nkeys + 1));
					uint8_t    *body = xmalloc(8 * (nkeys + 1));
					uint64_t   *scratch = xmalloc(8 * (nkeys + 1));
					size_t		n;

					for (uint64_t i = 0; i < nkeys; i++)
						hashes[i] = key(i);
					n = amq_sort_unique(hashes, nkeys, scratch);
					for (size_t i = 0; i < n; i++)
						amq_store64(body + 8 * i, hashes[i]);
					h.mode = AMQ_STATE_BUFFER;
					h.capacity = 0;
					snprintf(name, sizeof(name), "%s-%zu-%d-buffer", ops->name, s, variant);
					write_state(name, &h, body, 8 * n);
					free(hashes);
					free(body);
					free(scratch);
				}

				/*
				 * Blocked payloads are Parquet bitsets: the harness's input
				 * is a column byte (int8), then the bitset alone or after a
				 * BloomFilterHeader.
				 */
				if (kind == AMQ_KIND_BLOCKED)
				{
					snprintf(name, sizeof(name), "bitset-%zu-%d", s, variant);
					write_parquet(name, false, buf + AMQ_HEADER_SIZE,
								  len - AMQ_HEADER_SIZE);
					snprintf(name, sizeof(name), "whole-%zu-%d", s, variant);
					write_parquet(name, true, buf + AMQ_HEADER_SIZE,
								  len - AMQ_HEADER_SIZE);
				}
				free(buf);
			}
		}
	}
	printf("make_corpus: %d files in %s\n", nwritten, outdir);
	return 0;
}
