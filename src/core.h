/*-------------------------------------------------------------------------
 *
 * core.h
 *	  The filter core of bloomamq: the on-disk format, the kind ops table and
 *	  the helpers shared by the kinds.
 *
 * Everything declared here is plain C99 with no PostgreSQL dependency, so
 * the kinds can be unit-tested, fuzzed and benchmarked without a server.
 * Memory that a kind needs beyond the payload comes from a caller-supplied
 * allocator; errors are status codes that the SQL layer turns into ereport.
 *
 * A serialized filter is a fixed 80-byte header followed by the payload,
 * all little-endian whatever the host:
 *
 *	 off size field
 *	   0   4  magic "AMQF" (0x46514d41 read as little-endian uint32)
 *	   4   1  format version: 1, or 2 when a flag of AMQ_FLAGS_V2 is set
 *			  (amq_format_version: sized scalable filters and xor filters);
 *			  every other filter is written as 1
 *	   5   1  kind (AmqKindId)
 *	   6   1  hash scheme (AmqHashScheme)
 *	   7   1  key family (AmqKeyFamily)
 *	   8   4  flags (AMQ_FLAG_*; other bits must be 0)
 *	  12   4  key type: OID for family AMQ_FAMILY_OTHER; for the Parquet
 *			  scheme the byte width (4 or 8) of integer and float keys;
 *			  else 0
 *	  16   8  seed
 *	  24   8  number of keys added
 *	  32   8  target false-positive rate (IEEE 754 double)
 *	  40  24  three kind parameters (uint64 each; meaning per kind)
 *	  64   8  payload length in bytes
 *	  72   8  checksum: XXH3-64 of the payload, seeding XXH3-64 of bytes 0..71
 *	  80      payload
 *
 *-------------------------------------------------------------------------
 */
#ifndef CORE_H
#define CORE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define AMQ_MAGIC			0x46514d41u	/* "AMQF" */
#define AMQ_FORMAT_VERSION	1	/* what every filter without a v2 flag is */
#define AMQ_FORMAT_VERSION_LATEST	2	/* the newest this build reads */
#define AMQ_HEADER_SIZE		80

/* the header's fields: offsets in the serialized header */
#define AMQ_OFF_MAGIC		0
#define AMQ_OFF_VERSION		4
#define AMQ_OFF_KIND		5
#define AMQ_OFF_SCHEME		6
#define AMQ_OFF_FAMILY		7
#define AMQ_OFF_FLAGS		8
#define AMQ_OFF_KEYTYPE		12
#define AMQ_OFF_SEED		16
#define AMQ_OFF_NKEYS		24
#define AMQ_OFF_FPR			32
#define AMQ_OFF_PARAM		40
#define AMQ_OFF_PAYLEN		64
#define AMQ_OFF_CHECKSUM	72

/*
 * Largest serialized filter (header plus payload): a varlena holds at most
 * 1 GB - 1 bytes including its 4-byte length word.
 */
#define AMQ_MAX_BYTES		((uint64_t) 0x3fffffff - 4)
#define AMQ_MAX_PAYLOAD		(AMQ_MAX_BYTES - AMQ_HEADER_SIZE)

#define AMQ_FPR_MAX			0.5
/* the lowest rate of the fingerprint kinds, whose fingerprints have 32 bits */
#define AMQ_FP_FPR_MIN		(1.0 / 4294967296.0)

/*
 * Largest key count a header may hold: no filter of a PostgreSQL-sized
 * payload holds more keys, and counts saturate here so that a filter the
 * input gate accepted is still accepted after adds and unions.
 */
#define AMQ_MAX_NKEYS		((uint64_t) 1 << 62)

typedef enum AmqStatus
{
	AMQ_OK = 0,
	AMQ_ERR_PARAM,				/* fpr or capacity out of range */
	AMQ_ERR_TOO_LARGE,			/* would exceed AMQ_MAX_BYTES */
	AMQ_ERR_CORRUPT,			/* bytes fail validation */
	AMQ_ERR_VERSION,			/* unknown format version */
	AMQ_ERR_CHECKSUM,			/* payload checksum mismatch */
	AMQ_ERR_UNSUPPORTED,		/* the kind does not offer the operation */
	AMQ_ERR_MISMATCH,			/* union/intersection of other kind or geometry */
	AMQ_ERR_FULL,				/* a fixed-size filter cannot take the key */
	AMQ_ERR_NOMEM,				/* the allocator returned NULL */
	AMQ_ERR_BUILD_FAILED		/* static construction exhausted its retries */
} AmqStatus;

