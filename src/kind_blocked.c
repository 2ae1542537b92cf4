/*-------------------------------------------------------------------------
 *
 * kind_blocked.c
 *	  The "blocked" kind: a split block Bloom filter in Parquet's layout.
 *
 * Parameters: param[0] = nblocks (1 <= nblocks < 2^32); param[1] and
 * param[2] are reserved and zero.  The payload is nblocks 32-byte blocks;
 * the probe itself is in kind_blocked.h so the SQL layer can inline it.
 *
 * Every key sets exactly one bit in each of its block's eight words, so
 * the false-positive rate of a block holding j keys is (1 - (31/32)^j)^8.
 * Keys spread over blocks as a Poisson process, and plan() sizes the filter
 * by summing that model numerically: the uneven load of the blocks is what
 * costs a blocked filter its extra bits per key over a plain Bloom filter,
 * so a formula that ignores it would undersize the filter.
 *
 *-------------------------------------------------------------------------
 */
#include <math.h>

#include "core.h"
#include "kind_blocked.h"

/* blocks are addressed by a 32-bit multiply-shift */
#define BLOCKED_MAX_BLOCKS	\
	(AMQ_MAX_PAYLOAD / AMQ_BLOCKED_BLOCK_BYTES < UINT64_C(0xffffffff) ? \
	 AMQ_MAX_PAYLOAD / AMQ_BLOCKED_BLOCK_BYTES : UINT64_C(0xffffffff))

/* false-positive rate of a block holding exactly j keys */
static double
block_fpr(double j, double log_miss)
{
	return pow(1.0 - exp(j * log_miss), 8.0);
}

/*
 * Model false-positive rate with lambda keys per block on average:
 * sum over j of Poisson(j; lambda) * block_fpr(j).
 *
 * The Poisson weights are computed outward from the mode, starting from a
 * log-space value there, so nothing underflows for large lambda (where
 * exp(-lambda) alone would).
 */
static double
blocked_model_fpr(double lambda)
{
	double		log_miss = log(31.0 / 32.0);
	double		mode;
	double		pmode;
	double		p;
	double		sum;
	double		j;

	if (!(lambda > 0.0))
		return 0.0;

	/* beyond this every word is all but certainly full */
	if (lambda > 1.0e4)
		return 1.0;

	mode = floor(lambda);
	pmode = exp(-lambda + mode * log(lambda) - lgamma(mode + 1.0));
	sum = pmode * block_fpr(mode, log_miss);

	/*
	 * Upward: past 2 * lambda the weights fall at least geometrically by half
	 * and block_fpr <= 1, so the rest of the tail is below 2p.
	 */
	p = pmode;
	for (j = mode + 1.0;; j += 1.0)
	{
		p *= lambda / j;
		sum += p * block_fpr(j, log_miss);
		if (p == 0.0 || (j > 2.0 * lambda + 1.0 && p <= sum * 1e-17))
			break;
	}

	/* downward: both the weights and block_fpr shrink, so stop when small */
	p = pmode;
	for (j = mode - 1.0; j >= 0.0; j -= 1.0)
	{
		double		term;

		p *= (j + 1.0) / lambda;
		term = p * block_fpr(j, log_miss);
		sum += term;
		if (p == 0.0 || term <= sum * 1e-17)
			break;
	}

	return sum;
}

/* The fewest blocks that reach fpr for capacity keys. */
static AmqStatus
blocked_plan(AmqFilter *f, uint64_t capacity, double fpr)
{
	double		n = (double) (capacity > 0 ? capacity : 1);
	uint64_t	lo = 1;
	uint64_t	hi = BLOCKED_MAX_BLOCKS;
	double		guess;

	if (!(fpr > 0.0 && fpr < 1.0))
		return AMQ_ERR_PARAM;

	if (blocked_model_fpr(n / (double) hi) > fpr)
		return AMQ_ERR_TOO_LARGE;

	/*
	 * Smallest nblocks meeting the target; the model falls as nblocks grows.
	 * Bracket it first, doubling from a standard Bloom filter's size (which
	 * a blocked one never undercuts by much), so that small filters, such as
	 * one per group of a GROUP BY, take a few evaluations instead of a
	 * search over every possible size.
	 */
	guess = ceil(n * log(1.0 / fpr) / (M_LN2 * M_LN2) / 256.0);
	if (guess < (double) hi)
	{
		uint64_t	b = guess < 1.0 ? 1 : (uint64_t) guess;

		while (b < hi && blocked_model_fpr(n / (double) b) > fpr)
		{
			lo = b + 1;
			b = (b > hi / 2) ? hi : b * 2;
		}
		hi = b;
	}
	while (lo < hi)
	{
		uint64_t	mid = lo + (hi - lo) / 2;

		if (blocked_model_fpr(n / (double) mid) <= fpr)
			hi = mid;
		else
			lo = mid + 1;
	}

	f->param[0] = lo;
	f->param[1] = 0;
	f->param[2] = 0;
	f->payload_len = lo * AMQ_BLOCKED_BLOCK_BYTES;
	return AMQ_OK;
}

