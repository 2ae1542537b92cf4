#!/usr/bin/python3
"""amq_agg with the state type of 0.5.0 (amqaggstate, an expanded object)
against the internal state of 0.4.0, in one run on one server: a database
with the extension at 0.4.0 and one at the current version, the same
library, the same table, alternating.

    test/bench/bench_aggstate.py [--rows N] [--runs R]

Needs a running PostgreSQL with bloomamq installed (PGHOST, PGPORT, PGUSER
as for psql), e.g. `make bench-aggstate`.  Creates the databases
bench_state_040 and bench_state_cur if missing.  JIT off.

Prints, for serial and 2-worker parallel plans and a 100,000-group GROUP BY,
the median and fastest seconds of each and the ratio current / 0.4.0.
Timing never fails the run; different filters do.
"""
import argparse

from benchlib import connect, run, timed

ap = argparse.ArgumentParser(description="amq_agg state type benchmark")
ap.add_argument("--rows", type=int, default=10_000_000, help="rows of the table")
ap.add_argument("--runs", type=int, default=5, help="alternating rounds")
args = ap.parse_args()

DBS = (("0.4.0", "bench_state_040"), ("current", "bench_state_cur"))
admin = connect()
admin.autocommit = True
conns = {}
for version, db in DBS:
    if not run(admin, f"SELECT 1 FROM pg_database WHERE datname = '{db}'"):
        run(admin, f"CREATE DATABASE {db}")
    c = connect(db)
    c.autocommit = True
    if version == "0.4.0":
        run(c, "CREATE EXTENSION IF NOT EXISTS bloomamq VERSION '0.4.0'")
    else:
        run(c, "CREATE EXTENSION IF NOT EXISTS bloomamq")
    have = run(c, "SELECT extversion FROM pg_extension WHERE extname = 'bloomamq'")[0][0]
    if version == "0.4.0" and have != "0.4.0":
        raise SystemExit(f"{db} has bloomamq {have}, not 0.4.0: drop the database")
    n = run(c, "SELECT reltuples::bigint FROM pg_class WHERE relname = 't_state'")
    if not n or n[0][0] != args.rows:
        run(c, "DROP TABLE IF EXISTS t_state")
        run(c, f"""CREATE TABLE t_state AS
                   SELECT (hashint8(g)::bigint << 20) # g AS id, g % 100000 AS grp
                   FROM generate_series(1, {args.rows}) g""")
        run(c, "VACUUM ANALYZE t_state")
    run(c, "SET jit = off")
    run(c, "SET work_mem = '1GB'")
    run(c, "SET parallel_setup_cost = 0")
    run(c, "SET min_parallel_table_scan_size = 0")
    conns[version] = c

CASES = (
    ("serial", 0, "SELECT amq_agg(id)::bytea FROM t_state"),
    ("2 workers", 2, "SELECT amq_agg(id)::bytea FROM t_state"),
    ("GROUP BY, 100k groups", 0,
     "SELECT md5(string_agg(f::bytea::text, '' ORDER BY grp)) FROM "
     "(SELECT grp, amq_agg(id) AS f FROM t_state GROUP BY grp) s"),
)
print(f"amq_agg over {args.rows:,} rows: 0.4.0 (internal state) against the current "
      f"version (amqaggstate), {args.runs} alternating rounds")
print(f"{'case':24} {'0.4.0 med/min s':>17} {'current med/min s':>19} {'ratio med/min':>14}")
failed = False
for name, workers, sql in CASES:
    res = {}
    for version, _ in DBS:
        run(conns[version], f"SET max_parallel_workers_per_gather = {workers}")
    walls = {v: [] for v, _ in DBS}
    rows = {}
    for _ in range(args.runs):
        for version, _ in DBS:
            med, fast, r = timed(conns[version], sql, 1)
            walls[version].append(fast)
            rows[version] = r
    if rows["0.4.0"] != rows["current"]:
        print(f"{name}: the filters differ")
        failed = True
    walls = {v: sorted(w) for v, w in walls.items()}
    med = {v: w[len(w) // 2] for v, w in walls.items()}
    fast = {v: w[0] for v, w in walls.items()}
    print(f"{name:24} {med['0.4.0']:8.2f}/{fast['0.4.0']:<8.2f} "
          f"{med['current']:9.2f}/{fast['current']:<9.2f} "
          f"{med['current'] / med['0.4.0']:6.2f}/{fast['current'] / fast['0.4.0']:<6.2f}")
raise SystemExit(1 if failed else 0)
