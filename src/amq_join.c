/*-------------------------------------------------------------------------
 *
 * amq_join.c
 *	  Automatic hash-join pre-filters: the settings and the planner side.
 *
 * With bloomamq.join_prefilter = on, a hash join builds an AMQ filter of
 * its inner side's join keys and drops, below the join, the outer rows
 * whose keys the filter says are surely absent: they are never hashed,
 * probed, or written to a batch file.  Rows that pass still go through the
 * exact join, so the result is the plan's own.
 *
 * No patched server: a planner_hook post-processes the finished plan.  For
 * each HashJoin where dropping non-matching outer rows is correct (inner,
 * semi and right joins; never anti joins or the preserved side of LEFT and
 * FULL joins) it inserts two pass-through CustomScans (amq_join_exec.c):
 *
 *	HashJoin
 *	  -> prefilter		drops outer rows that cannot match
 *		   -> outer child
 *	  -> Hash
 *		   -> collector	hashes every inner row's keys; builds the filter
 *				-> inner child		when its child is exhausted
 *
 * MultiExecHash reads the whole inner side before the join probes any
 * outer row, also for multi-batch joins, so the filter is complete before
 * it is used; until then (a hash join may fetch one outer row before it
 * builds its table) rows pass unfiltered.
 *
 * Not applied:
 *	- under Parallel Hash: each worker sees only part of the inner side, so
 *	  a worker-local filter would drop rows that match another worker's
 *	  part.  A parallel-oblivious Hash (each worker builds the whole inner
 *	  side) is fine, in workers or the leader.
 *	- to keys the canonical hash (amq_hashing.c) does not follow: the
 *	  equality operator must be in the default hash operator family of both
 *	  key types, both keys in one key family (int4 = int8 is, date =
 *	  timestamp is not), strict, and text keys under a deterministic
 *	  collation.
 *	- when the planner expects fewer outer rows than
 *	  bloomamq.join_prefilter_min_rows.
 *
 * Where the outer side is a Gather, the prefilter sits above it (in the
 * leader): rows still cross the Gather.  Applying the filter in the
 * workers would need the filter shared before they start scanning.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include <limits.h>

#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "amq_join.h"
#include "amq_hashing.h"

static int	amq_join_prefilter = AMQ_JOIN_PREFILTER_OFF;
static int	amq_join_prefilter_min_rows = 10000;

static const struct config_enum_entry prefilter_options[] = {
	{"off", AMQ_JOIN_PREFILTER_OFF, false},
	{"on", AMQ_JOIN_PREFILTER_ON, false},
	{"true", AMQ_JOIN_PREFILTER_ON, true},
	{"false", AMQ_JOIN_PREFILTER_OFF, true},
	{"yes", AMQ_JOIN_PREFILTER_ON, true},
	{"no", AMQ_JOIN_PREFILTER_OFF, true},
	{"1", AMQ_JOIN_PREFILTER_ON, true},
	{"0", AMQ_JOIN_PREFILTER_OFF, true},
	{NULL, 0, false}
};

static planner_hook_type prev_planner_hook = NULL;

/* state of one walk over a finished plan */
typedef struct PrefilterWalk
{
	int			last_filter_id;
	int			last_plan_node_id;
} PrefilterWalk;

typedef void (*PlanSlotFn) (Plan **slot, void *arg);

/*
 * Call fn on the address of each child plan of plan, so that fn can put a
 * node between plan and that child.
 */
static void
walk_children(Plan *plan, PlanSlotFn fn, void *arg)
{
	List	   *list = NIL;
	ListCell   *lc;

	if (plan->lefttree)
		fn(&plan->lefttree, arg);
	if (plan->righttree)
		fn(&plan->righttree, arg);

	switch (nodeTag(plan))
	{
		case T_Append:
			list = ((Append *) plan)->appendplans;
			break;
		case T_MergeAppend:
			list = ((MergeAppend *) plan)->mergeplans;
			break;
		case T_BitmapAnd:
			list = ((BitmapAnd *) plan)->bitmapplans;
			break;
		case T_BitmapOr:
			list = ((BitmapOr *) plan)->bitmapplans;
			break;
		case T_CustomScan:
			list = ((CustomScan *) plan)->custom_plans;
			break;
		case T_SubqueryScan:
			fn(&((SubqueryScan *) plan)->subplan, arg);
			break;
		default:
			break;
	}
	foreach(lc, list)
		fn((Plan **) &lfirst(lc), arg);
}