/* Validate a blocked filter's parameters against its payload. */
static AmqStatus
blocked_check(const AmqFilter *f)
{
	uint64_t	nblocks = f->param[0];

	if (nblocks < 1 || nblocks > BLOCKED_MAX_BLOCKS)
		return AMQ_ERR_CORRUPT;
	if (f->payload_len != nblocks * AMQ_BLOCKED_BLOCK_BYTES)
		return AMQ_ERR_CORRUPT;
	if (f->param[1] != 0 || f->param[2] != 0)
		return AMQ_ERR_CORRUPT;
	return AMQ_OK;
}

const uint32_t amq_blocked_bits[32] = {
	UINT32_C(1) << 0, UINT32_C(1) << 1, UINT32_C(1) << 2, UINT32_C(1) << 3,
	UINT32_C(1) << 4, UINT32_C(1) << 5, UINT32_C(1) << 6, UINT32_C(1) << 7,
	UINT32_C(1) << 8, UINT32_C(1) << 9, UINT32_C(1) << 10, UINT32_C(1) << 11,
	UINT32_C(1) << 12, UINT32_C(1) << 13, UINT32_C(1) << 14, UINT32_C(1) << 15,
	UINT32_C(1) << 16, UINT32_C(1) << 17, UINT32_C(1) << 18, UINT32_C(1) << 19,
	UINT32_C(1) << 20, UINT32_C(1) << 21, UINT32_C(1) << 22, UINT32_C(1) << 23,
	UINT32_C(1) << 24, UINT32_C(1) << 25, UINT32_C(1) << 26, UINT32_C(1) << 27,
	UINT32_C(1) << 28, UINT32_C(1) << 29, UINT32_C(1) << 30, UINT32_C(1) << 31
};

#ifdef AMQ_BLOCKED_HAVE_AVX2
/* Does this CPU have AVX2 (amq_blocked_probe)?  Set as the library loads. */
bool		amq_blocked_avx2 = false;

static void __attribute__((constructor))
blocked_detect_avx2(void)
{
	__builtin_cpu_init();
	amq_blocked_avx2 = __builtin_cpu_supports("avx2");
}

/*
 * amq_blocked_insert_run with AVX2: a block is one 256-bit register, and a
 * key's eight bits are one multiply by the eight salts, a shift and a
 * variable shift of ones, OR-ed into it: five instructions per key instead
 * of eight table lookups.
 */
__attribute__((target("avx2")))
static void
blocked_fill_avx2(uint8_t *payload, uint64_t nblocks,
				  const uint64_t *hashes, size_t n)
{
	size_t		i = 0;

	while (i < n)
	{
		uint64_t	block = amq_blocked_block(hashes[i], nblocks);
		__m256i    *b = (__m256i *) (payload + block * AMQ_BLOCKED_BLOCK_BYTES);
		__m256i		acc = _mm256_loadu_si256(b);

		do
		{
			acc = _mm256_or_si256(acc, amq_blocked_bits_avx2((uint32_t) hashes[i]));
			i++;
		} while (i < n && amq_blocked_block(hashes[i], nblocks) == block);
		_mm256_storeu_si256(b, acc);
	}
}
#endif

/*
 * Add n (seeded) hashes, sorted ascending (so that blocks come in order,
 * though any order gives the same bytes), to a payload of nblocks blocks:
 * with AVX2 where the CPU has it, else amq_blocked_insert_run.  A chunk of
 * AMQ_POLL_KEYS at a time (a block the chunks share is read and written
 * once more).
 */
