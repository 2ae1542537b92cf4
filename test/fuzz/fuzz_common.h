/*-------------------------------------------------------------------------
 *
 * fuzz_common.h
 *	  What the libFuzzer harnesses of bloomamq share.
 *
 * Each harness feeds arbitrary bytes to one input path of the shipped
 * filter core (src/core_format.c and the kinds) and, when the bytes are
 * accepted, drives the accepted filter through every operation its kind
 * offers, checking the promises the SQL layer relies on: probes, slices
 * and stats stay inside the payload, added keys are always found (no
 * false negatives), and whatever the kinds write back passes the input
 * gate again byte for byte.  A broken promise aborts, which libFuzzer
 * reports as a crash with the input that caused it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "core.h"

#define FUZZ_CHECK(cond, ...) \
	do { \
		if (!(cond)) \
		{ \
			fprintf(stderr, "invariant failed: %s: ", #cond); \
			fprintf(stderr, __VA_ARGS__); \
			fputc('\n', stderr); \
			abort(); \
		} \
	} while (0)

/* malloc that aborts on failure; never returns NULL, even for 0 bytes */
extern void *fuzz_malloc(size_t size);

/*
 * Store the right checksum in the header of a serialized filter of len
 * bytes (len >= AMQ_HEADER_SIZE), so that mutated bytes get past the
 * checksum test and reach the structural checks behind it.
 */
extern void fuzz_fix_checksum(uint8_t *buf, size_t len);

/*
 * f was accepted by amq_parse() from bytes[0..len): check it and run it
 * through every operation of its kind.
 */
extern void fuzz_exercise(const AmqFilter *f, const uint8_t *bytes, size_t len);

#endif							/* FUZZ_COMMON_H */
