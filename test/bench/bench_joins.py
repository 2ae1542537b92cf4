#!/usr/bin/python3
"""Hash-join pre-filters (bloomamq.join_prefilter) measured in one run.

    test/bench/bench_joins.py [--sf SF] [--runs R] [--confirm R2] [--timeout S] [--parallel on,off]
                              [--queries q01,q08,...] [--no-semi] [--star]
    test/bench/bench_joins.py --explain q08 [--explain-mode analyze|verbose]
    test/bench/bench_joins.py --load-only [--sf SF]

Needs a running PostgreSQL with bloomamq installed (PGHOST, PGPORT, PGUSER as
for psql); `make bench-joins` starts a throwaway one, tools/pgchroot one in a
chroot of another major.  JIT off in every part.

1. TPC-H-shaped (default): the data set of test/bench/tpch/tpch.py at scale
   factor SF (default 1), generated and loaded once into schema tpch (kept:
   a later run with the same SF reuses it), and the 22 queries of
   test/bench/tpch/queries; with --foreign-keys, TPC-H's foreign keys
   declared too (a run without it drops them).  With parallel plans on (PostgreSQL's default,
   max_parallel_workers_per_gather = 2) and off (0), work_mem 64MB, each query
   runs R times (default 3) with the pre-filter off and on alternating (off,
   on, then on, off, ...), under statement_timeout S (default 60 s; a mode that
   times out is not run again).  Per query: median seconds off and on, and the
   speedup off/on; totals over the queries of which both modes finished.
   A median of 3 on a small, busy machine can move by a quarter between
   runs, so each query slower than 0.95x then runs R2 more times (--confirm,
   default 7), off and on alternating, as a check: "slower than 0.95x" in
   the totals counts the queries slower in the check too, and names the
   others; the table and the speedups keep the first runs' medians.
   Every result with the pre-filter on is compared with the one off: all rows,
   sorted, numbers rounded to 10 significant digits (numeric sums are exact
   in PostgreSQL whatever the plan, but a float or a division's last digit may
   differ between plans); the queries under a LIMIT have ORDER BY keys that
   make their rows unique.  A difference makes the script exit 1.  Then,
   unless --no-stats, one more run with the pre-filter on under EXPLAIN
   ANALYZE (not timed) counts the AmqPrefilter nodes, the rows they removed
   and those that disabled themselves; the totals then also give the
   speedup over the queries that place a pre-filter, and name the queries
   slower than 0.95x that place none (their plans are the same off and on
   but for pass-through nodes, so their ratio is the spread between runs).
   Beside each query whose joins can drop rows, in the same alternation
   (unless --no-floor), its floor (test/bench/tpch/floors): a count(*) of
   each table it reads, under its own conditions on that table.  A join
   pre-filter removes work after the scans, never the scans: "on/floor" is
   how far above them the query runs with it, and the totals give the
   speedup at the floor, every such query at its floor and the others as
   they ran, the most any pre-filter could give while the tables are read
   whole.
2. The semi-join of `make bench` (benchlib.py's t_big 10^7 ids, t_small 10^5
   keys, half present): `id IN (SELECT id FROM t_small)`, off and on
   alternating, parallel plans on and off, work_mem 256MB as in `make bench`;
   beside them, in the same alternation, a floor: `count(*) FROM t_big
   WHERE id > 0`, the scan with a qual on the key column (it reads the key
   and tests it once per row, as the probe does, though the probe costs
   less than the qual, so the pre-filtered join can run a little below it);
   "on/floor" is how far above it the pre-filtered join runs.
3. --star: the star schema of earlier versions of this script (fact 10^7 rows
   against three dimensions, and a subquery that aggregates the fact table
   joined to a filtered dimension), off, on and written by hand with
   amq_agg, for each --parallel setting.

--explain qNN prints the query's plan with the pre-filter on (EXPLAIN
(ANALYZE, VERBOSE), or only VERBOSE with --explain-mode verbose) for each
--parallel setting, then exits: where pre-filters are placed, and what they
removed.  Timing never fails the run; a wrong answer does.
"""
import argparse
import decimal
import hashlib
import json
import os
import statistics
import sys
import time

