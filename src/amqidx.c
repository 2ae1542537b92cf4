/*-------------------------------------------------------------------------
 *
 * amqidx.c
 *	  The amq index access method: handler, options and cost estimate (the
 *	  design is described in amqidx.h).
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include <math.h>

#include "access/reloptions.h"
#include "commands/progress.h"
#include "commands/vacuum.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/selfuncs.h"
#include "utils/spccache.h"

#include "amqidx.h"

static relopt_kind amqidx_relopt_kind;

/* Register the amq index's reloptions (pages_per_range, fpr). */
void
AmqIdxInit(void)
{
	amqidx_relopt_kind = add_reloption_kind();
	add_int_reloption(amqidx_relopt_kind, "pages_per_range",
					  "Number of heap pages summarized by one set of filters",
					  AMQIDX_DEFAULT_PAGES_PER_RANGE, 1,
					  AMQIDX_MAX_PAGES_PER_RANGE, AccessExclusiveLock);
	add_real_reloption(amqidx_relopt_kind, "fpr",
					   "False-positive rate of each range's filters (0: automatic)",
					   0.0, 0.0, AMQ_FPR_MAX, AccessExclusiveLock);
	AmqIdxInsertInit();
}

/* amoptions: parse and validate the reloptions. */
static bytea *
amqidxoptions(Datum reloptions, bool validate)
{
	static const relopt_parse_elt tab[] = {
		{"pages_per_range", RELOPT_TYPE_INT, offsetof(AmqIdxOptions, pages_per_range)},
		{"fpr", RELOPT_TYPE_REAL, offsetof(AmqIdxOptions, fpr)},
	};

	AmqIdxOptions *opts;

	opts = (AmqIdxOptions *) build_reloptions(reloptions, validate, amqidx_relopt_kind,
											  sizeof(AmqIdxOptions), tab, lengthof(tab));

	/*
	 * A lower fpr is taken as the lowest the filters reach, not refused: an
	 * index with one, from before this check, must still restore.
	 */
	if (validate && opts && opts->fpr > 0.0 && opts->fpr < AMQIDX_FPR_MIN)
		ereport(WARNING,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("fpr %g is below 2^-32, the lowest false-positive rate of an amq index",
						opts->fpr),
				 errdetail("The index's filters use 2^-32 (about 2.33e-10)."),
				 errhint("Set fpr to 0 for the automatic rate, or to 2.33e-10 or more.")));
	return (bytea *) opts;
}

/* The index's pages_per_range option. */
int
AmqIdxPagesPerRange(Relation index)
{
	AmqIdxOptions *opts = (AmqIdxOptions *) index->rd_options;

	return opts ? opts->pages_per_range : AMQIDX_DEFAULT_PAGES_PER_RANGE;
}

/* The index's fpr option (0: automatic). */
double
AmqIdxFprOption(Relation index)
{
	AmqIdxOptions *opts = (AmqIdxOptions *) index->rd_options;

	return opts ? opts->fpr : 0.0;
}

/*
 * The fpr of a range's filters.  A lookup probes every range, so the
 * automatic rate aims at AMQIDX_AUTO_FALSE_RANGES false ranges per lookup
 * over the whole index; a set rate below AMQIDX_FPR_MIN is raised to it.
 */
double
AmqIdxEffectiveFpr(double fpr_option, uint64 nranges)
{
	double		fpr;

	if (fpr_option > 0.0)
		return Max(fpr_option, AMQIDX_FPR_MIN);
	fpr = AMQIDX_AUTO_FALSE_RANGES / (double) Max(nranges, 1);
	return Max(Min(fpr, AMQIDX_AUTO_FPR_MAX), AMQIDX_AUTO_FPR_MIN);
}

/* ambuildphasename: the name of a CREATE INDEX progress phase. */
static char *
amqidxbuildphasename(int64 phase)
{
	switch (phase)
	{
		case PROGRESS_CREATEIDX_SUBPHASE_INITIALIZE:
			return "initializing";
		case AMQIDX_PHASE_BUILD:
			return "building range filters";
		case AMQIDX_PHASE_LOG:
			return "logging index pages";
		default:
			return NULL;
	}
}

/* the keys each range is probed with: one, or an array's elements */
static double
probes_per_range(PlannerInfo *root, List *indexclauses)
{
	double		probes = 0;
	ListCell   *lc;

	foreach(lc, indexclauses)
	{
		IndexClause *iclause = lfirst_node(IndexClause, lc);
		ListCell   *lc2;

		foreach(lc2, iclause->indexquals)
		{
			RestrictInfo *rinfo = lfirst_node(RestrictInfo, lc2);

			if (IsA(rinfo->clause, ScalarArrayOpExpr))
			{
				ScalarArrayOpExpr *saop = (ScalarArrayOpExpr *) rinfo->clause;

				probes += AMQ_ESTIMATE_ARRAY_LENGTH(root, lsecond(saop->args));
			}
			else
				probes += 1;
		}
	}
	return Max(probes, 1);
}

