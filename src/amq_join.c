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
 * semi and right joins, and right semi and right anti joins, which return
 * inner rows only; never anti joins or the preserved side of LEFT and FULL
 * joins) it inserts two pass-through CustomScans (amq_join_exec.c):
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
 * Under Parallel Hash each participant hashes only part of the inner side:
 * both nodes are then parallel-aware, and the filter is one for all of
 * them, in the query's dynamic shared memory, filled concurrently and
 * probed by every participant below the Gather once the build barrier says
 * the inner side is loaded (amq_join_exec.c explains why that suffices).
 * A parallel-oblivious Hash (each process builds the whole inner side) has
 * a filter per process.
 *
 * Push-down (push_down, trace_keys): where the outer keys are columns that
 * a node further down the outer side produces and the nodes in between
 * pass on unchanged without bringing back a dropped row (joins, sorts,
 * subqueries, aggregates grouped by the keys), a copy of the prefilter goes
 * above that node too, usually the fact table's scan.  Below a Gather from
 * a join in the leader, the copy probes the leader's filter, published to
 * the workers in the Gather's shared memory (amq_join_exec.c).
 *
 * The other direction (add_inner_prefilter): where the inner side is much
 * the larger, an AmqOuterCollect reads the outer side first and its keys
 * filter the inner rows before they are hashed.
 *
 * Not applied:
 *	- to keys the canonical hash (amq_hashing.c) does not follow: the
 *	  equality operator must be in the default hash operator family of both
 *	  key types, both keys in one key family (int4 = int8 is, date =
 *	  timestamp is not), strict, and text keys under a deterministic
 *	  collation.
 *
 * Placed only where it is expected to pay (the cost rule, add_prefilter):
 * the planner expects at least bloomamq.join_prefilter_min_rows outer rows,
 * and expects the filter to remove at least
 * bloomamq.join_prefilter_min_remove of them (expected_removed_share),
 * twice that for a filter of over AMQ_JOIN_CACHED_KEYS keys.
 * Elsewhere an AmqPrefilterSkipped node, a bare pass-through, stands on
 * the side with the fewer expected rows, and EXPLAIN VERBOSE shows why the
 * pre-filter was skipped.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include <limits.h>
#include <math.h>

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_statistic.h"
#include "catalog/pg_type.h"
#include "parser/parsetree.h"
#include "port/atomics.h"
#include "utils/syscache.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/typcache.h"

#include "amq_join.h"
#include "amq_hashing.h"

static int	amq_join_prefilter = AMQ_JOIN_PREFILTER_OFF;
int			amq_join_prefilter_min_rows = 10000;
double		amq_join_prefilter_min_remove = 0.3;
static bool amq_join_prefilter_push_down = true;

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
	PlannedStmt *stmt;
	int			last_filter_id;
	int			last_plan_node_id;
	double		parallel_divisor;	/* in a partial plan under a Gather: rows
									 * per participant to rows in all; else 1 */
	Bitmapset  *gather_params;	/* rescan params of the Gathers above */
	bool		under_gather;	/* in a Gather's subtree: in the workers */
	Bitmapset  *fixed_params;	/* set once per execution (find_fixed_params) */
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

/*
 * Rows per participant to rows in all for hash's inner side: a Parallel
 * Hash's is partial, each participant reads a share; a parallel-oblivious
 * Hash reads all of it in each process.
 */
static double
inner_divisor(PrefilterWalk *w, Hash *hash)
{
	return hash->plan.parallel_aware ? w->parallel_divisor : 1.0;
}

static Plan **trace_keys(Plan **slot, AttrNumber *attnos, int nkeys,
						 bool *through_gather, bool *through_group);
static int	key_columns(List *keys, AttrNumber *attnos);

/*
 * The distinct values of column attno of relid by ANALYZE's statistics, and
 * the share of its rows that are null; -1 where there are none.
 */
static double
column_distinct(Oid relid, AttrNumber attno, bool inh, double reltuples,
				double *nullfrac)
{
	HeapTuple	tuple;
	double		stadistinct;

	tuple = SearchSysCache3(STATRELATTINH, ObjectIdGetDatum(relid),
							Int16GetDatum(attno), BoolGetDatum(inh));
	if (!HeapTupleIsValid(tuple))
		return -1;
	stadistinct = ((Form_pg_statistic) GETSTRUCT(tuple))->stadistinct;
	*nullfrac = ((Form_pg_statistic) GETSTRUCT(tuple))->stanullfrac;
	ReleaseSysCache(tuple);
	if (stadistinct == 0)
		return -1;
	return Min(stadistinct > 0 ? stadistinct : -stadistinct * reltuples,
			   reltuples);
}

/*
 * A lower bound on the distinct combinations of values of the ncols columns
 * cols of table relid, from its unique indexes: where an index is unique on
 * (cols, b, ...), each combination of cols has at most distinct(b) * ...
 * rows whose index columns are all not null; where cols include all of an
 * index's columns, every such row is one.  ANALYZE's estimate of a column
 * whose equal values are stored together falls far short (its sample reads
 * whole pages), as for the first column of a primary key (l_orderkey,
 * l_linenumber): 418,863 of 15,000,000 orders in TPC-H's lineitem at scale
 * factor 10, where the bound is 60,000,000 / 7.  0 where no index gives one.
 */
