/*-------------------------------------------------------------------------
 *
 * amq_join.h
 *	  Automatic hash-join pre-filters: what the planner side (amq_join.c)
 *	  and the executor nodes (amq_join_exec.c) share.
 *
 *-------------------------------------------------------------------------
 */
#ifndef AMQ_JOIN_H
#define AMQ_JOIN_H

#include "compat.h"

#include "nodes/extensible.h"

/* bloomamq.join_prefilter */
typedef enum AmqJoinPrefilterMode
{
	AMQ_JOIN_PREFILTER_OFF,
	AMQ_JOIN_PREFILTER_ON
} AmqJoinPrefilterMode;

/*
 * The two plan nodes, both CustomScans that pass their child's tuples on
 * unchanged:
 *
 *	collector	between a Hash node and its child: hashes the inner join
 *				keys and builds the filter once the child is exhausted
 *	prefilter	between the HashJoin and its outer child: drops the rows
 *				whose join keys the filter says cannot match
 *
 * custom_exprs holds the key expressions (Vars of OUTER_VAR refer to the
 * child's targetlist, as the HashJoin's and Hash's own hashkeys do);
 * custom_private is a list of an integer list and the hash collations:
 */
#define AMQ_JOIN_PRIV_INTS			0	/* IntList, indexed below */
#define AMQ_JOIN_PRIV_COLLATIONS	1	/* OidList, one per key */

#define AMQ_JOIN_INT_ID				0	/* pairs a prefilter with its collector */
#define AMQ_JOIN_INT_INNER_PARAMS	1	/* the inner side depends on params */
#define AMQ_JOIN_INT_DECISION		2	/* AmqPrefilterDecision */
#define AMQ_JOIN_INT_REMOVE			3	/* expected share of outer rows
										 * removed, per mille; -1 unknown */
#define AMQ_JOIN_INT_PARALLEL		4	/* under Parallel Hash: one shared filter */
#define AMQ_JOIN_INT_JOIN_NODE		5	/* plan_node_id of the HashJoin */
#define AMQ_JOIN_INT_COLLECT_NODE	6	/* plan_node_id of the collector */
#define AMQ_JOIN_INT_INNER_ROWS		7	/* planner's estimate, all participants (the
										 * outer rows, for AMQ_PUSHED_INNER) */
#define AMQ_JOIN_INT_PUSHED			8	/* AmqPrefilterPushed */
#define AMQ_JOIN_INT_OUTER_ROWS		9	/* planner's estimate, per participant (the
										 * inner rows, for AMQ_PUSHED_INNER) */
/* only in the nodes of a filter of the outer side, and skipped ones: */
#define AMQ_JOIN_INT_INNER_DECISION	10	/* AmqInnerDecision */
#define AMQ_JOIN_INT_INNER_REMOVE	11	/* expected share of inner rows
										 * removed, per mille; -1 unknown */
#define AMQ_JOIN_INT_INNER_WHY_ROWS	12	/* the inner rows that decision counted,
										 * all participants */

/* A prefilter pushed down the outer side, and the join's own. */
typedef enum AmqPrefilterPushed
{
	AMQ_PUSHED_NONE,			/* the join's own, no copy below */
	AMQ_PUSHED_COPY,			/* the copy at a node further down */
	AMQ_PUSHED_HAS_COPY,		/* the join's own, with a copy below */
	AMQ_PUSHED_PUBLISHED,		/* a copy below a Gather, of a join above
								 * it: the leader's filter, in shared memory */
	AMQ_PUSHED_INNER,			/* on the inner side, a filter of the outer
								 * keys (AmqOuterCollect) */
	AMQ_PUSHED_INNER_PUBLISHED	/* the same below a Gather on the inner
								 * side, published as AMQ_PUSHED_PUBLISHED */
} AmqPrefilterPushed;

/*
 * Why a prefilter node is there.  A hash join that could be pre-filtered
 * but is not expected to gain gets an AmqPrefilterSkipped node under its
 * Hash, a bare pass-through, so that EXPLAIN can say why (amq_join.c).
 */
typedef enum AmqPrefilterDecision
{
	AMQ_PREFILTER_PLACED,
	AMQ_PREFILTER_SKIPPED_ROWS, /* fewer outer rows than min_rows */
	AMQ_PREFILTER_SKIPPED_COST, /* removes less than min_remove */
	AMQ_PREFILTER_SKIPPED_LARGE,	/* a filter of over AMQ_JOIN_CACHED_KEYS
									 * keys removes less than twice that */
	AMQ_PREFILTER_SKIPPED_UNKNOWN,	/* no estimate of what it removes */
	AMQ_PREFILTER_NONE			/* the join keeps every outer row (anti,
								 * left): only the inner side's reason */
} AmqPrefilterDecision;

/*
 * Why a hash join whose inner side is the larger got no filter of its
 * inner rows (add_inner_prefilter), for EXPLAIN VERBOSE.
 */
typedef enum AmqInnerDecision
{
	AMQ_INNER_NONE,				/* not a candidate: the inner side is not the
								 * larger, or the join or keys do not allow */
	AMQ_INNER_SKIPPED_OUTER,	/* the outer side may read other rows when
								 * read again */
	AMQ_INNER_SKIPPED_ROWS,		/* fewer inner rows than min_rows */
	AMQ_INNER_SKIPPED_UNKNOWN,	/* no statistics of both keys */
	AMQ_INNER_SKIPPED_COST,		/* removes less than min_remove */
	AMQ_INNER_SKIPPED_RATIO		/* fewer than three inner rows per outer */
} AmqInnerDecision;

/*
 * The most inner keys whose filter (1.3 MB at 1%) a probe usually finds in
 * a core's L2 cache.  A larger one misses the cache on most probes, as the
 * hash join's own lookup does, and pays only where it removes at least
 * twice min_remove (docs/joins.md has the measurements).
 */
#define AMQ_JOIN_CACHED_KEYS		1000000

extern const CustomScanMethods amq_prefilter_scan_methods;
extern const CustomScanMethods amq_collector_scan_methods;
extern const CustomScanMethods amq_skipped_scan_methods;
extern const CustomScanMethods amq_outer_collect_scan_methods;

/* settings (amq_join.c), for EXPLAIN */
extern int	amq_join_prefilter_min_rows;
extern double amq_join_prefilter_min_remove;

/* amq_join.c */
extern void AmqJoinInit(void);

/* amq_join_exec.c */
extern void AmqJoinExecInit(void);

#endif							/* AMQ_JOIN_H */