typedef enum AmqKindId
{
	AMQ_KIND_BLOOM = 1,
	AMQ_KIND_BLOCKED = 2,
	AMQ_KIND_TWOBIT = 3,
	AMQ_KIND_COUNTING = 4,
	AMQ_KIND_CUCKOO = 5,
	AMQ_KIND_SCALABLE = 6,
	AMQ_KIND_XOR = 7,
	AMQ_KIND_FUSE = 8,
	AMQ_KIND_RIBBON = 9,
	AMQ_KIND_MAX = 9
} AmqKindId;

typedef enum AmqHashScheme
{
	AMQ_HASH_XXH3 = 1,			/* canonical, portable (see amq_hashing.c) */
	AMQ_HASH_TYPE = 2,			/* the type's extended hash function, seed 0 */
	AMQ_HASH_PARQUET = 3		/* Parquet's: XXH64 seed 0 of the PLAIN encoding */
} AmqHashScheme;

/*
 * Key families: values of one family compare equal across types (int4 and
 * int8) and hash to the same canonical 64-bit value.  The numbering is part
 * of the on-disk format.
 */
typedef enum AmqKeyFamily
{
	AMQ_FAMILY_NONE = 0,		/* no key added yet */
	AMQ_FAMILY_INT = 1,			/* int2, int4, int8 */
	AMQ_FAMILY_FLOAT = 2,		/* float4, float8 */
	AMQ_FAMILY_NUMERIC = 3,
	AMQ_FAMILY_TEXT = 4,		/* text, varchar, name, bpchar */
	AMQ_FAMILY_BYTEA = 5,
	AMQ_FAMILY_UUID = 6,
	AMQ_FAMILY_DATE = 7,
	AMQ_FAMILY_TIMESTAMP = 8,
	AMQ_FAMILY_TIMESTAMPTZ = 9,
	AMQ_FAMILY_BOOL = 10,
	AMQ_FAMILY_OTHER = 11,		/* any other hashable type, by its OID */
	AMQ_FAMILY_MAX = 11
} AmqKeyFamily;

/* nkeys is an estimate (after a union or intersection) */
#define AMQ_FLAG_NKEYS_ESTIMATED	0x1u
/*
 * Kind scalable only: stage 0 was sized for exactly the keys it was built
 * from, and takes most of the target rate (kind_scalable.c).  Format
 * version 2: a reader that predates it refuses the filter as a version it
 * does not know, rather than misreading its layout.
 */
#define AMQ_FLAG_SCALABLE_SIZED		0x2u
/*
 * Kind xor only: the payload was assigned in breadth-first peeling order
 * (kind_xor.c).  Layout and probe are version 1's; format version 2 says
 * that the same keys give other bytes than a version 1 build did.
 */
#define AMQ_FLAG_XOR_BFS			0x4u
/* Kind fuse only: the same, for fuse's peeling (kind_fuse.c). */
#define AMQ_FLAG_FUSE_BFS			0x8u
#define AMQ_FLAGS_KNOWN				0xfu
/* the flags that make a filter format version 2 */
#define AMQ_FLAGS_V2				(AMQ_FLAG_SCALABLE_SIZED | AMQ_FLAG_XOR_BFS | \
									 AMQ_FLAG_FUSE_BFS)

/* The format version a filter with these flags is written as. */
static inline int
amq_format_version(uint32_t flags)
{
	return (flags & AMQ_FLAGS_V2) ? 2 : AMQ_FORMAT_VERSION;
}