static double
unique_index_distinct(Oid relid, const AttrNumber *cols, int ncols,
					  double reltuples)
{
	Relation	rel;
	List	   *indexes;
	ListCell   *lc;
	double		bound = 0;

	rel = table_open(relid, NoLock);	/* the query has it locked */
	indexes = RelationGetIndexList(rel);
	table_close(rel, NoLock);
	foreach(lc, indexes)
	{
		HeapTuple	tuple = SearchSysCache1(INDEXRELID,
											ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index index;
		bool		shares_col = false;
		double		per_value = 1;
		double		nullfrac = 0;

		if (!HeapTupleIsValid(tuple))
			continue;
		index = (Form_pg_index) GETSTRUCT(tuple);
		if (!index->indisunique || !index->indisvalid ||
			!heap_attisnull(tuple, Anum_pg_index_indpred, NULL))
			per_value = -1;
		for (int i = 0; i < index->indnkeyatts && per_value > 0; i++)
		{
			AttrNumber	col = index->indkey.values[i];
			bool		in_cols = false;
			double		col_nullfrac = 0;
			double		distinct;

			for (int j = 0; j < ncols; j++)
				in_cols |= cols[j] == col;
			/* an expression, or no statistics */
			if (col <= 0 ||
				(distinct = column_distinct(relid, col, false, reltuples,
											&col_nullfrac)) < 1)
				per_value = -1;
			else if (in_cols)
				shares_col = true;
			else
				per_value *= distinct;
			nullfrac += col_nullfrac;
		}
		ReleaseSysCache(tuple);
		if (shares_col && per_value > 0 && nullfrac < 1)
			bound = Max(bound, reltuples * (1 - nullfrac) / per_value);
	}
	list_free(indexes);
	return bound;
}

/*
 * Distinct combinations of the join keys' values among the rows of child,
 * when the planner's statistics can tell: keys (child's output columns
 * keycols) that are columns of one base relation scanned by child or below it, where
 * trace_keys follows them (through joins that keep the columns' values, a
 * Gather, sorts and the like).  Of several keys, the product of their
 * distinct values, as the planner estimates groups without extended
 * statistics, at most the rows; at least what a unique index tells
 * (unique_index_distinct).  The rows are child's: a join below that keeps a
 * share of the scan's rows keeps about that share of each key's rows (a
 * join that repeats rows makes the estimate too high, which errs towards
 * placing nothing).  divisor turns child's rows per participant into rows
 * in all.  Else -1.
 */
static double
key_distinct_at(PrefilterWalk *w, Plan *child, const AttrNumber *keycols,
				int nkeys, double divisor)
{
	double		rows = child->plan_rows * divisor;
	AttrNumber	attnos[INDEX_MAX_KEYS];
	AttrNumber	cols[INDEX_MAX_KEYS];
	bool		through_gather = false;
	bool		through_group = false;	/* rows of groups: no estimate */
	Index		scanrelid;
	RangeTblEntry *rte;
	HeapTuple	tuple;
	double		reltuples;
	double		distinct = 1;
	char		relkind;

	if (nkeys < 1)
		return -1;
	for (int i = 0; i < nkeys; i++)
		if ((attnos[i] = keycols[i]) <= 0)
			return -1;
	child = *trace_keys(&child, attnos, nkeys, &through_gather, &through_group);
	if (through_group)
		return -1;
	switch (nodeTag(child))
	{
		case T_SeqScan:
		case T_IndexScan:
		case T_BitmapHeapScan:
			break;
		default:
			return -1;
	}
	scanrelid = ((Scan *) child)->scanrelid;
	if (scanrelid <= 0 || scanrelid > list_length(w->stmt->rtable))
		return -1;
	for (int i = 0; i < nkeys; i++)
	{
		TargetEntry *tle;
		Var		   *var;

		if (attnos[i] > list_length(child->targetlist))
			return -1;
		tle = list_nth_node(TargetEntry, child->targetlist, attnos[i] - 1);
		var = (Var *) tle->expr;
		if (!IsA(var, Var) || var->varno != scanrelid || var->varattno <= 0)
			return -1;
		cols[i] = var->varattno;
	}
	rte = rt_fetch(scanrelid, w->stmt->rtable);
	if (rte->rtekind != RTE_RELATION)
		return -1;

	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(rte->relid));
	if (!HeapTupleIsValid(tuple))
		return -1;
	reltuples = ((Form_pg_class) GETSTRUCT(tuple))->reltuples;
	relkind = ((Form_pg_class) GETSTRUCT(tuple))->relkind;
	ReleaseSysCache(tuple);
	if (reltuples <= 0)
		return -1;

	for (int i = 0; i < nkeys; i++)
	{
		bool		repeated = false;
		double		nullfrac;
		double		col_distinct;

		for (int j = 0; j < i; j++)
			repeated |= cols[j] == cols[i];
		if (repeated)
			continue;
		col_distinct = column_distinct(rte->relid, cols[i], rte->inh,
									   reltuples, &nullfrac);
		if (col_distinct < 0)
			return -1;
		distinct = Min(distinct * col_distinct, reltuples);
	}
	/* a table's own rows (not its inheritance children's) */
	if (!rte->inh && relkind == RELKIND_RELATION)
		distinct = Max(distinct,
					   unique_index_distinct(rte->relid, cols, nkeys, reltuples));

	/*
	 * The distinct values among the rows the scan keeps, as the planner
	 * estimates groups of a restricted relation: each value has
	 * reltuples / distinct rows, each kept with probability rows / reltuples.
	 */
	rows = Min(rows, reltuples);
	return distinct * (1.0 - pow(1.0 - rows / reltuples,
								 reltuples / distinct));
}

/* key_distinct_at of keys, which refer to child's output as OUTER_VAR. */
static double
key_distinct(PrefilterWalk *w, Plan *child, List *keys, double divisor)
{
	AttrNumber	attnos[INDEX_MAX_KEYS];
	int			nkeys = key_columns(keys, attnos);

	return key_distinct_at(w, child, attnos, nkeys, divisor);
}

