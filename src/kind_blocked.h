/*-------------------------------------------------------------------------
 *
 * kind_blocked.h
 *	  Inline hot path of the "blocked" kind (split block Bloom filter).
 *
 * The layout is Parquet's: the payload is an array of 32-byte blocks, each
 * eight little-endian 32-bit words.  The high 32 bits of the (seeded) hash
 * pick the block by multiply-shift, so ascending hashes visit blocks in
 * ascending order; the low 32 bits, multiplied by one odd salt per word,
 * pick one bit in each of the eight words.  A probe therefore touches one
 * cache line and costs eight multiplies, with no data-dependent branch.
 *
 * These are exposed so the SQL layer can inline the probe for the default
 * kind; callers apply amq_seeded() to the key hash first.
 *
 *-------------------------------------------------------------------------
 */
#ifndef KIND_BLOCKED_H
#define KIND_BLOCKED_H

#include "core.h"

#define AMQ_BLOCKED_BLOCK_BYTES	32

/* the bit that lowhash sets in a word, given that word's salt */
#define AMQ_BLOCKED_BIT(x, salt) \
	((uint32_t) 1 << (((uint32_t) (x) * (uint32_t) (salt)) >> 27))

/* Parquet's salts, one per word; kept as immediates in the code below */
#define AMQ_BLOCKED_SALT0	0x47b6137bu
#define AMQ_BLOCKED_SALT1	0x44974d91u
#define AMQ_BLOCKED_SALT2	0x8824ad5bu
#define AMQ_BLOCKED_SALT3	0xa2b7289du
#define AMQ_BLOCKED_SALT4	0x705495c7u
#define AMQ_BLOCKED_SALT5	0x2df1424bu
#define AMQ_BLOCKED_SALT6	0x9efc4947u
#define AMQ_BLOCKED_SALT7	0x5c6bfb31u

/* Block index of a (seeded) hash among nblocks (< 2^32) blocks. */
static inline uint64_t
amq_blocked_block(uint64_t hash, uint64_t nblocks)
{
	return ((hash >> 32) * nblocks) >> 32;
}

/* The 32-byte block of a payload of nblocks blocks that a (seeded) hash uses. */
static inline uint8_t *
amq_blocked_at(const uint8_t *payload, uint64_t nblocks, uint64_t hash)
{
	return (uint8_t *) payload +
		amq_blocked_block(hash, nblocks) * AMQ_BLOCKED_BLOCK_BYTES;
}

/*
 * Is every bit of lowhash's pattern set in the 32-byte block?  The misses
 * of all eight words are OR-ed together so the compiler emits straight-line
 * code.  This is the probe of any host; amq_blocked_probe() below picks it
 * or a vector one.
 */
static inline bool
amq_blocked_probe_scalar(const uint8_t *block32, uint32_t lowhash)
{
	uint32_t	miss;

	miss = AMQ_BLOCKED_BIT(lowhash, AMQ_BLOCKED_SALT0) & ~amq_load32(block32 + 0);
	miss |= AMQ_BLOCKED_BIT(lowhash, AMQ_BLOCKED_SALT1) & ~amq_load32(block32 + 4);
	miss |= AMQ_BLOCKED_BIT(lowhash, AMQ_BLOCKED_SALT2) & ~amq_load32(block32 + 8);
	miss |= AMQ_BLOCKED_BIT(lowhash, AMQ_BLOCKED_SALT3) & ~amq_load32(block32 + 12);
	miss |= AMQ_BLOCKED_BIT(lowhash, AMQ_BLOCKED_SALT4) & ~amq_load32(block32 + 16);
	miss |= AMQ_BLOCKED_BIT(lowhash, AMQ_BLOCKED_SALT5) & ~amq_load32(block32 + 20);
	miss |= AMQ_BLOCKED_BIT(lowhash, AMQ_BLOCKED_SALT6) & ~amq_load32(block32 + 24);
	miss |= AMQ_BLOCKED_BIT(lowhash, AMQ_BLOCKED_SALT7) & ~amq_load32(block32 + 28);
	return miss == 0;
}

