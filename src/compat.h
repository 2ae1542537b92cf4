/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The one place where bloomamq guards on the PostgreSQL version.
 *
 * Built and tested on PostgreSQL 13, 15, 17, 18 and 19 (tools/test --pg all).
 * Each guard below names the major that changed the API and is written from
 * that major's own headers.
 *
 *-------------------------------------------------------------------------
 */
#ifndef AMQ_COMPAT_H
#define AMQ_COMPAT_H

#include "postgres.h"

#include "nodes/nodes.h"

#if PG_VERSION_NUM < 130000
#error "bloomamq requires PostgreSQL 13 or later"
#endif

/* the varlena access macros moved out of postgres.h in 16 */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/* toast pointer size accessor was renamed in 14 */
#if PG_VERSION_NUM >= 140000
#define AMQ_TOAST_EXTSIZE(tp)	VARATT_EXTERNAL_GET_EXTSIZE(tp)
#else
#define AMQ_TOAST_EXTSIZE(tp)	((tp).va_extsize)
#endif

/* reserving a GUC prefix: MarkGUCPrefixReserved from 15, the old name before */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/*
 * Functions that never return: 18 replaced the pg_attribute_noreturn()
 * suffix with a pg_noreturn prefix.  Before 18 the same GCC attribute works
 * as a prefix, so declarations use the prefix form everywhere.
 */
#if PG_VERSION_NUM < 180000
#define pg_noreturn pg_attribute_noreturn()
#endif

/* ExplainProperty*() moved from explain.h to explain_format.h in 18 */
#if PG_VERSION_NUM >= 180000
#define AMQ_EXPLAIN_FORMAT_H "commands/explain_format.h"
#else
#define AMQ_EXPLAIN_FORMAT_H "commands/explain.h"
#endif

/*
 * Wait event classes (PG_WAIT_EXTENSION) moved from pgstat.h to
 * utils/wait_event.h in 14; pgstat.h stopped including it in 19.
 */
#if PG_VERSION_NUM >= 140000
#define AMQ_WAIT_EVENT_H "utils/wait_event.h"
#else
#define AMQ_WAIT_EVENT_H "pgstat.h"
#endif

/* GetXLogReplayRecPtr() moved from xlog.h to xlogrecovery.h in 15 */
#if PG_VERSION_NUM >= 150000
#define AMQ_XLOGRECOVERY_H "access/xlogrecovery.h"
#else
#define AMQ_XLOGRECOVERY_H "access/xlog.h"
#endif

/* vacuum_delay_point() takes whether it is called from ANALYZE since 18 */
#if PG_VERSION_NUM >= 180000
#define AMQ_VACUUM_DELAY_POINT() vacuum_delay_point(false)
#else
#define AMQ_VACUUM_DELAY_POINT() vacuum_delay_point()
#endif

/* estimate_array_length() takes the PlannerInfo since 17 */
#if PG_VERSION_NUM >= 170000
#define AMQ_ESTIMATE_ARRAY_LENGTH(root, arrayexpr) \
	estimate_array_length((root), (arrayexpr))
#else
#define AMQ_ESTIMATE_ARRAY_LENGTH(root, arrayexpr) \
	estimate_array_length(arrayexpr)
#endif

/*
 * aminsert's indexUnchanged hint arrived in 14: the parameter list between
 * checkUnique and indexInfo.
 */
#if PG_VERSION_NUM >= 140000
#define AMQ_AMINSERT_UNCHANGED_PARAM bool indexUnchanged,
#else
#define AMQ_AMINSERT_UNCHANGED_PARAM
#endif

/*
 * planner_hook and standard_planner() take the EXPLAIN state (NULL outside
 * EXPLAIN) since 19: a trailing parameter, passed through.
 */
#if PG_VERSION_NUM >= 190000
#define AMQ_PLANNER_ES_PARAM , ExplainState *es
#define AMQ_PLANNER_ES_ARG , es
#else
#define AMQ_PLANNER_ES_PARAM
#define AMQ_PLANNER_ES_ARG
#endif

/*
 * Whether a role owns a relation: object_ownercheck() replaced the
 * per-catalog pg_class_ownercheck() in 16.
 */
#if PG_VERSION_NUM >= 160000
#define AMQ_RELATION_OWNERCHECK(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define AMQ_RELATION_OWNERCHECK(relid, roleid) \
	pg_class_ownercheck((relid), (roleid))
#endif

/*
 * Parallel Hash's build barrier phases (executor/hashjoin.h) were renamed in
 * 16, keeping their numbers: the phase in which all participants hash the
 * inner side.
 */
#if PG_VERSION_NUM >= 160000
#define AMQ_PHJ_BUILD_HASH_INNER	PHJ_BUILD_HASH_INNER
#else
#define AMQ_PHJ_BUILD_HASH_INNER	PHJ_BUILD_HASHING_INNER
#endif

/*
 * Hash joins that return inner rows only, each at most once: 16 added RIGHT
 * ANTI joins (the inner rows no outer row matches), 18 RIGHT SEMI joins
 * (those some outer row matches).  An outer row that matches nothing does
 * nothing in either.
 */
static inline bool
amq_join_returns_inner_only(JoinType jointype)
{
#if PG_VERSION_NUM >= 180000
	if (jointype == JOIN_RIGHT_SEMI)
		return true;
#endif
#if PG_VERSION_NUM >= 160000
	if (jointype == JOIN_RIGHT_ANTI)
		return true;
#endif
	return false;
}

/*
 * An index scan counts itself in pg_stat_*_indexes.idx_scan; from 18 also in
 * EXPLAIN ANALYZE's "Index Searches" (IndexScanDescData.instrument).  The
 * caller includes pgstat.h and access/genam.h.
 */
#if PG_VERSION_NUM >= 180000
#define AMQ_COUNT_INDEX_SCAN(scan) \
	do { \
		pgstat_count_index_scan((scan)->indexRelation); \
		if ((scan)->instrument) \
			(scan)->instrument->nsearches++; \
	} while (0)
#else
#define AMQ_COUNT_INDEX_SCAN(scan) pgstat_count_index_scan((scan)->indexRelation)
#endif

/*
 * Whether VACUUM may truncate a table, given its StdRdOptions (or NULL): the
 * vacuum_truncate reloption; from 18, where the table does not set it, the
 * vacuum_truncate setting; 19 keeps the reloption as a pg_ternary.  The
 * caller includes utils/rel.h and commands/vacuum.h.
 */
#if PG_VERSION_NUM >= 190000
#define AMQ_VACUUM_TRUNCATE(opts) \
	((opts) != NULL && (opts)->vacuum_truncate != PG_TERNARY_UNSET ? \
	 (opts)->vacuum_truncate == PG_TERNARY_TRUE : vacuum_truncate)
#elif PG_VERSION_NUM >= 180000
#define AMQ_VACUUM_TRUNCATE(opts) \
	((opts) != NULL && (opts)->vacuum_truncate_set ? \
	 (opts)->vacuum_truncate : vacuum_truncate)
#else
#define AMQ_VACUUM_TRUNCATE(opts) ((opts) == NULL || (opts)->vacuum_truncate)
#endif

/*
 * From 16 an access method that summarizes heap pages, as BRIN does, does
 * not keep updates of its columns from being HOT; the executor passes it
 * the new version of a row a HOT update changed.
 */
#if PG_VERSION_NUM >= 160000
#define AMQ_AM_SET_SUMMARIZING(am) ((am)->amsummarizing = true)
#else
#define AMQ_AM_SET_SUMMARIZING(am) ((void) 0)
#endif

#endif							/* AMQ_COMPAT_H */