void
amq_blocked_fill(uint8_t *payload, uint64_t nblocks,
				 const uint64_t *hashes, size_t n)
{
	for (size_t i = 0; i < n; i += AMQ_POLL_KEYS)
	{
		size_t		m = amq_poll_chunk_end(i, n) - i;

#ifdef AMQ_BLOCKED_HAVE_AVX2
		if (amq_blocked_avx2)
			blocked_fill_avx2(payload, nblocks, hashes + i, m);
		else
#endif
			amq_blocked_insert_run(payload, nblocks, hashes + i, m);
		amq_poll();
	}
}

/*
 * Where in hashes[lo..n), ascending, the keys of the blocks before block
 * "end" stop.  block(h) >= end exactly when h >> 32 is at least
 * ceil(end * 2^32 / nblocks) (end < 2^32, as is every block count).
 */
static size_t
blocked_run_stop(const uint64_t *hashes, size_t lo, size_t n,
				 uint64_t end, uint64_t nblocks)
{
	uint64_t	top = ((end << 32) + nblocks - 1) / nblocks;

	if (top >> 32)
		return n;
	return lo + amq_lower_bound(hashes + lo, n - lo, top << 32);
}

/*
 * The runs of one segment of blocks: run r's keys there are
 * runs[r][from[r]..to[r]).
 */
typedef struct FillSegment
{
	const uint64_t *const *runs;
	const size_t *from;
	const size_t *to;
} FillSegment;

/*
 * Does a run before run r hold hash?  Only the segment's keys need a look:
 * the same hash is in the same block.  Not inlined: it is the rare case of
 * a fill's loop.
 */
__attribute__((noinline)) static bool
blocked_held_before(const FillSegment *seg, int r, uint64_t hash)
{
	for (int s = 0; s < r; s++)
	{
		const uint64_t *x = seg->runs[s] + seg->from[s];
		size_t		n = seg->to[s] - seg->from[s];
		size_t		i = amq_lower_bound_near(x, n, hash);

		if (i < n && x[i] == hash)
			return true;
	}
	return false;
}

/*
 * Add the ascending hashes x[0..n) of run r and count those that a run
 * before it holds (when check).  A key whose bits were all set before it
 * went in is looked up in the earlier runs: a key an earlier run holds
 * always is one (it set the same bits in the same block first), and so is
 * about one key in a hundred or fewer (the filter's rate at the time).
 * Without AVX2 as amq_blocked_insert_run: a block's keys OR-ed in registers.
 */
static size_t
blocked_fill_slice_scalar(uint8_t *payload, uint64_t nblocks,
						  const uint64_t *x, size_t n, bool check,
						  const FillSegment *seg, int r)
{
	size_t		held = 0;
	size_t		i = 0;

	while (i < n)
	{
		uint64_t	block = amq_blocked_block(x[i], nblocks);
		uint8_t    *b = payload + block * AMQ_BLOCKED_BLOCK_BYTES;
		uint32_t	w[8];

		for (int j = 0; j < 8; j++)
			w[j] = amq_load32(b + 4 * j);
		do
		{
			uint32_t	lo = (uint32_t) x[i];
			uint32_t	bit[8] = {
				AMQ_BLOCKED_BIT_TABLE(lo, AMQ_BLOCKED_SALT0),
				AMQ_BLOCKED_BIT_TABLE(lo, AMQ_BLOCKED_SALT1),
				AMQ_BLOCKED_BIT_TABLE(lo, AMQ_BLOCKED_SALT2),
				AMQ_BLOCKED_BIT_TABLE(lo, AMQ_BLOCKED_SALT3),
				AMQ_BLOCKED_BIT_TABLE(lo, AMQ_BLOCKED_SALT4),
				AMQ_BLOCKED_BIT_TABLE(lo, AMQ_BLOCKED_SALT5),
				AMQ_BLOCKED_BIT_TABLE(lo, AMQ_BLOCKED_SALT6),
				AMQ_BLOCKED_BIT_TABLE(lo, AMQ_BLOCKED_SALT7)};
			uint32_t	miss = 0;

			for (int j = 0; j < 8; j++)
			{
				miss |= bit[j] & ~w[j];
				w[j] |= bit[j];
			}
			if (check && __builtin_expect(miss == 0, 0))
				held += blocked_held_before(seg, r, x[i]);
			i++;
		} while (i < n && amq_blocked_block(x[i], nblocks) == block);
		for (int j = 0; j < 8; j++)
			amq_store32(b + 4 * j, w[j]);
	}
	return held;
}

