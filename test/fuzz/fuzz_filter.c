/*-------------------------------------------------------------------------
 *
 * fuzz_filter.c
 *	  libFuzzer harness of amq_parse(), the gate that binary receive and the
 *	  bytea cast pass their bytes through (AmqFilterFromBytes), and of each
 *	  kind's check, probe, stats, merge, add and remove on what it accepts.
 *
 * The bytes are tried as they are, then with their checksum made right,
 * so that mutations reach the header and parameter checks and the kinds.
 *
 *-------------------------------------------------------------------------
 */
#include "fuzz_common.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	AmqFilter	f;
	uint8_t    *buf;

	if (amq_parse(data, size, &f) == AMQ_OK)
		fuzz_exercise(&f, data, size);
	if (size < AMQ_HEADER_SIZE)
		return 0;

	buf = fuzz_malloc(size);
	memcpy(buf, data, size);
	fuzz_fix_checksum(buf, size);
	if (amq_parse(buf, size, &f) == AMQ_OK)
		fuzz_exercise(&f, buf, size);
	free(buf);
	return 0;
}
