/*-------------------------------------------------------------------------
 *
 * fuzz_parquet.c
 *	  libFuzzer harness of the Parquet bitset import (amq_from_parquet):
 *	  amq_parquet_bitset_ok() and amq_parquet_describe() on arbitrary
 *	  bytes.  The first byte picks the column's key family and width; the
 *	  rest is the bitset.  An accepted bitset must make a filter that the
 *	  input gate accepts (or it could not be dumped and restored) and that
 *	  behaves like any blocked filter.
 *
 *-------------------------------------------------------------------------
 */
#include "fuzz_common.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the key fields amq_from_parquet takes from its column_type */
	static const struct
	{
		uint8_t		family;
		uint32_t	key_type;
	}			columns[] = {
		{AMQ_FAMILY_NONE, 0}, {AMQ_FAMILY_INT, 4}, {AMQ_FAMILY_INT, 8},
		{AMQ_FAMILY_FLOAT, 4}, {AMQ_FAMILY_FLOAT, 8}, {AMQ_FAMILY_TEXT, 0},
		{AMQ_FAMILY_BYTEA, 0}, {AMQ_FAMILY_UUID, 0}, {AMQ_FAMILY_DATE, 0},
		{AMQ_FAMILY_TIMESTAMP, 0}, {AMQ_FAMILY_TIMESTAMPTZ, 0},
	};
	size_t		len;
	uint8_t    *buf;
	AmqFilter	f;
	AmqFilter	g;
	AmqStatus	st;
	int			c;

	if (size < 1)
		return 0;
	c = data[0] % (sizeof(columns) / sizeof(columns[0]));
	len = size - 1;
	if (!amq_parquet_bitset_ok(len))
	{
		FUZZ_CHECK(len < 32 || len % 32 != 0, "bitset of %zu bytes refused", len);
		return 0;
	}

	buf = fuzz_malloc(AMQ_HEADER_SIZE + len);
	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_BLOCKED;
	f.payload_len = len;
	f.key_family = columns[c].family;
	f.key_type = columns[c].key_type;
	f.payload = buf + AMQ_HEADER_SIZE;
	memcpy(f.payload, data + 1, len);
	amq_parquet_describe(&f);
	amq_write_header(&f, buf);

	st = amq_parse(buf, AMQ_HEADER_SIZE + len, &g);
	FUZZ_CHECK(st == AMQ_OK, "imported bitset of %zu bytes: %s", len,
			   amq_status_message(st));
	fuzz_exercise(&g, buf, AMQ_HEADER_SIZE + len);
	free(buf);
	return 0;
}