import psycopg2
import psycopg2.errors

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tpch"))
from benchlib import connect, ensure_dataset, run, timed  # noqa: E402
import tpch  # noqa: E402

ap = argparse.ArgumentParser(description="bloomamq hash-join pre-filter benchmark")
ap.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
ap.add_argument("--runs", type=int, default=3, help="runs per query and mode (median)")
ap.add_argument("--confirm", type=int, default=7, metavar="R2",
                help="run each query slower than 0.95x R2 more times, as a check "
                     "(default 7; 0: no check)")
ap.add_argument("--timeout", type=float, default=60, help="statement_timeout per query, s")
ap.add_argument("--parallel", default="on,off",
                help="parallel plans: on (max_parallel_workers_per_gather 2), off (0), "
                     "or both (default on,off)")
ap.add_argument("--queries", default="", help="only these TPC-H queries, e.g. q03,q08")
ap.add_argument("--work-mem", default="64MB", help="work_mem of the TPC-H queries")
ap.add_argument("--no-tpch", action="store_true", help="skip the TPC-H queries")
ap.add_argument("--no-semi", action="store_true", help="skip the semi-join of make bench")
ap.add_argument("--star", action="store_true", help="also the star-schema queries")
ap.add_argument("--peers", type=int, nargs=2, default=[10_000_000, 100_000],
                metavar=("N", "M"), help="rows of t_big and keys of t_small")
ap.add_argument("--fact", type=int, default=10_000_000, help="rows of the star's fact table")
ap.add_argument("--explain", metavar="QNN", help="print this TPC-H query's plan, then exit")
ap.add_argument("--explain-mode", choices=("analyze", "verbose"), default="analyze")
ap.add_argument("--no-stats", dest="stats", action="store_false",
                help="skip the EXPLAIN ANALYZE run per query that counts the pre-filters "
                     "and the rows they removed")
ap.add_argument("--foreign-keys", action="store_true",
                help="declare TPC-H's foreign keys (dropped again by a run without it)")
ap.add_argument("--no-floor", dest="floor", action="store_false",
                help="do not time the queries' floors (test/bench/tpch/floors)")
ap.add_argument("--load-only", action="store_true", help="load the TPC-H data, then exit")
ap.add_argument("--json", metavar="FILE", help="also write the TPC-H figures to FILE")
args = ap.parse_args()

PAR = {"on": 2, "off": 0}
pars = [p.strip() for p in args.parallel.split(",") if p.strip()]
for p in pars:
    if p not in PAR:
        ap.error(f"--parallel takes on, off or on,off; got {p!r}")

conn = connect()
conn.autocommit = True
for s in ("SET jit = off", "CREATE EXTENSION IF NOT EXISTS bloomamq", "LOAD 'bloomamq'"):
    run(conn, s)
VERSION = run(conn, "SHOW server_version")[0][0]
errors = []


def setting(name):
    return run(conn, f"SHOW {name}")[0][0]


# ---------------------------------------------------------------- TPC-H

def tpch_queries():
    qs = tpch.queries()
    # Q11's FRACTION is 0.0001 / SF
    if args.sf != 1:
        qs["q11"] = qs["q11"].replace("* 0.0001", f"* {0.0001 / args.sf:.10g}")
    if args.queries:
        want = [q.strip().lower() for q in args.queries.split(",") if q.strip()]
        for q in want:
            if q not in qs:
                ap.error(f"no query {q} (q01 .. q22)")
        qs = {q: qs[q] for q in want}
    return qs


def norm(v):
    """A value as compared between plans: numbers to 10 significant digits."""
    if isinstance(v, (decimal.Decimal, float)):
        return format(float(v), ".10g")
    return str(v)


def digest(rows):
    """md5 of the rows, sorted, each value normalized (see norm)."""
    lines = sorted("|".join(norm(v) for v in r) for r in rows)
    return hashlib.md5("\n".join(lines).encode()).hexdigest(), len(lines)


def tpch_session(par):
    run(conn, "SET search_path = tpch, public")
    run(conn, f"SET work_mem = '{args.work_mem}'")
    run(conn, f"SET max_parallel_workers_per_gather = {PAR[par]}")
    run(conn, f"SET statement_timeout = '{int(args.timeout * 1000)}ms'")


