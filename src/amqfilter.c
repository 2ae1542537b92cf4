/*-------------------------------------------------------------------------
 *
 * amqfilter.c
 *	  The amqfilter type's I/O: text and binary input and output, and the
 *	  bytea cast.
 *
 * Every way bytes enter as a filter (text input, binary receive, the bytea
 * cast, aggregate deserialization) runs amq_parse(): one validation, in
 * pure C, shared by all of them and fuzzed as it ships (test/fuzz).  A stored filter
 * has passed it, so reading one back only decodes the header.  The helpers
 * that make, read and check filters for every SQL function are in
 * amq_bridge.c.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"

#include "amqfilter.h"

PG_FUNCTION_INFO_V1(amqfilter_in);
PG_FUNCTION_INFO_V1(amqfilter_out);
PG_FUNCTION_INFO_V1(amqfilter_recv);
PG_FUNCTION_INFO_V1(amqfilter_send);
PG_FUNCTION_INFO_V1(amq_from_bytea);

/*
 * The bytes whose padded base64 is str, the text form of a value of type
 * typname (amqfilter, amqaggstate), in *n; an ERROR if it is not base64.
 */
uint8 *
AmqBase64Input(const char *str, const char *typname, size_t *n)
{
	size_t		len = strlen(str);
	uint8	   *buf = palloc(len / 4 * 3 + 1);

	if (!amq_base64_decode(str, len, buf, n))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type %s", typname),
				 errdetail("The text form of an %s is its bytes in padded base64.", typname)));
	return buf;
}

/* Text form: base64 of the serialized filter. */
Datum
amqfilter_in(PG_FUNCTION_ARGS)
{
	size_t		n;
	uint8	   *buf = AmqBase64Input(PG_GETARG_CSTRING(0), "amqfilter", &n);
	struct varlena *v;

	v = AmqFilterFromBytes(buf, n, ERRCODE_INVALID_TEXT_REPRESENTATION);
	pfree(buf);
	PG_RETURN_POINTER(v);
}

/*
 * Text output: base64 of the serialized filter.  Also amqaggstate's: a
 * value's bytes, whatever they hold.
 */
Datum
amqfilter_out(PG_FUNCTION_ARGS)
{
	struct varlena *v = PG_GETARG_VARLENA_PP(0);
	size_t		len = VARSIZE_ANY_EXHDR(v);
	char	   *out = palloc(amq_base64_encoded_len(len) + 1);
	size_t		n = amq_base64_encode((const uint8 *) VARDATA_ANY(v), len, out);

	out[n] = '\0';
	PG_RETURN_CSTRING(out);
}

/* Binary input: the bytes, validated like any other input. */
Datum
amqfilter_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	struct varlena *v;

	v = AmqFilterFromBytes((const uint8 *) buf->data + buf->cursor,
						   buf->len - buf->cursor,
						   ERRCODE_INVALID_BINARY_REPRESENTATION);
	buf->cursor = buf->len;
	PG_RETURN_POINTER(v);
}

/* Binary output: the bytes of the serialized filter (and of an amqaggstate). */
Datum
amqfilter_send(PG_FUNCTION_ARGS)
{
	struct varlena *v = PG_GETARG_VARLENA_PP(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendbytes(&buf, VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

/* bytea -> amqfilter: validated like any other input. */
Datum
amq_from_bytea(PG_FUNCTION_ARGS)
{
	bytea	   *b = PG_GETARG_BYTEA_PP(0);

	PG_RETURN_POINTER(AmqFilterFromBytes((const uint8 *) VARDATA_ANY(b),
										 VARSIZE_ANY_EXHDR(b),
										 ERRCODE_INVALID_BINARY_REPRESENTATION));
}
