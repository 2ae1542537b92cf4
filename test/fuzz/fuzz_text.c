/*-------------------------------------------------------------------------
 *
 * fuzz_text.c
 *	  libFuzzer harness of the text input path (amqfilter_in): the strict
 *	  base64 decoder into a buffer of the documented size, then amq_parse().
 *
 * A decoded text must encode back to the same characters (one text form
 * per filter, so text I/O round-trips exactly).  Decoded bytes are also
 * tried with their checksum made right, to reach the filter checks.
 *
 *-------------------------------------------------------------------------
 */
#include "fuzz_common.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *) data;
	/* amq_base64_decode's contract: room for len / 4 * 3 bytes, no more */
	uint8_t    *buf = fuzz_malloc(size / 4 * 3);
	size_t		n = SIZE_MAX;
	AmqFilter	f;

	if (!amq_base64_decode(text, size, buf, &n))
	{
		free(buf);
		return 0;
	}
	FUZZ_CHECK(n <= size / 4 * 3, "decoded %zu bytes from %zu", n, size);
	{
		char	   *again = fuzz_malloc(amq_base64_encoded_len(n));
		size_t		m = amq_base64_encode(buf, n, again);

		FUZZ_CHECK(m == size && memcmp(again, text, size) == 0,
				   "text of %zu characters does not round-trip", size);
		free(again);
	}

	if (amq_parse(buf, n, &f) == AMQ_OK)
		fuzz_exercise(&f, buf, n);
	if (n >= AMQ_HEADER_SIZE)
	{
		fuzz_fix_checksum(buf, n);
		if (amq_parse(buf, n, &f) == AMQ_OK)
			fuzz_exercise(&f, buf, n);
	}
	free(buf);
	return 0;
}
