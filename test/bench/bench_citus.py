#!/usr/bin/python3
"""bloomamq on a three-node Citus cluster: what crosses the network, and how
long it takes.

    test/bench/bench_citus.py [--rows N] [--users U] [--runs R]

Needs the coordinator of a running Citus cluster with bloomamq installed on
every node (PGHOST, PGPORT as for psql); `make bench-citus` starts a
throwaway one (tools/citus-cluster: a coordinator and two workers on this
host) and stops it afterwards.  Serial plans on each node, JIT off.

Data: events (N rows, default 10^7; user_id over U users, default 200,000,
the distribution column; 32 shards) and purchases (N/20 rows over 2U user
ids, half of them never in events; distributed by purchase id, so not
co-located with events on user_id).

(a) amq_agg over the distributed table.  The extension is first created at
    version 0.4.0, whose aggregates have an `internal` state that Citus cannot
    move: it ships every row to the coordinator and aggregates there.  Then
    ALTER EXTENSION bloomamq UPDATE to the installed default version; if its
    aggregates have a state type Citus can move, the same queries run as
    partial aggregates on the workers and a combine on the coordinator.  Same
    library, same data, same queries: only the aggregate definitions differ.
    Bytes are Citus's own count, "Tuple data received from nodes" in EXPLAIN
    ANALYZE (plus "Intermediate Data Size" times the nodes it is sent to,
    for subplans).  Both versions' filters must be byte-equal.
(b) a semi-join with a side that is not co-located: Citus's own plan for
    `user_id IN (SELECT user_id FROM purchases WHERE ...)` (the subquery's
    rows are gathered and broadcast to the workers) against sending a filter
    of that side to the shards, `user_id <@ (SELECT amq_agg(user_id) ...)`.
    The filter's answer is approximate: the rows it lets through beyond the
    exact answer (false positives) are printed.

Timing never fails the run; results that differ do.
"""
import argparse
import re
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from benchlib import connect, run, timed  # noqa: E402

ap = argparse.ArgumentParser(description="bloomamq on Citus")
ap.add_argument("--rows", type=int, default=10_000_000, help="rows of events")
ap.add_argument("--users", type=int, default=200_000, help="distinct user ids in events")
ap.add_argument("--runs", type=int, default=3, help="runs per figure (median)")
args = ap.parse_args()
N, U, RUNS = args.rows, args.users, args.runs
OLD = "0.4.0"

conn = connect()
conn.autocommit = True
for s in ("SET jit = off", "SET max_parallel_workers_per_gather = 0"):
    run(conn, s)


def say(*a):
    print(*a, flush=True)