/*
 * x86-64 builds assume only the baseline instruction set, so the probe in
 * AVX2 (the eight little-endian words as the lanes of one register: one
 * multiply, shift and test) is compiled for that target alone and chosen at
 * run time by amq_blocked_avx2, as are the fills of kind_blocked.c.  The
 * scalar probe is some 70 instructions, the vector one a dozen, so a loop of
 * probes keeps more of them in flight: `make unittest`'s timing of 10^7
 * absent keys in a 13 MB filter went from 33.5 to 11.1 ns a probe.
 */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define AMQ_BLOCKED_HAVE_AVX2 1
#include <immintrin.h>

/*
 * Use AVX2: set as the library loads where the CPU has it; the unit tests
 * clear it to test the scalar code on such a CPU.
 */
extern bool amq_blocked_avx2;

/* the eight bits a key's low 32 bits set in its block, as one register */
__attribute__((target("avx2"), always_inline))
static inline __m256i
amq_blocked_bits_avx2(uint32_t lowhash)
{
	const __m256i salts = _mm256_setr_epi32((int) AMQ_BLOCKED_SALT0,
											(int) AMQ_BLOCKED_SALT1,
											(int) AMQ_BLOCKED_SALT2,
											(int) AMQ_BLOCKED_SALT3,
											(int) AMQ_BLOCKED_SALT4,
											(int) AMQ_BLOCKED_SALT5,
											(int) AMQ_BLOCKED_SALT6,
											(int) AMQ_BLOCKED_SALT7);
	__m256i		x = _mm256_set1_epi32((int) lowhash);

	return _mm256_sllv_epi32(_mm256_set1_epi32(1),
							 _mm256_srli_epi32(_mm256_mullo_epi32(x, salts), 27));
}

/* amq_blocked_probe_scalar in AVX2: none of the bits is outside the block */
__attribute__((target("avx2")))
static inline bool
amq_blocked_probe_avx2(const uint8_t *block32, uint32_t lowhash)
{
	return _mm256_testc_si256(_mm256_loadu_si256((const __m256i *) block32),
							  amq_blocked_bits_avx2(lowhash)) != 0;
}
#endif

/* Is every bit of lowhash's pattern set in the 32-byte block? */
static inline bool
amq_blocked_probe(const uint8_t *block32, uint32_t lowhash)
{
#ifdef AMQ_BLOCKED_HAVE_AVX2
	if (amq_blocked_avx2)
		return amq_blocked_probe_avx2(block32, lowhash);
#endif
	return amq_blocked_probe_scalar(block32, lowhash);
}

/* Set lowhash's pattern in the 32-byte block. */
static inline void
amq_blocked_insert(uint8_t *block32, uint32_t lowhash)
{
#define AMQ_BLOCKED_SET(off, salt) \
	amq_store32(block32 + (off), \
				amq_load32(block32 + (off)) | AMQ_BLOCKED_BIT(lowhash, salt))

	AMQ_BLOCKED_SET(0, AMQ_BLOCKED_SALT0);
	AMQ_BLOCKED_SET(4, AMQ_BLOCKED_SALT1);
	AMQ_BLOCKED_SET(8, AMQ_BLOCKED_SALT2);
	AMQ_BLOCKED_SET(12, AMQ_BLOCKED_SALT3);
	AMQ_BLOCKED_SET(16, AMQ_BLOCKED_SALT4);
	AMQ_BLOCKED_SET(20, AMQ_BLOCKED_SALT5);
	AMQ_BLOCKED_SET(24, AMQ_BLOCKED_SALT6);
	AMQ_BLOCKED_SET(28, AMQ_BLOCKED_SALT7);
#undef AMQ_BLOCKED_SET
}