def timed_once(sql):
    """(seconds, rows), or (None, None) if statement_timeout cancelled it."""
    start = time.perf_counter()
    try:
        rows = run(conn, sql)
    except psycopg2.errors.QueryCanceled:
        return None, None
    return time.perf_counter() - start, rows


def run_set(sql):
    """Run a SET: again if a statement timeout that fired as the query before it
    ended cancels it instead (the server checks for the cancel at its next
    statement)."""
    try:
        run(conn, sql)
    except psycopg2.errors.QueryCanceled:
        run(conn, sql)


def prefilter_stats(sql):
    """With the pre-filter on, one EXPLAIN ANALYZE run of sql: (AmqPrefilter
    nodes, rows they removed, nodes that disabled themselves)."""
    run_set("SET bloomamq.join_prefilter = on")
    try:
        plan = [r[0] for r in run(conn, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql)]
    except psycopg2.errors.QueryCanceled:
        return None
    nodes = sum(1 for line in plan if "(AmqPrefilter)" in line)
    removed = sum(int(line.split(":")[1]) for line in plan if "Rows Removed by Prefilter" in line)
    disabled = sum(1 for line in plan if "Prefilter Disabled: true" in line)
    return nodes, removed, disabled


def totals(res):
    """The totals of one mode's TPC-H results, over the queries that finished
    both off and on; None if none did.  Where the EXPLAIN ANALYZE run counted
    the pre-filters, also the total over the queries that place at least one
    (the others run the same plan, bar pass-through nodes, off and on), and
    which of the queries slower than 0.95x place none."""
    both = {q: v for q, v in res.items() if v["ratio"] is not None}
    if not both:
        return None
    off = sum(v["off"] for v in both.values())
    on = sum(v["on"] for v in both.values())
    worst = min(both, key=lambda q: both[q]["ratio"])
    first_slow = sorted(q for q, v in both.items() if v["ratio"] < 0.95)
    # slower than 0.95x in the first runs, and in the check of more runs if any
    slow = [q for q in first_slow if not both[q].get("confirm") or both[q]["confirm"][2] < 0.95]
    spread = [q for q in first_slow if q not in slow]
    t = {"queries": both, "n": len(both), "off": off, "on": on, "ratio": off / on,
         "worst": worst, "worst_ratio": both[worst]["ratio"], "slow": slow, "notes": ""}
    if spread:
        t["notes"] = (f"; slower than 0.95x in the first runs but not in a check of "
                      f"{args.confirm} more: {', '.join(spread)}")
    # the bound: each query with a floor at its floor (or its time on, if that
    # is lower), the others as they ran, the faster of off and on
    if any(v.get("floor") for v in both.values()):
        best = sum(min(v["on"], v["floor"]) if v.get("floor") else min(v["off"], v["on"])
                   for v in both.values())
        nf = sum(1 for v in both.values() if v.get("floor"))
        t["best"] = best
        t["notes"] += (f"; at the floor ({nf} queries at their floors, the others as they "
                       f"ran) {best:.1f} s: {off / best:.2f}x at most")
    if all(v["prefilters"] is not None for v in both.values()):
        placed = {q: v for q, v in both.items() if v["prefilters"] > 0}
        none_slow = [q for q in slow if q not in placed]
        if placed:
            poff = sum(v["off"] for v in placed.values())
            pon = sum(v["on"] for v in placed.values())
            t["notes"] += (f"; over the {len(placed)} queries that place a pre-filter "
                           f"{poff / pon:.2f}x ({poff:.1f} s off, {pon:.1f} s on)")
        if none_slow:
            t["notes"] += (f"; of those slower than 0.95x, no pre-filter placed: "
                           f"{', '.join(none_slow)}")
    return t


def explain(qname):
    sql = tpch_queries()[qname]
    opts = "ANALYZE, VERBOSE" if args.explain_mode == "analyze" else "VERBOSE"
    for par in pars:
        tpch_session(par)
        run(conn, "SET statement_timeout = 0")
        run(conn, "SET bloomamq.join_prefilter = on")
        print(f"-- {qname}, parallel plans {par}, bloomamq.join_prefilter = on, "
              f"work_mem {args.work_mem}; PostgreSQL {VERSION}")
        for (line,) in run(conn, f"EXPLAIN ({opts}) {sql}"):
            print(line)
        print()
        run(conn, "RESET bloomamq.join_prefilter")