/*
 * The share of hj's outer rows that the planner expects to match no inner
 * row, in [0, 1]: what a pre-filter can remove.  inner_distinct is
 * key_distinct of the inner keys (-1 where unknown).
 *
 * A semi join's estimated rows are its matching outer rows.  An inner (and
 * a right) join's rows are its outer rows times the inner rows each meets;
 * dividing by the inner rows per distinct key, where statistics give it,
 * leaves the outer rows that meet any.  Where they do not, an inner side
 * with duplicate keys makes the share look smaller than it is: the rule
 * errs towards placing no pre-filter.  A right join's rows also count the
 * unmatched inner rows, which errs the same way.
 *
 * A right semi or right anti join's rows are inner rows, which say nothing
 * of the outer ones: the share matched is then the distinct inner keys over
 * the distinct outer keys (at most 1), the containment the planner itself
 * assumes for semi joins; without the statistics of both, -1 (unknown).
 */
static double
expected_removed_share(PrefilterWalk *w, HashJoin *hj, Hash *hash,
					   double inner_distinct)
{
	Plan	   *outer = outerPlan(hj);
	double		outer_rows = outer->plan_rows;
	double		join_rows = hj->join.plan.plan_rows;
	double		matched;

	if (outer_rows <= 0)
		return 0;
	if (amq_join_returns_inner_only(hj->join.jointype))
	{
		double		outer_distinct = key_distinct(w, outer, hj->hashkeys,
												  w->parallel_divisor);

		if (inner_distinct < 0 || outer_distinct < 1)
			return -1;
		return 1.0 - Min(inner_distinct / outer_distinct, 1.0);
	}
	if (hj->join.jointype == JOIN_SEMI)
		matched = join_rows;
	else
	{
		double		inner_rows = outerPlan(hash)->plan_rows * inner_divisor(w, hash);
		double		per_key = 1.0;

		if (inner_distinct >= 1 && inner_rows > inner_distinct)
			per_key = inner_rows / inner_distinct;
		matched = join_rows / per_key;
	}
	return 1.0 - Min(matched / outer_rows, 1.0);
}

/* Is plan one of the pass-through nodes this file puts into plans? */
static bool
is_amq_pass_through(Plan *plan)
{
	const CustomScanMethods *m;

	if (!IsA(plan, CustomScan))
		return false;
	m = ((CustomScan *) plan)->methods;
	return m == &amq_prefilter_scan_methods ||
		m == &amq_collector_scan_methods ||
		m == &amq_skipped_scan_methods;
}

/*
 * May rows be dropped from this input of a join (the inner one if
 * inner_side) without changing the join's other output rows?  Yes where the
 * input's rows only ever appear with their own values or not at all: both
 * inputs of an inner join, the outer input of semi and anti joins, the
 * preserved input of a LEFT or RIGHT join, the inner input of right semi
 * and right anti joins.  Never the nullable input of an
 * outer join (a dropped row turns its partners' rows into null-extended
 * ones), nor a FULL join's.
 */
static bool
join_input_filterable(JoinType jointype, bool inner_side)
{
	switch (jointype)
	{
		case JOIN_INNER:
			return true;
		case JOIN_SEMI:
		case JOIN_ANTI:
		case JOIN_LEFT:
			return !inner_side;
		case JOIN_RIGHT:
			return inner_side;
		default:
			/* right semi and anti joins return inner rows, each on its own */
			return amq_join_returns_inner_only(jointype) && inner_side;
	}
}

/*
 * Do the rows of a group of plan (an Agg, Group or Unique) all carry equal
 * keys in the nkeys columns attnos of its child's output?  Yes where every
 * key is a grouping column compared with an equality of its type's default
 * hash family under a deterministic collation (or none): equal values hash
 * alike, so a filter drops either all the rows of a group, and the group
 * with them, or none, and the rows of the groups kept still make the same
 * aggregates.
 */
static bool
grouped_by_keys(Plan *plan, const AttrNumber *attnos, int nkeys)
{
	Plan	   *child = plan->lefttree;
	int			numCols;
	const AttrNumber *cols;
	const Oid  *ops;
	const Oid  *colls;
	int			i;

	switch (nodeTag(plan))
	{
		case T_Agg:
			numCols = ((Agg *) plan)->numCols;
			cols = ((Agg *) plan)->grpColIdx;
			ops = ((Agg *) plan)->grpOperators;
			colls = ((Agg *) plan)->grpCollations;
			break;
		case T_Group:
			numCols = ((Group *) plan)->numCols;
			cols = ((Group *) plan)->grpColIdx;
			ops = ((Group *) plan)->grpOperators;
			colls = ((Group *) plan)->grpCollations;
			break;
		case T_Unique:
			numCols = ((Unique *) plan)->numCols;
			cols = ((Unique *) plan)->uniqColIdx;
			ops = ((Unique *) plan)->uniqOperators;
			colls = ((Unique *) plan)->uniqCollations;
			break;
		default:
			elog(ERROR, "unrecognized grouping node type: %d", (int) nodeTag(plan));
	}

	for (i = 0; i < nkeys; i++)
	{
		TargetEntry *tle;
		TypeCacheEntry *tce;
		int			j;

		for (j = 0; j < numCols; j++)
			if (cols[j] == attnos[i])
				break;
		if (j == numCols ||
			attnos[i] <= 0 || attnos[i] > list_length(child->targetlist))
			return false;
		tle = list_nth_node(TargetEntry, child->targetlist, attnos[i] - 1);
		tce = lookup_type_cache(getBaseType(exprType((Node *) tle->expr)),
								TYPECACHE_HASH_OPFAMILY);
		if (!OidIsValid(tce->hash_opf) || !op_in_opfamily(ops[j], tce->hash_opf))
			return false;
		if (OidIsValid(colls[j]) && !get_collation_isdeterministic(colls[j]))
			return false;
	}
	return true;
}

