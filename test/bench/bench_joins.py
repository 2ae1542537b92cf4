#!/usr/bin/python3
"""Hash-join pre-filters measured in one run: each query with
bloomamq.join_prefilter off, on, and written by hand with amq_agg.

    test/bench/bench_joins.py [--fact N] [--peers N M] [--runs R]

Needs a running PostgreSQL with bloomamq installed (PGHOST, PGPORT, PGUSER as
for psql); `make bench-joins` starts a throwaway one.  Serial plans, JIT off.

Data:
  - a star schema: fact (N rows, default 10^7) with keys into dim_customer
    (10^6 rows), dim_product (10^5) and dim_date (3,650);
  - the peers' dataset (benchlib.py): t_big (10^7 random-looking bigint
    ids) and t_small (10^5 keys, half of them in t_big), for the semi-join
    shape `id IN (SELECT id FROM t_small)`.

Prints one line per query and mode (median and min seconds, result) and a
table of speedups against `off`.  Timing never fails the run; a mode whose
answer differs from `off` does.
"""
import argparse
import sys

from benchlib import connect, ensure_dataset, run, timed

ap = argparse.ArgumentParser(description="bloomamq hash-join pre-filter benchmark")
ap.add_argument("--fact", type=int, default=10_000_000, help="rows of the fact table")
ap.add_argument("--peers", type=int, nargs=2, default=[10_000_000, 100_000],
                metavar=("N", "M"), help="rows of t_big and keys of t_small")
ap.add_argument("--runs", type=int, default=3, help="runs per figure (median)")
args = ap.parse_args()
NF = args.fact
N, M = args.peers
RUNS = args.runs

conn = connect()
conn.autocommit = True
for s in ("SET max_parallel_workers_per_gather = 0", "SET jit = off",
          "CREATE EXTENSION IF NOT EXISTS bloomamq", "LOAD 'bloomamq'"):
    run(conn, s)


def table_rows(name):
    if not run(conn, f"SELECT count(*) FROM pg_class WHERE relname = '{name}'")[0][0]:
        return None
    return run(conn, f"SELECT count(*) FROM {name}")[0][0]


# The peers' dataset (benchlib.py), rebuilt if absent or of other sizes.
ensure_dataset(conn, N, M)

# The star schema.  Keys are spread by a multiplicative hash so that the
# fact table is not clustered on any of them.
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

print(f"# fact={NF} t_big={N} t_small={M} runs={RUNS}; "
      f"{run(conn, 'SHOW server_version')[0][0]}; "
      f"shared_buffers={run(conn, 'SHOW shared_buffers')[0][0]} "
      f"work_mem={run(conn, 'SHOW work_mem')[0][0]} jit=off, serial plans")

# (name, work_mem, automatic form, hand-written form)
QUERIES = [
    ("semi: t_big id IN t_small", None,
     "SELECT count(*) FROM t_big WHERE id IN (SELECT id FROM t_small)",
     "SELECT count(*) FROM t_big WHERE id <@ (SELECT amq_agg(id) FROM t_small) "
     "AND id IN (SELECT id FROM t_small)"),
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

# warm the caches
for t in ("t_big", "t_small", "fact", "dim_customer", "dim_product", "dim_date"):
    run(conn, f"SELECT count(*) FROM {t}")

errors = []
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
            errors.append(f"WRONG ANSWER: {name} ({mode}) gave {res[mode]}, off gave {res['off']}")
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

print()
print(f"{'query':52s} {'off s':>7s} {'on s':>7s} {'hand s':>7s} {'on x':>6s} {'hand x':>6s}"
      f" {'removed by prefilter':>20s} batches")
for name, med, removed, disabled, batches in rows:
    print(f"{name:52s} {med['off']:7.3f} {med['on']:7.3f} {med['hand']:7.3f} "
          f"{med['off'] / med['on']:6.2f} {med['off'] / med['hand']:6.2f} "
          f"{removed:20d}{' (disabled itself)' if disabled else ''} {batches}")
semi = rows[0][1]
print()
print(f"semi-join: automatic {semi['off'] / semi['on']:.2f}x faster than off "
      f"(SPEC §12 target >= 2x: {'PASS' if semi['off'] / semi['on'] >= 2 else 'MISS'}); "
      f"hand-written {semi['off'] / semi['hand']:.2f}x")

if errors:
    print()
    for e in errors:
        print(e)
    sys.exit(1)