def alternate(sql, runs, ref=None, floor=None):
    """sql run `runs` times with the pre-filter off and on alternating (off,
    on, then on, off, ...); a mode that times out is not run again.  With a
    floor (the statements of tpch.floors()), those too, in the same
    alternation (off, on, floor, then floor, on, off).  Returns ({mode:
    [seconds]}, the reference result (digest, rows): ref if given, else the
    first result off, or on if off timed out, and the modes whose result
    differed from it."""
    times = {"off": [], "on": [], "floor": []}
    dead = {"off": False, "on": False, "floor": floor is None}
    bad = []
    for r in range(runs):
        order = ("off", "on", "floor") if r % 2 == 0 else ("floor", "on", "off")
        for mode in order:
            if dead[mode]:
                continue
            if mode == "floor":
                secs, _ = timed_once(floor)
                if secs is None:
                    dead[mode] = True
                else:
                    times[mode].append(secs)
                continue
            run_set(f"SET bloomamq.join_prefilter = {mode}")
            secs, rows = timed_once(sql)
            if secs is None:
                dead[mode] = True
                continue
            times[mode].append(secs)
            d = digest(rows)
            if mode == "off" and ref is None:
                ref = d
            if ref is not None and d != ref:
                bad.append(mode)
            elif mode == "on" and ref is None:
                ref = d  # off timed out or not run yet: on is the reference
        if dead["off"] and dead["on"]:
            break
    return times, ref, bad


def confirm(res, qs, par):
    """Run each query of res slower than 0.95x args.confirm more times, off and
    on alternating, as a check on the spread of a median of few runs: its
    "confirm" is then (off, on, ratio) of those runs' medians.  The table and
    the totals keep the first runs' figures; the queries still slower than
    0.95x after the check are the "slow" of totals()."""
    for q, v in res.items():
        if args.confirm <= 0 or v["ratio"] is None or v["ratio"] >= 0.95 or v["status"] != "ok":
            continue
        times, ref, bad = alternate(qs[q], args.confirm, (v["md5"], v["rows"]))
        run_set("RESET bloomamq.join_prefilter")
        if bad:
            v["status"] = "MISMATCH"
            errors.append(f"WRONG ANSWER: {q} parallel {par}: on and off differ in the check")
        if not times["off"] or not times["on"]:
            print(f"{q:6s} check: timed out", flush=True)
            continue
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        v["confirm"] = (off, on, off / on)
        print(f"{q:6s} {off:8.3f} {on:8.3f} {off / on:7.2f}  check of {args.confirm} more "
              f"runs each{'' if off / on < 0.95 else ': not slower'}", flush=True)