#ifdef AMQ_BLOCKED_HAVE_AVX2
/*
 * blocked_fill_slice_scalar with AVX2.  Three stretches of the run go in
 * side by side, each key's block read, OR-ed and written back: three chains
 * that do not wait on one another.  With a block's keys OR-ed in a register
 * instead, as amq_blocked_fill does, the end of each block mispredicts,
 * which costs more than the load and store where a run puts a few keys in
 * a block (three runs of 3.3 x 10^6 keys in 4.1 x 10^5 blocks: 12.5 ms,
 * against 19 a block at a time, on an AMD EPYC).
 */

/* one key of blocked_fill_slice_avx2 */
#define BLOCKED_FILL_KEY(h) \
	do { \
		uint64_t	h_ = (h); \
		__m256i    *b_ = (__m256i *) amq_blocked_at(payload, nblocks, h_); \
		__m256i		bit_ = amq_blocked_bits_avx2((uint32_t) h_); \
		__m256i		old_ = _mm256_loadu_si256(b_); \
		\
		if (check && __builtin_expect(_mm256_testc_si256(old_, bit_), 0)) \
			held += blocked_held_before(seg, r, h_); \
		_mm256_storeu_si256(b_, _mm256_or_si256(old_, bit_)); \
	} while (0)

__attribute__((target("avx2"), always_inline))
static inline size_t
blocked_fill_slice_avx2(uint8_t *payload, uint64_t nblocks,
						const uint64_t *x, size_t n, bool check,
						const FillSegment *seg, int r)
{
	size_t		third = n / 3;
	const uint64_t *x1 = x + third;
	const uint64_t *x2 = x + 2 * third;
	size_t		held = 0;

	for (size_t i = 0; i < third; i++)
	{
		BLOCKED_FILL_KEY(x[i]);
		BLOCKED_FILL_KEY(x1[i]);
		BLOCKED_FILL_KEY(x2[i]);
	}
	for (size_t i = 3 * third; i < n; i++)
		BLOCKED_FILL_KEY(x[i]);
	return held;
}

__attribute__((target("avx2")))
static size_t
blocked_fill_runs_avx2(uint8_t *payload, uint64_t nblocks,
					   const FillSegment *seg, int nruns)
{
	size_t		held = 0;

	for (int r = 0; r < nruns; r++)
	{
		const uint64_t *x = seg->runs[r] + seg->from[r];
		size_t		n = seg->to[r] - seg->from[r];

		if (r == 0)
			blocked_fill_slice_avx2(payload, nblocks, x, n, false, seg, r);
		else
			held += blocked_fill_slice_avx2(payload, nblocks, x, n, true, seg, r);
	}
	return held;
}
#endif

/*
 * Fill several runs, each ascending and distinct (a key may be in several
 * runs): a segment of blocks at a time, every run's keys of it in turn, so
 * that the segment stays in cache while the runs go in.  Returns how many
 * keys a run held that a run before it also held: the runs' union holds
 * their total length less that many.  The same bytes as adding every key of
 * every run.  At most AMQ_BLOCKED_FILL_MAX_RUNS runs.
 */