/*
 * Push-down: follow the nkeys columns attnos of (*slot)'s output down
 * through nodes that pass them on unchanged and drop no row that a dropped
 * row below them would bring back: joins into an input that
 * join_input_filterable allows (not a merge join's inner input), Hash,
 * Sort, Incremental Sort, Material, a subquery scan, this file's own
 * pass-throughs, and an aggregate, Group or Unique whose groups share their
 * keys (grouped_by_keys; no grouping sets).  Through a Gather or Gather
 * Merge only where through_gather is given (the join runs in the leader,
 * whose filter is then published to the workers: amq_join_exec.c), and
 * says so there; through_group, if given, says whether it went through an
 * aggregate, Group or Unique.  Never through an Append, a Limit, a window function or
 * anything else.  Returns the slot of the deepest node reached, attnos
 * changed to the columns of its output; all keys must go the same way.
 */
static Plan **
trace_keys(Plan **slot, AttrNumber *attnos, int nkeys, bool *through_gather,
		   bool *through_group)
{
	for (;;)
	{
		Plan	   *plan = *slot;
		int			side = -1;	/* 0: lefttree, 1: righttree */
		AttrNumber	next[INDEX_MAX_KEYS];
		int			i;

		switch (nodeTag(plan))
		{
			case T_HashJoin:
			case T_MergeJoin:
			case T_NestLoop:
			case T_Hash:
			case T_Sort:
			case T_IncrementalSort:
			case T_Material:
			case T_Group:
			case T_Unique:
			case T_SubqueryScan:
				break;
			case T_Agg:
				if (((Agg *) plan)->groupingSets != NIL)
					return slot;
				break;
			case T_Gather:
			case T_GatherMerge:
				if (through_gather == NULL || *through_gather)
					return slot;
				break;
			case T_CustomScan:
				if (is_amq_pass_through(plan))
					break;
				return slot;
			default:
				return slot;
		}

		for (i = 0; i < nkeys; i++)
		{
			TargetEntry *tle;
			Var		   *var;
			int			s;

			if (attnos[i] <= 0 || attnos[i] > list_length(plan->targetlist))
				return slot;
			tle = list_nth_node(TargetEntry, plan->targetlist, attnos[i] - 1);
			if (!IsA(tle->expr, Var))
				return slot;
			var = (Var *) tle->expr;

			if (IsA(plan, CustomScan))
			{
				/* INDEX_VAR into custom_scan_tlist, OUTER_VAR of the same column */
				if (var->varno != INDEX_VAR)
					return slot;
				s = 0;
			}
			else if (IsA(plan, SubqueryScan))
			{
				/* a column of the subquery's output, by its number */
				if (var->varno != ((Scan *) plan)->scanrelid)
					return slot;
				s = 0;
			}
			else if (var->varno == OUTER_VAR)
				s = 0;
			else if (var->varno == INNER_VAR)
				s = 1;
			else
				return slot;
			if (side >= 0 && s != side)
				return slot;
			side = s;
			next[i] = var->varattno;
		}

		if (IsA(plan, HashJoin) || IsA(plan, MergeJoin) || IsA(plan, NestLoop))
		{
			if (!join_input_filterable(((Join *) plan)->jointype, side == 1))
				return slot;

			/*
			 * A merge join marks and restores positions in its inner input,
			 * which the planner chose because it can: a custom scan put there
			 * cannot.
			 */
			if (IsA(plan, MergeJoin) && side == 1)
				return slot;
		}
		else if (side != 0)
			return slot;
		else if ((IsA(plan, Agg) || IsA(plan, Group) || IsA(plan, Unique)) &&
				 !grouped_by_keys(plan, next, nkeys))
			return slot;

		if (IsA(plan, Gather) || IsA(plan, GatherMerge))
			*through_gather = true;
		if (through_group &&
			(IsA(plan, Agg) || IsA(plan, Group) || IsA(plan, Unique)))
			*through_group = true;
		if (IsA(plan, SubqueryScan))
			slot = &((SubqueryScan *) plan)->subplan;
		else
			slot = side == 0 ? &plan->lefttree : &plan->righttree;
		if (*slot == NULL)
			elog(ERROR, "plan node without the child its target list refers to");
		memcpy(attnos, next, sizeof(AttrNumber) * nkeys);
	}
}

/*
 * Walker: does the inner side read rows that may differ when it is read
 * again (volatile functions, a sample, a limit)?  A rescan would then build
 * another filter from other keys, while rows the first one dropped below
 * could be kept, in a lower join's hash table or a Material, and missed.
 */
static void
find_unstable(Plan **slot, void *arg)
{
	Plan	   *plan = *slot;
	bool	   *unstable = (bool *) arg;

	if (*unstable)
		return;
	if (IsA(plan, SampleScan) || IsA(plan, Limit) ||
		contain_volatile_functions((Node *) plan->qual) ||
		contain_volatile_functions((Node *) plan->targetlist))
	{
		*unstable = true;
		return;
	}
	walk_children(plan, find_unstable, arg);
}

/*
 * The columns of a node's input that keys (plain columns, OUTER_VAR, under
 * binary-compatible relabelings) are, into attnos; -1 if a key is anything
 * else or there are too many.
 */
static int
key_columns(List *keys, AttrNumber *attnos)
{
	ListCell   *lc;
	int			nkeys = 0;

	if (list_length(keys) > INDEX_MAX_KEYS)
		return -1;
	foreach(lc, keys)
	{
		Node	   *key = lfirst(lc);

		while (IsA(key, RelabelType))
			key = (Node *) ((RelabelType *) key)->arg;
		if (!IsA(key, Var) || ((Var *) key)->varno != OUTER_VAR)
			return -1;
		attnos[nkeys++] = ((Var *) key)->varattno;
	}
	return nkeys;
}

/* A copy of keys (see key_columns) as the columns attnos of another input. */
static List *
keys_at_columns(List *keys, const AttrNumber *attnos)
{
	List	   *result = NIL;
	ListCell   *lc;
	int			i = 0;

	foreach(lc, keys)
	{
		Node	   *key = copyObject(lfirst(lc));
		Node	   *var = key;

		while (IsA(var, RelabelType))
			var = (Node *) ((RelabelType *) var)->arg;
		((Var *) var)->varattno = attnos[i++];
		result = lappend(result, key);
	}
	return result;
}

