/*-------------------------------------------------------------------------
 *
 * fuzz_aggstate.c
 *	  libFuzzer harness of the aggregate state's ways in: the amqaggstate
 *	  type's binary input (and the internal state's deserialize function),
 *	  amq_state_parse() on arbitrary bytes; and its text input, the bytes
 *	  taken as base64 and decoded first.
 *
 * An accepted filter-mode state's filter is driven through its kind's
 * operations; an accepted buffer-mode state's hashes are sorted,
 * deduplicated and built into a filter of the state's kind, as the final
 * function does, and every hash must then be found.  Filter-mode bytes are
 * also tried with the embedded filter's checksum made right.
 *
 *-------------------------------------------------------------------------
 */
#include "fuzz_common.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

/* Build the state's filter from its hashes, like the final function. */
static void
build_from_buffer(const AmqStateHeader *h)
{
	const AmqKindOps *ops = amq_kind_ops(h->kind);
	AmqAllocator alloc = {alloc_cb, free_cb, NULL};
	uint64_t   *hashes = fuzz_malloc(8 * h->nhashes);
	uint64_t   *scratch = fuzz_malloc(8 * h->nhashes);
	size_t		n;
	uint64_t	capacity;
	AmqFilter	f;
	AmqStatus	st = AMQ_OK;
	uint8_t    *buf = NULL;
	size_t		len = 0;

	for (size_t i = 0; i < h->nhashes; i++)
		hashes[i] = amq_load64(h->body + 8 * i);
	n = amq_sort_unique(hashes, h->nhashes, scratch);
	for (size_t i = 1; i < n; i++)
		FUZZ_CHECK(hashes[i - 1] < hashes[i], "sort_unique order at %zu", i);

	capacity = n > 0 ? n : 1;
	if ((uint64_t) h->capacity > capacity)
		capacity = (uint64_t) h->capacity;
	/* a capacity far past the keys only makes a large empty filter */
	if (capacity > 1024)
		goto done;

	for (int attempt = 0; attempt < 4; attempt++)
	{
		st = amq_plan(&f, h->kind, capacity, h->fpr);
		if (st != AMQ_OK)
			goto done;			/* a rate the kind cannot reach: an ERROR */
		/* large payloads (rates near 0) cost time and find nothing new */
		if (f.payload_len > 65536)
			goto done;
		f.key_family = h->key_family;
		f.hash_scheme = h->hash_scheme;
		f.key_type = h->key_type;
		len = AMQ_HEADER_SIZE + (size_t) f.payload_len;
		free(buf);
		buf = fuzz_malloc(len);
		memset(buf, 0, len);
		f.payload = buf + AMQ_HEADER_SIZE;
		if (ops->caps & AMQ_CAP_STATIC)
			st = ops->build(&f, hashes, n, &alloc);
		else
			for (size_t i = 0; i < n && st == AMQ_OK; i++)
				st = ops->add(&f, hashes[i]);
		if (st != AMQ_ERR_FULL)
			break;
		capacity += capacity / 4 + 1;
	}
	if (st == AMQ_ERR_FULL || st == AMQ_ERR_BUILD_FAILED)
		goto done;				/* reported as an ERROR, nothing lost */
	FUZZ_CHECK(st == AMQ_OK, "%s build: %s", ops->name, amq_status_message(st));
	for (size_t i = 0; i < n; i++)
		FUZZ_CHECK(ops->contains(&f, hashes[i]), "%s built without hash %zu",
				   ops->name, i);
	f.nkeys = n;
	amq_write_header(&f, buf);
	{
		AmqFilter	g;
		AmqStatus	pst = amq_parse(buf, len, &g);

		FUZZ_CHECK(pst == AMQ_OK, "%s built from a state: %s", ops->name,
				   amq_status_message(pst));
		fuzz_exercise(&g, buf, len);
	}
done:
	free(buf);
	free(hashes);
	free(scratch);
}

static void
try_state(const uint8_t *data, size_t size)
{
	AmqStateHeader h;
	AmqFilter	f;
	const char *why;
	AmqStatus	st = amq_state_parse(data, size, &h, &f, &why);

	if (st != AMQ_OK)
	{
		FUZZ_CHECK(why != NULL || h.mode == AMQ_STATE_FILTER,
				   "a buffer state failed without a reason");
		return;
	}
	FUZZ_CHECK(h.body == data + AMQ_STATE_HEADER &&
			   h.body_len == size - AMQ_STATE_HEADER, "state body");
	if (h.mode == AMQ_STATE_FILTER)
		fuzz_exercise(&f, h.body, h.body_len);
	else
		build_from_buffer(&h);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t    *buf;
	size_t		n;

	try_state(data, size);

	/* amqaggstate_in: padded base64 of the bytes, then the same checks */
	buf = fuzz_malloc(size / 4 * 3 + 1);
	if (amq_base64_decode((const char *) data, size, buf, &n))
		try_state(buf, n);
	free(buf);

	if (size < AMQ_STATE_HEADER + AMQ_HEADER_SIZE || data[1] != AMQ_STATE_FILTER)
		return 0;
	buf = fuzz_malloc(size);
	memcpy(buf, data, size);
	fuzz_fix_checksum(buf + AMQ_STATE_HEADER, size - AMQ_STATE_HEADER);
	try_state(buf, size);
	free(buf);
	return 0;
}
