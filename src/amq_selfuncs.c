/*-------------------------------------------------------------------------
 *
 * amq_selfuncs.c
 *	  Restriction selectivity of the containment operators, filter @> key
 *	  and key <@ filter (every overload): amq_contains_sel.
 *
 * A filter passes the rows whose key it holds, and a false-positive
 * fraction of the others.  When the filter is a constant at plan time (a
 * literal, a custom plan's bind parameter, a stable expression) and the key
 * is a column with statistics, the estimate follows what PostgreSQL's own
 * "= constant" estimate does with the same statistics:
 *
 * - each most-common value is probed against the filter, and its frequency
 *	 counts in full if the filter answers true (a false positive passes its
 *	 rows too, so this part is exact);
 * - the other non-NULL rows pass at s + (1 - s) * fpr, where s is the share
 *	 of the remaining distinct values that the filter's remaining keys
 *	 could be, min(1, keys / distinct values), and fpr is the filter's
 *	 false-positive rate as filled now (estimated from its payload);
 * - NULL keys never pass (the probe yields NULL).
 *
 * That assumes the filter's keys are values of the column, which is what a
 * filter built from the column or from a table joined to it holds; keys
 * that are not in the column make it an overestimate, the safe side.
 *
 * Without statistics, the column's distinct count is taken as its row
 * count when that is larger than PostgreSQL's default of 200: the columns
 * that filters are built over are mostly identifiers.
 *
 * When the filter is not known at plan time (an InitPlan such as
 * (SELECT amq_agg(id) FROM small), a generic plan's parameter, a column of
 * filters probed with a constant key, or a key and a filter from the same
 * row), the estimate is DEFAULT_AMQ_CONTAIN_SEL.  A NULL constant on
 * either side passes nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/htup_details.h"
#include "catalog/pg_statistic.h"
#include "catalog/pg_type.h"
#include "nodes/pathnodes.h"
#include "utils/lsyscache.h"
#include "utils/selfuncs.h"
#include "utils/typcache.h"

#include "amqfilter.h"

PG_FUNCTION_INFO_V1(amq_contains_sel);

/*
 * The selectivity of a filter the planner cannot see.  A filter passes at
 * least its false-positive rate of the rows it does not hold (1% for a
 * filter built with the defaults), and a filter written into a query to
 * narrow a scan holds the keys of a small part of it: 5% is five times
 * the default rate, well below the 50% that an operator without an
 * estimator gets.  Erring high is the safe side: an underestimate can make
 * the planner put a nested loop over rows it did not expect.
 */
#define DEFAULT_AMQ_CONTAIN_SEL	0.05

/*
 * Could a filter of f's key family and hash scheme be probed with values
 * hashed by h?  (AmqCheckFamily's test, without its error: an estimate must
 * not fail where the query itself would fail later with a better message.)
 */
static bool
family_matches(const AmqFilter *f, const AmqKeyHasher *h)
{
	if (f->key_family == AMQ_FAMILY_NONE)
		return true;
	if (f->key_family != h->family)
		return false;
	if ((h->family == AMQ_FAMILY_OTHER || f->hash_scheme == AMQ_HASH_PARQUET) &&
		f->key_type != h->key_type)
		return false;
	return true;
}

/* Does f (of kind ops) answer true for value, hashed by h? */
static bool
filter_passes(const AmqFilter *f, const AmqKindOps *ops, AmqKeyHasher *h,
			  Datum value)
{
	uint64		alts[AMQ_MAX_ALT_HASHES];
	int			n;

	if (ops->contains(f, AmqHashDatum(h, value)))
		return true;
	n = AmqAltHashes(h, value, alts);
	for (int i = 0; i < n; i++)
		if (ops->contains(f, alts[i]))
			return true;
	return false;
}

/*
 * Selectivity of "key <@ filter" for a constant filter over a key column
 * described by vardata.
 */
static double
constant_filter_sel(VariableStatData *vardata, Oid opfuncoid, Oid collation,
					struct varlena *v)
{
	AmqFilter	f;
	const AmqKindOps *ops;
	AmqStats	st;
	double		fpr;
	double		nkeys;
	double		ndistinct;
	bool		isdefault;
	double		nullfrac = 0.0;
	double		mcv_pass = 0.0;		/* frequency of MCVs the filter passes */
	double		mcv_total = 0.0;	/* frequency of all MCVs */
	int			n_mcv = 0;
	int			n_mcv_pass = 0;
	double		rest_frac;
	double		rest_distinct;
	double		rest_keys;
	double		s_in;