/* Walker: the largest plan_node_id in the plan, into *arg. */
static void
find_max_node_id(Plan **slot, void *arg)
{
	int		   *max = (int *) arg;

	*max = Max(*max, (*slot)->plan_node_id);
	walk_children(*slot, find_max_node_id, arg);
}

/*
 * Is the equality operator opno, between keys of types ltype and rtype
 * under collation coll, one whose equal values the canonical hash maps to
 * equal hashes?
 */
static bool
key_pair_supported(Oid opno, Oid coll, Oid ltype, Oid rtype)
{
	Oid			types[2] = {getBaseType(ltype), getBaseType(rtype)};
	AmqKeyHasher h[2];
	int			i;

	if (!op_strict(opno))
		return false;
	/* equal strings with other bytes: their hashes would differ */
	if (OidIsValid(coll) && !get_collation_isdeterministic(coll))
		return false;

	for (i = 0; i < 2; i++)
	{
		TypeCacheEntry *tce;

		/*
		 * The operator must be the types' default hash equality: other hash
		 * families (a case-insensitive one, say) may call values equal whose
		 * canonical hashes differ.  Every type the canonical hash supports
		 * has a default hash family with an extended hash function, so
		 * AmqHasherInit below cannot fail.
		 */
		tce = lookup_type_cache(types[i], TYPECACHE_HASH_OPFAMILY |
								TYPECACHE_HASH_EXTENDED_PROC);
		if (!OidIsValid(tce->hash_opf) ||
			!OidIsValid(tce->hash_extended_proc) ||
			!op_in_opfamily(opno, tce->hash_opf))
			return false;
		AmqHasherInit(&h[i], types[i], coll, CurrentMemoryContext);
	}

	/* int4 = int8 hash alike; date = timestamp and other pairs do not */
	if (h[0].family != h[1].family)
		return false;
	if (h[0].family == AMQ_FAMILY_OTHER && h[0].key_type != h[1].key_type)
		return false;
	return true;
}

/* Can hj's keys be pre-filtered: hashed canonically, alike on both sides? */
static bool
keys_supported(HashJoin *hj, Hash *hash)
{
	ListCell   *lo,
			   *li,
			   *lop,
			   *lcoll;

	if (hj->hashkeys == NIL ||
		list_length(hj->hashkeys) != list_length(hash->hashkeys) ||
		list_length(hj->hashkeys) != list_length(hj->hashoperators) ||
		list_length(hj->hashkeys) != list_length(hj->hashcollations))
		return false;

	/* the nodes evaluate the keys once more: no side effects, no subplans */
	if (contain_volatile_functions((Node *) hj->hashkeys) ||
		contain_volatile_functions((Node *) hash->hashkeys) ||
		contain_subplans((Node *) hj->hashkeys) ||
		contain_subplans((Node *) hash->hashkeys))
		return false;

	forfour(lo, hj->hashkeys, li, hash->hashkeys,
			lop, hj->hashoperators, lcoll, hj->hashcollations)
	{
		if (!key_pair_supported(lfirst_oid(lop), lfirst_oid(lcoll),
								exprType(lfirst(lo)), exprType(lfirst(li))))
			return false;
	}
	return true;
}

/*
 * A CustomScan that returns child's tuples as they are.  Its scan tuple is
 * described by custom_scan_tlist (OUTER_VAR references to the child's
 * targetlist) and its targetlist references that by INDEX_VAR, so EXPLAIN
 * VERBOSE deparses through to the child and the executor needs no
 * projection.
 */
static CustomScan *
make_pass_through(const CustomScanMethods *methods, Plan *child, List *keys,
				  List *ints, List *collations, int plan_node_id)
{
	CustomScan *cscan = makeNode(CustomScan);
	Plan	   *plan = &cscan->scan.plan;
	ListCell   *lc;

	foreach(lc, child->targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		cscan->custom_scan_tlist =
			lappend(cscan->custom_scan_tlist,
					makeTargetEntry((Expr *) makeVarFromTargetEntry(OUTER_VAR, tle),
									tle->resno, tle->resname, tle->resjunk));
		plan->targetlist =
			lappend(plan->targetlist,
					makeTargetEntry((Expr *) makeVarFromTargetEntry(INDEX_VAR, tle),
									tle->resno, tle->resname, tle->resjunk));
	}

	/* one hash and, for the prefilter, one probe per row */
	plan->startup_cost = child->startup_cost;
	plan->total_cost = child->total_cost +
		cpu_operator_cost * list_length(keys) * child->plan_rows;
	plan->plan_rows = child->plan_rows;
	plan->plan_width = child->plan_width;
	plan->parallel_aware = false;
	plan->parallel_safe = child->parallel_safe;
	plan->plan_node_id = plan_node_id;
	plan->lefttree = child;
	plan->extParam = bms_copy(child->extParam);
	plan->allParam = bms_copy(child->allParam);

	cscan->scan.scanrelid = 0;
	cscan->flags = 0;
	cscan->custom_exprs = copyObject(keys);
	cscan->custom_private = list_make2(ints, list_copy(collations));
	cscan->methods = methods;
	return cscan;
}

