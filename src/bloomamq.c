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
 * method's options (amqidx.c) and hash-join pre-filters (amq_join.c), and
 * gives the filter core's long passes the server's interrupt check.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "fmgr.h"
#include "miscadmin.h"

#include "amq_join.h"
#include "amqidx.h"
#include "core.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/*
 * The core's poll (core.h): a query cancel, statement_timeout or terminate
 * ends a sort or build of any size.  A no-op in a critical section or
 * while interrupts are held (under a buffer lock, say).
 */
static void
poll_interrupts(void)
{
	CHECK_FOR_INTERRUPTS();
}

/* Module load: set up the index reloptions, the join pre-filters, the poll. */
void
_PG_init(void)
{
	AmqIdxInit();
	AmqJoinInit();
	amq_poll_hook = poll_interrupts;
}
