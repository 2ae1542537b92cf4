#!/usr/bin/python3
"""The amq index against btree, BRIN's bloom opclasses and contrib/bloom, in one run.

    test/bench/bench_index.py [N]        (default N=10,000,000)

On the dataset of benchlib.py (t_big: N rows, unclustered bigint id, int4
id4, text k) each index is built, measured (build time, size) and probed
with point lookups of keys that exist, each a different key (median of 21):
time, and heap blocks read (from EXPLAIN (ANALYZE, BUFFERS)).  Prints one line
per index, then the SPEC §12 checks (size <= 15% of the btree, lookup <= 5 ms,
<= 2 ranges of heap pages read) with PASS or MISS.  Exits non-zero only on a
wrong answer or an SQL error, never on timing.
"""
import re
import statistics
import sys
import time

from benchlib import connect, ensure_dataset, run

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
conn = connect()
conn.autocommit = True
run(conn, "SET max_parallel_workers_per_gather = 0")
run(conn, "SET jit = off")
run(conn, "SET maintenance_work_mem = '1GB'")
run(conn, "CREATE EXTENSION IF NOT EXISTS bloomamq")
run(conn, "CREATE EXTENSION IF NOT EXISTS bloom")

ensure_dataset(conn, N)
heap_pages = run(conn, "SELECT pg_relation_size('t_big') / 8192")[0][0]
print(f"# N={N} heap pages={heap_pages}")

# keys that exist: row i in 1..N has id i * 2654435761 mod 2^40 (benchlib.py)
KEYS = [1 + (j * 7919) % N for j in range(21)]


def lookups(q_of_i, ppr):
    """Median and min seconds, median heap blocks read, rows found."""
    run(conn, "SET enable_seqscan = off")
    ts, blocks, found = [], [], 0
    for i in KEYS:
        q = q_of_i(i)
        t0 = time.perf_counter()
        n = run(conn, q)[0][0]
        ts.append(time.perf_counter() - t0)
        found += n
        plan = "\n".join(r[0] for r in run(conn, "EXPLAIN (ANALYZE, TIMING OFF, COSTS OFF) " + q))
        hb = sum(int(x) for x in re.findall(r"(?:lossy|exact)=(\d+)", plan))
        if "Heap Blocks" not in plan:
            # index (only) scans: a heap fetch per row found
            hb = n
        blocks.append(hb)
    run(conn, "SET enable_seqscan = on")
    return statistics.median(ts), min(ts), statistics.median(blocks), found


ID = lambda i: f"SELECT count(*) FROM t_big WHERE id = ({i}::bigint * 2654435761) % 1099511627776"
ID4K = lambda i: f"SELECT count(*) FROM t_big WHERE id4 = {i} AND k = 'user_{i}'"

CASES = [
    # name, DDL, query, pages per range (for "ranges read")
    ("btree (id)", "CREATE INDEX ix ON t_big (id)", ID, None),
    ("brin int8_bloom_ops (id)", "CREATE INDEX ix ON t_big USING brin (id int8_bloom_ops)", ID, 128),
    ("brin bloom fpr=0.001 ppr=16 (id)",
     "CREATE INDEX ix ON t_big USING brin (id int8_bloom_ops(false_positive_rate=0.001)) WITH (pages_per_range=16)",
     ID, 16),
    ("amq (id)", "CREATE INDEX ix ON t_big USING amq (id)", ID, 64),
    ("btree (id4, k)", "CREATE INDEX ix ON t_big (id4, k)", ID4K, None),
    ("contrib bloom (id4, k)", "CREATE INDEX ix ON t_big USING bloom (id4, k)", ID4K, None),
    ("amq (id4, k)", "CREATE INDEX ix ON t_big USING amq (id4, k)", ID4K, 64),
]

results = {}
print(f"{'index':36s} {'build s':>8s} {'size MB':>8s} {'lookup ms':>10s} {'min ms':>8s} {'heap blocks':>11s} {'ranges':>7s}")
bad = False
for name, ddl, q, ppr in CASES:
    run(conn, "DROP INDEX IF EXISTS ix")
    t0 = time.perf_counter()
    run(conn, ddl)
    build = time.perf_counter() - t0
    size = run(conn, "SELECT pg_relation_size('ix')")[0][0]
    med, mn, hb, found = lookups(q, ppr)
    if found != len(KEYS):
        print(f"WRONG ANSWER: {name} found {found} of {len(KEYS)} rows")
        bad = True
    ranges = f"{hb / ppr:.2f}" if ppr else "-"
    results[name] = (build, size, med, hb, ppr)
    print(f"{name:36s} {build:8.2f} {size / 2**20:8.1f} {med * 1000:10.3f} {mn * 1000:8.3f} {hb:11.0f} {ranges:>7s}", flush=True)
run(conn, "DROP INDEX IF EXISTS ix")

bt = results["btree (id)"]
amq = results["amq (id)"]
print()
print("# SPEC section 12, amq (id) on the unclustered bigint column")
checks = [
    ("size <= 15% of the btree", amq[1] / bt[1], amq[1] <= 0.15 * bt[1], f"{100 * amq[1] / bt[1]:.1f}%"),
    ("lookup <= 5 ms", amq[2], amq[2] <= 0.005, f"{amq[2] * 1000:.2f} ms"),
    ("heap pages of <= 2 ranges", amq[3] / amq[4], amq[3] <= 2 * amq[4], f"{amq[3] / amq[4]:.2f} ranges"),
]
for what, _, ok, shown in checks:
    print(f"{what:36s} {shown:>12s}  {'PASS' if ok else 'MISS'}")
print(f"{'build vs btree':36s} {amq[0] / bt[0]:11.2f}x")
sys.exit(1 if bad else 0)
