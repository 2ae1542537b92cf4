/*-------------------------------------------------------------------------
 *
 * bloomamq.c
 *	  Module entry point of bloomamq: approximate membership query filters
 *	  (the Bloom family) for PostgreSQL.
 *
 * Layout: the filter kinds and their format are pure C (core.h,
 * core_format.c, core_parquet.c, kind_*.c); the SQL layer over them is its
 * bridge to the core (amq_bridge.c), the type's I/O (amqfilter.c), probes
 * (amq_probe.c), functions (amq_funcs.c), Parquet (amq_parquet.c),
 * aggregates (amq_agg.c) and canonical key hashing (amq_hashing.c).
 * _PG_init sets up each subsystem that needs it: the amq index access
 * method's options (amqidx.c) and hash-join pre-filters (amq_join.c).
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "fmgr.h"

#include "amq_join.h"
#include "amqidx.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Module load: set up the index reloptions and the join pre-filters. */
void
_PG_init(void)
{
	AmqIdxInit();
	AmqJoinInit();
}