/*
 * Push hj's pre-filter down its outer side, whose keys are the columns
 * attnos of outer's output: put a copy of the prefilter above the deepest
 * node trace_keys reaches, if deeper than outer.  Only where the inner side
 * depends on no parameter, so that the filter never changes while the
 * nodes below read their rows.  Returns whether it did.
 *
 * The join's own prefilter stays: where the copy ran before the filter was
 * complete (a serial hash join may fetch its first outer row, and so build
 * a lower join's table, before it reads its inner side) it still filters;
 * elsewhere it sees rows that passed the same filter, and the runtime check
 * stops it after a sample.
 */
static bool
push_down(HashJoin *hj, Plan **outer_slot, List *ints, PrefilterWalk *w,
		  bool parallel)
{
	AttrNumber	attnos[INDEX_MAX_KEYS];
	Plan	  **target;
	Plan	   *node;
	int			nkeys = key_columns(hj->hashkeys, attnos);
	bool		published = false;

	if (nkeys < 0)
		return false;

	/* a join in the leader may publish its filter to the workers */
	target = trace_keys(outer_slot, attnos, nkeys,
						parallel || w->under_gather ? NULL : &published, NULL);
	if (target == outer_slot)
		return false;

	ints = list_copy(ints);
	lfirst_int(list_nth_cell(ints, AMQ_JOIN_INT_PUSHED)) =
		published ? AMQ_PUSHED_PUBLISHED : AMQ_PUSHED_COPY;
	/* the same keys, as columns of the target's output */
	node = (Plan *) make_pass_through(&amq_prefilter_scan_methods, *target,
									  keys_at_columns(hj->hashkeys, attnos),
									  ints, hj->hashcollations,
									  ++w->last_plan_node_id);
	/* parallel-aware: shared memory, the join's or the published filter */
	node->parallel_aware = parallel || published;
	*target = node;
	return true;
}

/* Does hash's inner side read the same rows each time? (find_unstable) */
static bool
inner_side_stable(Hash *hash)
{
	bool		unstable = false;

	find_unstable(&outerPlan(hash), &unstable);
	return !unstable;
}

/*
 * Walker: the outputs of uncorrelated initPlans (their plans refer to no
 * parameter of another query level), which the executor computes at most
 * once per execution (it marks an initPlan for recomputing only when a
 * parameter it depends on changes), into w->fixed_params.
 */
static void
find_fixed_params(Plan **slot, void *arg)
{
	PrefilterWalk *w = (PrefilterWalk *) arg;
	ListCell   *lc;

	foreach(lc, (*slot)->initPlan)
	{
		SubPlan    *sp = lfirst_node(SubPlan, lc);
		Plan	   *sub = list_nth(w->stmt->subplans, sp->plan_id - 1);
		ListCell   *lp;

		if (sub == NULL || !bms_is_empty(sub->extParam) || sp->parParam != NIL)
			continue;
		foreach(lp, sp->setParam)
			w->fixed_params = bms_add_member(w->fixed_params, lfirst_int(lp));
	}
	walk_children(*slot, find_fixed_params, arg);
}

/*
 * Each outer row is kept (under Parallel Hash, written to temporary files
 * and read back) and its key added to the filter; each inner row removed
 * saves its hashing.  Below about three removed inner rows per outer row
 * the first costs more (on 10M inner rows: 2.5M outer rows, half the inner
 * ones removed, measured 0.86x with parallel plans, 1.0x without; 1.5M
 * outer rows, 70% removed, 1.09x and 1.38x).
 */
#define INNER_REMOVED_PER_OUTER 3

/*
 * Why a hash join's inner side got no filter of its rows, for EXPLAIN
 * VERBOSE: the decision, the share of inner rows expected removed (-1
 * unknown) and the inner rows the rule counted, in all participants (below
 * an aggregate that groups by the keys, the rows it groups).
 */
typedef struct InnerWhy
{
	AmqInnerDecision decision;
	double		remove;
	double		rows;
} InnerWhy;

/*
 * The other direction, for a hash join whose inner side is much the larger
 * (a semi join written `small.k IN (SELECT k FROM big)`, which PostgreSQL
 * before 18 can only run by hashing big; an estimate that put the larger
 * side inside): an AmqOuterCollect above the outer side reads it first and
 * builds a filter of its keys, and an AmqPrefilter on the inner side (down
 * through what trace_keys allows) drops the inner rows that no outer row
 * can meet, before they are hashed.  Correct where an inner row that meets
 * no outer row adds nothing to the result: inner, semi, anti and left
 * joins.  Only where the outer side depends on no parameter (but the
 * outputs of uncorrelated initPlans, computed once: find_fixed_params) and
 * reads the same rows each time (its stored rows are replayed on a rescan,
 * and the hash table, which the join may keep, was built with their
 * filter).  Under Parallel Hash, where each participant reads a part of
 * the outer side and hashes a part of the inner side, the filter is one for
 * all of them, in shared memory: each participant's collector adds its
 * outer keys and waits for the others before any inner row is filtered
 * (amq_join_exec.c).  (A parallel-oblivious hash join under a Gather joins
 * the part of the outer side its process reads with the whole inner side:
 * the process's own outer keys filter its own inner rows.)  Placed where at
 * least min_rows inner rows are expected (below an aggregate that groups by
 * the keys, the rows it groups) and, by the statistics of both
 * keys, a share of the inner rows of at least min_remove meets no outer key
 * (distinct outer over distinct inner keys, the planner's own containment
 * assumption), and where that share is expected to be at least
 * INNER_REMOVED_PER_OUTER inner rows for each outer row.
 * Returns whether it did; then the join gets no outer pre-filter.  Where
 * it did not, *why says why.
 */