	AmqFilterDecode(v, &f);
	ops = AmqKindOpsOf(&f);
	memset(&st, 0, sizeof(st));
	ops->stats(&f, &st);
	fpr = st.est_fpr;
	nkeys = (double) f.nkeys;

	ndistinct = get_variable_numdistinct(vardata, &isdefault);
	if (isdefault && vardata->rel != NULL && vardata->rel->tuples > ndistinct)
		ndistinct = vardata->rel->tuples;

	if (HeapTupleIsValid(vardata->statsTuple))
	{
		Form_pg_statistic stats = (Form_pg_statistic) GETSTRUCT(vardata->statsTuple);
		AttStatsSlot sslot;

		nullfrac = stats->stanullfrac;

		/*
		 * Probe the most common values, if this user may see them through
		 * our (not leakproof) function and they hash as the filter's keys.
		 */
		if (statistic_proc_security_check(vardata, opfuncoid) &&
			AmqTypeHashable(vardata->atttype, collation) &&
			get_attstatsslot(&sslot, vardata->statsTuple,
							 STATISTIC_KIND_MCV, InvalidOid,
							 ATTSTATSSLOT_VALUES | ATTSTATSSLOT_NUMBERS))
		{
			AmqHashers hashers;
			AmqKeyHasher *h;

			memset(&hashers, 0, sizeof(hashers));
			AmqHasherInit(&hashers.canon, vardata->atttype, collation,
						  CurrentMemoryContext);
			h = AmqHasherFor(&hashers, &f);
			if (family_matches(&f, h))
			{
				n_mcv = sslot.nvalues;
				for (int i = 0; i < sslot.nvalues; i++)
				{
					mcv_total += sslot.numbers[i];
					if (filter_passes(&f, ops, h, sslot.values[i]))
					{
						mcv_pass += sslot.numbers[i];
						n_mcv_pass++;
					}
				}
			}
			free_attstatsslot(&sslot);
		}
	}

	/* the rows that are neither NULL nor a most common value */
	rest_frac = 1.0 - nullfrac - mcv_total;
	CLAMP_PROBABILITY(rest_frac);
	rest_distinct = Max(ndistinct - n_mcv, 1.0);
	rest_keys = Max(nkeys - n_mcv_pass, 0.0);
	s_in = Min(rest_keys / rest_distinct, 1.0);

	return mcv_pass + rest_frac * (s_in + (1.0 - s_in) * fpr);
}

/*
 * amq_contains_sel(root, operator, args, varRelid): the restriction
 * estimator of @> (filter on the left) and <@ (filter on the right).
 */
Datum
amq_contains_sel(PG_FUNCTION_ARGS)
{
	PlannerInfo *root = (PlannerInfo *) PG_GETARG_POINTER(0);
	Oid			operator = PG_GETARG_OID(1);
	List	   *args = (List *) PG_GETARG_POINTER(2);
	int			varRelid = PG_GETARG_INT32(3);
	char	   *opname = get_opname(operator);
	bool		filter_on_left;
	VariableStatData vardata;
	Node	   *other;
	bool		varonleft;
	double		selec;

	if (opname == NULL)
		elog(ERROR, "cache lookup failed for operator %u", operator);
	filter_on_left = (strcmp(opname, "@>") == 0);

	/* a variable against a pseudo-constant, or we know nothing */
	if (!get_restriction_variable(root, args, varRelid,
								  &vardata, &other, &varonleft))
		PG_RETURN_FLOAT8(DEFAULT_AMQ_CONTAIN_SEL);

	if (IsA(other, Const) && ((Const *) other)->constisnull)
		selec = 0.0;			/* a NULL filter or key: the probe is NULL */
	else if (!IsA(other, Const) || varonleft == filter_on_left)
	{
		/* a filter not known until run time, or a column of filters */
		selec = DEFAULT_AMQ_CONTAIN_SEL;
	}
	else
	{
		Datum		d = ((Const *) other)->constvalue;
		struct varlena *v = PG_DETOAST_DATUM(d);

		selec = constant_filter_sel(&vardata, get_opcode(operator),
									PG_GET_COLLATION(), v);
		if ((Pointer) v != DatumGetPointer(d))
			pfree(v);
	}

	ReleaseVariableStats(vardata);
	CLAMP_PROBABILITY(selec);
	PG_RETURN_FLOAT8(selec);
}