/* Put the collector over hj's inner child, the pre-filter over its outer. */
static void
add_prefilter(HashJoin *hj, PrefilterWalk *w)
{
	Hash	   *hash = (Hash *) innerPlan(hj);
	Plan	   *outer = outerPlan(hj);
	List	   *ints;
	int			id;

	if (hash == NULL || !IsA(hash, Hash) || outer == NULL ||
		outerPlan(hash) == NULL)
		return;

	/* only where an outer row that matches no inner row is not emitted */
	switch (hj->join.jointype)
	{
		case JOIN_INNER:
		case JOIN_SEMI:
		case JOIN_RIGHT:
			break;
		default:
			return;
	}

	/* Parallel Hash: a worker sees only part of the inner side */
	if (hj->join.plan.parallel_aware || hash->plan.parallel_aware)
		return;

	if (outer->plan_rows < amq_join_prefilter_min_rows)
		return;
	if (!keys_supported(hj, hash))
		return;

	id = ++w->last_filter_id;
	ints = list_make2_int(id, !bms_is_empty(hash->plan.allParam));
	outerPlan(hash) = (Plan *)
		make_pass_through(&amq_collector_scan_methods, outerPlan(hash),
						  hash->hashkeys, ints, hj->hashcollations,
						  ++w->last_plan_node_id);
	outerPlan(hj) = (Plan *)
		make_pass_through(&amq_prefilter_scan_methods, outer,
						  hj->hashkeys, list_copy(ints), hj->hashcollations,
						  ++w->last_plan_node_id);
}

/* bottom-up, so that a node inserted here is never visited again */
static void
add_prefilters(Plan **slot, void *arg)
{
	walk_children(*slot, add_prefilters, arg);
	if (IsA(*slot, HashJoin))
		add_prefilter((HashJoin *) *slot, (PrefilterWalk *) arg);
}

/* planner_hook: plan as usual, then add pre-filters to the hash joins. */
static PlannedStmt *
amq_join_planner(Query *parse, const char *query_string, int cursorOptions,
				 ParamListInfo boundParams AMQ_PLANNER_ES_PARAM)
{
	PlannedStmt *stmt;
	PrefilterWalk w = {0, -1};
	ListCell   *lc;

	if (prev_planner_hook)
		stmt = prev_planner_hook(parse, query_string, cursorOptions,
								 boundParams AMQ_PLANNER_ES_ARG);
	else
		stmt = standard_planner(parse, query_string, cursorOptions,
								boundParams AMQ_PLANNER_ES_ARG);

	if (amq_join_prefilter == AMQ_JOIN_PREFILTER_OFF ||
		stmt->commandType == CMD_UTILITY || stmt->planTree == NULL)
		return stmt;

	/* new nodes need plan_node_ids of their own (parallel instrumentation) */
	find_max_node_id(&stmt->planTree, &w.last_plan_node_id);
	foreach(lc, stmt->subplans)
	{
		if (lfirst(lc))
			find_max_node_id((Plan **) &lfirst(lc), &w.last_plan_node_id);
	}

	add_prefilters(&stmt->planTree, &w);
	foreach(lc, stmt->subplans)
	{
		if (lfirst(lc))
			add_prefilters((Plan **) &lfirst(lc), &w);
	}
	return stmt;
}

/* Define bloomamq.join_prefilter and install the planner hook. */
void
AmqJoinInit(void)
{
	DefineCustomEnumVariable("bloomamq.join_prefilter",
							 "Pre-filters the outer side of hash joins with a filter of the inner side's keys.",
							 "Outer rows whose join keys are surely not among the inner side's are dropped below the join; the result is unchanged.",
							 &amq_join_prefilter,
							 AMQ_JOIN_PREFILTER_OFF,
							 prefilter_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("bloomamq.join_prefilter_min_rows",
							"Fewest estimated outer rows for which a hash join gets a pre-filter.",
							NULL,
							&amq_join_prefilter_min_rows,
							10000, 0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("bloomamq");

	AmqJoinExecInit();

	prev_planner_hook = planner_hook;
	planner_hook = amq_join_planner;
}