static bool
add_inner_prefilter(HashJoin *hj, Hash *hash, PrefilterWalk *w, InnerWhy *why)
{
	Plan	   *outer = outerPlan(hj);
	Plan	   *inner = outerPlan(hash);
	double		outer_distinct;
	double		inner_distinct;
	double		remove;
	bool		found = false;
	AttrNumber	attnos[INDEX_MAX_KEYS];
	int			nkeys = key_columns(hash->hashkeys, attnos);
	Plan	  **target;
	List	   *ints;
	int			id;
	bool		published = false;
	bool		parallel = hj->join.plan.parallel_aware;
	double		divisor = parallel ? w->parallel_divisor : 1.0;
	Bitmapset  *fixed = w->fixed_params;
	double		inner_rows = inner->plan_rows;
	AttrNumber	below_attnos[INDEX_MAX_KEYS];
	Plan	  **below;
	bool		grouped = false;

	why->decision = AMQ_INNER_NONE;
	why->remove = -1;
	why->rows = 0;
	switch (hj->join.jointype)
	{
		case JOIN_INNER:
		case JOIN_SEMI:
		case JOIN_ANTI:
		case JOIN_LEFT:
			break;
		default:
			return false;
	}
	if (nkeys < 0)
		return false;

	/*
	 * The rows the filter would drop: the Hash's input, or, below an
	 * aggregate that groups by the keys (as the planner makes the inner
	 * side of `k IN (SELECT k FROM big)` distinct), the rows it groups,
	 * which may be far more than its groups.  (Not through a Gather here:
	 * above one, the rows it gathers.)
	 */
	memcpy(below_attnos, attnos, sizeof(AttrNumber) * nkeys);
	below = trace_keys(&outerPlan(hash), below_attnos, nkeys, NULL, &grouped);
	if (grouped)
		inner_rows = Max(inner_rows, (*below)->plan_rows);
	if (inner_rows <= outer->plan_rows)
		return false;
	why->rows = inner_rows * divisor;

	/* Parallel Hash: a rescan of the Gather above starts every participant over */
	if (parallel)
		fixed = bms_union(fixed, w->gather_params);
	why->decision = AMQ_INNER_SKIPPED_OUTER;
	if (!bms_is_subset(outer->allParam, fixed))
		return false;
	why->decision = AMQ_INNER_SKIPPED_ROWS;
	if (inner_rows * divisor < amq_join_prefilter_min_rows)
		return false;
	why->decision = AMQ_INNER_SKIPPED_UNKNOWN;
	outer_distinct = key_distinct(w, outer, hj->hashkeys, divisor);
	inner_distinct = grouped ?
		key_distinct_at(w, *below, below_attnos, nkeys, divisor) :
		key_distinct(w, inner, hash->hashkeys, divisor);
	if (outer_distinct < 0 || inner_distinct < 1)
		return false;
	remove = 1.0 - Min(outer_distinct / inner_distinct, 1.0);
	why->remove = remove;
	why->decision = AMQ_INNER_SKIPPED_COST;
	if (remove < Max(amq_join_prefilter_min_remove, 0.0) || remove <= 0)
		return false;
	why->decision = AMQ_INNER_SKIPPED_RATIO;
	if (remove * inner_rows < outer->plan_rows * INNER_REMOVED_PER_OUTER)
		return false;
	why->decision = AMQ_INNER_SKIPPED_OUTER;
	find_unstable(&outerPlan(hj), &found);
	if (found)
		return false;

	/*
	 * The inner keys, as columns of the Hash's child, followed down; into
	 * the workers of a Gather on the inner side: published.
	 */
	target = trace_keys(&outerPlan(hash), attnos, nkeys,
						w->under_gather ? NULL : &published, NULL);

	id = ++w->last_filter_id;
	ints = list_make4_int(id, false, AMQ_PREFILTER_PLACED,
						  (int) rint(remove * 1000));
	ints = lappend_int(ints, parallel);
	ints = lappend_int(ints, hj->join.plan.plan_node_id);
	ints = lappend_int(ints, ++w->last_plan_node_id);	/* the collector */
	ints = lappend_int(ints, (int) Min(outer->plan_rows * divisor, (double) INT_MAX));
	ints = lappend_int(ints, published ? AMQ_PUSHED_INNER_PUBLISHED : AMQ_PUSHED_INNER);
	ints = lappend_int(ints, (int) Min(inner_rows, (double) INT_MAX));

	outerPlan(hj) = (Plan *)
		make_pass_through(&amq_outer_collect_scan_methods, outer,
						  hj->hashkeys, ints, hj->hashcollations,
						  w->last_plan_node_id);
	/* it reads every outer row before returning the first */
	outerPlan(hj)->startup_cost = outer->total_cost;
	/* parallel-aware: the executor gives it shared memory */
	outerPlan(hj)->parallel_aware = parallel;
	*target = (Plan *)
		make_pass_through(&amq_prefilter_scan_methods, *target,
						  keys_at_columns(hash->hashkeys, attnos),
						  list_copy(ints), hj->hashcollations,
						  ++w->last_plan_node_id);
	(*target)->parallel_aware = published;

	/*
	 * Right under the Hash, or under a Gather right under it: the hash
	 * table is sized (buckets, batches) from its child's estimate, now the
	 * rows expected to pass.  It grows if more come, as for any estimate.
	 */
	if (target == &outerPlan(hash))
		(*target)->plan_rows = Max(inner->plan_rows * (1.0 - remove), 1.0);
	else if (published && target == &outerPlan(outerPlan(hash)))
		outerPlan(hash)->plan_rows = Max(inner->plan_rows * (1.0 - remove), 1.0);
	/* a Parallel Hash is sized from all participants' rows */
	if (parallel)
		hash->rows_total = Max(hash->rows_total * (1.0 - remove), 1.0);
	return true;
}