size_t
amq_blocked_fill_runs(uint8_t *payload, uint64_t nblocks,
					  const uint64_t *const *runs, const size_t *lens,
					  int nruns)
{
	size_t		from[AMQ_BLOCKED_FILL_MAX_RUNS] = {0};
	size_t		to[AMQ_BLOCKED_FILL_MAX_RUNS];
	FillSegment seg = {runs, from, to};
	uint64_t	end = 0;
	size_t		held = 0;

	if (nruns == 1)
	{
		amq_blocked_fill(payload, nblocks, runs[0], lens[0]);
		return 0;
	}
	while (end < nblocks)
	{
		amq_poll();
		end += AMQ_BLOCKED_FILL_SEGMENT;
		for (int r = 0; r < nruns; r++)
			to[r] = blocked_run_stop(runs[r], from[r], lens[r], end, nblocks);
#ifdef AMQ_BLOCKED_HAVE_AVX2
		if (amq_blocked_avx2)
			held += blocked_fill_runs_avx2(payload, nblocks, &seg, nruns);
		else
#endif
			for (int r = 0; r < nruns; r++)
				held += blocked_fill_slice_scalar(payload, nblocks,
												  runs[r] + from[r],
												  to[r] - from[r], r > 0,
												  &seg, r);
		for (int r = 0; r < nruns; r++)
			from[r] = to[r];
	}
	return held;
}

/* Set the key's bits in its block. */
static AmqStatus
blocked_add(AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);

	amq_blocked_insert(amq_blocked_at(f->payload, f->param[0], h),
					   (uint32_t) h);
	return AMQ_OK;
}

/* Are all the key's bits set in its block? */
static bool
blocked_contains(const AmqFilter *f, uint64_t hash)
{
	uint64_t	h = amq_seeded(f, hash);

	return amq_blocked_probe(amq_blocked_at(f->payload, f->param[0], h),
							 (uint32_t) h);
}

/* The one block a probe reads. */
static void
blocked_probe_span(const AmqFilter *f, uint64_t hash,
				   uint64_t *offset, uint32_t *length)
{
	uint64_t	h = amq_seeded(f, hash);

	*offset = amq_blocked_block(h, f->param[0]) * AMQ_BLOCKED_BLOCK_BYTES;
	*length = AMQ_BLOCKED_BLOCK_BYTES;
}

/* Probe the key's block, read apart from the filter. */
static bool
blocked_contains_span(const AmqFilter *f, uint64_t hash, const uint8_t *span)
{
	return amq_blocked_probe(span, (uint32_t) amq_seeded(f, hash));
}

/*
 * Each key sets one bit per word, so a word is a 32-bin linear counter:
 * pc set bits suggest ln(1 - pc/32) / ln(31/32) keys.  The eight words of a
 * block estimate the same count; their mean is the block's estimate.
 */
static void
blocked_stats(const AmqFilter *f, AmqStats *st)
{
	uint64_t	nblocks = f->param[0];
	double		keys_for_pc[33];
	double		fpr_sum = 0.0;
	double		distinct = 0.0;
	uint64_t	ones = 0;
	uint64_t	b;
	int			pc;

	for (pc = 0; pc < 32; pc++)
		keys_for_pc[pc] = log(1.0 - pc / 32.0) / log(31.0 / 32.0);
	/* a full word says only "many": count it as half a bit short of full */
	keys_for_pc[32] = log(0.5 / 32.0) / log(31.0 / 32.0);

	for (b = 0; b < nblocks; b++)
	{
		const uint8_t *block = f->payload + b * AMQ_BLOCKED_BLOCK_BYTES;
		double		prod = 1.0;
		double		keys = 0.0;
		int			i;

		for (i = 0; i < 8; i++)
		{
			pc = __builtin_popcount(amq_load32(block + 4 * i));
			ones += (uint64_t) pc;
			prod *= pc / 32.0;
			keys += keys_for_pc[pc];
		}
		fpr_sum += prod;
		distinct += keys / 8.0;
	}

	st->fill = (double) ones / (256.0 * (double) nblocks);
	st->est_fpr = fpr_sum / (double) nblocks;
	st->est_distinct = distinct;
	st->k = 8;
	st->fingerprint_bits = 0;
}

const AmqKindOps amq_blocked_ops = {
	.name = "blocked",
	.id = AMQ_KIND_BLOCKED,
	.caps = AMQ_CAP_ADD | AMQ_CAP_UNION | AMQ_CAP_INTERSECT | AMQ_CAP_SLICE,
	.plan = blocked_plan,
	.check = blocked_check,
	.add = blocked_add,
	.build = NULL,
	.remove = NULL,
	.contains = blocked_contains,
	.probe_span = blocked_probe_span,
	.contains_span = blocked_contains_span,
	.merge = amq_bitarray_merge,
	.stats = blocked_stats,
};
