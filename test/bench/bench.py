#!/usr/bin/python3
"""bloomamq against its peers, measured in one run on one dataset.

    test/bench/bench.py [N [M]] [--runs R]        (defaults N=10,000,000 M=100,000, R=5)

Needs a running PostgreSQL with bloomamq and hll installed (PGHOST, PGPORT,
PGUSER as for psql); tools/bench sets all that up.  The dataset is the one of
benchlib.py: t_big (N rows: bigint id, int4 id4, text k), t_one (the ids of
t_big's first N/2 rows, one column) and t_small (M keys, half of them in
t_big).  Serial plans, JIT off, but for the parallel figures (2 workers).

Runs every figure once per round, R rounds, so that a disturbance of a shared
machine hits all figures alike, each round in its own order (shuffled, the
same every run), so that no figure always follows the same one: on a virtual
machine, memory that a figure frees goes back to the host within seconds,
and the next figure that touches fresh memory pays for it.  Prints one line
per figure (name, median s, min s, median CPU s of the backend, result),
then ratios of figures of the same run: of the fastest runs, of the medians,
and of the backend's CPU time.
Timing never makes it exit non-zero; a wrong answer (a false negative, a
pre-filtered join that differs from the plain one, a parallel filter that
differs from the serial one) or an SQL error does.
"""
import argparse
import os
import random
import statistics
import sys
import time

import psycopg2

from benchlib import connect, ensure_dataset, ensure_one_column, run

ap = argparse.ArgumentParser(description="bloomamq benchmark against its peers")
ap.add_argument("N", nargs="?", type=int, default=10_000_000, help="rows of t_big")
ap.add_argument("M", nargs="?", type=int, default=100_000, help="keys of t_small")
ap.add_argument("--runs", type=int, default=5, help="runs per figure (median)")
args = ap.parse_args()
N, M, RUNS = args.N, args.M, args.runs
if N < 2 or M < 2 or 2 * N // M < 1:
    sys.exit("bench.py: need N >= M/2 and M >= 2")


def session():
    # after a backend crash the server takes a moment to recover: retry
    for attempt in range(60):
        try:
            c = connect()
            break
        except psycopg2.OperationalError:
            if attempt == 59:
                raise
            time.sleep(1)
    c.autocommit = True
    run(c, "SET max_parallel_workers_per_gather = 0")
    run(c, "SET jit = off")
    return c


conn = session()


def setting(name):
    return run(conn, f"SHOW {name}")[0][0]