/* The integers of a prefilter's or collector's private list (amq_join.h). */
static List *
prefilter_ints(HashJoin *hj, Hash *hash, PrefilterWalk *w, int id,
			   int collector_node_id, AmqPrefilterDecision decision,
			   double remove, const InnerWhy *inner)
{
	double		inner_rows = outerPlan(hash)->plan_rows * inner_divisor(w, hash);
	List	   *ints;

	ints = list_make4_int(id, !bms_is_empty(hash->plan.allParam), decision,
						  (int) rint(remove * 1000));
	ints = lappend_int(ints, hj->join.plan.parallel_aware);
	ints = lappend_int(ints, hj->join.plan.plan_node_id);
	ints = lappend_int(ints, collector_node_id);
	ints = lappend_int(ints, (int) Min(inner_rows, (double) INT_MAX));
	ints = lappend_int(ints, AMQ_PUSHED_NONE);
	ints = lappend_int(ints, (int) Min(outerPlan(hj)->plan_rows, (double) INT_MAX));
	ints = lappend_int(ints, inner->decision);
	ints = lappend_int(ints, (int) rint(inner->remove * 1000));
	return lappend_int(ints, (int) Min(inner->rows, (double) INT_MAX));
}

/*
 * An AmqPrefilterSkipped node, which says in EXPLAIN why hj got no
 * pre-filter: on the outer side (decision, remove) and, where it was a
 * candidate, on the inner side (inner; a placed outer pre-filter says that
 * too).  It costs a call
 * per row: it goes on the side the planner expects the fewer rows on,
 * usually the inner one (a foreign-key join's dimension), under the Hash.
 */
static void
add_skipped(HashJoin *hj, Hash *hash, PrefilterWalk *w,
			AmqPrefilterDecision decision, double remove, const InnerWhy *inner)
{
	List	   *ints = prefilter_ints(hj, hash, w, 0, 0, decision, remove, inner);
	Plan	  **slot = outerPlan(hj)->plan_rows < outerPlan(hash)->plan_rows ?
		&outerPlan(hj) : &outerPlan(hash);

	*slot = (Plan *)
		make_pass_through(&amq_skipped_scan_methods, *slot, NIL,
						  ints, NIL, ++w->last_plan_node_id);
	/* a bare pass-through: no per-row work to cost */
	(*slot)->total_cost = outerPlan(*slot)->total_cost;
}

/* Put the collector over hj's inner child, the pre-filter over its outer. */
static void
add_prefilter(HashJoin *hj, PrefilterWalk *w)
{
	Hash	   *hash = (Hash *) innerPlan(hj);
	Plan	   *outer = outerPlan(hj);
	List	   *ints;
	int			id;
	int			collector_node_id;
	bool		parallel;
	double		inner_rows;
	double		inner_distinct;
	double		remove;
	AmqPrefilterDecision decision;
	InnerWhy	inner;

	if (hash == NULL || !IsA(hash, Hash) || outer == NULL ||
		outerPlan(hash) == NULL || !keys_supported(hj, hash))
		return;

	/*
	 * Parallel Hash: each participant sees only part of either side, so the
	 * filter (of either side's keys) is one for all of them, in shared
	 * memory, filled with atomic ORs (amq_join_exec.c): that takes 32-bit
	 * atomics that are plain words.
	 */
	parallel = hj->join.plan.parallel_aware;
	if (parallel != hash->plan.parallel_aware)
		return;
	if (parallel && sizeof(pg_atomic_uint32) != sizeof(uint32))
		return;

	/* the larger side inside: its rows filtered by the outer keys */
	if (add_inner_prefilter(hj, hash, w, &inner))
		return;

	/* only where an outer row that matches no inner row is not emitted */
	switch (hj->join.jointype)
	{
		case JOIN_INNER:
		case JOIN_SEMI:
		case JOIN_RIGHT:
			break;
		default:
			if (!amq_join_returns_inner_only(hj->join.jointype))
			{
				/* the inner side's reason, if it was a candidate */
				if (inner.decision != AMQ_INNER_NONE)
					add_skipped(hj, hash, w, AMQ_PREFILTER_NONE, -1, &inner);
				return;
			}
			break;
	}

	/*
	 * The cost rule.  A probe (a hash, one cache line of a filter much
	 * smaller than the hash table) costs a fraction of the hash join's own
	 * lookup of a row that finds nothing, and collecting the inner keys about
	 * a probe per inner row: a pre-filter pays where it removes a good share
	 * of many outer rows (min_remove, a judgment: docs/joins.md), twice that
	 * where the filter outgrows the cache (AMQ_JOIN_CACHED_KEYS).  Where it is not expected to, an
	 * AmqPrefilterSkipped node that only passes rows on says why in EXPLAIN.
	 * The runtime check (amq_join_exec.c) still stops a placed pre-filter
	 * that removes too little.
	 */
	inner_rows = outerPlan(hash)->plan_rows * inner_divisor(w, hash);
	inner_distinct = key_distinct(w, outerPlan(hash), hash->hashkeys,
								  inner_divisor(w, hash));
	remove = expected_removed_share(w, hj, hash, inner_distinct);
	if (outer->plan_rows * w->parallel_divisor < amq_join_prefilter_min_rows)
		decision = AMQ_PREFILTER_SKIPPED_ROWS;
	else if (amq_join_prefilter_min_remove <= 0)
		decision = AMQ_PREFILTER_PLACED;
	else if (remove < 0)
		decision = AMQ_PREFILTER_SKIPPED_UNKNOWN;
	else if (remove < amq_join_prefilter_min_remove)
		decision = AMQ_PREFILTER_SKIPPED_COST;
	else if (remove < 2 * amq_join_prefilter_min_remove &&
			 (inner_distinct >= 0 ? inner_distinct : inner_rows) > AMQ_JOIN_CACHED_KEYS)
		decision = AMQ_PREFILTER_SKIPPED_LARGE;
	else
		decision = AMQ_PREFILTER_PLACED;

	if (decision != AMQ_PREFILTER_PLACED)
	{
		add_skipped(hj, hash, w, decision, remove, &inner);
		return;
	}

	id = ++w->last_filter_id;
	collector_node_id = ++w->last_plan_node_id;
	ints = prefilter_ints(hj, hash, w, id, collector_node_id, decision, remove,
						  &inner);

	outerPlan(hash) = (Plan *)
		make_pass_through(&amq_collector_scan_methods, outerPlan(hash),
						  hash->hashkeys, ints, hj->hashcollations,
						  collector_node_id);
	outerPlan(hj) = (Plan *)
		make_pass_through(&amq_prefilter_scan_methods, outer,
						  hj->hashkeys, list_copy(ints), hj->hashcollations,
						  ++w->last_plan_node_id);

	/* parallel-aware: the executor gives them shared memory */
	outerPlan(hash)->parallel_aware = parallel;
	outerPlan(hj)->parallel_aware = parallel;

	/*
	 * A Gather's rescan parameter changes only when the Gather runs again,
	 * when everything below it starts over.
	 */
	if (amq_join_prefilter_push_down &&
		bms_is_subset(hash->plan.allParam, w->gather_params) &&
		inner_side_stable(hash) &&
		push_down(hj, &outerPlan(outerPlan(hj)), ints, w, parallel))
	{
		CustomScan *own = (CustomScan *) outerPlan(hj);

		lfirst_int(list_nth_cell(linitial(own->custom_private),
								 AMQ_JOIN_INT_PUSHED)) = AMQ_PUSHED_HAS_COPY;
	}
}