def tpch_bench():
    qs = tpch_queries()
    fl = tpch.floors() if args.floor else {}
    R = args.runs
    print(f"# TPC-H SF{args.sf:g}: {len(qs)} queries (test/bench/tpch), pre-filter off and on "
          f"alternating, {R} run(s) each, median; work_mem {args.work_mem}, jit off, "
          f"statement_timeout {args.timeout:g} s; "
          f"{'foreign keys' if args.foreign_keys else 'primary keys only'}; PostgreSQL {VERSION}, "
          f"shared_buffers {setting('shared_buffers')}", flush=True)
    # warm the caches: every table read once
    run(conn, "SET search_path = tpch, public")
    for t in tpch.TABLES:
        run(conn, f"SELECT count(*) FROM {t}")
    results = {}
    for par in pars:
        tpch_session(par)
        print(f"\n## parallel plans {par} (max_parallel_workers_per_gather "
              f"{PAR[par]})", flush=True)
        print(f"{'query':6s} {'off s':>8s} {'on s':>8s} {'off/on':>7s} {'floor s':>8s} "
              f"{'on/floor':>8s}  rows  result", flush=True)
        res = {}
        for q, sql in qs.items():
            times, ref, bad = alternate(sql, R, floor=fl.get(q))
            stats = prefilter_stats(sql) if args.stats and times["on"] else None
            run_set("RESET bloomamq.join_prefilter")
            med = {m: (statistics.median(t) if t else None) for m, t in times.items()}
            ratio = (med["off"] / med["on"]) if med["off"] and med["on"] else None
            status = "ok"
            if bad:
                status = "MISMATCH"
                errors.append(f"WRONG ANSWER: {q} parallel {par}: on and off differ")
            elif ref is None:
                status = "timeout"
            elif med["off"] is None or med["on"] is None:
                status = "timeout " + ("off" if med["off"] is None else "on")

            def f(x):
                return f"{x:8.3f}" if x is not None else f"{'>' + format(args.timeout, 'g'):>8s}"
            print(f"{q:6s} {f(med['off'])} {f(med['on'])} "
                  f"{(format(ratio, '7.2f') if ratio else '      -')} "
                  f"{(format(med['floor'], '8.3f') if med['floor'] else '       -')} "
                  f"{(format(med['on'] / med['floor'], '8.2f') if med['floor'] and med['on'] else '       -')} "
                  f"{(ref[1] if ref else 0):5d}  {status}"
                  f"{'' if stats is None else '  prefilters %d, removed %d rows%s' % (stats[0], stats[1], ', %d disabled itself' % stats[2] if stats[2] else '')}"
                  f"{'' if len(times['off']) == R and len(times['on']) == R else ' (runs off/on: %d/%d)' % (len(times['off']), len(times['on']))}",
                  flush=True)
            res[q] = {"off": med["off"], "on": med["on"], "ratio": ratio, "status": status,
                      "floor": med["floor"], "runs_floor": times["floor"],
                      "runs_off": times["off"], "runs_on": times["on"],
                      "rows": ref[1] if ref else None, "md5": ref[0] if ref else None,
                      "prefilters": stats[0] if stats else None,
                      "removed": stats[1] if stats else None,
                      "disabled": stats[2] if stats else None, "confirm": None}
        confirm(res, qs, par)
        t = totals(res)
        if t:
            print(f"{'total':6s} {t['off']:8.3f} {t['on']:8.3f} {t['ratio']:7.2f}  "
                  f"over {t['n']} queries that finished both off and on")
            print(f"# parallel {par}: total speedup {t['ratio']:.2f}x over {t['n']} queries; "
                  f"worst {t['worst']} {t['worst_ratio']:.2f}x; "
                  f"{len(t['slow'])} slower than 0.95x{(': ' + ', '.join(t['slow'])) if t['slow'] else ''}; "
                  f"not finished: {', '.join(q for q in res if q not in t['queries']) or 'none'}"
                  f"{t['notes']}",
                  flush=True)
        results[par] = res
    run(conn, "RESET statement_timeout")
    run(conn, "RESET max_parallel_workers_per_gather")
    run(conn, "RESET work_mem")
    run(conn, "RESET search_path")
    return results


# ---------------------------------------------------------------- semi-join