/* capabilities of a kind */
#define AMQ_CAP_ADD			0x01u	/* keys can be added after creation */
#define AMQ_CAP_REMOVE		0x02u
#define AMQ_CAP_UNION		0x04u
#define AMQ_CAP_INTERSECT	0x08u
#define AMQ_CAP_STATIC		0x10u	/* built once from the complete key set */
#define AMQ_CAP_SLICE		0x20u	/* a probe reads one small span of payload */
#define AMQ_CAP_GROW		0x40u	/* add may ask for a larger payload */

/*
 * A decoded filter: the header fields and a pointer to the payload, which
 * the filter does not own.
 */
typedef struct AmqFilter
{
	uint8_t		kind;
	uint8_t		hash_scheme;
	uint8_t		key_family;
	uint32_t	flags;
	uint32_t	key_type;
	uint64_t	seed;
	uint64_t	nkeys;
	double		fpr;
	uint64_t	param[3];
	uint64_t	payload_len;
	uint8_t    *payload;
} AmqFilter;

typedef struct AmqStats
{
	double		fill;			/* fraction of bits (or slots) in use */
	double		est_fpr;		/* false-positive rate as filled now */
	double		est_distinct;	/* distinct keys estimated from the payload */
	uint32_t	k;				/* bits probed per key (Bloom family) */
	uint32_t	fingerprint_bits;	/* fingerprint kinds, else 0 */
} AmqStats;

typedef struct AmqAllocator
{
	void	   *(*alloc) (void *ctx, size_t size);
	void		(*free) (void *ctx, void *ptr);
	void	   *ctx;
} AmqAllocator;

/*
 * The core's passes over keys (sorting, building the static kinds, filling
 * from sorted runs, merging runs) call amq_poll() at least every
 * AMQ_POLL_KEYS keys (the blocked fill from several runs, every segment of
 * AMQ_BLOCKED_FILL_SEGMENT blocks), and between passes.  It calls
 * amq_poll_hook, when set: the server sets it to its interrupt check, so
 * that a query cancel, a statement_timeout or a terminate reaches a build
 * of any size within milliseconds.  The hook may not return.  Wherever it is called the core
 * holds nothing but memory the caller gave it or its allocator handed out,
 * which the caller frees as it unwinds (the server's memory contexts).
 */
#define AMQ_POLL_KEYS			((size_t) 1 << 16)
extern void (*amq_poll_hook) (void);

static inline void
amq_poll(void)
{
	if (amq_poll_hook != NULL)
		amq_poll_hook();
}

/* the end of the chunk of at most AMQ_POLL_KEYS keys from i (< n) on */
static inline size_t
amq_poll_chunk_end(size_t i, size_t n)
{
	return n - i > AMQ_POLL_KEYS ? i + AMQ_POLL_KEYS : n;
}

/* amq_poll() once every AMQ_POLL_KEYS values of the counter i */
static inline void
amq_poll_every(size_t i)
{
	if ((i & (AMQ_POLL_KEYS - 1)) == 0)
		amq_poll();
}

typedef enum AmqMergeOp
{
	AMQ_MERGE_UNION,
	AMQ_MERGE_INTERSECT
} AmqMergeOp;

/*
 * The kind ops table.  A kind may leave an entry NULL when its caps say it
 * does not offer the operation.  Every entry receives a filter whose header
 * was validated and whose params passed ->check().
 */