/*
 * Rows per participant to rows in all, for a Gather of nworkers: the
 * planner's own divisor (the leader does less the more workers there are).
 */
static double
parallel_divisor(int nworkers)
{
	double		divisor = nworkers;

	if (parallel_leader_participation && 1.0 - 0.3 * nworkers > 0)
		divisor += 1.0 - 0.3 * nworkers;
	return Max(divisor, 1.0);
}

/* bottom-up, so that a node inserted here is never visited again */
static void
add_prefilters(Plan **slot, void *arg)
{
	PrefilterWalk *w = (PrefilterWalk *) arg;
	double		saved = w->parallel_divisor;
	Bitmapset  *saved_params = w->gather_params;
	bool		saved_under = w->under_gather;

	/* partial plans estimate the rows of one participant */
	if (IsA(*slot, Gather) || IsA(*slot, GatherMerge))
		w->under_gather = true;
	if (IsA(*slot, Gather))
	{
		w->parallel_divisor = parallel_divisor(((Gather *) *slot)->num_workers);
		if (((Gather *) *slot)->rescan_param >= 0)
			w->gather_params = bms_add_member(bms_copy(w->gather_params),
											  ((Gather *) *slot)->rescan_param);
	}
	else if (IsA(*slot, GatherMerge))
	{
		w->parallel_divisor = parallel_divisor(((GatherMerge *) *slot)->num_workers);
		if (((GatherMerge *) *slot)->rescan_param >= 0)
			w->gather_params = bms_add_member(bms_copy(w->gather_params),
											  ((GatherMerge *) *slot)->rescan_param);
	}

	/*
	 * A parallel-oblivious Hash, and the inner side of the other joins, read
	 * all their rows in each process: not a partial plan.
	 */
	if (IsA(*slot, Hash) && !(*slot)->parallel_aware)
	{
		w->parallel_divisor = 1.0;
		walk_children(*slot, add_prefilters, arg);
	}
	else if (IsA(*slot, NestLoop) || IsA(*slot, MergeJoin))
	{
		add_prefilters(&(*slot)->lefttree, arg);
		w->parallel_divisor = 1.0;
		add_prefilters(&(*slot)->righttree, arg);
	}
	else
		walk_children(*slot, add_prefilters, arg);
	w->parallel_divisor = saved;
	w->gather_params = saved_params;
	w->under_gather = saved_under;

	if (IsA(*slot, HashJoin))
		add_prefilter((HashJoin *) *slot, w);
}

/* planner_hook: plan as usual, then add pre-filters to the hash joins. */
static PlannedStmt *
amq_join_planner(Query *parse, const char *query_string, int cursorOptions,
				 ParamListInfo boundParams AMQ_PLANNER_ES_PARAM)
{
	PlannedStmt *stmt;
	PrefilterWalk w = {NULL, 0, -1, 1.0, NULL, false, NULL};
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

	w.stmt = stmt;

	/* new nodes need plan_node_ids of their own (parallel instrumentation) */
	find_max_node_id(&stmt->planTree, &w.last_plan_node_id);
	foreach(lc, stmt->subplans)
	{
		if (lfirst(lc))
			find_max_node_id((Plan **) &lfirst(lc), &w.last_plan_node_id);
	}

	find_fixed_params(&stmt->planTree, &w);
	foreach(lc, stmt->subplans)
	{
		if (lfirst(lc))
			find_fixed_params((Plan **) &lfirst(lc), &w);
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
	DefineCustomRealVariable("bloomamq.join_prefilter_min_remove",
							 "Smallest share of outer rows a hash join's pre-filter must be expected to remove.",
							 "From the planner's estimates of the join's rows, its outer rows and the inner side's distinct keys; 0 places a pre-filter wherever one is correct.",
							 &amq_join_prefilter_min_remove,
							 0.3, 0.0, 1.0,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("bloomamq.join_prefilter_push_down",
							 "Applies a hash join's pre-filter also at the node further down its outer side that produces the join keys.",
							 "Through inner joins and the preserved side of outer joins, sorts and materializations; never through the nullable side of an outer join, a Gather or an aggregate.",
							 &amq_join_prefilter_push_down,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	AmqJoinExecInit();
	MarkGUCPrefixReserved("bloomamq");

	prev_planner_hook = planner_hook;
	planner_hook = amq_join_planner;
}
