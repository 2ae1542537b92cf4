/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The one place where bloomamq guards on the PostgreSQL version.
 *
 * Supported: PostgreSQL 13 to 17.
 *
 *-------------------------------------------------------------------------
 */
#ifndef AMQ_COMPAT_H
#define AMQ_COMPAT_H

#include "postgres.h"

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

#endif							/* AMQ_COMPAT_H */