def semi_bench():
    N, M = args.peers
    R = args.runs
    ensure_dataset(conn, N, M)
    sql = "SELECT count(*) FROM t_big WHERE id IN (SELECT id FROM t_small)"
    # about what the pre-filtered join cannot go below: the scan of t_big with
    # a qual on the key column (deforms it and runs one test per row, as the
    # probe does)
    floor_sql = "SELECT count(*) FROM t_big WHERE id > 0"
    run(conn, "SET work_mem = '256MB'")
    run(conn, "SELECT count(*) FROM t_big")
    print(f"\n# semi-join of make bench: {sql}; t_big={N} t_small={M}, work_mem 256MB, "
          f"{R} run(s) each, off and on alternating, median; floor: {floor_sql}")
    print(f"{'parallel':8s} {'off s':>8s} {'on s':>8s} {'off/on':>7s} {'floor s':>8s} "
          f"{'on/floor':>8s}  result")
    out = {}
    for par in pars:
        run(conn, f"SET max_parallel_workers_per_gather = {PAR[par]}")
        times = {"off": [], "on": [], "floor": []}
        ans = {}
        for r in range(R):
            for mode in (("off", "on", "floor") if r % 2 == 0 else ("floor", "on", "off")):
                run(conn, f"SET bloomamq.join_prefilter = {'on' if mode == 'on' else 'off'}")
                start = time.perf_counter()
                rows = run(conn, floor_sql if mode == "floor" else sql)
                times[mode].append(time.perf_counter() - start)
                if mode == "floor":
                    continue
                ans.setdefault("ref", rows[0][0])
                if rows[0][0] != ans["ref"]:
                    errors.append(f"WRONG ANSWER: semi-join parallel {par} ({mode}) gave "
                                  f"{rows[0][0]}, the first run {ans['ref']}")
        moff, mon, mfloor = (statistics.median(times[m]) for m in ("off", "on", "floor"))
        out[par] = (moff, mon, mfloor)
        print(f"{par:8s} {moff:8.3f} {mon:8.3f} {moff / mon:7.2f} {mfloor:8.3f} "
              f"{mon / mfloor:8.2f}  {ans['ref']}", flush=True)
    run(conn, "RESET bloomamq.join_prefilter")
    run(conn, "RESET max_parallel_workers_per_gather")
    run(conn, "RESET work_mem")
    return out


# ---------------------------------------------------------------- star schema

def table_rows(name):
    if not run(conn, f"SELECT count(*) FROM pg_class WHERE relname = '{name}' "
                     "AND relnamespace = 'public'::regnamespace")[0][0]:
        return None
    return run(conn, f"SELECT count(*) FROM public.{name}")[0][0]


def star_bench():
    """A star schema: fact (N rows) with keys into dim_customer (10^6 rows),
    dim_product (10^5) and dim_date (3,650); keys spread by a multiplicative
    hash so that the fact table is not clustered on any of them.  Each query
    off, on, and written by hand, for each --parallel setting."""
    NF = args.fact
    if table_rows("fact") != NF:
        run(conn, "DROP TABLE IF EXISTS fact, dim_customer, dim_product, dim_date")
        run(conn, """CREATE TABLE dim_customer AS
                     SELECT i::int8 AS c_id, 'region_' || (i % 50) AS region, i % 100 AS segment
                     FROM generate_series(0, 999999) i""")
        run(conn, """CREATE TABLE dim_product AS
                     SELECT i AS p_id, i % 100 AS category, 'product ' || i AS name
                     FROM generate_series(0, 99999) i""")
        run(conn, """CREATE TABLE dim_date AS
                     SELECT i AS d_id, date '2015-01-01' + i AS day,
                            extract(year FROM date '2015-01-01' + i)::int AS year
                     FROM generate_series(0, 3649) i""")
        run(conn, f"""CREATE TABLE fact AS
                      SELECT i::int8 AS f_id,
                             ((i::int8 * 2654435761) % 1000003 % 1000000)::int8 AS c_id,
                             ((i::int8 * 40503) % 100003 % 100000)::int4 AS p_id,
                             (i % 3650)::int4 AS d_id,
                             (i % 1000)::int4 AS amount
                      FROM generate_series(1, {NF}) i""")
        for t in ("fact", "dim_customer", "dim_product", "dim_date"):
            run(conn, f"VACUUM ANALYZE {t}")

    for par in pars:
        star_queries(par)


