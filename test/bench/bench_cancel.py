#!/usr/bin/python3
"""How long a filter build runs on after its query is cancelled.

    test/bench/bench_cancel.py [N] [--kinds K,...] [--points P]   (N=20,000,000, P=6)

For each kind, amq_agg(id, 0.01, kind) over the N rows of t_one (serial
plan) runs twice to completion (T, the faster), then P times with statement_timeout
at evenly spaced points of T, from 45% to 95%: past the scan, in the sort
and build of the aggregate's final step.  Each cancelled run's overrun is
its wall time less its timeout: how long the backend went on before the
cancel took effect.  Prints, per kind, T, the largest and median overrun,
and how many of the P runs the timeout cancelled (a run faster than T may
finish first).
A query cancel (pg_cancel_backend), a timeout and a terminate all take
effect at the same interrupt checks.

Same server and dataset as bench.py (PGHOST, PGPORT, PGUSER; benchlib.py).
Never fails on timing.
"""
import argparse
import statistics
import time

import psycopg2

from benchlib import connect, ensure_dataset, ensure_one_column, run, timed

ap = argparse.ArgumentParser(description="overrun of a cancelled amq_agg build")
ap.add_argument("N", nargs="?", type=int, default=20_000_000, help="rows of t_one")
ap.add_argument("--kinds", default="blocked,bloom,xor,fuse,ribbon",
                help="comma-separated kinds")
ap.add_argument("--points", type=int, default=6, help="timeouts per kind")
args = ap.parse_args()

conn = connect()
conn.autocommit = True
ensure_dataset(conn, args.N)
ensure_one_column(conn, args.N)
for setting in ("max_parallel_workers_per_gather = 0", "jit = off", "work_mem = '4GB'"):
    run(conn, f"SET {setting}")
run(conn, "SELECT count(*) FROM t_one")

print(f"{'kind':8s} {'build s':>8s} {'max overrun s':>14s} {'median overrun s':>17s} {'cancelled':>10s}")
for kind in args.kinds.split(","):
    sql = f"SELECT octet_length(amq_agg(id, 0.01, '{kind}')::bytea) FROM t_one"
    full = timed(conn, sql, 2)[1]
    overruns = []
    for p in range(args.points):
        frac = 0.45 + 0.5 * p / max(args.points - 1, 1)
        timeout_ms = max(int(full * frac * 1000), 1)
        run(conn, f"SET statement_timeout = {timeout_ms}")
        start = time.perf_counter()
        try:
            run(conn, sql)
            print(f"# {kind}: finished within its {timeout_ms} ms timeout", flush=True)
        except psycopg2.errors.QueryCanceled:
            overruns.append(time.perf_counter() - start - timeout_ms / 1000)
        run(conn, "SET statement_timeout = 0")
    if overruns:
        print(f"{kind:8s} {full:8.3f} {max(overruns):14.3f} {statistics.median(overruns):17.3f} "
              f"{len(overruns):5d} of {args.points}", flush=True)
    else:
        print(f"{kind:8s} {full:8.3f} {'-':>14s} {'-':>17s} {0:5d} of {args.points}", flush=True)