/*
 * A scan probes every range and reads the heap pages of the ranges that
 * may match.  Matching rows are assumed spread over the ranges as in an
 * unclustered table (each in a range of its own, as far as there are
 * ranges); the filters add fpr of the others.  The selectivity returned is
 * the fraction of ranges read, as for BRIN.
 */
static void
amqidxcostestimate(PlannerInfo *root, IndexPath *path, double loop_count,
				   Cost *indexStartupCost, Cost *indexTotalCost,
				   Selectivity *indexSelectivity, double *indexCorrelation,
				   double *indexPages)
{
	IndexOptInfo *index = path->indexinfo;
	List	   *quals = get_quals_from_indexclauses(path->indexclauses);
	Relation	irel;
	int			ppr;
	double		fpr_option;
	double		nranges;
	double		fpr;
	double		rows;
	double		hit;
	Selectivity qualsel;
	double		spc_seq_page_cost;
	double		pages;

	/* as the index was built: ALTER INDEX ... SET takes effect at REINDEX */
	irel = index_open(index->indexoid, NoLock);
	AmqIdxBuiltOptions(irel, &ppr, &fpr_option);
	index_close(irel, NoLock);

	nranges = Max(ceil(index->rel->pages / (double) ppr), 1.0);
	fpr = AmqIdxEffectiveFpr(fpr_option, (uint64) nranges);
	qualsel = clauselist_selectivity(root, quals, index->rel->relid,
									 JOIN_INNER, NULL);
	rows = qualsel * index->rel->tuples;
	if (nranges > 1)
		hit = nranges * (1.0 - pow(1.0 - 1.0 / nranges, rows));
	else
		hit = (rows > 0) ? 1.0 : 0.0;
	hit += (nranges - hit) * fpr;
	*indexSelectivity = Min(Max(hit / nranges, 0.0), 1.0);

	/*
	 * Per scan, a probe of every range: the pages of the index, read in
	 * order, fewer of them from disk when the scan repeats (a nested loop).
	 */
	get_tablespace_page_costs(index->reltablespace, NULL, &spc_seq_page_cost);
	*indexPages = index->pages;
	pages = index->pages;
	if (loop_count > 1)
		pages = index_pages_fetched(pages * loop_count, index->pages,
									index->pages, root) / loop_count;
	*indexStartupCost = spc_seq_page_cost * pages +
		cpu_operator_cost * nranges * probes_per_range(root, path->indexclauses);
	/* a bitmap is complete before the first row comes back */
	*indexTotalCost = *indexStartupCost;
	*indexCorrelation = 0;
}

PG_FUNCTION_INFO_V1(amqidxhandler);
/* The access method's handler: its properties and callbacks. */
Datum
amqidxhandler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine = makeNode(IndexAmRoutine);

	amroutine->amstrategies = AMQIDX_NSTRATEGIES;
	amroutine->amsupport = AMQIDX_NPROC;
	amroutine->amoptsprocnum = 0;
	amroutine->amcanorder = false;
	amroutine->amcanorderbyop = false;
	amroutine->amcanbackward = false;
	amroutine->amcanunique = false;
	amroutine->amcanmulticol = true;
	amroutine->amoptionalkey = true;
	amroutine->amsearcharray = true;
	amroutine->amsearchnulls = false;
	amroutine->amstorage = false;
	amroutine->amclusterable = false;
	amroutine->ampredlocks = false;
	amroutine->amcanparallel = false;
	amroutine->amcaninclude = false;
	amroutine->amusemaintenanceworkmem = false;
	/* the leader cleans up: it truncates at commit (amqidx_vacuum.c) */
	amroutine->amparallelvacuumoptions = VACUUM_OPTION_NO_PARALLEL;
	amroutine->amkeytype = InvalidOid;
	/* a range's filters answer for every row on its pages */
	AMQ_AM_SET_SUMMARIZING(amroutine);

	amroutine->ambuild = amqidxbuild;
	amroutine->ambuildempty = amqidxbuildempty;
	amroutine->aminsert = amqidxinsert;
	amroutine->ambulkdelete = amqidxbulkdelete;
	amroutine->amvacuumcleanup = amqidxvacuumcleanup;
	amroutine->amcanreturn = NULL;
	amroutine->amcostestimate = amqidxcostestimate;
	amroutine->amoptions = amqidxoptions;
	amroutine->amproperty = NULL;
	amroutine->ambuildphasename = amqidxbuildphasename;
	amroutine->amvalidate = amqidxvalidate;
	amroutine->ambeginscan = amqidxbeginscan;
	amroutine->amrescan = amqidxrescan;
	amroutine->amgettuple = NULL;
	amroutine->amgetbitmap = amqidxgetbitmap;
	amroutine->amendscan = amqidxendscan;
	amroutine->ammarkpos = NULL;
	amroutine->amrestrpos = NULL;
	amroutine->amestimateparallelscan = NULL;
	amroutine->aminitparallelscan = NULL;
	amroutine->amparallelrescan = NULL;

	PG_RETURN_POINTER(amroutine);
}
