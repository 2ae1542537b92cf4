/*-------------------------------------------------------------------------
 *
 * core_kinds.c
 *	  The registry of filter kinds: every kind is one ops table, found here
 *	  by its on-disk id or its SQL name.
 *
 *-------------------------------------------------------------------------
 */
#include "core.h"

/* see amq_poll(): set by the server, NULL in the unit tests but their own */
void		(*amq_poll_hook) (void) = NULL;

static const AmqKindOps *const amq_kinds[] = {
	&amq_bloom_ops,
	&amq_blocked_ops,
	&amq_twobit_ops,
	&amq_counting_ops,
	&amq_cuckoo_ops,
	&amq_scalable_ops,
	&amq_xor_ops,
	&amq_fuse_ops,
	&amq_ribbon_ops,
};

#define AMQ_NKINDS (sizeof(amq_kinds) / sizeof(amq_kinds[0]))

/* The ops of kind id, or NULL. */
const AmqKindOps *
amq_kind_ops(int id)
{
	for (size_t i = 0; i < AMQ_NKINDS; i++)
		if (amq_kinds[i]->id == id)
			return amq_kinds[i];
	return NULL;
}

/* The ops of the kind named name, or NULL. */
const AmqKindOps *
amq_kind_by_name(const char *name)
{
	for (size_t i = 0; i < AMQ_NKINDS; i++)
		if (strcmp(amq_kinds[i]->name, name) == 0)
			return amq_kinds[i];
	return NULL;
}

/*
 * Comma-separated names of the kinds having all of "caps" (0: every kind),
 * for error hints.  The result is a static buffer.
 */
const char *
amq_kind_names(uint32_t caps)
{
	static char buf[256];
	size_t		len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < AMQ_NKINDS; i++)
	{
		const char *name = amq_kinds[i]->name;
		size_t		n = strlen(name);

		if ((amq_kinds[i]->caps & caps) != caps)
			continue;
		if (len + n + 3 >= sizeof(buf))
			break;
		if (len > 0)
		{
			memcpy(buf + len, ", ", 2);
			len += 2;
		}
		memcpy(buf + len, name, n);
		len += n;
		buf[len] = '\0';
	}
	return buf;
}