def star_queries(par):
    """The star schema's queries, with parallel plans on or off."""
    NF = args.fact
    RUNS = args.runs
    run(conn, f"SET max_parallel_workers_per_gather = {PAR[par]}")
    print(f"\n# star schema: fact={NF} runs={RUNS}; work_mem {setting('work_mem')}, "
          f"parallel plans {par}")
    # (name, work_mem, automatic form, hand-written form)
    QUERIES = [
        ("star: 1% of products", None,
         "SELECT count(*), sum(f.amount) FROM fact f JOIN dim_product p ON f.p_id = p.p_id "
         "WHERE p.category = 7",
         "SELECT count(*), sum(f.amount) FROM fact f JOIN dim_product p ON f.p_id = p.p_id "
         "WHERE p.category = 7 "
         "AND f.p_id <@ (SELECT amq_agg(p_id) FROM dim_product WHERE category = 7)"),
        ("star: 2% of customers x 10% of products", None,
         "SELECT count(*), sum(f.amount) FROM fact f "
         "JOIN dim_customer c ON f.c_id = c.c_id JOIN dim_product p ON f.p_id = p.p_id "
         "WHERE c.region = 'region_3' AND p.category < 10",
         "SELECT count(*), sum(f.amount) FROM fact f "
         "JOIN dim_customer c ON f.c_id = c.c_id JOIN dim_product p ON f.p_id = p.p_id "
         "WHERE c.region = 'region_3' AND p.category < 10 "
         "AND f.c_id <@ (SELECT amq_agg(c_id) FROM dim_customer WHERE region = 'region_3') "
         "AND f.p_id <@ (SELECT amq_agg(p_id) FROM dim_product WHERE category < 10)"),
        ("star: 10% of customers, work_mem 1MB (multi-batch)", "1MB",
         "SELECT count(*), sum(f.amount) FROM fact f JOIN dim_customer c ON f.c_id = c.c_id "
         "WHERE c.segment < 10",
         "SELECT count(*), sum(f.amount) FROM fact f JOIN dim_customer c ON f.c_id = c.c_id "
         "WHERE c.segment < 10 "
         "AND f.c_id <@ (SELECT amq_agg(c_id) FROM dim_customer WHERE segment < 10)"),
        ("star: spend of 2% of customers (grouped subquery)", None,
         "SELECT count(*), sum(s.total) FROM "
         "(SELECT c_id, sum(amount) AS total FROM fact GROUP BY c_id) s "
         "JOIN dim_customer c ON s.c_id = c.c_id WHERE c.region = 'region_3'",
         "SELECT count(*), sum(s.total) FROM "
         "(SELECT c_id, sum(amount) AS total FROM fact "
         "WHERE c_id <@ (SELECT amq_agg(c_id) FROM dim_customer WHERE region = 'region_3') "
         "GROUP BY c_id) s "
         "JOIN dim_customer c ON s.c_id = c.c_id WHERE c.region = 'region_3'"),
        ("star: customers of one region who bought (IN subquery)", None,
         "SELECT count(*), sum(c.segment) FROM dim_customer c "
         "WHERE c.region = 'region_3' AND c.c_id IN (SELECT c_id FROM fact)",
         "SELECT count(*), sum(c.segment) FROM dim_customer c "
         "WHERE c.region = 'region_3' AND c.c_id IN (SELECT c_id FROM fact "
         "WHERE c_id <@ (SELECT amq_agg(c_id) FROM dim_customer WHERE region = 'region_3'))"),
        ("star: one year of dates (10% join)", None,
         "SELECT count(*), sum(f.amount) FROM fact f JOIN dim_date d ON f.d_id = d.d_id "
         "WHERE d.year = 2018",
         "SELECT count(*), sum(f.amount) FROM fact f JOIN dim_date d ON f.d_id = d.d_id "
         "WHERE d.year = 2018 "
         "AND f.d_id <@ (SELECT amq_agg(d_id) FROM dim_date WHERE year = 2018)"),
        ("star: every date (all rows join)", None,
         "SELECT count(*), sum(f.amount) FROM fact f JOIN dim_date d ON f.d_id = d.d_id "
         "WHERE d.year >= 2015",
         "SELECT count(*), sum(f.amount) FROM fact f JOIN dim_date d ON f.d_id = d.d_id "
         "WHERE d.year >= 2015 "
         "AND f.d_id <@ (SELECT amq_agg(d_id) FROM dim_date WHERE year >= 2015)"),
    ]
    for t in ("fact", "dim_customer", "dim_product", "dim_date"):
        run(conn, f"SELECT count(*) FROM {t}")
    rows = []
    print(f"{'query':52s} {'mode':5s} {'median_s':>9s} {'min_s':>9s} result", flush=True)
    for name, wm, auto, hand in QUERIES:
        run(conn, f"SET work_mem = '{wm}'" if wm else "RESET work_mem")
        med = {}
        res = {}
        for mode, sql in (("off", auto), ("on", auto), ("hand", hand)):
            run(conn, "SET bloomamq.join_prefilter = " + ("on" if mode == "on" else "off"))
            m, mn, out = timed(conn, sql, n=RUNS)
            med[mode] = m
            res[mode] = out[0]
            print(f"{name:52s} {mode:5s} {m:9.4f} {mn:9.4f} {out[0]}", flush=True)
            if res[mode] != res["off"]:
                errors.append(f"WRONG ANSWER: {name} ({mode}) gave {res[mode]}, "
                              f"off gave {res['off']}")
        # what the pre-filter did, from the plan with the setting on
        run(conn, "SET bloomamq.join_prefilter = on")
        plan = [r[0] for r in run(conn, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + auto)]
        removed = sum(int(line.split(":")[1]) for line in plan
                      if "Rows Removed by Prefilter" in line)
        disabled = any("Prefilter Disabled: true" in line for line in plan)
        batches = max((int(line.split("Batches:")[1].split()[0]) for line in plan
                       if "Batches:" in line and "Buckets" in line), default=1)
        rows.append((name, med, removed, disabled, batches))
        run(conn, "RESET bloomamq.join_prefilter")
    run(conn, "RESET work_mem")
    run(conn, "RESET max_parallel_workers_per_gather")
    print()
    print(f"{'query':52s} {'off s':>7s} {'on s':>7s} {'hand s':>7s} {'on x':>6s} {'hand x':>6s}"
          f" {'removed by prefilter':>20s} batches")
    for name, med, removed, disabled, batches in rows:
        print(f"{name:52s} {med['off']:7.3f} {med['on']:7.3f} {med['hand']:7.3f} "
              f"{med['off'] / med['on']:6.2f} {med['off'] / med['hand']:6.2f} "
              f"{removed:20d}{' (disabled itself)' if disabled else ''} {batches}")


