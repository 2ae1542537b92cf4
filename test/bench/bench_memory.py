#!/usr/bin/python3
"""What memory the process has not touched before costs on this machine.

    test/bench/bench_memory.py [N] [--runs R] [--idle S]   (N=10,000,000, R=5, S=4)

Runs each query (serial, or with 2 workers where it says so) twice in a row
and then once more after S idle seconds, R times, and prints the medians of the second run (back to back) and of the
run after the pause.  A build that allocates memory (amq_agg keeps 8 bytes
per key, the static kinds' scratch more) gets it from the kernel at every
query; where the kernel hands freed memory back to a hypervisor a moment
after it is freed (a virtual machine with free page reporting), the pause
makes every first touch of that memory a fault on the host as well, while
count and hll, which allocate nothing per row, do not change.  The ratios of
bench.py include whichever of the two a figure happened to get.

Same server and dataset as bench.py (PGHOST, PGPORT, PGUSER; benchlib.py).
Never fails on timing.
"""
import argparse
import statistics
import time

from benchlib import connect, ensure_dataset, run, timed

ap = argparse.ArgumentParser(description="cost of first-touched memory per query")
ap.add_argument("N", nargs="?", type=int, default=10_000_000, help="rows of t_big")
ap.add_argument("--runs", type=int, default=5, help="rounds (median)")
ap.add_argument("--idle", type=float, default=4.0, help="seconds idle before the cold run")
args = ap.parse_args()

# (name, query, parallel workers)
QUERIES = [
    ("count(id)", "SELECT count(id) FROM t_big", 0),
    ("hll_add_agg", "SELECT hll_cardinality(hll_add_agg(hll_hash_bigint(id))) FROM t_big", 0),
    ("amq_agg(id)", "SELECT octet_length(amq_agg(id)::bytea) FROM t_big", 0),
    ("amq_agg(id), 2 workers", "SELECT octet_length(amq_agg(id)::bytea) FROM t_big", 2),
    ("amq_agg(id, 'fuse')", "SELECT octet_length(amq_agg(id, 0.01, 'fuse')::bytea) FROM t_big", 0),
    ("amq_agg(id, 'xor')", "SELECT octet_length(amq_agg(id, 0.01, 'xor')::bytea) FROM t_big", 0),
]

conn = connect()
conn.autocommit = True
ensure_dataset(conn, args.N, min(100_000, args.N))
for setting in ("max_parallel_workers_per_gather = 0", "jit = off"):
    run(conn, f"SET {setting}")
run(conn, "SELECT count(*) FROM t_big")

hot = {name: [] for name, _, _ in QUERIES}
cold = {name: [] for name, _, _ in QUERIES}
for rnd in range(args.runs):
    for name, sql, workers in QUERIES:
        run(conn, f"SET max_parallel_workers_per_gather = {workers}")
        run(conn, sql)  # the run before the back-to-back one
        hot[name].append(timed(conn, sql, 1)[0])
        time.sleep(args.idle)
        cold[name].append(timed(conn, sql, 1)[0])
    print(f"# round {rnd + 1} of {args.runs} done", flush=True)

print(f"{'query':24s} {'back to back s':>15s} {f'after {args.idle:g} s idle':>17s} {'ratio':>6s}")
for name, _, _ in QUERIES:
    h, c = statistics.median(hot[name]), statistics.median(cold[name])
    print(f"{name:24s} {h:15.3f} {c:17.3f} {c / h:6.2f}")
