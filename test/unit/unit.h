/*-------------------------------------------------------------------------
 *
 * unit.h
 *	  The harness of the C unit tests of the filter core.
 *
 * Every check prints "ok - <name>" or "not ok - <name> (details)"; lines
 * starting with "#" are information (timings).  main() (test_kinds.c) ends
 * with "N passed, N failed".  Each kind's own tests live in
 * test_<kind>.c as one entry point, test_<kind>(), called from main().
 *
 *-------------------------------------------------------------------------
 */
#ifndef UNIT_H
#define UNIT_H

#include "core.h"

/* keys added and keys never added: disjoint, as amq_mix64 is a bijection */
#define KEY_BASE	UINT64_C(0x1234567800000000)
#define NEG_BASE	UINT64_C(0x9876543200000000)

extern int	npassed;
extern int	nfailed;

/* Report one check; fmt (or NULL) describes the failure. */
extern void check(bool cond, const char *name, const char *fmt,...)
			__attribute__((format(printf, 3, 4)));
extern double now_sec(void);

/* the i-th key hash that is added, and the i-th that never is */
extern uint64_t key_in(uint64_t i);
extern uint64_t key_out(uint64_t i);

extern void *xcalloc(size_t n, size_t size);

/* plan a filter and allocate its zeroed payload (calloc) */
extern AmqStatus make_filter(const AmqKindOps *ops, AmqFilter *f,
							 uint64_t capacity, double fpr, uint64_t seed);
extern void free_filter(AmqFilter *f);
/* f's bytes (header and payload) in a new buffer of *len bytes (free) */
extern uint8_t *serialize_filter(const AmqFilter *f, size_t *len);
/* buf's version byte set (its checksum rewritten), then amq_parse */
extern AmqStatus parse_as_version(uint8_t *buf, size_t len, int version,
								  AmqFilter *out);
extern void copy_filter(AmqFilter *dst, const AmqFilter *src);

/* dynamic kinds: add key_in(from..to-1); count those contains() misses */
extern void add_range(const AmqKindOps *ops, AmqFilter *f, uint64_t from,
					  uint64_t to);
extern uint64_t count_missing(const AmqKindOps *ops, const AmqFilter *f,
							  uint64_t from, uint64_t to);

/*
 * Checks written for the dynamic Bloom-style kinds (bloom, blocked):
 * 10^6 keys at fpr, bits per key at 1%, plan edge cases, union and
 * intersection, stats of empty and full payloads.
 */
extern void test_accuracy(const AmqKindOps *ops, double fpr, uint64_t seed);
extern void test_bits_per_key(const AmqKindOps *ops, uint64_t n, double limit);
extern void test_plan_edges(const AmqKindOps *ops);
extern void test_merge(const AmqKindOps *ops);
extern void test_stats_edges(const AmqKindOps *ops);

/* per-kind entry points, each in test_<kind>.c */
extern void test_twobit(void) __attribute__((weak));
extern void test_counting(void) __attribute__((weak));
extern void test_cuckoo(void) __attribute__((weak));
extern void test_scalable(void) __attribute__((weak));
extern void test_xor(void) __attribute__((weak));
extern void test_fuse(void) __attribute__((weak));
extern void test_ribbon(void) __attribute__((weak));
extern void test_state(void) __attribute__((weak));
extern void test_parquet(void) __attribute__((weak));
extern void test_union(void) __attribute__((weak));
extern void test_poll(void) __attribute__((weak));

#endif							/* UNIT_H */
