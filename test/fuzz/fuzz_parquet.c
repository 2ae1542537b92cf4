/*-------------------------------------------------------------------------
 *
 * fuzz_parquet.c
 *	  libFuzzer harness of the Parquet import (amq_from_parquet):
 *	  amq_parquet_input(), which takes a bare bitset or a whole Parquet
 *	  bloom filter (its Thrift compact-protocol BloomFilterHeader, then the
 *	  bitset), and amq_parquet_describe() on arbitrary bytes.  The first
 *	  byte picks the column's key family and width; the rest is the input.
 *	  What is accepted must be a bitset inside the input, all of it or all
 *	  after a valid header, and must make a filter that the input gate
 *	  accepts (or it could not be dumped and restored) and that behaves like
 *	  any blocked filter.  What is refused must say why.
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
	const uint8_t *input = data + 1;
	size_t		input_len;
	size_t		len;
	uint8_t    *buf;
	AmqParquetInput in;
	AmqFilter	f;
	AmqFilter	g;
	AmqStatus	st;
	int			c;

	if (size < 1)
		return 0;
	c = data[0] % (sizeof(columns) / sizeof(columns[0]));
	input_len = size - 1;
	st = amq_parquet_input(input, input_len, &in);
	if (st != AMQ_OK)
	{
		FUZZ_CHECK(st == AMQ_ERR_CORRUPT || st == AMQ_ERR_UNSUPPORTED,
				   "refused with %s", amq_status_message(st));
		FUZZ_CHECK(in.detail[0] != '\0' &&
				   memchr(in.detail, '\0', sizeof(in.detail)) != NULL,
				   "refused without a reason");
		/* a bitset's length is refused only after a complete header */
		FUZZ_CHECK(!amq_parquet_bitset_ok(input_len) || in.whole,
				   "bitset of %zu bytes refused: %s", input_len, in.detail);
		FUZZ_CHECK(st != AMQ_ERR_UNSUPPORTED || in.whole,
				   "unsupported without a header: %s", in.detail);
		FUZZ_CHECK(!in.whole || in.header_like, "a header not header-like");
		return 0;
	}
	len = in.bitset_len;
	FUZZ_CHECK(amq_parquet_bitset_ok(len), "bitset of %zu bytes accepted", len);
	if (in.whole)
	{
		const AmqParquetHeader *h = &in.header;

		FUZZ_CHECK(h->header_len > 0 && h->header_len + len == input_len &&
				   in.bitset == input + h->header_len &&
				   h->num_bytes == (int64_t) len,
				   "whole filter: header of %zu bytes, numBytes %lld, bitset of %zu of %zu bytes",
				   h->header_len, (long long) h->num_bytes, len, input_len);
		FUZZ_CHECK(h->algorithm == 1 && h->hash == 1 && h->compression == 1 &&
				   h->algorithm_plain && h->hash_plain && h->compression_plain,
				   "whole filter of algorithm %d, hash %d, compression %d",
				   h->algorithm, h->hash, h->compression);
	}
	else
		FUZZ_CHECK(in.bitset == input && len == input_len,
				   "bare bitset of %zu of %zu bytes", len, input_len);

	buf = fuzz_malloc(AMQ_HEADER_SIZE + len);
	memset(&f, 0, sizeof(f));
	f.kind = AMQ_KIND_BLOCKED;
	f.payload_len = len;
	f.key_family = columns[c].family;
	f.key_type = columns[c].key_type;
	f.payload = buf + AMQ_HEADER_SIZE;
	memcpy(f.payload, in.bitset, len);
	amq_parquet_describe(&f);
	amq_write_header(&f, buf);

	st = amq_parse(buf, AMQ_HEADER_SIZE + len, &g);
	FUZZ_CHECK(st == AMQ_OK, "imported bitset of %zu bytes: %s", len,
			   amq_status_message(st));
	fuzz_exercise(&g, buf, AMQ_HEADER_SIZE + len);
	free(buf);
	return 0;
}