# The dataset, rebuilt if absent or of other sizes.
ensure_dataset(conn, N, M)
ensure_one_column(conn, N // 2)
run(conn, "CREATE EXTENSION IF NOT EXISTS hll")
run(conn, "CREATE EXTENSION IF NOT EXISTS bloomamq")

version = run(conn, "SELECT extversion FROM pg_extension WHERE extname = 'bloomamq'")[0][0]
print(f"# N={N} M={M} runs={RUNS} bloomamq {version}; {setting('server_version')}; "
      f"shared_buffers={setting('shared_buffers')} work_mem={setting('work_mem')} "
      f"max_parallel_workers_per_gather={setting('max_parallel_workers_per_gather')} "
      f"jit={setting('jit')}")
med = {}
best = {}
cpu = {}
result = {}
errors = []


def backend_cpu(c):
    """CPU seconds the session's backend has used so far: the scheduler's
    nanoseconds on a CPU (/proc/PID/schedstat), else user + system time in
    clock ticks (10 ms, 3% of a 0.3 s query)."""
    pid = c.get_backend_pid()
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None  # the server is not on this machine


def once(sql):
    """Run sql once: wall seconds, backend CPU seconds (or None), result."""
    c0 = backend_cpu(conn)
    t0 = time.perf_counter()
    out = run(conn, sql)
    wall = time.perf_counter() - t0
    c1 = backend_cpu(conn)
    return wall, (c1 - c0 if c0 is not None and c1 is not None else None), out


# The figures, timed in rounds: each round runs every figure once, so that a
# disturbance of the shared machine hits all figures alike instead of the
# few that happen to run during it.
FIGURES = [
    # Peers: what the executor itself costs per row, hll, PostgreSQL's semi-join.
    ("floor.count_id", "SELECT count(id) FROM t_big"),
    ("floor.count_where_gt", "SELECT count(*) FROM t_big WHERE id > 0"),
    ("floor.count_k", "SELECT count(k) FROM t_big"),
    ("hll.add_agg_bigint", "SELECT hll_cardinality(hll_add_agg(hll_hash_bigint(id))) FROM t_big"),
    ("floor.one_count_id", "SELECT count(id) FROM t_one"),
    ("hll.one_add_agg_bigint",
     "SELECT hll_cardinality(hll_add_agg(hll_hash_bigint(id))) FROM t_one"),
    ("semijoin.in_subquery", "SELECT count(*) FROM t_big WHERE id IN (SELECT id FROM t_small)"),
    # Ours.  The filter is measured, not shipped: octet_length keeps a 12 MB
    # result from being sent to the client inside the timing.
    ("amq.agg_id", "SELECT octet_length(amq_agg(id)::bytea) FROM t_big"),
    ("amq.one_agg_id", "SELECT octet_length(amq_agg(id)::bytea) FROM t_one"),
    ("amq.agg_id_capacity",
     f"SELECT octet_length(amq_agg(id, 0.01, 'blocked', {N})::bytea) FROM t_big"),
    # parallel: 2 workers (and the leader), against the same serial plan;
    # their filters are compared byte for byte after the rounds (untimed)
    ("par.agg_id", "SELECT octet_length(amq_agg(id)::bytea) FROM t_big"),
    ("par.agg_id_serial", "SELECT octet_length(amq_agg(id)::bytea) FROM t_big"),
    ("amq.agg_id_bloom", "SELECT octet_length(amq_agg(id, 0.01, 'bloom')::bytea) FROM t_big"),
    ("amq.agg_k", "SELECT octet_length(amq_agg(k)::bytea) FROM t_big"),
]
STATIC_KINDS = ("fuse", "ribbon", "xor")
FIGURES += [(f"amq.agg_id_{kind}",
             f"SELECT octet_length(amq_agg(id, 0.01, '{kind}')::bytea) FROM t_big")
            for kind in STATIC_KINDS]
FIGURES += [
    ("amq.probe_initplan",
     "SELECT count(*) FROM t_big WHERE (SELECT amq_agg(id) FROM t_small) @> id"),
    ("amq.semijoin_prefiltered",
     "SELECT count(*) FROM t_big WHERE id <@ (SELECT amq_agg(id) FROM t_small) "
     "AND id IN (SELECT id FROM t_small)"),
]

def workers(name):
    """The parallel workers of a figure: 2 for the parallel build, else 0."""
    return 2 if name.startswith("par.") and not name.endswith("_serial") else 0


def with_workers(n, fn):
    """fn() with max_parallel_workers_per_gather = n, set back to 0 after."""
    if n:
        run(conn, f"SET max_parallel_workers_per_gather = {n}")
    try:
        return fn()
    finally:
        if not conn.closed:
            run(conn, "SET max_parallel_workers_per_gather = 0")


# Warm the cache so the first figure does not pay for reading the table.
run(conn, "SELECT count(*) FROM t_big")

walls = {name: [] for name, _ in FIGURES}
cpus = {name: [] for name, _ in FIGURES}
failed = set()
for rnd in range(RUNS):
    order = list(FIGURES)
    random.Random(rnd).shuffle(order)
    for name, sql in order:
        if name in failed:
            continue
        try:
            wall, cpu_s, out = with_workers(workers(name), lambda: once(sql))
        except psycopg2.Error as e:
            # reported once; the run goes on with the next figure
            msg = str(e).strip().splitlines()[0]
            errors.append(f"{name}: {msg}")
            print(f"{name:40s} {'ERROR':>9s} {msg}", flush=True)
            failed.add(name)
            if conn.closed:
                conn = session()  # the server restarted after a crash
            continue
        walls[name].append(wall)
        if cpu_s is not None:
            cpus[name].append(cpu_s)
        result[name] = out[0][0] if out else None
    print(f"# round {rnd + 1} of {RUNS} done", flush=True)

print(f"{'figure':40s} {'median_s':>9s} {'min_s':>9s} {'cpu_s':>9s} result", flush=True)
for name, _ in FIGURES:
    if name in failed or not walls[name]:
        continue
    med[name] = statistics.median(walls[name])
    best[name] = min(walls[name])
    if cpus[name]:
        cpu[name] = statistics.median(cpus[name])
    cpu_txt = f"{cpu[name]:9.4f}" if name in cpu else f"{'n/a':>9s}"
    print(f"{name:40s} {med[name]:9.4f} {min(walls[name]):9.4f} {cpu_txt} {result[name]}",
          flush=True)

# Space at 1% fpr over the N distinct ids.
space = {}
for kind in ("blocked", "bloom", "scalable"):
    name = f"space.{kind}_1pct"
    try:
        nbytes = run(conn, f"SELECT octet_length(amq_agg(id, 0.01, '{kind}')::bytea) "
                           "FROM t_big")[0][0]
    except psycopg2.Error as e:
        errors.append(f"{name}: {str(e).strip().splitlines()[0]}")
        print(f"{name:40s} {'ERROR':>9s}", flush=True)
        if conn.closed:
            conn = session()
        continue
    space[kind] = nbytes * 8 / N
    print(f"{name:40s} {'':9s} {'':9s} {nbytes} bytes, {space[kind]:.2f} bits/key", flush=True)
# the static kinds' sizes are the results of their timed builds
for kind in STATIC_KINDS:
    nbytes = result.get(f"amq.agg_id_{kind}")
    if nbytes is not None:
        space[kind] = nbytes * 8 / N
        print(f"{'space.' + kind + '_1pct':40s} {'':9s} {'':9s} {nbytes} bytes, "
              f"{space[kind]:.2f} bits/key", flush=True)

# Correctness of what was timed: no false negatives, the same join answer,
# the same filter from a parallel plan as from a serial one (md5 compares
# them without shipping 13 MB; it is kept out of the timings, where it added
# about 20 ms to both).
if "par.agg_id" in walls and "par.agg_id" not in failed:
    digest = {}
    for name in ("par.agg_id", "par.agg_id_serial"):
        try:
            digest[name] = with_workers(workers(name), lambda: run(
                conn, "SELECT md5(amq_agg(id)::bytea) FROM t_big")[0][0])
        except psycopg2.Error as e:
            errors.append(f"{name} (md5): {str(e).strip().splitlines()[0]}")
            if conn.closed:
                conn = session()
    if len(digest) == 2 and digest["par.agg_id"] != digest["par.agg_id_serial"]:
        errors.append("WRONG ANSWER: the parallel amq_agg(id) differs from the serial one")
exact = result.get("semijoin.in_subquery")
prefiltered = result.get("amq.semijoin_prefiltered")
probed = result.get("amq.probe_initplan")
if exact is not None and prefiltered is not None and prefiltered != exact:
    errors.append(f"WRONG ANSWER: pre-filtered semi-join counted {prefiltered}, the plain one {exact}")
if exact is not None and probed is not None:
    if probed < exact:
        errors.append(f"WRONG ANSWER: probe passed {probed} rows, fewer than the {exact} "
                      "that match: false negatives")
    else:
        print(f"# probe: {probed} rows passed, {exact} match: measured fpr "
              f"{(probed - exact) / max(N - exact, 1):.4%} (target 1%)")


def ratio(a, b):
    """Ratios of figures a and b: of the fastest runs, of the
    medians, of the backend's median CPU time; None where not measured."""
    return ((best[a] / best[b]) if a in best and b in best else None,
            (med[a] / med[b]) if a in med and b in med else None,
            # CPU time counts in clock ticks (10 ms): too coarse for short figures
            (cpu[a] / cpu[b]) if a in cpu and b in cpu and cpu[b] >= 0.2 else None)


def value(v):
    return (v, None, None)


# Ratios of figures of this run: (name, (fastest, median, cpu))
ratios = [
    ("build: amq_agg(id) / hll_add_agg, t_big", ratio("amq.agg_id", "hll.add_agg_bigint")),
    ("build: amq_agg(id) / hll_add_agg, t_one", ratio("amq.one_agg_id", "hll.one_add_agg_bigint")),
    ("build: amq_agg(id) / count(id), t_big", ratio("amq.agg_id", "floor.count_id")),
    ("build: amq_agg(id) / count(id), t_one", ratio("amq.one_agg_id", "floor.one_count_id")),
    ("build: hll_add_agg / count(id), t_big", ratio("hll.add_agg_bigint", "floor.count_id")),
    ("build: amq_agg(id,..,capacity) / count(id)", ratio("amq.agg_id_capacity", "floor.count_id")),
    ("build: amq_agg(id,'bloom') / count(id)", ratio("amq.agg_id_bloom", "floor.count_id")),
    ("build: amq_agg(k) / count(k)", ratio("amq.agg_k", "floor.count_k")),
] + [
    (f"build: amq_agg(id,'{kind}') / count(id)", ratio(f"amq.agg_id_{kind}", "floor.count_id"))
    for kind in STATIC_KINDS
] + [
    ("parallel: serial / 2 workers (speedup)", ratio("par.agg_id_serial", "par.agg_id")[:2] + (None,)),
    ("probe: f @> id / count WHERE id > 0", ratio("amq.probe_initplan", "floor.count_where_gt")),
    ("semi-join: plain / pre-filtered (speedup)",
     ratio("semijoin.in_subquery", "amq.semijoin_prefiltered")),
] + [
    (f"space: {kind} bits/key at 1%", value(space.get(kind)))
    for kind in ("blocked", "bloom", "scalable") + STATIC_KINDS
]
print()
print(f"{'ratio':44s} {'value':>7s} {'median':>7s} {'cpu':>7s}")


def fmt(x):
    return f"{x:7.2f}" if x is not None else f"{'n/a':>7s}"


for name, (v, vmed, vcpu) in ratios:
    print(f"{name:44s} {fmt(v)} {fmt(vmed)} {fmt(vcpu)}")
print("# value: ratio of the fastest runs (other work on a shared machine only ever adds")
print("# time); median: of the median runs; cpu: of the backend's CPU time (not for the")
print("# parallel figure, whose workers are other processes)")

if errors:
    for e in errors:
        print(f"bench.py: {e}", file=sys.stderr)
    sys.exit(1)