/* 1 << i for i in 0..31: a load is cheaper than a shift by a variable */
extern const uint32_t amq_blocked_bits[32];

#define AMQ_BLOCKED_BIT_TABLE(x, salt) \
	amq_blocked_bits[((uint32_t) (x) * (uint32_t) (salt)) >> 27]

/*
 * Add n (seeded) hashes to a payload of nblocks blocks.  Ascending hashes
 * visit blocks in ascending order, about n / nblocks keys each, so the keys
 * of a block are OR-ed into its words in registers and each block is read
 * and written once: the same bytes as amq_blocked_insert of every key, in
 * any order, without a load and store per word per key.  The bits come
 * from a table: x86-64 without BMI2 shifts by a variable in three uops.
 */
static inline void
amq_blocked_insert_run(uint8_t *payload, uint64_t nblocks,
					   const uint64_t *hashes, size_t n)
{
	size_t		i = 0;

	while (i < n)
	{
		uint64_t	block = amq_blocked_block(hashes[i], nblocks);
		uint8_t    *b = payload + block * AMQ_BLOCKED_BLOCK_BYTES;
		uint32_t	w0 = amq_load32(b + 0),
					w1 = amq_load32(b + 4),
					w2 = amq_load32(b + 8),
					w3 = amq_load32(b + 12),
					w4 = amq_load32(b + 16),
					w5 = amq_load32(b + 20),
					w6 = amq_load32(b + 24),
					w7 = amq_load32(b + 28);

		do
		{
			uint32_t	x = (uint32_t) hashes[i];

			w0 |= AMQ_BLOCKED_BIT_TABLE(x, AMQ_BLOCKED_SALT0);
			w1 |= AMQ_BLOCKED_BIT_TABLE(x, AMQ_BLOCKED_SALT1);
			w2 |= AMQ_BLOCKED_BIT_TABLE(x, AMQ_BLOCKED_SALT2);
			w3 |= AMQ_BLOCKED_BIT_TABLE(x, AMQ_BLOCKED_SALT3);
			w4 |= AMQ_BLOCKED_BIT_TABLE(x, AMQ_BLOCKED_SALT4);
			w5 |= AMQ_BLOCKED_BIT_TABLE(x, AMQ_BLOCKED_SALT5);
			w6 |= AMQ_BLOCKED_BIT_TABLE(x, AMQ_BLOCKED_SALT6);
			w7 |= AMQ_BLOCKED_BIT_TABLE(x, AMQ_BLOCKED_SALT7);
			i++;
		} while (i < n && amq_blocked_block(hashes[i], nblocks) == block);

		amq_store32(b + 0, w0);
		amq_store32(b + 4, w1);
		amq_store32(b + 8, w2);
		amq_store32(b + 12, w3);
		amq_store32(b + 16, w4);
		amq_store32(b + 20, w5);
		amq_store32(b + 24, w6);
		amq_store32(b + 28, w7);
	}
}

/* amq_blocked_insert_run, vectorized where the CPU allows (kind_blocked.c) */
extern void amq_blocked_fill(uint8_t *payload, uint64_t nblocks,
							 const uint64_t *hashes, size_t n);

/* the most runs amq_blocked_fill_runs takes */
#define AMQ_BLOCKED_FILL_MAX_RUNS	AMQ_UNION_MAX_RUNS

/*
 * the blocks it fills from every run before the next ones: 256 KB, kept in
 * L2; it polls (core.h) once per segment
 */
#define AMQ_BLOCKED_FILL_SEGMENT	((uint64_t) 8192)

/*
 * Fill several ascending, distinct runs, a segment of blocks at a time: how
 * many of their keys an earlier run also held.
 */
extern size_t amq_blocked_fill_runs(uint8_t *payload, uint64_t nblocks,
									const uint64_t *const *runs,
									const size_t *lens, int nruns);

#endif							/* KIND_BLOCKED_H */
