/*-------------------------------------------------------------------------
 *
 * amqidx_validate.c
 *	  amvalidate of the amq index: checks an operator class's definition.
 *
 * An amq operator class has one operator, strategy 1, a boolean equality
 * of two types of its family, and support function 1, the key hash: a
 * function of one argument of the class's type (or anyelement) returning
 * bigint, normally amq_hash.  Cross-type operators are welcome inside a
 * family, where the hash must give equal values the same hash whatever
 * their type (the canonical hash does that for its key families).
 *
 *-------------------------------------------------------------------------
 */
#include "compat.h"

#include "access/amvalidate.h"
#include "access/htup_details.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_amproc.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "utils/lsyscache.h"
#include "utils/builtins.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "amqidx.h"

/* amvalidate: check an operator class's operators and support functions. */
bool
amqidxvalidate(Oid opclassoid)
{
	bool		result = true;
	HeapTuple	classtup;
	Form_pg_opclass classform;
	Oid			opfamilyoid;
	Oid			opcintype;
	char	   *opclassname;
	HeapTuple	familytup;
	Form_pg_opfamily familyform;
	char	   *opfamilyname;
	CatCList   *proclist,
			   *oprlist;
	bool		has_proc = false;
	bool		has_opr = false;

	classtup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclassoid));
	if (!HeapTupleIsValid(classtup))
		elog(ERROR, "cache lookup failed for operator class %u", opclassoid);
	classform = (Form_pg_opclass) GETSTRUCT(classtup);
	opfamilyoid = classform->opcfamily;
	opcintype = classform->opcintype;
	opclassname = NameStr(classform->opcname);

	familytup = SearchSysCache1(OPFAMILYOID, ObjectIdGetDatum(opfamilyoid));
	if (!HeapTupleIsValid(familytup))
		elog(ERROR, "cache lookup failed for operator family %u", opfamilyoid);
	familyform = (Form_pg_opfamily) GETSTRUCT(familytup);
	opfamilyname = NameStr(familyform->opfname);

	proclist = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(opfamilyoid));
	for (int i = 0; i < proclist->n_members; i++)
	{
		Form_pg_amproc procform = (Form_pg_amproc) GETSTRUCT(&proclist->members[i]->tuple);

		if (procform->amproclefttype != procform->amprocrighttype)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("amq operator family \"%s\" contains support procedure %s with cross-type registration",
							opfamilyname, format_procedure(procform->amproc))));
			result = false;
			continue;
		}
		if (procform->amprocnum != AMQIDX_HASH_PROC)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("amq operator family \"%s\" contains function %s with invalid support number %d",
							opfamilyname, format_procedure(procform->amproc),
							procform->amprocnum)));
			result = false;
			continue;
		}
		if (!check_amproc_signature(procform->amproc, INT8OID, false, 1, 1,
									procform->amproclefttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("amq operator family \"%s\" contains function %s with wrong signature for support number %d",
							opfamilyname, format_procedure(procform->amproc),
							procform->amprocnum)));
			result = false;
			continue;
		}
		if (procform->amproclefttype == opcintype)
			has_proc = true;
	}

	oprlist = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(opfamilyoid));
	for (int i = 0; i < oprlist->n_members; i++)
	{
		Form_pg_amop oprform = (Form_pg_amop) GETSTRUCT(&oprlist->members[i]->tuple);

		if (oprform->amopstrategy != AMQIDX_EQUAL_STRATEGY)
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("amq operator family \"%s\" contains operator %s with invalid strategy number %d",
							opfamilyname, format_operator(oprform->amopopr),
							oprform->amopstrategy)));
			result = false;
			continue;
		}
		if (oprform->amoppurpose != AMOP_SEARCH ||
			OidIsValid(oprform->amopsortfamily))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("amq operator family \"%s\" contains invalid ORDER BY specification for operator %s",
							opfamilyname, format_operator(oprform->amopopr))));
			result = false;
			continue;
		}
		if (!check_amop_signature(oprform->amopopr, BOOLOID,
								  oprform->amoplefttype, oprform->amoprighttype))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("amq operator family \"%s\" contains operator %s with wrong signature",
							opfamilyname, format_operator(oprform->amopopr))));
			result = false;
			continue;
		}
		/* a probe value of the right-hand type is hashed by its own support function */
		if (oprform->amoprighttype != oprform->amoplefttype &&
			!OidIsValid(get_opfamily_proc(opfamilyoid, oprform->amoprighttype,
										  oprform->amoprighttype, AMQIDX_HASH_PROC)))
		{
			ereport(INFO,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("amq operator family \"%s\" lacks a support function for type %s of operator %s",
							opfamilyname, format_type_be(oprform->amoprighttype),
							format_operator(oprform->amopopr))));
			result = false;
			continue;
		}
		if (oprform->amoplefttype == opcintype && oprform->amoprighttype == opcintype)
			has_opr = true;
	}

	if (!has_proc)
	{
		ereport(INFO,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("amq operator class \"%s\" is missing support function %d",
						opclassname, AMQIDX_HASH_PROC)));
		result = false;
	}
	if (!has_opr)
	{
		ereport(INFO,
				(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
				 errmsg("amq operator class \"%s\" is missing its equality operator",
						opclassname)));
		result = false;
	}

	ReleaseCatCacheList(proclist);
	ReleaseCatCacheList(oprlist);
	ReleaseSysCache(familytup);
	ReleaseSysCache(classtup);
	return result;
}