# ---------------------------------------------------------------- main

if not args.no_tpch or args.explain or args.load_only:
    t = tpch.ensure_loaded(conn, args.sf, log=lambda m: print(m, flush=True))
    if t is not None:
        print(f"# TPC-H SF{args.sf:g} generated and loaded in {t:.1f} s", flush=True)
    tpch.set_foreign_keys(conn, args.foreign_keys, log=lambda m: print(m, flush=True))
if args.load_only:
    sys.exit(0)
if args.explain:
    q = args.explain.lower()
    if not q.startswith("q"):
        q = "q" + q
    if len(q) == 2:
        q = "q0" + q[1]
    explain(q)
    sys.exit(0)

tpch_res = semi = None
if not args.no_tpch:
    tpch_res = tpch_bench()
if not args.no_semi:
    semi = semi_bench()
if args.star:
    star_bench()

if tpch_res or semi:
    print("\n# summary")
    for par, res in (tpch_res or {}).items():
        t = totals(res)
        if not t:
            continue
        print(f"TPC-H SF{args.sf:g}, parallel {par}: total {t['ratio']:.2f}x "
              f"({t['off']:.1f} s off, {t['on']:.1f} s on, {t['n']} queries; goal >= 1.5x); "
              f"worst {t['worst']} {t['worst_ratio']:.2f}x; {len(t['slow'])} slower than 0.95x (goal 0)"
              f"{t['notes']}")
    for par, (moff, mon, mfloor) in (semi or {}).items():
        print(f"semi-join, parallel {par}: {moff / mon:.2f}x ({moff:.3f} s off, {mon:.3f} s on"
              + ("; goal >= 2.5x" if par == "on" else "")
              + f"); on is {mon / mfloor:.2f} times the floor, a scan with a key qual "
              f"({mfloor:.3f} s)")

if args.json and tpch_res:
    with open(args.json, "w") as f:
        json.dump({"server_version": VERSION, "sf": args.sf, "runs": args.runs,
                   "foreign_keys": args.foreign_keys,
                   "timeout": args.timeout, "work_mem": args.work_mem,
                   "tpch": tpch_res,
                   "semi": {p: {"off": v[0], "on": v[1], "floor": v[2]}
                            for p, v in (semi or {}).items()}},
                  f, indent=1)

if errors:
    print()
    for e in errors:
        print(e)
    sys.exit(1)