typedef struct AmqKindOps
{
	const char *name;
	uint8_t		id;
	uint32_t	caps;

	/*
	 * Size a filter for "capacity" distinct keys at false-positive rate
	 * "fpr": fill f->param[] and f->payload_len.  f->fpr is already set.
	 * AMQ_ERR_TOO_LARGE when the payload would exceed AMQ_MAX_PAYLOAD.
	 */
	AmqStatus	(*plan) (AmqFilter *f, uint64_t capacity, double fpr);

	/* Check untrusted params against payload_len. */
	AmqStatus	(*check) (const AmqFilter *f);

	/* Dynamic kinds: add one key hash to a zero-initialised payload. */
	AmqStatus	(*add) (AmqFilter *f, uint64_t hash);

	/*
	 * Static kinds: build from n distinct hashes, sorted ascending, into a
	 * zero-initialised payload planned for capacity max(n, 1).  Retries
	 * with deterministic seeds are the kind's own (the seed that worked is
	 * left in f->seed); AMQ_ERR_BUILD_FAILED once they are exhausted.
	 * Scratch memory comes from alloc and is freed before returning.
	 */
	AmqStatus	(*build) (AmqFilter *f, const uint64_t *hashes, size_t n,
						  const AmqAllocator *alloc);

	/*
	 * AMQ_CAP_GROW kinds: add returns AMQ_ERR_FULL when the payload must
	 * grow.  grow_plan gives the payload length after one growth step
	 * (AMQ_ERR_TOO_LARGE past AMQ_MAX_PAYLOAD); the caller points
	 * f->payload at a buffer of that length holding the old payload as its
	 * prefix and zeros after it, and calls grow, which updates the params
	 * and payload_len.  Then the add is retried.
	 */
	AmqStatus	(*grow_plan) (const AmqFilter *f, uint64_t *new_len);
	void		(*grow) (AmqFilter *f, uint64_t new_len);

	/*
	 * AMQ_CAP_REMOVE kinds: remove one key hash that was added.  Removing a
	 * key that the filter does not contain is a no-op.
	 */
	AmqStatus	(*remove) (AmqFilter *f, uint64_t hash);

	bool		(*contains) (const AmqFilter *f, uint64_t hash);

	/*
	 * The payload span a probe of hash reads, and the probe given only that
	 * span: offered by AMQ_CAP_SLICE kinds, whose span is small (TOAST
	 * slices fetch it), and by fuse and ribbon, whose span of up to three
	 * segments or 32 r bytes the amq index reads from its pages.
	 */
	void		(*probe_span) (const AmqFilter *f, uint64_t hash,
							   uint64_t *offset, uint32_t *length);
	bool		(*contains_span) (const AmqFilter *f, uint64_t hash,
								  const uint8_t *span);

	/* dst op= src; AMQ_ERR_MISMATCH unless the geometries are equal. */
	AmqStatus	(*merge) (AmqFilter *dst, const AmqFilter *src, AmqMergeOp op);

	void		(*stats) (const AmqFilter *f, AmqStats *st);
} AmqKindOps;

/* core_kinds.c */
extern const AmqKindOps *amq_kind_ops(int id);
extern const AmqKindOps *amq_kind_by_name(const char *name);
extern const char *amq_kind_names(uint32_t caps);	/* "bloom, blocked" */

/* core_format.c */
extern AmqStatus amq_check_fpr(double fpr);
extern AmqStatus amq_plan(AmqFilter *f, int kind, uint64_t capacity, double fpr);
extern AmqStatus amq_plan_flags(AmqFilter *f, int kind, uint64_t capacity,
								 double fpr, uint32_t flags);
extern AmqStatus amq_parse(const uint8_t *buf, size_t len, AmqFilter *out);
extern void amq_parse_trusted(const uint8_t *buf, size_t len, AmqFilter *out);
extern bool amq_check_version(const AmqFilter *f, int version);
extern void amq_write_header(const AmqFilter *f, uint8_t *buf);
extern uint64_t amq_checksum(const uint8_t *header, const uint8_t *payload,
							 uint64_t payload_len);
extern size_t amq_base64_encoded_len(size_t len);
extern size_t amq_base64_encode(const uint8_t *src, size_t len, char *dst);
extern bool amq_base64_decode(const char *src, size_t len, uint8_t *dst,
							  size_t *dstlen);
extern const char *amq_status_message(AmqStatus st);
extern AmqStatus amq_check_keyinfo(int kind, int hash_scheme, int key_family,
								   uint32_t key_type, uint64_t seed);

/*
 * core_format.c: the serialized state of the amq_agg aggregates, 32 bytes
 * little-endian:
 *
 *	 0 version (AMQ_STATE_VERSION), 1 mode (AmqStateMode), 2 kind,
 *	 3 key family, 4 hash scheme, 5..7 zero, 8 key type (4), 12 zero (4),
 *	 16 fpr (8), 24 capacity (8, 0: none)
 *
 * then the sorted distinct 64-bit hashes (buffer mode) or a serialized
 * filter (filter mode).
 */