UNITS = {"bytes": 1, "kB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}


def moved(sql):
    """Bytes between nodes in one EXPLAIN ANALYZE run of sql: tuple data the
    coordinator received (each distributed scan's total, not the per-task
    lines), and intermediate results it sent (size x destinations)."""
    plan = "\n".join(r[0] for r in run(conn, f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {sql}"))
    received = sum(int(v) * UNITS[u] for v, u in
                   re.findall(r"Tuple data received from nodes: (\d+) (bytes|kB|MB|GB)", plan))
    sent = 0
    for v, u, n in re.findall(r"Intermediate Data Size: (\d+) (bytes|kB|MB|GB)\s*\n\s*"
                              r"Result destination: Send to (\d+) nodes?", plan):
        sent += int(v) * UNITS[u] * int(n)
    return received, sent, plan


def human(b):
    for u in ("bytes", "kB", "MB", "GB"):
        if b < 1024 or u == "GB":
            return f"{b:.0f} {u}" if u == "bytes" else f"{b:.1f} {u}"
        b /= 1024


# ---- the extension at 0.4.0 (internal aggregate state) ----
default = run(conn, "SELECT default_version FROM pg_available_extensions WHERE name = 'bloomamq'")[0][0]
run(conn, "DROP EXTENSION IF EXISTS bloomamq CASCADE")
run(conn, f"CREATE EXTENSION bloomamq VERSION '{OLD}'")


def state_type():
    return run(conn, "SELECT aggtranstype::regtype::text FROM pg_aggregate "
                     "WHERE aggfnoid = 'amq_agg(anyelement)'::regprocedure")[0][0]


# ---- data, rebuilt if absent or built for other sizes ----
tag = f"bench_citus rows={N} users={U}"
have = run(conn, "SELECT coalesce(obj_description(c.oid, 'pg_class'), '') FROM pg_class c "
                 "WHERE c.relname = 'events' AND c.relnamespace = 'public'::regnamespace")
if not have or have[0][0] != tag:
    say(f"loading events ({N:,} rows over {U:,} users) and purchases ({N // 20:,} rows)")
    run(conn, "DROP TABLE IF EXISTS events, purchases")
    run(conn, "SET citus.shard_count = 32")
    run(conn, "CREATE TABLE events (id bigint, user_id bigint, kind int, at timestamptz)")
    run(conn, "SELECT create_distributed_table('events', 'user_id')")
    # user ids spread by a multiplicative hash over 1..U; 8 kinds of event
    run(conn, f"""INSERT INTO events
                  SELECT g, 1 + (g * 2654435761) % {U}, g % 8,
                         '2026-01-01'::timestamptz + g * interval '1 second'
                  FROM generate_series(1, {N}) g""")
    run(conn, "CREATE TABLE purchases (pid bigint, user_id bigint, amount int)")
    run(conn, "SELECT create_distributed_table('purchases', 'pid', colocate_with => 'none')")
    run(conn, f"""INSERT INTO purchases
                  SELECT g, 1 + (g * 40503) % {2 * U}, (g * 7) % 100
                  FROM generate_series(1, {N // 20}) g""")
    run(conn, "VACUUM ANALYZE events")
    run(conn, "VACUUM ANALYZE purchases")
    run(conn, f"COMMENT ON TABLE events IS '{tag}'")
distinct_users = run(conn, "SELECT count(DISTINCT user_id) FROM events")[0][0]
say(f"events: {N:,} rows, {distinct_users:,} distinct user_id (the distribution column), "
    f"32 shards on 2 workers")

# ---- (a) amq_agg: coordinator aggregation, then pushed down ----
AGGS = [
    ("amq_agg(user_id)", f"{N / distinct_users:.0f} rows per distinct key",
     "SELECT md5(amq_agg(user_id)::bytea) FROM events"),
    ("amq_agg(user_id) GROUP BY kind", "8 groups",
     "SELECT kind, md5(amq_agg(user_id)::bytea) FROM events GROUP BY kind ORDER BY kind"),
    # with a capacity only the payload is compared: the key count is the
    # count of adds that changed the filter, which depends on the order
    ("amq_agg(user_id, 0.01, 'blocked', 250000)", "capacity: fixed-size partial filters",
     "SELECT md5(substr(f::bytea, octet_length(f::bytea) - (amq_info(f)->>'payload_bytes')::int + 1)) "
     "FROM (SELECT amq_agg(user_id, 0.01, 'blocked', 250000) AS f FROM events) s"),
    ("amq_agg(id)", "every key distinct (1 row per key)",
     "SELECT md5(amq_agg(id)::bytea) FROM events"),
]
results = {}


def measure_aggs(label):
    st = state_type()
    ver = run(conn, "SELECT extversion FROM pg_extension WHERE extname = 'bloomamq'")[0][0]
    say(f"\n== {label}: bloomamq {ver}, aggregate state type {st}")
    out = {}
    for name, note, sql in AGGS:
        received, sent, plan = moved(sql)
        pushed = "worker_partial_agg" in run_plan_verbose(sql)
        med, best, rows = timed(conn, sql, RUNS)
        out[name] = (med, received + sent, pushed, rows)
        say(f"{name:44s} {med:7.2f} s (min {best:.2f})  {human(received + sent):>10s} moved"
            f"  {'partial aggregates on the workers' if pushed else 'rows to the coordinator'}  [{note}]")
    return out


def run_plan_verbose(sql):
    return "\n".join(r[0] for r in run(conn, f"EXPLAIN (VERBOSE, COSTS OFF) {sql}"))


results["old"] = measure_aggs("coordinator aggregation")
if default != OLD:
    run(conn, "ALTER EXTENSION bloomamq UPDATE")
if state_type() == "internal":
    say(f"\nthe installed default version ({default}) keeps an internal aggregate state: "
        "Citus cannot push amq_agg down; nothing more to compare for (a)")
    results["new"] = None
else:
    results["new"] = measure_aggs("pushed down")
    say("\n(a) pushed down against coordinator aggregation")
    say(f"{'aggregate':44s} {'bytes ratio':>12s} {'speedup':>8s}  same bytes")
    for name, _, _ in AGGS:
        o, n = results["old"][name], results["new"][name]
        if o[3] != n[3]:
            say(f"FAIL: {name}: the filters differ between the versions")
            sys.exit(1)
        ratio = o[1] / n[1] if n[1] else float("inf")
        say(f"{name:44s} {ratio:11.1f}x {o[0] / n[0]:7.2f}x  yes")
    say("(bytes ratio: bytes moved by coordinator aggregation / by pushdown; "
        "speedup: its seconds / pushdown's)")

# ---- (b) a semi-join with a side that is not co-located ----
say("\n== (b) semi-join: events of users with a purchase under 10 (purchases is "
    "distributed by purchase id)")
small = "SELECT user_id FROM purchases WHERE amount < 10"
nsmall = run(conn, f"SELECT count(*), count(DISTINCT user_id) FROM ({small}) s")[0]
say(f"the small side: {nsmall[0]:,} rows, {nsmall[1]:,} distinct user ids")
SEMI = [
    ("Citus: user_id IN (SELECT ...)",
     f"SELECT count(*), sum(id) FROM events WHERE user_id IN ({small})"),
    ("filter: user_id <@ (SELECT amq_agg(user_id) ...)",
     f"SELECT count(*), sum(id) FROM events WHERE user_id <@ (SELECT amq_agg(user_id) FROM ({small}) s)"),
    ("filter 0.1%: <@ (SELECT amq_agg(user_id, 0.001) ...)",
     f"SELECT count(*), sum(id) FROM events WHERE user_id <@ (SELECT amq_agg(user_id, 0.001) FROM ({small}) s)"),
]
semi = []
for name, sql in SEMI:
    received, sent, plan = moved(sql)
    med, best, rows = timed(conn, sql, RUNS)
    semi.append((name, med, received, sent, rows[0]))
    say(f"{name:52s} {med:7.2f} s (min {best:.2f})  received {human(received):>10s}  "
        f"sent {human(sent):>10s}  rows {rows[0][0]:,}")
exact = semi[0][4][0]
say(f"\n{'plan':52s} {'bytes':>10s} {'ratio':>7s} {'speedup':>8s} extra rows")
for name, med, received, sent, row in semi:
    if row[0] < exact:
        say(f"FAIL: {name}: {row[0]} rows, fewer than the exact {exact}: a false negative")
        sys.exit(1)
    base = semi[0][2] + semi[0][3]
    say(f"{name:52s} {human(received + sent):>10s} {base / (received + sent):6.1f}x "
        f"{semi[0][1] / med:7.2f}x {row[0] - exact:,} ({100.0 * (row[0] - exact) / exact:.2f}%)")