#define AMQ_STATE_VERSION		1
#define AMQ_STATE_HEADER		32
/* hashes a serialized state (and so any state) may hold: under 1 GB */
#define AMQ_STATE_MAX_HASHES	((uint64_t) 120 * 1000 * 1000)

typedef enum AmqStateMode
{
	AMQ_STATE_BUFFER = 0,
	AMQ_STATE_FILTER = 1,
	/*
	 * A partial aggregate's buffer handed to the combining aggregate through
	 * the query's shared memory (amq_agg.c), or, in the process that runs
	 * both, where it is (LOCAL): only ever in flight between the two, and
	 * refused by amq_state_parse, so by every input function.
	 */
	AMQ_STATE_SHARED = 2,
	AMQ_STATE_LOCAL = 3
} AmqStateMode;

typedef struct AmqStateHeader
{
	uint8_t		mode;
	uint8_t		kind;
	uint8_t		key_family;
	uint8_t		hash_scheme;
	uint32_t	key_type;
	double		fpr;
	int64_t		capacity;
	const uint8_t *body;		/* what follows the header */
	size_t		body_len;
	size_t		nhashes;		/* buffer mode: body_len / 8 */
} AmqStateHeader;

extern void amq_state_write_header(const AmqStateHeader *h, uint8_t *buf);
extern AmqStatus amq_state_parse(const uint8_t *buf, size_t len,
								 AmqStateHeader *out, AmqFilter *filter,
								 const char **why);

/* core_parquet.c: Parquet split block bitsets as blocked filters */
extern bool amq_parquet_bitset_ok(uint64_t len);
extern void amq_parquet_describe(AmqFilter *f);

/*
 * core_parquet.c: what amq_from_parquet takes, a bare bitset or a whole
 * Parquet bloom filter (its Thrift BloomFilterHeader, then the bitset).
 */
typedef struct AmqParquetHeader
{
	size_t		header_len;		/* bytes of the Thrift header */
	int64_t		num_bytes;		/* numBytes: bytes of bitset after it */
	int			algorithm;		/* the member each union has set: 1 is */
	int			hash;			/* BLOCK, XXHASH, UNCOMPRESSED */
	int			compression;
	bool		algorithm_plain;	/* the member is an empty struct */
	bool		hash_plain;
	bool		compression_plain;
} AmqParquetHeader;

typedef struct AmqParquetInput
{
	bool		whole;			/* a header came first */
	bool		header_like;	/* on failure: the bytes began like one */
	AmqParquetHeader header;	/* when whole */
	const uint8_t *bitset;		/* on success: the bitset */
	size_t		bitset_len;
	char		detail[192];	/* on failure: why, a sentence */
} AmqParquetInput;

extern AmqStatus amq_parquet_input(const uint8_t *buf, size_t len,
								   AmqParquetInput *out);

/*
 * kind_bloom.c: the Bloom geometry that bloom and counting share (cells of
 * 8 or 4 bits: 8 or 2 cells a byte), and the second hash of their double
 * hashing (odd, so the k positions differ).
 */
#define AMQ_BLOOM_MAX_K		30
extern AmqStatus amq_bloom_plan_cells(AmqFilter *f, uint64_t capacity,
									  double fpr, uint64_t cells_per_byte);
extern AmqStatus amq_bloom_check_cells(const AmqFilter *f,
									   uint64_t cells_per_byte);

static inline uint64_t
amq_bloom_step(uint64_t h)
{
	return ((h >> 32) | (h << 32)) | 1;
}

/*
 * core_format.c: the union and intersection of the bit-array kinds.  Two
 * filters merge only if they share kind, params, payload length and seed;
 * bits merge bytewise (OR, AND), so word order does not matter.
 */
extern bool amq_same_geometry(const AmqFilter *a, const AmqFilter *b);
/* the merge op of the bit-array kinds (bloom, blocked, twobit) */
extern AmqStatus amq_bitarray_merge(AmqFilter *dst, const AmqFilter *src,
									AmqMergeOp op);

/* core_sort.c: sort ascending and drop duplicates in place; returns new n */
extern size_t amq_sort_unique(uint64_t *a, size_t n, uint64_t *scratch);

/* core_union.c: unions of ascending, distinct runs of hashes */
#define AMQ_UNION_MAX_RUNS	32
extern size_t amq_union_count(const uint64_t *const *head,
							  const uint64_t *const *end, int k);
extern size_t amq_union_guess(const uint64_t *const *head,
							  const uint64_t *const *end, int k, bool *exact);
extern size_t amq_union_merge(const uint64_t *const *head,
							  const uint64_t *const *end, int k, uint64_t *out);
extern size_t amq_merge2(const uint64_t *x, size_t nx, const uint64_t *y,
						 size_t ny, uint64_t *out);
extern size_t amq_lower_bound(const uint64_t *x, size_t n, uint64_t v);
extern size_t amq_lower_bound_near(const uint64_t *x, size_t n, uint64_t v);

/* kinds */
extern const AmqKindOps amq_bloom_ops;
extern const AmqKindOps amq_blocked_ops;
extern const AmqKindOps amq_twobit_ops;
extern const AmqKindOps amq_counting_ops;
extern const AmqKindOps amq_cuckoo_ops;
extern const AmqKindOps amq_scalable_ops;
extern const AmqKindOps amq_xor_ops;
extern const AmqKindOps amq_fuse_ops;
extern const AmqKindOps amq_ribbon_ops;

/* ribbon's back-substitutions, slowest first (kind_ribbon.c) */
typedef enum AmqRibbonSolver
{
	AMQ_RIBBON_SOLVE_SCALAR,
	AMQ_RIBBON_SOLVE_SSE2,
	AMQ_RIBBON_SOLVE_AVX2,
	AMQ_RIBBON_SOLVE_AVX512
} AmqRibbonSolver;

extern AmqRibbonSolver amq_ribbon_solver_max;

/*
 * Little-endian access, alignment-free.  Payload words are stored
 * little-endian so a filter reads the same on every host.
 */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define AMQ_BIG_ENDIAN 1
#endif

static inline uint32_t
amq_load32(const uint8_t *p)
{
	uint32_t	v;

	memcpy(&v, p, 4);
#ifdef AMQ_BIG_ENDIAN
	v = __builtin_bswap32(v);
#endif
	return v;
}

static inline void
amq_store32(uint8_t *p, uint32_t v)
{
#ifdef AMQ_BIG_ENDIAN
	v = __builtin_bswap32(v);
#endif
	memcpy(p, &v, 4);
}

static inline uint64_t
amq_load64(const uint8_t *p)
{
	uint64_t	v;

	memcpy(&v, p, 8);
#ifdef AMQ_BIG_ENDIAN
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline void
amq_store64(uint8_t *p, uint64_t v)
{
#ifdef AMQ_BIG_ENDIAN
	v = __builtin_bswap64(v);
#endif
	memcpy(p, &v, 8);
}

/* Map a 64-bit hash uniformly onto [0, n) by multiply-shift, not modulo. */
static inline uint64_t
amq_reduce(uint64_t hash, uint64_t n)
{
	return (uint64_t) (((unsigned __int128) hash * n) >> 64);
}

/* A bijective 64-bit mixer (the SplitMix64 finalizer). */
static inline uint64_t
amq_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* Count one more key, saturating at AMQ_MAX_NKEYS. */
static inline void
amq_count_add(AmqFilter *f)
{
	if (f->nkeys < AMQ_MAX_NKEYS)
		f->nkeys++;
}

/* A key count from an estimate: rounded, within [0, AMQ_MAX_NKEYS]. */
static inline uint64_t
amq_nkeys_from_estimate(double est)
{
	/* written so that NaN gives 0 */
	if (!(est > 0.0))
		return 0;
	if (est >= (double) AMQ_MAX_NKEYS)
		return AMQ_MAX_NKEYS;
	return (uint64_t) rint(est);
}

/* The hash a kind works with: the key hash, remixed when seeded. */
static inline uint64_t
amq_seeded(const AmqFilter *f, uint64_t hash)
{
	return f->seed ? amq_mix64(hash ^ f->seed) : hash;
}

#endif							/* CORE_H */
